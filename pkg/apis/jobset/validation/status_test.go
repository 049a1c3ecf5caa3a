package validation

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

func TestValidateJobSetStatusUpdate(t *testing.T) {
	const rjs = "status.replicatedJobsStatus"
	validStatus := func(js *jobset.JobSet) {
		js.Status = jobset.JobSetStatus{
			Conditions:              []metav1.Condition{completed()},
			Restarts:                2,
			RestartsCountTowardsMax: 1,
			ExecutionAttempts:       ptr.To[int32](3),
			TerminalState:           string(jobset.JobSetCompleted),
			ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{
				{Name: "leader", Succeeded: 1},
				{Name: "workers", Ready: 1, Active: 1, Succeeded: 1, JobRestarts: []int32{0, 2}, JobRestartsCountTowardsMax: []int32{0, 1}},
			},
		}
	}
	cases := []struct {
		name   string
		mutate func(js *jobset.JobSet)
		want   []wantErr
	}{
		{name: "empty status", mutate: func(*jobset.JobSet) {}},
		{name: "full status", mutate: validStatus},
		{
			name:   "failed terminal state",
			mutate: func(js *jobset.JobSet) { js.Status.TerminalState = string(jobset.JobSetFailed) },
		},
		{
			name: "per-Job restart arrays longer than upstream's maxItems",
			mutate: func(js *jobset.JobSet) {
				validStatus(js)
				w := &js.Status.ReplicatedJobsStatus[1]
				w.JobRestarts = make([]int32, 1025)
				w.JobRestartsCountTowardsMax = make([]int32, 1025)
			},
			want: []wantErr{
				{errTooMany, rjs + "[1].jobRestarts", ""},
				{errTooMany, rjs + "[1].jobRestartsCountTowardsMax", ""},
			},
		},
		{
			name: "per-Job restart arrays at upstream's maxItems",
			mutate: func(js *jobset.JobSet) {
				validStatus(js)
				w := &js.Status.ReplicatedJobsStatus[1]
				w.JobRestarts = make([]int32, 1024)
				w.JobRestartsCountTowardsMax = make([]int32, 1024)
			},
		},
		{
			name:   "unsupported terminal state",
			mutate: func(js *jobset.JobSet) { validStatus(js); js.Status.TerminalState = "Done" },
			want:   []wantErr{{errNotSupported, "status.terminalState", `"Completed"`}},
		},
		{
			name: "negative counters",
			mutate: func(js *jobset.JobSet) {
				validStatus(js)
				js.Status.Restarts = -1
				js.Status.RestartsCountTowardsMax = -1
				js.Status.ExecutionAttempts = ptr.To[int32](-1)
			},
			want: []wantErr{
				{errInvalid, "status.restarts", ""},
				{errInvalid, "status.restartsCountTowardsMax", ""},
				{errInvalid, "status.executionAttempts", ""},
			},
		},
		{
			name: "negative replicatedJob counters",
			mutate: func(js *jobset.JobSet) {
				validStatus(js)
				s := &js.Status.ReplicatedJobsStatus[1]
				s.Ready, s.Succeeded, s.Failed, s.Active, s.Suspended = -1, -1, -1, -1, -1
				s.JobRestarts[1] = -1
				s.JobRestartsCountTowardsMax[0] = -1
				s.ObservedParallelism = ptr.To[int32](-1)
			},
			want: []wantErr{
				{errInvalid, rjs + "[1].ready", ""},
				{errInvalid, rjs + "[1].succeeded", ""},
				{errInvalid, rjs + "[1].failed", ""},
				{errInvalid, rjs + "[1].active", ""},
				{errInvalid, rjs + "[1].suspended", ""},
				{errInvalid, rjs + "[1].observedParallelism", ""},
				{errInvalid, rjs + "[1].jobRestarts[1]", ""},
				{errInvalid, rjs + "[1].jobRestartsCountTowardsMax[0]", ""},
			},
		},
		{
			name: "condition without reason",
			mutate: func(js *jobset.JobSet) {
				validStatus(js)
				js.Status.Conditions[0].Reason = ""
			},
			want: []wantErr{{errRequired, "status.conditions[0].reason", ""}},
		},
		{
			name: "duplicate condition type",
			mutate: func(js *jobset.JobSet) {
				validStatus(js)
				js.Status.Conditions = append(js.Status.Conditions, completed())
			},
			want: []wantErr{{errDuplicate, "status.conditions[1]", ""}},
		},
		{
			name: "duplicate replicatedJob status",
			mutate: func(js *jobset.JobSet) {
				validStatus(js)
				js.Status.ReplicatedJobsStatus[1].Name = "leader"
			},
			want: []wantErr{{errDuplicate, rjs + "[1].name", ""}},
		},
		{
			name: "status of an unknown replicatedJob",
			mutate: func(js *jobset.JobSet) {
				validStatus(js)
				js.Status.ReplicatedJobsStatus[0].Name = "driver"
			},
			want: []wantErr{{errNotSupported, rjs + "[0].name", `"leader"`}},
		},
		{
			name: "replicatedJob status without name",
			mutate: func(js *jobset.JobSet) {
				validStatus(js)
				js.Status.ReplicatedJobsStatus[0].Name = ""
			},
			want: []wantErr{{errRequired, rjs + "[0].name", ""}},
		},
		{
			name:   "metadata rules apply",
			mutate: func(js *jobset.JobSet) { js.ResourceVersion = "" },
			want:   []wantErr{{errInvalid, "metadata.resourceVersion", "must be specified for an update"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			oldJS := testJobSet()
			newJS := oldJS.DeepCopy()
			tc.mutate(newJS)
			checkErrors(t, ValidateJobSetStatusUpdate(newJS, oldJS), tc.want)
		})
	}
}
