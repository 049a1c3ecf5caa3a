package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

func TestFailurePolicyFailJobSet(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	js := runningJobSet(ns, "failfast", withPodFailurePolicy(replicatedJob("workers", 2, 1, "")))
	js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 3, Rules: []v1alpha2.FailurePolicyRule{{
		Name: "fatal", Action: v1alpha2.FailJobSet, OnJobFailureReasons: []string{batchv1.JobReasonPodFailurePolicy},
	}}}
	createJobSet(t, js)
	waitJobs(t, ns, "failfast", 2, "0")
	failPodWithCode(t, ns, "failfast-workers-1", exitFailJob)

	got := waitCondition(t, ns, "failfast", v1alpha2.JobSetFailed, 2*time.Minute)
	if r := conditionReason(got, v1alpha2.JobSetFailed); r != "FailJobSetFailurePolicyAction" {
		t.Errorf("Failed reason = %q, want FailJobSetFailurePolicyAction", r)
	}
	if got.Status.Restarts != 0 {
		t.Errorf("restarts = %d, want 0: FailJobSet never restarts", got.Status.Restarts)
	}
	waitEvent(t, ns, "failfast", "FailJobSetFailurePolicyAction")
}

func TestFailurePolicyRestartJobSetAndIgnoreMaxRestarts(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	js := runningJobSet(ns, "ignoremax", replicatedJob("workers", 2, 1, ""))
	js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 0, Rules: []v1alpha2.FailurePolicyRule{{
		Name: "transient", Action: v1alpha2.RestartJobSetAndIgnoreMaxRestarts,
	}}}
	createJobSet(t, js)
	waitJobs(t, ns, "ignoremax", 2, "0")
	for attempt, job := range []string{"ignoremax-workers-0", "ignoremax-workers-1"} {
		failPodWithCode(t, ns, job, otherExitCode)
		next := attempt + 1
		waitJobs(t, ns, "ignoremax", 2, itoa(next))
		got := waitStatus(t, ns, "ignoremax", "restart counted", time.Minute, func(js *v1alpha2.JobSet) bool {
			return js.Status.Restarts == int32(next)
		})
		if got.Status.RestartsCountTowardsMax != 0 {
			t.Errorf("restartsCountTowardsMax = %d, want 0", got.Status.RestartsCountTowardsMax)
		}
		if ptr.Deref(got.Status.ExecutionAttempts, 0) != int32(next) {
			t.Errorf("executionAttempts = %d, want %d", ptr.Deref(got.Status.ExecutionAttempts, 0), next)
		}
		if r := conditionReason(got, v1alpha2.JobSetFailed); r != "" {
			t.Fatalf("JobSet failed (%s) although maxRestarts is ignored", r)
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, string(v1alpha2.JobSetRestarting)); c == nil || c.Reason != "FailurePolicy_transient" && c.Reason != "JobsReady" {
			t.Errorf("RestartingJobSet condition = %+v, want reason FailurePolicy_transient (or JobsReady once restarted)", c)
		}
	}
}

