package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/inplaceagent"
)

// kwok runs no processes: each pod's agent runs here, as a process of its
// own pointed at its pod, with the rights of artifacts/inplace-agent/rbac.yaml
// only. Its worker fails when the file fail-<pod> appears in dir.
type agents struct {
	t          *testing.T
	ns, js     string
	dir        string
	kubeconfig string

	mu     sync.Mutex
	procs  map[string]*exec.Cmd // by pod name
	paused map[string]bool      // pods whose agent is not (re)started
	stop   context.CancelFunc
	done   chan struct{}
}

func startAgents(t *testing.T, ns, js string) *agents {
	t.Helper()
	dir := filepath.Join(cluster.localDir, "inplace-agents", ns)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	a := &agents{t: t, ns: ns, js: js, dir: dir, procs: map[string]*exec.Cmd{}, paused: map[string]bool{}, done: make(chan struct{})}
	a.kubeconfig = agentKubeconfig(t, ns, a.dir)
	ctx, cancel := context.WithCancel(context.Background())
	a.stop = cancel
	// Starts an agent for every pod of the JobSet that has none, as a
	// kubelet starts a new pod's containers.
	go func() {
		defer close(a.done)
		wait.UntilWithContext(ctx, func(ctx context.Context) {
			pods, err := podsOf(ctx, ns, js)
			if err != nil {
				return
			}
			for _, p := range pods {
				a.ensure(p.Name)
			}
		}, 200*time.Millisecond)
	}()
	t.Cleanup(a.close)
	return a
}

// agentKubeconfig applies the agent's RBAC to ns and returns a kubeconfig
// with a token of its ServiceAccount.
func agentKubeconfig(t *testing.T, ns, dir string) string {
	t.Helper()
	applyAgentRBAC(t, ns)
	// --restart-via-annotation also watches its pod, to see kwok's restart
	// (the shipped Role already lets the agent read it).
	simulation := fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: kwok-restart-simulation, namespace: %[1]s}
