// Package anchor benchmarks one large JobSet on three sides, each on a
// fresh local cluster: ours (jobset-apiserver and jobset-controller),
// upstream JobSet v0.12.0 (its CRD, webhooks and controller manager, built
// by make upstream-jobset from test/bench/upstream), and a plain client
// making the writes our controller makes (the headless Service and the
// Jobs, same labels and annotations) at its concurrency. For each shape it
// measures the time until every Job exists and until every pod is
// scheduled, then fails one pod and measures the time until every Job of
// the next attempt exists; on ours and upstream it counts the writes that
// changed the JobSet's status and its size.
//
//	make build tools upstream-jobset
//	flock /tmp/cluster.lock go test -tags fieldsv1string -run '^$' -bench LargeJobSet -benchtime 1x -timeout 120m ./test/bench/anchor/
//
// BENCH_LARGE_SHAPES (default 2000x1,250x32: Jobs × pods per Job) sets the
// shapes. The clusters live in _output/bench-anchor on ports from 31000
// (BENCH_LOCAL_DIR, BENCH_PORT_BASE) with BENCH_NODES (default 50) kwok
// nodes of BENCH_NODE_PODS (default 200) pods each; kube-controller-manager
// and kube-scheduler get BENCH_KCM_ARGS and BENCH_SCHEDULER_ARGS (default:
// a client rate limit of 500 QPS, burst 1000, so that the Job controller's
// pod creations do not hide the differences). BENCH_LARGE_ONLY names the
// sides to run, comma-separated (ours, upstream, plain): one side alone is
// for trying a change out and reports no ratios; two report the ratios
// between them (ours,plain alternates those two, and a 5,000-node op then
// takes two clusters' time, not three). Every side logs the CPU time of
// each process that serves it, per phase (cpu_test.go).
package anchor

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	clientset "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
	"github.com/nativejobset/jobset/test/benchutil"
	"github.com/nativejobset/jobset/test/localcluster"
)

// The benchmarks start their own clusters, one per side.
func TestMain(m *testing.M) { os.Exit(m.Run()) }

const (
	benchNamespace = "bench"
	jobSetName     = "large"
	rjName         = "w"
	// controllerQPS, controllerBurst and controllerParallelism are
	// jobset-controller's defaults (--kube-api-qps, --kube-api-burst in
	// cmd/jobset-controller; concurrent child writes of one sync in
	// pkg/controller): the plain client's budget.
	controllerQPS, controllerBurst, controllerParallelism = 500, 1000, 50
	phaseTimeout                                          = 30 * time.Minute
)

type shape struct{ jobs, pods int }

func (s shape) String() string { return fmt.Sprintf("%dx%d", s.jobs, s.pods) }

func shapes(b *testing.B) []shape {
	spec := os.Getenv("BENCH_LARGE_SHAPES")
	if spec == "" {
		spec = "2000x1,250x32"
	}
	var out []shape
	for _, f := range strings.Split(spec, ",") {
		j, p, ok := strings.Cut(strings.TrimSpace(f), "x")
		jobs, err1 := strconv.Atoi(j)
		pods, err2 := strconv.Atoi(p)
		if !ok || err1 != nil || err2 != nil || jobs < 1 || pods < 1 {
			b.Fatalf("BENCH_LARGE_SHAPES: %q is not <jobs>x<pods>", f)
		}
		out = append(out, shape{jobs, pods})
	}
	return out
}

// figures are one side's measurements of one shape.
type figures struct {
	jobs, pods, restartJobs, restartPods time.Duration
	// Status of the JobSet (ours and upstream): writes that changed it
	// and their bytes, the largest status, Job events over the same time.
	statusWrites, statusBytes, statusMax, jobEvents int
	// CPU time of each process from the start until every Job exists,
	// from then until every pod is scheduled, and over the next attempt
	// (from the failure until its pods are scheduled).
	cpuJobs, cpuPods, cpuNext cpuReading
}

type side struct {
	name string
	run  func(b *testing.B, c *localcluster.Cluster, m *cpuMeter, s shape) figures
}

var (
	ours     = side{"ours", runJobSet}
	upstrm   = side{"upstream", runJobSet}
	plain    = side{"plain", runPlain}
	allSides = []side{ours, upstrm, plain}
)

