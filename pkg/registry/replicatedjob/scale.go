package replicatedjob

import (
	"context"
	"errors"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// ScaleREST serves replicatedjobs/scale as an autoscaling/v1 Scale.
//
// The unit of scale is the pods of one child Job: spec.replicas is the
// template's parallelism. status.replicas is the parallelism the child
// Jobs run with, as the controller reports it in
// status.replicatedJobsStatus[].observedParallelism (0 while no Job of the
// current attempt is unfinished), so an autoscaler sees a scale converge
// only once the Jobs follow. status.selector matches the pods of the
// first child Job only, so that the pods an autoscaler counts are one unit
// even when the replicatedJob has several Jobs.
//
// A write sets the template's parallelism (and completions, when they
// equalled parallelism, as Elastic Indexed Jobs require) and updates the
// JobSet through its own store, so the JobSet strategy's validation,
// resourceVersion check and generation bump all apply.
type ScaleREST struct {
	jobsets *genericregistry.Store
}

var (
	_ rest.Getter                   = &ScaleREST{}
	_ rest.Updater                  = &ScaleREST{}
	_ rest.Patcher                  = &ScaleREST{}
	_ rest.GroupVersionKindProvider = &ScaleREST{}
	_ rest.Storage                  = &ScaleREST{}
)

// scaleGroupVersionKind is the kind of the subresource on the wire.
var scaleGroupVersionKind = autoscalingv1.SchemeGroupVersion.WithKind("Scale")

func (r *ScaleREST) New() runtime.Object { return &Scale{} }

// Destroy does nothing: the JobSet storage owns the store.
func (r *ScaleREST) Destroy() {}

// GroupVersionKind makes discovery and the endpoints speak autoscaling/v1
// Scale whatever the version of the containing group.
func (r *ScaleREST) GroupVersionKind(containingGV schema.GroupVersion) schema.GroupVersionKind {
	return scaleGroupVersionKind
}

// Get returns the scale of one replicatedJob.
func (r *ScaleREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	jsName, rjName, ok := SplitName(name)
	if !ok {
		return nil, notFound(name)
	}
	obj, err := r.jobsets.Get(ctx, jsName, options)
	if err != nil {
		return nil, translateError(err, name)
	}
	js := obj.(*jobset.JobSet)
	i := findReplicatedJob(js, rjName)
	if i < 0 {
		return nil, notFound(name)
	}
	return scaleOf(js, i), nil
}

// Update changes the parallelism of one replicatedJob through an update of
// its JobSet.
func (r *ScaleREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	jsName, rjName, ok := SplitName(name)
	if !ok {
		return nil, false, notFound(name)
	}
	info := &scaleUpdatedObjectInfo{name: name, rjName: rjName, reqObjInfo: objInfo}
	obj, _, err := r.jobsets.Update(ctx, jsName, info,
		toScaleCreateValidation(createValidation, rjName),
		toScaleUpdateValidation(updateValidation, rjName),
		false, options)
	if err != nil {
		return nil, false, translateError(err, name)
	}
	js := obj.(*jobset.JobSet)
	i := findReplicatedJob(js, rjName)
	if i < 0 {
		return nil, false, notFound(name)
	}
	return scaleOf(js, i), false, nil
}

// translateError names the ReplicatedJob, not the JobSet, in a not-found or
// conflict error of the JobSet store. Other errors (validation of the
// JobSet, which names the field that broke a rule) pass unchanged.
func translateError(err error, name string) error {
	switch {
	case apierrors.IsNotFound(err):
		return notFound(name)
	case apierrors.IsConflict(err):
		if ownConflict(err, name) {
			// Raised by the scale update itself, with a specific reason.
			return err
		}
		return apierrors.NewConflict(Resource, name, fmt.Errorf("the JobSet has been modified since the scale was read; read the scale again and retry"))
	}
	return err
}

// ownConflict says whether a conflict was raised for the ReplicatedJob name
// (by the scale update) rather than by the JobSet store, which names the
// JobSet.
func ownConflict(err error, name string) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Name == name
}

