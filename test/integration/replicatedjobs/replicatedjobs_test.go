// Package replicatedjobs tests the replicatedjobs resource and its scale
// subresource against an in-process server.
package replicatedjobs

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/registry/replicatedjob"
	"github.com/nativejobset/jobset/test/integration/framework"
)

// TestReplicatedJobs runs every case on one server; each subtest uses its
// own namespace.
func TestReplicatedJobs(t *testing.T) {
	s := framework.StartServer(t)
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *framework.Server, string)
	}{
		{"GetProjection", testGet},
		{"List", testList},
		{"Watch", testWatch},
		{"ScaleGet", testScaleGet},
		{"ScaleUpdateTyped", testScaleUpdateTyped},
		{"ScaleMergePatch", testScaleMergePatch},
		{"ScaleApply", testScaleApply},
		{"ScaleCompletionsUnset", testScaleCompletionsUnset},
		{"ScaleErrors", testScaleErrors},
		{"ScaleQueue", testScaleQueue},
		{"ManagedFields", testManagedFields},
		{"Table", testTable},
		{"Discovery", testDiscovery},
		{"OpenAPI", testOpenAPI},
	} {
		ns := "rj-" + strings.ToLower(tc.name)
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, s, ns) })
	}
}

func testGet(t *testing.T, s *framework.Server, ns string) {
	ctx := context.Background()
	js := create(t, s, newJobSet(ns, "train"))
	js.Status.ReplicatedJobsStatus = []v1alpha2.ReplicatedJobStatus{
		{Name: "leader", Ready: 1},
		{Name: "workers", Ready: 1, Succeeded: 1, Active: 1},
	}
	js, err := s.Client.JobsetV1alpha2().JobSets(ns).UpdateStatus(ctx, js, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}

	rjs := s.Client.JobsetV1alpha2().ReplicatedJobResources(ns)
	w, err := rjs.Get(ctx, "train.workers", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if w.Name != "train.workers" || w.Namespace != ns {
		t.Errorf("name %s/%s", w.Namespace, w.Name)
	}
	if w.ResourceVersion != js.ResourceVersion {
		t.Errorf("resourceVersion %s, JobSet's %s", w.ResourceVersion, js.ResourceVersion)
	}
	if w.Labels["team"] != "ml" {
		t.Errorf("labels %v, want the JobSet's", w.Labels)
	}
	if w.UID == "" || w.UID == js.UID {
		t.Errorf("uid %q must be its own (JobSet's %q)", w.UID, js.UID)
	}
	if w.UID != replicatedjob.UID(js.UID, "workers") {
		t.Errorf("uid %q is not derived from the JobSet's", w.UID)
	}
	if len(w.OwnerReferences) != 1 || w.OwnerReferences[0].UID != js.UID || w.OwnerReferences[0].Kind != "JobSet" || w.OwnerReferences[0].Name != "train" {
		t.Errorf("ownerReferences %+v", w.OwnerReferences)
	}
	if w.Spec.JobSetName != "train" || w.Spec.ReplicatedJob != "workers" || w.Spec.GroupName != "pool" ||
		w.Spec.Replicas != 2 || deref(w.Spec.Parallelism) != 2 || deref(w.Spec.Completions) != 2 ||
		w.Spec.CompletionMode == nil || *w.Spec.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("spec %+v", w.Spec)
	}
	if w.Status.Name != "workers" || w.Status.Ready != 1 || w.Status.Succeeded != 1 || w.Status.Active != 1 {
		t.Errorf("status %+v", w.Status)
	}

	// The UID is stable across reads and differs between replicatedJobs.
	again, err := rjs.Get(ctx, "train.workers", metav1.GetOptions{})
	if err != nil || again.UID != w.UID {
		t.Errorf("second read uid %v (err %v), first %v", again.UID, err, w.UID)
	}
	l, err := rjs.Get(ctx, "train.leader", metav1.GetOptions{})
	if err != nil || l.UID == w.UID {
		t.Errorf("leader uid %v (err %v) equals workers'", l.UID, err)
	}

	for _, name := range []string{"train.nope", "nope.workers", "train", "train.", ".workers"} {
		_, err := rjs.Get(ctx, name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("get %q: %v, want NotFound", name, err)
		}
	}
	_, err = rjs.Get(ctx, "train.nope", metav1.GetOptions{})
	if err == nil || !strings.Contains(err.Error(), `"train.nope"`) {
		t.Errorf("not-found error %v does not name train.nope", err)
	}
}

