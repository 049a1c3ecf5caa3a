package controller

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller/cachedmeta"
)

func withUpdate(strategy jobset.UpdateStrategy) func(*jobset.JobSet) {
	return func(js *jobset.JobSet) {
		js.Spec.UpdatePolicy = &jobset.UpdatePolicy{UpdateStrategy: strategy}
	}
}

func withRestarts(max int32, rules ...jobset.FailurePolicyRule) func(*jobset.JobSet) {
	return func(js *jobset.JobSet) {
		js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: max, Rules: rules}
	}
}

func setImage(image string) func(*jobset.JobSet) {
	return func(js *jobset.JobSet) {
		for i := range js.Spec.ReplicatedJobs {
			js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.Containers[0].Image = image
		}
	}
}

func hashOf(t *testing.T, js *jobset.JobSet) string {
	t.Helper()
	_, h, err := templatesOf(js).encode()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (fx *fixture) revisions() []appsv1.ControllerRevision {
	fx.t.Helper()
	l, err := fx.kube.AppsV1().ControllerRevisions(ns).List(fx.ctx, metav1.ListOptions{})
	if err != nil {
		fx.t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Revision < l.Items[j].Revision })
	return l.Items
}

func (fx *fixture) revisionNames() []string {
	var out []string
	for _, cr := range fx.revisions() {
		out = append(out, cr.Name)
	}
	return out
}

func image(j *batchv1.Job) string { return j.Spec.Template.Spec.Containers[0].Image }

// wantJobsFrom checks that every Job and its pod template carry revision
// and run image.
func (fx *fixture) wantJobsFrom(revision, img string) {
	fx.t.Helper()
	jobs := fx.jobs()
	if len(jobs) == 0 {
		fx.t.Fatalf("no jobs")
	}
	for _, j := range jobs {
		if j.Annotations[jobset.TemplateRevisionKey] != revision || j.Spec.Template.Annotations[jobset.TemplateRevisionKey] != revision {
			fx.t.Errorf("%s: template-revision %q / pod %q, want %q", j.Name,
				j.Annotations[jobset.TemplateRevisionKey], j.Spec.Template.Annotations[jobset.TemplateRevisionKey], revision)
		}
		if image(&j) != img {
			fx.t.Errorf("%s: image %q, want %q", j.Name, image(&j), img)
		}
	}
}

func hasEvent(evs []string, reason string) bool {
	for _, e := range evs {
		if strings.Contains(e, " "+reason+" ") {
			return true
		}
	}
	return false
}

func TestRevisionHash(t *testing.T) {
	base := newJobSet("js")
	h := hashOf(t, base)
	if len(h) != revisionHashLength || h != hashOf(t, base.DeepCopy()) {
		t.Fatalf("hash %q not stable", h)
	}
	// In-place fields leave the hash alone.
	scaled := base.DeepCopy()
	scaled.Spec.ReplicatedJobs[1].Replicas = ptr.To[int32](7)
	scaled.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = ptr.To[int32](5)
	scaled.Spec.ReplicatedJobs[1].Template.Spec.Completions = ptr.To[int32](5)
	scaled.Spec.Suspend = ptr.To(true)
	if got := hashOf(t, scaled); got != h {
		t.Errorf("replicas/parallelism/completions changed the hash: %s != %s", got, h)
	}
	// A template edit changes it; undoing the edit gives the old hash back.
	edited := base.DeepCopy()
	setImage("busybox:2")(edited)
	if hashOf(t, edited) == h {
		t.Errorf("an image change kept the hash")
	}
	setImage("busybox")(edited)
	if hashOf(t, edited) != h {
		t.Errorf("rolling back the image did not give the old hash")
	}
	// Map order does not matter.
	a, b := base.DeepCopy(), base.DeepCopy()
	a.Spec.ReplicatedJobs[0].Template.Labels = map[string]string{"x": "1", "y": "2"}
	b.Spec.ReplicatedJobs[0].Template.Labels = map[string]string{"y": "2", "x": "1"}
	if hashOf(t, a) != hashOf(t, b) {
		t.Errorf("hash depends on map order")
	}
}