// parallelismOf is the template's parallelism; a Job without one runs one
// pod at a time.
func parallelismOf(spec *batchv1.JobSpec) int32 {
	if spec.Parallelism == nil {
		return 1
	}
	return *spec.Parallelism
}

// Selector is the selector of a scale: the pods of the first child Job.
func Selector(jsName, rjName string) string {
	return fmt.Sprintf("%s=%s,%s=%s,%s=0",
		jobset.JobSetNameKey, jsName,
		jobset.ReplicatedJobNameKey, rjName,
		jobset.JobIndexKey)
}

// scaleOf builds the Scale of spec.replicatedJobs[i] of js.
func scaleOf(js *jobset.JobSet, i int) *Scale {
	rj := &js.Spec.ReplicatedJobs[i]
	parallelism := parallelismOf(&rj.Template.Spec)
	return &Scale{
		ObjectMeta: metav1.ObjectMeta{
			Name:              Name(js.Name, rj.Name),
			Namespace:         js.Namespace,
			UID:               UID(js.UID, rj.Name),
			ResourceVersion:   js.ResourceVersion,
			CreationTimestamp: js.CreationTimestamp,
		},
		Spec: autoscalingv1.ScaleSpec{Replicas: parallelism},
		Status: autoscalingv1.ScaleStatus{
			Replicas: observedParallelism(js, rj.Name),
			Selector: Selector(js.Name, rj.Name),
		},
	}
}

// observedParallelism is what the controller last reported for a
// replicatedJob, or 0 when it reported nothing.
func observedParallelism(js *jobset.JobSet, rjName string) int32 {
	for _, s := range js.Status.ReplicatedJobsStatus {
		if s.Name == rjName && s.ObservedParallelism != nil {
			return *s.ObservedParallelism
		}
	}
	return 0
}

// scaleOfObject is scaleOf for the JobSet passed to admission validation;
// a JobSet that lost the replicatedJob yields an empty Scale.
func scaleOfObject(obj runtime.Object, rjName string) runtime.Object {
	js, ok := obj.(*jobset.JobSet)
	if !ok {
		return obj
	}
	i := findReplicatedJob(js, rjName)
	if i < 0 {
		return &Scale{}
	}
	return scaleOf(js, i)
}

func toScaleCreateValidation(f rest.ValidateObjectFunc, rjName string) rest.ValidateObjectFunc {
	if f == nil {
		return nil
	}
	return func(ctx context.Context, obj runtime.Object) error {
		return f(ctx, scaleOfObject(obj, rjName))
	}
}

func toScaleUpdateValidation(f rest.ValidateObjectUpdateFunc, rjName string) rest.ValidateObjectUpdateFunc {
	if f == nil {
		return nil
	}
	return func(ctx context.Context, obj, old runtime.Object) error {
		return f(ctx, scaleOfObject(obj, rjName), scaleOfObject(old, rjName))
	}
}

// parallelismPath is where the scale's spec.replicas lives in a v1alpha2
// JobSet, for handing field ownership between the two.
func parallelismPath(rjName string) managedfields.ResourcePathMappings {
	return managedfields.ResourcePathMappings{
		v1alpha2.SchemeGroupVersion.String(): fieldpath.MakePathOrDie(
			"spec", "replicatedJobs",
			fieldpath.KeyByFields("name", rjName),
			"template", "spec", "parallelism"),
	}
}

// scaleUpdatedObjectInfo turns the JobSet read from storage into a Scale,
// lets the request (body, patch, field manager, admission) update that
// Scale, and writes the result back into the JobSet.
type scaleUpdatedObjectInfo struct {
	name       string
	rjName     string
	reqObjInfo rest.UpdatedObjectInfo
}

// Preconditions are checked on the Scale in UpdatedObject instead: the
// Scale's uid is the ReplicatedJob's, not the JobSet's.
func (i *scaleUpdatedObjectInfo) Preconditions() *metav1.Preconditions { return nil }

