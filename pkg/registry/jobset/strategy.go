// Package jobset holds the storage and the create, update and status
// strategies of the jobsets resource.
package jobset

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/apis/jobset/validation"
)

// jobSetStrategy governs writes to the main resource: spec and metadata.
type jobSetStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

// NewStrategy returns the strategy for writes to jobsets.
func NewStrategy(typer runtime.ObjectTyper) jobSetStrategy {
	return jobSetStrategy{typer, names.SimpleNameGenerator}
}

func (jobSetStrategy) NamespaceScoped() bool { return true }

// GetResetFields lists what a write to the main resource never changes, so
// that server-side apply does not hand its ownership to that manager.
func (jobSetStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"jobset.x-k8s.io/v1alpha2": fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
	}
}

func (jobSetStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	js := obj.(*jobset.JobSet)
	js.Status = jobset.JobSetStatus{}
	js.Generation = 1
}

func (jobSetStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	newJS := obj.(*jobset.JobSet)
	oldJS := old.(*jobset.JobSet)
	newJS.Status = oldJS.Status
	if !apiequality.Semantic.DeepEqual(newJS.Spec, oldJS.Spec) {
		newJS.Generation = oldJS.Generation + 1
	}
}

func (jobSetStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateJobSet(obj.(*jobset.JobSet))
}

func (jobSetStrategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string {
	return nil
}

func (jobSetStrategy) AllowCreateOnUpdate(ctx context.Context) bool { return false }

func (jobSetStrategy) AllowUnconditionalUpdate(ctx context.Context) bool { return true }

func (jobSetStrategy) Canonicalize(obj runtime.Object) {}

func (jobSetStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateJobSetUpdate(obj.(*jobset.JobSet), old.(*jobset.JobSet))
}

func (jobSetStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

// jobSetStatusStrategy governs writes to the status subresource.
type jobSetStatusStrategy struct {
	jobSetStrategy
}

// NewStatusStrategy returns the strategy for writes to jobsets/status.
func NewStatusStrategy(strategy jobSetStrategy) jobSetStatusStrategy {
	return jobSetStatusStrategy{strategy}
}

func (jobSetStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"jobset.x-k8s.io/v1alpha2": fieldpath.NewSet(fieldpath.MakePathOrDie("spec")),
	}
}

func (jobSetStatusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	newJS := obj.(*jobset.JobSet)
	oldJS := old.(*jobset.JobSet)
	newJS.Spec = oldJS.Spec
	// As on the status subresource of a CustomResourceDefinition, a status
	// write changes nothing but status: metadata (labels, annotations,
	// finalizers, owner references) stays as stored. The managed fields
	// computed for this write and the resourceVersion it was checked
	// against are kept.
	managedFields, resourceVersion := newJS.ManagedFields, newJS.ResourceVersion
	newJS.ObjectMeta = *oldJS.ObjectMeta.DeepCopy()
	newJS.ManagedFields, newJS.ResourceVersion = managedFields, resourceVersion
}

func (jobSetStatusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateJobSetStatusUpdate(obj.(*jobset.JobSet), old.(*jobset.JobSet))
}

func (jobSetStatusStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

// GetAttrs exposes the labels and selectable fields of a JobSet.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	js, ok := obj.(*jobset.JobSet)
	if !ok {
		return nil, nil, fmt.Errorf("not a JobSet: %T", obj)
	}
	return labels.Set(js.Labels), generic.ObjectMetaFieldsSet(&js.ObjectMeta, true), nil
}

// MatchJobSet selects JobSets by label and by metadata.name/namespace.
func MatchJobSet(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{
		Label:    label,
		Field:    field,
		GetAttrs: GetAttrs,
	}
}