func TestRevisionRecordedAndStamped(t *testing.T) {
	js := newJobSet("js")
	fx := newFixture(t, js)
	fx.sync("js")
	want := "js-" + hashOf(t, js)
	got := fx.jobSet("js")
	if got.Status.CurrentRevision != want || got.Status.UpdateRevision != want {
		t.Fatalf("revisions = %q/%q, want %q", got.Status.CurrentRevision, got.Status.UpdateRevision, want)
	}
	if cond(got, string(jobset.JobSetUpdatePending)) != nil {
		t.Errorf("UpdatePending set on a JobSet that never had an update")
	}
	crs := fx.revisions()
	if len(crs) != 1 || crs[0].Name != want || crs[0].Revision != 1 || !isOwnedBy(crs[0].OwnerReferences, js) || crs[0].Labels[jobset.JobSetNameKey] != "js" {
		t.Fatalf("revisions = %+v", crs)
	}
	var data revisionData
	if err := json.Unmarshal(crs[0].Data.Raw, &data); err != nil || len(data.ReplicatedJobs) != 2 || data.ReplicatedJobs[1].Name != "workers" {
		t.Fatalf("revision data = %s (%v)", crs[0].Data.Raw, err)
	}
	fx.wantJobsFrom(want, "busybox")
	// The next sync observes the created Jobs; after it, nothing is left
	// to do.
	fx.sync("js")
	fx.kube.ClearActions()
	fx.jsc.ClearActions()
	fx.sync("js")
	if a := append(writes(fx.kube.Actions()), writes(fx.jsc.Actions())...); len(a) != 0 {
		t.Fatalf("unexpected writes %v", a)
	}
}

func TestScaleIsNotAnUpdate(t *testing.T) {
	fx := newFixture(t, newJobSet("js", withUpdate(jobset.UpdateOpportunistic)))
	fx.sync("js")
	fx.updateJobSet("js", func(js *jobset.JobSet) {
		js.Spec.ReplicatedJobs[1].Replicas = ptr.To[int32](3)
		js.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = ptr.To[int32](4)
		js.Spec.ReplicatedJobs[1].Template.Spec.Completions = ptr.To[int32](4)
	})
	fx.sync("js")
	got := fx.jobSet("js")
	if got.Status.CurrentRevision != got.Status.UpdateRevision || len(fx.revisions()) != 1 || cond(got, string(jobset.JobSetUpdatePending)) != nil {
		t.Fatalf("a scale looked like an update: status %+v, revisions %v", got.Status, fx.revisionNames())
	}
	if n := len(fx.jobs()); n != 4 {
		t.Fatalf("jobs = %v", fx.jobNames())
	}
}

