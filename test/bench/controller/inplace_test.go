package controller

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	versioned "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
	"github.com/nativejobset/jobset/pkg/inplaceagent"
)

// podAgents runs one in-place agent per pod in this process (kwok runs no
// containers), restarting it as the kubelet would restart its container:
// through the kwok in-place restart stage.
type podAgents struct {
	ns  string
	ctx context.Context

	mu      sync.Mutex
	running map[string]context.CancelFunc
	tr      *tracer // when set, the agents' decisions go into the timeline
}

// trace records the agents' decisions from their log lines.
func (a *podAgents) trace(t *tracer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tr = t
}

func (a *podAgents) logf(pod string) func(string, ...any) {
	return func(format string, args ...any) {
		a.mu.Lock()
		t := a.tr
		a.mu.Unlock()
		switch {
		case t == nil:
		case strings.HasPrefix(format, "attempt %d is over"):
			t.note("other agent saw previous=0", pod)
		case strings.HasPrefix(format, "barrier lifted") && strings.HasSuffix(fmt.Sprintf(format, args...), "attempt 1"):
			t.note("agent saw current=1", pod)
		}
	}
}

func newPodAgents(ctx context.Context, ns string) *podAgents {
	return &podAgents{ns: ns, ctx: ctx, running: map[string]context.CancelFunc{}}
}

// agentClients are the clients of one agent process. In a real cluster
// each start of an agent is a new process: its own connection, no rate
// limit shared with other pods, nothing kept from the previous start. A
// Dial of its own keeps client-go from sharing one cached transport (and
// one HTTP/2 connection) among agents or across starts; close drops the
// connection when the simulated process ends.
type agentClients struct {
	kube  kubernetes.Interface
	js    versioned.Interface
	close func()
}

func newAgentClients() (agentClients, error) {
	cfg := rest.CopyConfig(cluster.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return agentClients{}, err
	}
	kube, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return agentClients{}, err
	}
	js, err := versioned.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return agentClients{}, err
	}
	return agentClients{kube: kube, js: js, close: hc.CloseIdleConnections}, nil
}

// start runs the agent of a pod: run, restart in place when told, again.
func (a *podAgents) start(pod, jobSet string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running[pod] != nil {
		return
	}
	ctx, cancel := context.WithCancel(a.ctx)
	a.running[pod] = cancel
	cfg := inplaceagent.Config{Namespace: a.ns, PodName: pod, JobSet: jobSet, RestartExitCode: 1,
		LiftBarrier: func() {}, Logf: a.logf(pod)}
	go func() {
		for ctx.Err() == nil {
			// One simulated process: new clients, the agent, its exit.
			c, err := newAgentClients()
			if err != nil {
				return
			}
			code := inplaceagent.New(cfg, c.kube, c.js).Run(ctx)
			if ctx.Err() == nil {
				_ = inplaceagent.SignalExit(ctx, c.kube, a.ns, pod, code)
			}
			c.close()
		}
	}()
}

// crash makes the pod's workload fail: its containers restart in place and
// its agent starts over.
func (a *podAgents) crash(pod, jobSet string) error {
	a.mu.Lock()
	if cancel := a.running[pod]; cancel != nil {
		cancel()
	}
	delete(a.running, pod)
	a.mu.Unlock()
	c, err := newAgentClients()
	if err != nil {
		return err
	}
	defer c.close()
	if err := inplaceagent.SignalExit(a.ctx, c.kube, a.ns, pod, 3); err != nil {
		return err
	}
	a.start(pod, jobSet)
	return nil
}