// BenchmarkLargeJobSet runs every shape on every side, each on a fresh
// cluster; the order of the sides alternates from one shape (and op) to
// the next.
func BenchmarkLargeJobSet(b *testing.B) {
	run, err := sidesToRun(localcluster.EnvOr("BENCH_LARGE_ONLY", ""))
	if err != nil {
		b.Fatal(err)
	}
	if run[upstrm.name] {
		requireUpstream(b)
	}
	for k, s := range shapes(b) {
		b.Run(s.String(), func(b *testing.B) {
			got := map[string][]figures{}
			for i := 0; i < b.N; i++ {
				order := append([]side{}, allSides...)
				if (k+i)%2 == 1 {
					order = []side{plain, upstrm, ours}
				}
				for _, sd := range order {
					if !run[sd.name] {
						continue
					}
					f := onFreshCluster(b, sd, s)
					b.Logf("%s %s: all Jobs %.2fs, all pods scheduled %.2fs; after the failure: all Jobs %.2fs, all pods scheduled %.2fs; status writes %d (%d bytes, largest %d B) over %d Job events",
						s, sd.name, f.jobs.Seconds(), f.pods.Seconds(), f.restartJobs.Seconds(), f.restartPods.Seconds(),
						f.statusWrites, f.statusBytes, f.statusMax, f.jobEvents)
					b.Logf("%s %s CPU: until all Jobs %v; then until all pods scheduled %v; next attempt %v",
						s, sd.name, f.cpuJobs, f.cpuPods, f.cpuNext)
					got[sd.name] = append(got[sd.name], f)
				}
			}
			if len(run) == 1 {
				b.Logf("one side (BENCH_LARGE_ONLY): no ratios")
				return
			}
			report(b, got)
		})
	}
}

// sidesToRun reads BENCH_LARGE_ONLY: every side when empty, else the
// comma-separated sides it names.
func sidesToRun(spec string) (map[string]bool, error) {
	known := map[string]bool{}
	for _, sd := range allSides {
		known[sd.name] = true
	}
	if spec == "" {
		return known, nil
	}
	run := map[string]bool{}
	for _, name := range strings.Split(spec, ",") {
		name = strings.TrimSpace(name)
		if !known[name] {
			return nil, fmt.Errorf("BENCH_LARGE_ONLY: %q is none of ours, upstream, plain", name)
		}
		run[name] = true
	}
	return run, nil
}

// report gives each side's mean figures and the ratios of ours to each
// other side that ran.
func report(b *testing.B, got map[string][]figures) {
	mean := func(name string, pick func(figures) float64) float64 {
		sum := 0.0
		for _, f := range got[name] {
			sum += pick(f)
		}
		return sum / float64(len(got[name]))
	}
	metrics := []struct {
		unit string
		pick func(figures) float64
	}{
		{"jobs", func(f figures) float64 { return f.jobs.Seconds() }},
		{"pods", func(f figures) float64 { return f.pods.Seconds() }},
		{"restart-jobs", func(f figures) float64 { return f.restartJobs.Seconds() }},
		{"restart-pods", func(f figures) float64 { return f.restartPods.Seconds() }},
	}
	var names []string
	for _, sd := range allSides {
		if len(got[sd.name]) > 0 {
			names = append(names, sd.name)
		}
	}
	for _, m := range metrics {
		for _, name := range names {
			b.ReportMetric(mean(name, m.pick), m.unit+"-"+name+"-s")
			if name != ours.name && len(got[ours.name]) > 0 {
				b.ReportMetric(mean(ours.name, m.pick)/mean(name, m.pick), m.unit+"-ours/"+name)
			}
		}
	}
	for _, name := range names {
		// CPU time of the whole machine's work in each phase.
		b.ReportMetric(mean(name, func(f figures) float64 { return f.cpuJobs.total() }), "cpu-jobs-"+name+"-s")
		b.ReportMetric(mean(name, func(f figures) float64 { return f.cpuPods.total() }), "cpu-pods-"+name+"-s")
		b.ReportMetric(mean(name, func(f figures) float64 { return f.cpuNext.total() }), "cpu-next-"+name+"-s")
	}
	for _, name := range names {
		if name == plain.name {
			continue
		}
		b.ReportMetric(mean(name, func(f figures) float64 { return float64(f.statusWrites) }), "status-writes-"+name)
		b.ReportMetric(mean(name, func(f figures) float64 { return float64(f.statusMax) }), "status-max-B-"+name)
		b.ReportMetric(mean(name, func(f figures) float64 { return float64(f.jobEvents) }), "job-events-"+name)
		// Below 1: status writes are coalesced over Job events.
		b.ReportMetric(mean(name, func(f figures) float64 { return float64(f.statusWrites) / float64(f.jobEvents) }), "status-writes/job-event-"+name)
	}
}

