package controller

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

func succeededJobs(counts map[string]int) []*batchv1.Job {
	var out []*batchv1.Job
	for rj, n := range counts {
		for i := 0; i < n; i++ {
			out = append(out, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
				Name:   fmt.Sprintf("js-%s-%d", rj, i),
				Labels: map[string]string{jobset.ReplicatedJobNameKey: rj},
			}})
		}
	}
	return out
}

func TestSuccessPolicy(t *testing.T) {
	cases := []struct {
		name      string
		policy    *jobset.SuccessPolicy
		succeeded map[string]int
		want      bool
	}{
		{"All default, partial", nil, map[string]int{"leader": 1, "workers": 1}, false},
		{"All default, every Job", nil, map[string]int{"leader": 1, "workers": 2}, true},
		{"All targeting workers, workers done", &jobset.SuccessPolicy{Operator: jobset.OperatorAll, TargetReplicatedJobs: []string{"workers"}}, map[string]int{"workers": 2}, true},
		{"All targeting workers, leader done only", &jobset.SuccessPolicy{Operator: jobset.OperatorAll, TargetReplicatedJobs: []string{"workers"}}, map[string]int{"leader": 1, "workers": 1}, false},
		{"Any, one Job", &jobset.SuccessPolicy{Operator: jobset.OperatorAny}, map[string]int{"workers": 1}, true},
		{"Any targeting leader, a worker done", &jobset.SuccessPolicy{Operator: jobset.OperatorAny, TargetReplicatedJobs: []string{"leader"}}, map[string]int{"workers": 2}, false},
		{"Any targeting leader, leader done", &jobset.SuccessPolicy{Operator: jobset.OperatorAny, TargetReplicatedJobs: []string{"leader"}}, map[string]int{"leader": 1}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			js := newJobSet("js", func(js *jobset.JobSet) { js.Spec.SuccessPolicy = tc.policy })
			if got := successPolicyMet(js, succeededJobs(tc.succeeded)); got != tc.want {
				t.Fatalf("successPolicyMet = %v, want %v", got, tc.want)
			}
		})
	}
}

func failedJob(name, rj, reason, message string, at time.Time) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{jobset.ReplicatedJobNameKey: rj}}}
	failJob(reason, message, at)(j)
	return j
}

