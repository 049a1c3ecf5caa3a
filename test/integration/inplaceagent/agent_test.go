// Package inplaceagent runs the in-place restart agent against the real
// jobset-apiserver on real etcd: it watches its JobSet there (field
// selector, status subresource writes) while the pod side, which needs a
// kube-apiserver, is a fake clientset here and the real cluster in the e2e
// suite (test/e2e/inplace_restart_test.go).
package inplaceagent

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/inplaceagent"
	"github.com/nativejobset/jobset/test/integration/framework"
)

const ns = "default"

func inPlaceJobSet(name string) *v1alpha2.JobSet {
	return &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha2.JobSetSpec{
			FailurePolicy: &v1alpha2.FailurePolicy{MaxRestarts: 3, RestartStrategy: v1alpha2.InPlaceRestart},
			ReplicatedJobs: []v1alpha2.ReplicatedJob{{
				Name: "w", Replicas: ptr.To[int32](1),
				Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
					Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2),
					BackoffLimit:         ptr.To[int32](math.MaxInt32),
					PodReplacementPolicy: ptr.To(batchv1.Failed),
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyOnFailure,
						Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
					}},
				}},
			}},
		},
	}
}

type running struct {
	agent  *inplaceagent.Agent
	code   chan int
	cancel context.CancelFunc
}

func run(t *testing.T, s *framework.Server, kube *kfake.Clientset, pod, js string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &running{code: make(chan int, 1), cancel: cancel}
	r.agent = inplaceagent.New(inplaceagent.Config{Namespace: ns, PodName: pod, JobSet: js, RestartExitCode: 9,
		LiftBarrier: func() {}, Logf: t.Logf}, kube, s.Client)
	go func() { r.code <- r.agent.Run(ctx) }()
	return r
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func setAttempts(t *testing.T, s *framework.Server, name string, prev, cur *int32) {
	t.Helper()
	js := s.MustGet(t, ns, name)
	js.Status.PreviousInPlaceRestartAttempt, js.Status.CurrentInPlaceRestartAttempt = prev, cur
	if _, err := s.Client.JobsetV1alpha2().JobSets(ns).UpdateStatus(context.Background(), js, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status update: %v", err)
	}
}

func podAttempt(t *testing.T, kube *kfake.Clientset, pod string) string {
	t.Helper()
	p, err := kube.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Annotations[v1alpha2.InPlaceRestartAttemptKey]
}

func attempt(a *inplaceagent.Agent) int32 {
	if p := a.Attempt(); p != nil {
		return *p
	}
	return -1
}

// One full in-place restart of two pods through the real server, with the
// agent of the second pod crashing while it waits at the barrier.
func TestAgentsThroughTheAPIServer(t *testing.T) {
	s := framework.StartServer(t)
	s.MustCreate(t, inPlaceJobSet("js"), "test")
	// A JobSet of the same namespace that the field selector must keep out.
	other := inPlaceJobSet("other")
	s.MustCreate(t, other, "test")
	setAttempts(t, s, "other", ptr.To[int32](5), ptr.To[int32](5))

	kube := kfake.NewSimpleClientset(
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p0", Namespace: ns}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: ns}},
	)
	a0, a1 := run(t, s, kube, "p0", "js"), run(t, s, kube, "p1", "js")
	poll(t, "both pods at attempt 0", func() bool { return podAttempt(t, kube, "p0") == "0" && podAttempt(t, kube, "p1") == "0" })
	if a0.agent.Lifted() || a1.agent.Lifted() {
		t.Fatal("barrier lifted before currentInPlaceRestartAttempt was written")
	}
	setAttempts(t, s, "js", nil, ptr.To[int32](0))
	poll(t, "barriers lifted", func() bool { return a0.agent.Lifted() && a1.agent.Lifted() })

	// p0's container fails: its agent restarts and joins attempt 1.
	a0.cancel()
	<-a0.code
	a0 = run(t, s, kube, "p0", "js")
	poll(t, "p0 at attempt 1", func() bool { return attempt(a0.agent) == 1 })
	// The controller marks attempt 0 as over: p1's agent restarts its pod.
	setAttempts(t, s, "js", ptr.To[int32](0), ptr.To[int32](0))
	select {
	case c := <-a1.code:
		if c != 9 {
			t.Fatalf("p1's agent ended with %d, want the restart code 9", c)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("p1's agent did not end")
	}
	if a0.agent.Lifted() {
		t.Fatal("p0 lifted its barrier while p1 was restarting")
	}

	// p1 comes back at attempt 1, then its agent crashes at the barrier
	// and comes back again: still attempt 1.
	a1 = run(t, s, kube, "p1", "js")
	poll(t, "p1 at attempt 1", func() bool { return attempt(a1.agent) == 1 })
	a1.cancel()
	<-a1.code
	a1 = run(t, s, kube, "p1", "js")
	poll(t, "p1 back at attempt 1", func() bool { return attempt(a1.agent) == 1 })
	if got := podAttempt(t, kube, "p1"); got != "1" {
		t.Fatalf("p1's annotation is %q after the crash, want 1", got)
	}
	if a0.agent.Lifted() || a1.agent.Lifted() {
		t.Fatal("barrier lifted before every pod reached attempt 1")
	}
	setAttempts(t, s, "js", ptr.To[int32](0), ptr.To[int32](1))
	poll(t, "barriers lifted at attempt 1", func() bool { return a0.agent.Lifted() && a1.agent.Lifted() })
	select {
	case c := <-a0.code:
		t.Fatalf("p0's agent ended (%d) though its attempt is current", c)
	default:
	}
}

// The server refuses negative attempts, naming the field.
func TestNegativeAttemptRefused(t *testing.T) {
	s := framework.StartServer(t)
	s.MustCreate(t, inPlaceJobSet("js"), "test")
	js := s.MustGet(t, ns, "js")
	js.Status.CurrentInPlaceRestartAttempt = ptr.To[int32](-1)
	_, err := s.Client.JobsetV1alpha2().JobSets(ns).UpdateStatus(context.Background(), js, metav1.UpdateOptions{})
	if err == nil || !strings.Contains(err.Error(), "status.currentInPlaceRestartAttempt") {
		t.Fatalf("want a 422 naming status.currentInPlaceRestartAttempt, got %v", err)
	}
}
