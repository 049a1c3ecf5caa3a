// Package placement benchmarks exclusive topology placement on the local
// cluster: the same JobSet (32 Jobs × 4 pods by default) is run without and
// with the exclusive-topology annotation on 64 kwok nodes in 32 node pools,
// and the time until every pod runs is compared.
//
//	go test -bench . -run '^$' -benchtime 3x ./test/bench/placement/
//
// BENCH_PLACEMENT_JOBS (default 32) and BENCH_PLACEMENT_PODS (pods per
// Job, default 4) set the size; BENCH_NODES (default 64) the cluster, two
// nodes per pool. The stack lives in _output/bench-placement on ports from
// 30400 (BENCH_PORT_BASE).
package placement

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/localcluster"
)

// poolKey is the node label local-up.sh puts on its nodes, two per pool.
const poolKey = "cloud.google.com/gke-nodepool"

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(localcluster.RunBenchmarks(m, localcluster.Options{
		Prefix: "BENCH_", Dir: "_output/bench-placement", PortBase: 30400, Nodes: 64,
		Env: []string{"NODES_PER_POOL=2"},
	}, &cluster))
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}

// round is the outcome of one JobSet run.
type round struct {
	allCreated time.Duration // from the JobSet's creation until every pod exists
	allBound   time.Duration // ... until every pod is bound
	allRunning time.Duration // ... until every pod runs
}

// BenchmarkExclusivePlacement runs, per iteration, the JobSet once without
// and once with exclusive placement, the first of the two alternating
// between iterations (each in a namespace deleted, and waited for, before
// the next), and reports both pod rates, their ratio, and the time until
// every pod of the exclusive run is running.
func BenchmarkExclusivePlacement(b *testing.B) {
	jobs, pods := envInt("BENCH_PLACEMENT_JOBS", 32), envInt("BENCH_PLACEMENT_PODS", 4)
	total := float64(jobs * pods)
	var plain, exclusive []round
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			plain = append(plain, runRound(b, false, jobs, pods))
			exclusive = append(exclusive, runRound(b, true, jobs, pods))
		} else {
			exclusive = append(exclusive, runRound(b, true, jobs, pods))
			plain = append(plain, runRound(b, false, jobs, pods))
		}
	}
	p, e := median(plain), median(exclusive)
	b.ReportMetric(total/p.allRunning.Seconds(), "plain-pods/s")
	b.ReportMetric(total/e.allRunning.Seconds(), "exclusive-pods/s")
	b.ReportMetric(p.allRunning.Seconds()/e.allRunning.Seconds(), "exclusive/plain")
	b.ReportMetric(p.allRunning.Seconds(), "plain-s-to-all-running")
	b.ReportMetric(e.allRunning.Seconds(), "exclusive-s-to-all-running")
	b.ReportMetric(p.allCreated.Seconds(), "plain-s-to-all-created")
	b.ReportMetric(e.allCreated.Seconds(), "exclusive-s-to-all-created")
	b.ReportMetric(p.allBound.Seconds(), "plain-s-to-all-bound")
	b.ReportMetric(e.allBound.Seconds(), "exclusive-s-to-all-bound")
	for i := range plain {
		b.Logf("round %d: plain %v created / %v bound / %v running; exclusive %v created / %v bound / %v running", i,
			plain[i].allCreated.Round(time.Millisecond), plain[i].allBound.Round(time.Millisecond), plain[i].allRunning.Round(time.Millisecond),
			exclusive[i].allCreated.Round(time.Millisecond), exclusive[i].allBound.Round(time.Millisecond), exclusive[i].allRunning.Round(time.Millisecond))
	}
}

// median is the round with the median time to all running.
func median(rs []round) round {
	s := append([]round(nil), rs...)
	sort.Slice(s, func(i, j int) bool { return s[i].allRunning < s[j].allRunning })
	return s[len(s)/2]
}