func names(items []v1alpha2.ReplicatedJobResource) []string {
	var out []string
	for _, i := range items {
		out = append(out, i.Namespace+"/"+i.Name)
	}
	slices.Sort(out)
	return out
}

func testList(t *testing.T, s *framework.Server, ns string) {
	ctx := context.Background()
	other := ns + "-other"
	create(t, s, newJobSet(ns, "a"))
	create(t, s, newJobSet(ns, "b", func(js *v1alpha2.JobSet) { js.Labels = map[string]string{"team": "infra"} }))
	create(t, s, newJobSet(other, "c"))

	list, err := s.Client.JobsetV1alpha2().ReplicatedJobResources(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	want := []string{ns + "/a.leader", ns + "/a.workers", ns + "/b.leader", ns + "/b.workers"}
	if got := names(list.Items); !slices.Equal(got, want) {
		t.Errorf("namespace list %v, want %v", got, want)
	}
	if list.ResourceVersion == "" {
		t.Errorf("list has no resourceVersion")
	}

	list, err = s.Client.JobsetV1alpha2().ReplicatedJobResources(ns).List(ctx, metav1.ListOptions{LabelSelector: "team=infra"})
	if err != nil {
		t.Fatalf("list by label: %v", err)
	}
	if got := names(list.Items); !slices.Equal(got, []string{ns + "/b.leader", ns + "/b.workers"}) {
		t.Errorf("label-selected list %v", got)
	}

	list, err = s.Client.JobsetV1alpha2().ReplicatedJobResources(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=a.workers"})
	if err != nil {
		t.Fatalf("list by field: %v", err)
	}
	if got := names(list.Items); !slices.Equal(got, []string{ns + "/a.workers"}) {
		t.Errorf("field-selected list %v", got)
	}

	all, err := s.Client.JobsetV1alpha2().ReplicatedJobResources("").List(ctx, metav1.ListOptions{LabelSelector: "team=ml"})
	if err != nil {
		t.Fatalf("list all namespaces: %v", err)
	}
	got := names(all.Items)
	for _, w := range []string{ns + "/a.workers", other + "/c.leader", other + "/c.workers"} {
		if !slices.Contains(got, w) {
			t.Errorf("all-namespaces list %v lacks %s", got, w)
		}
	}
	if slices.Contains(got, ns+"/b.workers") {
		t.Errorf("all-namespaces list %v holds b, whose labels do not match", got)
	}
}

func testWatch(t *testing.T, s *framework.Server, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	rjs := s.Client.JobsetV1alpha2().ReplicatedJobResources(ns)
	w, err := rjs.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()

	next := func() watch.Event {
		t.Helper()
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed")
			}
			return ev
		case <-ctx.Done():
			t.Fatalf("no watch event")
		}
		return watch.Event{}
	}
	expect := func(typ watch.EventType, wantNames ...string) {
		t.Helper()
		var got []string
		for range wantNames {
			ev := next()
			rj, ok := ev.Object.(*v1alpha2.ReplicatedJobResource)
			if ev.Type != typ || !ok {
				t.Fatalf("event %s %T, want %s of a ReplicatedJob", ev.Type, ev.Object, typ)
			}
			got = append(got, rj.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, wantNames) {
			t.Errorf("%s events for %v, want %v", typ, got, wantNames)
		}
	}

	create(t, s, newJobSet(ns, "w"))
	expect(watch.Added, "w.leader", "w.workers")

	if _, err := rjs.UpdateScale(ctx, "w.workers", &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "w.workers", Namespace: ns},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 3},
	}, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("scale: %v", err)
	}
	expect(watch.Modified, "w.leader", "w.workers")

	if err := s.Client.JobsetV1alpha2().JobSets(ns).Delete(ctx, "w", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	expect(watch.Deleted, "w.leader", "w.workers")
}

