package faults

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// expectation is what a test knows about the JobSets of a namespace beyond
// their spec.
type expectation struct {
	// restarts, when set, is the number of failure restarts every JobSet
	// went through (restarts, restartsCountTowardsMax and
	// executionAttempts must each equal it).
	restarts *int32
	// maxAttempts, when set instead, bounds executionAttempts of a JobSet
	// (it grows by one per restart and per resume the controller saw), while
	// restarts and restartsCountTowardsMax must be 0.
	maxAttempts func(name string) int32
	// running: pods run until told otherwise, so every Job of a JobSet that
	// is neither suspended nor finished is active.
	running bool
}

// violations checks every JobSet of the namespace against its child Jobs:
// a JobSet that is neither suspended nor finished has exactly one Job per
// replica of each replicatedJob, named <jobset>-<rj>-<index>, owned by it,
// of the restart attempt its status counts, with its template's
// parallelism, and its status counts them; a suspended JobSet has no Job
// that is not suspended; no Job is left whose JobSet is gone or does not
// ask for it. It returns one line per violation.
func violations(ctx context.Context, ns string, exp expectation) ([]string, error) {
	jobsets, err := cl.JobSets.JobsetV1alpha2().JobSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	jobs, err := cl.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	byOwner := map[string][]batchv1.Job{}
	var out []string
	known := map[string]bool{}
	for _, js := range jobsets.Items {
		known[string(js.UID)] = true
	}
	for _, j := range jobs.Items {
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
	for i := range jobsets.Items {
		out = append(out, jobSetViolations(&jobsets.Items[i], byOwner[string(jobsets.Items[i].UID)], exp)...)
	}
	sort.Strings(out)
	return out, nil
}

func finished(js *v1alpha2.JobSet) bool {
	return meta.IsStatusConditionTrue(js.Status.Conditions, string(v1alpha2.JobSetCompleted)) ||
		meta.IsStatusConditionTrue(js.Status.Conditions, string(v1alpha2.JobSetFailed))
}

func jobSetViolations(js *v1alpha2.JobSet, jobs []batchv1.Job, exp expectation) []string {
	var out []string
	bad := func(format string, args ...any) {
		out = append(out, js.Name+": "+fmt.Sprintf(format, args...))
	}
	if js.DeletionTimestamp != nil {
		return nil // the garbage collector's part; orphans are checked once it is gone
	}
	st := js.Status
	if r := exp.restarts; r != nil && (st.Restarts != *r || st.RestartsCountTowardsMax != *r || st.ExecutionAttempts != *r) {
		bad("restarts %d, towards max %d, execution attempts %d; want %d each", st.Restarts, st.RestartsCountTowardsMax, st.ExecutionAttempts, *r)
	}
	if exp.maxAttempts != nil {
		if m := exp.maxAttempts(js.Name); st.Restarts != 0 || st.RestartsCountTowardsMax != 0 || st.ExecutionAttempts > m {
			bad("restarts %d, towards max %d, execution attempts %d; want 0, 0 and at most %d (the resumes sent)", st.Restarts, st.RestartsCountTowardsMax, st.ExecutionAttempts, m)
		}
	}
	if finished(js) {
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
		switch {
		case !ok:
			bad("Job %s is not asked for by the spec", j.Name)
			continue
		case j.Labels[v1alpha2.RestartsKey] != attempt:
			bad("Job %s is of attempt %s, status counts %s restarts", j.Name, j.Labels[v1alpha2.RestartsKey], attempt)
		case suspended && !ptr.Deref(j.Spec.Suspend, false):
			bad("Job %s runs while the JobSet is suspended", j.Name)
		case !suspended && ptr.Deref(j.Spec.Suspend, false):
			bad("Job %s is suspended while the JobSet is not", j.Name)
		case !suspended && ptr.Deref(j.Spec.Parallelism, 1) != ptr.Deref(rj.Template.Spec.Parallelism, 1):
			bad("Job %s has parallelism %d, the spec %d", j.Name, ptr.Deref(j.Spec.Parallelism, 1), ptr.Deref(rj.Template.Spec.Parallelism, 1))
		}
		have[j.Name] = true
	}
	if suspended {
		// Suspended before it ever ran: no Jobs; after running: all of them, suspended.
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
	if exp.running {
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

// checkInvariants polls until the namespace holds the invariants (a JobSet
// that never gets there is stuck), and fails the test with the last
// violations otherwise. It returns how long they took to hold.
func checkInvariants(t *testing.T, ns string, exp expectation, timeout time.Duration) time.Duration {
	t.Helper()
	var last []string
	var lastErr error
	start := time.Now()
	err := pollFor(timeout, func(ctx context.Context) bool {
		last, lastErr = violations(ctx, ns, exp)
		return lastErr == nil && len(last) == 0
	})
	if err != nil {
		if len(last) > 20 {
			last = append(last[:20], fmt.Sprintf("... and %d more", len(last)-20))
		}
		t.Errorf("the invariants did not hold within %s (last error %v):\n%s", timeout, lastErr, strings.Join(last, "\n"))
		return timeout
	}
	t.Logf("invariants hold (%.1fs after the check began)", time.Since(start).Seconds())
	return time.Since(start)
}

func pollFor(timeout time.Duration, cond func(ctx context.Context) bool) error {
	return waitPoll(timeout, func(ctx context.Context) (bool, error) { return cond(ctx), nil })
}
