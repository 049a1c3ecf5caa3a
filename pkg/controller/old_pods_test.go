package controller

import (
	"context"
	"reflect"
	"sort"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	kfake "k8s.io/client-go/kubernetes/fake"

	batchv1 "k8s.io/api/batch/v1"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// scriptedWatches lists from a fake clientset and hands out watches that
// the test drives.
type scriptedWatches struct {
	typedPods
	mu      sync.Mutex
	lists   int
	watches chan *watch.FakeWatcher
}

func (s *scriptedWatches) list(ctx context.Context, namespace string, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	s.mu.Lock()
	s.lists++
	s.mu.Unlock()
	return s.typedPods.list(ctx, namespace, opts)
}

func (s *scriptedWatches) watch(context.Context, string, metav1.ListOptions) (watch.Interface, error) {
	w := watch.NewFake()
	s.watches <- w
	return w, nil
}

func (s *scriptedWatches) listCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists
}

func oldPod(name, job string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), ResourceVersion: "1",
			Labels: map[string]string{jobset.JobSetNameKey: "js", batchv1.JobNameLabel: job, jobset.RestartsKey: "0", "other": "x"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// podNames are the undeleted pods of the Job name, and all its pods'
// count.
func podNames(pods *oldPodSet, job string) ([]string, int) {
	n, undeleted := pods.running(job)
	var out []string
	for _, p := range undeleted {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out, n
}

// A waiting JobSet's old pods are listed once, trimmed, and kept by the
// watch: a pod that leaves it wakes the JobSet, and a failed watch lists
// them again.
func TestOldPodWatchFollowsThePods(t *testing.T) {
	a, b := oldPod("a", "js-workers-0"), oldPod("b", "js-workers-0")
	src := &scriptedWatches{typedPods: typedPods{kfake.NewClientset(a, b)}, watches: make(chan *watch.FakeWatcher, 1)}
	woken := make(chan string, 10)
	w := newOldPodWatches(src, func(key string) { woken <- key })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js := newJobSet("js")
	want := map[string]jobAttempt{"js-workers-0": {restarts: 1}}
	pods, err := w.pods(ctx, ns+"/js", js, want)
	if err != nil {
		t.Fatal(err)
	}
	if got, n := podNames(pods, "js-workers-0"); !reflect.DeepEqual(got, []string{"a", "b"}) || n != 2 {
		t.Fatalf("pods = %v (%d), want a and b", got, n)
	}
	_, undeleted := pods.running("js-workers-0")
	if l := undeleted[0].Labels; l["other"] != "" || l[jobset.RestartsKey] != "0" {
		t.Errorf("labels kept: %v, want only those the wait reads", l)
	}
	// A pod being deleted still runs, and is no stray.
	fw := <-src.watches
	deleting := b.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	fw.Modify(&metav1.PartialObjectMetadata{ObjectMeta: deleting.ObjectMeta})
	fw.Delete(&metav1.PartialObjectMetadata{ObjectMeta: a.ObjectMeta})
	if key := <-woken; key != ns+"/js" {
		t.Errorf("woken %q", key)
	}
	if got, n := podNames(pods, "js-workers-0"); len(got) != 0 || n != 1 {
		t.Errorf("pods after a left and b was deleted = %v (%d), want none undeleted of 1", got, n)
	}
	// Asked again for the same names, the watch answers; no list.
	if _, err := w.pods(ctx, ns+"/js", js, want); err != nil {
		t.Fatal(err)
	}
	if n := src.listCount(); n != 1 {
		t.Errorf("%d lists, want 1", n)
	}
	// An expired watch: the pods are listed again (a is back, as the
	// fake clientset still has it) and the JobSet woken.
	fw.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired})
	<-woken
	<-src.watches // watching on from the new list
	if n := src.listCount(); n != 2 {
		t.Errorf("%d lists after the watch expired, want 2", n)
	}
	if got, n := podNames(pods, "js-workers-0"); !reflect.DeepEqual(got, []string{"a", "b"}) || n != 2 {
		t.Errorf("pods after the list = %v (%d), want a and b", got, n)
	}
	// A sync that no longer asks ends the watch.
	w.endSync(ns + "/js")
	w.endSync(ns + "/js")
	if len(w.byKey) != 0 {
		t.Error("the watch outlived the wait")
	}
}

// A name the watch does not cover starts a new one.
func TestOldPodWatchCoversTheNames(t *testing.T) {
	src := &scriptedWatches{typedPods: typedPods{kfake.NewClientset()}, watches: make(chan *watch.FakeWatcher, 2)}
	w := newOldPodWatches(src, func(string) {})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js := newJobSet("js")
	for _, names := range [][]string{{"js-workers-0", "js-workers-1"}, {"js-workers-1"}, {"js-leader-0"}} {
		want := map[string]jobAttempt{}
		for _, n := range names {
			want[n] = jobAttempt{}
		}
		if _, err := w.pods(ctx, ns+"/js", js, want); err != nil {
			t.Fatal(err)
		}
	}
	if n := src.listCount(); n != 2 {
		t.Errorf("%d lists, want 2 (js-leader-0 was not covered)", n)
	}
}