// onFreshCluster brings a cluster up for one side, runs it, and tears it
// down. Ours runs with the JobSet components; upstream and the plain
// client without.
func onFreshCluster(b *testing.B, sd side, s shape) figures {
	b.Helper()
	nodes, _ := strconv.Atoi(localcluster.EnvOr("BENCH_NODES", "50"))
	nodePods, _ := strconv.Atoi(localcluster.EnvOr("BENCH_NODE_PODS", "200"))
	// Foreground deletion keeps an attempt's pods from overlapping the
	// next one's: the pods of one attempt and some room must fit.
	if nodes*nodePods < s.jobs*s.pods+100 {
		b.Fatalf("%d nodes × %d pods do not hold the %d pods of %s and some room: raise BENCH_NODES or BENCH_NODE_PODS", nodes, nodePods, s.jobs*s.pods, s)
	}
	var f figures
	withFreshCluster(b, sd.name, func(c *localcluster.Cluster, u *upstream) {
		if out, err := c.Kubectl("", "create", "namespace", benchNamespace); err != nil {
			b.Fatalf("creating namespace: %v\n%s", err, out)
		}
		m, err := newCPUMeter(c, u)
		if err != nil {
			b.Fatal(err)
		}
		f = sd.run(b, c, m, s)
	})
	return f
}

// withFreshCluster brings a cluster up for the named side ("ours" with the
// JobSet components; "upstream" with upstream's installed instead; any
// other name with neither), runs fn on it, and tears it down. u is nil
// but for upstream.
func withFreshCluster(b *testing.B, sideName string, fn func(c *localcluster.Cluster, u *upstream)) {
	b.Helper()
	portBase, _ := strconv.Atoi(localcluster.EnvOr("BENCH_PORT_BASE", "31000"))
	nodes, _ := strconv.Atoi(localcluster.EnvOr("BENCH_NODES", "50"))
	nodePods, _ := strconv.Atoi(localcluster.EnvOr("BENCH_NODE_PODS", "200"))
	limits := "--kube-api-qps=500 --kube-api-burst=1000"
	c, err := localcluster.Start(localcluster.Options{
		Prefix: "BENCH_", Dir: "_output/bench-anchor", PortBase: portBase, Nodes: nodes,
		WithoutJobSet: sideName != "ours",
		Env: []string{
			// make build tools upstream-jobset come first.
			"SKIP_BUILD=1",
			"NODE_PODS=" + strconv.Itoa(nodePods),
			"NODE_LEASE_SECONDS=" + localcluster.EnvOr("BENCH_NODE_LEASE_SECONDS", strconv.Itoa(nodeLeaseSeconds(nodes))),
			"NODE_STATUS_SECONDS=" + localcluster.EnvOr("BENCH_NODE_STATUS_SECONDS", strconv.Itoa(nodeStatusSeconds(nodes))),
			// kwok made about 25 nodes a second Ready here (5,000 in 200 s).
			"WAIT_TIMEOUT=" + strconv.Itoa(max(120, nodes/10)),
			"KUBE_CONTROLLER_MANAGER_ARGS=" + localcluster.EnvOr("BENCH_KCM_ARGS", limits),
			"KUBE_SCHEDULER_ARGS=" + localcluster.EnvOr("BENCH_SCHEDULER_ARGS", limits),
		},
	})
	defer c.Stop()
	if err != nil {
		b.Fatal(err)
	}
	var u *upstream
	if sideName == "upstream" {
		if u, err = startUpstream(c, portBase); err != nil {
			b.Fatal(err)
		}
		defer u.stop()
	}
	fn(c, u)
}