func TestOpportunisticUpdateAppliedAtRestart(t *testing.T) {
	fx := newFixture(t, newJobSet("js", withUpdate(jobset.UpdateOpportunistic), withRestarts(3)))
	fx.sync("js")
	oldRev := fx.jobSet("js").Status.CurrentRevision
	uids := map[string]string{}
	for _, j := range fx.jobs() {
		uids[j.Name] = string(j.UID)
	}
	fx.events()

	fx.updateJobSet("js", setImage("busybox:2"))
	fx.kube.ClearActions()
	fx.sync("js")
	got := fx.jobSet("js")
	newRev := got.Status.UpdateRevision
	if newRev == oldRev || got.Status.CurrentRevision != oldRev {
		t.Fatalf("revisions after the edit = %q/%q", got.Status.CurrentRevision, newRev)
	}
	wantCond(t, got, string(jobset.JobSetUpdatePending), metav1.ConditionTrue, reasonUpdatePending,
		"template revision "+newRev+" is pending; the current Jobs use revision "+oldRev)
	if names := fx.revisionNames(); !reflect.DeepEqual(names, []string{oldRev, newRev}) {
		t.Fatalf("revisions = %v", names)
	}
	for _, w := range writes(fx.kube.Actions()) {
		if strings.Contains(w, "jobs") {
			t.Fatalf("running Jobs touched by an Opportunistic edit: %v", writes(fx.kube.Actions()))
		}
	}
	fx.wantJobsFrom(oldRev, "busybox")
	if evs := fx.events(); !hasEvent(evs, reasonRevisionAccepted) {
		t.Errorf("no %s event: %v", reasonRevisionAccepted, evs)
	}

	// A Job missing meanwhile is recreated from the current revision.
	if err := fx.kube.BatchV1().Jobs(ns).Delete(fx.ctx, "js-workers-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fx.sync("js")
	fx.wantJobsFrom(oldRev, "busybox")

	// A failure restart adopts the pending revision.
	fx.setJob("js-leader-0", failJob("BackoffLimitExceeded", "x", t0))
	fx.sync("js") // restart decided
	got = fx.jobSet("js")
	if got.Status.Restarts != 1 || got.Status.RestartsCountTowardsMax != 1 || got.Status.CurrentRevision != newRev {
		t.Fatalf("after the restart: %+v", got.Status)
	}
	wantCond(t, got, string(jobset.JobSetUpdatePending), metav1.ConditionFalse, reasonUpdateRolledOut, "")
	if evs := fx.events(); !hasEvent(evs, reasonRevisionRolledOut) {
		t.Errorf("no %s event: %v", reasonRevisionRolledOut, evs)
	}
	fx.sync("js") // delete the old attempt
	fx.sync("js") // create the new one
	if got := fx.jobNames(); !reflect.DeepEqual(got, allJobs) {
		t.Fatalf("jobs = %v", got)
	}
	fx.wantJobsFrom(newRev, "busybox:2")
}

func TestRestartJobKeepsTheCurrentRevision(t *testing.T) {
	fx := newFixture(t, newJobSet("js", withUpdate(jobset.UpdateOpportunistic),
		withRestarts(3, jobset.FailurePolicyRule{Name: "one", Action: jobset.RestartJob})))
	fx.sync("js")
	oldRev := fx.jobSet("js").Status.CurrentRevision
	fx.updateJobSet("js", setImage("busybox:2"))
	fx.sync("js")
	fx.setJob("js-workers-1", failJob("BackoffLimitExceeded", "x", t0))
	fx.sync("js") // jobRestarts[1] = 1
	fx.sync("js") // delete
	fx.sync("js") // recreate
	j := fx.job("js-workers-1")
	if j.Labels[jobset.JobRestartsKey] != "1" {
		t.Fatalf("js-workers-1 not recreated: %v", j.Labels)
	}
	fx.wantJobsFrom(oldRev, "busybox")
	got := fx.jobSet("js")
	if got.Status.CurrentRevision != oldRev || got.Status.UpdateRevision == oldRev {
		t.Fatalf("a per-Job restart changed the revisions: %+v", got.Status)
	}
	wantCond(t, got, string(jobset.JobSetUpdatePending), metav1.ConditionTrue, reasonUpdatePending, "")
}

func TestImmediateUpdateRestartsWithoutCounting(t *testing.T) {
	fx := newFixture(t, newJobSet("js", withUpdate(jobset.UpdateImmediate), withRestarts(0)))
	m := withMetrics(fx)
	fx.sync("js")
	oldRev := fx.jobSet("js").Status.CurrentRevision
	fx.events()
	fx.updateJobSet("js", setImage("busybox:2"))
	fx.sync("js") // restart decided, old attempt deleted
	got := fx.jobSet("js")
	newRev := got.Status.UpdateRevision
	if newRev == oldRev || got.Status.CurrentRevision != newRev {
		t.Fatalf("revisions = %q/%q", got.Status.CurrentRevision, newRev)
	}
	if got.Status.Restarts != 1 || got.Status.RestartsCountTowardsMax != 0 || ptr.Deref(got.Status.ExecutionAttempts, 0) != 1 || finished(got) {
		t.Fatalf("status = %+v", got.Status)
	}
	wantCond(t, got, conditionRestartingJobSet, metav1.ConditionTrue, reasonUpdateRestarting,
		"update strategy Immediate: applying template revision "+newRev+" (was "+oldRev+"); not counted toward maxRestarts")
	if c := cond(got, string(jobset.JobSetUpdatePending)); c != nil && c.Status == metav1.ConditionTrue {
		t.Errorf("UpdatePending true after an Immediate restart")
	}
	evs := fx.events()
	if !hasEvent(evs, reasonUpdateRestarting) || !hasEvent(evs, reasonRevisionRolledOut) {
		t.Errorf("events = %v", evs)
	}
	if n := len(fx.jobs()); n != 0 {
		t.Fatalf("old attempt not deleted: %v", fx.jobNames())
	}
	// Counted as a restart and an execution attempt, with reason update.
	if m.restarted != 1 || m.attempts[RestartReasonUpdate] != 1 || len(m.attempts) != 1 {
		t.Errorf("restarts %d, attempts %v; want one update restart", m.restarted, m.attempts)
	}
	fx.sync("js")
	fx.wantJobsFrom(newRev, "busybox:2")
	for _, j := range fx.jobs() {
		if j.Labels[jobset.RestartsKey] != "1" {
			t.Errorf("%s restart-attempt %q", j.Name, j.Labels[jobset.RestartsKey])
		}
	}
	// maxRestarts 0 still allows no counted failure restart: the first
	// failure fails the JobSet, so the update restart was not counted.
	fx.setJob("js-leader-0", failJob("BackoffLimitExceeded", "x", t0))
	fx.sync("js")
	wantCond(t, fx.jobSet("js"), "Failed", metav1.ConditionTrue, "ReachedMaxRestarts", "")
}

func TestNeverStrategyKeepsRunningJobs(t *testing.T) {
	// The API server refuses template edits under Never; a controller that
	// still sees one (written before a strategy switch) leaves the running
	// Jobs alone and reports the pending update.
	fx := newFixture(t, newJobSet("js", withUpdate(jobset.UpdateImmediate)))
	fx.sync("js")
	fx.updateJobSet("js", func(js *jobset.JobSet) {
		setImage("busybox:2")(js)
		js.Spec.UpdatePolicy.UpdateStrategy = jobset.UpdateNever
	})
	fx.sync("js")
	got := fx.jobSet("js")
	if got.Status.Restarts != 0 || got.Status.CurrentRevision == got.Status.UpdateRevision {
		t.Fatalf("status = %+v", got.Status)
	}
	fx.wantJobsFrom(got.Status.CurrentRevision, "busybox")
}

func TestResumeAdoptsPendingUpdate(t *testing.T) {
	fx := newFixture(t, newJobSet("js", withUpdate(jobset.UpdateOpportunistic)))
	fx.sync("js")
	oldRev := fx.jobSet("js").Status.CurrentRevision
	fx.updateJobSet("js", func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(true) })
	fx.sync("js")
	fx.updateJobSet("js", setImage("busybox:2"))
	fx.sync("js")
	got := fx.jobSet("js")
	newRev := got.Status.UpdateRevision
	if got.Status.CurrentRevision != oldRev || newRev == oldRev {
		t.Fatalf("edit while suspended: %+v", got.Status)
	}
	fx.wantJobsFrom(oldRev, "busybox")

	fx.updateJobSet("js", func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(false) })
	fx.sync("js") // resume: restart with the new templates
	got = fx.jobSet("js")
	if got.Status.CurrentRevision != newRev || got.Status.Restarts != 1 || got.Status.RestartsCountTowardsMax != 0 || ptr.Deref(got.Status.ExecutionAttempts, 0) != 1 {
		t.Fatalf("after resume: %+v", got.Status)
	}
	wantCond(t, got, "Suspended", metav1.ConditionFalse, "ResumeJobs", "")
	wantCond(t, got, conditionRestartingJobSet, metav1.ConditionTrue, reasonUpdateRestarting, "")
	fx.sync("js")
	fx.wantJobsFrom(newRev, "busybox:2")
	for _, j := range fx.jobs() {
		if ptr.Deref(j.Spec.Suspend, true) || j.Annotations[jobset.ExecutionAttemptKey] != "1" {
			t.Errorf("%s: suspend %v execution-attempt %q", j.Name, j.Spec.Suspend, j.Annotations[jobset.ExecutionAttemptKey])
		}
	}
}

