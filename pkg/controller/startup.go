package controller

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

func inOrderStartup(js *jobset.JobSet) bool {
	return js.Spec.StartupPolicy != nil && js.Spec.StartupPolicy.StartupPolicyOrder == jobset.InOrder
}

// replicatedJobStarted reports whether every Job of a replicatedJob in the
// current attempt is ready, succeeded or failed.
func replicatedJobStarted(js *jobset.JobSet, rj *jobset.ReplicatedJob) bool {
	s := rjStatus(&js.Status, rj.Name)
	return s.Ready+s.Succeeded+s.Failed >= replicasOf(rj)
}

func replicatedJobByName(js *jobset.JobSet, name string) *jobset.ReplicatedJob {
	for i := range js.Spec.ReplicatedJobs {
		if js.Spec.ReplicatedJobs[i].Name == name {
			return &js.Spec.ReplicatedJobs[i]
		}
	}
	return nil
}

// dependencyMet reports whether an earlier replicatedJob reached the state
// a dependsOn entry asks for.
func dependencyMet(js *jobset.JobSet, dep jobset.DependsOn) bool {
	rj := replicatedJobByName(js, dep.Name)
	if rj == nil {
		// Validation forbids this; do not block forever on it.
		return true
	}
	switch dep.Status {
	case jobset.DependencyComplete:
		return rjStatus(&js.Status, rj.Name).Succeeded >= replicasOf(rj)
	default:
		return replicatedJobStarted(js, rj)
	}
}

// mayStart reports whether the Jobs of replicatedJob i may be created or
// resumed now: with InOrder every earlier replicatedJob must have started,
// and every dependsOn entry must be met.
func mayStart(js *jobset.JobSet, i int) bool {
	return gateOpen(js, i, true)
}

// mayCreateSuspended is the creation gate of a suspended JobSet: as in
// upstream, InOrder only orders the start, so every suspended Job is
// created at once; dependsOn still holds creation back.
func mayCreateSuspended(js *jobset.JobSet, i int) bool {
	return gateOpen(js, i, false)
}

func gateOpen(js *jobset.JobSet, i int, inOrder bool) bool {
	rj := &js.Spec.ReplicatedJobs[i]
	if inOrder && inOrderStartup(js) {
		for j := 0; j < i; j++ {
			if !replicatedJobStarted(js, &js.Spec.ReplicatedJobs[j]) {
				return false
			}
		}
	}
	for _, dep := range rj.DependsOn {
		if !dependencyMet(js, dep) {
			return false
		}
	}
	return true
}

// updateStartupConditions maintains StartupPolicyInProgress and
// StartupPolicyCompleted for InOrder JobSets.
func (s *syncState) updateStartupConditions(now metav1.Time) {
	js := s.js
	if !inOrderStartup(js) || conditionTrue(js.Status.Conditions, string(jobset.JobSetStartupPolicyCompleted)) {
		return
	}
	all := true
	for i := range js.Spec.ReplicatedJobs {
		if !replicatedJobStarted(js, &js.Spec.ReplicatedJobs[i]) {
			all = false
			break
		}
	}
	if all {
		s.setCondition(string(jobset.JobSetStartupPolicyCompleted), metav1.ConditionTrue, reasonInOrderCompleted, messageInOrderCompleted, corev1.EventTypeNormal, now)
		// As upstream, only the status flips: no new reason, no event.
		s.flipCondition(string(jobset.JobSetStartupPolicyInProgress), metav1.ConditionFalse, now)
		return
	}
	s.setCondition(string(jobset.JobSetStartupPolicyInProgress), metav1.ConditionTrue, reasonInOrderInProgress, messageInOrderInProgress, corev1.EventTypeNormal, now)
}

// restartStartup starts the InOrder startup again after a whole-JobSet
// restart: InProgress is True again and Completed False (status only), as
// upstream.
func (s *syncState) restartStartup(now metav1.Time) {
	if !inOrderStartup(s.js) || !conditionTrue(s.js.Status.Conditions, string(jobset.JobSetStartupPolicyCompleted)) {
		return
	}
	s.flipCondition(string(jobset.JobSetStartupPolicyCompleted), metav1.ConditionFalse, now)
	s.setCondition(string(jobset.JobSetStartupPolicyInProgress), metav1.ConditionTrue, reasonInOrderInProgress, messageInOrderInProgress, corev1.EventTypeNormal, now)
}
