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
func TestTypedPodListerSelectsFields(t *testing.T) {
	kube := kfake.NewClientset(
		podIn("running", "ns", corev1.PodRunning), podIn("pending", "ns", corev1.PodPending),
		podIn("done", "ns", corev1.PodSucceeded), podIn("failed", "ns", corev1.PodFailed),
		podIn("elsewhere", "other", corev1.PodRunning))
	list := typedPodLister(kube)
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
func TestMetadataPodListerListsPods(t *testing.T) {
	md := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	opts := metav1.ListOptions{LabelSelector: "app=a", FieldSelector: "status.phase!=Failed"}
	if _, err := metadataPodLister(md)(context.Background(), "ns", opts); err != nil {
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
