// Package jobcache holds the compact form in which the controller caches
// its child Jobs. A batchv1.Job is 1.3 KB of struct even with its pod
// template emptied (the template is held inline); the cached Job keeps only
// what the controller and placement read, in 272 bytes of struct, and is read
// back as a batchv1.Job with Of.
package jobcache

import (
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/nativejobset/jobset/pkg/controller/cachedmeta"
)

// Job is a cached child Job. Through its metadata (cachedmeta.Meta) it
// implements metav1.Object, so that the informer's key and index
// functions apply.
type Job struct {
	cachedmeta.Meta
	Spec   Spec
	Status Status
}

// Spec holds the fields of a Job's spec that are read from the cache. Not
// read: the completion mode (placement.GateJob reads it of Jobs being
// built), the pod template, the selector, the policies but whether there
// is a pod failure policy, the deadlines, TTL and replacement policy.
type Spec struct {
	Parallelism, Completions           *int32
	BackoffLimit, BackoffLimitPerIndex *int32
	Suspend                            *bool
	ManagedBy                          *string
	// HasPodFailurePolicy: only whether the Job has a pod failure policy
	// is read, never its rules.
	HasPodFailurePolicy bool
}

// Status holds the fields of a Job's status that are read from the cache:
// its conditions and pod counts. Not read: the start and completion times,
// the terminating and uncounted pods, the completed and failed indexes.
type Status struct {
	Conditions                []batchv1.JobCondition
	Active, Succeeded, Failed int32
	Ready                     *int32
}

// PodFailurePolicy stands in a Job read from the cache for its pod
// failure policy (see Spec.HasPodFailurePolicy).
var PodFailurePolicy = &batchv1.PodFailurePolicy{}

// Compact returns the cached form of job. Of its metadata it keeps the
// name, namespace, UID, resource version, creation and deletion times,
// labels, annotations and owner references (the caller trims the labels
// and annotations); of its spec and status the fields of Spec and Status.
// The pod template, the selector, the success policy, the other fields of
// spec and status and the rest of the metadata (generation, finalizers,
// generateName, managedFields) are never read.
func Compact(job *batchv1.Job) *Job {
	s := &job.Spec
	return &Job{
		Meta: cachedmeta.Of(&job.ObjectMeta),
		Spec: Spec{
			Parallelism:          s.Parallelism,
			Completions:          s.Completions,
			BackoffLimit:         s.BackoffLimit,
			BackoffLimitPerIndex: s.BackoffLimitPerIndex,
			Suspend:              s.Suspend,
			ManagedBy:            s.ManagedBy,
			HasPodFailurePolicy:  s.PodFailurePolicy != nil,
		},
		Status: Status{
			Conditions: job.Status.Conditions,
			Active:     job.Status.Active,
			Succeeded:  job.Status.Succeeded,
			Failed:     job.Status.Failed,
			Ready:      job.Status.Ready,
		},
	}
}

// Job returns the cached Job as a batchv1.Job. Its labels and annotations
// are new maps; it shares the cache's other slices and pointers: like any
// cached object, it must not be changed.
func (j *Job) Job() *batchv1.Job {
	out := &batchv1.Job{
		ObjectMeta: j.Meta.ObjectMeta(),
		Spec: batchv1.JobSpec{
			Parallelism:          j.Spec.Parallelism,
			Completions:          j.Spec.Completions,
			BackoffLimit:         j.Spec.BackoffLimit,
			BackoffLimitPerIndex: j.Spec.BackoffLimitPerIndex,
			Suspend:              j.Spec.Suspend,
			ManagedBy:            j.Spec.ManagedBy,
		},
		Status: batchv1.JobStatus{
			Conditions: j.Status.Conditions,
			Active:     j.Status.Active,
			Succeeded:  j.Status.Succeeded,
			Failed:     j.Status.Failed,
			Ready:      j.Status.Ready,
		},
	}
	if j.Spec.HasPodFailurePolicy {
		out.Spec.PodFailurePolicy = PodFailurePolicy
	}
	return out
}

// Of returns the Job an informer object holds: a cached Job, a
// batchv1.Job, or either inside a cache.DeletedFinalStateUnknown.
func Of(obj interface{}) (*batchv1.Job, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	switch o := obj.(type) {
	case *Job:
		return o.Job(), true
	case *batchv1.Job:
		return o, true
	}
	return nil, false
}

// GetObjectKind is that of a Job: Job is a runtime.Object, so that
// client-go's helpers that want one (the cache mutation detector) accept
// it.
func (j *Job) GetObjectKind() schema.ObjectKind {
	return schema.EmptyObjectKind
}

// DeepCopyObject returns a deep copy.
func (j *Job) DeepCopyObject() runtime.Object {
	return Compact(j.Job().DeepCopy())
}
