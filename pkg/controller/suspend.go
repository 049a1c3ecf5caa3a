package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/podresources"
)

// hasRun reports whether the JobSet ever ran: it has Jobs, restarted, was
// resumed before, or counted an execution attempt. A JobSet created
// suspended that never ran gets no children until its first resume, and
// that first resume does not count as a new execution attempt.
func hasRun(js *jobset.JobSet, jobs *childJobs) bool {
	if len(jobs.byName) > 0 || js.Status.Restarts > 0 || ptr.Deref(js.Status.ExecutionAttempts, 0) > 0 {
		return true
	}
	c := findCondition(js.Status.Conditions, string(jobset.JobSetSuspended))
	return c != nil && c.Status == metav1.ConditionFalse
}

// suspendJobs suspends every active Job that still runs.
func (c *Controller) suspendJobs(ctx context.Context, s *syncState, active []*batchv1.Job, now metav1.Time) error {
	var todo []*batchv1.Job
	for _, j := range active {
		if !jobSuspended(j) {
			todo = append(todo, j)
		}
	}
	var mu sync.Mutex
	var errs []error
	c.parallel(len(todo), func(i int) {
		err := c.patchJob(ctx, todo[i], map[string]any{"spec": map[string]any{"suspend": true}})
		if err != nil {
			mu.Lock()
			errs = append(errs, wrapf(err, "suspending Job %s", todo[i].Name))
			mu.Unlock()
		}
	})
	s.setCondition(string(jobset.JobSetSuspended), metav1.ConditionTrue, reasonSuspended, messageSuspended, corev1.EventTypeNormal, now)
	s.settleRestarting(reasonRestartingSuspended, messageRestartingSuspended, now)
	return errors.Join(errs...)
}

// resumeJobs resumes the suspended active Jobs whose replicatedJob may
// start, in startup order.
func (c *Controller) resumeJobs(ctx context.Context, js *jobset.JobSet, active []*batchv1.Job) error {
	allowed := map[string]*jobset.ReplicatedJob{}
	for i := range js.Spec.ReplicatedJobs {
		if mayStart(js, i) {
			allowed[js.Spec.ReplicatedJobs[i].Name] = &js.Spec.ReplicatedJobs[i]
		}
	}
	var todo []*batchv1.Job
	for _, j := range active {
		if jobSuspended(j) && allowed[j.Labels[jobset.ReplicatedJobNameKey]] != nil {
			todo = append(todo, j)
		}
	}
	var mu sync.Mutex
	var errs []error
	c.parallel(len(todo), func(i int) {
		rj := allowed[todo[i].Labels[jobset.ReplicatedJobNameKey]]
		if err := c.resumeJob(ctx, js, rj, todo[i]); err != nil {
			mu.Lock()
			errs = append(errs, wrapf(err, "resuming Job %s", todo[i].Name))
			mu.Unlock()
		}
	})
	return errors.Join(errs...)
}

// resumeJob follows Kueue's contract: clear a started Job's startTime
// through its status, carry the template's scheduling edits into the Job,
// then unsuspend it, all with the current execution attempt.
func (c *Controller) resumeJob(ctx context.Context, js *jobset.JobSet, rj *jobset.ReplicatedJob, cached *batchv1.Job) error {
	jobs := c.kube.BatchV1().Jobs(cached.Namespace)
	// The cache holds trimmed Jobs; edit the full object.
	job, err := jobs.Get(ctx, cached.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if job.UID != cached.UID || !jobSuspended(job) {
		return nil
	}
	if job.Status.StartTime != nil {
		job.Status.StartTime = nil
		if job, err = jobs.UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	resized := applyResumeEdits(js, rj, job)
	_, err = jobs.Update(ctx, job, metav1.UpdateOptions{})
	if err != nil && resized && apierrors.IsInvalid(err) {
		// The Job stays suspended; the sync retries with backoff.
		c.warn(js, reasonFailedResourcePropagation, fmt.Errorf("Job %s: the new container resources could not be applied: %w", job.Name, err))
	}
	return err
}

// applyResumeEdits merges the replicatedJob template's labels, annotations,
// nodeSelector, tolerations and schedulingGates into a suspended Job, sets
// its containers' resource requests and limits to the template's, stamps
// the execution attempt and unsuspends it. It reports whether the
// resources changed.
func applyResumeEdits(js *jobset.JobSet, rj *jobset.ReplicatedJob, job *batchv1.Job) (resized bool) {
	tmpl := &rj.Template.Spec.Template
	pod := &job.Spec.Template
	resized = podresources.Copy(pod.Spec.InitContainers, tmpl.Spec.InitContainers)
	resized = podresources.Copy(pod.Spec.Containers, tmpl.Spec.Containers) || resized
	pod.Labels = mergeInto(pod.Labels, tmpl.Labels)
	pod.Annotations = mergeInto(pod.Annotations, tmpl.Annotations)
	if len(tmpl.Spec.NodeSelector) > 0 {
		pod.Spec.NodeSelector = mergeInto(pod.Spec.NodeSelector, tmpl.Spec.NodeSelector)
	}
	for _, t := range tmpl.Spec.Tolerations {
		if !containsToleration(pod.Spec.Tolerations, t) {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
		}
	}
	for _, g := range tmpl.Spec.SchedulingGates {
		if !containsGate(pod.Spec.SchedulingGates, g.Name) {
			pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, g)
		}
	}
	stamp := map[string]string{jobset.ExecutionAttemptKey: strconv.Itoa(int(ptr.Deref(js.Status.ExecutionAttempts, 0)))}
	if rev := js.Status.CurrentRevision; rev != "" {
		// The resume adopted this revision; its only differences from the
		// Job's are the scheduling fields merged above.
		stamp[jobset.TemplateRevisionKey] = rev
	}
	job.Annotations = mergeInto(job.Annotations, stamp)
	pod.Annotations = mergeInto(pod.Annotations, stamp)
	job.Spec.Suspend = ptr.To(false)
	return resized
}

func containsToleration(list []corev1.Toleration, t corev1.Toleration) bool {
	for i := range list {
		if list[i].MatchToleration(&t) && list[i].Value == t.Value && ptr.Equal(list[i].TolerationSeconds, t.TolerationSeconds) {
			return true
		}
	}
	return false
}

func containsGate(list []corev1.PodSchedulingGate, name string) bool {
	for _, g := range list {
		if g.Name == name {
			return true
		}
	}
	return false
}