func TestResumeWithSchedulingEditsKeepsJobs(t *testing.T) {
	fx := newFixture(t, newJobSet("js"))
	fx.sync("js")
	fx.updateJobSet("js", func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(true) })
	fx.sync("js")
	uid := fx.job("js-workers-0").UID
	fx.updateJobSet("js", func(js *jobset.JobSet) {
		js.Spec.Suspend = ptr.To(false)
		js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.NodeSelector = map[string]string{"flavor": "a"}
	})
	fx.sync("js")
	got := fx.jobSet("js")
	if got.Status.Restarts != 0 || got.Status.CurrentRevision != got.Status.UpdateRevision {
		t.Fatalf("status = %+v", got.Status)
	}
	j := fx.job("js-workers-0")
	if j.UID != uid || j.Spec.Template.Spec.NodeSelector["flavor"] != "a" {
		t.Fatalf("job recreated or not edited: %+v", j.Spec.Template.Spec)
	}
	if j.Annotations[jobset.TemplateRevisionKey] != got.Status.CurrentRevision || j.Spec.Template.Annotations[jobset.TemplateRevisionKey] != got.Status.CurrentRevision {
		t.Errorf("resumed Job not stamped with %s: %v", got.Status.CurrentRevision, j.Annotations)
	}
}

func TestQueuedJobSetHasNoRevisionUntilResumed(t *testing.T) {
	fx := newFixture(t, newJobSet("js", func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(true) }))
	fx.sync("js")
	if n := len(fx.revisions()); n != 0 || fx.jobSet("js").Status.UpdateRevision != "" {
		t.Fatalf("a queued JobSet got %d revisions", n)
	}
	fx.updateJobSet("js", func(js *jobset.JobSet) {
		js.Spec.Suspend = ptr.To(false)
		js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector = map[string]string{"flavor": "b"}
	})
	fx.sync("js")
	got := fx.jobSet("js")
	if got.Status.CurrentRevision == "" || got.Status.CurrentRevision != got.Status.UpdateRevision || got.Status.Restarts != 0 {
		t.Fatalf("first resume: %+v", got.Status)
	}
	fx.wantJobsFrom(got.Status.CurrentRevision, "busybox")
}

