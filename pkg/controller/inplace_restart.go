package controller

// In-place restart (restartStrategy InPlaceRestart). An agent in every pod
// (cmd/jobset-inplace-agent) writes the restart attempt its pod has reached
// on the pod annotation jobset.sigs.k8s.io/in-place-restart-attempt. The
// controller reads those attempts and writes two status fields the agents
// watch:
//
//   - previousInPlaceRestartAttempt: once the pods disagree (a pod's
//     container failed and its agent came back one attempt ahead), it becomes
//     the newest attempt minus one; every agent at or below it exits so that
//     its pod's containers restart in place.
//   - currentInPlaceRestartAttempt: once every expected pod reports the same
//     attempt, it becomes that attempt; the agents at it lift their barrier.
//
// An agent in a new pod (first start, scale-up, a replacement, a resume)
// joins the attempt under way instead of starting a new one, so that only a
// container that really restarted moves the attempts on.
//
// The budget is the JobSet's one maxRestarts: the in-place attempt plus the
// Job recreations that count must stay within it, and a container restarted
// more often than it fails the JobSet with ReachedMaxRestarts. A pod being
// deleted (scale-down, suspend, eviction, a RestartJob rule) only leaves: the
// Job controller replaces it if it is still needed. A pod that failed
// cannot restart in place: the JobSet then falls back to recreating its
// Jobs, as under Recreate.

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// InPlaceRestartLabel marks the pods of JobSets that restart in place, so
// that the controller watches only those pods.
const InPlaceRestartLabel = "jobset.sigs.k8s.io/in-place-restart"

const (
	reasonInPlaceRestart         = "InPlaceRestart"
	reasonInPlaceRestartComplete = "InPlaceRestartComplete"
	reasonInPlacePodLost         = "InPlaceRestartPodLost"
	reasonInPlaceBadAttempt      = "InvalidInPlaceRestartAttempt"
)

// inPlaceEnabled reports whether the controller tracks in-place restarts
// for js. The disable-in-place-restart annotation only takes the agents'
// barrier away: the attempts are still tracked and maxRestarts still ends a
// crash-looping JobSet.
func inPlaceEnabled(js *jobset.JobSet) bool {
	return js.Spec.FailurePolicy != nil && js.Spec.FailurePolicy.RestartStrategy == jobset.InPlaceRestart
}

// applyInPlaceLabel labels the pod template of a Job whose JobSet restarts
// in place.
func applyInPlaceLabel(js *jobset.JobSet, job *batchv1.Job) {
	if js.Spec.FailurePolicy != nil && js.Spec.FailurePolicy.RestartStrategy == jobset.InPlaceRestart {
		job.Spec.Template.Labels = mergeInto(job.Spec.Template.Labels, map[string]string{InPlaceRestartLabel: "true"})
	}
}

// inPlacePodsFactory is an informer factory for the labelled pods, trimmed
// to what the in-place logic reads.
func inPlacePodsFactory(kube kubernetes.Interface, resync time.Duration) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(kube, resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = InPlaceRestartLabel + "=true" }),
		informers.WithTransform(trimInPlacePod))
}

// trimInPlacePod keeps a pod's metadata (without managed fields and with only
// the attempt annotation), its phase and its containers' restart counts.
func trimInPlacePod(obj interface{}) (interface{}, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	p.ManagedFields = nil
	if v, ok := p.Annotations[jobset.InPlaceRestartAttemptKey]; ok {
		p.Annotations = map[string]string{jobset.InPlaceRestartAttemptKey: v}
	} else {
		p.Annotations = nil
	}
	p.Spec = corev1.PodSpec{NodeName: p.Spec.NodeName}
	p.Status = corev1.PodStatus{
		Phase:                 p.Status.Phase,
		Reason:                p.Status.Reason,
		InitContainerStatuses: trimStatuses(p.Status.InitContainerStatuses),
		ContainerStatuses:     trimStatuses(p.Status.ContainerStatuses),
	}
	return p, nil
}

func trimStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, s := range in {
		out[i] = corev1.ContainerStatus{Name: s.Name, RestartCount: s.RestartCount, Ready: s.Ready}
	}
	return out
}