func TestFailurePolicyRestartJob(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ctx := context.Background()
	js := runningJobSet(ns, "perjob", replicatedJob("workers", 3, 1, ""))
	js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 1, Rules: []v1alpha2.FailurePolicyRule{{
		Name: "one", Action: v1alpha2.RestartJob,
	}}}
	createJobSet(t, js)
	before := map[string]string{}
	for _, j := range waitJobs(t, ns, "perjob", 3, "0") {
		before[j.Name] = string(j.UID)
	}
	failPodWithCode(t, ns, "perjob-workers-1", otherExitCode)

	var restarted *batchv1.Job
	eventually(t, 2*time.Minute, "perjob-workers-1 to be recreated", func(ctx context.Context) (bool, error) {
		j := getJob(ctx, ns, "perjob-workers-1")
		if j == nil || string(j.UID) == before[j.Name] || j.DeletionTimestamp != nil {
			return false, nil
		}
		restarted = j
		return true, nil
	})
	if got := restarted.Labels[v1alpha2.JobRestartsKey]; got != "1" {
		t.Errorf("job-restart-attempt label = %q, want 1", got)
	}
	if got := restarted.Annotations[v1alpha2.JobRestartsKey]; got != "1" {
		t.Errorf("job-restart-attempt annotation = %q, want 1", got)
	}
	if got := restarted.Spec.Template.Labels[v1alpha2.JobRestartsKey]; got != "1" {
		t.Errorf("pod template job-restart-attempt label = %q, want 1", got)
	}
	if got := restarted.Labels[v1alpha2.RestartsKey]; got != "0" {
		t.Errorf("restart-attempt label = %q, want 0: only the Job restarted", got)
	}
	for _, name := range []string{"perjob-workers-0", "perjob-workers-2"} {
		if j := getJob(ctx, ns, name); j == nil || string(j.UID) != before[name] {
			t.Errorf("Job %s was replaced; only perjob-workers-1 should restart", name)
		}
	}
	got := waitStatus(t, ns, "perjob", "jobRestarts recorded", time.Minute, func(js *v1alpha2.JobSet) bool {
		s := rjStatus(js, "workers")
		return len(s.JobRestarts) >= 2 && s.JobRestarts[1] == 1
	})
	// One entry per Job of the replicatedJob, as upstream.
	s := rjStatus(got, "workers")
	if fmt.Sprint(s.JobRestarts) != "[0 1 0]" || fmt.Sprint(s.JobRestartsCountTowardsMax) != "[0 1 0]" {
		t.Errorf("jobRestarts %v, jobRestartsCountTowardsMax %v; want [0 1 0] for both", s.JobRestarts, s.JobRestartsCountTowardsMax)
	}
	if got.Status.Restarts != 0 {
		t.Errorf("restarts = %d, want 0 after a per-Job restart", got.Status.Restarts)
	}
	waitEvent(t, ns, "perjob", "RestartJobFailurePolicyAction")

	// Another Job fails: the JobSet's one restart budget (maxRestarts 1)
	// is used up, whichever Job used it.
	failPodWithCode(t, ns, "perjob-workers-2", otherExitCode)
	got = waitCondition(t, ns, "perjob", v1alpha2.JobSetFailed, 2*time.Minute)
	if r := conditionReason(got, v1alpha2.JobSetFailed); r != "ReachedMaxRestarts" {
		t.Errorf("Failed reason = %q, want ReachedMaxRestarts", r)
	}
}

func TestFailurePolicyRestartJobAndIgnoreMaxRestarts(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	js := runningJobSet(ns, "perjobfree", replicatedJob("workers", 2, 1, ""))
	js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 0, Rules: []v1alpha2.FailurePolicyRule{{
		Name: "free", Action: v1alpha2.RestartJobAndIgnoreMaxRestarts,
	}}}
	createJobSet(t, js)
	waitJobs(t, ns, "perjobfree", 2, "0")
	for n := 1; n <= 2; n++ {
		failPodWithCode(t, ns, "perjobfree-workers-0", otherExitCode)
		eventually(t, 2*time.Minute, "perjobfree-workers-0 restarted", func(ctx context.Context) (bool, error) {
			j := getJob(ctx, ns, "perjobfree-workers-0")
			return j != nil && j.DeletionTimestamp == nil && j.Labels[v1alpha2.JobRestartsKey] == itoa(n) && j.Status.Active > 0, nil
		})
	}
	got := waitStatus(t, ns, "perjobfree", "jobRestarts [2 ...]", time.Minute, func(js *v1alpha2.JobSet) bool {
		s := rjStatus(js, "workers")
		return len(s.JobRestarts) >= 1 && s.JobRestarts[0] == 2
	})
	// Filled by RestartJob only, as upstream.
	if s := rjStatus(got, "workers"); len(s.JobRestartsCountTowardsMax) != 0 {
		t.Errorf("jobRestartsCountTowardsMax = %v, want none", s.JobRestartsCountTowardsMax)
	}
	if r := conditionReason(got, v1alpha2.JobSetFailed); r != "" {
		t.Errorf("JobSet failed (%s) although maxRestarts is ignored", r)
	}
	if got.Status.Restarts != 0 {
		t.Errorf("restarts = %d, want 0", got.Status.Restarts)
	}
}

