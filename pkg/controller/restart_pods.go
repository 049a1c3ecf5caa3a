package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// runningPredecessors returns which of the Job names (none of which exists
// in the cache) still have a running pod: necessarily a pod of an earlier
// Job of that name. Such pods that nobody deleted yet (a pod the Job
// controller created while its Job was being deleted) are deleted here.
func (c *Controller) runningPredecessors(ctx context.Context, js *jobset.JobSet, names map[string]bool) (map[string]bool, error) {
	list, err := c.kube.CoreV1().Pods(js.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: podsOfJobSet(js),
		FieldSelector: "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed),
	})
	if err != nil {
		return nil, wrapf(err, "listing the pods of earlier attempts")
	}
	blocked := map[string]bool{}
	var stray []*corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		name := p.Labels[batchv1.JobNameLabel]
		if !names[name] || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		blocked[name] = true
		if p.DeletionTimestamp == nil {
			stray = append(stray, p)
		}
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
