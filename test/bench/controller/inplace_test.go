package controller

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	jobsetapi "github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	versioned "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
	"github.com/nativejobset/jobset/pkg/inplaceagent"
	"github.com/nativejobset/jobset/test/benchutil"
)

// podAgents runs one in-place agent per pod in this process (kwok runs no
// containers), restarting it as the kubelet would restart its container:
// through the kwok in-place restart stage. The agent's exit is signalled
// on its pod as with --restart-via-annotation; that the container
// restarted is read from one watch of the namespace's pods shared by all
// agents (the kubelet knows it without asking the API server).
type podAgents struct {
	ns       string
	ctx      context.Context
	restarts *restartWatch

	mu      sync.Mutex
	running map[string]context.CancelFunc
	tr      *tracer         // when set, the agents' steps go into the timeline
	victims map[string]bool // the pods that failed, for the timeline
}

// trace records the agents' steps: their decisions from their log lines,
// their restarts, and when the server answered their requests.
func (a *podAgents) trace(t *tracer, victims []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tr = t
	a.victims = map[string]bool{}
	for _, v := range victims {
		a.victims[v] = true
	}
}

// traceNote notes a step of a pod's agent in the timeline, when traced.
func (a *podAgents) traceNote(step, pod string) {
	a.mu.Lock()
	t, who := a.tr, "other "
	if a.victims[pod] {
		who = "victim "
	}
	a.mu.Unlock()
	if t != nil {
		t.note(who+step, pod)
	}
}

func (a *podAgents) logf(pod string) func(string, ...any) {
	return func(format string, args ...any) {
		switch {
		case strings.HasPrefix(format, "attempt %d is over"):
			a.traceNote("agent saw previous=0", pod)
		case strings.HasPrefix(format, "barrier lifted") && strings.HasSuffix(fmt.Sprintf(format, args...), "attempt 1"):
			a.traceNote("agent saw current=1", pod)
		}
	}
}

// answered notes in the timeline when the server answered a restarted
// agent's JobSet watch and its pod patch.
func (a *podAgents) answered(pod string) func(*http.Request) {
	return func(r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Query().Get("watch") == "true":
			a.traceNote("agent watch answered", pod)
		case r.Method == http.MethodPatch:
			a.traceNote("agent patch answered", pod)
		}
	}
}

func newPodAgents(ctx context.Context, ns string) *podAgents {
	return &podAgents{ns: ns, ctx: ctx, restarts: watchRestarts(ctx, ns), running: map[string]context.CancelFunc{}}
}

// restartWatch follows the pods of a namespace for the simulated kubelet:
// a signalled exit is done once the pod no longer carries the exit code in
// a version newer than the signal's.
type restartWatch struct {
	mu      sync.Mutex
	seen    map[string]podVersion
	waiters map[string][]restartWaiter
}

type podVersion struct {
	rv      int64
	pending bool // the exit code is on the pod
	gone    bool
}

type restartWaiter struct {
	after int64
	done  chan error
}

func watchRestarts(ctx context.Context, ns string) *restartWatch {
	w := &restartWatch{seen: map[string]podVersion{}, waiters: map[string][]restartWaiter{}}
	go followWatch(ctx, watchOf(cluster.Kube.CoreV1().Pods(ns)), func(ev watch.Event) bool {
		if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Bookmark {
			_, pending := p.Annotations[inplaceagent.ExitCodeAnnotation]
			w.update(p.Name, podVersion{rv: resourceVersionNumber(p.ResourceVersion), pending: pending, gone: ev.Type == watch.Deleted})
		}
		return false
	})
	return w
}

// resourceVersionNumber reads a resourceVersion of this cluster's
// kube-apiserver, which orders its writes of one object by it.
func resourceVersionNumber(rv string) int64 {
	n, _ := strconv.ParseInt(rv, 10, 64)
	return n
}

func (w *restartWatch) update(pod string, v podVersion) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if v.rv < w.seen[pod].rv {
		return
	}
	w.seen[pod] = v
	kept := w.waiters[pod][:0]
	for _, wt := range w.waiters[pod] {
		if ok, err := v.restarted(wt.after); ok {
			wt.done <- err
		} else {
			kept = append(kept, wt)
		}
	}
	w.waiters[pod] = kept
}

// restarted says whether a restart signalled at version after is over:
// with an error when the pod went instead.
func (v podVersion) restarted(after int64) (bool, error) {
	switch {
	case v.gone:
		return true, fmt.Errorf("the pod was deleted")
	case v.rv > after && !v.pending:
		return true, nil
	}
	return false, nil
}