func TestRevisionHistoryPrunedAndRollback(t *testing.T) {
	js := newJobSet("js", withUpdate(jobset.UpdateOpportunistic))
	js.Spec.UpdatePolicy.RevisionHistoryLimit = ptr.To[int32](2)
	fx := newFixture(t, js)
	fx.sync("js")
	first := fx.jobSet("js").Status.CurrentRevision
	for i := 2; i <= 5; i++ {
		fx.updateJobSet("js", setImage("busybox:"+string(rune('0'+i))))
		fx.sync("js")
		fx.sync("js") // prune with the new revision in the cache
	}
	got := fx.jobSet("js")
	names := fx.revisionNames()
	// The current revision (the first, since nothing restarted) and the
	// update revision survive; nothing else fits in a history of 2.
	if !reflect.DeepEqual(names, []string{first, got.Status.UpdateRevision}) {
		t.Fatalf("revisions = %v, current %s update %s", names, first, got.Status.UpdateRevision)
	}

	// Rolling back to the original template reuses its revision, which
	// becomes the newest.
	fx.updateJobSet("js", setImage("busybox"))
	fx.sync("js")
	got = fx.jobSet("js")
	if got.Status.UpdateRevision != first || got.Status.CurrentRevision != first {
		t.Fatalf("rollback: %+v", got.Status)
	}
	wantCond(t, got, string(jobset.JobSetUpdatePending), metav1.ConditionFalse, reasonUpdateRolledOut, "")
	crs := fx.revisions()
	if crs[len(crs)-1].Name != first {
		t.Fatalf("rolled-back revision not the newest: %v", fx.revisionNames())
	}
}