// BenchmarkInPlaceRestart: in one op, G JobSets of M Jobs (one pod each)
// run, one pod of each fails at once, and the time until every JobSet runs
// its workload again is measured twice in the same op:
//
//   - Recreate: the failed pod fails its Job (backoffLimit 0); the op ends
//     when all G×M pods of the next attempt are Running.
//   - InPlaceRestart: an agent per pod (in this process); the failed pod's
//     containers restart, the others restart in place; the op ends when
//     every JobSet's currentInPlaceRestartAttempt is 1 (every barrier lifted).
//
// inplace/recreate is the ratio of the two.
//
// BENCH_INPLACE_ONLY=1 measures only the in-place restart.
// BENCH_RESTART_TRACE=1 writes the in-place restart's timeline (when each
// pod and JobSet passed each step) to _output/bench/restart-trace-<namespace>.txt.
func BenchmarkInPlaceRestart(b *testing.B) {
	inPlaceOnly := os.Getenv("BENCH_INPLACE_ONLY") == "1"
	groups, perJobSet := envInt("BENCH_RESTART_JOBSETS", 20), envInt("BENCH_JOBS_PER_JOBSET", 4)
	total := groups * perJobSet
	var recreateSum, inPlaceSum time.Duration
	for i := 0; i < b.N; i++ {
		// Recreate.
		var recreate time.Duration
		if !inPlaceOnly {
			ns := newNamespace(b, "ip-recreate")
			createRestartJobSets(b, ns, groups, perJobSet, false)
			waitPodCount(b, ns, total)
			victims := onePodPerGroup(b, ns, groups, v1alpha2.RestartsKey+"=0")
			start := time.Now()
			failPods(b, ns, victims)
			recreate = waitRunningPods(b, ns, v1alpha2.RestartsKey+"=1", total).Sub(start)
		}

		// InPlaceRestart.
		ins := newNamespace(b, "ip-inplace")
		ctx, cancel := context.WithCancel(context.Background())
		agents := newPodAgents(ctx, ins)
		createRestartJobSets(b, ins, groups, perJobSet, true)
		waitPodCount(b, ins, total)
		list, err := cluster.Kube.CoreV1().Pods(ins).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range list.Items {
			agents.start(p.Name, p.Labels[v1alpha2.JobSetNameKey])
		}
		waitAttempts(b, ins, groups, 0)
		victims := onePodPerGroup(b, ins, groups, v1alpha2.RestartsKey+"=0")
		var tr *tracer
		if os.Getenv("BENCH_RESTART_TRACE") == "1" {
			tr = startInPlaceTracer(b, ins, victims)
			agents.trace(tr)
		}
		start := time.Now()
		createParallel(b, len(victims), 20, func(k int) error {
			p, err := cluster.Kube.CoreV1().Pods(ins).Get(context.Background(), victims[k], metav1.GetOptions{})
			if err != nil {
				return err
			}
			return agents.crash(p.Name, p.Labels[v1alpha2.JobSetNameKey])
		})
		inPlace := waitAttempts(b, ins, groups, 1).Sub(start)
		cancel()
		if tr != nil {
			tr.write(b, start, ins)
		}

		b.Logf("round %d: Recreate %.2fs, InPlaceRestart %.2fs (%d JobSets × %d Jobs)", i, recreate.Seconds(), inPlace.Seconds(), groups, perJobSet)
		recreateSum += recreate
		inPlaceSum += inPlace
	}
	n := float64(b.N)
	b.ReportMetric(inPlaceSum.Seconds()/n, "inplace-s")
	if !inPlaceOnly {
		b.ReportMetric(recreateSum.Seconds()/n, "recreate-s")
		b.ReportMetric(inPlaceSum.Seconds()/recreateSum.Seconds(), "inplace/recreate")
	}
}

func createRestartJobSets(b *testing.B, ns string, groups, perJobSet int, inPlace bool) {
	b.Helper()
	createParallel(b, groups, 16, func(k int) error {
		spec := batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: podTemplate()}
		fp := &v1alpha2.FailurePolicy{MaxRestarts: 10}
		if inPlace {
			spec.BackoffLimit = ptr.To[int32](math.MaxInt32)
			spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
			spec.Parallelism, spec.Completions = ptr.To[int32](1), ptr.To[int32](1)
			spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			fp.RestartStrategy = v1alpha2.InPlaceRestart
		}
		js := &v1alpha2.JobSet{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("js-%d", k), Namespace: ns},
			Spec: v1alpha2.JobSetSpec{
				FailurePolicy: fp,
				ReplicatedJobs: []v1alpha2.ReplicatedJob{{
					Name: "w", Replicas: ptr.To(int32(perJobSet)),
					Template: batchv1.JobTemplateSpec{Spec: spec},
				}},
			},
		}
		_, err := cluster.JobSets.JobsetV1alpha2().JobSets(ns).Create(context.Background(), js, metav1.CreateOptions{})
		return err
	})
}