// TestFailurePolicyRuleOrder checks that the first matching rule wins, with
// rules told apart by replicatedJob, failure reason and message pattern.
func TestFailurePolicyRuleOrder(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	js := runningJobSet(ns, "rules",
		withPodFailurePolicy(replicatedJob("driver", 1, 1, "")),
		withPodFailurePolicy(replicatedJob("workers", 2, 1, "")))
	js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 1, Rules: []v1alpha2.FailurePolicyRule{
		{Name: "driver_fatal", Action: v1alpha2.FailJobSet, TargetReplicatedJobs: []string{"driver"}},
		{Name: "code42", Action: v1alpha2.RestartJobSetAndIgnoreMaxRestarts, OnJobFailureMessagePatterns: []string{`exit code 42\b`}},
		// Would match the exit code 42 failure too, but comes later.
		{Name: "policy", Action: v1alpha2.FailJobSet, OnJobFailureReasons: []string{batchv1.JobReasonPodFailurePolicy}},
		{Name: "backoff", Action: v1alpha2.RestartJobSet, OnJobFailureReasons: []string{batchv1.JobReasonBackoffLimitExceeded}},
	}}
	createJobSet(t, js)
	waitJobs(t, ns, "rules", 3, "0")

	// 1. A worker exits with 42: rule code42 (not policy) restarts the set
	// without counting towards maxRestarts.
	failPodWithCode(t, ns, "rules-workers-0", exitFailJob)
	got := waitStatus(t, ns, "rules", "first restart", 2*time.Minute, func(js *v1alpha2.JobSet) bool { return js.Status.Restarts == 1 })
	restartingBy(t, got, "code42")
	if got.Status.RestartsCountTowardsMax != 0 || conditionReason(got, v1alpha2.JobSetFailed) != "" {
		t.Fatalf("after rule code42: towards max %d, failed %q; want 0 and not failed",
			got.Status.RestartsCountTowardsMax, conditionReason(got, v1alpha2.JobSetFailed))
	}
	waitJobs(t, ns, "rules", 3, "1")

	// 2. A worker exits with 7: BackoffLimitExceeded, rule backoff.
	failPodWithCode(t, ns, "rules-workers-1", otherExitCode)
	got = waitStatus(t, ns, "rules", "second restart", 2*time.Minute, func(js *v1alpha2.JobSet) bool { return js.Status.Restarts == 2 })
	restartingBy(t, got, "backoff")
	if got.Status.RestartsCountTowardsMax != 1 {
		t.Errorf("restartsCountTowardsMax = %d, want 1", got.Status.RestartsCountTowardsMax)
	}
	waitJobs(t, ns, "rules", 3, "2")

	// 3. The driver exits with 42: driver_fatal comes before code42.
	failPodWithCode(t, ns, "rules-driver-0", exitFailJob)
	got = waitCondition(t, ns, "rules", v1alpha2.JobSetFailed, 2*time.Minute)
	if r := conditionReason(got, v1alpha2.JobSetFailed); r != "FailJobSetFailurePolicyAction" {
		t.Errorf("Failed reason = %q, want FailJobSetFailurePolicyAction", r)
	}
	if got.Status.Restarts != 2 {
		t.Errorf("restarts = %d, want 2", got.Status.Restarts)
	}
	for _, reason := range []string{"RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction", "RestartJobSetFailurePolicyAction",
		"FailJobSetFailurePolicyAction", "FailurePolicy_code42", "FailurePolicy_backoff"} {
		waitEvent(t, ns, "rules", reason)
	}
	if reasons, err := eventReasons(context.Background(), ns, "rules"); err != nil || reasons["FailurePolicy_policy"] > 0 {
		t.Errorf("rule policy was applied although code42 comes first (events %v, err %v)", reasons, err)
	}
}