// inPlaceTracker lists the labelled pods of a JobSet and requeues the JobSet
// when one of them changes.
type inPlaceTracker struct {
	lister corelisters.PodLister
}

func newInPlaceTracker(f informers.SharedInformerFactory, enqueue func(string)) (*inPlaceTracker, cache.InformerSynced, error) {
	inf := f.Core().V1().Pods()
	handler := func(obj interface{}) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			if name := p.Labels[jobset.JobSetNameKey]; name != "" {
				enqueue(p.Namespace + "/" + name)
			}
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: handler,
		UpdateFunc: func(o, n interface{}) {
			op, ok1 := o.(*corev1.Pod)
			np, ok2 := n.(*corev1.Pod)
			if ok1 && ok2 && op.ResourceVersion == np.ResourceVersion {
				return // periodic resync
			}
			handler(n)
		},
		DeleteFunc: handler,
	}); err != nil {
		return nil, nil, err
	}
	return &inPlaceTracker{lister: inf.Lister()}, inf.Informer().HasSynced, nil
}

// podsOf returns the cached pods of the current Job attempt of js.
func (t *inPlaceTracker) podsOf(js *jobset.JobSet) ([]*corev1.Pod, error) {
	sel := labels.SelectorFromSet(labels.Set{jobset.JobSetNameKey: js.Name, InPlaceRestartLabel: "true"})
	all, err := t.lister.Pods(js.Namespace).List(sel)
	if err != nil {
		return nil, err
	}
	want := strconv.Itoa(int(js.Status.Restarts))
	var out []*corev1.Pod
	for _, p := range all {
		if p.Labels[jobset.JobSetUIDKey] == string(js.UID) && p.Labels[jobset.RestartsKey] == want {
			out = append(out, p)
		}
	}
	return out, nil
}

// expectedInPlacePods is how many pods report attempts when the JobSet runs:
// replicas × parallelism of every replicatedJob (validation makes
// completions equal parallelism).
func expectedInPlacePods(js *jobset.JobSet) int {
	n := 0
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		n += int(replicasOf(rj)) * int(ptr.Deref(rj.Template.Spec.Parallelism, 1))
	}
	return n
}

// podLost reports whether a pod that nobody deleted can no longer restart
// in place.
func podLost(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodFailed
}

// stayingPods leaves out the pods being deleted: they take no part in the
// attempts, whatever phase they end in.
func stayingPods(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// maxContainerRestarts is the highest restart count of any container.
func maxContainerRestarts(pods []*corev1.Pod) int32 {
	var m int32
	for _, p := range pods {
		for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
			for _, s := range list {
				m = max(m, s.RestartCount)
			}
		}
	}
	return m
}

// podAttempts returns the attempts the pods report; pods whose agent has not
// reported yet are left out.
func podAttempts(pods []*corev1.Pod) ([]int32, error) {
	var out []int32
	for _, p := range pods {
		raw, ok := p.Annotations[jobset.InPlaceRestartAttemptKey]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(raw, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("pod %s: annotation %s is %q, want a non-negative integer", p.Name, jobset.InPlaceRestartAttemptKey, raw)
		}
		out = append(out, int32(n))
	}
	return out, nil
}

// usedRestarts is how much of maxRestarts is used once the pods reach
// attempt: every in-place restart moves the attempts on by one; a Job
// recreation does not (its new pods join the attempt) and counts on its own
// when it counts toward maxRestarts.
func usedRestarts(status *jobset.JobSetStatus, attempt int32) int64 {
	return int64(attempt) + restartsCountedTowardsMax(status)
}

// inPlaceDecision is what one look at the pods decides.
type inPlaceDecision struct {
	fail       bool   // ReachedMaxRestarts
	recreate   bool   // a pod failed: recreate the Jobs
	lostPod    string // the failed pod, for the message
	current    *int32 // new currentInPlaceRestartAttempt, nil: unchanged
	previous   *int32 // new previousInPlaceRestartAttempt, nil: unchanged
	badAttempt error
}

