// Package invariants states what must hold between JobSets and their child
// Jobs after any fault, and what a sequence of writes with known and
// unknown outcomes allows a field to read afterwards. The faults suite
// polls these checks on a live cluster.
package invariants

import (
	"fmt"
	"sort"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// Expectation is what a test knows about the JobSets beyond their spec.
type Expectation struct {
	// Restarts, when set, is the number of failure restarts every JobSet
	// went through: restarts, restartsCountTowardsMax and executionAttempts
	// must each equal it.
	Restarts *int32
	// MaxAttempts, when set instead, bounds executionAttempts of a JobSet
	// (it grows by one per restart and per resume the controller saw),
	// while restarts and restartsCountTowardsMax must be 0.
	MaxAttempts func(name string) int32
	// Running: pods run until told otherwise, so the status of a JobSet
	// that is neither suspended nor finished counts every Job active.
	Running bool
}

// Namespace checks every JobSet of a namespace against the Jobs of that
// namespace: Jobs whose controlling JobSet is gone are orphans, and each
// JobSet is checked with JobSet. One line per violation, sorted.
func Namespace(jobsets []v1alpha2.JobSet, jobs []batchv1.Job, exp Expectation) []string {
	known := map[string]bool{}
	for _, js := range jobsets {
		known[string(js.UID)] = true
	}
	var out []string
	byOwner := map[string][]batchv1.Job{}
	for _, j := range jobs {
		owner := metav1.GetControllerOf(&j)
		if owner == nil || owner.Kind != "JobSet" {
			continue
		}
		if !known[string(owner.UID)] {
			out = append(out, fmt.Sprintf("Job %s: orphan (its JobSet %s is gone)", j.Name, owner.Name))
			continue
		}
		if j.DeletionTimestamp == nil {
			byOwner[string(owner.UID)] = append(byOwner[string(owner.UID)], j)
		}
	}
	for i := range jobsets {
		out = append(out, JobSet(&jobsets[i], byOwner[string(jobsets[i].UID)], exp)...)
	}
	sort.Strings(out)
	return out
}

// Finished reports whether the JobSet completed or failed.
func Finished(js *v1alpha2.JobSet) bool {
	return meta.IsStatusConditionTrue(js.Status.Conditions, string(v1alpha2.JobSetCompleted)) ||
		meta.IsStatusConditionTrue(js.Status.Conditions, string(v1alpha2.JobSetFailed))
}

// JobSet checks one JobSet against the live (not deleting) Jobs it
// controls. A JobSet that is neither suspended nor finished has exactly
// one Job per replica of each replicatedJob, named <jobset>-<rj>-<index>,
// of the restart attempt its status counts, running, with its template's
// parallelism; a suspended one has either no Jobs (it never ran) or all of
// them, suspended. A JobSet being deleted is the garbage collector's.
func JobSet(js *v1alpha2.JobSet, jobs []batchv1.Job, exp Expectation) []string {
	var out []string
	bad := func(format string, args ...any) {
		out = append(out, js.Name+": "+fmt.Sprintf(format, args...))
	}
	if js.DeletionTimestamp != nil {
		return nil
	}
	st := js.Status
	attempts := ptr.Deref(st.ExecutionAttempts, 0)
	if r := exp.Restarts; r != nil && (st.Restarts != *r || st.RestartsCountTowardsMax != *r || attempts != *r) {
		bad("restarts %d, towards max %d, execution attempts %d; want %d each", st.Restarts, st.RestartsCountTowardsMax, attempts, *r)
	}
	if exp.MaxAttempts != nil {
		if m := exp.MaxAttempts(js.Name); st.Restarts != 0 || st.RestartsCountTowardsMax != 0 || attempts > m {
			bad("restarts %d, towards max %d, execution attempts %d; want 0, 0 and at most %d (the resumes sent)", st.Restarts, st.RestartsCountTowardsMax, attempts, m)
		}
	}
	if Finished(js) {
		return out
	}
	suspended := ptr.Deref(js.Spec.Suspend, false)
	attempt := strconv.Itoa(int(st.Restarts))
	want := map[string]v1alpha2.ReplicatedJob{}
	for _, rj := range js.Spec.ReplicatedJobs {
		for i := 0; i < int(ptr.Deref(rj.Replicas, 1)); i++ {
			want[fmt.Sprintf("%s-%s-%d", js.Name, rj.Name, i)] = rj
		}
	}
	have := map[string]bool{}
	for _, j := range jobs {
		rj, ok := want[j.Name]
		if !ok {
			bad("Job %s is not asked for by the spec", j.Name)
			continue
		}
		if have[j.Name] {
			bad("Job %s exists twice", j.Name)
		}
		have[j.Name] = true
		switch {
		case j.Labels[v1alpha2.RestartsKey] != attempt:
			bad("Job %s is of attempt %s, status counts %s restarts", j.Name, j.Labels[v1alpha2.RestartsKey], attempt)
		case suspended && !ptr.Deref(j.Spec.Suspend, false):
			bad("Job %s runs while the JobSet is suspended", j.Name)
		case !suspended && ptr.Deref(j.Spec.Suspend, false):
			bad("Job %s is suspended while the JobSet is not", j.Name)
		case !suspended && ptr.Deref(j.Spec.Parallelism, 1) != ptr.Deref(rj.Template.Spec.Parallelism, 1):
			bad("Job %s has parallelism %d, the spec %d", j.Name, ptr.Deref(j.Spec.Parallelism, 1), ptr.Deref(rj.Template.Spec.Parallelism, 1))
		}
	}
	if suspended {
		if len(jobs) != 0 && len(have) != len(want) {
			bad("suspended with %d of its %d Jobs", len(have), len(want))
		}
		return out
	}
	for name := range want {
		if !have[name] {
			bad("Job %s is missing", name)
		}
	}
	if exp.Running {
		for _, rj := range js.Spec.ReplicatedJobs {
			var s v1alpha2.ReplicatedJobStatus
			for _, x := range st.ReplicatedJobsStatus {
				if x.Name == rj.Name {
					s = x
				}
			}
			if s.Active != ptr.Deref(rj.Replicas, 1) {
				bad("status of %s: %d active Jobs, want %d", rj.Name, s.Active, ptr.Deref(rj.Replicas, 1))
			}
		}
	}
	return out
}

// Field is the value a field must read after a sequence of writes: the one
// of the last acknowledged write, or that of a later write whose outcome is
// unknown (it failed with an error that leaves open whether it happened).
type Field struct {
	Want  string
	maybe map[string]bool
}

// Set records a write of v; acked tells whether it was acknowledged.
func (f *Field) Set(v string, acked bool) {
	if acked {
		f.Want, f.maybe = v, nil
		return
	}
	if f.maybe == nil {
		f.maybe = map[string]bool{}
	}
	f.maybe[v] = true
}

// Allows reports whether the field may read v.
func (f *Field) Allows(v string) bool { return v == f.Want || f.maybe[v] }

// Uncertain reports whether a write of unknown outcome followed the last
// acknowledged one.
func (f *Field) Uncertain() bool { return len(f.maybe) > 0 }

// Maybe lists the values of writes of unknown outcome, sorted.
func (f *Field) Maybe() []string {
	var out []string
	for v := range f.maybe {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}
