package controller

import (
	"fmt"
	"regexp"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// defaultFailureAction applies when a failure policy exists and no rule
// matches.
const defaultFailureAction = jobset.RestartJobSet

// jobFailure returns the true JobFailed condition of a Job, or nil.
func jobFailure(job *batchv1.Job) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		c := &job.Status.Conditions[i]
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// firstFailedJob returns the failed Job whose failure is the oldest; ties
// are broken by name for determinism.
func firstFailedJob(failed []*batchv1.Job) *batchv1.Job {
	var first *batchv1.Job
	var at metav1.Time
	for _, job := range failed {
		c := jobFailure(job)
		if c == nil {
			continue
		}
		if first == nil || c.LastTransitionTime.Before(&at) ||
			(c.LastTransitionTime.Equal(&at) && job.Name < first.Name) {
			first, at = job, c.LastTransitionTime
		}
	}
	return first
}

// ruleMatches reports whether a failed Job matches a rule: its failure
// reason, message and replicatedJob must all match.
func ruleMatches(rule *jobset.FailurePolicyRule, job *batchv1.Job, cond *batchv1.JobCondition) bool {
	if len(rule.OnJobFailureReasons) > 0 && !slices.Contains(rule.OnJobFailureReasons, cond.Reason) {
		return false
	}
	rj, ok := job.Labels[jobset.ReplicatedJobNameKey]
	if !ok || rj == "" {
		return false
	}
	if len(rule.TargetReplicatedJobs) > 0 && !slices.Contains(rule.TargetReplicatedJobs, rj) {
		return false
	}
	if len(rule.OnJobFailureMessagePatterns) > 0 {
		matched := false
		for _, p := range rule.OnJobFailureMessagePatterns {
			re, err := regexp.Compile(p)
			if err != nil {
				continue
			}
			if re.MatchString(cond.Message) {
				matched = true
				break
			}
		}
		if !matched {
			return false
		}
	}
	return true
}

// matchRule tries the rules in order; for the first rule that matches any
// failed Job it returns the rule and the earliest-failed Job it matches.
func matchRule(rules []jobset.FailurePolicyRule, failed []*batchv1.Job) (*jobset.FailurePolicyRule, *batchv1.Job) {
	for i := range rules {
		rule := &rules[i]
		var matched []*batchv1.Job
		for _, job := range failed {
			if c := jobFailure(job); c != nil && ruleMatches(rule, job, c) {
				matched = append(matched, job)
			}
		}
		if job := firstFailedJob(matched); job != nil {
			return rule, job
		}
	}
	return nil, nil
}

// executeFailurePolicy reacts to failed Jobs of the current attempt. It only
// changes the status; the next sync deletes the Jobs of the superseded
// attempt and creates their successors.
func (c *Controller) executeFailurePolicy(s *syncState, failed []*batchv1.Job, now metav1.Time) {
	js := s.js
	fp := js.Spec.FailurePolicy
	if fp == nil {
		first := firstFailedJob(failed)
		if first == nil {
			first = failed[0]
		}
		s.setFailed(reasonFailedJobs, withFirstFailedJob(messageFailedJobs, first.Name), now)
		s.record(func(m Metrics) { m.Failed(js, reasonFailedJobs) })
		return
	}

	rule, job := matchRule(fp.Rules, failed)
	action := defaultFailureAction
	restartingReason := reasonRestartingDefault
	if rule != nil {
		action = rule.Action
		restartingReason = fmt.Sprintf(reasonRestartingRuleFormat, rule.Name)
	} else {
		job = firstFailedJob(failed)
		if job == nil {
			job = failed[0]
		}
	}

	switch action {
	case jobset.FailJobSet:
		// One event: the Failed condition's.
		s.setFailed(reasonFailJobSetAction, withFirstFailedJob(messageFailJobSetAction, job.Name), now)
		s.record(func(m Metrics) { m.Failed(js, reasonFailJobSetAction) })

	case jobset.RestartJobSet, jobset.RestartJobSetAndIgnoreMaxRestarts:
		counts := action == jobset.RestartJobSet
		if counts && restartsCountedTowardsMax(&js.Status) >= int64(fp.MaxRestarts) {
			s.setFailed(reasonReachedMaxRestarts, withFirstFailedJob(messageReachedMaxRestarts, job.Name), now)
			s.record(func(m Metrics) { m.Failed(js, reasonReachedMaxRestarts) })
			return
		}
		reason, base := reasonRestartJobSetAction, messageRestartJobSetAction
		if !counts {
			reason, base = reasonRestartJobSetIgnoreMaxAction, messageRestartJobSetIgnoreMaxAction
		}
		msg := withFirstFailedJob(base, job.Name)
		js.Status.Restarts++
		if counts {
			js.Status.RestartsCountTowardsMax++
		}
		s.newExecutionAttempt(RestartReasonFailure)
		s.eventf(corev1.EventTypeWarning, reason, "%s", msg)
		s.setCondition(conditionRestartingJobSet, metav1.ConditionTrue, restartingReason, msg, corev1.EventTypeWarning, now)
		s.restartStartup(now)
		s.record(func(m Metrics) { m.Restarted(js, RestartReasonFailure) })

	case jobset.RestartJob, jobset.RestartJobAndIgnoreMaxRestarts:
		counts := action == jobset.RestartJob
		rjName := job.Labels[jobset.ReplicatedJobNameKey]
		idx, ok := labelInt(job, jobset.JobIndexKey)
		st := statusFor(&js.Status, rjName)
		if !ok || idx < 0 || st == nil {
			// Not a Job this controller can restart on its own: restart
			// the whole set instead of looping on it.
			js.Status.Restarts++
			s.newExecutionAttempt(RestartReasonFailure)
			s.record(func(m Metrics) { m.Restarted(js, RestartReasonFailure) })
			return
		}
		if counts && restartsCountedTowardsMax(&js.Status) >= int64(fp.MaxRestarts) {
			s.setFailed(reasonReachedMaxRestarts, withFirstFailedJob(messageReachedMaxRestarts, job.Name), now)
			s.record(func(m Metrics) { m.Failed(js, reasonReachedMaxRestarts) })
			return
		}
		reason, base := reasonRestartJobAction, messageRestartJobAction
		if !counts {
			reason, base = reasonRestartJobIgnoreMaxAction, messageRestartJobIgnoreMaxAction
		}
		// The arrays have one entry per Job of the replicatedJob; the
		// counted one only exists once a counted restart happened.
		size := int(idx) + 1
		if rj := rjSpec(js, rjName); rj != nil {
			size = max(size, int(replicasOf(rj)))
		}
		grow(&st.JobRestarts, size)
		st.JobRestarts[idx]++
		if counts {
			grow(&st.JobRestartsCountTowardsMax, size)
			st.JobRestartsCountTowardsMax[idx]++
		}
		s.eventf(corev1.EventTypeWarning, reason, "%s", withFirstFailedJob(base, job.Name))
		s.record(func(m Metrics) { m.JobRestarted(js, job.Name, string(action)) })

	default:
		// Validation rejects unknown actions; treat one like no rule.
		s.eventf(corev1.EventTypeWarning, reasonFailedJobs, "unknown failure policy action %q", action)
		s.setFailed(reasonFailedJobs, withFirstFailedJob(messageFailedJobs, job.Name), now)
		s.record(func(m Metrics) { m.Failed(js, reasonFailedJobs) })
	}
}

// restartsCountedTowardsMax is the one restart budget of a JobSet, as
// upstream counts it: whole-JobSet restarts plus every per-Job restart that
// counts toward maxRestarts.
func restartsCountedTowardsMax(status *jobset.JobSetStatus) int64 {
	total := int64(status.RestartsCountTowardsMax)
	for i := range status.ReplicatedJobsStatus {
		for _, n := range status.ReplicatedJobsStatus[i].JobRestartsCountTowardsMax {
			total += int64(n)
		}
	}
	return total
}

// rjSpec returns the replicatedJob of the spec with that name, or nil.
func rjSpec(js *jobset.JobSet, name string) *jobset.ReplicatedJob {
	for i := range js.Spec.ReplicatedJobs {
		if js.Spec.ReplicatedJobs[i].Name == name {
			return &js.Spec.ReplicatedJobs[i]
		}
	}
	return nil
}

func statusFor(status *jobset.JobSetStatus, name string) *jobset.ReplicatedJobStatus {
	for i := range status.ReplicatedJobsStatus {
		if status.ReplicatedJobsStatus[i].Name == name {
			return &status.ReplicatedJobsStatus[i]
		}
	}
	return nil
}

func grow(s *[]int32, n int) {
	for len(*s) < n {
		*s = append(*s, 0)
	}
}
