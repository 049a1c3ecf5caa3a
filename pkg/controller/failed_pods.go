package controller

// Early failure detection. The Job controller marks a Job Failed only after
// it has counted the failed pod, dropped its tracking finalizer, written
// FailureTarget and waited for the Job's other pods to terminate, each step
// at kube-controller-manager's client rate; on a busy cluster that took
// tens of seconds in the restart benchmark. The outcome is known earlier:
//
//   - a FailureTarget condition says the Job will fail, for the reason and
//     with the message its Failed condition will carry;
//   - a Job without a pod failure policy or per-index backoff fails once
//     more of its pods failed than its backoffLimit allows. Every pod that
//     failed on its own (phase Failed, never asked to terminate) is counted
//     by the Job controller, so counting them here can only be lower than
//     its count, never higher.
//
// The controller therefore treats such a Job as failed in the sync that
// sees it, with the condition the Job controller will write. It watches
// only failed pods of JobSets (a field selector), so the cache holds no
// running pods. The same events also wake a restart waiting for the old
// attempt's pods to finish: a deleted pod ends as a failed one.

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller/jobcache"
)

// messageBackoffLimitExceeded is the Job controller's message for the
// BackoffLimitExceeded reason.
const messageBackoffLimitExceeded = "Job has reached the specified backoff limit"

// defaultBackoffLimit is the Job API's default for spec.backoffLimit.
const defaultBackoffLimit = 6

// jobControllerName is the spec.managedBy value of Jobs that
// kube-controller-manager's Job controller drives.
const jobControllerName = "kubernetes.io/job-controller"

// hasPodFailurePolicy stands in the Job cache for a pod failure policy,
// whose rules are not kept: only whether the Job has one is read.
var hasPodFailurePolicy = jobcache.PodFailurePolicy

// byOwnerJob indexes failed pods by the UID of the Job that controls them.
const byOwnerJob = "ownerJob"

// failedPodsFactory is an informer factory for the failed pods of JobSets.
func failedPodsFactory(kube kubernetes.Interface, resync time.Duration) informers.SharedInformerFactory {
	sel := childSelector()
	phase := fields.OneTermEqualSelector("status.phase", string(corev1.PodFailed)).String()
	return informers.NewSharedInformerFactoryWithOptions(kube, resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = sel
			o.FieldSelector = phase
		}),
		informers.WithTransform(trimFailedPod))
}

// failedPodLabelsRead: the only label of a failed pod that is read.
var failedPodLabelsRead = map[string]bool{jobset.JobSetNameKey: true}

// trimFailedPod keeps what failure detection reads: identity, the JobSet
// label, the controlling owner, the deletion timestamp and the phase.
func trimFailedPod(obj interface{}) (interface{}, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              p.Name,
			Namespace:         p.Namespace,
			UID:               p.UID,
			ResourceVersion:   p.ResourceVersion,
			DeletionTimestamp: p.DeletionTimestamp,
			Labels:            keepOnly(p.Labels, failedPodLabelsRead, cacheStrings),
		},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}
	if ref := metav1.GetControllerOf(p); ref != nil {
		out.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	cacheStrings.meta(&out.ObjectMeta)
	return out, nil
}

// failedPodTracker counts, per Job, the cached pods that failed on their own.
type failedPodTracker struct {
	indexer cache.Indexer
}

// failed is called with the JobSet's key and the pod's UID.
func newFailedPodTracker(f informers.SharedInformerFactory, failed func(key string, uid types.UID)) (*failedPodTracker, cache.InformerSynced, error) {
	inf := f.Core().V1().Pods().Informer()
	if err := inf.AddIndexers(cache.Indexers{byOwnerJob: func(obj interface{}) ([]string, error) {
		if m, ok := obj.(metav1.Object); ok {
			if ref := metav1.GetControllerOf(m); ref != nil && ref.Kind == "Job" {
				return []string{string(ref.UID)}, nil
			}
		}
		return nil, nil
	}}); err != nil {
		return nil, nil, err
	}
	wake := func(obj interface{}) {
		if p, ok := obj.(*corev1.Pod); ok {
			if name := p.Labels[jobset.JobSetNameKey]; name != "" {
				failed(p.Namespace+"/"+name, p.UID)
			}
		}
	}
	// A pod that turns Failed is added to this cache; that is the event.
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: wake}); err != nil {
		return nil, nil, err
	}
	return &failedPodTracker{indexer: inf.GetIndexer()}, inf.HasSynced, nil
}

// selfFailed is how many cached pods of the Job failed without having been
// deleted.
func (t *failedPodTracker) selfFailed(job types.UID) int {
	objs, err := t.indexer.ByIndex(byOwnerJob, string(job))
	if err != nil {
		return 0
	}
	n := 0
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodFailed {
			n++
		}
	}
	return n
}

// earlyFailure returns the Failed condition a Job that has not failed yet
// is bound to get, or nil.
func earlyFailure(job *batchv1.Job, selfFailed func(types.UID) int, now metav1.Time) *batchv1.JobCondition {
	if job.DeletionTimestamp != nil || jobFinished(job) != "" {
		return nil
	}
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobFailureTarget:
			return &batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
				Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime}
		case batchv1.JobSuccessCriteriaMet:
			return nil
		}
	}
	if selfFailed == nil || job.Spec.PodFailurePolicy != nil || job.Spec.BackoffLimitPerIndex != nil ||
		jobSuspended(job) || ptr.Deref(job.Spec.ManagedBy, jobControllerName) != jobControllerName {
		return nil
	}
	if selfFailed(job.UID) <= int(ptr.Deref(job.Spec.BackoffLimit, defaultBackoffLimit)) {
		return nil
	}
	return &batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
		Reason: batchv1.JobReasonBackoffLimitExceeded, Message: messageBackoffLimitExceeded, LastTransitionTime: now}
}

// withEarlyFailures returns owned with every Job that is bound to fail
// replaced by a copy that carries its Failed condition. The cache's objects
// are not changed.
func (c *Controller) withEarlyFailures(owned map[string]*batchv1.Job) map[string]*batchv1.Job {
	var selfFailed func(types.UID) int
	if c.failedPods != nil {
		selfFailed = c.failedPods.selfFailed
	}
	now := metav1.NewTime(c.clock.Now())
	var out map[string]*batchv1.Job
	for name, job := range owned {
		cond := earlyFailure(job, selfFailed, now)
		if cond == nil {
			continue
		}
		if out == nil {
			out = make(map[string]*batchv1.Job, len(owned))
			for n, j := range owned {
				out[n] = j
			}
		}
		cp := job.DeepCopy()
		cp.Status.Conditions = append(cp.Status.Conditions, *cond)
		out[name] = cp
	}
	if out == nil {
		return owned
	}
	return out
}
