package validation

import (
	"reflect"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/podresources"
)

// validateSpecUpdate checks which parts of the spec an update changed.
func validateSpecUpdate(newSpec, oldSpec *jobset.JobSetSpec, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	// Upstream's schema rules word it "Value is immutable" and show the
	// value's JSON type.
	immutable := func(newVal, oldVal any, name string) {
		allErrs = append(allErrs, immutableValue(newVal, oldVal, "object", p.Child(name))...)
	}
	immutable(newSpec.Network, oldSpec.Network, "network")
	immutable(newSpec.SuccessPolicy, oldSpec.SuccessPolicy, "successPolicy")
	immutable(newSpec.FailurePolicy, oldSpec.FailurePolicy, "failurePolicy")
	immutable(newSpec.StartupPolicy, oldSpec.StartupPolicy, "startupPolicy")
	allErrs = append(allErrs, immutableValue(newSpec.VolumeClaimPolicies, oldSpec.VolumeClaimPolicies, "array", p.Child("volumeClaimPolicies"))...)
	allErrs = append(allErrs, apivalidation.ValidateImmutableField(newSpec.ManagedBy, oldSpec.ManagedBy, p.Child("managedBy"))...)

	rjsPath := p.Child("replicatedJobs")
	if len(newSpec.ReplicatedJobs) != len(oldSpec.ReplicatedJobs) {
		return append(allErrs, field.Forbidden(rjsPath, "replicatedJobs cannot be added or removed"))
	}
	suspended := ptr.Deref(oldSpec.Suspend, false) || ptr.Deref(newSpec.Suspend, false)
	// The new strategy decides, so that switching to Opportunistic and
	// editing a template may happen in one write, and switching back to
	// Never freezes the templates at once.
	updatable := templatesUpdatable(newSpec)
	for i := range newSpec.ReplicatedJobs {
		newRJ, oldRJ := &newSpec.ReplicatedJobs[i], &oldSpec.ReplicatedJobs[i]
		rp := rjsPath.Index(i)
		// Names are compared by position, which also rejects reordering.
		allErrs = append(allErrs, apivalidation.ValidateImmutableField(newRJ.Name, oldRJ.Name, rp.Child("name"))...)
		allErrs = append(allErrs, apivalidation.ValidateImmutableField(newRJ.GroupName, oldRJ.GroupName, rp.Child("groupName"))...)
		allErrs = append(allErrs, immutableValue(newRJ.DependsOn, oldRJ.DependsOn, "array", rp.Child("dependsOn"))...)
		// replicas may change; validateMutableParts checks the new value.

		m := templateMutability{
			suspended: suspended,
			elastic:   isIndexed(&oldRJ.Template.Spec) && isIndexed(&newRJ.Template.Spec),
			updatable: updatable,
		}
		allErrs = append(allErrs, validateTemplateUpdate(&newRJ.Template, &oldRJ.Template, m, rp.Child("template"))...)
	}
	return allErrs
}

// templateMutability says which fields of a replicatedJob template an update
// may change; every other field is immutable. A future update strategy adds
// a flag here and a case to mask. When updatable frees containers and
// volumes, ValidateJobSetUpdate checks the volumeClaimPolicies rules (claims
// mounted, no clashing pod volume) again.
type templateMutability struct {
	// suspended: the JobSet is suspended before or after the update. The
	// pod template's scheduling directives (labels, annotations,
	// nodeSelector, tolerations, schedulingGates) may change, as Kueue
	// requires when it admits or evicts a workload, and so may the
	// containers' resource requests and limits (upstream's KEP-1150, with
	// which Kueue right-sizes a workload).
	suspended bool
	// elastic: the template is Indexed before and after the update, so
	// parallelism and completions may change (Elastic Indexed Jobs).
	elastic bool
	// updatable: the update strategy is Opportunistic or Immediate, so
	// every field may change except completionMode, which a running attempt
	// depends on, and parallelism and completions, which keep the rules of
	// elastic in-place changes.
	updatable bool
}

// mask returns a copy of newT in which every field m allows to change holds
// its value from oldT. Any remaining difference is a forbidden change.
func (m templateMutability) mask(newT, oldT *batchv1.JobTemplateSpec) *batchv1.JobTemplateSpec {
	out := newT.DeepCopy()
	if m.suspended {
		pod, oldPod := &out.Spec.Template, &oldT.Spec.Template
		pod.Labels = oldPod.Labels
		pod.Annotations = oldPod.Annotations
		pod.Spec.NodeSelector = oldPod.Spec.NodeSelector
		pod.Spec.Tolerations = oldPod.Spec.Tolerations
		pod.Spec.SchedulingGates = oldPod.Spec.SchedulingGates
		podresources.Copy(pod.Spec.InitContainers, oldPod.Spec.InitContainers)
		podresources.Copy(pod.Spec.Containers, oldPod.Spec.Containers)
	}
	if m.elastic {
		out.Spec.Parallelism = oldT.Spec.Parallelism
		out.Spec.Completions = oldT.Spec.Completions
	}
	if m.updatable {
		fixed := out
		out = oldT.DeepCopy()
		out.Spec.CompletionMode = fixed.Spec.CompletionMode
		out.Spec.Parallelism = fixed.Spec.Parallelism
		out.Spec.Completions = fixed.Spec.Completions
	}
	return out
}