func runRound(b *testing.B, exclusive bool, jobs, pods int) round {
	b.Helper()
	ns := fmt.Sprintf("bench-placement-%d", time.Now().UnixNano()%1000000)
	if out, err := cluster.Kubectl("", "create", "namespace", ns); err != nil {
		b.Fatalf("creating namespace: %v\n%s", err, out)
	}
	defer cleanup(b, ns)
	js := &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: ns},
		Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{{
			Name: "w", Replicas: ptr.To(int32(jobs)),
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Parallelism: ptr.To(int32(pods)), Completions: ptr.To(int32(pods)),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
				}},
			}},
		}}},
	}
	if exclusive {
		js.Annotations = map[string]string{v1alpha2.ExclusiveKey: poolKey}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A retrying watch: a watch the server closes is resumed from the last
	// resourceVersion seen.
	initial, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, initial.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cluster.Kube.CoreV1().Pods(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	if _, err := cluster.JobSets.JobsetV1alpha2().JobSets(ns).Create(context.Background(), js, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	// Follow the pods through a watch: the times are those at which the
	// client saw each step.
	var r round
	want := jobs * pods
	created, bound, running := map[string]bool{}, map[string]bool{}, map[string]bool{}
	trace := map[string]*podTrace{}
	timeout := time.After(10 * time.Minute)
	for len(running) < want {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatal("pod watch ended")
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			now := time.Since(start)
			tr := trace[p.Name]
			if tr == nil {
				tr = &podTrace{name: p.Name, created: now}
				trace[p.Name] = tr
			}
			if tr.ungated == 0 && len(p.Spec.SchedulingGates) == 0 {
				tr.ungated = now
			}
			if tr.bound == 0 && p.Spec.NodeName != "" {
				tr.bound = now
			}
			if tr.running == 0 && p.Status.Phase == corev1.PodRunning {
				tr.running = now
			}
			created[p.Name] = true
			if p.Spec.NodeName != "" {
				bound[p.Name] = true
			}
			if p.Status.Phase == corev1.PodRunning {
				running[p.Name] = true
			}
			if r.allCreated == 0 && len(created) >= want {
				r.allCreated = now
			}
			if r.allBound == 0 && len(bound) >= want {
				r.allBound = now
			}
			if len(running) >= want {
				r.allRunning = now
			}
		case <-timeout:
			b.Fatalf("waiting for %d running pods (exclusive=%v): %d created, %d bound, %d running", want, exclusive, len(created), len(bound), len(running))
		}
	}
	if exclusive {
		checkExclusive(b, ns, jobs)
	}
	if os.Getenv("BENCH_PLACEMENT_TRACE") == "1" {
		writeTrace(b, ns, exclusive, trace)
	}
	return r
}

// checkExclusive fails the benchmark unless every Job runs in one pool of
// its own.
func checkExclusive(b *testing.B, ns string, jobs int) {
	b.Helper()
	ctx := context.Background()
	nodes, err := cluster.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	pool := map[string]string{}
	for _, n := range nodes.Items {
		pool[n.Name] = n.Labels[poolKey]
	}
	list, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	jobPool := map[string]string{}
	owner := map[string]string{}
	for _, p := range list.Items {
		job, d := p.Labels["batch.kubernetes.io/job-name"], pool[p.Spec.NodeName]
		if prev, ok := jobPool[job]; ok && prev != d {
			b.Fatalf("Job %s runs in pools %s and %s", job, prev, d)
		}
		jobPool[job] = d
		if o, ok := owner[d]; ok && o != job {
			b.Fatalf("Jobs %s and %s share pool %s", o, job, d)
		}
		owner[d] = job
	}
	if len(jobPool) != jobs {
		b.Fatalf("%d Jobs placed, want %d", len(jobPool), jobs)
	}
}

// cleanup deletes the namespace and waits until its pods are gone, so that
// the next round finds every pool free.
func cleanup(b *testing.B, ns string) {
	b.StopTimer()
	defer b.StartTimer()
	if out, err := cluster.Kubectl("", "delete", "namespace", ns, "--wait=false"); err != nil {
		b.Fatalf("deleting namespace: %v\n%s", err, out)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 5*time.Minute, true,
		func(ctx context.Context) (bool, error) {
			list, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(list.Items) == 0, nil
		})
	if err != nil {
		b.Fatalf("waiting for the pods of %s to go: %v", ns, err)
	}
}

// podTrace is when the watch saw a pod created, ungated, bound, running.
type podTrace struct {
	name                             string
	created, ungated, bound, running time.Duration
}

// writeTrace writes every pod's timeline, in milliseconds from the
// JobSet's creation, to <stack dir>/trace-<namespace>.tsv (with
// BENCH_PLACEMENT_TRACE=1), to see where a round's time goes.
func writeTrace(b *testing.B, ns string, exclusive bool, trace map[string]*podTrace) {
	var all []*podTrace
	for _, t := range trace {
		all = append(all, t)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].created < all[j].created })
	var sb strings.Builder
	fmt.Fprintf(&sb, "# exclusive=%v\npod\tcreated\tungated\tbound\trunning\n", exclusive)
	for _, t := range all {
		fmt.Fprintf(&sb, "%s\t%d\t%d\t%d\t%d\n", t.name, t.created.Milliseconds(), t.ungated.Milliseconds(), t.bound.Milliseconds(), t.running.Milliseconds())
	}
	path := filepath.Join(cluster.LocalDir, "trace-"+ns+".tsv")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		b.Logf("writing %s: %v", path, err)
	}
}
