package controller

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// A Recreate restart deletes the old Jobs in the background and their pods
// directly, and creates a Job of the new attempt only once no pod of an
// earlier Job of its name still runs. BlockingRecreate deletes in the
// foreground.
func TestRestartWaitsForRunningOldPods(t *testing.T) {
	for _, strategy := range []jobset.JobSetRestartStrategy{jobset.Recreate, jobset.BlockingRecreate} {
		t.Run(string(strategy), func(t *testing.T) {
			js := newJobSet("js", func(js *jobset.JobSet) {
				js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 3, RestartStrategy: strategy}
			})
			fx := newFixture(t, js)
			fx.sync("js")
			for _, n := range allJobs {
				fx.setJob(n, func(j *batchv1.Job) { j.UID = types.UID("uid-" + j.Name) }) // the fake assigns none
			}
			oldUID := fx.job("js-workers-1").UID
			ownedBy := func(job string, uid types.UID) []metav1.OwnerReference {
				return []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job, UID: uid, Controller: ptr.To(true)}}
			}
			// A pod of the old js-workers-1, being deleted but still running.
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "js-workers-1-x", Namespace: ns, UID: "pod-x", DeletionTimestamp: &metav1.Time{Time: t0},
					Finalizers: []string{"batch.kubernetes.io/job-tracking"}, OwnerReferences: ownedBy("js-workers-1", oldUID),
					Labels: map[string]string{jobset.JobSetNameKey: "js", batchv1.JobNameLabel: "js-workers-1",
						batchv1.ControllerUidLabel: string(oldUID), jobset.RestartsKey: "0"}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning},
			}
			// The failed pod of the old js-workers-0, not deleted yet.
			failed := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "js-workers-0-y", Namespace: ns, UID: "pod-y",
					OwnerReferences: ownedBy("js-workers-0", fx.job("js-workers-0").UID),
					Labels:          map[string]string{jobset.JobSetNameKey: "js", batchv1.JobNameLabel: "js-workers-0", jobset.RestartsKey: "0"}},
				Status: corev1.PodStatus{Phase: corev1.PodFailed},
			}
			// A pod of the same name's Job in another JobSet.
			other := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "other-workers-0-z", Namespace: ns, UID: "pod-z",
					OwnerReferences: ownedBy("other-workers-0", "uid-other"),
					Labels:          map[string]string{jobset.JobSetNameKey: "other", batchv1.JobNameLabel: "other-workers-0"}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning},
			}
			for _, p := range []*corev1.Pod{pod, failed, other} {
				if _, err := fx.kube.CoreV1().Pods(ns).Create(fx.ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			fx.setJob("js-workers-0", failJob("BackoffLimitExceeded", "x", t0))
			fx.kube.ClearActions()
			fx.sync("js") // decide the restart and delete the old attempt

			wantPolicy := metav1.DeletePropagationBackground
			if strategy == jobset.BlockingRecreate {
				wantPolicy = metav1.DeletePropagationForeground
			}
			var podsDeleted []string
			for _, a := range fx.kube.Actions() {
				switch d := a.(type) {
				case k8stesting.DeleteActionImpl:
					switch d.GetResource().Resource {
					case "jobs":
						if p := d.GetDeleteOptions().PropagationPolicy; p == nil || *p != wantPolicy {
							t.Errorf("Job %s deleted with propagation %v, want %s", d.GetName(), p, wantPolicy)
						}
					case "pods":
						podsDeleted = append(podsDeleted, d.GetName())
						if pre := d.GetDeleteOptions().Preconditions; pre == nil || pre.UID == nil || *pre.UID != failed.UID {
							t.Errorf("pod %s deleted with preconditions %+v, want its UID", d.GetName(), pre)
						}
					}
				case k8stesting.DeleteCollectionActionImpl:
					t.Errorf("deletecollection of %s: the pods are deleted one by one", d.GetResource().Resource)
				}
			}
			// The old failed pod goes; the one already being deleted and
			// the other JobSet's are left alone.
			if !reflect.DeepEqual(podsDeleted, []string{failed.Name}) {
				t.Errorf("pods deleted: %v, want [%s]", podsDeleted, failed.Name)
			}
			if _, err := fx.kube.CoreV1().Pods(ns).Get(fx.ctx, other.Name, metav1.GetOptions{}); err != nil {
				t.Errorf("the other JobSet's pod: %v", err)
			}
			if strategy == jobset.BlockingRecreate {
				return // the wait for the Jobs is TestRestartRecreate's
			}
			if len(fx.jobs()) != 0 {
				t.Fatalf("old Jobs left: %v", fx.jobNames())
			}

			// The pod still runs: every Job but js-workers-1 is created.
			if d := fx.sync("js"); d <= 0 {
				t.Errorf("no retry while an old pod runs (requeue %v)", d)
			}
			if got := fx.jobNames(); !reflect.DeepEqual(got, []string{"js-leader-0", "js-workers-0"}) {
				t.Fatalf("jobs = %v, want js-workers-1 held back", got)
			}
			// It finished: js-workers-1 follows.
			pod.Status.Phase = corev1.PodFailed
			if _, err := fx.kube.CoreV1().Pods(ns).Update(fx.ctx, pod, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			fx.sync("js")
			if got := fx.jobNames(); !reflect.DeepEqual(got, allJobs) {
				t.Fatalf("jobs = %v", got)
			}
			if l := fx.job("js-workers-1").Labels[jobset.RestartsKey]; l != "1" {
				t.Errorf("js-workers-1 restart-attempt = %q", l)
			}
		})
	}
}

