package controller

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/benchutil"
)

// controllerMetricsURL is the base URL of the controller's plain-HTTP
// metrics endpoint ("" when the cluster's env file does not say).
func controllerMetricsURL() string {
	env, err := os.ReadFile(filepath.Join(cluster.LocalDir, "env"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(env), "\n") {
		if v, ok := strings.CutPrefix(line, "JOBSET_CONTROLLER_METRICS_PORT="); ok {
			return "http://127.0.0.1:" + strings.TrimSpace(v)
		}
	}
	return ""
}

// controllerHeapMiB reads go_memstats_heap_inuse_bytes from the
// controller's plain-HTTP /metrics. A figure it cannot read fails the
// benchmark: a 0 would pass every memory bound.
func controllerHeapMiB(b *testing.B) float64 {
	b.Helper()
	resp, err := http.Get(controllerMetricsURL() + "/metrics")
	if err != nil {
		b.Fatalf("scraping the controller: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("scraping the controller: %s", resp.Status)
	}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || f <= 0 {
				b.Fatalf("controller heap: bad sample %q", sc.Text())
			}
			return f / (1 << 20)
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatalf("scraping the controller: %v", err)
	}
	b.Fatal("controller heap: no go_memstats_heap_inuse_bytes in /metrics")
	return 0
}

// saveHeapProfile writes the controller's heap profile to
// <cluster dir>/controller-heap-<name>.pprof when the controller serves
// /debug/pprof (JOBSET_CONTROLLER_ARGS=--profiling); read it with
// go tool pprof -sample_index=inuse_space _output/bin/jobset-controller <file>.
func saveHeapProfile(b *testing.B, name string) {
	resp, err := http.Get(controllerMetricsURL() + "/debug/pprof/heap")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return
	}
	path := filepath.Join(cluster.LocalDir, "controller-heap-"+name+".pprof")
	data, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		b.Logf("heap profile: %v", err)
		return
	}
	b.Logf("heap profile written to %s", path)
}

// createSettled creates JobSets first..first+n-1 of M Jobs of podsPerJob
// pods and waits until every one of them reports all its Jobs ready, so
// that the controller has seen every pod start.
func createSettled(b *testing.B, ns string, first, n, perJobSet, podsPerJob int) {
	b.Helper()
	benchutil.Parallel(b, n, 16, func(k int) error {
		js := &v1alpha2.JobSet{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("js-%d", first+k), Namespace: ns},
			Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{{
				Name: "w", Replicas: ptr.To(int32(perJobSet)),
				Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podTemplate()}},
			}}},
		}
		if podsPerJob > 1 {
			spec := &js.Spec.ReplicatedJobs[0].Template.Spec
			spec.Parallelism, spec.Completions = ptr.To(int32(podsPerJob)), ptr.To(int32(podsPerJob))
		}
		_, err := cluster.JobSets.JobsetV1alpha2().JobSets(ns).Create(context.Background(), js, metav1.CreateOptions{})
		return err
	})
	waitAllReady(b, ns, first+n, perJobSet)
}

// BenchmarkMemory: the controller's RSS (and Go heap in use) idle, then
// with N JobSets (BENCH_JOBSETS) × M Jobs (BENCH_JOBS_PER_JOBSET) of P
// pods (BENCH_PODS_PER_JOB, default 1) running, then with twice as many.
// The growth per managed pod is the difference between the last two over
// the pods added. Run it first (before other benchmarks fill the cluster):
// -bench Memory.
func BenchmarkMemory(b *testing.B) {
	jobsets, perJobSet := envInt("BENCH_JOBSETS", 200), envInt("BENCH_JOBS_PER_JOBSET", 4)
	podsPerJob := envInt("BENCH_PODS_PER_JOB", 1)
	for i := 0; i < b.N; i++ {
		idleRSS, idleHeap := controllerRSSMiB(b), controllerHeapMiB(b)
		cpu0 := controllerCPUSeconds(b)
		saveHeapProfile(b, "idle")
		ns := newNamespace(b, "memory")
		createSettled(b, ns, 0, jobsets, perJobSet, podsPerJob)
		rss1, heap1 := controllerRSSMiB(b), controllerHeapMiB(b)
		saveHeapProfile(b, "N")
		createSettled(b, ns, jobsets, jobsets, perJobSet, podsPerJob)
		rss2, heap2 := controllerRSSMiB(b), controllerHeapMiB(b)
		cpu := controllerCPUSeconds(b) - cpu0
		saveHeapProfile(b, "2N")
		pods := float64(jobsets * perJobSet * podsPerJob)
		b.Logf("RSS %.1f → %.1f (%.0f pods) → %.1f MiB (%.0f pods); heap in use %.1f → %.1f → %.1f MiB; controller CPU %.1f s",
			idleRSS, rss1, pods, rss2, 2*pods, idleHeap, heap1, heap2, cpu)
		b.ReportMetric(idleRSS, "idle-RSS-MiB")
		b.ReportMetric(rss1, "RSS-MiB-at-N")
		b.ReportMetric(rss2, "RSS-MiB-at-2N")
		b.ReportMetric((rss2-rss1)*1024/pods, "RSS-KiB-per-pod")
		b.ReportMetric((heap2-heap1)*1024/pods, "heap-KiB-per-pod")
		// What the collector's setting (GOGC) costs: the controller's CPU
		// from idle to 2N, all of it the creation of the JobSets' Jobs.
		b.ReportMetric(cpu, "controller-CPU-s")
	}
}
