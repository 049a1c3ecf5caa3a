// Package jobcache holds the compact form in which the controller caches
// its child Jobs. A batchv1.Job is 1.3 KB of struct even with its pod
// template emptied (the template is held inline); the cached Job keeps only
// what the controller and placement read, in 224 bytes of struct, and is read
// back as a batchv1.Job with Of.
package jobcache

import (
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/controller/cachedmeta"
)

// Job is a cached child Job. Through its metadata (cachedmeta.Meta) it
// implements metav1.Object, so that the informer's key and index
// functions apply.
//
// Of its spec it keeps the sizes, backoff limits, suspend, managedBy and
// whether it has a pod failure policy (never its rules); of its status
// the conditions and pod counts. Not read, so not kept: the completion
// mode (placement.GateJob reads it of Jobs being built), the pod
// template, the selector, the deadlines, TTL and replacement policy, the
// start and completion times, the terminating and uncounted pods, the
// completed and failed indexes. The optional numbers are held as values
// with a bit each for whether they are set (a pointer and the number it
// points at took 16 bytes, the value takes 4), and read back as pointers
// into the cached Job.
type Job struct {
	cachedmeta.Meta
	parallelism, completions, backoffLimit, backoffLimitPerIndex int32
	active, succeeded, failed, ready                             int32
	managedBy                                                    *string
	conditions                                                   []batchv1.JobCondition
	set                                                          fields
}

// fields is a set of bits: which optional fields are set, and the
// booleans.
type fields uint8

const (
	hasParallelism fields = 1 << iota
	hasCompletions
	hasBackoffLimit
	hasBackoffLimitPerIndex
	hasReady
	hasSuspend
	suspended
	hasPodFailurePolicy
)

// PodFailurePolicy stands in a Job read from the cache for its pod
// failure policy: only whether a Job has one is read, never its rules.
var PodFailurePolicy = &batchv1.PodFailurePolicy{}

// Shared values of Job.Spec.Suspend: cached Jobs are never changed.
var suspendTrue, suspendFalse = true, false

// Compact returns the cached form of job. Of its metadata it keeps the
// name, namespace, UID, resource version, creation and deletion times,
// labels, annotations and owner references (the caller trims the labels
// and annotations); of its spec and status the fields named on Job.
// It shares job's strings, conditions and managedBy.
func Compact(job *batchv1.Job) *Job {
	s, st := &job.Spec, &job.Status
	out := &Job{
		Meta:       cachedmeta.Of(&job.ObjectMeta),
		managedBy:  s.ManagedBy,
		conditions: st.Conditions,
		active:     st.Active, succeeded: st.Succeeded, failed: st.Failed,
	}
	out.setInt32(&out.parallelism, s.Parallelism, hasParallelism)
	out.setInt32(&out.completions, s.Completions, hasCompletions)
	out.setInt32(&out.backoffLimit, s.BackoffLimit, hasBackoffLimit)
	out.setInt32(&out.backoffLimitPerIndex, s.BackoffLimitPerIndex, hasBackoffLimitPerIndex)
	out.setInt32(&out.ready, st.Ready, hasReady)
	if s.Suspend != nil {
		out.set |= hasSuspend
		if *s.Suspend {
			out.set |= suspended
		}
	}
	if s.PodFailurePolicy != nil {
		out.set |= hasPodFailurePolicy
	}
	return out
}

func (j *Job) setInt32(dst *int32, v *int32, bit fields) {
	if v != nil {
		*dst = *v
		j.set |= bit
	}
}

// int32Ptr returns a pointer to the cached field v when bit is set.
func (j *Job) int32Ptr(v *int32, bit fields) *int32 {
	if j.set&bit == 0 {
		return nil
	}
	return v
}

// Job returns the cached Job as a batchv1.Job. Its labels and annotations
// are new maps; its other slices and pointers point into the cache: like
// any cached object, it must not be changed.
func (j *Job) Job() *batchv1.Job {
	out := &batchv1.Job{
		ObjectMeta: j.Meta.ObjectMeta(),
		Spec: batchv1.JobSpec{
			Parallelism:          j.int32Ptr(&j.parallelism, hasParallelism),
			Completions:          j.int32Ptr(&j.completions, hasCompletions),
			BackoffLimit:         j.int32Ptr(&j.backoffLimit, hasBackoffLimit),
			BackoffLimitPerIndex: j.int32Ptr(&j.backoffLimitPerIndex, hasBackoffLimitPerIndex),
			ManagedBy:            j.managedBy,
		},
		Status: batchv1.JobStatus{
			Conditions: j.conditions,
			Active:     j.active,
			Succeeded:  j.succeeded,
			Failed:     j.failed,
			Ready:      j.int32Ptr(&j.ready, hasReady),
		},
	}
	if j.set&hasSuspend != 0 {
		out.Spec.Suspend = &suspendFalse
		if j.set&suspended != 0 {
			out.Spec.Suspend = &suspendTrue
		}
	}
	if j.set&hasPodFailurePolicy != 0 {
		out.Spec.PodFailurePolicy = PodFailurePolicy
	}
	return out
}

// SameButCounts reports whether cur holds what old does but perhaps for
// its active, ready and succeeded pod counts: the same metadata (but the
// resource version), spec, failed count and conditions. A change of
// fields the cache does not keep (the start time, terminating pods) reads
// as no change.
func SameButCounts(old, cur *Job) bool {
	return old.Meta.SameButVersion(&cur.Meta) && old.set&^hasReady == cur.set&^hasReady &&
		old.parallelism == cur.parallelism && old.completions == cur.completions &&
		old.backoffLimit == cur.backoffLimit && old.backoffLimitPerIndex == cur.backoffLimitPerIndex &&
		old.failed == cur.failed && ptr.Equal(old.managedBy, cur.managedBy) &&
		sameConditions(old.conditions, cur.conditions)
}

func sameConditions(a, b []batchv1.JobCondition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message ||
			!x.LastTransitionTime.Equal(&y.LastTransitionTime) || !x.LastProbeTime.Equal(&y.LastProbeTime) {
			return false
		}
	}
	return true
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
