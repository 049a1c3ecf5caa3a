package replicatedjob

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

func int32p(v int32) *int32 { return &v }

func testJobSet() *jobset.JobSet {
	indexed := batchv1.IndexedCompletion
	nonIndexed := batchv1.NonIndexedCompletion
	return &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: "js", Namespace: "ns", UID: "11111111-2222-4333-8444-555555555555",
			ResourceVersion: "42", Labels: map[string]string{"a": "b"},
			CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour)),
		},
		Spec: jobset.JobSetSpec{ReplicatedJobs: []jobset.ReplicatedJob{
			{Name: "leader", Replicas: 1, GroupName: "default", Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Parallelism: int32p(1), Completions: int32p(1), CompletionMode: &indexed}}},
			{Name: "workers", Replicas: 3, GroupName: "pool", Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Parallelism: int32p(4), Completions: int32p(4), CompletionMode: &indexed}}},
			{Name: "plain", Replicas: 1, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				CompletionMode: &nonIndexed}}},
		}},
		Status: jobset.JobSetStatus{ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{
			{Name: "workers", Ready: 2, Succeeded: 1, Failed: 0, Active: 2},
		}},
	}
}

func TestSplitName(t *testing.T) {
	for _, tc := range []struct {
		in     string
		js, rj string
		ok     bool
	}{
		{"js.workers", "js", "workers", true},
		{"a-b.c-d", "a-b", "c-d", true},
		{"js", "", "", false},
		{"js.", "", "", false},
		{".workers", "", "", false},
		{"", "", "", false},
	} {
		js, rj, ok := SplitName(tc.in)
		if js != tc.js || rj != tc.rj || ok != tc.ok {
			t.Errorf("SplitName(%q) = %q %q %v, want %q %q %v", tc.in, js, rj, ok, tc.js, tc.rj, tc.ok)
		}
	}
	if js, rj, _ := SplitName(Name("x", "y")); js != "x" || rj != "y" {
		t.Errorf("SplitName(Name(x, y)) = %s %s", js, rj)
	}
}

func TestUID(t *testing.T) {
	a := UID("11111111-2222-4333-8444-555555555555", "workers")
	if a != UID("11111111-2222-4333-8444-555555555555", "workers") {
		t.Errorf("UID is not deterministic")
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(string(a)) {
		t.Errorf("UID %s is not a version-5 UUID", a)
	}
	for _, other := range []types.UID{
		UID("11111111-2222-4333-8444-555555555555", "leader"),
		UID("11111111-2222-4333-8444-555555555556", "workers"),
	} {
		if other == a {
			t.Errorf("UIDs of different replicatedJobs or JobSets collide: %s", a)
		}
	}
}

func TestProject(t *testing.T) {
	js := testJobSet()
	p := project(js, 1)
	if p.Name != "js.workers" || p.Namespace != "ns" || p.ResourceVersion != "42" || p.Labels["a"] != "b" {
		t.Errorf("metadata %+v", p.ObjectMeta)
	}
	if p.UID != UID(js.UID, "workers") {
		t.Errorf("uid %s", p.UID)
	}
	if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != js.UID || p.OwnerReferences[0].APIVersion != "jobset.x-k8s.io/v1alpha2" {
		t.Errorf("owner references %+v", p.OwnerReferences)
	}
	if p.Spec.Replicas != 3 || *p.Spec.Parallelism != 4 || *p.Spec.Completions != 4 || p.Spec.GroupName != "pool" || p.Spec.JobSetName != "js" {
		t.Errorf("spec %+v", p.Spec)
	}
	if p.Status.Ready != 2 || p.Status.Succeeded != 1 || p.Status.Name != "workers" {
		t.Errorf("status %+v", p.Status)
	}
	// The projection does not alias the JobSet.
	*p.Spec.Parallelism = 9
	p.Labels["a"] = "c"
	if *js.Spec.ReplicatedJobs[1].Template.Spec.Parallelism != 4 || js.Labels["a"] != "b" {
		t.Errorf("projection aliases the JobSet")
	}
	if l := project(js, 0); l.Status.Name != "leader" || l.Status.Ready != 0 {
		t.Errorf("leader without status entry: %+v", l.Status)
	}

	items := projectAll(js, fields.OneTermEqualSelector("metadata.name", "js.leader"))
	if len(items) != 1 || items[0].Name != "js.leader" {
		t.Errorf("field-selected projection %v", items)
	}
	if n := len(projectAll(js, fields.Everything())); n != 3 {
		t.Errorf("%d projections, want 3", n)
	}
}

func TestScaleOf(t *testing.T) {
	js := testJobSet()
	s := scaleOf(js, 1)
	if s.Name != "js.workers" || s.Spec.Replicas != 4 || s.Status.Replicas != 0 || s.ResourceVersion != "42" {
		t.Errorf("scale %+v", s)
	}
	// status.replicas is what the controller observed, not the template.
	js.Status.ReplicatedJobsStatus[0].ObservedParallelism = ptr.To[int32](3)
	if s := scaleOf(js, 1); s.Status.Replicas != 3 || s.Spec.Replicas != 4 {
		t.Errorf("observed scale %+v %+v, want spec 4 status 3", s.Spec, s.Status)
	}
	want := "jobset.sigs.k8s.io/jobset-name=js,jobset.sigs.k8s.io/replicatedjob-name=workers,jobset.sigs.k8s.io/job-index=0"
	if s.Status.Selector != want {
		t.Errorf("selector %q", s.Status.Selector)
	}
	if p := scaleOf(js, 2); p.Spec.Replicas != 1 {
		t.Errorf("unset parallelism reads as %d, want 1", p.Spec.Replicas)
	}
}

func TestValidateScale(t *testing.T) {
	js := testJobSet()
	queued := testJobSet()
	queued.Labels[jobset.QueueNameLabel] = "q"
	allowed := testJobSet()
	allowed.Labels[jobset.QueueNameLabel] = "q"
	allowed.Annotations = map[string]string{jobset.AllowScaleUnderQueueAnnotation: "true"}
	for _, tc := range []struct {
		name     string
		js       *jobset.JobSet
		idx      int
		replicas int32
		want     string
	}{
		{"ok", js, 1, 8, ""},
		{"unchanged", js, 1, 4, ""},
		{"zero", js, 1, 0, "suspend"},
		{"negative", js, 1, -3, "suspend"},
		{"nonIndexed", js, 2, 2, "NonIndexed"},
		{"nonIndexedUnchanged", js, 2, 1, ""},
		{"queued", queued, 1, 8, jobset.AllowScaleUnderQueueAnnotation},
		{"queuedUnchanged", queued, 1, 4, ""},
		{"queuedAllowed", allowed, 1, 8, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := scaleOf(tc.js, tc.idx)
			s.Spec.Replicas = tc.replicas
			errs := validateScale(tc.js, tc.idx, s)
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("unexpected errors %v", errs)
			case tc.want != "" && !strings.Contains(errs.ToAggregate().Error(), tc.want):
				t.Errorf("errors %v do not say %q", errs, tc.want)
			}
		})
	}
}

