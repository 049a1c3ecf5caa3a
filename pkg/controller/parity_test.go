package controller

import (
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// Behaviour that must match upstream JobSet v0.12 exactly: conditions,
// events and their fields.

// restartedAndReady runs a JobSet through one failure restart until every
// new Job is ready: RestartingJobSet is then False with reason JobsReady.
func restartedAndReady(t *testing.T, mods ...func(*jobset.JobSet)) *fixture {
	t.Helper()
	mods = append([]func(*jobset.JobSet){func(js *jobset.JobSet) {
		js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 3}
	}}, mods...)
	fx := newFixture(t, newJobSet("js", mods...))
	fx.sync("js")
	fx.setJob("js-workers-0", failJob("BackoffLimitExceeded", "x", t0))
	fx.sync("js") // restart decided, old attempt deleted
	fx.sync("js") // new attempt created
	for _, n := range allJobs {
		fx.setJob(n, readyJob)
	}
	fx.sync("js")
	wantCond(t, fx.jobSet("js"), conditionRestartingJobSet, metav1.ConditionFalse, "JobsReady", "all jobs are ready")
	fx.events()
	return fx
}

func hasExactEvent(evs []string, want string) bool {
	for _, e := range evs {
		if e == want {
			return true
		}
	}
	return false
}

// TestRestartingConditionSettledAtTheEnd: a RestartingJobSet condition that
// is already False is rewritten when the JobSet is suspended, completes or
// fails, with an event, as upstream does.
func TestRestartingConditionSettledAtTheEnd(t *testing.T) {
	t.Run("suspended", func(t *testing.T) {
		fx := restartedAndReady(t)
		fx.updateJobSet("js", func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(true) })
		fx.sync("js")
		wantCond(t, fx.jobSet("js"), conditionRestartingJobSet, metav1.ConditionFalse, "JobSetSuspended", "jobset is suspended")
		if evs := fx.events(); !hasExactEvent(evs, "Normal JobSetSuspended jobset is suspended") {
			t.Fatalf("no JobSetSuspended event in %q", evs)
		}
	})
	t.Run("completed", func(t *testing.T) {
		fx := restartedAndReady(t)
		for _, n := range allJobs {
			fx.setJob(n, completeJob)
		}
		fx.sync("js")
		wantCond(t, fx.jobSet("js"), conditionRestartingJobSet, metav1.ConditionFalse, "JobSetCompleted", "jobset completed successfully")
		if evs := fx.events(); !hasExactEvent(evs, "Normal JobSetCompleted jobset completed successfully") {
			t.Fatalf("no JobSetCompleted event in %q", evs)
		}
	})
	t.Run("failed", func(t *testing.T) {
		fx := restartedAndReady(t, func(js *jobset.JobSet) {
			js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 1}
		})
		fx.setJob("js-leader-0", failJob("BackoffLimitExceeded", "x", t0))
		fx.sync("js")
		got := fx.jobSet("js")
		wantCond(t, got, "Failed", metav1.ConditionTrue, "ReachedMaxRestarts", "")
		wantCond(t, got, conditionRestartingJobSet, metav1.ConditionFalse, "JobSetFailed", "jobset failed")
		if evs := fx.events(); !hasExactEvent(evs, "Normal JobSetFailed jobset failed") {
			t.Fatalf("no JobSetFailed event in %q", evs)
		}
	})
}

// TestStartupConditionsAfterRestart: after a whole-JobSet restart of an
// InOrder JobSet, StartupPolicyInProgress is True again and
// StartupPolicyCompleted False; completing again flips the statuses back
// with one event (Completed's), keeping InProgress's reason.
func TestStartupConditionsAfterRestart(t *testing.T) {
	inOrder := func(js *jobset.JobSet) {
		js.Spec.StartupPolicy = &jobset.StartupPolicy{StartupPolicyOrder: jobset.InOrder}
	}
	fx := newFixture(t, newJobSet("js", inOrder, func(js *jobset.JobSet) {
		js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 3}
	}))
	// Each round creates what the order allows and makes it ready.
	startAll := func() {
		for round := 0; round < 3; round++ {
			fx.sync("js")
			for _, j := range fx.jobs() {
				fx.setJob(j.Name, readyJob)
			}
		}
		fx.sync("js")
	}
	startAll()
	wantCond(t, fx.jobSet("js"), "StartupPolicyCompleted", metav1.ConditionTrue, "InOrderStartupPolicyCompleted", "")

	fx.setJob("js-workers-0", failJob("BackoffLimitExceeded", "x", t0))
	fx.sync("js")
	got := fx.jobSet("js")
	wantCond(t, got, "StartupPolicyInProgress", metav1.ConditionTrue, "InOrderStartupPolicyInProgress", "in order startup policy is in progress")
	wantCond(t, got, "StartupPolicyCompleted", metav1.ConditionFalse, "InOrderStartupPolicyCompleted", "in order startup policy has completed")

	fx.events()
	startAll()
	got = fx.jobSet("js")
	wantCond(t, got, "StartupPolicyCompleted", metav1.ConditionTrue, "InOrderStartupPolicyCompleted", "")
	wantCond(t, got, "StartupPolicyInProgress", metav1.ConditionFalse, "InOrderStartupPolicyInProgress", "")
	n := 0
	for _, e := range fx.events() {
		if strings.Contains(e, "InOrderStartupPolicyCompleted") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d InOrderStartupPolicyCompleted events, want 1", n)
	}
}

// TestJobCreationFailedForForeignJob: a Job of the same name that this
// JobSet does not own blocks a creation; that is reported with a
// JobCreationFailed event, as upstream.
func TestJobCreationFailedForForeignJob(t *testing.T) {
	foreign := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "js-leader-0", Namespace: ns}}
	fx := newFixture(t, newJobSet("js"), foreign)
	fx.refresh()
	if _, err := fx.c.sync(fx.ctx, ns+"/js"); err == nil {
		t.Fatalf("sync succeeded although a foreign Job holds js-leader-0")
	}
	evs := fx.events()
	found := false
	for _, e := range evs {
		found = found || (strings.HasPrefix(e, "Warning JobCreationFailed ") && strings.Contains(e, "js-leader-0"))
	}
	if !found {
		t.Fatalf("no JobCreationFailed event naming js-leader-0 in %q", evs)
	}
}

// actionRecorder keeps the action of every event.
type actionRecorder struct{ actions []string }

func (r *actionRecorder) Eventf(_ runtime.Object, _ runtime.Object, _, reason, action, note string, args ...interface{}) {
	r.actions = append(r.actions, reason+"/"+action)
	_ = fmt.Sprintf(note, args...)
}

// TestEventActionIsUpstreams: events.k8s.io action "Reconciling" and
// reporting controller "jobset", as upstream's events carry.
func TestEventActionIsUpstreams(t *testing.T) {
	if EventReportingController != "jobset" {
		t.Fatalf("reporting controller %q", EventReportingController)
	}
	rec := &actionRecorder{}
	js := newJobSet("js")
	fx := newFixture(t, js)
	fx.c.recorder = rec
	fx.c.emit(js, []event{{eventType: "Normal", reason: "SuspendedJobs", message: "m"}})
	fx.c.warn(js, reasonJobCreationFailed, fmt.Errorf("boom"))
	want := "[SuspendedJobs/Reconciling JobCreationFailed/Reconciling]"
	if got := fmt.Sprint(rec.actions); got != want {
		t.Fatalf("actions %s, want %s", got, want)
	}
}
