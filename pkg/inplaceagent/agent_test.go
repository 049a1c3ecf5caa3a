package inplaceagent

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	jsfake "github.com/nativejobset/jobset/pkg/generated/clientset/versioned/fake"
)

const ns = "default"

func inPlaceJobSet(prev, cur *int32) *jobset.JobSet {
	return &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: ns},
		Spec: jobset.JobSetSpec{FailurePolicy: &jobset.FailurePolicy{
			MaxRestarts: 3, RestartStrategy: jobset.InPlaceRestart,
		}},
		Status: jobset.JobSetStatus{PreviousInPlaceRestartAttempt: prev, CurrentInPlaceRestartAttempt: cur},
	}
}

type harness struct {
	t      *testing.T
	kube   *kfake.Clientset
	js     *jsfake.Clientset
	agent  *Agent
	lifted atomic.Int32
	code   chan int
	cancel context.CancelFunc
}

// start runs an agent in a new pod.
func start(t *testing.T, js *jobset.JobSet, worker string) *harness {
	t.Helper()
	return startIn(t, js, worker, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}})
}

// startRestarted runs an agent in a pod whose container restarted: an
// earlier agent reported attempt there.
func startRestarted(t *testing.T, js *jobset.JobSet, worker string, attempt string) *harness {
	t.Helper()
	return startIn(t, js, worker, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns,
		Annotations: map[string]string{jobset.InPlaceRestartAttemptKey: attempt}}})
}

func startIn(t *testing.T, js *jobset.JobSet, worker string, pod *corev1.Pod) *harness {
	t.Helper()
	h := &harness{t: t, kube: kfake.NewSimpleClientset(pod), js: jsfake.NewSimpleClientset(js), code: make(chan int, 1)}
	cfg := Config{Namespace: ns, PodName: "p", JobSet: "js", RestartExitCode: 42, WorkerCommand: worker,
		LiftBarrier: func() { h.lifted.Add(1) }, Logf: t.Logf}
	h.agent = New(cfg, h.kube, h.js)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	t.Cleanup(cancel)
	go func() { h.code <- h.agent.Run(ctx) }()
	return h
}

