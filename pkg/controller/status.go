package controller

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// Condition types, reasons and messages, as upstream JobSet writes them.
const (
	// conditionRestartingJobSet is not (yet) among the API's condition type
	// constants; its value follows upstream.
	conditionRestartingJobSet = "RestartingJobSet"

	reasonAllJobsCompleted  = "AllJobsCompleted"
	messageAllJobsCompleted = "jobset completed successfully"

	reasonFailedJobs  = "FailedJobs"
	messageFailedJobs = "jobset failed due to one or more job failures"

	reasonReachedMaxRestarts  = "ReachedMaxRestarts"
	messageReachedMaxRestarts = "jobset failed due to reaching max number of restarts"

	reasonFailJobSetAction  = "FailJobSetFailurePolicyAction"
	messageFailJobSetAction = "applying FailJobSet failure policy action"

	reasonRestartJobSetAction  = "RestartJobSetFailurePolicyAction"
	messageRestartJobSetAction = "applying RestartJobSet failure policy action"

	reasonRestartJobSetIgnoreMaxAction  = "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction"
	messageRestartJobSetIgnoreMaxAction = "applying RestartJobSetAndIgnoreMaxRestarts failure policy action"

	reasonRestartJobAction  = "RestartJobFailurePolicyAction"
	messageRestartJobAction = "applying RestartJob failure policy action"

	reasonRestartJobIgnoreMaxAction  = "RestartJobAndIgnoreMaxRestartsFailurePolicyAction"
	messageRestartJobIgnoreMaxAction = "applying RestartJobAndIgnoreMaxRestarts failure policy action"

	reasonSuspended  = "SuspendedJobs"
	messageSuspended = "jobset is suspended"
	reasonResumed    = "ResumeJobs"
	messageResumed   = "jobset is resumed"

	reasonInOrderInProgress  = "InOrderStartupPolicyInProgress"
	messageInOrderInProgress = "in order startup policy is in progress"
	reasonInOrderCompleted   = "InOrderStartupPolicyCompleted"
	messageInOrderCompleted  = "in order startup policy has completed"

	reasonRestartingDefault        = "DefaultFailurePolicy"
	reasonRestartingRuleFormat     = "FailurePolicy_%s"
	reasonRestartingJobsReady      = "JobsReady"
	messageRestartingJobsReady     = "all jobs are ready"
	reasonRestartingJobSetFailed   = "JobSetFailed"
	messageRestartingJobSetFailed  = "jobset failed"
	reasonRestartingJobSetComplete = "JobSetCompleted"
	messageRestartingJobSetDone    = "jobset completed successfully"
	reasonRestartingSuspended      = "JobSetSuspended"
	messageRestartingSuspended     = "jobset is suspended"

	// Event-only reasons.
	reasonJobCreationFailed     = "JobCreationFailed"
	reasonServiceCreationFailed = "HeadlessServiceCreationFailed"
	reasonPVCCreationFailed     = "PVCCreationFailed"
	// Upstream's KEP-1150 reason: a resume could not carry the template's
	// new container resources into a Job.
	reasonFailedResourcePropagation = "FailedResourcePropagation"
)

// withFirstFailedJob appends the first failed Job to a message as upstream
// does.
func withFirstFailedJob(msg, job string) string {
	return fmt.Sprintf("%s (first failed job: %s)", msg, job)
}

// event is emitted only after the status write of the sync succeeded.
type event struct {
	eventType string
	reason    string
	message   string
}

// syncState carries the status being built during one sync.
type syncState struct {
	js     *jobset.JobSet // deep copy; js.Status is the new status
	events []event
	// recorded are metric updates that, like events, count only once the
	// status write that carries them succeeded: a conflicting or failed
	// write is retried and must not count twice.
	recorded []func(Metrics)
	// beside holds writes running next to the Job creates.
	beside sideWrites
}

// record queues a metric update for after the status write.
func (s *syncState) record(fn func(Metrics)) {
	s.recorded = append(s.recorded, fn)
}

