package controller

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

func TestCountersOnly(t *testing.T) {
	base := func() *jobset.JobSetStatus {
		return &jobset.JobSetStatus{
			Restarts: 1,
			ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{
				{Name: "leader", Active: 1, ObservedParallelism: ptr.To[int32](1)},
				{Name: "workers", Ready: 2, Active: 3, JobRestarts: []int32{0, 1}},
			},
		}
	}
	for name, tc := range map[string]struct {
		mod  func(*jobset.JobSetStatus)
		want bool
	}{
		"same":  {mod: func(*jobset.JobSetStatus) {}, want: true},
		"ready": {mod: func(s *jobset.JobSetStatus) { s.ReplicatedJobsStatus[1].Ready = 3 }, want: true},
		"every counter": {mod: func(s *jobset.JobSetStatus) {
			r := &s.ReplicatedJobsStatus[0]
			r.Ready, r.Succeeded, r.Failed, r.Active, r.Suspended = 5, 4, 3, 2, 1
		}, want: true},
		"observedParallelism": {mod: func(s *jobset.JobSetStatus) { s.ReplicatedJobsStatus[0].ObservedParallelism = ptr.To[int32](2) }},
		"jobRestarts":         {mod: func(s *jobset.JobSetStatus) { s.ReplicatedJobsStatus[1].JobRestarts[0] = 1 }},
		"restarts":            {mod: func(s *jobset.JobSetStatus) { s.Restarts = 2 }},
		"condition": {mod: func(s *jobset.JobSetStatus) {
			s.Conditions = []metav1.Condition{{Type: "Completed", Status: metav1.ConditionTrue}}
		}},
		"replicatedJob added": {mod: func(s *jobset.JobSetStatus) {
			s.ReplicatedJobsStatus = append(s.ReplicatedJobsStatus, jobset.ReplicatedJobStatus{Name: "more"})
		}},
		"replicatedJob renamed": {mod: func(s *jobset.JobSetStatus) { s.ReplicatedJobsStatus[1].Name = "other" }},
	} {
		cur := base()
		tc.mod(cur)
		old := base()
		if got := countersOnly(old, cur); got != tc.want {
			t.Errorf("%s: countersOnly = %v, want %v", name, got, tc.want)
		}
		if old.ReplicatedJobsStatus[1].Ready != 2 || cur.ReplicatedJobsStatus[1].Name == "" {
			t.Errorf("%s: countersOnly changed its arguments", name)
		}
	}
}

// statusWrites counts the JobSet status writes recorded by the fake client.
func (fx *fixture) statusWrites() int {
	n := 0
	for _, a := range fx.jsc.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

func TestStatusCountersArePaced(t *testing.T) {
	js := newJobSet("js", func(js *jobset.JobSet) {
		js.Spec.SuccessPolicy = &jobset.SuccessPolicy{Operator: jobset.OperatorAny, TargetReplicatedJobs: []string{"leader"}}
	})
	fx := newFixture(t, js)
	fx.c.pacer = newStatusPacer(fx.clock, time.Second)
	fx.sync("js") // creates the Jobs; the first status is written at once
	fx.sync("js") // observedParallelism enters: written at once
	if got := rjStatus(&fx.jobSet("js").Status, "workers").ObservedParallelism; got == nil {
		t.Fatal("observedParallelism not written at once")
	}
	fx.jsc.ClearActions()

	// A counter changes within the interval of the last write: held.
	fx.setJob("js-workers-0", func(j *batchv1.Job) { j.Status.Active = 2 })
	if d := fx.sync("js"); d != time.Second {
		t.Fatalf("requeue = %v, want the rest of the interval (1s)", d)
	}
	fx.clock.Step(300 * time.Millisecond)
	fx.setJob("js-workers-1", func(j *batchv1.Job) { j.Status.Active = 2 })
	if d := fx.sync("js"); d != 700*time.Millisecond {
		t.Fatalf("requeue = %v, want 700ms", d)
	}
	if n := fx.statusWrites(); n != 0 {
		t.Fatalf("%d status writes within the interval, want 0", n)
	}
	if got := rjStatus(&fx.jobSet("js").Status, "workers").Active; got != 0 {
		t.Fatalf("stored active = %d before the interval ended", got)
	}

	// At its end, one write carries both changes.
	fx.clock.Step(700 * time.Millisecond)
	if d := fx.sync("js"); d != 0 {
		t.Fatalf("requeue after the held write = %v, want none", d)
	}
	if n := fx.statusWrites(); n != 1 {
		t.Fatalf("%d status writes at the end of the interval, want 1", n)
	}
	if got := rjStatus(&fx.jobSet("js").Status, "workers").Active; got != 2 {
		t.Fatalf("stored active = %d, want 2", got)
	}
	fx.jsc.ClearActions()

	// Within the next interval, a change that is not only counters (the
	// success policy completes the JobSet) is written at once.
	fx.clock.Step(100 * time.Millisecond)
	fx.setJob("js-leader-0", completeJob)
	fx.sync("js")
	if n := fx.statusWrites(); n != 1 {
		t.Fatalf("%d status writes for the completion, want 1", n)
	}
	wantCond(t, fx.jobSet("js"), "Completed", metav1.ConditionTrue, "AllJobsCompleted", "jobset completed successfully")
}

func TestStatusPacerDisabledAndForgotten(t *testing.T) {
	fx := newFixture(t)
	off := newStatusPacer(fx.clock, 0)
	off.wrote("ns/a")
	if d := off.hold("ns/a"); d != 0 {
		t.Fatalf("interval 0 held a write for %v", d)
	}
	p := newStatusPacer(fx.clock, time.Second)
	if d := p.hold("ns/a"); d != 0 {
		t.Fatalf("the first write was held for %v", d)
	}
	p.wrote("ns/a")
	if d := p.hold("ns/a"); d != time.Second {
		t.Fatalf("hold = %v, want 1s", d)
	}
	fx.clock.Step(time.Second)
	if d := p.hold("ns/a"); d != 0 {
		t.Fatalf("hold after the interval = %v, want 0", d)
	}
	p.wrote("ns/a")
	p.forget("ns/a")
	if d := p.hold("ns/a"); d != 0 || len(p.last) != 0 {
		t.Fatalf("after forget: hold = %v, %d keys kept", d, len(p.last))
	}
}

// prune forgets only the JobSets whose interval has passed, and holds stay
// what they were.
func TestStatusPacerPrune(t *testing.T) {
	fx := newFixture(t)
	p := newStatusPacer(fx.clock, time.Second)
	for _, key := range []string{"ns/a", "ns/b"} {
		p.wrote(key)
	}
	fx.clock.Step(600 * time.Millisecond)
	p.wrote("ns/c")
	fx.clock.Step(400 * time.Millisecond)
	p.prune()
	if _, ok := p.last["ns/c"]; !ok || len(p.last) != 1 {
		t.Fatalf("after the first interval: kept %v, want only ns/c", p.last)
	}
	if d := p.hold("ns/c"); d != 600*time.Millisecond {
		t.Fatalf("hold of ns/c after prune = %v, want 600ms", d)
	}
	if d := p.hold("ns/a"); d != 0 {
		t.Fatalf("hold of a pruned key = %v, want 0", d)
	}
	fx.clock.Step(600 * time.Millisecond)
	p.prune()
	if len(p.last) != 0 {
		t.Fatalf("after every interval passed: kept %v", p.last)
	}
	p.wrote("ns/a")
	if d := p.hold("ns/a"); d != time.Second {
		t.Fatalf("a write after the map was replaced: hold = %v, want 1s", d)
	}
}
