package inplaceagent

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kfake "k8s.io/client-go/kubernetes/fake"
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
	kube := kfake.NewSimpleClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}})
	done := signal(t, kube)
	// An unrelated change does not end the wait.
	if _, err := kube.CoreV1().Pods(ns).Patch(context.Background(), "p", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("SignalExit returned %v while the exit code was still on the pod", err)
	case <-time.After(50 * time.Millisecond):
	}
	// What the kwok stage does: the restart removes the code.
	if _, err := kube.CoreV1().Pods(ns).Patch(context.Background(), "p", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+ExitCodeAnnotation+`":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("SignalExit: %v", err)
		}
	case <-time.After(5 * time.Second):
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