func (i *scaleUpdatedObjectInfo) UpdatedObject(ctx context.Context, oldObj runtime.Object) (runtime.Object, error) {
	stored, ok := oldObj.(*jobset.JobSet)
	if !ok || stored == nil {
		return nil, notFound(i.name)
	}
	js := stored.DeepCopy()
	idx := findReplicatedJob(js, i.rjName)
	if idx < 0 {
		return nil, notFound(i.name)
	}

	oldScale := scaleOf(js, idx)
	handler := managedfields.NewScaleHandler(js.ManagedFields, v1alpha2.SchemeGroupVersion, parallelismPath(i.rjName))
	scaleManagedFields, err := handler.ToSubresource()
	if err != nil {
		return nil, err
	}
	oldScale.ManagedFields = scaleManagedFields

	if p := i.reqObjInfo.Preconditions(); p != nil && p.UID != nil && *p.UID != oldScale.UID {
		return nil, apierrors.NewConflict(Resource, i.name, fmt.Errorf("precondition failed: uid %s, but the ReplicatedJob's is %s: the JobSet was recreated", *p.UID, oldScale.UID))
	}

	obj, err := i.reqObjInfo.UpdatedObject(ctx, oldScale)
	if err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, apierrors.NewBadRequest("nil update passed to Scale")
	}
	scale, ok := obj.(*Scale)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected a Scale, got %T", obj))
	}
	if scale.UID != "" && scale.UID != oldScale.UID {
		return nil, apierrors.NewConflict(Resource, i.name, fmt.Errorf("the Scale's uid %s is not the ReplicatedJob's (%s): the JobSet was recreated", scale.UID, oldScale.UID))
	}
	if errs := validateScale(js, idx, scale); len(errs) > 0 {
		return nil, apierrors.NewInvalid(autoscalingv1.SchemeGroupVersion.WithKind("Scale").GroupKind(), i.name, errs)
	}

	// A resourceVersion in the Scale makes the write conditional on the
	// JobSet being unchanged since; the store answers 409 otherwise.
	if scale.ResourceVersion != "" {
		js.ResourceVersion = scale.ResourceVersion
	}

	spec := &js.Spec.ReplicatedJobs[idx].Template.Spec
	oldParallelism := parallelismOf(spec)
	if scale.Spec.Replicas != oldParallelism {
		if spec.Completions != nil && *spec.Completions == oldParallelism {
			spec.Completions = ptrInt32(scale.Spec.Replicas)
		}
		spec.Parallelism = ptrInt32(scale.Spec.Replicas)
	}

	parentManagedFields, err := handler.ToParent(scale.ManagedFields)
	if err != nil {
		return nil, err
	}
	js.ManagedFields = parentManagedFields
	return js, nil
}

// validateScale checks what is particular to a scale write; the JobSet's
// update validation checks the rest (Indexed only, replicas × parallelism
// within int32, no change of a terminal JobSet).
func validateScale(js *jobset.JobSet, idx int, scale *Scale) field.ErrorList {
	var errs field.ErrorList
	replicas := field.NewPath("spec", "replicas")
	if scale.Spec.Replicas < 1 {
		errs = append(errs, field.Invalid(replicas, scale.Spec.Replicas,
			"must be at least 1: a replicatedJob cannot run Jobs of zero pods; to stop its pods, suspend the JobSet (spec.suspend: true) instead"))
	}
	rj := &js.Spec.ReplicatedJobs[idx]
	if scale.Spec.Replicas != parallelismOf(&rj.Template.Spec) {
		if m := rj.Template.Spec.CompletionMode; m == nil || *m != batchv1.IndexedCompletion {
			errs = append(errs, field.Forbidden(replicas,
				fmt.Sprintf("replicatedJob %q has completionMode NonIndexed; only Indexed Jobs can change parallelism", rj.Name)))
		}
		if js.Labels[jobset.QueueNameLabel] != "" && js.Annotations[jobset.AllowScaleUnderQueueAnnotation] != "true" {
			errs = append(errs, field.Forbidden(replicas,
				fmt.Sprintf("JobSet %q is managed by a queue (label %s): a changed pod count makes Kueue evict and requeue it; annotate the JobSet with %s: \"true\" to allow scaling",
					js.Name, jobset.QueueNameLabel, jobset.AllowScaleUnderQueueAnnotation)))
		}
	}
	return errs
}

func ptrInt32(v int32) *int32 { return &v }
