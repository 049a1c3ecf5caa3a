package invariants

import (
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

func testJobSet(replicas, parallelism int32) *v1alpha2.JobSet {
	return &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "ns", UID: "js-uid"},
		Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{{
			Name: "w", Replicas: ptr.To(replicas),
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Parallelism: ptr.To(parallelism)}},
		}}},
		Status: v1alpha2.JobSetStatus{ReplicatedJobsStatus: []v1alpha2.ReplicatedJobStatus{{Name: "w", Active: replicas}}},
	}
}

// childJobs builds the Jobs a JobSet asks for, of the given attempt.
func childJobs(js *v1alpha2.JobSet, attempt int) []batchv1.Job {
	var out []batchv1.Job
	rj := js.Spec.ReplicatedJobs[0]
	for i := 0; i < int(*rj.Replicas); i++ {
		out = append(out, batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-w-%d", js.Name, i), Namespace: js.Namespace,
				UID:             types.UID(fmt.Sprintf("job-%d", i)),
				Labels:          map[string]string{v1alpha2.RestartsKey: fmt.Sprint(attempt)},
				OwnerReferences: []metav1.OwnerReference{{Kind: "JobSet", Name: js.Name, UID: js.UID, Controller: ptr.To(true)}},
			},
			Spec: batchv1.JobSpec{Parallelism: rj.Template.Spec.Parallelism, Suspend: ptr.To(ptr.Deref(js.Spec.Suspend, false))},
		})
	}
	return out
}

func TestJobSetViolations(t *testing.T) {
	running := Expectation{Restarts: ptr.To[int32](0), Running: true}
	for _, tc := range []struct {
		name string
		edit func(js *v1alpha2.JobSet, jobs *[]batchv1.Job)
		exp  Expectation
		want []string // substrings of the violations, in order; none when empty
	}{
		{name: "as asked", edit: func(*v1alpha2.JobSet, *[]batchv1.Job) {}, exp: running},
		{name: "a Job missing", exp: running, want: []string{"Job js-w-2 is missing"},
			edit: func(_ *v1alpha2.JobSet, jobs *[]batchv1.Job) { *jobs = (*jobs)[:2] }},
		{name: "a Job beyond the replicas", exp: running, want: []string{"Job js-w-3 is not asked for"},
			edit: func(js *v1alpha2.JobSet, jobs *[]batchv1.Job) {
				extra := childJobs(testJobSet(4, 1), 0)[3]
				*jobs = append(*jobs, extra)
			}},
		{name: "a Job of an old attempt", exp: Expectation{Running: true}, want: []string{"js-w-1 is of attempt 0, status counts 1"},
			edit: func(js *v1alpha2.JobSet, jobs *[]batchv1.Job) {
				js.Status.Restarts = 1
				for i := range *jobs {
					if i != 1 {
						(*jobs)[i].Labels[v1alpha2.RestartsKey] = "1"
					}
				}
			}},
		{name: "a restart counted twice", exp: Expectation{Restarts: ptr.To[int32](1)}, want: []string{"restarts 1, towards max 1, execution attempts 2; want 1 each"},
			edit: func(js *v1alpha2.JobSet, jobs *[]batchv1.Job) {
				js.Status.Restarts, js.Status.RestartsCountTowardsMax, js.Status.ExecutionAttempts = 1, 1, ptr.To[int32](2)
				for i := range *jobs {
					(*jobs)[i].Labels[v1alpha2.RestartsKey] = "1"
				}
			}},
		{name: "more execution attempts than resumes", want: []string{"execution attempts 3; want 0, 0 and at most 2"},
			exp:  Expectation{MaxAttempts: func(string) int32 { return 2 }},
			edit: func(js *v1alpha2.JobSet, _ *[]batchv1.Job) { js.Status.ExecutionAttempts = ptr.To[int32](3) }},
		{name: "running while suspended", exp: running, want: []string{"js-w-0 runs while the JobSet is suspended"},
			edit: func(js *v1alpha2.JobSet, jobs *[]batchv1.Job) {
				js.Spec.Suspend = ptr.To(true)
				for i := 1; i < len(*jobs); i++ {
					(*jobs)[i].Spec.Suspend = ptr.To(true)
				}
			}},
		{name: "suspended before it ran", exp: running,
			edit: func(js *v1alpha2.JobSet, jobs *[]batchv1.Job) { js.Spec.Suspend = ptr.To(true); *jobs = nil }},
		{name: "parallelism not applied", exp: running, want: []string{"js-w-0 has parallelism 1, the spec 2"},
			edit: func(js *v1alpha2.JobSet, jobs *[]batchv1.Job) {
				js.Spec.ReplicatedJobs[0].Template.Spec.Parallelism = ptr.To[int32](2)
				for i := 1; i < len(*jobs); i++ {
					(*jobs)[i].Spec.Parallelism = ptr.To[int32](2)
				}
			}},
		{name: "status behind", exp: running, want: []string{"status of w: 2 active Jobs, want 3"},
			edit: func(js *v1alpha2.JobSet, _ *[]batchv1.Job) { js.Status.ReplicatedJobsStatus[0].Active = 2 }},
		{name: "finished JobSets keep what they have", exp: running,
			edit: func(js *v1alpha2.JobSet, jobs *[]batchv1.Job) {
				js.Status.Conditions = []metav1.Condition{{Type: string(v1alpha2.JobSetFailed), Status: metav1.ConditionTrue}}
				*jobs = (*jobs)[:1]
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := testJobSet(3, 1)
			jobs := childJobs(js, 0)
			tc.edit(js, &jobs)
			got := JobSet(js, jobs, tc.exp)
			if len(got) != len(tc.want) {
				t.Fatalf("violations %q, want %d matching %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("violation %q, want one with %q", got[i], tc.want[i])
				}
			}
		})
	}
}

func TestNamespaceFindsOrphans(t *testing.T) {
	js := testJobSet(2, 1)
	jobs := childJobs(js, 0)
	gone := testJobSet(1, 1)
	gone.Name, gone.UID = "gone", "gone-uid"
	jobs = append(jobs, childJobs(gone, 0)...)
	// A Job nobody controls is not the JobSets' business.
	jobs = append(jobs, batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "standalone"}})
	got := Namespace([]v1alpha2.JobSet{*js}, jobs, Expectation{Running: true})
	if len(got) != 1 || !strings.Contains(got[0], "Job gone-w-0: orphan") {
		t.Errorf("violations %q, want only the orphan gone-w-0", got)
	}
	if got := Namespace([]v1alpha2.JobSet{*js, *gone}, jobs, Expectation{Running: true}); len(got) != 0 {
		t.Errorf("violations %q with both JobSets present, want none", got)
	}
}

func TestField(t *testing.T) {
	var f Field
	f.Set("1", true)
	if !f.Allows("1") || f.Allows("2") || f.Uncertain() {
		t.Fatalf("after an acknowledged write of 1: allows 1 %v, 2 %v, uncertain %v", f.Allows("1"), f.Allows("2"), f.Uncertain())
	}
	// A write that may or may not have happened: either value is fine.
	f.Set("2", false)
	if !f.Allows("1") || !f.Allows("2") || f.Allows("3") || !f.Uncertain() {
		t.Fatalf("after an unknown write of 2: %+v", f)
	}
	// The next acknowledged write decides again.
	f.Set("3", true)
	if f.Allows("1") || f.Allows("2") || !f.Allows("3") || f.Uncertain() {
		t.Fatalf("after an acknowledged write of 3: %+v", f)
	}
}
