package validation

import (
	"fmt"
	"math"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

// inPlaceRestart reports whether the spec asks for in-place restarts.
func (v *specView) inPlaceRestart() bool {
	fp := v.spec.FailurePolicy
	return fp != nil && fp.RestartStrategy == jobset.InPlaceRestart
}

// validateInPlaceRestart checks what restartStrategy InPlaceRestart needs of
// the Job template of replicatedJob i, with upstream's field paths: a failed
// pod must never fail its Job (backoffLimit 2147483647), a replacement pod
// must wait until its predecessor is gone (podReplacementPolicy Failed), and
// the controller must know how many pods to wait for (completions equal to
// parallelism).
func (v *specView) validateInPlaceRestart(i int) field.ErrorList {
	if !v.inPlaceRestart() {
		return nil
	}
	rj := &v.spec.ReplicatedJobs[i]
	spec := &rj.Template.Spec
	p := v.rjPath(i).Child("template", "spec")
	var allErrs field.ErrorList
	if spec.BackoffLimit == nil || *spec.BackoffLimit != math.MaxInt32 {
		allErrs = append(allErrs, field.Invalid(p.Child("backoffLimit"), derefOrNil(spec.BackoffLimit),
			fmt.Sprintf("replicatedJob %s: must be set to %d (MaxInt32) when in-place restart is enabled", rj.Name, math.MaxInt32)))
	}
	if spec.PodReplacementPolicy == nil || *spec.PodReplacementPolicy != batchv1.Failed {
		allErrs = append(allErrs, field.Invalid(p.Child("podReplacementPolicy"), derefOrNil(spec.PodReplacementPolicy),
			fmt.Sprintf("replicatedJob %s: must be set to %s when in-place restart is enabled", rj.Name, batchv1.Failed)))
	}
	if spec.Completions == nil || spec.Parallelism == nil || *spec.Completions != *spec.Parallelism {
		allErrs = append(allErrs, field.Invalid(p.Child("completions"), derefOrNil(spec.Completions),
			fmt.Sprintf("replicatedJob %s: completions and parallelism must be set and equal to each other when in-place restart is enabled", rj.Name)))
	}
	return allErrs
}

// derefOrNil returns the value a pointer points to, or nil, so that an
// error shows "null" rather than an address.
func derefOrNil[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
