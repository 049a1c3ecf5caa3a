package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// A restart replaces the Jobs of the old attempt by Jobs of the same names,
// whose pods take the same hostnames. Upstream deletes the old Jobs in the
// foreground and creates a new Job once the old one is gone: the garbage
// collector removes the Job only after its pods, so a new pod never runs
// beside an old one of the same hostname. That wait is paced by
// kube-controller-manager (the garbage collector deleting the pods and
// dropping the Job's finalizer, the Job controller dropping the pods'
// finalizers, all at its client rate).
//
// With the Recreate strategy this controller deletes the old Jobs in the
// background and their pods itself, and creates a Job of the new attempt
// as soon as no pod of that name's earlier Jobs is still running (phase
// neither Succeeded nor Failed): a finished pod runs nothing, whether or not
// its object is gone. BlockingRecreate keeps the foreground deletion and
// its wait for every old Job to be gone.

// restartPropagation is how Jobs of a superseded attempt are deleted.
func restartPropagation(js *jobset.JobSet) metav1.DeletionPropagation {
	if js.Spec.FailurePolicy != nil && js.Spec.FailurePolicy.RestartStrategy == jobset.BlockingRecreate {
		return metav1.DeletePropagationForeground
	}
	return metav1.DeletePropagationBackground
}

const (
	// The wait for old pods to finish is polled (pods are not cached):
	// often at first, when kubelets finish a deleted pod within a second,
	// less often while pods use a long termination grace period.
	minOldPodRetry = 100 * time.Millisecond
	maxOldPodRetry = 2 * time.Second
)

// oldPodRetry is how soon to look again for running old pods, growing
// with the time since the restart began.
func oldPodRetry(js *jobset.JobSet, now time.Time) time.Duration {
	d := minOldPodRetry
	if c := findCondition(js.Status.Conditions, conditionRestartingJobSet); c != nil && c.Status == metav1.ConditionTrue {
		d = max(d, now.Sub(c.LastTransitionTime.Time)/4)
	}
	return min(d, maxOldPodRetry)
}

// jobAttempt is the attempt of a Job to create, as its restart-attempt
// and job-restart-attempt labels will say.
type jobAttempt struct {
	restarts, jobRestarts int32
}

// runningPredecessors returns which of the Jobs to create (by name; none of
// them is in the cache) still have a running pod: necessarily a pod of an
// earlier Job of that name, or of a Job of this attempt that the cache does
// not show yet. Pods of earlier Jobs that nobody deleted yet (a pod the Job
// controller created while its Job was being deleted) are deleted here;
// pods of this attempt are left alone and only hold their name back.
// Between lists the last one's answer stands while the failed-pod events
// show no name cleared (predecessor_wait.go).
func (c *Controller) runningPredecessors(ctx context.Context, key string, js *jobset.JobSet, want map[string]jobAttempt) (map[string]bool, error) {
	attempt := floorOf(&js.Status)
	now := c.clock.Now()
	if c.waits.blocked(key, attempt, now, want) {
		all := make(map[string]bool, len(want))
		for n := range want {
			all[n] = true
		}
		return all, nil
	}
	list, err := c.listPods(ctx, js.Namespace, metav1.ListOptions{
		LabelSelector: predecessorSelector(js, want),
		FieldSelector: "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed),
	})
	if err != nil {
		return nil, wrapf(err, "listing the pods of earlier attempts")
	}
	blocked := map[string]bool{}
	running := map[types.UID]string{}
	var stray []*metav1.PartialObjectMetadata
	current := 0
	for i := range list.Items {
		p := &list.Items[i]
		name := p.Labels[batchv1.JobNameLabel]
		job, ok := want[name]
		if !ok {
			continue
		}
		blocked[name] = true
		running[p.UID] = name
		if !ofEarlierJob(p.Labels, job) {
			current++
			continue
		}
		if p.DeletionTimestamp == nil {
			stray = append(stray, p)
		}
	}
	if len(blocked) > 0 && len(stray) == 0 && c.failedPods != nil {
		// Its events strike the pods off. A stray deleted here may go
		// without failing first: the next sync looks again.
		c.waits.record(key, attempt, now, running)
	} else {
		c.waits.forget(key)
	}
	if current > 0 {
		klog.FromContext(ctx).V(2).Info("Pods of Jobs of this attempt that the cache does not show yet", "pods", current)
	}
	var mu sync.Mutex
	var errs []error
	c.parallel(len(stray), func(i int) {
		if err := c.deletePod(ctx, js.Namespace, stray[i].Name, stray[i].UID); err != nil {
			mu.Lock()
			errs = append(errs, wrapf(err, "deleting pod %s of an earlier attempt", stray[i].Name))
			mu.Unlock()
		}
	})
	return blocked, errors.Join(errs...)
}

// ofEarlierJob reports whether a pod (by its labels) named after a Job
// (batch.kubernetes.io/job-name) was made for an earlier Job of that name
// than job, by the attempt labels that every child Job passes to its pods:
// its restart-attempt is below the Job's, or equal with a lower
// job-restart-attempt (a per-Job restart). A pod of the Job's own attempt
// belongs to a Job already created whose event has not reached the cache;
// deleting it would fail that Job, and with it the attempt. A pod without a
// restart-attempt label counts as earlier; one without a
// job-restart-attempt label as of its restart-attempt's first Job (JobSets
// created by a controller that did not set it).
func ofEarlierJob(podLabels map[string]string, job jobAttempt) bool {
	podAttempt, ok := intLabel(podLabels, jobset.RestartsKey)
	if !ok {
		return true
	}
	if podAttempt != job.restarts {
		return podAttempt < job.restarts
	}
	podRestarts, _ := intLabel(podLabels, jobset.JobRestartsKey)
	return podRestarts < job.jobRestarts
}

// maxNamesInSelector bounds the size of the Job names that
// predecessorSelector puts in a selector, so that the request's URL stays
// short enough for the proxies in front of an API server (a few KiB).
const maxNamesInSelector = 4 << 10

// predecessorSelector selects the pods of the JobSet's Jobs of the given
// names, or, when the names do not fit in maxNamesInSelector, all the
// JobSet's pods (runningPredecessors matches the names either way). The
// list is repeated every few seconds while an old pod terminates, and once
// the new attempt runs most of the JobSet's pods are its own: naming the
// Jobs keeps them out of the answer. kube-apiserver has put the Job's name
// in batch.kubernetes.io/job-name on its pods since Kubernetes 1.27.
func predecessorSelector(js *jobset.JobSet, names map[string]jobAttempt) string {
	all := podsOfJobSet(js)
	size := 0
	values := make([]string, 0, len(names))
	for n := range names {
		size += len(n) + 1
		values = append(values, n)
	}
	if size > maxNamesInSelector {
		return all
	}
	byName, err := labels.NewRequirement(batchv1.JobNameLabel, selection.In, values)
	if err != nil {
		return all // a name that is no label value; runningPredecessors matches the names
	}
	return all + "," + byName.String()
}