// nodeWritesPerSecond bounds the fake nodes' Lease renewals, and apart
// from them their status heartbeats, at large node counts. kwok renews a
// Lease every quarter of its duration: at a kubelet's 40 s, 5,000 nodes
// would renew 500 a second, more than the rest of the benchmark asks of a
// two-core control plane.
const nodeWritesPerSecond = 10

// nodeLeaseSeconds is a kubelet's 40 s, or for more nodes than that
// allows, the duration that renews nodeWritesPerSecond Leases a second.
func nodeLeaseSeconds(nodes int) int {
	return min(3600, max(40, 4*nodes/nodeWritesPerSecond))
}

// nodeStatusSeconds is the local cluster's 240 s (a heartbeat every 240 to
// 300 s, 270 s on average), or the interval that refreshes
// nodeWritesPerSecond node statuses a second on average.
func nodeStatusSeconds(nodes int) int {
	return min(3600, max(240, nodes*8/(9*nodeWritesPerSecond)))
}

// protoKube is a client of the cluster speaking protobuf, with the
// given rate limit (-1: none).
func protoKube(c *localcluster.Cluster, qps float32, burst int) kubernetes.Interface {
	cfg := rest.CopyConfig(c.Config)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.QPS, cfg.Burst = qps, burst
	return kubernetes.NewForConfigOrDie(cfg)
}

func podTemplate(pods int) batchv1.JobSpec {
	return batchv1.JobSpec{
		Parallelism:  ptr.To(int32(pods)),
		Completions:  ptr.To(int32(pods)),
		BackoffLimit: ptr.To(int32(0)),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
		}},
	}
}

// largeJobSet: one replicatedJob of s.jobs Jobs × s.pods pods, restarted
// on a failure (up to 3 times).
func largeJobSet(s shape) *v1alpha2.JobSet {
	return &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: jobSetName, Namespace: benchNamespace},
		Spec: v1alpha2.JobSetSpec{
			FailurePolicy: &v1alpha2.FailurePolicy{MaxRestarts: 3},
			ReplicatedJobs: []v1alpha2.ReplicatedJob{{
				Name: rjName, Replicas: ptr.To(int32(s.jobs)),
				Template: batchv1.JobTemplateSpec{Spec: podTemplate(s.pods)},
			}},
		},
	}
}

// runJobSet is ours and upstream alike: the JobSet is created through
// our typed client (the same group, version and wire form).
func runJobSet(b *testing.B, c *localcluster.Cluster, m *cpuMeter, s shape) figures {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// JSON: upstream's CRD speaks no protobuf (kube-apiserver v1.37.2
	// panicked on a protobuf create of a custom resource).
	cfg := rest.CopyConfig(c.Config)
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	jobsets := clientset.NewForConfigOrDie(cfg)
	t := newTracker()
	if err := t.start(ctx, protoKube(c, -1, 0), jobsets, benchNamespace, jobSetName); err != nil {
		b.Fatal(err)
	}
	cpu0 := m.read(b)
	start := time.Now()
	if _, err := jobsets.JobsetV1alpha2().JobSets(benchNamespace).Create(ctx, largeJobSet(s), metav1.CreateOptions{}); err != nil {
		b.Fatalf("creating the JobSet: %v", err)
	}
	f := firstAttempt(b, ctx, t, m, cpu0, s, start)
	failed := failOnePod(b, ctx, c, t)
	cpu1 := m.read(b)
	f.restartJobs, f.restartPods = nextAttempt(b, ctx, t, s, failed)
	f.cpuNext = m.read(b).since(cpu1)
	f.statusWrites, f.statusBytes, f.statusMax, f.jobEvents = t.statusFigures()
	return f
}

