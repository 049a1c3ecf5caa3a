package apiserver

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/integration/framework"
)

var jobsetsGVR = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}

// nextEvent returns the next event of w, failing after waitTimeout.
func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatalf("watch closed early")
		}
		if ev.Type == watch.Error {
			t.Fatalf("watch error event: %v", ev.Object)
		}
		return ev
	case <-time.After(waitTimeout):
		t.Fatalf("no watch event within %s", waitTimeout)
	}
	return watch.Event{}
}

// nextNonBookmark skips bookmarks.
func nextNonBookmark(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	for {
		if ev := nextEvent(t, w); ev.Type != watch.Bookmark {
			return ev
		}
	}
}

func eventName(t *testing.T, ev watch.Event) string {
	t.Helper()
	m, err := metaOf(ev.Object)
	if err != nil {
		t.Fatalf("event object %T: %v", ev.Object, err)
	}
	return m.GetName()
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	switch o := obj.(type) {
	case *v1alpha2.JobSet:
		return o, nil
	case *unstructured.Unstructured:
		return o, nil
	}
	return nil, fmt.Errorf("unexpected %T", obj)
}

// TestWatch covers event order, resuming from a resourceVersion,
// bookmarks, selectors and the streaming list.
func TestWatch(t *testing.T) {
	s := framework.StartServer(t)
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("EventsInOrder", func(t *testing.T) {
		ns := "watch-order"
		client := s.Client.JobsetV1alpha2().JobSets(ns)
		list, err := client.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := client.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()

		created := mustCreate(t, s, newJobSet(ns, "w"))
		created.Labels = map[string]string{"changed": "yes"}
		updated, err := client.Update(ctx, created, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := client.Delete(ctx, "w", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}

		want := []struct {
			typ watch.EventType
			rv  string
		}{{watch.Added, created.ResourceVersion}, {watch.Modified, updated.ResourceVersion}, {watch.Deleted, ""}}
		for _, wnt := range want {
			ev := nextNonBookmark(t, w)
			js := ev.Object.(*v1alpha2.JobSet)
			if ev.Type != wnt.typ || js.Name != "w" {
				t.Fatalf("got %s %s, want %s w", ev.Type, js.Name, wnt.typ)
			}
			if wnt.rv != "" && js.ResourceVersion != wnt.rv {
				t.Errorf("%s event rv %s, want %s", ev.Type, js.ResourceVersion, wnt.rv)
			}
			if ev.Type == watch.Modified && js.Labels["changed"] != "yes" {
				t.Errorf("MODIFIED event lacks the new label: %v", js.Labels)
			}
		}
	})

	t.Run("FromResourceVersion", func(t *testing.T) {
		ns := "watch-from-rv"
		client := s.Client.JobsetV1alpha2().JobSets(ns)
		created := mustCreate(t, s, newJobSet(ns, "r"))
		created.Annotations = map[string]string{"step": "1"}
		first, err := client.Update(ctx, created, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		first.Annotations["step"] = "2"
		second, err := client.Update(ctx, first, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Everything after the first update, and nothing before it.
		w, err := client.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ev := nextNonBookmark(t, w)
		js := ev.Object.(*v1alpha2.JobSet)
		if ev.Type != watch.Modified || js.ResourceVersion != second.ResourceVersion || js.Annotations["step"] != "2" {
			t.Errorf("first event %s rv %s step %q, want MODIFIED rv %s step 2", ev.Type, js.ResourceVersion, js.Annotations["step"], second.ResourceVersion)
		}
	})

	t.Run("Bookmarks", func(t *testing.T) {
		ns := "watch-bookmarks"
		mustCreate(t, s, newJobSet(ns, "b"))
		list, err := s.Client.JobsetV1alpha2().JobSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The watch cache sends a bookmark about two seconds before a
		// watch's timeout, so a short timeout bounds the wait. Should a
		// heavily loaded machine delay the bookmark past the timeout, the
		// watch ends without one and is opened again, at most three times.
		for attempt := 1; ; attempt++ {
			w, err := s.Client.JobsetV1alpha2().JobSets(ns).Watch(ctx, metav1.ListOptions{
				ResourceVersion:     list.ResourceVersion,
				AllowWatchBookmarks: true,
				TimeoutSeconds:      ptr.To[int64](5),
			})
			if err != nil {
				t.Fatal(err)
			}
			// A bookmark is only sent once the cache has moved past the
			// watch's resourceVersion: a write elsewhere (not selected by
			// this watch) moves it.
			other := mustCreate(t, s, newJobSet(ns+"-other", fmt.Sprintf("moves-rv-%d", attempt)))
			var ev watch.Event
			select {
			case e, ok := <-w.ResultChan():
				if !ok {
					w.Stop()
					if attempt == 3 {
						t.Fatalf("three watches ended without a bookmark")
					}
					t.Logf("watch %d ended without a bookmark; retrying", attempt)
					continue
				}
				ev = e
			case <-time.After(waitTimeout):
				t.Fatalf("no event and no end of the watch within %s", waitTimeout)
			}
			w.Stop()
			if ev.Type != watch.Bookmark {
				t.Fatalf("first event is %s, want BOOKMARK", ev.Type)
			}
			js := ev.Object.(*v1alpha2.JobSet)
			got, _ := strconv.ParseUint(js.ResourceVersion, 10, 64)
			min, _ := strconv.ParseUint(other.ResourceVersion, 10, 64)
			if js.Name != "" || got < min {
				t.Errorf("bookmark object: name %q rv %q, want no name and rv >= %s", js.Name, js.ResourceVersion, other.ResourceVersion)
			}
			return
		}
	})

	t.Run("Selectors", func(t *testing.T) {
		ns := "watch-selectors"
		client := s.Client.JobsetV1alpha2().JobSets(ns)
		mustCreate(t, s, newJobSet(ns, "red-1", withLabels(map[string]string{"color": "red"})))
		mustCreate(t, s, newJobSet(ns, "blue-1", withLabels(map[string]string{"color": "blue"})))

		byLabel, err := client.List(ctx, metav1.ListOptions{LabelSelector: "color=red"})
		if err != nil {
			t.Fatal(err)
		}
		if len(byLabel.Items) != 1 || byLabel.Items[0].Name != "red-1" {
			t.Errorf("label selector list: %d items, want [red-1]", len(byLabel.Items))
		}
		byName, err := client.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=blue-1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(byName.Items) != 1 || byName.Items[0].Name != "blue-1" {
			t.Errorf("field selector list: %d items, want [blue-1]", len(byName.Items))
		}
		// The dynamic client sees the same.
		dynList, err := dyn.Resource(jobsetsGVR).Namespace(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=red-1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(dynList.Items) != 1 || dynList.Items[0].GetName() != "red-1" {
			t.Errorf("dynamic field selector list: %d items, want [red-1]", len(dynList.Items))
		}
		// An unsupported field is refused.
		if _, err := client.List(ctx, metav1.ListOptions{FieldSelector: "spec.suspend=true"}); err == nil {
			t.Errorf("field selector on spec.suspend accepted, want an error")
		}

		rv := byLabel.ResourceVersion
		labelW, err := client.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, LabelSelector: "color=red"})
		if err != nil {
			t.Fatal(err)
		}
		defer labelW.Stop()
		fieldW, err := dyn.Resource(jobsetsGVR).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, FieldSelector: "metadata.name=green-2"})
		if err != nil {
			t.Fatal(err)
		}
		defer fieldW.Stop()

		mustCreate(t, s, newJobSet(ns, "blue-2", withLabels(map[string]string{"color": "blue"})))
		mustCreate(t, s, newJobSet(ns, "green-1", withLabels(map[string]string{"color": "green"})))
		mustCreate(t, s, newJobSet(ns, "red-2", withLabels(map[string]string{"color": "red"})))
		mustCreate(t, s, newJobSet(ns, "green-2", withLabels(map[string]string{"color": "green"})))

		if ev := nextNonBookmark(t, labelW); ev.Type != watch.Added || eventName(t, ev) != "red-2" {
			t.Errorf("label watch: got %s %s, want ADDED red-2", ev.Type, eventName(t, ev))
		}
		if ev := nextNonBookmark(t, fieldW); ev.Type != watch.Added || eventName(t, ev) != "green-2" {
			t.Errorf("field watch: got %s %s, want ADDED green-2", ev.Type, eventName(t, ev))
		}
		// Relabelling red-2 to blue makes it leave the label selection:
		// the watch reports it as DELETED.
		red2 := mustGet(t, s, ns, "red-2")
		red2.Labels["color"] = "blue"
		if _, err := client.Update(ctx, red2, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if ev := nextNonBookmark(t, labelW); ev.Type != watch.Deleted || eventName(t, ev) != "red-2" {
			t.Errorf("label watch after relabel: got %s %s, want DELETED red-2", ev.Type, eventName(t, ev))
		}
	})

	t.Run("StreamingList", func(t *testing.T) {
		ns := "watch-stream"
		want := []string{"s1", "s2", "s3"}
		for _, n := range want {
			mustCreate(t, s, newJobSet(ns, n))
		}
		w, err := s.Client.JobsetV1alpha2().JobSets(ns).Watch(ctx, metav1.ListOptions{
			SendInitialEvents:    ptr.To(true),
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
			AllowWatchBookmarks:  true,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		var seen []string
		for {
			ev := nextEvent(t, w)
			if ev.Type == watch.Bookmark {
				js := ev.Object.(*v1alpha2.JobSet)
				if js.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
					// A periodic bookmark before the end: keep reading.
					continue
				}
				if js.ResourceVersion == "" {
					t.Errorf("initial-events-end bookmark has no resourceVersion")
				}
				break
			}
			if ev.Type != watch.Added {
				t.Fatalf("initial event %s, want ADDED", ev.Type)
			}
			seen = append(seen, eventName(t, ev))
		}
		sort.Strings(seen)
		if fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Errorf("initial events %v, want %v", seen, want)
		}
		// The watch goes on after the initial events.
		mustCreate(t, s, newJobSet(ns, "s4"))
		if ev := nextNonBookmark(t, w); ev.Type != watch.Added || eventName(t, ev) != "s4" {
			t.Errorf("after the initial events: %s %s, want ADDED s4", ev.Type, eventName(t, ev))
		}
	})
}

// TestPagination lists 25 JobSets ten at a time.
func TestPagination(t *testing.T) {
	s := framework.StartServer(t)
	ctx := context.Background()
	ns := "pages"
	client := s.Client.JobsetV1alpha2().JobSets(ns)
	for i := 0; i < 25; i++ {
		mustCreate(t, s, newJobSet(ns, fmt.Sprintf("p-%02d", i)))
	}
	mustCreate(t, s, newJobSet("pages-other", "p-99"))

	seen := map[string]int{}
	var sizes []int
	opts := metav1.ListOptions{Limit: 10}
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatalf("more than 5 pages")
		}
		list, err := client.List(ctx, opts)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		sizes = append(sizes, len(list.Items))
		for _, js := range list.Items {
			seen[js.Name]++
		}
		if list.Continue == "" {
			break
		}
		if page < 2 && (list.RemainingItemCount == nil || *list.RemainingItemCount != int64(25-10*(page+1))) {
			t.Errorf("page %d remainingItemCount = %v, want %d", page, list.RemainingItemCount, 25-10*(page+1))
		}
		opts.Continue = list.Continue
	}
	if fmt.Sprint(sizes) != "[10 10 5]" {
		t.Errorf("page sizes %v, want [10 10 5]", sizes)
	}
	if len(seen) != 25 {
		t.Errorf("saw %d distinct names, want 25", len(seen))
	}
	for name, n := range seen {
		if n != 1 {
			t.Errorf("%s seen %d times", name, n)
		}
	}

	// A malformed continue token is refused.
	if _, err := client.List(ctx, metav1.ListOptions{Limit: 10, Continue: "not-a-token"}); err == nil {
		t.Errorf("garbage continue token accepted")
	}
}
