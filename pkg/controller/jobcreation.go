package controller

import (
	"k8s.io/utils/ptr"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// observeJobCreation observes the Job creation latency of a JobSet when
// the creations of this sync completed the Jobs of its first execution
// attempt. Only the controller that creates the last missing Job observes
// it, so a restarted controller finding every Job there does not; within
// one process a JobSet is observed once (later creations, say after an
// elastic scale-up or a deleted Job, do not count), and a JobSet that was
// already available once is never observed.
func (c *Controller) observeJobCreation(key string, js *jobset.JobSet, jobs *childJobs, created map[string]bool) {
	if !firstAttempt(js) || !allJobsExist(js, jobs, created) || hasAvailabilityHistory(js) {
		return
	}
	start := firstStart(js)
	if start.IsZero() || !c.exp.firstJobCreation(key, js.UID) {
		return
	}
	c.metrics.JobsCreatedLatency(js, since(start, c.clock.Now()))
}

// firstAttempt reports whether the JobSet runs its first execution
// attempt: no restart of the set or of any Job, no resume.
func firstAttempt(js *jobset.JobSet) bool {
	if js.Status.Restarts > 0 || ptr.Deref(js.Status.ExecutionAttempts, 0) > 0 {
		return false
	}
	for _, s := range js.Status.ReplicatedJobsStatus {
		for _, n := range s.JobRestarts {
			if n > 0 {
				return false
			}
		}
	}
	return true
}

// allJobsExist reports whether every Job the spec describes is in the
// cache (not being deleted) or was just created.
func allJobsExist(js *jobset.JobSet, jobs *childJobs, created map[string]bool) bool {
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		for idx := 0; idx < int(replicasOf(rj)); idx++ {
			name := jobName(js.Name, rj.Name, idx)
			if created[name] {
				continue
			}
			if j, ok := jobs.byName[name]; !ok || j.DeletionTimestamp != nil {
				return false
			}
		}
	}
	return true
}

// hasAvailabilityHistory reports whether the JobSet was ever available.
func hasAvailabilityHistory(js *jobset.JobSet) bool {
	s := availabilityFromAnnotations(js.Annotations)
	return s.AvailableSince != nil || s.Uptime > 0 || s.interrupted()
}

// firstStart is when the first attempt began: the creation, or the resume
// of a JobSet created suspended.
func firstStart(js *jobset.JobSet) time.Time {
	start := js.CreationTimestamp.Time
	if c := findCondition(js.Status.Conditions, string(jobset.JobSetSuspended)); c != nil &&
		c.Status == metav1.ConditionFalse && c.LastTransitionTime.After(start) {
		start = c.LastTransitionTime.Time
	}
	return start
}
