package apiserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
)

func apiServiceMetadata(uid string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiregistration.k8s.io/v1", Kind: "APIService"},
		ObjectMeta: metav1.ObjectMeta{Name: apiServiceName, UID: "uid-" + types.UID(uid)},
	}
}

// waitEvents polls the fake cluster until it holds want Events and returns
// them, oldest first.
func waitEvents(t *testing.T, kube *fake.Clientset, want int) []corev1.Event {
	t.Helper()
	var events []corev1.Event
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		events = list.Items
		return len(events) >= want, nil
	})
	if err != nil {
		t.Fatalf("waiting for %d Events: %v; have %s", want, err, describeEvents(events))
	}
	if len(events) != want {
		t.Fatalf("%d Events, want %d: %s", len(events), want, describeEvents(events))
	}
	// The fake lists by name, which the recorder derives from the time.
	return events
}

func describeEvents(events []corev1.Event) string {
	var s []string
	for _, e := range events {
		s = append(s, fmt.Sprintf("%s/%s %s %s %s/%s uid=%q: %s", e.Namespace, e.Name, e.Type, e.Reason,
			e.InvolvedObject.Kind, e.InvolvedObject.Name, e.InvolvedObject.UID, e.Message))
	}
	return "[" + strings.Join(s, "; ") + "]"
}

func checkEvent(t *testing.T, e corev1.Event, typ, reason, message string, uid types.UID) {
	t.Helper()
	if e.Type != typ || e.Reason != reason || e.Message != message {
		t.Errorf("event %s %s %q, want %s %s %q", e.Type, e.Reason, e.Message, typ, reason, message)
	}
	if e.Namespace != metav1.NamespaceDefault {
		t.Errorf("event in namespace %q, want %q (the APIService is cluster-scoped)", e.Namespace, metav1.NamespaceDefault)
	}
	want := corev1.ObjectReference{APIVersion: "apiregistration.k8s.io/v1", Kind: "APIService", Name: apiServiceName, UID: uid}
	if e.InvolvedObject != want {
		t.Errorf("involvedObject %+v, want %+v", e.InvolvedObject, want)
	}
	if e.Source.Component != "jobset-apiserver" {
		t.Errorf("source.component %q, want jobset-apiserver", e.Source.Component)
	}
}

func startEvents(t *testing.T, n *nospaceEvents, objects ...runtime.Object) *fake.Clientset {
	t.Helper()
	kube := fake.NewClientset()
	sch := metadatafake.NewTestScheme()
	sch.AddKnownTypeWithName(apiServicesResource.GroupVersion().WithKind("APIService"), &metav1.PartialObjectMetadata{})
	meta := metadatafake.NewSimpleMetadataClient(sch, objects...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n.start(ctx, kube, meta)
	return kube
}

func TestNospaceAlarmEvents(t *testing.T) {
	n := newNospaceEvents()
	kube := startEvents(t, n, apiServiceMetadata("1"))

	n.alarmChanged(true, "raised: full")
	events := waitEvents(t, kube, 1)
	checkEvent(t, events[0], corev1.EventTypeWarning, ReasonNoSpaceAlarm, "raised: full", "uid-1")

	n.alarmChanged(false, "cleared: writes work")
	events = waitEvents(t, kube, 2)
	for _, e := range events {
		if e.Reason == ReasonNoSpaceAlarmCleared {
			checkEvent(t, e, corev1.EventTypeNormal, ReasonNoSpaceAlarmCleared, "cleared: writes work", "uid-1")
		}
	}
}

// An alarm raised while the embedded etcd starts, before the server has a
// cluster client, is recorded once it has one; one raised and cleared
// before then is not.
func TestNospaceAlarmBeforeStart(t *testing.T) {
	n := newNospaceEvents()
	n.alarmChanged(true, "raised at start")
	kube := startEvents(t, n, apiServiceMetadata("2"))
	checkEvent(t, waitEvents(t, kube, 1)[0], corev1.EventTypeWarning, ReasonNoSpaceAlarm, "raised at start", "uid-2")

	n = newNospaceEvents()
	n.alarmChanged(true, "raised")
	n.alarmChanged(false, "cleared")
	kube = startEvents(t, n, apiServiceMetadata("3"))
	// run handles the state found at start before any later change, and
	// the sink writes in order: once the later Event is there, an Event
	// for the flap before start would be too.
	n.alarmChanged(true, "raised later")
	events := waitEvents(t, kube, 1)
	checkEvent(t, events[0], corev1.EventTypeWarning, ReasonNoSpaceAlarm, "raised later", "uid-3")
}

// Without a readable APIService the Event is still recorded, without a UID.
func TestNospaceAlarmEventWithoutAPIService(t *testing.T) {
	n := newNospaceEvents()
	kube := startEvents(t, n)
	n.alarmChanged(true, "raised")
	checkEvent(t, waitEvents(t, kube, 1)[0], corev1.EventTypeWarning, ReasonNoSpaceAlarm, "raised", "")
}
