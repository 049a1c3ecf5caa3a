// Package validation checks JobSets written through the API server. It works
// on the internal types only; the registry strategy calls ValidateJobSet on
// create, ValidateJobSetUpdate on update and ValidateJobSetStatusUpdate on
// writes to the status subresource. Objects reach it already defaulted.
//
// Every error carries the path of the field at fault, so that clients (and
// kubectl) can point at the offending part of the manifest.
package validation

import (
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

// ValidateJobSetName checks a JobSet name (prefix is true for generateName).
// The name is the first part of every child Job, pod and Service name, all of
// which must be DNS-1035 labels, so the name must be one too.
var ValidateJobSetName apivalidation.ValidateNameFunc = apivalidation.NameIsDNS1035Label

// ValidateJobSet validates a JobSet that is about to be created.
func ValidateJobSet(js *jobset.JobSet) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMeta(&js.ObjectMeta, true, ValidateJobSetName, field.NewPath("metadata"))
	v := newSpecView(js)
	allErrs = append(allErrs, v.validateFixedParts()...)
	allErrs = append(allErrs, v.validateMutableParts()...)
	allErrs = append(allErrs, v.validateTemplateSchemas(nil, allErrs)...)
	allErrs = append(allErrs, validateExclusiveTopology(js)...)
	return allErrs
}

// ValidateJobSetUpdate validates an update of a JobSet's metadata and spec.
func ValidateJobSetUpdate(newJS, oldJS *jobset.JobSet) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMetaUpdate(&newJS.ObjectMeta, &oldJS.ObjectMeta, field.NewPath("metadata"))
	if newJS.Annotations[jobset.ExclusiveKey] != oldJS.Annotations[jobset.ExclusiveKey] || !templatesEqual(&newJS.Spec, &oldJS.Spec) {
		allErrs = append(allErrs, validateExclusiveTopology(newJS)...)
	}

	// An unchanged spec is not validated again: rules that became stricter
	// since the object was created must not block metadata-only updates such
	// as the removal of a finalizer.
	if apiequality.Semantic.DeepEqual(newJS.Spec, oldJS.Spec) {
		return allErrs
	}
	if IsTerminal(oldJS) {
		// As upstream, ttlSecondsAfterFinished stays mutable, so that a
		// finished JobSet's deletion can be brought forward or put off.
		if !onlyTTLChanged(&newJS.Spec, &oldJS.Spec) {
			return append(allErrs, field.Forbidden(field.NewPath("spec"), "Cannot mutate a JobSet in a terminal state"))
		}
		if ttl := newJS.Spec.TTLSecondsAfterFinished; ttl != nil {
			allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(*ttl), field.NewPath("spec", "ttlSecondsAfterFinished"))...)
		}
		return allErrs
	}

	// The fixed parts of the spec are guarded by immutability checks, so only
	// the rules that depend on mutable fields are evaluated again.
	v := newSpecView(newJS)
	allErrs = append(allErrs, v.validateMutableParts()...)
	allErrs = append(allErrs, validateSpecUpdate(&newJS.Spec, &oldJS.Spec, field.NewPath("spec"))...)
	allErrs = append(allErrs, v.validateTemplateSchemas(&oldJS.Spec, allErrs)...)
	if templatesUpdatable(&newJS.Spec) && !templatesEqual(&newJS.Spec, &oldJS.Spec) {
		// Containers and volumes may have changed: the claims must still
		// be mounted and must not clash with a pod volume.
		allErrs = append(allErrs, v.validateVolumeClaimPolicies()...)
	}
	return allErrs
}

// onlyTTLChanged reports whether the specs differ at most in
// ttlSecondsAfterFinished.
func onlyTTLChanged(a, b *jobset.JobSetSpec) bool {
	c := *a
	c.TTLSecondsAfterFinished = b.TTLSecondsAfterFinished
	return apiequality.Semantic.DeepEqual(&c, b)
}

// templatesEqual reports whether two specs have the same replicatedJob
// templates, in the same order.
func templatesEqual(a, b *jobset.JobSetSpec) bool {
	if len(a.ReplicatedJobs) != len(b.ReplicatedJobs) {
		return false
	}
	for i := range a.ReplicatedJobs {
		if !apiequality.Semantic.DeepEqual(a.ReplicatedJobs[i].Template, b.ReplicatedJobs[i].Template) {
			return false
		}
	}
	return true
}

// IsTerminal reports whether the JobSet has finished: it has a Completed or
// Failed condition with status True, or a terminal state recorded in status.
func IsTerminal(js *jobset.JobSet) bool {
	if js.Status.TerminalState != "" {
		return true
	}
	for _, c := range js.Status.Conditions {
		if c.Status != metav1.ConditionTrue {
			continue
		}
		if c.Type == string(jobset.JobSetCompleted) || c.Type == string(jobset.JobSetFailed) {
			return true
		}
	}
	return false
}
