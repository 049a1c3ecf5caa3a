package controller

import (
	"slices"

	batchv1 "k8s.io/api/batch/v1"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// successPolicyMet reports whether the succeeded Jobs of the current attempt
// satisfy the JobSet's success policy. All needs every Job of the targeted
// replicatedJobs (all replicatedJobs when none are named) to have
// succeeded; Any needs one of them.
func successPolicyMet(js *jobset.JobSet, succeeded []*batchv1.Job) bool {
	op := jobset.OperatorAll
	var targets []string
	if sp := js.Spec.SuccessPolicy; sp != nil {
		if sp.Operator != "" {
			op = sp.Operator
		}
		targets = sp.TargetReplicatedJobs
	}
	targeted := func(name string) bool {
		return len(targets) == 0 || slices.Contains(targets, name)
	}

	var matching int32
	for _, job := range succeeded {
		if targeted(job.Labels[jobset.ReplicatedJobNameKey]) {
			matching++
		}
	}
	switch op {
	case jobset.OperatorAny:
		return matching > 0
	default:
		var expected int32
		for i := range js.Spec.ReplicatedJobs {
			rj := &js.Spec.ReplicatedJobs[i]
			if targeted(rj.Name) {
				expected += replicasOf(rj)
			}
		}
		return matching >= expected
	}
}
