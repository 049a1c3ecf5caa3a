package controller

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/benchutil"
	"github.com/nativejobset/jobset/test/localcluster"
)

// jobSetOf is a JobSet of perJobSet one-pod Jobs.
func jobSetOf(ns, name string, perJobSet int) *v1alpha2.JobSet {
	return &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{{
			Name: "w", Replicas: ptr.To(int32(perJobSet)),
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podTemplate()}},
		}}},
	}
}

// createJobSets creates js-0..js-(n-1) from 16 goroutines.
func createJobSets(b *testing.B, ns string, n, perJobSet int) {
	b.Helper()
	benchutil.Parallel(b, n, 16, func(k int) error {
		_, err := cluster.JobSets.JobsetV1alpha2().JobSets(ns).Create(context.Background(),
			jobSetOf(ns, fmt.Sprintf("js-%d", k), perJobSet), metav1.CreateOptions{})
		return err
	})
}

// waitAllReady polls until every JobSet of the namespace reports all its
// Jobs ready: pods run and the controller has written what followed.
func waitAllReady(b *testing.B, ns string, n, perJobSet int) {
	b.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Second, 60*time.Minute, true,
		func(ctx context.Context) (bool, error) {
			list, err := cluster.JobSets.JobsetV1alpha2().JobSets(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
			if err != nil || len(list.Items) != n {
				return false, nil
			}
			for _, js := range list.Items {
				if len(js.Status.ReplicatedJobsStatus) != 1 || js.Status.ReplicatedJobsStatus[0].Ready != int32(perJobSet) {
					return false, nil
				}
			}
			return true, nil
		})
	if err != nil {
		b.Fatalf("waiting for %d JobSets with all Jobs ready: %v", n, err)
	}
}

// BenchmarkScale (goal 4): BENCH_SCALE_JOBSETS (default 500; the goal is
// 2000) JobSets of
// BENCH_JOBS_PER_JOBSET (4) one-pod Jobs. Records the time until every Job
// exists, the controller's RSS once all pods run, and its CPU seconds over
// BENCH_SCALE_WINDOW (default 2m) in which nothing changes, while the
// controller runs with --resync-period BENCH_SCALE_RESYNC (default 30s) so
// that the window holds several full resyncs. With profiling on
// (JOBSET_CONTROLLER_ARGS=--profiling) the window's CPU profile is saved.
// The nodes must have room for every pod (NODE_PODS, default 110 per node
// of 16); bring the cluster up with KUBE_CONTROLLER_MANAGER_ARGS raising
// the Job controller's client limits, or its pod creation paces the run.
func BenchmarkScale(b *testing.B) {
	jobsets, perJobSet := envInt("BENCH_SCALE_JOBSETS", 500), envInt("BENCH_JOBS_PER_JOBSET", 4)
	window, err := time.ParseDuration(localcluster.EnvOr("BENCH_SCALE_WINDOW", "2m"))
	if err != nil {
		b.Fatal(err)
	}
	resync := localcluster.EnvOr("BENCH_SCALE_RESYNC", "30s")
	requirePodCapacity(b, jobsets*perJobSet)
	restartController(b, "--resync-period="+resync)
	for i := 0; i < b.N; i++ {
		ns := newNamespace(b, "scale")
		start := time.Now()
		createJobSets(b, ns, jobsets, perJobSet)
		created := time.Since(start)
		toJobs := waitJobCount(b, ns, v1alpha2.JobSetNameKey, jobsets*perJobSet).Sub(start)
		b.Logf("%d JobSets created in %.1fs; all %d Jobs after %.1fs", jobsets, created.Seconds(), jobsets*perJobSet, toJobs.Seconds())
		waitAllReady(b, ns, jobsets, perJobSet)
		settled := time.Since(start)
		rss := controllerRSSMiB(b)
		cpu0 := controllerCPUSeconds(b)
		if !saveCPUProfile(b, "scale-steady", window) {
			time.Sleep(window) // the measurement window itself, not a synchronisation
		}
		steady := controllerCPUSeconds(b) - cpu0
		b.Logf("all ready after %.1fs; RSS %.1f MiB; %.2f CPU-s in %v of nothing changing (resync every %s)",
			settled.Seconds(), rss, steady, window, resync)
		b.ReportMetric(toJobs.Seconds(), "s-to-all-jobs")
		b.ReportMetric(settled.Seconds(), "s-to-all-ready")
		b.ReportMetric(rss, "RSS-MiB")
		b.ReportMetric(steady, "steady-CPU-s")
		b.ReportMetric(steady/window.Seconds()*100, "steady-CPU-%")
	}
}