// restartingBy checks the RestartingJobSet condition right after a restart
// was counted: it names the rule, unless the new Jobs are already ready.
func restartingBy(t *testing.T, js *v1alpha2.JobSet, rule string) {
	t.Helper()
	c := meta.FindStatusCondition(js.Status.Conditions, string(v1alpha2.JobSetRestarting))
	if c == nil || (c.Reason != "FailurePolicy_"+rule && c.Reason != "JobsReady") {
		t.Errorf("RestartingJobSet = %+v, want reason FailurePolicy_%s", c, rule)
	}
}

// TestBlockingRecreate watches the Jobs during a restart: no Job of the
// next attempt may exist while a Job of the previous one still does.
func TestBlockingRecreate(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	js := runningJobSet(ns, "blocking", replicatedJob("workers", 3, 2, ""))
	js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 2, RestartStrategy: v1alpha2.BlockingRecreate}
	createJobSet(t, js)
	waitJobs(t, ns, "blocking", 3, "0")
	w := watchJobs(t, ns, "blocking", func(w *jobWatch, typ watch.EventType, job *batchv1.Job) {
		if typ == watch.Added && job.Labels[v1alpha2.RestartsKey] == "1" {
			if n := w.countAttempt("0"); n > 0 {
				t.Errorf("Job %s of attempt 1 created while %d Jobs of attempt 0 still exist", job.Name, n)
			}
		}
	})
	failPodWithCode(t, ns, "blocking-workers-2", otherExitCode)
	waitJobs(t, ns, "blocking", 3, "1")
	w.await(t, "the watch to see the Jobs of attempt 1", func() bool { return w.countAttempt("1") == 3 })
	w.stop()
	if got := getJobSet(t, ns, "blocking"); got.Status.Restarts != 1 {
		t.Errorf("restarts = %d, want 1", got.Status.Restarts)
	}
}

// TestRecreate restarts with the default strategy: every Job is replaced.
func TestRecreate(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	js := runningJobSet(ns, "recreate", replicatedJob("workers", 3, 2, ""))
	js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 2, RestartStrategy: v1alpha2.Recreate}
	createJobSet(t, js)
	waitJobs(t, ns, "recreate", 3, "0")
	w := watchJobs(t, ns, "recreate", nil)
	failPodWithCode(t, ns, "recreate-workers-0", otherExitCode)
	waitJobs(t, ns, "recreate", 3, "1")
	eventually(t, time.Minute, "the Jobs of attempt 0 to be gone", func(ctx context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.countAttempt("0") == 0 && w.countAttempt("1") == 3, nil
	})
	w.stop()
	for key, n := range w.added {
		if n > 1 {
			t.Errorf("Job %s created %d times", key, n)
		}
	}
	got := waitStatus(t, ns, "recreate", "restart finished", time.Minute, func(js *v1alpha2.JobSet) bool {
		c := meta.FindStatusCondition(js.Status.Conditions, string(v1alpha2.JobSetRestarting))
		return c != nil && c.Reason == "JobsReady"
	})
	if got.Status.Restarts != 1 {
		t.Errorf("restarts = %d, want 1", got.Status.Restarts)
	}
	// No rule: the default action, RestartJobSet.
	for _, reason := range []string{"RestartJobSetFailurePolicyAction", "DefaultFailurePolicy", "JobsReady"} {
		waitEvent(t, ns, "recreate", reason)
	}
}