func testScaleGet(t *testing.T, s *framework.Server, ns string) {
	js := create(t, s, newJobSet(ns, "sg"))
	sc, err := s.Client.JobsetV1alpha2().ReplicatedJobResources(ns).GetScale(context.Background(), "sg.workers", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get scale: %v", err)
	}
	if sc.Name != "sg.workers" || sc.Namespace != ns || sc.ResourceVersion != js.ResourceVersion || sc.UID != replicatedjob.UID(js.UID, "workers") {
		t.Errorf("scale metadata %+v", sc.ObjectMeta)
	}
	// No controller runs here, so no Job reports a parallelism yet.
	if sc.Spec.Replicas != 2 || sc.Status.Replicas != 0 {
		t.Errorf("scale spec %d status %d, want 2 and 0", sc.Spec.Replicas, sc.Status.Replicas)
	}
	want := "jobset.sigs.k8s.io/jobset-name=sg,jobset.sigs.k8s.io/replicatedjob-name=workers,jobset.sigs.k8s.io/job-index=0"
	if sc.Status.Selector != want {
		t.Errorf("selector %q, want %q", sc.Status.Selector, want)
	}

	// status.replicas follows what the controller reports for the Jobs.
	js.Status.ReplicatedJobsStatus = []v1alpha2.ReplicatedJobStatus{{Name: "workers", ObservedParallelism: ptr.To[int32](3)}}
	if _, err := s.Client.JobsetV1alpha2().JobSets(ns).UpdateStatus(context.Background(), js, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update status: %v", err)
	}
	sc, err = s.Client.JobsetV1alpha2().ReplicatedJobResources(ns).GetScale(context.Background(), "sg.workers", metav1.GetOptions{})
	if err != nil || sc.Spec.Replicas != 2 || sc.Status.Replicas != 3 {
		t.Errorf("after the status write: scale %+v %+v, err %v; want spec 2 status 3", sc.Spec, sc.Status, err)
	}

	// The body says autoscaling/v1 Scale.
	code, body, err := raw(s, http.MethodGet, scalePath(ns, "sg.workers"), "", nil, "application/json")
	if err != nil || code != http.StatusOK {
		t.Fatalf("raw get: %d %v", code, err)
	}
	var tm metav1.TypeMeta
	_ = json.Unmarshal(body, &tm)
	if tm.APIVersion != "autoscaling/v1" || tm.Kind != "Scale" {
		t.Errorf("scale body is %s %s", tm.APIVersion, tm.Kind)
	}
}