// firstAttempt waits until every Job of attempt 0 exists and every pod of
// it is scheduled, and reads the CPU time spent until each, from cpu0.
func firstAttempt(b *testing.B, ctx context.Context, t *tracker, m *cpuMeter, cpu0 cpuReading, s shape, start time.Time) figures {
	b.Helper()
	var f figures
	at, err := await(ctx, phaseTimeout, func() bool { return t.jobsOf("0") >= s.jobs })
	if err != nil {
		b.Fatalf("waiting for %d Jobs: %v (have %d)", s.jobs, err, t.jobsOf("0"))
	}
	f.jobs = at.Sub(start)
	cpu1 := m.read(b)
	f.cpuJobs = cpu1.since(cpu0)
	at, err = await(ctx, phaseTimeout, func() bool { return t.scheduledOf("0") >= s.jobs*s.pods })
	if err != nil {
		b.Fatalf("waiting for %d scheduled pods: %v (have %d)", s.jobs*s.pods, err, t.scheduledOf("0"))
	}
	f.pods = at.Sub(start)
	f.cpuPods = m.read(b).since(cpu1)
	return f
}

// failOnePod makes kwok fail the first pod of the first Job once it runs,
// and returns when the pod was seen failed: the earliest moment any
// controller could react. (kwok plays the failure from a queue that may
// still hold the first attempt's transitions: 34 s in one run.)
func failOnePod(b *testing.B, ctx context.Context, c *localcluster.Cluster, t *tracker) time.Time {
	b.Helper()
	pod, err := firstPod(ctx, c)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := await(ctx, phaseTimeout, func() bool { return t.running(pod) }); err != nil {
		b.Fatalf("waiting for pod %s to run: %v", pod, err)
	}
	patch := `{"metadata":{"labels":{"pod-fail.stage.kwok.x-k8s.io":"true"},"annotations":{"pod-fail.stage.kwok.x-k8s.io/delay":"0s"}}}`
	asked := time.Now()
	if _, err := c.Kube.CoreV1().Pods(benchNamespace).Patch(ctx, pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		b.Fatalf("failing pod %s: %v", pod, err)
	}
	if _, err := await(ctx, phaseTimeout, func() bool { _, ok := t.podFailed(pod); return ok }); err != nil {
		b.Fatalf("waiting for pod %s to fail: %v", pod, err)
	}
	at, _ := t.podFailed(pod)
	b.Logf("pod %s failed %.2fs after kwok was asked", pod, at.Sub(asked).Seconds())
	return at
}

// firstPod is the name of the pod of Job <jobset>-<rj>-0 with completion
// index 0.
func firstPod(ctx context.Context, c *localcluster.Cluster) (string, error) {
	list, err := c.Kube.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: "batch.kubernetes.io/job-name=" + jobName(0) + ",batch.kubernetes.io/job-completion-index=0"})
	if err != nil {
		return "", err
	}
	if len(list.Items) == 0 {
		return "", fmt.Errorf("no pod of Job %s", jobName(0))
	}
	return list.Items[0].Name, nil
}

// nextAttempt waits, from the failure, until every Job of attempt 1
// exists and every pod of it is scheduled.
func nextAttempt(b *testing.B, ctx context.Context, t *tracker, s shape, failed time.Time) (jobs, pods time.Duration) {
	b.Helper()
	at, err := await(ctx, phaseTimeout, func() bool { return t.jobsOf("1") >= s.jobs })
	if err != nil {
		b.Fatalf("waiting for %d Jobs of the next attempt: %v (have %d)", s.jobs, err, t.jobsOf("1"))
	}
	jobs = at.Sub(failed)
	at, err = await(ctx, phaseTimeout, func() bool { return t.scheduledOf("1") >= s.jobs*s.pods })
	if err != nil {
		b.Fatalf("waiting for %d scheduled pods of the next attempt: %v (have %d)", s.jobs*s.pods, err, t.scheduledOf("1"))
	}
	return jobs, at.Sub(failed)
}

func jobName(idx int) string { return fmt.Sprintf("%s-%s-%d", jobSetName, rjName, idx) }