// requirePodCapacity fails at once when the kwok nodes cannot run n more
// pods (hack/local-up.sh gives each NODE_PODS, default 110): the run
// would otherwise wait for pods that never start.
func requirePodCapacity(b *testing.B, n int) {
	b.Helper()
	nodes, err := cluster.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	capacity := 0
	for _, node := range nodes.Items {
		capacity += int(node.Status.Allocatable.Pods().Value())
	}
	if capacity < n+100 {
		b.Fatalf("the %d nodes run at most %d pods, fewer than %d Jobs' pods and some room: bring the cluster up with NODE_PODS=%d",
			len(nodes.Items), capacity, n, (n+100)/len(nodes.Items)+1)
	}
}

// BenchmarkFanOutEncoding: the 200 × 4 fan-out (BENCH_JOBSETS ×
// BENCH_JOBS_PER_JOBSET) with the controller restarted for each encoding
// of its requests (--kube-api-content-type): the controller's CPU seconds
// (/proc/<pid>/stat utime+stime) from the first JobSet create until all
// their Jobs exist, its RSS growth over that time and the time to all
// Jobs. One op runs JSON, protobuf, protobuf, JSON; each phase starts from
// a settled cluster: the previous phase's namespace deleted and gone, the
// restarted controller's queue empty.
func BenchmarkFanOutEncoding(b *testing.B) {
	jobsets, perJobSet := envInt("BENCH_JOBSETS", 200), envInt("BENCH_JOBS_PER_JOBSET", 4)
	json := encoding{"json", "application/json"}
	proto := encoding{"protobuf", "application/vnd.kubernetes.protobuf"}
	type figures struct{ toJobs, cpu, growth []float64 }
	results := map[string]*figures{json.name: {}, proto.name: {}}
	for i := 0; i < b.N; i++ {
		for _, enc := range []encoding{json, proto, proto, json} {
			restartController(b, "--kube-api-content-type="+enc.contentType)
			waitQueueEmpty(b)
			idle := controllerRSSMiB(b)
			ns := newNamespace(b, "enc-"+enc.name)
			cpu0 := controllerCPUSeconds(b)
			start := time.Now()
			createJobSets(b, ns, jobsets, perJobSet)
			toJobs := waitJobCount(b, ns, v1alpha2.JobSetNameKey, jobsets*perJobSet).Sub(start)
			cpu := controllerCPUSeconds(b) - cpu0
			rss := controllerRSSMiB(b)
			b.Logf("%s: all Jobs after %.2fs; %.2f CPU-s; RSS %.1f → %.1f MiB",
				enc.name, toJobs.Seconds(), cpu, idle, rss)
			f := results[enc.name]
			f.toJobs = append(f.toJobs, toJobs.Seconds())
			f.cpu = append(f.cpu, cpu)
			f.growth = append(f.growth, rss-idle)
			waitPodCount(b, ns, jobsets*perJobSet)
			deleteNamespace(b, ns)
		}
	}
	for name, f := range results {
		b.ReportMetric(meanOf(f.toJobs), name+"-s-to-all-jobs")
		b.ReportMetric(meanOf(f.cpu), name+"-CPU-s")
		b.ReportMetric(meanOf(f.growth), name+"-RSS-growth-MiB")
	}
	b.ReportMetric(meanOf(results[proto.name].cpu)/meanOf(results[json.name].cpu), "protobuf/json-CPU")
}

type encoding struct{ name, contentType string }

func meanOf(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// waitQueueEmpty polls the controller's workqueue_depth until it is 0.
func waitQueueEmpty(b *testing.B) {
	b.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 10*time.Minute, true,
		func(context.Context) (bool, error) {
			resp, err := http.Get(controllerMetricsURL() + "/metrics")
			if err != nil {
				return false, nil
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			return err == nil && strings.Contains(string(body), `workqueue_depth{name="jobset"} 0`), nil
		})
	if err != nil {
		b.Fatalf("the controller's queue did not drain: %v", err)
	}
}