func TestMatchRule(t *testing.T) {
	early, late := t0, t0.Add(time.Minute)
	failed := []*batchv1.Job{
		failedJob("js-workers-1", "workers", "BackoffLimitExceeded", "Job has reached the specified backoff limit", late),
		failedJob("js-leader-0", "leader", "PodFailurePolicy", "Container main for pod x failed with exit code 42 matching FailJob rule at index 0", early),
		failedJob("js-workers-0", "workers", "BackoffLimitExceeded", "Job has reached the specified backoff limit", early),
	}
	cases := []struct {
		name     string
		rules    []jobset.FailurePolicyRule
		wantRule string
		wantJob  string
	}{
		{name: "no rules", rules: nil},
		{
			name:     "empty rule matches the earliest failure",
			rules:    []jobset.FailurePolicyRule{{Name: "any", Action: jobset.RestartJob}},
			wantRule: "any", wantJob: "js-leader-0",
		},
		{
			name: "first matching rule wins, even when a later rule matches an earlier Job",
			rules: []jobset.FailurePolicyRule{
				{Name: "nomatch", Action: jobset.FailJobSet, OnJobFailureReasons: []string{"DeadlineExceeded"}},
				{Name: "workers", Action: jobset.RestartJob, TargetReplicatedJobs: []string{"workers"}},
				{Name: "all", Action: jobset.FailJobSet},
			},
			wantRule: "workers", wantJob: "js-workers-0",
		},
		{
			name: "reason filter",
			rules: []jobset.FailurePolicyRule{
				{Name: "pfp", Action: jobset.FailJobSet, OnJobFailureReasons: []string{"PodFailurePolicy"}},
			},
			wantRule: "pfp", wantJob: "js-leader-0",
		},
		{
			name: "message regex",
			rules: []jobset.FailurePolicyRule{
				{Name: "exit1", Action: jobset.FailJobSet, OnJobFailureMessagePatterns: []string{`exit code 1\b`}},
				{Name: "exit42", Action: jobset.FailJobSet, OnJobFailureMessagePatterns: []string{`nothing`, `exit code 42`}},
			},
			wantRule: "exit42", wantJob: "js-leader-0",
		},
		{
			name: "all filters must match",
			rules: []jobset.FailurePolicyRule{
				{Name: "mismatch", Action: jobset.FailJobSet, OnJobFailureReasons: []string{"PodFailurePolicy"}, TargetReplicatedJobs: []string{"workers"}},
			},
		},
		{
			name: "invalid regex never matches",
			rules: []jobset.FailurePolicyRule{
				{Name: "bad", Action: jobset.FailJobSet, OnJobFailureMessagePatterns: []string{`(`}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rule, job := matchRule(tc.rules, failed)
			gotRule, gotJob := "", ""
			if rule != nil {
				gotRule, gotJob = rule.Name, job.Name
			}
			if gotRule != tc.wantRule || gotJob != tc.wantJob {
				t.Fatalf("matched %q/%q, want %q/%q", gotRule, gotJob, tc.wantRule, tc.wantJob)
			}
		})
	}
	if got := firstFailedJob(failed); got.Name != "js-leader-0" {
		t.Fatalf("firstFailedJob = %s (ties break by name)", got.Name)
	}
}

// TestFailurePolicyActions syncs a running JobSet whose Job js-workers-1
// failed and checks the status the failure policy writes.
func TestFailurePolicyActions(t *testing.T) {
	type want struct {
		failedReason   string
		failedMessage  string
		restarts       int32
		countTowards   int32
		execAttempts   int32
		jobRestarts    []int32
		jobRestartsMax []int32
		restarting     string // RestartingJobSet reason, "" when absent
		event          string
		// eventOnce: the event is emitted exactly once.
		eventOnce bool
	}
	cases := []struct {
		name   string
		mods   func(*jobset.JobSet)
		policy *jobset.FailurePolicy
		status jobset.JobSetStatus
		want   want
	}{
		{
			name: "no failure policy fails at once",
			want: want{failedReason: "FailedJobs", failedMessage: "jobset failed due to one or more job failures (first failed job: js-workers-1)"},
		},
		{
			name:   "no rule matches: RestartJobSet by default",
			policy: &jobset.FailurePolicy{MaxRestarts: 2, Rules: []jobset.FailurePolicyRule{{Name: "r0", Action: jobset.FailJobSet, TargetReplicatedJobs: []string{"leader"}}}},
			want:   want{restarts: 1, countTowards: 1, execAttempts: 1, restarting: "DefaultFailurePolicy", event: "Warning RestartJobSetFailurePolicyAction applying RestartJobSet failure policy action (first failed job: js-workers-1)"},
		},
		{
			name:   "FailJobSet",
			policy: &jobset.FailurePolicy{MaxRestarts: 2, Rules: []jobset.FailurePolicyRule{{Name: "r0", Action: jobset.FailJobSet}}},
			want: want{failedReason: "FailJobSetFailurePolicyAction", failedMessage: "applying FailJobSet failure policy action (first failed job: js-workers-1)",
				event: "Warning FailJobSetFailurePolicyAction applying FailJobSet failure policy action (first failed job: js-workers-1)", eventOnce: true},
		},
		{
			name:   "RestartJobSet under maxRestarts",
			policy: &jobset.FailurePolicy{MaxRestarts: 2, Rules: []jobset.FailurePolicyRule{{Name: "again", Action: jobset.RestartJobSet}}},
			status: jobset.JobSetStatus{Restarts: 1, RestartsCountTowardsMax: 1, ExecutionAttempts: ptr.To[int32](3)},
			want:   want{restarts: 2, countTowards: 2, execAttempts: 4, restarting: "FailurePolicy_again"},
		},
		{
			name:   "RestartJobSet at maxRestarts fails",
			policy: &jobset.FailurePolicy{MaxRestarts: 2, Rules: []jobset.FailurePolicyRule{{Name: "again", Action: jobset.RestartJobSet}}},
			status: jobset.JobSetStatus{Restarts: 3, RestartsCountTowardsMax: 2, ExecutionAttempts: ptr.To[int32](3)},
			want: want{failedReason: "ReachedMaxRestarts", failedMessage: "jobset failed due to reaching max number of restarts (first failed job: js-workers-1)",
				restarts: 3, countTowards: 2, execAttempts: 3},
		},
		{
			name:   "maxRestarts 0 fails on the first failure",
			policy: &jobset.FailurePolicy{},
			want:   want{failedReason: "ReachedMaxRestarts"},
		},
		{
			name:   "RestartJobSetAndIgnoreMaxRestarts at maxRestarts still restarts",
			policy: &jobset.FailurePolicy{MaxRestarts: 1, Rules: []jobset.FailurePolicyRule{{Name: "ign", Action: jobset.RestartJobSetAndIgnoreMaxRestarts}}},
			status: jobset.JobSetStatus{Restarts: 1, RestartsCountTowardsMax: 1, ExecutionAttempts: ptr.To[int32](1)},
			want: want{restarts: 2, countTowards: 1, execAttempts: 2, restarting: "FailurePolicy_ign",
				event: "Warning RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction applying RestartJobSetAndIgnoreMaxRestarts failure policy action (first failed job: js-workers-1)"},
		},
		{
			name:   "RestartJob restarts only that Job",
			policy: &jobset.FailurePolicy{MaxRestarts: 2, Rules: []jobset.FailurePolicyRule{{Name: "one", Action: jobset.RestartJob}}},
			want: want{jobRestarts: []int32{0, 1}, jobRestartsMax: []int32{0, 1},
				event: "Warning RestartJobFailurePolicyAction applying RestartJob failure policy action (first failed job: js-workers-1)"},
		},
		{
			name:   "jobRestarts is sized to the replicatedJob's replicas",
			mods:   func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].Replicas = ptr.To[int32](4) },
			policy: &jobset.FailurePolicy{MaxRestarts: 2, Rules: []jobset.FailurePolicyRule{{Name: "one", Action: jobset.RestartJob}}},
			want:   want{jobRestarts: []int32{0, 1, 0, 0}, jobRestartsMax: []int32{0, 1, 0, 0}},
		},
		{
			name:   "RestartJobAndIgnoreMaxRestarts leaves jobRestartsCountTowardsMax unset",
			policy: &jobset.FailurePolicy{MaxRestarts: 1, Rules: []jobset.FailurePolicyRule{{Name: "one", Action: jobset.RestartJobAndIgnoreMaxRestarts}}},
			want:   want{jobRestarts: []int32{0, 1}},
		},
		{
			name:   "RestartJob: one budget across Jobs (another Job used it up)",
			policy: &jobset.FailurePolicy{MaxRestarts: 1, Rules: []jobset.FailurePolicyRule{{Name: "one", Action: jobset.RestartJob}}},
			status: jobset.JobSetStatus{ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{{Name: "workers", JobRestarts: []int32{1, 0}, JobRestartsCountTowardsMax: []int32{1, 0}}}},
			want:   want{failedReason: "ReachedMaxRestarts", jobRestarts: []int32{1, 0}, jobRestartsMax: []int32{1, 0}},
		},
		{
			name:   "RestartJob: whole-JobSet restarts count in the same budget",
			policy: &jobset.FailurePolicy{MaxRestarts: 1, Rules: []jobset.FailurePolicyRule{{Name: "one", Action: jobset.RestartJob}}},
			status: jobset.JobSetStatus{Restarts: 1, RestartsCountTowardsMax: 1, ExecutionAttempts: ptr.To[int32](1)},
			want:   want{failedReason: "ReachedMaxRestarts", restarts: 1, countTowards: 1, execAttempts: 1},
		},
		{
			name:   "RestartJobSet: per-Job restarts count in the same budget",
			policy: &jobset.FailurePolicy{MaxRestarts: 2, Rules: []jobset.FailurePolicyRule{{Name: "again", Action: jobset.RestartJobSet}}},
			status: jobset.JobSetStatus{Restarts: 1, RestartsCountTowardsMax: 1, ExecutionAttempts: ptr.To[int32](1),
				ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{{Name: "workers", JobRestarts: []int32{1, 0}, JobRestartsCountTowardsMax: []int32{1, 0}}}},
			want: want{failedReason: "ReachedMaxRestarts", restarts: 1, countTowards: 1, execAttempts: 1, jobRestarts: []int32{1, 0}, jobRestartsMax: []int32{1, 0}},
		},
		{
			name:   "RestartJobAndIgnoreMaxRestarts",
			policy: &jobset.FailurePolicy{MaxRestarts: 1, Rules: []jobset.FailurePolicyRule{{Name: "one", Action: jobset.RestartJobAndIgnoreMaxRestarts}}},
			status: jobset.JobSetStatus{ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{{Name: "workers", JobRestarts: []int32{0, 4}, JobRestartsCountTowardsMax: []int32{0, 1}}}},
			want:   want{jobRestarts: []int32{0, 5}, jobRestartsMax: []int32{0, 1}},
		},
		{
			name:   "RestartJob at maxRestarts fails",
			policy: &jobset.FailurePolicy{MaxRestarts: 1, Rules: []jobset.FailurePolicyRule{{Name: "one", Action: jobset.RestartJob}}},
			status: jobset.JobSetStatus{ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{{Name: "workers", JobRestarts: []int32{0, 1}, JobRestartsCountTowardsMax: []int32{0, 1}}}},
			want:   want{failedReason: "ReachedMaxRestarts", jobRestarts: []int32{0, 1}, jobRestartsMax: []int32{0, 1}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			js := newJobSet("js", func(js *jobset.JobSet) {
				js.Spec.FailurePolicy = tc.policy
				if tc.mods != nil {
					tc.mods(js)
				}
			})
			js.Status = tc.status
			fx := newFixture(t, js)
			fx.sync("js")
			// Mark the jobs of the current attempt.
			fx.setJob("js-workers-1", failJob("BackoffLimitExceeded", "boom", t0))
			fx.events()
			fx.sync("js")
			got := fx.jobSet("js")

			if tc.want.failedReason != "" {
				wantCond(t, got, "Failed", metav1.ConditionTrue, tc.want.failedReason, tc.want.failedMessage)
				if got.Status.TerminalState != "Failed" {
					t.Errorf("terminalState = %q", got.Status.TerminalState)
				}
			} else if c := cond(got, "Failed"); c != nil {
				t.Errorf("unexpected Failed condition %+v", c)
			}
			if got.Status.Restarts != tc.want.restarts || got.Status.RestartsCountTowardsMax != tc.want.countTowards || ptr.Deref(got.Status.ExecutionAttempts, 0) != tc.want.execAttempts {
				t.Errorf("restarts/countTowardsMax/executionAttempts = %d/%d/%d, want %d/%d/%d",
					got.Status.Restarts, got.Status.RestartsCountTowardsMax, ptr.Deref(got.Status.ExecutionAttempts, 0),
					tc.want.restarts, tc.want.countTowards, tc.want.execAttempts)
			}
			w := rjStatus(&got.Status, "workers")
			if fmt.Sprint(w.JobRestarts) != fmt.Sprint(tc.want.jobRestarts) || fmt.Sprint(w.JobRestartsCountTowardsMax) != fmt.Sprint(tc.want.jobRestartsMax) {
				t.Errorf("jobRestarts = %v/%v, want %v/%v", w.JobRestarts, w.JobRestartsCountTowardsMax, tc.want.jobRestarts, tc.want.jobRestartsMax)
			}
			if tc.want.restarting != "" {
				wantCond(t, got, conditionRestartingJobSet, metav1.ConditionTrue, tc.want.restarting, "")
			} else if conditionTrue(got.Status.Conditions, conditionRestartingJobSet) {
				t.Errorf("unexpected RestartingJobSet condition")
			}
			if tc.want.event != "" {
				evs := fx.events()
				n := 0
				for _, e := range evs {
					if e == tc.want.event {
						n++
					}
				}
				if n == 0 || (tc.want.eventOnce && n != 1) {
					t.Errorf("event %q found %d times in %q", tc.want.event, n, evs)
				}
			}
		})
	}
}