// templatesUpdatable reports whether the spec's update strategy accepts
// template edits.
func templatesUpdatable(spec *jobset.JobSetSpec) bool {
	if spec.UpdatePolicy == nil {
		return false
	}
	switch spec.UpdatePolicy.UpdateStrategy {
	case jobset.UpdateOpportunistic, jobset.UpdateImmediate:
		return true
	}
	return false
}

// validateTemplateUpdate rejects changes to the immutable fields of a
// template and checks the allowed changes that have rules of their own.
func validateTemplateUpdate(newT, oldT *batchv1.JobTemplateSpec, m templateMutability, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if m.elastic {
		allErrs = append(allErrs, validateElasticChange(&newT.Spec, &oldT.Spec, p.Child("spec"))...)
	}

	masked := m.mask(newT, oldT)
	if apiequality.Semantic.DeepEqual(masked, oldT) {
		return allErrs
	}
	diffErrs := immutableFieldDiff(reflect.ValueOf(masked).Elem(), reflect.ValueOf(oldT).Elem(), p)
	if len(diffErrs) == 0 {
		// Not expected: the field-wise comparison covers every field.
		diffErrs = apivalidation.ValidateImmutableField(masked, oldT, p)
	}
	return append(allErrs, diffErrs...)
}

// validateElasticChange checks a change of parallelism or completions of an
// Indexed template: both must be at least 1 and, when both are set, equal.
func validateElasticChange(newSpec, oldSpec *batchv1.JobSpec, p *field.Path) field.ErrorList {
	if apiequality.Semantic.DeepEqual(newSpec.Parallelism, oldSpec.Parallelism) &&
		apiequality.Semantic.DeepEqual(newSpec.Completions, oldSpec.Completions) {
		return nil
	}
	var allErrs field.ErrorList
	if newSpec.Parallelism != nil && *newSpec.Parallelism < 1 {
		allErrs = append(allErrs, field.Invalid(p.Child("parallelism"), *newSpec.Parallelism, "must be at least 1 when parallelism or completions change"))
	}
	if newSpec.Completions != nil && *newSpec.Completions < 1 {
		allErrs = append(allErrs, field.Invalid(p.Child("completions"), *newSpec.Completions, "must be at least 1 when parallelism or completions change"))
	}
	if newSpec.Parallelism != nil && newSpec.Completions != nil && *newSpec.Parallelism != *newSpec.Completions {
		allErrs = append(allErrs, field.Invalid(p.Child("completions"), *newSpec.Completions,
			"must equal parallelism when parallelism changes on an Indexed Job (or when completions change)"))
	}
	return allErrs
}

// comparedFieldByField lists the template types whose fields are compared
// one by one, so that an immutability error names the field that changed
// (spec.replicatedJobs[0].template.spec.template.spec.containers) instead
// of the whole template. Fields of any other type are compared whole.
var comparedFieldByField = map[reflect.Type]bool{
	reflect.TypeFor[batchv1.JobTemplateSpec](): true,
	reflect.TypeFor[batchv1.JobSpec]():         true,
	reflect.TypeFor[corev1.PodTemplateSpec]():  true,
	reflect.TypeFor[corev1.PodSpec]():          true,
	reflect.TypeFor[metav1.ObjectMeta]():       true,
}

// immutableFieldDiff returns a "field is immutable" error for every field
// that differs between newV and oldV, which are values of the same type.
func immutableFieldDiff(newV, oldV reflect.Value, p *field.Path) field.ErrorList {
	t := newV.Type()
	if !comparedFieldByField[t] {
		return apivalidation.ValidateImmutableField(newV.Interface(), oldV.Interface(), p)
	}
	var allErrs field.ErrorList
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		child := p
		switch name, inline := jsonFieldName(f); {
		case name == "-":
			continue
		case !inline:
			child = p.Child(name)
		}
		allErrs = append(allErrs, immutableFieldDiff(newV.Field(i), oldV.Field(i), child)...)
	}
	return allErrs
}

// jsonFieldName returns the serialized name of a struct field and whether
// the field is inlined into its parent.
func jsonFieldName(f reflect.StructField) (string, bool) {
	tag := f.Tag.Get("json")
	name, opts, _ := strings.Cut(tag, ",")
	if name == "" && (f.Anonymous || strings.Contains(","+opts+",", ",inline,")) {
		return "", true
	}
	if name == "" {
		name = f.Name
	}
	return name, false
}

// immutableValue is upstream's schema rule self == oldSelf: an error with
// its message, showing the JSON type of the value as the rule does.
func immutableValue(newVal, oldVal any, jsonType string, p *field.Path) field.ErrorList {
	if apiequality.Semantic.DeepEqual(newVal, oldVal) {
		return nil
	}
	return field.ErrorList{field.Invalid(p, jsonType, immutableValueMsg)}
}
