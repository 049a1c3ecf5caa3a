package inplaceagent

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	kfake "k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
)

// signal runs SignalExit on pod p and returns its result channel once the
// exit code is on the pod.
func signal(t *testing.T, kube *kfake.Clientset) <-chan error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- SignalExit(ctx, kube, ns, "p", 7) }()
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
		return err == nil && p.Annotations[ExitCodeAnnotation] == "7", nil
	})
	if err != nil {
		t.Fatalf("exit code never written: %v", err)
	}
	return done
}

func TestSignalExitReturnsOnceTheRestartRemovedTheCode(t *testing.T) {
	// With a resourceVersion (the fake client keeps it as given) SignalExit
	// watches from the version its patch returned.
	kube := kfake.NewSimpleClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, ResourceVersion: "1"}})
	// The pod's watch is one whose events this test sends: the fake
	// watcher's channel is unbuffered, so a send returns only once
	// SignalExit has taken the event, and the next send only once it has
	// handled that one.
	events := watch.NewFake()
	watching := make(chan struct{})
	var once sync.Once
	kube.PrependWatchReactor("pods", func(ktesting.Action) (bool, watch.Interface, error) {
		once.Do(func() { close(watching) })
		return true, events, nil
	})
	done := make(chan error, 1)
	go func() { done <- SignalExit(context.Background(), kube, ns, "p", 7) }()
	select {
	case <-watching:
	case err := <-done:
		t.Fatalf("SignalExit returned %v before watching the pod", err)
	case <-time.After(10 * time.Second):
		t.Fatal("SignalExit never watched the pod")
	}
	// send delivers a version of the pod, or fails when SignalExit returned
	// instead of taking it.
	send := func(p *corev1.Pod) {
		t.Helper()
		sent := make(chan struct{})
		go func() { events.Modify(p); close(sent) }()
		select {
		case <-sent:
		case err := <-done:
			t.Fatalf("SignalExit returned %v while the exit code was still on the pod", err)
		case <-time.After(10 * time.Second):
			t.Fatal("SignalExit took no event")
		}
	}
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, ResourceVersion: "10",
		Labels: map[string]string{"x": "y"}, Annotations: map[string]string{ExitCodeAnnotation: "7"}}}
	// An unrelated change does not end the wait: the second send returns
	// only after SignalExit handled the first and went on waiting.
	send(pending)
	send(pending)
	select {
	case err := <-done:
		t.Fatalf("SignalExit returned %v while the exit code was still on the pod", err)
	default:
	}
	// What the kwok stage does: the restart removes the code.
	restarted := pending.DeepCopy()
	restarted.ResourceVersion = "11"
	delete(restarted.Annotations, ExitCodeAnnotation)
	send(restarted)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("SignalExit: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SignalExit did not return after the exit code was removed")
	}
}

func TestSignalExitFailsWhenThePodGoes(t *testing.T) {
	kube := kfake.NewSimpleClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}})
	done := signal(t, kube)
	if err := kube.CoreV1().Pods(ns).Delete(context.Background(), "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "pod p") {
			t.Fatalf("SignalExit = %v, want an error naming the pod", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SignalExit did not return after the pod was deleted")
	}
}

func TestSignalExitFailsForAMissingPod(t *testing.T) {
	kube := kfake.NewSimpleClientset()
	if err := SignalExit(context.Background(), kube, ns, "p", 7); err == nil {
		t.Fatal("SignalExit on a missing pod succeeded")
	}
}