// newExecutionAttempt starts a new execution attempt for reason (one of
// the RestartReason constants) and counts it once the status write
// succeeded.
func (s *syncState) newExecutionAttempt(reason string) {
	s.js.Status.ExecutionAttempts = ptr.To(ptr.Deref(s.js.Status.ExecutionAttempts, 0) + 1)
	js := s.js
	s.record(func(m Metrics) { m.ExecutionAttemptStarted(js, reason) })
}

func (s *syncState) eventf(eventType, reason, format string, args ...any) {
	s.events = append(s.events, event{eventType: eventType, reason: reason, message: fmt.Sprintf(format, args...)})
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func conditionTrue(conds []metav1.Condition, t string) bool {
	c := findCondition(conds, t)
	return c != nil && c.Status == metav1.ConditionTrue
}

// setCondition sets a condition and queues an event when it changed. The
// transition time moves only when the status changes.
func (s *syncState) setCondition(t string, status metav1.ConditionStatus, reason, message, eventType string, now metav1.Time) bool {
	if !s.putCondition(t, status, reason, message, now) {
		return false
	}
	s.events = append(s.events, event{eventType: eventType, reason: reason, message: message})
	return true
}

// putCondition is setCondition without the event.
func (s *syncState) putCondition(t string, status metav1.ConditionStatus, reason, message string, now metav1.Time) bool {
	conds := &s.js.Status.Conditions
	if c := findCondition(*conds, t); c != nil {
		if c.Status == status && c.Reason == reason && c.Message == message {
			return false
		}
		if c.Status != status {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message = status, reason, message
		c.ObservedGeneration = s.js.Generation
	} else {
		if status != metav1.ConditionTrue {
			// As upstream: a condition that never held is not recorded
			// as false.
			return false
		}
		*conds = append(*conds, metav1.Condition{
			Type: t, Status: status, Reason: reason, Message: message,
			LastTransitionTime: now, ObservedGeneration: s.js.Generation,
		})
	}
	return true
}

// flipCondition changes only the status of an existing condition, keeping
// its reason and message, without an event.
func (s *syncState) flipCondition(t string, status metav1.ConditionStatus, now metav1.Time) {
	if c := findCondition(s.js.Status.Conditions, t); c != nil {
		s.putCondition(t, status, c.Reason, c.Message, now)
	}
}

// finished reports whether the JobSet completed or failed.
func finished(js *jobset.JobSet) bool {
	return conditionTrue(js.Status.Conditions, string(jobset.JobSetCompleted)) ||
		conditionTrue(js.Status.Conditions, string(jobset.JobSetFailed))
}

// finishTime is when the JobSet completed or failed.
func finishTime(js *jobset.JobSet) *metav1.Time {
	for _, t := range []jobset.JobSetConditionType{jobset.JobSetCompleted, jobset.JobSetFailed} {
		if c := findCondition(js.Status.Conditions, string(t)); c != nil && c.Status == metav1.ConditionTrue {
			return &c.LastTransitionTime
		}
	}
	return nil
}

// jobReady reports whether the ready and succeeded pods of an active Job
// reach min(parallelism, completions).
func jobReady(job *batchv1.Job) bool {
	want := ptr.Deref(job.Spec.Parallelism, 1)
	if job.Spec.Completions != nil && *job.Spec.Completions < want {
		want = *job.Spec.Completions
	}
	return job.Status.Succeeded+ptr.Deref(job.Status.Ready, 0) >= want
}

// computeReplicatedJobsStatus counts the current attempt's Jobs per
// replicatedJob, in spec order, keeping the per-Job restart arrays, and
// reports the smallest parallelism the unfinished Jobs run with.
func computeReplicatedJobsStatus(js *jobset.JobSet, jobs *childJobs) []jobset.ReplicatedJobStatus {
	out := make([]jobset.ReplicatedJobStatus, len(js.Spec.ReplicatedJobs))
	pos := make(map[string]int, len(out))
	for i := range js.Spec.ReplicatedJobs {
		name := js.Spec.ReplicatedJobs[i].Name
		out[i].Name = name
		pos[name] = i
		for _, old := range js.Status.ReplicatedJobsStatus {
			if old.Name == name {
				out[i].JobRestarts = append([]int32(nil), old.JobRestarts...)
				out[i].JobRestartsCountTowardsMax = append([]int32(nil), old.JobRestartsCountTowardsMax...)
			}
		}
	}
	at := func(job *batchv1.Job) *jobset.ReplicatedJobStatus {
		i, ok := pos[job.Labels[jobset.ReplicatedJobNameKey]]
		if !ok {
			return nil
		}
		return &out[i]
	}
	for _, job := range jobs.active {
		s := at(job)
		if s == nil {
			continue
		}
		if jobReady(job) {
			s.Ready++
		}
		if job.Status.Active > 0 {
			s.Active++
		}
		if jobSuspended(job) {
			s.Suspended++
		}
		if p := ptr.Deref(job.Spec.Parallelism, 1); s.ObservedParallelism == nil || p < *s.ObservedParallelism {
			s.ObservedParallelism = ptr.To(p)
		}
	}
	for _, job := range jobs.successful {
		if s := at(job); s != nil {
			s.Succeeded++
		}
	}
	for _, job := range jobs.failed {
		if s := at(job); s != nil {
			s.Failed++
		}
	}
	return out
}

func rjStatus(status *jobset.JobSetStatus, name string) jobset.ReplicatedJobStatus {
	for _, s := range status.ReplicatedJobsStatus {
		if s.Name == name {
			return s
		}
	}
	return jobset.ReplicatedJobStatus{Name: name}
}

// allJobsReady reports whether every replicatedJob has all its Jobs ready
// or succeeded.
func allJobsReady(js *jobset.JobSet) bool {
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		s := rjStatus(&js.Status, rj.Name)
		if s.Ready+s.Succeeded < replicasOf(rj) {
			return false
		}
	}
	return true
}

// endRestarting flips a true RestartingJobSet condition to false once the
// Jobs are ready.
func (s *syncState) endRestarting(reason, message string, now metav1.Time) {
	if conditionTrue(s.js.Status.Conditions, conditionRestartingJobSet) {
		s.setCondition(conditionRestartingJobSet, metav1.ConditionFalse, reason, message, corev1.EventTypeNormal, now)
	}
}

// settleRestarting writes why RestartingJobSet is false when the JobSet
// finishes or is suspended: as upstream, a condition that is already false
// (reason JobsReady) is rewritten too, with an event.
func (s *syncState) settleRestarting(reason, message string, now metav1.Time) {
	if findCondition(s.js.Status.Conditions, conditionRestartingJobSet) != nil {
		s.setCondition(conditionRestartingJobSet, metav1.ConditionFalse, reason, message, corev1.EventTypeNormal, now)
	}
}

// setFailed marks the JobSet failed.
func (s *syncState) setFailed(reason, message string, now metav1.Time) {
	s.setCondition(string(jobset.JobSetFailed), metav1.ConditionTrue, reason, message, corev1.EventTypeWarning, now)
	s.js.Status.TerminalState = string(jobset.JobSetFailed)
	s.settleRestarting(reasonRestartingJobSetFailed, messageRestartingJobSetFailed, now)
}

// setCompleted marks the JobSet completed.
func (s *syncState) setCompleted(now metav1.Time) {
	s.setCondition(string(jobset.JobSetCompleted), metav1.ConditionTrue, reasonAllJobsCompleted, messageAllJobsCompleted, corev1.EventTypeNormal, now)
	s.js.Status.TerminalState = string(jobset.JobSetCompleted)
	s.settleRestarting(reasonRestartingJobSetComplete, messageRestartingJobSetDone, now)
}