// signalExit writes the exit code on the pod (as inplaceagent.SignalExit)
// and waits until kwok restarted the pod's containers.
func (w *restartWatch) signalExit(ctx context.Context, kube kubernetes.Interface, ns, pod string, code int) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, inplaceagent.ExitCodeAnnotation, strconv.Itoa(code))
	p, err := kube.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: inplaceagent.FieldManager})
	if err != nil {
		return fmt.Errorf("signalling exit code %d on pod %s: %w", code, pod, err)
	}
	wt := restartWaiter{after: resourceVersionNumber(p.ResourceVersion), done: make(chan error, 1)}
	w.mu.Lock()
	if ok, err := w.seen[pod].restarted(wt.after); ok {
		w.mu.Unlock()
		return err
	}
	w.waiters[pod] = append(w.waiters[pod], wt)
	w.mu.Unlock()
	select {
	case err := <-wt.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
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

// answered, when set, is called with every request the server answered.
func newAgentClients(answered func(*http.Request)) (agentClients, error) {
	cfg := inplaceagent.RESTConfig(cluster.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if answered != nil {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				resp, err := rt.RoundTrip(r)
				if err == nil {
					answered(r)
				}
				return resp, err
			})
		})
	}
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

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// start runs the agent of a pod: run, restart in place when told, again.
// restarted says whether the first start is already a restart.
func (a *podAgents) start(pod, jobSet string, restarted bool) {
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
			var answered func(*http.Request)
			if restarted {
				a.traceNote("agent started", pod)
				answered = a.answered(pod)
			}
			restarted = true
			c, err := newAgentClients(answered)
			if err != nil {
				return
			}
			code := inplaceagent.New(cfg, c.kube, c.js).Run(ctx)
			if ctx.Err() == nil {
				_ = a.restarts.signalExit(ctx, c.kube, a.ns, pod, code)
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
	c, err := newAgentClients(nil)
	if err != nil {
		return err
	}
	defer c.close()
	if err := a.restarts.signalExit(a.ctx, c.kube, a.ns, pod, 3); err != nil {
		return err
	}
	a.start(pod, jobSet, true)
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
// Each half runs in a namespace of its own, deleted and waited for before
// the other starts; which half goes first alternates between ops
// (-benchtime 2x or more for both orders). inplace/recreate is the ratio
// of the two.
//
// BENCH_INPLACE_ONLY=1 measures only the in-place restart.
// BENCH_RESTART_TRACE=1 writes the in-place restart's timeline (when each
// pod and JobSet passed each step) to _output/bench/restart-trace-<namespace>.txt.
func BenchmarkInPlaceRestart(b *testing.B) {
	inPlaceOnly := os.Getenv("BENCH_INPLACE_ONLY") == "1"
	traced := os.Getenv("BENCH_RESTART_TRACE") == "1"
	groups, perJobSet := envInt("BENCH_RESTART_JOBSETS", 20), envInt("BENCH_JOBS_PER_JOBSET", 4)
	total := groups * perJobSet
	// Recreate: the failed pod fails its Job, and the JobSet recreates them.
	recreateHalf := func() time.Duration {
		ns := newNamespace(b, "ip-recreate")
		createRestartJobSets(b, ns, groups, perJobSet, false)
		waitPodCount(b, ns, total)
		waitJobSetsSettled(b, ns, groups, perJobSet)
		victims := onePodPerGroup(b, ns, groups, v1alpha2.RestartsKey+"=0")
		var cpuBefore, requestsBefore map[string]float64
		if traced {
			cpuBefore, requestsBefore = clusterCPUSeconds(), apiRequestCounts(b)
		}
		start := time.Now()
		failPods(b, ns, victims)
		recreate := waitRunningPods(b, ns, v1alpha2.RestartsKey+"=1", total).Sub(start)
		if traced {
			writeTrace(b, ns, cpuTable(cpuBefore, clusterCPUSeconds(), recreate)+requestTable(requestsBefore, apiRequestCounts(b)))
		}
		// The other half gets the cluster to itself.
		deleteNamespace(b, ns)
		return recreate
	}
	// InPlaceRestart: agents in this process restart the containers.
	inPlaceHalf := func() time.Duration {
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
			agents.start(p.Name, p.Labels[v1alpha2.JobSetNameKey], false)
		}
		waitAttempts(b, ins, groups, 0)
		waitJobSetsSettled(b, ins, groups, perJobSet)
		victims := onePodPerGroup(b, ins, groups, v1alpha2.RestartsKey+"=0")
		var tr *tracer
		if traced {
			tr = startInPlaceTracer(b, ins, victims)
			agents.trace(tr, victims)
		}
		var cpuBefore, requestsBefore map[string]float64
		if tr != nil {
			// The cluster's CPU use just before, to show that it is at rest.
			restFrom, restStart := clusterCPUSeconds(), time.Now()
			<-time.After(2 * time.Second)
			tr.addFooter(cpuTable(restFrom, clusterCPUSeconds(), time.Since(restStart)))
			cpuBefore, requestsBefore = clusterCPUSeconds(), apiRequestCounts(b)
		}
		profiled := startProfiles(b, ins)
		start := time.Now()
		benchutil.Parallel(b, len(victims), 20, func(k int) error {
			p, err := cluster.Kube.CoreV1().Pods(ins).Get(context.Background(), victims[k], metav1.GetOptions{})
			if err != nil {
				return err
			}
			return agents.crash(p.Name, p.Labels[v1alpha2.JobSetNameKey])
		})
		inPlace := waitAttempts(b, ins, groups, 1).Sub(start)
		if tr != nil {
			tr.addFooter(cpuTable(cpuBefore, clusterCPUSeconds(), time.Since(start)) + requestTable(requestsBefore, apiRequestCounts(b)))
		}
		cancel()
		if tr != nil {
			tr.write(b, start, ins)
		}
		profiled()

		deleteNamespace(b, ins)
		return inPlace
	}
	var recreateSum, inPlaceSum time.Duration
	for i := 0; i < b.N; i++ {
		// The first half of a round alternates between rounds.
		var recreate, inPlace time.Duration
		switch {
		case inPlaceOnly:
			inPlace = inPlaceHalf()
		case i%2 == 0:
			recreate = recreateHalf()
			inPlace = inPlaceHalf()
		default:
			inPlace = inPlaceHalf()
			recreate = recreateHalf()
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
	benchutil.Parallel(b, groups, 16, func(k int) error {
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

// waitAttempts returns when all JobSets of ns first had at least that
// currentInPlaceRestartAttempt, as seen by a watch.
func waitAttempts(b *testing.B, ns string, groups int, attempt int32) time.Time {
	b.Helper()
	return waitJobSets(b, ns, groups, fmt.Sprintf("at attempt %d", attempt), func(js *v1alpha2.JobSet) bool {
		c := js.Status.CurrentInPlaceRestartAttempt
		return c != nil && *c >= attempt
	})
}

// waitJobSets returns when the newest state of each of the groups JobSets
// of ns, as seen by a watch, satisfies ok; what names ok in the failure.
func waitJobSets(b *testing.B, ns string, groups int, what string, ok func(*v1alpha2.JobSet) bool) time.Time {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	state := map[string]bool{}
	count := func() int {
		n := 0
		for _, v := range state {
			if v {
				n++
			}
		}
		return n
	}
	reached := followWatch(ctx, watchOf(cluster.JobSets.JobsetV1alpha2().JobSets(ns)), func(ev watch.Event) bool {
		if js, isJobSet := ev.Object.(*v1alpha2.JobSet); isJobSet {
			state[js.Name] = ev.Type != watch.Deleted && ok(js)
		}
		return count() == groups
	})
	if !reached {
		b.Fatalf("waiting for %d JobSets of %s %s: %d are", groups, ns, what, count())
	}
	return time.Now()
}

// deleteNamespace deletes ns and returns once it is gone, with everything
// in it.
func deleteNamespace(b *testing.B, ns string) {
	b.Helper()
	if err := cluster.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		b.Fatalf("deleting namespace %s: %v", ns, err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 10*time.Minute, true,
		func(ctx context.Context) (bool, error) {
			_, err := cluster.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	if err != nil {
		b.Fatalf("waiting for namespace %s to be gone: %v", ns, err)
	}
}

// waitJobSetsSettled returns once every JobSet of ns shows all its Jobs
// ready and the controller has recorded it as available (the last write
// of a JobSet's start), so that a restart measured next does not share the
// machine with the tail of the start.
func waitJobSetsSettled(b *testing.B, ns string, groups, perJobSet int) {
	b.Helper()
	waitJobSets(b, ns, groups, "with every Job ready and available", func(js *v1alpha2.JobSet) bool {
		ready := int32(0)
		for _, rj := range js.Status.ReplicatedJobsStatus {
			ready += rj.Ready
		}
		_, available := js.Annotations[jobsetapi.AvailableSinceAnnotation]
		return ready == int32(perJobSet) && available
	})
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
	for _, who := range []string{"victim ", "other "} {
		t.hops = append(t.hops,
			[2]string{who + "exit signalled", who + "restartCount 1"},
			[2]string{who + "restartCount 1", who + "agent started"},
			[2]string{who + "agent started", who + "agent watch answered"},
			[2]string{who + "agent watch answered", who + "agent patch answered"},
			[2]string{who + "agent patch answered", who + "attempt 1 reported"},
			[2]string{who + "restartCount 1", who + "ready again"})
	}
	t.hops = append(t.hops,
		[2]string{"jobset's victim reported", "jobset previous=0 stored"},
		[2]string{"other agent saw previous=0", "other exit signalled"},
		[2]string{"jobset's last other reported", "jobset current=1 stored"})
	victim := map[string]bool{}
	for _, v := range victims {
		victim[v] = true
	}
	t.follow(ctx, watchOf(cluster.Kube.CoreV1().Pods(ns)), func(ev watch.Event) {
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
			first := t.note(who+"attempt 1 reported", p.Name)
			// Per JobSet: the victim's report, and the last of the others'.
			js := p.Labels[v1alpha2.JobSetNameKey]
			switch {
			case !first:
			case victim[p.Name]:
				t.note("jobset's victim reported", js)
			default:
				t.noteLatest("jobset's last other reported", js)
			}
		}
	})
	t.follow(ctx, watchOf(cluster.JobSets.JobsetV1alpha2().JobSets(ns)), func(ev watch.Event) {
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

// startProfiles, with BENCH_PROFILE_SECONDS set, takes CPU profiles
// for that many seconds from now of kube-apiserver, of jobset-apiserver
// (through its own port, BENCH_JOBSET_APISERVER_PORT, default the local
// cluster's port base + 45) and of this process, into
// _output/bench/<component>-<namespace>.pprof; the returned function waits
// for them.
func startProfiles(b *testing.B, ns string) func() {
	secs := os.Getenv("BENCH_PROFILE_SECONDS")
	if secs == "" {
		return func() {}
	}
	n, err := strconv.Atoi(secs)
	if err != nil {
		b.Fatalf("BENCH_PROFILE_SECONDS=%q: %v", secs, err)
	}
	var wg sync.WaitGroup
	fetch := func(component string, client rest.Interface) {
		defer wg.Done()
		raw, err := client.Get().AbsPath("/debug/pprof/profile").Param("seconds", secs).DoRaw(context.Background())
		if err != nil {
			b.Logf("profiling %s: %v", component, err)
			return
		}
		path := filepath.Join(cluster.LocalDir, component+"-"+ns+".pprof")
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			b.Logf("writing %s: %v", path, err)
		}
	}
	wg.Add(2)
	go fetch("kube-apiserver", cluster.Kube.CoreV1().RESTClient())
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Host = fmt.Sprintf("https://127.0.0.1:%d", envInt("BENCH_JOBSET_APISERVER_PORT", envInt("BENCH_PORT_BASE", 29400)+45))
	cfg.ServerName = "localhost"
	if js, err := versioned.NewForConfig(cfg); err == nil {
		go fetch("jobset-apiserver", js.JobsetV1alpha2().RESTClient())
	} else {
		wg.Done()
	}
	path := filepath.Join(cluster.LocalDir, "benchmark-"+ns+".pprof")
	if f, err := os.Create(path); err == nil {
		if err := pprof.StartCPUProfile(f); err == nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-time.After(time.Duration(n) * time.Second)
				pprof.StopCPUProfile()
				f.Close()
			}()
		}
	}
	return wg.Wait
}

// apiRequestCounts reads kube-apiserver's apiserver_request_total, summed
// by verb, resource and subresource.
func apiRequestCounts(b *testing.B) map[string]float64 {
	raw, err := cluster.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Logf("reading kube-apiserver's metrics: %v", err)
		return nil
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(line[len("apiserver_request_total{"):end], ",") {
			if k, val, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(val, `"`)
			}
		}
		key := labels["verb"] + " " + labels["group"] + "/" + labels["resource"]
		if labels["subresource"] != "" {
			key += "/" + labels["subresource"]
		}
		out[key] += v
	}
	return out
}