// runPlain makes our controller's writes itself: the headless Service and
// the Jobs from controllerParallelism goroutines at the controller's rate
// limit; on the failed Job it deletes every Job (foreground, as the
// controllers do) and creates each again, as attempt 1, once it is gone.
func runPlain(b *testing.B, c *localcluster.Cluster, m *cpuMeter, s shape) figures {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t := newTracker()
	if err := t.start(ctx, protoKube(c, -1, 0), nil, benchNamespace, ""); err != nil {
		b.Fatal(err)
	}
	kube := protoKube(c, controllerQPS, controllerBurst)
	// The controllers' Jobs carry the JobSet's UID; there is none here.
	uid := "00000000-0000-0000-0000-000000000000"
	cpu0 := m.read(b)
	start := time.Now()
	if _, err := kube.CoreV1().Services(benchNamespace).Create(ctx, plainService(), metav1.CreateOptions{}); err != nil {
		b.Fatalf("creating the Service: %v", err)
	}
	benchutil.Parallel(b, s.jobs, controllerParallelism, func(i int) error {
		_, err := kube.BatchV1().Jobs(benchNamespace).Create(ctx, plainJob(s, uid, i, 0), metav1.CreateOptions{})
		return err
	})
	f := firstAttempt(b, ctx, t, m, cpu0, s, start)
	failed := failOnePod(b, ctx, c, t)
	cpu1 := m.read(b)

	if _, err := await(ctx, phaseTimeout, func() bool { return t.jobFailed(jobName(0)) }); err != nil {
		b.Fatalf("waiting for Job %s to fail: %v", jobName(0), err)
	}
	gone := make(chan int, s.jobs)
	t.setOnJobGone(func(name string) {
		if idx, err := strconv.Atoi(strings.TrimPrefix(name, jobSetName+"-"+rjName+"-")); err == nil {
			gone <- idx
		}
	})
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for w := 0; w < controllerParallelism; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for idx := range gone {
				if _, err := kube.BatchV1().Jobs(benchNamespace).Create(ctx, plainJob(s, uid, idx, 1), metav1.CreateOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	benchutil.Parallel(b, s.jobs, controllerParallelism, func(i int) error {
		return kube.BatchV1().Jobs(benchNamespace).Delete(ctx, jobName(i), metav1.DeleteOptions{
			PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
	})
	f.restartJobs, f.restartPods = nextAttempt(b, ctx, t, s, failed)
	f.cpuNext = m.read(b).since(cpu1)
	t.setOnJobGone(nil)
	close(gone)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatalf("creating a Job of the next attempt: %v", err)
	default:
	}
	return f
}

func plainService() *corev1.Service {
	sel := map[string]string{v1alpha2.JobSetNameKey: jobSetName}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: jobSetName, Labels: sel},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: sel, PublishNotReadyAddresses: true},
	}
}

// plainJob is Job idx of restart attempt as jobset-controller writes it:
// the labels and annotations on the Job and its pod template, indexed
// completion, the pods' subdomain.
func plainJob(s shape, uid string, idx, attempt int) *batchv1.Job {
	name := jobName(idx)
	sum := sha1.Sum([]byte(benchNamespace + "/" + name))
	jobs := strconv.Itoa(s.jobs)
	labels := map[string]string{
		v1alpha2.JobSetNameKey:         jobSetName,
		v1alpha2.JobSetUIDKey:          uid,
		v1alpha2.ReplicatedJobNameKey:  rjName,
		v1alpha2.ReplicatedJobReplicas: jobs,
		v1alpha2.JobIndexKey:           strconv.Itoa(idx),
		v1alpha2.JobGlobalIndexKey:     strconv.Itoa(idx),
		v1alpha2.GlobalReplicasKey:     jobs,
		v1alpha2.GroupNameKey:          v1alpha2.DefaultGroupName,
		v1alpha2.GroupReplicasKey:      jobs,
		v1alpha2.JobGroupIndexKey:      strconv.Itoa(idx),
		v1alpha2.JobKey:                hex.EncodeToString(sum[:]),
		v1alpha2.RestartsKey:           strconv.Itoa(attempt),
		v1alpha2.JobRestartsKey:        "0",
	}
	annotations := map[string]string{
		v1alpha2.ExecutionAttemptKey: strconv.Itoa(attempt),
		// A ControllerRevision name of the length ours gives.
		v1alpha2.TemplateRevisionKey: jobSetName + "-7d9f8b6c5d",
	}
	for k, v := range labels {
		annotations[k] = v
	}
	spec := podTemplate(s.pods)
	spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	spec.Suspend = ptr.To(false)
	spec.Template.Labels, spec.Template.Annotations = labels, annotations
	spec.Template.Spec.Subdomain = jobSetName
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Spec:       spec,
	}
}