// A pod of an earlier Job that nobody deleted (created while its Job was
// going away) is deleted before the Job of its name is created again.
func TestStrayOldPodDeleted(t *testing.T) {
	fx := restartedFixture(t)
	stray := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "js-leader-0-late", Namespace: ns,
			Labels: map[string]string{jobset.JobSetNameKey: "js", batchv1.JobNameLabel: "js-leader-0", jobset.RestartsKey: "0"}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if _, err := fx.kube.CoreV1().Pods(ns).Create(fx.ctx, stray, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fx.sync("js")
	if _, err := fx.kube.CoreV1().Pods(ns).Get(fx.ctx, stray.Name, metav1.GetOptions{}); err == nil {
		t.Error("the stray pod of the old attempt was not deleted")
	}
	if got := fx.jobNames(); !reflect.DeepEqual(got, []string{"js-workers-0", "js-workers-1"}) {
		t.Fatalf("jobs = %v, want js-leader-0 held back for one more look", got)
	}
	fx.sync("js")
	if got := fx.jobNames(); !reflect.DeepEqual(got, allJobs) {
		t.Fatalf("jobs = %v", got)
	}
}

// A Job of the new attempt that was created but is not in the cache yet
// (its event still on the way on a busy cluster) has pods of the new
// attempt. The wait for old pods must not take them for strays of the old
// one: deleting them fails that Job, and a failed Job restarts the JobSet
// again. They hold the name back until the cache shows the Job.
func TestCurrentAttemptPodsNotTakenForStrays(t *testing.T) {
	fx := restartedFixture(t)
	if n := len(fx.jobs()); n != 0 {
		t.Fatalf("old Jobs left: %v", fx.jobNames())
	}
	pod := func(name, attempt, jobAttempt string) *corev1.Pod {
		l := map[string]string{jobset.JobSetNameKey: "js", batchv1.JobNameLabel: "js-leader-0", jobset.RestartsKey: attempt}
		if jobAttempt != "" {
			l[jobset.JobRestartsKey] = jobAttempt
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(name), Labels: l},
			Status:     corev1.PodStatus{Phase: corev1.PodPending},
		}
	}
	// js-leader-0 of attempt 1 exists in the API; its pods are pending.
	// Attempt 1 without a job-restart-attempt label counts as attempt 1's
	// first Job too.
	current := []*corev1.Pod{pod("js-leader-0-new", "1", "0"), pod("js-leader-0-unlabelled", "1", "")}
	for _, p := range current {
		if _, err := fx.kube.CoreV1().Pods(ns).Create(fx.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	fx.kube.ClearActions()
	if d := fx.sync("js"); d <= 0 {
		t.Errorf("no retry while js-leader-0 is held back (requeue %v)", d)
	}
	for _, a := range fx.kube.Actions() {
		if d, ok := a.(k8stesting.DeleteActionImpl); ok && d.GetResource().Resource == "pods" {
			t.Errorf("pod %s of the current attempt deleted", d.GetName())
		}
	}
	for _, p := range current {
		if _, err := fx.kube.CoreV1().Pods(ns).Get(fx.ctx, p.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("pod %s: %v", p.Name, err)
		}
	}
	if got := fx.jobNames(); !reflect.DeepEqual(got, []string{"js-workers-0", "js-workers-1"}) {
		t.Fatalf("jobs = %v, want js-leader-0 held back", got)
	}
}

// Which pods of a Job's name are an earlier Job's, by the attempt labels.
func TestOfEarlierJob(t *testing.T) {
	job := jobAttempt{restarts: 2, jobRestarts: 1}
	for _, tc := range []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{jobset.RestartsKey: "1", jobset.JobRestartsKey: "5"}, true},
		{map[string]string{jobset.RestartsKey: "2", jobset.JobRestartsKey: "0"}, true},
		{map[string]string{jobset.RestartsKey: "2"}, true},
		{map[string]string{}, true},
		{map[string]string{jobset.RestartsKey: "x"}, true},
		{map[string]string{jobset.RestartsKey: "2", jobset.JobRestartsKey: "1"}, false},
		{map[string]string{jobset.RestartsKey: "2", jobset.JobRestartsKey: "2"}, false},
		{map[string]string{jobset.RestartsKey: "3", jobset.JobRestartsKey: "0"}, false},
	} {
		if got := ofEarlierJob(tc.labels, job); got != tc.want {
			t.Errorf("pod labelled %v: ofEarlierJob = %v, want %v", tc.labels, got, tc.want)
		}
	}
}