func (h *harness) setStatus(prev, cur *int32) {
	h.t.Helper()
	js, err := h.js.JobsetV1alpha2().JobSets(ns).Get(context.Background(), "js", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	js.Status.PreviousInPlaceRestartAttempt, js.Status.CurrentInPlaceRestartAttempt = prev, cur
	if _, err := h.js.JobsetV1alpha2().JobSets(ns).UpdateStatus(context.Background(), js, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		h.t.Fatalf("waiting for %s: %v", what, err)
	}
}

func (h *harness) podAttempt() string {
	p, err := h.kube.CoreV1().Pods(ns).Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return p.Annotations[jobset.InPlaceRestartAttemptKey]
}

func (h *harness) exitCode() int {
	h.t.Helper()
	select {
	case c := <-h.code:
		return c
	case <-time.After(10 * time.Second):
		h.t.Fatal("agent did not end")
		return -1
	}
}

func TestFirstStartReportsZeroAndLiftsWhenCurrentIsZero(t *testing.T) {
	h := start(t, inPlaceJobSet(nil, nil), "")
	h.waitFor("attempt 0 on the pod", func() bool { return h.podAttempt() == "0" })
	if h.lifted.Load() != 0 {
		t.Fatal("barrier lifted before the controller said so")
	}
	h.setStatus(nil, ptr.To[int32](0))
	h.waitFor("the barrier", func() bool { return h.lifted.Load() == 1 })
	// More events lift nothing twice.
	h.setStatus(nil, ptr.To[int32](0))
	h.waitFor("the event to be seen", func() bool { return h.agent.Lifted() })
	if n := h.lifted.Load(); n != 1 {
		t.Fatalf("barrier lifted %d times", n)
	}
}

func TestRestartedAgentWaitsForTheNextAttempt(t *testing.T) {
	h := startRestarted(t, inPlaceJobSet(ptr.To[int32](1), ptr.To[int32](1)), "", "1")
	h.waitFor("attempt 2 on the pod", func() bool { return h.podAttempt() == "2" })
	if h.agent.Lifted() {
		t.Fatal("barrier lifted at attempt 2 while current is 1")
	}
	h.setStatus(ptr.To[int32](1), ptr.To[int32](2))
	h.waitFor("the barrier", func() bool { return h.agent.Lifted() })
}

func TestOutdatedAttemptExitsWithRestartCode(t *testing.T) {
	h := startRestarted(t, inPlaceJobSet(nil, ptr.To[int32](0)), "", "0")
	h.waitFor("attempt 1", func() bool { return h.podAttempt() == "1" })
	h.setStatus(ptr.To[int32](0), ptr.To[int32](1))
	h.waitFor("the barrier", func() bool { return h.agent.Lifted() })
	h.setStatus(ptr.To[int32](1), ptr.To[int32](1))
	if c := h.exitCode(); c != 42 {
		t.Fatalf("exit code %d, want 42", c)
	}
}

func TestWrapperModeRunsWorkerAfterBarrierAndPassesItsExitCode(t *testing.T) {
	h := start(t, inPlaceJobSet(nil, nil), "exit 7")
	h.waitFor("attempt 0", func() bool { return h.podAttempt() == "0" })
	select {
	case c := <-h.code:
		t.Fatalf("worker ran before the barrier lifted (exit %d)", c)
	default:
	}
	h.setStatus(nil, ptr.To[int32](0))
	if c := h.exitCode(); c != 7 {
		t.Fatalf("exit code %d, want the worker's 7", c)
	}
}

func TestNoBarrierWithoutInPlaceRestart(t *testing.T) {
	js := inPlaceJobSet(nil, nil)
	js.Spec.FailurePolicy.RestartStrategy = jobset.Recreate
	h := start(t, js, "exit 0")
	if c := h.exitCode(); c != 0 {
		t.Fatalf("exit code %d, want 0", c)
	}
	if h.podAttempt() != "" {
		t.Fatalf("reported attempt %q without in-place restart", h.podAttempt())
	}
}

// The annotation takes the barrier away, not the report: the controller
// still tracks the attempts.
func TestDisabledBarrierStillReports(t *testing.T) {
	js := inPlaceJobSet(nil, ptr.To[int32](2))
	js.Annotations = map[string]string{jobset.DisableInPlaceRestartKey: "true"}
	h := startRestarted(t, js, "", "2")
	h.waitFor("the barrier", func() bool { return h.agent.Lifted() })
	if got := h.podAttempt(); got != "3" {
		t.Fatalf("reported attempt %q, want 3", got)
	}
	// A restart of the others does not end this healthy pod. Events are
	// observed one at a time, so once the agent has seen the next one, it
	// has done all it would do with the restart.
	h.setStatus(ptr.To[int32](3), ptr.To[int32](3))
	h.setStatus(ptr.To[int32](3), ptr.To[int32](4))
	h.waitFor("the next event", func() bool {
		h.agent.mu.Lock()
		defer h.agent.mu.Unlock()
		return h.agent.latest != nil && ptr.Deref(h.agent.latest.Status.CurrentInPlaceRestartAttempt, 0) == 4
	})
	select {
	case c := <-h.code:
		t.Fatalf("agent ended with %d while the barrier is disabled", c)
	default:
	}
}

// A new pod (scale-up, replacement, resume) joins the attempt under way and
// lifts at once: it starts no restart of the others.
func TestNewPodJoinsTheCurrentAttempt(t *testing.T) {
	h := start(t, inPlaceJobSet(ptr.To[int32](1), ptr.To[int32](2)), "")
	h.waitFor("the barrier", func() bool { return h.agent.Lifted() })
	if got := h.podAttempt(); got != "2" {
		t.Fatalf("new pod reported %q, want the current attempt 2", got)
	}
}

func TestStartAttempt(t *testing.T) {
	i := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		name      string
		prev, cur *int32
		restarted bool
		want      int32
	}{
		{"first start", nil, nil, false, 0},
		{"new pod, barrier lifted at 2", i(1), i(2), false, 2},
		{"new pod during a restart to 3", i(2), i(2), false, 3},
		{"new pod before the first lift, after a failure", i(0), nil, false, 1},
		{"restarted container before the first lift", nil, nil, true, 0},
		{"restarted container", i(1), i(2), true, 3},
		{"restarted container during a restart", i(2), i(2), true, 3},
	} {
		if got := StartAttempt(tc.prev, tc.cur, tc.restarted); got != tc.want {
			t.Errorf("%s: StartAttempt(%v, %v, %v) = %d, want %d", tc.name, deref(tc.prev), deref(tc.cur), tc.restarted, got, tc.want)
		}
	}
}

