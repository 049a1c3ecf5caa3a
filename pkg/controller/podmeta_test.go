package controller

import (
	"context"
	"reflect"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kfake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
)

func podIn(name, namespace string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": "a"}},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

func listedNames(list *metav1.PartialObjectMetadataList, err error) []string {
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return names
}

// Without a metadata client, pods are listed in full and cut to their
// metadata; the field selector is applied even by a client that ignores it.
func TestTypedPodsListSelects(t *testing.T) {
	kube := kfake.NewClientset(
		podIn("running", "ns", corev1.PodRunning), podIn("pending", "ns", corev1.PodPending),
		podIn("done", "ns", corev1.PodSucceeded), podIn("failed", "ns", corev1.PodFailed),
		podIn("elsewhere", "other", corev1.PodRunning))
	list := typedPods{kube}.list
	ctx := context.Background()
	got := listedNames(list(ctx, "ns", metav1.ListOptions{FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"}))
	if want := []string{"pending", "running"}; !reflect.DeepEqual(got, want) {
		t.Errorf("unfinished pods = %v, want %v", got, want)
	}
	got = listedNames(list(ctx, "ns", metav1.ListOptions{LabelSelector: "app=a"}))
	if want := []string{"done", "failed", "pending", "running"}; !reflect.DeepEqual(got, want) {
		t.Errorf("pods = %v, want %v", got, want)
	}
	if _, err := list(ctx, "ns", metav1.ListOptions{FieldSelector: "status.phase"}); err == nil {
		t.Error("a malformed field selector was accepted")
	}
}

// The metadata client lists the namespace's pods, passing the selectors on.
func TestMetadataPodsListsPods(t *testing.T) {
	md := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	opts := metav1.ListOptions{LabelSelector: "app=a", FieldSelector: "status.phase!=Failed"}
	if _, err := (metadataPods{md}).list(context.Background(), "ns", opts); err != nil {
		t.Fatal(err)
	}
	var lists []k8stesting.ListActionImpl
	for _, a := range md.Actions() {
		if l, ok := a.(k8stesting.ListActionImpl); ok {
			lists = append(lists, l)
		}
	}
	if len(lists) != 1 {
		t.Fatalf("lists = %d, want 1", len(lists))
	}
	l := lists[0]
	if l.GetResource() != podsResource || l.GetNamespace() != "ns" {
		t.Errorf("listed %v in %q, want pods in ns", l.GetResource(), l.GetNamespace())
	}
	if r := l.GetListRestrictions(); r.Labels.String() != "app=a" || r.Fields.String() != "status.phase!=Failed" {
		t.Errorf("restrictions = %v, %v", r.Labels, r.Fields)
	}
}

// The typed source's watch reports what a server's does: a pod that stops
// matching the field selector leaves with a Deleted event, and pods the
// label selector does not select are not reported.
func TestTypedPodsWatchSelects(t *testing.T) {
	kube := kfake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := typedPods{kube}.watch(ctx, "ns", metav1.ListOptions{LabelSelector: "app=a", FieldSelector: unfinishedPods})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	pod := podIn("p", "ns", corev1.PodRunning)
	other := podIn("q", "ns", corev1.PodRunning)
	other.Labels = map[string]string{"app": "b"}
	if _, err := kube.CoreV1().Pods("ns").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodSucceeded
	if _, err := kube.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 2 {
		ev := <-w.ResultChan()
		m, ok := ev.Object.(*metav1.PartialObjectMetadata)
		if !ok {
			t.Fatalf("event %s of a %T, want metadata", ev.Type, ev.Object)
		}
		got = append(got, string(ev.Type)+" "+m.Name)
	}
	if want := []string{"ADDED p", "DELETED p"}; !reflect.DeepEqual(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}