rules: [{apiGroups: [""], resources: [pods], verbs: [watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: kwok-restart-simulation, namespace: %[1]s}
subjects: [{kind: ServiceAccount, name: jobset-inplace-agent, namespace: %[1]s}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: kwok-restart-simulation}
`, ns)
	if out, err := kubectlIn(simulation, "apply", "-f", "-"); err != nil {
		t.Fatalf("applying the simulation's RBAC: %v\n%s", err, out)
	}
	tr, err := cluster.kube.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), "jobset-inplace-agent",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for the agent: %v", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: cluster.config.Host, CertificateAuthority: cluster.config.CAFile,
		CertificateAuthorityData: cluster.config.CAData}
	cfg.AuthInfos["agent"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "agent", Namespace: ns}
	cfg.CurrentContext = "c"
	path := filepath.Join(dir, "agent.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func (a *agents) ensure(pod string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.procs[pod] != nil || a.paused[pod] {
		return
	}
	failFile := filepath.Join(a.dir, "fail-"+pod)
	worker := fmt.Sprintf("while [ ! -f %[1]q ]; do sleep 0.1; done; rm -f %[1]q; exit 3", failFile)
	cmd := exec.Command(filepath.Join(cluster.root, "_output", "bin", "jobset-inplace-agent"),
		"--kubeconfig="+a.kubeconfig, "--namespace="+a.ns, "--pod="+pod, "--jobset="+a.js,
		"--restart-via-annotation", "--worker-command="+worker)
	log, err := os.Create(filepath.Join(a.dir, pod+".log"))
	if err == nil {
		cmd.Stdout, cmd.Stderr = log, log
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the worker shell goes with it
	if err := cmd.Start(); err != nil {
		a.t.Errorf("starting the agent of %s: %v", pod, err)
		return
	}
	a.procs[pod] = cmd
	go func() {
		_ = cmd.Wait()
		a.mu.Lock()
		if a.procs[pod] == cmd {
			delete(a.procs, pod)
		}
		a.mu.Unlock()
	}()
}

// kill ends a pod's agent as a crash would; with pause it stays down.
func (a *agents) kill(pod string, pause bool) {
	a.mu.Lock()
	cmd := a.procs[pod]
	delete(a.procs, pod)
	a.paused[pod] = pause
	a.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

func (a *agents) resume(pod string) {
	a.mu.Lock()
	a.paused[pod] = false
	a.mu.Unlock()
	a.ensure(pod)
}

// waitReported returns the attempt that the pod's current agent process
// reported, from its log (each process starts a new one).
func (a *agents) waitReported(pod string) int {
	a.t.Helper()
	path := filepath.Join(a.dir, pod+".log")
	attempt := -1
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true,
		func(context.Context) (bool, error) {
			data, err := os.ReadFile(path)
			if err != nil {
				return false, nil
			}
			_, after, found := strings.Cut(string(data), "entered in-place restart attempt ")
			if !found {
				return false, nil
			}
			_, err = fmt.Sscan(after, &attempt)
			return err == nil, nil
		})
	if err != nil {
		a.t.Fatalf("the agent of %s reported no attempt: %v", pod, err)
	}
	return attempt
}

// fail makes the worker of the pod exit with code 3.
func (a *agents) fail(pod string) {
	if err := os.WriteFile(filepath.Join(a.dir, "fail-"+pod), nil, 0o644); err != nil {
		a.t.Fatal(err)
	}
}

func (a *agents) close() {
	a.stop()
	<-a.done
	a.mu.Lock()
	var pods []string
	for p := range a.procs {
		pods = append(pods, p)
	}
	a.mu.Unlock()
	for _, p := range pods {
		a.kill(p, true)
	}
	if a.t.Failed() {
		a.t.Logf("agent logs are in %s", a.dir)
	}
}

// startInPlace creates an InPlaceRestart JobSet, starts its agents and
// waits until every pod reached attempt 0 and the barrier lifted.
func startInPlace(t *testing.T, ns, name string, maxRestarts int32) *agents {
	t.Helper()
	createJobSet(t, inPlaceJobSet(ns, name, maxRestarts))
	a := startAgents(t, ns, name)
	waitStatus(t, ns, name, "barrier lifted at attempt 0", 2*time.Minute, func(js *v1alpha2.JobSet) bool {
		return attemptIs(js, nil, ptr.To[int32](0))
	})
	return a
}

func inPlaceJobSet(ns, name string, maxRestarts int32) *v1alpha2.JobSet {
	rj := replicatedJob("w", 2, 2, "")
	rj.Template.Spec.BackoffLimit = ptr.To[int32](math.MaxInt32)
	rj.Template.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
	rj.Template.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	js := runningJobSet(ns, name, rj)
	js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: maxRestarts, RestartStrategy: v1alpha2.InPlaceRestart}
	return js
}

// podState is what the test reads of a pod.
type podState struct {
	name     string
	uid      types.UID
	attempt  string
	restarts int32
}

func podStates(t *testing.T, ns, js string) map[string]podState {
	t.Helper()
	pods, err := podsOf(context.Background(), ns, js)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]podState{}
	for _, p := range pods {
		var rc int32
		for _, s := range p.Status.ContainerStatuses {
			rc = max(rc, s.RestartCount)
		}
		out[p.Name] = podState{name: p.Name, uid: p.UID, attempt: p.Annotations[v1alpha2.InPlaceRestartAttemptKey], restarts: rc}
	}
	return out
}

// waitPods polls the JobSet's pods until cond holds for them.
func waitPods(t *testing.T, ns, js, what string, cond func(map[string]podState) bool) map[string]podState {
	t.Helper()
	var got map[string]podState
	eventually(t, 2*time.Minute, what, func(ctx context.Context) (bool, error) {
		got = podStates(t, ns, js)
		return cond(got), nil
	})
	return got
}

func attemptIs(js *v1alpha2.JobSet, prev, cur *int32) bool {
	eq := func(a, b *int32) bool { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }
	return eq(js.Status.PreviousInPlaceRestartAttempt, prev) && eq(js.Status.CurrentInPlaceRestartAttempt, cur)
}

func sortedNames(m map[string]podState) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestInPlaceRestart: a worker failure restarts every pod in place, the
// barrier holds while one agent is down and survives an agent crashing at
// it, and maxRestarts ends the JobSet.
func TestInPlaceRestart(t *testing.T) {
	// Parallel tests run after the serial ones, among them those that read
	// the controller's process-wide counters (TestInterruptionMetrics): a
	// restart of this test's JobSet must not land in their window.
	t.Parallel()
	ns := namespace(t)
	a := startInPlace(t, ns, "ip", 2)
	before := waitPods(t, ns, "ip", "4 pods at attempt 0", func(m map[string]podState) bool {
		if len(m) != 4 {
			return false
		}
		for _, p := range m {
			if p.attempt != "0" {
				return false
			}
		}
		return true
	})
	names := sortedNames(before)
	failing, late, crashing := names[0], names[3], names[1]
	attempts := ptr.Deref(waitStatus(t, ns, "ip", "status read", time.Minute, func(*v1alpha2.JobSet) bool { return true }).Status.ExecutionAttempts, 0)

	// The last pod's agent is down: that pod cannot restart yet.
	a.kill(late, true)
	a.fail(failing)
	waitStatus(t, ns, "ip", "in-place restart started", 2*time.Minute, func(js *v1alpha2.JobSet) bool {
		return attemptIs(js, ptr.To[int32](0), ptr.To[int32](0))
	})
	waitPods(t, ns, "ip", "three pods restarted into attempt 1", func(m map[string]podState) bool {
		n := 0
		for name, p := range m {
			if name != late && p.attempt == "1" && p.restarts >= 1 {
				n++
			}
		}
		return n == 3
	})
	// The barrier holds: one pod is still at attempt 0.
	js := waitStatus(t, ns, "ip", "status read", time.Minute, func(*v1alpha2.JobSet) bool { return true })
	if !attemptIs(js, ptr.To[int32](0), ptr.To[int32](0)) {
		t.Fatalf("barrier lifted before every pod restarted: previous %v current %v",
			js.Status.PreviousInPlaceRestartAttempt, js.Status.CurrentInPlaceRestartAttempt)
	}

	// An agent crashing at the barrier comes back at the same attempt: had
	// it moved on to attempt 2, previousInPlaceRestartAttempt would move to
	// 1 below instead of staying 0.
	a.kill(crashing, false)
	a.ensure(crashing)
	// Its new process reports before the late pod can lift the barrier: a
	// start after the lift would rightly count as a new failure.
	if got := a.waitReported(crashing); got != 1 {
		t.Fatalf("the agent of %s came back at attempt %d, want 1", crashing, got)
	}

	// The late pod's agent died: its container restarts (as the kubelet
	// would restart it) and the agent comes back.
	if err := inplaceagent.SignalExit(context.Background(), cluster.kube, ns, late, 137); err != nil {
		t.Fatal(err)
	}
	a.resume(late)
	js = waitStatus(t, ns, "ip", "barrier lifted at attempt 1", 2*time.Minute, func(js *v1alpha2.JobSet) bool {
		return attemptIs(js, ptr.To[int32](0), ptr.To[int32](1))
	})
	after := waitPods(t, ns, "ip", "every container restart recorded", func(m map[string]podState) bool {
		for _, p := range m {
			if p.restarts < 1 {
				return false
			}
		}
		return true
	})
	for _, n := range names {
		if after[n].uid != before[n].uid {
			t.Errorf("pod %s was recreated (UID %s -> %s)", n, before[n].uid, after[n].uid)
		}
		if after[n].attempt != "1" || after[n].restarts < 1 {
			t.Errorf("pod %s: attempt %q, restartCount %d; want attempt 1 after a restart", n, after[n].attempt, after[n].restarts)
		}
	}
	if len(after) != 4 {
		t.Errorf("pods: %v", sortedNames(after))
	}
	if js.Status.Restarts != 0 {
		t.Errorf("status.restarts = %d: Jobs were recreated", js.Status.Restarts)
	}
	if ptr.Deref(js.Status.ExecutionAttempts, 0) != attempts {
		t.Errorf("executionAttempts %d, want %d (an in-place restart is not an execution attempt)", ptr.Deref(js.Status.ExecutionAttempts, 0), attempts)
	}

	// Restart 2 is within maxRestarts 2; restart 3 is not.
	a.fail(failing)
	waitStatus(t, ns, "ip", "barrier lifted at attempt 2", 2*time.Minute, func(js *v1alpha2.JobSet) bool {
		return attemptIs(js, ptr.To[int32](1), ptr.To[int32](2))
	})
	a.fail(names[2])
	js = waitStatus(t, ns, "ip", "failed with ReachedMaxRestarts", 2*time.Minute, func(js *v1alpha2.JobSet) bool {
		return conditionReason(js, v1alpha2.JobSetFailed) == "ReachedMaxRestarts"
	})
	if js.Status.Restarts != 0 {
		t.Errorf("status.restarts = %d, want 0", js.Status.Restarts)
	}
}

// TestInPlaceRestartFailedPodRecreates: a pod that failed cannot restart in
// place; the JobSet recreates its Jobs, counted toward maxRestarts, and the
// new pods join the attempt under way instead of starting another.
func TestInPlaceRestartFailedPodRecreates(t *testing.T) {
	// Parallel tests run after the serial ones, among them those that read
	// the controller's process-wide counters (TestInterruptionMetrics): a
	// restart of this test's JobSet must not land in their window.
	t.Parallel()
	ns := namespace(t)
	startInPlace(t, ns, "lost", 3)
	before := podStates(t, ns, "lost")
	failPodWithCode(t, ns, "lost-w-0", 1)
	js := waitStatus(t, ns, "lost", "Jobs recreated", 3*time.Minute, func(js *v1alpha2.JobSet) bool {
		return js.Status.Restarts == 1
	})
	if js.Status.RestartsCountTowardsMax != 1 {
		t.Errorf("restartsCountTowardsMax = %d, want 1", js.Status.RestartsCountTowardsMax)
	}
	after := waitPods(t, ns, "lost", "4 new pods at attempt 0", func(m map[string]podState) bool {
		n := 0
		for _, p := range m {
			if p.attempt == "0" && p.uid != before[p.name].uid {
				n++
			}
		}
		return n == 4 && len(m) == 4
	})
	for n, p := range after {
		for _, old := range before {
			if p.uid == old.uid {
				t.Errorf("pod %s survived the recreate", n)
			}
		}
	}
	js = waitStatus(t, ns, "lost", "status read", time.Minute, func(*v1alpha2.JobSet) bool { return true })
	if !attemptIs(js, nil, ptr.To[int32](0)) {
		t.Errorf("previous %v current %v after the recreate, want nil and 0: the new pods started an in-place restart",
			js.Status.PreviousInPlaceRestartAttempt, js.Status.CurrentInPlaceRestartAttempt)
	}
}

// inPlaceUnchanged checks that a JobSet with maxRestarts 0 is still running
// at attempt 0 with its Jobs never recreated, and that the pods in keep
// their UID and never restarted.
func inPlaceUnchanged(t *testing.T, ns, name, when string, keep map[string]podState) {
	t.Helper()
	js := waitStatus(t, ns, name, "status read", time.Minute, func(*v1alpha2.JobSet) bool { return true })
	if r := conditionReason(js, v1alpha2.JobSetFailed); r != "" {
		t.Fatalf("%s: the JobSet failed (%s): it cost a restart", when, r)
	}
	if js.Status.Restarts != 0 || !attemptIs(js, nil, ptr.To[int32](0)) {
		t.Errorf("%s: restarts %d, previous %v, current %v; want 0, nil, 0", when, js.Status.Restarts,
			js.Status.PreviousInPlaceRestartAttempt, js.Status.CurrentInPlaceRestartAttempt)
	}
	now := podStates(t, ns, name)
	for n, p := range keep {
		if q, ok := now[n]; ok && (q.uid != p.uid || q.restarts != 0 || q.attempt != "0") {
			t.Errorf("%s: pod %s: uid %s -> %s, restartCount %d, attempt %q; want the same pod, never restarted, at 0",
				when, n, p.uid, q.uid, q.restarts, q.attempt)
		}
	}
}

// allAtZero waits for n pods, all at attempt 0.
func allAtZero(n int) func(m map[string]podState) bool {
	return func(m map[string]podState) bool {
		if len(m) != n {
			return false
		}
		for _, p := range m {
			if p.attempt != "0" {
				return false
			}
		}
		return true
	}
}

// TestInPlaceRestartPodsComeAndGo: with maxRestarts 0, a deleted pod's
// replacement, a scale-up, a scale-down and a suspend/resume cycle each
// leave the JobSet running at attempt 0: new pods join, leaving pods only
// leave, and no other pod restarts.
func TestInPlaceRestartPodsComeAndGo(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	startInPlace(t, ns, "elastic", 0)
	start := waitPods(t, ns, "elastic", "4 pods at attempt 0", allAtZero(4))

	// A deleted pod is replaced by the Job controller; the new pod joins.
	victim := sortedNames(start)[0]
	if err := cluster.kube.CoreV1().Pods(ns).Delete(context.Background(), victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	now := waitPods(t, ns, "elastic", "the deleted pod replaced, 4 pods at attempt 0", func(m map[string]podState) bool {
		if !allAtZero(4)(m) {
			return false
		}
		for _, p := range m {
			if p.uid == start[victim].uid {
				return false
			}
		}
		return true
	})
	inPlaceUnchanged(t, ns, "elastic", "after a pod's deletion", now)

	// Scale up: 3 pods per Job.
	kubectl(t, "scale", "-n", ns, "replicatedjob/elastic.w", "--replicas=3")
	waitPods(t, ns, "elastic", "6 pods at attempt 0", allAtZero(6))
	inPlaceUnchanged(t, ns, "elastic", "after a scale-up", now)
	now = podStates(t, ns, "elastic")

	// Scale down: 1 pod per Job.
	kubectl(t, "scale", "-n", ns, "replicatedjob/elastic.w", "--replicas=1")
	waitPods(t, ns, "elastic", "2 pods left", allAtZero(2))
	inPlaceUnchanged(t, ns, "elastic", "after a scale-down", now)

	// Suspend, and resume at once, while the old pods may still terminate.
	kubectl(t, "patch", "jobset", "elastic", "-n", ns, "--type=merge", "-p", `{"spec":{"suspend":true}}`)
	waitPods(t, ns, "elastic", "no pod while suspended", func(m map[string]podState) bool { return len(m) == 0 })
	kubectl(t, "patch", "jobset", "elastic", "-n", ns, "--type=merge", "-p", `{"spec":{"suspend":false}}`)
	waitPods(t, ns, "elastic", "2 new pods at attempt 0 after the resume", allAtZero(2))
	inPlaceUnchanged(t, ns, "elastic", "after a suspend and resume", nil)
}