// The wait for old pods lists only the pods of the Jobs still to create,
// so that the new attempt's running pods stay out of the answer; names too
// many for a short URL select the JobSet's pods, matched by name here.
func TestPredecessorListNamesTheJobs(t *testing.T) {
	js := newJobSet("js")
	fx := newFixture(t, js)
	running := func(name, jobSet, job string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(name), DeletionTimestamp: &metav1.Time{Time: t0},
				Labels: map[string]string{jobset.JobSetNameKey: jobSet, batchv1.JobNameLabel: job}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}
	}
	old := running("js-workers-1-old", "js", "js-workers-1")
	current := running("js-workers-0-new", "js", "js-workers-0")
	other := running("other-workers-1-x", "other", "js-workers-1")
	for _, p := range []*corev1.Pod{old, current, other} {
		if _, err := fx.kube.CoreV1().Pods(ns).Create(fx.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	long := strings.Repeat("x", 64) // no label value
	many := map[string]bool{"js-workers-1": true}
	for i := 0; len(many) < 200; i++ {
		many[fmt.Sprintf("js-a-replicated-job-with-a-long-name-%d", i)] = true
	}
	for _, tc := range []struct {
		name    string
		names   map[string]bool
		listsIn []string // the pods the list may return
	}{
		{"the names", map[string]bool{"js-workers-1": true}, []string{old.Name}},
		{"too many names", many, []string{old.Name, current.Name}},
		{"a name that is no label value", map[string]bool{"js-workers-1": true, long: true}, []string{old.Name, current.Name}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx.kube.ClearActions()
			want := map[string]jobAttempt{}
			for n := range tc.names {
				want[n] = jobAttempt{restarts: 1}
			}
			blocked, err := fx.c.runningPredecessors(fx.ctx, ns+"/js", js, want)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(blocked, map[string]bool{"js-workers-1": true}) {
				t.Errorf("blocked = %v, want js-workers-1 only", blocked)
			}
			var sel labels.Selector
			for _, a := range fx.kube.Actions() {
				if l, ok := a.(k8stesting.ListActionImpl); ok && l.GetResource().Resource == "pods" {
					sel = l.GetListRestrictions().Labels
				}
			}
			if sel == nil {
				t.Fatal("no list of pods")
			}
			var listed []string
			for _, p := range []*corev1.Pod{old, current, other} {
				if sel.Matches(labels.Set(p.Labels)) {
					listed = append(listed, p.Name)
				}
			}
			if !reflect.DeepEqual(listed, tc.listsIn) {
				t.Errorf("selector %q selects %v, want %v", sel, listed, tc.listsIn)
			}
		})
	}
}

// The pods of deleted Jobs are listed a page at a time: every page's pods
// are deleted, and the pages are asked for in the limit podsOf sets.
func TestDeletedJobsPodsPaged(t *testing.T) {
	js := newJobSet("js")
	fx := newFixture(t, js)
	fx.sync("js")
	podOf := func(job string, i int) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", job, i), Namespace: ns, UID: types.UID(fmt.Sprintf("pod-%s-%d", job, i)),
			Labels:          map[string]string{jobset.JobSetNameKey: "js"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: job, UID: types.UID("uid-" + job), Controller: ptr.To(true)}},
		}}
	}
	pages := map[string]*corev1.PodList{
		"":       {ListMeta: metav1.ListMeta{Continue: "second"}, Items: []corev1.Pod{podOf("js-leader-0", 0), podOf("js-workers-0", 0)}},
		"second": {Items: []corev1.Pod{podOf("js-workers-1", 0), podOf("js-workers-1", 1)}},
	}
	var limits []int64
	fx.kube.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		opts := a.(k8stesting.ListActionImpl).GetListOptions()
		limits = append(limits, opts.Limit)
		page, ok := pages[opts.Continue]
		if !ok {
			return true, nil, fmt.Errorf("unknown continue token %q", opts.Continue)
		}
		return true, page, nil
	})
	var jobs []*batchv1.Job
	for _, n := range []string{"js-leader-0", "js-workers-1"} {
		j := fx.job(n)
		j.UID = types.UID("uid-" + n)
		jobs = append(jobs, j)
	}
	fx.kube.ClearActions()
	if err := fx.c.deletePrevious(fx.ctx, ns+"/js", js, jobs); err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, a := range fx.kube.Actions() {
		if d, ok := a.(k8stesting.DeleteActionImpl); ok && d.GetResource().Resource == "pods" {
			deleted = append(deleted, d.GetName())
		}
	}
	sort.Strings(deleted)
	if want := []string{"js-leader-0-0", "js-workers-1-0", "js-workers-1-1"}; !reflect.DeepEqual(deleted, want) {
		t.Errorf("pods deleted: %v, want %v (js-workers-0 was not deleted)", deleted, want)
	}
	if !reflect.DeepEqual(limits, []int64{podPage, podPage}) {
		t.Errorf("list limits %v, want two pages of %d", limits, podPage)
	}
}