func TestTable(t *testing.T) {
	js := testJobSet()
	list := &jobset.ReplicatedJobResourceList{Items: []jobset.ReplicatedJobResource{*project(js, 1), *project(js, 2)}}
	table, err := convertToTable(list)
	if err != nil {
		t.Fatal(err)
	}
	if len(table.ColumnDefinitions) != 8 || len(table.Rows) != 2 {
		t.Fatalf("%d columns %d rows", len(table.ColumnDefinitions), len(table.Rows))
	}
	got := table.Rows[0].Cells
	if got[0] != "js.workers" || got[1] != "js" || got[2] != int64(3) || got[3] != "4" || got[4] != int64(2) || got[5] != int64(1) || got[6] != int64(0) || got[7] != "60m" {
		t.Errorf("row %v", got)
	}
	if got := table.Rows[1].Cells[3]; got != "<unset>" {
		t.Errorf("unset parallelism shows %v", got)
	}
	if _, err := convertToTable(&jobset.JobSet{}); err == nil {
		t.Errorf("a JobSet rendered as a ReplicatedJob table")
	}
}

func TestProjectingWatch(t *testing.T) {
	src := watch.NewFake()
	w := newProjectingWatch(src, fields.Everything())
	defer w.Stop()
	js := testJobSet()
	go func() {
		src.Add(js)
		src.Action(watch.Bookmark, &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "50"}})
		src.Delete(js)
	}()
	var got []string
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(got) < 7 {
		select {
		case ev := <-w.ResultChan():
			rj := ev.Object.(*jobset.ReplicatedJobResource)
			got = append(got, string(ev.Type)+" "+rj.Name+" "+rj.ResourceVersion)
		case <-ctx.Done():
			t.Fatalf("events so far %v", got)
		}
	}
	want := []string{
		"ADDED js.leader 42", "ADDED js.workers 42", "ADDED js.plain 42",
		"BOOKMARK  50",
		"DELETED js.leader 42", "DELETED js.workers 42", "DELETED js.plain 42",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events %v, want %v", got, want)
	}
	w.Stop()
	w.Stop()
	if _, ok := <-w.ResultChan(); ok {
		// A buffered event may race with Stop; the channel must close.
		for range w.ResultChan() {
		}
	}
}

// A 409 raised by the scale update itself keeps its specific message; a
// 409 of the JobSet store gets the generic one, naming the ReplicatedJob.
func TestTranslateConflict(t *testing.T) {
	own := apierrors.NewConflict(Resource, "js.workers", errors.New("the Scale's uid x is not the ReplicatedJob's (y): the JobSet was recreated"))
	if got := translateError(own, "js.workers"); !strings.Contains(got.Error(), "the JobSet was recreated") {
		t.Fatalf("own conflict rewritten: %v", got)
	}
	// The JobSet store names the JobSet.
	store := apierrors.NewConflict(Resource, "js", errors.New("object was modified"))
	got := translateError(store, "js.workers")
	if !apierrors.IsConflict(got) || !strings.Contains(got.Error(), `"js.workers"`) || !strings.Contains(got.Error(), "read the scale again") {
		t.Fatalf("store conflict = %v", got)
	}
}