// TestSimultaneousFailuresRestartOnce: two Jobs failing together restart
// the JobSet once.
func TestSimultaneousFailuresRestartOnce(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	js := runningJobSet(ns, "double", replicatedJob("workers", 3, 1, ""))
	js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 5}
	createJobSet(t, js)
	waitJobs(t, ns, "double", 3, "0")
	w := watchJobs(t, ns, "double", nil)
	failPodWithCode(t, ns, "double-workers-0", otherExitCode)
	failPodWithCode(t, ns, "double-workers-2", otherExitCode)
	waitJobs(t, ns, "double", 3, "1")
	got := waitStatus(t, ns, "double", "the restart to finish", time.Minute, func(js *v1alpha2.JobSet) bool {
		c := meta.FindStatusCondition(js.Status.Conditions, string(v1alpha2.JobSetRestarting))
		return c != nil && c.Reason == "JobsReady"
	})
	w.await(t, "the watch to see the Jobs of attempt 1", func() bool { return w.countAttempt("1") == 3 })
	w.stop()
	if got.Status.Restarts != 1 {
		t.Errorf("restarts = %d, want 1", got.Status.Restarts)
	}
	if s := rjStatus(got, "workers"); s.Failed != 0 || s.Ready != 3 {
		t.Errorf("workers status = %+v: only the current attempt counts", s)
	}
	for key, n := range w.added {
		if n > 1 || strings.Contains(key, "@2") {
			t.Errorf("Job %s created %d times", key, n)
		}
	}
}

// TestSimultaneousJobFailuresRestartEach: with RestartJob, two Jobs failing
// together are each restarted once.
func TestSimultaneousJobFailuresRestartEach(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	js := runningJobSet(ns, "pair", replicatedJob("workers", 3, 1, ""))
	js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 2, Rules: []v1alpha2.FailurePolicyRule{{Name: "each", Action: v1alpha2.RestartJob}}}
	createJobSet(t, js)
	waitJobs(t, ns, "pair", 3, "0")
	failPodWithCode(t, ns, "pair-workers-0", otherExitCode)
	failPodWithCode(t, ns, "pair-workers-1", otherExitCode)
	eventually(t, 2*time.Minute, "both Jobs restarted and running", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"pair-workers-0", "pair-workers-1"} {
			j := getJob(ctx, ns, name)
			if j == nil || j.Labels[v1alpha2.JobRestartsKey] != "1" || j.Status.Active == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	got := waitStatus(t, ns, "pair", "jobRestarts [1 1 ...]", time.Minute, func(js *v1alpha2.JobSet) bool {
		s := rjStatus(js, "workers")
		return len(s.JobRestarts) >= 2 && s.JobRestarts[0] == 1 && s.JobRestarts[1] == 1
	})
	if s := rjStatus(got, "workers"); len(s.JobRestarts) > 2 && s.JobRestarts[2] != 0 {
		t.Errorf("jobRestarts = %v", s.JobRestarts)
	}
	if got.Status.Restarts != 0 || conditionReason(got, v1alpha2.JobSetFailed) != "" {
		t.Errorf("restarts %d failed %q, want 0 and running", got.Status.Restarts, conditionReason(got, v1alpha2.JobSetFailed))
	}
}