func testScaleUpdateTyped(t *testing.T, s *framework.Server, ns string) {
	ctx := context.Background()
	before := create(t, s, newJobSet(ns, "su"))
	rjs := s.Client.JobsetV1alpha2().ReplicatedJobResources(ns)
	// As an HPA does: read, then write back with the resourceVersion.
	sc, err := rjs.GetScale(ctx, "su.workers", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get scale: %v", err)
	}
	sc.Spec.Replicas = 5
	out, err := rjs.UpdateScale(ctx, "su.workers", sc, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update scale: %v", err)
	}
	if out.Spec.Replicas != 5 || out.Status.Replicas != 0 {
		t.Errorf("answer spec %d status %d, want 5 and 0", out.Spec.Replicas, out.Status.Replicas)
	}
	after := getJobSet(t, s, ns, "su")
	if p, c := deref(rjSpec(after, "workers").Parallelism), deref(rjSpec(after, "workers").Completions); p != 5 || c != 5 {
		t.Errorf("workers parallelism %d completions %d, want 5 and 5", p, c)
	}
	if p := deref(rjSpec(after, "leader").Parallelism); p != 1 {
		t.Errorf("leader parallelism changed to %d", p)
	}
	if after.Generation != before.Generation+1 {
		t.Errorf("generation %d, want %d", after.Generation, before.Generation+1)
	}
	if out.ResourceVersion != after.ResourceVersion {
		t.Errorf("answer resourceVersion %s, JobSet's %s", out.ResourceVersion, after.ResourceVersion)
	}

	// A dry run answers the new scale and stores nothing.
	dry := out.DeepCopy()
	dry.Spec.Replicas = 9
	dryOut, err := rjs.UpdateScale(ctx, "su.workers", dry, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil || dryOut.Spec.Replicas != 9 {
		t.Fatalf("dry-run scale: %v %+v", err, dryOut)
	}
	if got := getJobSet(t, s, ns, "su"); got.ResourceVersion != after.ResourceVersion || deref(rjSpec(got, "workers").Parallelism) != 5 {
		t.Errorf("dry-run scale changed the JobSet")
	}

	// Writing the same value changes nothing.
	out.Spec.Replicas = 5
	if _, err := rjs.UpdateScale(ctx, "su.workers", out, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("no-op scale: %v", err)
	}
	if g := getJobSet(t, s, ns, "su").Generation; g != after.Generation {
		t.Errorf("no-op scale bumped generation to %d", g)
	}
}

func testScaleMergePatch(t *testing.T, s *framework.Server, ns string) {
	before := create(t, s, newJobSet(ns, "mp"))
	code, body, err := raw(s, http.MethodPatch, scalePath(ns, "mp.workers"), string(types.MergePatchType), []byte(`{"spec":{"replicas":6}}`), "application/json")
	if err != nil || code != http.StatusOK {
		t.Fatalf("merge patch: %d %v %s", code, err, body)
	}
	var sc autoscalingv1.Scale
	if err := json.Unmarshal(body, &sc); err != nil || sc.Spec.Replicas != 6 || sc.Kind != "Scale" {
		t.Errorf("patch answer %s (%v)", body, err)
	}
	after := getJobSet(t, s, ns, "mp")
	if p, c := deref(rjSpec(after, "workers").Parallelism), deref(rjSpec(after, "workers").Completions); p != 6 || c != 6 {
		t.Errorf("parallelism %d completions %d, want 6 and 6", p, c)
	}
	if after.Generation != before.Generation+1 {
		t.Errorf("generation %d, want %d", after.Generation, before.Generation+1)
	}
}

func testScaleApply(t *testing.T, s *framework.Server, ns string) {
	create(t, s, newJobSet(ns, "ap"))
	body := []byte(`{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"ap.workers","namespace":"` + ns + `"},"spec":{"replicas":4}}`)
	code, out, err := raw(s, http.MethodPatch, scalePath(ns, "ap.workers"), string(types.ApplyYAMLPatchType), body, "application/json",
		"fieldManager", "applier", "force", "true")
	if err != nil || code != http.StatusOK {
		t.Fatalf("apply: %d %v %s", code, err, out)
	}
	after := getJobSet(t, s, ns, "ap")
	if p := deref(rjSpec(after, "workers").Parallelism); p != 4 {
		t.Errorf("parallelism %d after apply, want 4", p)
	}
	owned := false
	for _, e := range after.ManagedFields {
		if e.Manager == "applier" && ownsParallelism(t, e, "workers") {
			owned = true
		}
	}
	if !owned {
		t.Errorf("applier does not own workers' parallelism: %+v", after.ManagedFields)
	}
}

func testScaleCompletionsUnset(t *testing.T, s *framework.Server, ns string) {
	create(t, s, newJobSet(ns, "cu", func(js *v1alpha2.JobSet) {
		js.Spec.ReplicatedJobs[1].Template = template(2, 0)
	}))
	rjs := s.Client.JobsetV1alpha2().ReplicatedJobResources(ns)
	if _, err := rjs.UpdateScale(context.Background(), "cu.workers", &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "cu.workers", Namespace: ns},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 3},
	}, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("scale: %v", err)
	}
	spec := rjSpec(getJobSet(t, s, ns, "cu"), "workers")
	if deref(spec.Parallelism) != 3 || spec.Completions != nil {
		t.Errorf("parallelism %d completions %v, want 3 and unset", deref(spec.Parallelism), spec.Completions)
	}
}