// When the pods cannot be listed, the Jobs are deleted all the same (their
// pods are left to the garbage collector) and the error is returned.
func TestJobsDeletedWhenPodListFails(t *testing.T) {
	js := newJobSet("js")
	fx := newFixture(t, js)
	fx.sync("js")
	fx.kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("list refused")
	})
	var jobs []*batchv1.Job
	for _, j := range fx.jobs() {
		j.UID = types.UID("uid-" + j.Name)
		jobs = append(jobs, &j)
	}
	err := fx.c.deletePrevious(fx.ctx, ns+"/js", js, jobs)
	if err == nil || !strings.Contains(err.Error(), "list refused") {
		t.Errorf("error %v, want the list's", err)
	}
	if left := fx.jobNames(); len(left) != 0 {
		t.Errorf("Jobs left: %v", left)
	}
}

// While a restart waits for old pods, a sync lists them again only when
// the failed-pod events have cleared some name of every pod the last list
// found running, or once predecessorRelist has passed; other syncs keep
// the last answer. A Job is created only after a list shows its name
// clear.
func TestPredecessorWaitListsWhenANameClears(t *testing.T) {
	fx := restartedFixture(t)
	oldPod := func(name, job string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(name), DeletionTimestamp: &metav1.Time{Time: t0},
				Labels: map[string]string{jobset.JobSetNameKey: "js", batchv1.JobNameLabel: job, jobset.RestartsKey: "0"}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}
		if _, err := fx.kube.CoreV1().Pods(ns).Create(fx.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := oldPod("js-workers-1-a", "js-workers-1"), oldPod("js-workers-1-b", "js-workers-1")
	c := oldPod("js-leader-0-c", "js-leader-0")
	fail := func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		if _, err := fx.kube.CoreV1().Pods(ns).Update(fx.ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lists := func() int {
		n := 0
		for _, act := range fx.kube.Actions() {
			if l, ok := act.(k8stesting.ListActionImpl); ok && l.GetResource().Resource == "pods" && l.GetListRestrictions().Fields.String() != "" {
				n++
			}
		}
		return n
	}
	step := func(what string, wantLists int, wantJobs []string) {
		t.Helper()
		fx.kube.ClearActions()
		fx.sync("js")
		if n := lists(); n != wantLists {
			t.Errorf("%s: %d lists of old pods, want %d", what, n, wantLists)
		}
		if got := fx.jobNames(); !reflect.DeepEqual(got, wantJobs) {
			t.Fatalf("%s: jobs = %v, want %v", what, got, wantJobs)
		}
	}
	step("the first look", 1, []string{"js-workers-0"})
	step("nothing changed", 0, []string{"js-workers-0"})
	fail(a)
	step("one of two pods of js-workers-1 failed", 0, []string{"js-workers-0"})
	fail(c)
	step("js-leader-0's only pod failed", 1, []string{"js-leader-0", "js-workers-0"})
	step("nothing changed again", 0, []string{"js-leader-0", "js-workers-0"})
	fx.clock.Step(predecessorRelist)
	step("the last list is too old", 1, []string{"js-leader-0", "js-workers-0"})
	fail(b)
	step("js-workers-1's last pod failed", 1, allJobs)
	if n := len(fx.c.waits.byKey); n != 0 {
		t.Errorf("%d waits kept after the last Job was created", n)
	}
}

// restartedFixture is a JobSet of three Jobs that has just decided a
// restart (js-workers-0 failed) and deleted its first attempt's Jobs.
func restartedFixture(t *testing.T) *fixture {
	t.Helper()
	js := newJobSet("js", func(js *jobset.JobSet) {
		js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 3}
	})
	fx := newFixture(t, js)
	fx.sync("js")
	fx.setJob("js-workers-0", failJob("BackoffLimitExceeded", "x", t0))
	fx.sync("js")
	return fx
}