// waitRunningPods returns when n pods matching the selector first ran.
func waitRunningPods(b *testing.B, ns, selector string, n int) time.Time {
	b.Helper()
	var seen time.Time
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 15*time.Minute, true,
		func(ctx context.Context) (bool, error) {
			list, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: "0"})
			if err != nil {
				return false, nil
			}
			running := 0
			for _, p := range list.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					running++
				}
			}
			seen = time.Now()
			return running >= n, nil
		})
	if err != nil {
		b.Fatalf("waiting for %d running pods (%s): %v", n, selector, err)
	}
	return seen
}

// waitAttempts returns when all JobSets of ns first had that
// currentInPlaceRestartAttempt, as seen by a watch.
func waitAttempts(b *testing.B, ns string, groups int, attempt int32) time.Time {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	at := map[string]bool{}
	reached := followWatch(ctx, func(ctx context.Context, rv string) (watch.Interface, error) {
		return cluster.JobSets.JobsetV1alpha2().JobSets(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	}, func(ev watch.Event) bool {
		if js, ok := ev.Object.(*v1alpha2.JobSet); ok {
			if c := js.Status.CurrentInPlaceRestartAttempt; c != nil && *c == attempt {
				at[js.Name] = true
			}
		}
		return len(at) == groups
	})
	if !reached {
		b.Fatalf("waiting for %d JobSets at attempt %d: %d reached it", groups, attempt, len(at))
	}
	return time.Now()
}

// startInPlaceTracer records the steps of an in-place restart: for the
// failed pods (victim) and the others, when the container exit was
// signalled, when kwok bumped the restart count, when the pod was Ready
// again and when its agent reported attempt 1; for the JobSets, when
// previousInPlaceRestartAttempt 0 and currentInPlaceRestartAttempt 1 were
// stored.
func startInPlaceTracer(b *testing.B, ns string, victims []string) *tracer {
	b.Helper()
	t, ctx := newTracer()
	victim := map[string]bool{}
	for _, v := range victims {
		victim[v] = true
	}
	t.follow(ctx, func(ctx context.Context, rv string) (watch.Interface, error) {
		return cluster.Kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	}, func(ev watch.Event) {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok || ev.Type == watch.Deleted {
			return
		}
		who := "other "
		if victim[p.Name] {
			who = "victim "
		}
		var restarts int32
		for _, s := range p.Status.ContainerStatuses {
			restarts = max(restarts, s.RestartCount)
		}
		if _, ok := p.Annotations[inplaceagent.ExitCodeAnnotation]; ok && restarts == 0 {
			t.note(who+"exit signalled", p.Name)
		}
		if restarts >= 1 {
			t.note(who+"restartCount 1", p.Name)
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					t.note(who+"ready again", p.Name)
				}
			}
		}
		if a, err := strconv.Atoi(p.Annotations[v1alpha2.InPlaceRestartAttemptKey]); err == nil && a >= 1 {
			t.note(who+"attempt 1 reported", p.Name)
		}
	})
	t.follow(ctx, func(ctx context.Context, rv string) (watch.Interface, error) {
		return cluster.JobSets.JobsetV1alpha2().JobSets(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	}, func(ev watch.Event) {
		js, ok := ev.Object.(*v1alpha2.JobSet)
		if !ok {
			return
		}
		if p := js.Status.PreviousInPlaceRestartAttempt; p != nil && *p >= 0 {
			t.note("jobset previous=0 stored", js.Name)
		}
		if c := js.Status.CurrentInPlaceRestartAttempt; c != nil && *c >= 1 {
			t.note("jobset current=1 stored", js.Name)
		}
	})
	return t
}