// decideInPlace is the pure core of the in-place logic.
func decideInPlace(js *jobset.JobSet, pods []*corev1.Pod) inPlaceDecision {
	maxRestarts := int64(js.Spec.FailurePolicy.MaxRestarts)
	st := &js.Status
	pods = stayingPods(pods)
	// A container that fails faster than the pods can agree on an attempt
	// would otherwise restart forever.
	if int64(maxContainerRestarts(pods)) > maxRestarts {
		return inPlaceDecision{fail: true}
	}
	attempts, err := podAttempts(pods)
	if err != nil {
		return inPlaceDecision{badAttempt: err}
	}
	var top int32
	if len(attempts) > 0 {
		top = slices.Max(attempts)
	}
	if usedRestarts(st, top) > maxRestarts {
		return inPlaceDecision{fail: true}
	}
	for _, p := range pods {
		if podLost(p) {
			if usedRestarts(st, ptr.Deref(st.CurrentInPlaceRestartAttempt, 0)) >= maxRestarts {
				return inPlaceDecision{fail: true}
			}
			return inPlaceDecision{recreate: true, lostPod: p.Name}
		}
	}
	var d inPlaceDecision
	if len(attempts) == expectedInPlacePods(js) && len(pods) == len(attempts) && allEqual(attempts) {
		if st.CurrentInPlaceRestartAttempt == nil || *st.CurrentInPlaceRestartAttempt != top {
			d.current = ptr.To(top)
		}
		return d
	}
	if len(attempts) == 0 || top == 0 {
		return d // the first start: agents still reporting
	}
	prev := top - 1
	if st.PreviousInPlaceRestartAttempt == nil || *st.PreviousInPlaceRestartAttempt < prev {
		d.previous = ptr.To(prev)
	}
	return d
}

func allEqual(v []int32) bool {
	for _, x := range v {
		if x != v[0] {
			return false
		}
	}
	return len(v) > 0
}

// syncInPlaceRestart applies decideInPlace to the sync's status. It runs
// after the rest of a running JobSet's sync; a restart or failure decided
// there wins.
func (c *Controller) syncInPlaceRestart(s *syncState, cachedRestarts int32, now metav1.Time) error {
	js := s.js
	if c.inplace == nil || !inPlaceEnabled(js) || finished(js) || ptr.Deref(js.Spec.Suspend, false) ||
		js.Status.Restarts != cachedRestarts {
		return nil
	}
	pods, err := c.inplace.podsOf(js)
	if err != nil {
		return err
	}
	d := decideInPlace(js, pods)
	switch {
	case d.badAttempt != nil:
		s.eventf(corev1.EventTypeWarning, reasonInPlaceBadAttempt, "%v", d.badAttempt)
	case d.fail:
		s.setFailed(reasonReachedMaxRestarts, messageReachedMaxRestarts, now)
		s.record(func(m Metrics) { m.Failed(js, reasonReachedMaxRestarts) })
	case d.recreate:
		// As the RestartJobSet action: the next sync deletes the Jobs of
		// this attempt and creates their successors.
		msg := fmt.Sprintf("pod %s failed and cannot restart in place; recreating the Jobs", d.lostPod)
		js.Status.Restarts++
		js.Status.RestartsCountTowardsMax++
		s.newExecutionAttempt(RestartReasonFailure)
		s.eventf(corev1.EventTypeWarning, reasonInPlacePodLost, "%s", msg)
		s.setCondition(conditionRestartingJobSet, metav1.ConditionTrue, reasonInPlacePodLost, msg, corev1.EventTypeWarning, now)
		s.restartStartup(now)
		s.record(func(m Metrics) { m.Restarted(js, RestartReasonFailure) })
	default:
		if d.previous != nil {
			js.Status.PreviousInPlaceRestartAttempt = d.previous
			// A new in-place restart begins. It is not an execution
			// attempt (as upstream counts them): the pods and their
			// execution-attempt annotation stay; the in-place attempt
			// fields count it.
			s.eventf(corev1.EventTypeWarning, reasonInPlaceRestart, "restarting every pod in place (attempt %d)", *d.previous+1)
			s.record(func(m Metrics) { m.Restarted(js, RestartReasonFailure) })
		}
		if d.current != nil {
			first := js.Status.CurrentInPlaceRestartAttempt == nil
			js.Status.CurrentInPlaceRestartAttempt = d.current
			if !first {
				s.eventf(corev1.EventTypeNormal, reasonInPlaceRestartComplete, "every pod reached in-place restart attempt %d", *d.current)
			}
		}
	}
	return nil
}