// scaleTo writes replicas through UpdateScale without a resourceVersion.
func scaleTo(s *framework.Server, ns, name string, replicas int32) error {
	_, err := s.Client.JobsetV1alpha2().ReplicatedJobResources(ns).UpdateScale(context.Background(), name, &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       autoscalingv1.ScaleSpec{Replicas: replicas},
	}, metav1.UpdateOptions{})
	return err
}

func testScaleErrors(t *testing.T, s *framework.Server, ns string) {
	ctx := context.Background()
	nonIndexed := batchv1.NonIndexedCompletion
	create(t, s, newJobSet(ns, "e", func(js *v1alpha2.JobSet) {
		js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, v1alpha2.ReplicatedJob{Name: "plain", Template: template(2, 0)})
		js.Spec.ReplicatedJobs[2].Template.Spec.CompletionMode = &nonIndexed
		js.Spec.ReplicatedJobs[1].Replicas = i32(1000)
	}))
	terminal := create(t, s, newJobSet(ns, "done"))
	terminal.Status.TerminalState = "Completed"
	if _, err := s.Client.JobsetV1alpha2().JobSets(ns).UpdateStatus(ctx, terminal, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("mark terminal: %v", err)
	}
	stale, err := s.Client.JobsetV1alpha2().ReplicatedJobResources(ns).GetScale(ctx, "e.workers", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get scale: %v", err)
	}
	// Change the JobSet so that stale's resourceVersion is old.
	if err := scaleTo(s, ns, "e.workers", 3); err != nil {
		t.Fatalf("scale: %v", err)
	}
	before := getJobSet(t, s, ns, "e")

	for _, tc := range []struct {
		name     string
		do       func() error
		code     int32
		contains string
	}{
		{"NonIndexed", func() error { return scaleTo(s, ns, "e.plain", 3) }, 422, "Indexed"},
		{"Zero", func() error { return scaleTo(s, ns, "e.workers", 0) }, 422, "suspend"},
		{"Negative", func() error { return scaleTo(s, ns, "e.workers", -1) }, 422, "suspend"},
		{"Overflow", func() error { return scaleTo(s, ns, "e.workers", math.MaxInt32/1000+1) }, 422, "must not exceed"},
		{"Terminal", func() error { return scaleTo(s, ns, "done.workers", 3) }, 422, "Cannot mutate a JobSet in a terminal state"},
		{"StaleResourceVersion", func() error {
			stale.Spec.Replicas = 4
			_, err := s.Client.JobsetV1alpha2().ReplicatedJobResources(ns).UpdateScale(ctx, "e.workers", stale, metav1.UpdateOptions{})
			return err
		}, 409, `"e.workers"`},
		{"WrongUID", func() error {
			sc, err := s.Client.JobsetV1alpha2().ReplicatedJobResources(ns).GetScale(ctx, "e.workers", metav1.GetOptions{})
			if err != nil {
				return err
			}
			sc.UID = "0a0a0a0a-0000-4000-8000-000000000000"
			sc.Spec.Replicas = 4
			_, err = s.Client.JobsetV1alpha2().ReplicatedJobResources(ns).UpdateScale(ctx, "e.workers", sc, metav1.UpdateOptions{})
			return err
		}, 409, "the JobSet was recreated"},
		{"MissingReplicatedJob", func() error { return scaleTo(s, ns, "e.nope", 3) }, 404, `"e.nope"`},
		{"MissingJobSet", func() error { return scaleTo(s, ns, "nope.workers", 3) }, 404, `"nope.workers"`},
		{"MissingJobSetGet", func() error {
			_, err := s.Client.JobsetV1alpha2().ReplicatedJobResources(ns).GetScale(ctx, "nope.workers", metav1.GetOptions{})
			return err
		}, 404, `"nope.workers"`},
		{"MissingReplicatedJobPatch", func() error {
			code, body, _ := raw(s, http.MethodPatch, scalePath(ns, "e.nope"), string(types.MergePatchType), []byte(`{"spec":{"replicas":6}}`), "application/json")
			return bodyError(code, body)
		}, 404, `"e.nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if got := statusCode(err); got != tc.code {
				t.Fatalf("error %v: code %d, want %d", err, got, tc.code)
			}
			if !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("error %q does not say %q", err, tc.contains)
			}
		})
	}

	after := getJobSet(t, s, ns, "e")
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("a rejected scale changed the JobSet: %+v", after.Spec)
	}
	if p := deref(rjSpec(getJobSet(t, s, ns, "done"), "workers").Parallelism); p != 2 {
		t.Errorf("terminal JobSet's parallelism %d", p)
	}
}

func testScaleQueue(t *testing.T, s *framework.Server, ns string) {
	queued := func(js *v1alpha2.JobSet) { js.Labels[v1alpha2.QueueNameLabel] = "user-queue" }
	create(t, s, newJobSet(ns, "q", queued))
	err := scaleTo(s, ns, "q.workers", 3)
	if statusCode(err) != 422 || !strings.Contains(err.Error(), v1alpha2.AllowScaleUnderQueueAnnotation) {
		t.Errorf("scale under a queue: %v, want 422 naming the annotation", err)
	}
	if p := deref(rjSpec(getJobSet(t, s, ns, "q"), "workers").Parallelism); p != 2 {
		t.Errorf("parallelism %d after a refused scale", p)
	}
	// Writing the current value is no change and passes.
	if err := scaleTo(s, ns, "q.workers", 2); err != nil {
		t.Errorf("no-op scale under a queue: %v", err)
	}

	create(t, s, newJobSet(ns, "qa", queued, func(js *v1alpha2.JobSet) {
		js.Annotations = map[string]string{v1alpha2.AllowScaleUnderQueueAnnotation: "true"}
	}))
	if err := scaleTo(s, ns, "qa.workers", 3); err != nil {
		t.Fatalf("scale of an annotated queued JobSet: %v", err)
	}
	if p := deref(rjSpec(getJobSet(t, s, ns, "qa"), "workers").Parallelism); p != 3 {
		t.Errorf("parallelism %d, want 3", p)
	}
}

func testManagedFields(t *testing.T, s *framework.Server, ns string) {
	ctx := context.Background()
	create(t, s, newJobSet(ns, "mf"))
	owners := func() (creatorWorkers, creatorLeader, scalerWorkers bool) {
		js := getJobSet(t, s, ns, "mf")
		for _, e := range js.ManagedFields {
			switch e.Manager {
			case "creator":
				creatorWorkers = creatorWorkers || ownsParallelism(t, e, "workers")
				creatorLeader = creatorLeader || ownsParallelism(t, e, "leader")
			case "scaler":
				if e.Subresource != "scale" {
					t.Errorf("scaler's entry has subresource %q, want scale", e.Subresource)
				}
				scalerWorkers = scalerWorkers || ownsParallelism(t, e, "workers")
			}
		}
		return
	}
	if cw, cl, sw := owners(); !cw || !cl || sw {
		t.Fatalf("before: creator owns workers %v leader %v, scaler %v", cw, cl, sw)
	}
	_, err := s.Client.JobsetV1alpha2().ReplicatedJobResources(ns).UpdateScale(ctx, "mf.workers", &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "mf.workers", Namespace: ns},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 3},
	}, metav1.UpdateOptions{FieldManager: "scaler"})
	if err != nil {
		t.Fatalf("scale: %v", err)
	}
	if cw, cl, sw := owners(); cw || !cl || !sw {
		t.Errorf("after: creator owns workers %v (want false) leader %v (want true), scaler owns workers %v (want true)", cw, cl, sw)
	}
}

func testTable(t *testing.T, s *framework.Server, ns string) {
	create(t, s, newJobSet(ns, "tb"))
	code, body, err := raw(s, http.MethodGet, apiPrefix+"/namespaces/"+ns+"/replicatedjobs", "", nil,
		"application/json;as=Table;v=v1;g=meta.k8s.io")
	if err != nil || code != http.StatusOK {
		t.Fatalf("table: %d %v", code, err)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatalf("decoding table: %v", err)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	want := []string{"Name", "JobSet", "Replicas", "Parallelism", "Ready", "Succeeded", "Failed", "Age"}
	if !slices.Equal(cols, want) {
		t.Errorf("columns %v, want %v", cols, want)
	}
	if len(table.Rows) != 2 {
		t.Fatalf("%d rows, want 2", len(table.Rows))
	}
	row := table.Rows[1].Cells
	if row[0] != "tb.workers" || row[1] != "tb" || row[2] != float64(2) || row[3] != "2" {
		t.Errorf("row %v", row)
	}
}

func testDiscovery(t *testing.T, s *framework.Server, _ string) {
	list, err := s.Client.Discovery().ServerResourcesForGroupVersion("jobset.x-k8s.io/v1alpha2")
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	found := map[string]metav1.APIResource{}
	for _, r := range list.APIResources {
		found[r.Name] = r
	}
	rj, ok := found["replicatedjobs"]
	if !ok {
		t.Fatalf("no replicatedjobs in %v", list.APIResources)
	}
	if rj.Kind != "ReplicatedJob" || !rj.Namespaced || !slices.Equal(rj.ShortNames, []string{"rj"}) || rj.SingularName != "replicatedjob" {
		t.Errorf("replicatedjobs: %+v", rj)
	}
	verbs := slices.Clone([]string(rj.Verbs))
	slices.Sort(verbs)
	if !slices.Equal(verbs, []string{"get", "list", "watch"}) {
		t.Errorf("replicatedjobs verbs %v", verbs)
	}
	sc, ok := found["replicatedjobs/scale"]
	if !ok {
		t.Fatalf("no replicatedjobs/scale")
	}
	if sc.Group != "autoscaling" || sc.Version != "v1" || sc.Kind != "Scale" {
		t.Errorf("replicatedjobs/scale: %+v", sc)
	}
	verbs = slices.Clone([]string(sc.Verbs))
	slices.Sort(verbs)
	if !slices.Equal(verbs, []string{"get", "patch", "update"}) {
		t.Errorf("replicatedjobs/scale verbs %v", verbs)
	}
}

func testOpenAPI(t *testing.T, s *framework.Server, _ string) {
	code, body, err := raw(s, http.MethodGet, "/openapi/v3/apis/jobset.x-k8s.io/v1alpha2", "", nil, "application/json")
	if err != nil || code != http.StatusOK {
		t.Fatalf("openapi: %d %v", code, err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				GVK []map[string]string `json:"x-kubernetes-group-version-kind"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("decoding openapi: %v", err)
	}
	kinds := map[string]string{}
	for name, sch := range doc.Components.Schemas {
		for _, g := range sch.GVK {
			kinds[g["group"]+"/"+g["version"]+"/"+g["kind"]] = name
		}
	}
	for _, k := range []string{"jobset.x-k8s.io/v1alpha2/ReplicatedJob", "jobset.x-k8s.io/v1alpha2/ReplicatedJobList", "autoscaling/v1/Scale"} {
		if _, ok := kinds[k]; !ok {
			t.Errorf("no schema tagged %s; tagged: %v", k, kinds)
		}
	}
	for k := range kinds {
		if strings.Contains(k, "__internal") {
			t.Errorf("schema %s tagged with an internal version %s", kinds[k], k)
		}
	}

	// OpenAPI v2 holds the paths of the resource and of its scale.
	code, body, err = raw(s, http.MethodGet, "/openapi/v2", "", nil, "application/json")
	if err != nil || code != http.StatusOK {
		t.Fatalf("openapi v2: %d %v", code, err)
	}
	var v2 struct {
		Paths map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(body, &v2); err != nil {
		t.Fatalf("decoding openapi v2: %v", err)
	}
	for _, p := range []string{
		apiPrefix + "/replicatedjobs",
		apiPrefix + "/namespaces/{namespace}/replicatedjobs/{name}",
		apiPrefix + "/namespaces/{namespace}/replicatedjobs/{name}/scale",
	} {
		if _, ok := v2.Paths[p]; !ok {
			t.Errorf("openapi v2 lacks path %s", p)
		}
	}
}
