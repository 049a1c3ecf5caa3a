package validation

import (
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/apis/jobset/schemadefaults"
)

// validateTemplateSchemas checks the required properties and enums that the
// Kubernetes schema declares for the Job and claim templates, as a
// CRD-served JobSet does. With old set (an update), only the templates that
// changed are checked, so a stored object is never blocked by its own
// unchanged templates. A field that one of the hand-written rules in prior
// already reported is not reported twice.
func (v *specView) validateTemplateSchemas(old *jobset.JobSetSpec, prior field.ErrorList) field.ErrorList {
	reported := make(map[string]bool, len(prior))
	for _, e := range prior {
		reported[e.Field] = true
	}
	var out field.ErrorList
	for _, e := range v.templateSchemaErrors(old) {
		if !reported[e.Field] {
			out = append(out, e)
		}
	}
	return out
}

func (v *specView) templateSchemaErrors(old *jobset.JobSetSpec) field.ErrorList {
	var allErrs field.ErrorList
	for i := range v.spec.ReplicatedJobs {
		t := &v.spec.ReplicatedJobs[i].Template
		if old != nil && i < len(old.ReplicatedJobs) && apiequality.Semantic.DeepEqual(t, &old.ReplicatedJobs[i].Template) {
			continue
		}
		allErrs = append(allErrs, schemadefaults.CheckJobTemplate(t, v.rjPath(i).Child("template"))...)
	}
	if old != nil && apiequality.Semantic.DeepEqual(v.spec.VolumeClaimPolicies, old.VolumeClaimPolicies) {
		return allErrs
	}
	for i := range v.spec.VolumeClaimPolicies {
		for j := range v.spec.VolumeClaimPolicies[i].Templates {
			p := v.path.Child("volumeClaimPolicies").Index(i).Child("templates").Index(j)
			allErrs = append(allErrs, schemadefaults.CheckPersistentVolumeClaim(&v.spec.VolumeClaimPolicies[i].Templates[j], p)...)
		}
	}
	return allErrs
}

// validateExclusiveTopology checks the exclusive-topology annotation of the
// JobSet and of every Job template: its value becomes the key of a node
// selector and of a node affinity term, so it must be a label key.
func validateExclusiveTopology(js *jobset.JobSet) field.ErrorList {
	var allErrs field.ErrorList
	check := func(annotations map[string]string, p *field.Path) {
		value, ok := annotations[jobset.ExclusiveKey]
		if !ok {
			return
		}
		for _, msg := range validation.IsQualifiedName(value) {
			allErrs = append(allErrs, field.Invalid(p.Key(jobset.ExclusiveKey), value, "must be a node label key: "+msg))
		}
	}
	check(js.Annotations, field.NewPath("metadata", "annotations"))
	for i := range js.Spec.ReplicatedJobs {
		p := field.NewPath("spec", "replicatedJobs").Index(i).Child("template", "metadata", "annotations")
		check(js.Spec.ReplicatedJobs[i].Template.Annotations, p)
	}
	return allErrs
}