func TestBuildViewUsesCurrentTemplates(t *testing.T) {
	js := newJobSet("js")
	cur := templatesOf(js)
	setImage("busybox:2")(js)
	js.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = ptr.To[int32](5)
	js.Spec.ReplicatedJobs[1].Template.Spec.Completions = ptr.To[int32](5)
	revs := &revisions{current: &cur, update: templatesOf(js)}
	js.Status.CurrentRevision, js.Status.UpdateRevision = "js-old", "js-new"
	view := revs.buildView(js)
	w := view.Spec.ReplicatedJobs[1].Template.Spec
	if w.Template.Spec.Containers[0].Image != "busybox" || *w.Parallelism != 5 || *w.Completions != 5 {
		t.Fatalf("view = %+v", w)
	}
	if image := js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0].Image; image != "busybox:2" {
		t.Fatalf("buildView modified the JobSet")
	}
	if revs.onlyResumeEdits() {
		t.Errorf("an image change is not a scheduling edit")
	}
	js.Status.CurrentRevision = "js-new" // rolled out in this sync
	if revs.buildView(js) != js {
		t.Errorf("a rolled-out update still built from the old templates")
	}
	sched := templatesOf(js)
	sched.ReplicatedJobs[0].Template.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "k"}}
	onlySched := &revisions{current: &revisionData{ReplicatedJobs: append([]revisionTemplate(nil), templatesOf(js).ReplicatedJobs...)}, update: sched}
	if !onlySched.onlyResumeEdits() {
		t.Errorf("a toleration is a scheduling edit")
	}
}

func TestLostStatusWriteRecoversCurrentRevision(t *testing.T) {
	fx := newFixture(t, newJobSet("js", withUpdate(jobset.UpdateOpportunistic)))
	fx.sync("js")
	rev := fx.jobSet("js").Status.CurrentRevision
	// The status written by the first sync is lost and the template edited.
	fx.updateJobSet("js", func(js *jobset.JobSet) {
		js.Status.CurrentRevision, js.Status.UpdateRevision = "", ""
		setImage("busybox:2")(js)
	})
	fx.sync("js")
	got := fx.jobSet("js")
	if got.Status.CurrentRevision != rev || got.Status.UpdateRevision == rev {
		t.Fatalf("revisions = %q/%q, want current %q from the Jobs", got.Status.CurrentRevision, got.Status.UpdateRevision, rev)
	}
}

