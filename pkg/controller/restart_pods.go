package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
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
	// Besides its watch's events (old_pods.go), the wait for old pods
	// looks again on a timer: often at first, when kubelets finish a
	// deleted pod within a second, less often while pods use a long
	// termination grace period. A look reads the watched pods; it lists
	// nothing.
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
// The pods come from the JobSet's watch of them (old_pods.go).
func (c *Controller) runningPredecessors(ctx context.Context, key string, js *jobset.JobSet, want map[string]jobAttempt) (map[string]bool, error) {
	pods, err := c.oldPods.pods(ctx, key, js, want)
	if err != nil {
		return nil, wrapf(err, "listing the pods of earlier attempts")
	}
	blocked := map[string]bool{}
	var stray []*metav1.PartialObjectMetadata
	current := 0
	for name, job := range want {
		n, undeleted := pods.running(name)
		if n == 0 {
			continue
		}
		blocked[name] = true
		for _, p := range undeleted {
			if ofEarlierJob(p.Labels, job) {
				stray = append(stray, p)
			} else {
				current++
			}
		}
	}
	if len(blocked) == 0 {
		c.oldPods.stop(key)
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
// names, and returns the names; when they do not fit in
// maxNamesInSelector, it selects all the JobSet's pods, and returns no
// names (runningPredecessors matches the names either way). Once the new
// attempt runs most of the JobSet's pods are its own: naming the Jobs
// keeps them out of the wait's list and watch. kube-apiserver has put the
// Job's name in batch.kubernetes.io/job-name on its pods since Kubernetes
// 1.27.
func predecessorSelector(js *jobset.JobSet, want map[string]jobAttempt) (string, map[string]bool) {
	all := podsOfJobSet(js)
	size := 0
	values := make([]string, 0, len(want))
	names := make(map[string]bool, len(want))
	for n := range want {
		size += len(n) + 1
		values = append(values, n)
		names[n] = true
	}
	if size > maxNamesInSelector {
		return all, nil
	}
	byName, err := labels.NewRequirement(batchv1.JobNameLabel, selection.In, values)
	if err != nil {
		return all, nil // a name that is no label value; runningPredecessors matches the names
	}
	return all + "," + byName.String(), names
}