// TestDeletedJobRecreated: a child Job deleted by someone else comes back
// in the same attempt.
func TestDeletedJobRecreated(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createJobSet(t, runningJobSet(ns, "regrow", replicatedJob("workers", 2, 1, "")))
	jobs := waitJobs(t, ns, "regrow", 2, "0")
	old := map[string]string{}
	for _, j := range jobs {
		old[j.Name] = string(j.UID)
	}
	kubectl(t, "delete", "job", "regrow-workers-1", "-n", ns, "--cascade=foreground", "--wait=false")
	eventually(t, 2*time.Minute, "regrow-workers-1 to be recreated", func(ctx context.Context) (bool, error) {
		j := getJob(ctx, ns, "regrow-workers-1")
		return j != nil && string(j.UID) != old[j.Name] && j.DeletionTimestamp == nil, nil
	})
	got := getJobSet(t, ns, "regrow")
	if got.Status.Restarts != 0 || conditionReason(got, v1alpha2.JobSetFailed) != "" {
		t.Errorf("restarts %d failed %q after a Job deletion, want 0 and running", got.Status.Restarts, conditionReason(got, v1alpha2.JobSetFailed))
	}
	if j := getJob(context.Background(), ns, "regrow-workers-0"); j == nil || string(j.UID) != old[j.Name] {
		t.Error("regrow-workers-0 was replaced")
	}
}

// TestSuspendDuringRestart suspends a JobSet while a BlockingRecreate
// restart is under way, then resumes it: the next attempt's Jobs run, the
// invariant of BlockingRecreate holds throughout, and both the restart and
// the resume count as execution attempts.
func TestSuspendDuringRestart(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	js := runningJobSet(ns, "pause", replicatedJob("workers", 3, 2, ""))
	js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 2, RestartStrategy: v1alpha2.BlockingRecreate}
	createJobSet(t, js)
	waitJobs(t, ns, "pause", 3, "0")
	w := watchJobs(t, ns, "pause", func(w *jobWatch, typ watch.EventType, job *batchv1.Job) {
		if typ == watch.Added && job.Labels[v1alpha2.RestartsKey] == "1" {
			if n := w.countAttempt("0"); n > 0 {
				t.Errorf("Job %s of attempt 1 created while %d Jobs of attempt 0 still exist", job.Name, n)
			}
		}
	})
	failPodWithCode(t, ns, "pause-workers-1", otherExitCode)
	waitStatus(t, ns, "pause", "the restart decided", time.Minute, func(js *v1alpha2.JobSet) bool { return js.Status.Restarts == 1 })
	kubectl(t, "patch", "jobset", "pause", "-n", ns, "--type=merge", "-p", `{"spec":{"suspend":true}}`)
	waitCondition(t, ns, "pause", v1alpha2.JobSetSuspended, time.Minute)
	eventually(t, time.Minute, "no running Job of attempt 0 and no unsuspended Job", func(ctx context.Context) (bool, error) {
		jobs, err := childJobs(ctx, ns, "pause")
		if err != nil {
			return false, nil
		}
		for _, j := range jobs {
			if j.Labels[v1alpha2.RestartsKey] == "0" || !ptr.Deref(j.Spec.Suspend, false) {
				return false, nil
			}
		}
		return true, nil
	})
	kubectl(t, "patch", "jobset", "pause", "-n", ns, "--type=merge", "-p", `{"spec":{"suspend":false}}`)
	got := waitStatus(t, ns, "pause", "3 ready Jobs of attempt 1", time.Minute, func(js *v1alpha2.JobSet) bool {
		return rjStatus(js, "workers").Ready == 3 && conditionReason(js, v1alpha2.JobSetSuspended) == ""
	})
	jobs := waitJobs(t, ns, "pause", 3, "1")
	w.await(t, "the watch to see the Jobs of attempt 1", func() bool { return w.countAttempt("1") == 3 })
	w.stop()
	for _, j := range jobs {
		if ptr.Deref(j.Spec.Suspend, true) {
			t.Errorf("Job %s still suspended", j.Name)
		}
	}
	if got.Status.Restarts != 1 || ptr.Deref(got.Status.ExecutionAttempts, 0) != 2 {
		t.Errorf("restarts %d execution attempts %d, want 1 and 2", got.Status.Restarts, ptr.Deref(got.Status.ExecutionAttempts, 0))
	}
	for key, n := range w.added {
		if n > 1 || strings.Contains(key, "@2") {
			t.Errorf("Job %s created %d times", key, n)
		}
	}
}