func TestRevisionNotCreatedTwiceWhileTheCacheIsBehind(t *testing.T) {
	fx := newFixture(t, newJobSet("js"))
	fx.sync("js")
	// The informer has not seen the revision yet: the next sync must not
	// try to create it again.
	if err := fx.f.Kube.Apps().V1().ControllerRevisions().Informer().GetIndexer().Replace(nil, ""); err != nil {
		t.Fatal(err)
	}
	fx.kube.ClearActions()
	if _, err := fx.c.sync(fx.ctx, ns+"/js"); err != nil {
		t.Fatal(err)
	}
	for _, a := range fx.kube.Actions() {
		if a.GetResource().Resource == "controllerrevisions" {
			t.Fatalf("revision API call while the cache was behind: %s", a.GetVerb())
		}
	}
	// Once the informer saw it (and it was deleted), it is created again.
	cr := fx.revisions()[0]
	observeCreated(fx.c.exp.revisions, &cr)
	if err := fx.kube.AppsV1().ControllerRevisions(ns).Delete(fx.ctx, cr.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fx.sync("js")
	if names := fx.revisionNames(); len(names) != 1 || names[0] != cr.Name {
		t.Fatalf("revision not recreated: %v", names)
	}
}

func TestImmediateUpdateDuringARestartDoesNotRestartAgain(t *testing.T) {
	fx := newFixture(t, newJobSet("js", withUpdate(jobset.UpdateImmediate), withRestarts(3)))
	fx.sync("js")
	fx.setJob("js-leader-0", failJob("BackoffLimitExceeded", "x", t0))
	fx.sync("js") // failure restart decided, old attempt deleted
	if got := fx.jobSet("js").Status.Restarts; got != 1 || len(fx.jobs()) != 0 {
		t.Fatalf("restarts %d, jobs %v", got, fx.jobNames())
	}
	// The edit lands before the new attempt's Jobs exist.
	fx.updateJobSet("js", setImage("busybox:2"))
	fx.sync("js")
	got := fx.jobSet("js")
	if got.Status.Restarts != 1 || got.Status.CurrentRevision != got.Status.UpdateRevision {
		t.Fatalf("status = %+v", got.Status)
	}
	fx.wantJobsFrom(got.Status.CurrentRevision, "busybox:2")
}

// KEP-1150: container resources edited while suspended reach the Jobs on
// resume, without a restart; a refusal of the Job update is a
// FailedResourcePropagation warning, and the Job stays suspended.
func TestResumeCarriesResources(t *testing.T) {
	resize := func(js *jobset.JobSet) {
		c := &js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0]
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
	}
	for _, refused := range []bool{false, true} {
		fx := newFixture(t, newJobSet("js"))
		fx.sync("js")
		fx.updateJobSet("js", func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(true) })
		fx.sync("js")
		uid := fx.job("js-workers-0").UID
		if refused {
			fx.kube.PrependReactor("update", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
				j := a.(k8stesting.UpdateAction).GetObject().(*batchv1.Job)
				if len(j.Spec.Template.Spec.Containers[0].Resources.Requests) > 0 {
					return true, nil, apierrors.NewInvalid(batchv1.SchemeGroupVersion.WithKind("Job").GroupKind(), j.Name,
						field.ErrorList{field.Forbidden(field.NewPath("spec", "template"), "field is immutable")})
				}
				return false, nil, nil
			})
		}
		fx.updateJobSet("js", func(js *jobset.JobSet) {
			js.Spec.Suspend = ptr.To(false)
			resize(js)
		})
		fx.refresh()
		_, err := fx.c.sync(fx.ctx, ns+"/js")
		if refused != (err != nil) {
			t.Fatalf("refused=%v: sync error %v", refused, err)
		}
		got := fx.jobSet("js")
		if got.Status.Restarts != 0 || got.Status.CurrentRevision != got.Status.UpdateRevision {
			t.Fatalf("refused=%v: a resume with new resources restarted the JobSet or left the update pending: %+v", refused, got.Status)
		}
		j := fx.job("js-workers-0")
		cpu := j.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
		if refused {
			if !ptr.Deref(j.Spec.Suspend, false) {
				t.Errorf("refused: Job resumed without its new resources")
			}
			found := false
			for _, e := range fx.events() {
				found = found || strings.Contains(e, "FailedResourcePropagation")
			}
			if !found {
				t.Errorf("refused: no FailedResourcePropagation event")
			}
			continue
		}
		if j.UID != uid || ptr.Deref(j.Spec.Suspend, true) || cpu.String() != "3" {
			t.Fatalf("Job recreated, still suspended, or without the new request: uid changed %v, suspend %v, cpu %s", j.UID != uid, j.Spec.Suspend, cpu.String())
		}
	}
}

// The revision cache holds no data: while an update is pending, the
// current revision's templates are read from the API server once, not at
// every sync, and the Jobs are still built from them.
func TestPendingRevisionReadOnce(t *testing.T) {
	fx := newFixture(t, newJobSet("js", withUpdate(jobset.UpdateOpportunistic),
		withRestarts(3, jobset.FailurePolicyRule{Name: "one", Action: jobset.RestartJob})))
	fx.sync("js")
	oldRev := fx.jobSet("js").Status.CurrentRevision
	fx.updateJobSet("js", setImage("busybox:2"))
	fx.kube.ClearActions()
	fx.sync("js")
	fx.setJob("js-workers-1", failJob("BackoffLimitExceeded", "x", t0))
	fx.sync("js") // jobRestarts[1] = 1
	fx.sync("js") // delete
	fx.sync("js") // recreate
	fx.wantJobsFrom(oldRev, "busybox")
	gets := 0
	for _, a := range fx.kube.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "controllerrevisions" {
			gets++
		}
	}
	if gets != 1 {
		t.Fatalf("%d reads of the current revision over four syncs, want 1", gets)
	}
	for _, o := range fx.f.Kube.Apps().V1().ControllerRevisions().Informer().GetIndexer().List() {
		if _, ok := o.(*cachedmeta.Revision); !ok {
			t.Fatalf("cached revision is a %T, not its data-less form", o)
		}
	}
}
