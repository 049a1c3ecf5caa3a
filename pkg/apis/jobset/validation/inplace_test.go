package validation

import (
	"math"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

// withInPlaceRestart gives js restartStrategy InPlaceRestart and makes every
// Job template meet its requirements.
func withInPlaceRestart(js *jobset.JobSet) {
	withFailurePolicy(js)
	js.Spec.FailurePolicy.RestartStrategy = jobset.InPlaceRestart
	for i := range js.Spec.ReplicatedJobs {
		spec := &js.Spec.ReplicatedJobs[i].Template.Spec
		spec.BackoffLimit = ptr.To[int32](math.MaxInt32)
		spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
	}
}

func TestValidateInPlaceRestart(t *testing.T) {
	const rj1 = "spec.replicatedJobs[1].template.spec"
	cases := []struct {
		name   string
		mutate func(js *jobset.JobSet)
		want   []wantErr
	}{
		{name: "valid", mutate: withInPlaceRestart},
		{
			name: "with failure policy rules of every action",
			mutate: func(js *jobset.JobSet) {
				withInPlaceRestart(js)
				js.Spec.FailurePolicy.Rules = []jobset.FailurePolicyRule{
					{Name: "fatal", Action: jobset.FailJobSet, OnJobFailureReasons: []string{batchv1.JobReasonPodFailurePolicy}},
					{Name: "other", Action: jobset.RestartJobSetAndIgnoreMaxRestarts},
				}
			},
		},
		{
			name: "backoffLimit unset",
			mutate: func(js *jobset.JobSet) {
				withInPlaceRestart(js)
				js.Spec.ReplicatedJobs[1].Template.Spec.BackoffLimit = nil
			},
			want: []wantErr{{errInvalid, rj1 + ".backoffLimit", "2147483647"}},
		},
		{
			name: "backoffLimit too low",
			mutate: func(js *jobset.JobSet) {
				withInPlaceRestart(js)
				js.Spec.ReplicatedJobs[1].Template.Spec.BackoffLimit = ptr.To[int32](6)
			},
			want: []wantErr{{errInvalid, rj1 + ".backoffLimit", "replicatedJob workers"}},
		},
		{
			name: "podReplacementPolicy TerminatingOrFailed",
			mutate: func(js *jobset.JobSet) {
				withInPlaceRestart(js)
				js.Spec.ReplicatedJobs[1].Template.Spec.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed)
			},
			want: []wantErr{{errInvalid, rj1 + ".podReplacementPolicy", "Failed"}},
		},
		{
			name: "podReplacementPolicy unset",
			mutate: func(js *jobset.JobSet) {
				withInPlaceRestart(js)
				js.Spec.ReplicatedJobs[0].Template.Spec.PodReplacementPolicy = nil
			},
			want: []wantErr{{errInvalid, "spec.replicatedJobs[0].template.spec.podReplacementPolicy", ""}},
		},
		{
			name: "completions differ from parallelism",
			mutate: func(js *jobset.JobSet) {
				withInPlaceRestart(js)
				js.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = ptr.To[int32](2)
			},
			want: []wantErr{{errInvalid, rj1 + ".completions", "equal"}},
		},
		{
			name: "completions unset",
			mutate: func(js *jobset.JobSet) {
				withInPlaceRestart(js)
				js.Spec.ReplicatedJobs[1].Template.Spec.Completions = nil
				js.Spec.ReplicatedJobs[1].Template.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
			},
			want: []wantErr{{errInvalid, rj1 + ".completions", ""}},
		},
		{
			name: "every requirement missing in every replicatedJob",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js)
				js.Spec.FailurePolicy.RestartStrategy = jobset.InPlaceRestart
				js.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = ptr.To[int32](1)
			},
			want: []wantErr{
				{errInvalid, "spec.replicatedJobs[0].template.spec.backoffLimit", ""},
				{errInvalid, "spec.replicatedJobs[0].template.spec.podReplacementPolicy", ""},
				{errInvalid, rj1 + ".backoffLimit", ""},
				{errInvalid, rj1 + ".podReplacementPolicy", ""},
				{errInvalid, rj1 + ".completions", ""},
			},
		},
		{
			name: "requirements not enforced under Recreate",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js)
				js.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = ptr.To[int32](1)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			js := testJobSet()
			tc.mutate(js)
			checkErrors(t, ValidateJobSet(js), tc.want)
		})
	}
}

// An update that breaks a requirement is refused too: parallelism may
// change on a running JobSet, but not away from completions.
func TestValidateInPlaceRestartUpdate(t *testing.T) {
	oldJS := testJobSet()
	withInPlaceRestart(oldJS)
	newJS := oldJS.DeepCopy()
	newJS.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = ptr.To[int32](2)
	errs := ValidateJobSetUpdate(newJS, oldJS)
	found := false
	for _, e := range errs {
		if e.Field == "spec.replicatedJobs[1].template.spec.completions" && strings.Contains(e.Detail, "equal") {
			found = true
		}
	}
	if !found {
		t.Fatalf("want an error on spec.replicatedJobs[1].template.spec.completions, got %v", errs)
	}
}

func TestValidateInPlaceRestartStatus(t *testing.T) {
	oldJS := testJobSet()
	newJS := oldJS.DeepCopy()
	newJS.Status.PreviousInPlaceRestartAttempt = ptr.To[int32](0)
	newJS.Status.CurrentInPlaceRestartAttempt = ptr.To[int32](1)
	checkErrors(t, ValidateJobSetStatusUpdate(newJS, oldJS), nil)

	newJS.Status.PreviousInPlaceRestartAttempt = ptr.To[int32](-1)
	newJS.Status.CurrentInPlaceRestartAttempt = ptr.To[int32](-2)
	checkErrors(t, ValidateJobSetStatusUpdate(newJS, oldJS), []wantErr{
		{errInvalid, "status.previousInPlaceRestartAttempt", ""},
		{errInvalid, "status.currentInPlaceRestartAttempt", ""},
	})
}