func deref(p *int32) any {
	if p == nil {
		return nil
	}
	return *p
}

// An agent that dies at the barrier and comes back reports the same attempt
// (current + 1 again) and keeps waiting: its crash does not start another
// restart.
func TestCrashAtBarrierKeepsTheAttempt(t *testing.T) {
	h := startRestarted(t, inPlaceJobSet(ptr.To[int32](0), ptr.To[int32](0)), "", "0")
	h.waitFor("attempt 1", func() bool { return h.podAttempt() == "1" })
	h.cancel()
	if c := h.exitCode(); c != 1 {
		t.Fatalf("cancelled agent ended with %d", c)
	}
	again := New(Config{Namespace: ns, PodName: "p", JobSet: "js", RestartExitCode: 42, Logf: t.Logf}, h.kube, h.js)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go again.Run(ctx)
	h.waitFor("the restarted agent to report", func() bool { return again.Attempt() != nil })
	if *again.Attempt() != 1 || h.podAttempt() != "1" {
		t.Fatalf("restarted agent at %d (pod %s), want 1", *again.Attempt(), h.podAttempt())
	}
	if again.Lifted() {
		t.Fatal("restarted agent lifted the barrier early")
	}
	h.setStatus(ptr.To[int32](0), ptr.To[int32](1))
	h.waitFor("the barrier", func() bool { return again.Lifted() })
}

// TestRESTConfigSpeaksProtobuf: the agent's clients send protobuf, accept
// protobuf then JSON, name the agent, and leave the given config alone.
func TestRESTConfigSpeaksProtobuf(t *testing.T) {
	in := &rest.Config{Host: "https://127.0.0.1:6443", UserAgent: "other"}
	out := RESTConfig(in)
	if out.ContentType != "application/vnd.kubernetes.protobuf" {
		t.Errorf("ContentType = %q, want protobuf", out.ContentType)
	}
	if out.AcceptContentTypes != "application/vnd.kubernetes.protobuf,application/json" {
		t.Errorf("AcceptContentTypes = %q, want protobuf then JSON", out.AcceptContentTypes)
	}
	if out.UserAgent != FieldManager || out.Host != in.Host {
		t.Errorf("UserAgent %q, Host %q; want %q, %q", out.UserAgent, out.Host, FieldManager, in.Host)
	}
	if in.UserAgent != "other" || in.ContentType != "" {
		t.Errorf("the given config changed: %+v", in)
	}
}

func TestWorkerShell(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	look := func(found ...string) func(string) (string, error) {
		return func(name string) (string, error) {
			for _, f := range found {
				if f == name {
					if name == "bash" {
						return "/usr/bin/bash", nil
					}
					return name, nil
				}
			}
			return "", errors.New("not found")
		}
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		found   []string
		want    string
		wantErr bool
	}{
		{"SHELL wins", map[string]string{"SHELL": "/bin/zsh"}, []string{"bash", "/bin/sh"}, "/bin/zsh", false},
		{"bash next", nil, []string{"bash", "/bin/sh"}, "/usr/bin/bash", false},
		{"sh last", nil, []string{"/bin/sh"}, "/bin/sh", false},
		{"no shell", nil, nil, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := WorkerShell(env(tc.env), look(tc.found...))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("WorkerShell = %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "SHELL") {
				t.Errorf("the error does not say how to fix it: %v", err)
			}
		})
	}
}
