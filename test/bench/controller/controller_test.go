// Package controller benchmarks jobset-controller on the local cluster: how
// fast child Jobs appear for many JobSets, how fast a restart replaces them,
// and how much memory the controller holds, against a plain client creating
// the same Jobs at the same rate limit.
//
//	go test -bench . -run '^$' -benchtime 1x ./test/bench/controller/
//
// BENCH_JOBSETS (default 200) and BENCH_JOBS_PER_JOBSET (default 4) set the
// size. The stack lives in _output/bench on ports from 29400 (BENCH_PORT_BASE).
package controller

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/benchutil"
	"github.com/nativejobset/jobset/test/localcluster"
)

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(localcluster.RunBenchmarks(m, localcluster.Options{Prefix: "BENCH_", Dir: "_output/bench", PortBase: 29400, Nodes: 16}, &cluster))
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}

// podTemplate makes pods that run until the namespace is deleted.
func podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
	}}
}

func newNamespace(b *testing.B, prefix string) string {
	b.Helper()
	ns := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1000000)
	if out, err := cluster.Kubectl("", "create", "namespace", ns); err != nil {
		b.Fatalf("creating namespace: %v\n%s", err, out)
	}
	b.Cleanup(func() { _, _ = cluster.Kubectl("", "delete", "namespace", ns, "--wait=false") })
	return ns
}

// waitJobCount polls until the namespace holds n Jobs matching the selector
// and returns when that was first seen.
func waitJobCount(b *testing.B, ns, selector string, n int) time.Time {
	b.Helper()
	var seen time.Time
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 15*time.Minute, true,
		func(ctx context.Context) (bool, error) {
			list, err := cluster.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: "0"})
			if err != nil {
				return false, nil
			}
			count := 0
			for _, j := range list.Items {
				if j.DeletionTimestamp == nil {
					count++
				}
			}
			seen = time.Now()
			return count >= n, nil
		})
	if err != nil {
		b.Fatalf("waiting for %d Jobs (%s): %v", n, selector, err)
	}
	return seen
}

// controllerRSSMiB reads the controller's VmRSS. A figure it cannot read
// fails the benchmark: a 0 would pass every memory bound.
func controllerRSSMiB(b *testing.B) float64 {
	b.Helper()
	pid, err := cluster.PID("jobset-controller")
	if err != nil {
		b.Fatalf("controller pid: %v", err)
	}
	rss, err := benchutil.ProcessRSSMiB(pid)
	if err != nil {
		b.Fatalf("controller memory: %v", err)
	}
	return rss
}

// BenchmarkChildJobCreation: N JobSets created at once; the op ends when all
// N×M child Jobs exist.
func BenchmarkChildJobCreation(b *testing.B) {
	jobsets, perJobSet := envInt("BENCH_JOBSETS", 200), envInt("BENCH_JOBS_PER_JOBSET", 4)
	for i := 0; i < b.N; i++ {
		ns := newNamespace(b, "bench-create")
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, jobsets)
		sem := make(chan struct{}, 16)
		for k := 0; k < jobsets; k++ {
			wg.Add(1)
			sem <- struct{}{}
			go func(k int) {
				defer wg.Done()
				defer func() { <-sem }()
				js := &v1alpha2.JobSet{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("js-%d", k), Namespace: ns},
					Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{{
						Name: "w", Replicas: ptr.To(int32(perJobSet)),
						Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podTemplate()}},
					}}},
				}
				if _, err := cluster.JobSets.JobsetV1alpha2().JobSets(ns).Create(context.Background(), js, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}(k)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatalf("creating JobSets: %v", err)
		}
		created := time.Now()
		done := waitJobCount(b, ns, v1alpha2.JobSetNameKey, jobsets*perJobSet)
		b.ReportMetric(done.Sub(start).Seconds(), "s-to-all-jobs")
		b.ReportMetric(created.Sub(start).Seconds(), "s-to-create-jobsets")
		b.ReportMetric(float64(jobsets*perJobSet)/done.Sub(start).Seconds(), "jobs/s")
		b.ReportMetric(controllerRSSMiB(b), "controller-RSS-MiB")
	}
}

// controllerQPS and controllerBurst are jobset-controller's default client
// rate limit (--kube-api-qps, --kube-api-burst in cmd/jobset-controller).
const controllerQPS, controllerBurst = 500, 1000

// BenchmarkPlainClientJobCreation: the same number of Jobs created directly
// by a client with the controller's default rate limit, the floor the
// controller is compared with.
func BenchmarkPlainClientJobCreation(b *testing.B) {
	total := envInt("BENCH_JOBSETS", 200) * envInt("BENCH_JOBS_PER_JOBSET", 4)
	cfg := rest.CopyConfig(cluster.Config)
	cfg.QPS, cfg.Burst = controllerQPS, controllerBurst
	kube := kubernetes.NewForConfigOrDie(cfg)
	for i := 0; i < b.N; i++ {
		ns := newNamespace(b, "bench-plain")
		start := time.Now()
		var wg sync.WaitGroup
		work := make(chan int)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range work {
					job := &batchv1.Job{
						ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("plain-%d", k), Labels: map[string]string{"bench": "plain"}},
						Spec:       batchv1.JobSpec{Template: podTemplate()},
					}
					if _, err := kube.BatchV1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
						b.Errorf("creating Job: %v", err)
					}
				}
			}()
		}
		for k := 0; k < total; k++ {
			work <- k
		}
		close(work)
		wg.Wait()
		done := waitJobCount(b, ns, "bench=plain", total)
		b.ReportMetric(done.Sub(start).Seconds(), "s-to-all-jobs")
		b.ReportMetric(float64(total)/done.Sub(start).Seconds(), "jobs/s")
	}
}

// BenchmarkRestartLatency: one pod of a running JobSet fails; the op ends
// when every Job of the next attempt exists.
func BenchmarkRestartLatency(b *testing.B) {
	perJobSet := envInt("BENCH_JOBS_PER_JOBSET", 4)
	ns := newNamespace(b, "bench-restart")
	js := &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "restarting", Namespace: ns},
		Spec: v1alpha2.JobSetSpec{
			FailurePolicy: &v1alpha2.FailurePolicy{MaxRestarts: int32(b.N + 1)},
			ReplicatedJobs: []v1alpha2.ReplicatedJob{{
				Name: "w", Replicas: ptr.To(int32(perJobSet)),
				Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: podTemplate()}},
			}},
		},
	}
	if _, err := cluster.JobSets.JobsetV1alpha2().JobSets(ns).Create(context.Background(), js, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for i := 0; i < b.N; i++ {
		attempt := fmt.Sprint(i)
		waitJobCount(b, ns, v1alpha2.RestartsKey+"="+attempt, perJobSet)
		pod := runningPod(b, ns, "restarting-w-0", attempt)
		start := time.Now()
		patch := `{"metadata":{"labels":{"pod-fail.stage.kwok.x-k8s.io":"true"},"annotations":{"pod-fail.stage.kwok.x-k8s.io/delay":"0s"}}}`
		if _, err := cluster.Kube.CoreV1().Pods(ns).Patch(context.Background(), pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
		done := waitJobCount(b, ns, v1alpha2.RestartsKey+"="+fmt.Sprint(i+1), perJobSet)
		total += done.Sub(start)
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s-per-restart")
}

func runningPod(b *testing.B, ns, job, attempt string) string {
	b.Helper()
	var name string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 5*time.Minute, true,
		func(ctx context.Context) (bool, error) {
			pods, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
				LabelSelector: "batch.kubernetes.io/job-name=" + job + "," + v1alpha2.RestartsKey + "=" + attempt})
			if err != nil {
				return false, nil
			}
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					name = p.Name
					return true, nil
				}
			}
			return false, nil
		})
	if err != nil {
		b.Fatalf("no running pod of %s: %v", job, err)
	}
	return name
}

// BenchmarkScaleLatency: a running JobSet of BENCH_JOBS_PER_JOBSET Jobs × 2
// pods is scaled through replicatedjobs/scale as an HPA does (get, then
// update with the resourceVersion) to 6 pods per Job and back to 2. The up
// op ends when every Job has 6 live pods, the down op when every Job is back
// to 2; both also report when the Scale's status.replicas caught up.
func BenchmarkScaleLatency(b *testing.B) {
	perJobSet := envInt("BENCH_JOBS_PER_JOBSET", 4)
	ns := newNamespace(b, "bench-scale")
	js := &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "elastic", Namespace: ns},
		Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{{
			Name: "workers", Replicas: ptr.To(int32(perJobSet)),
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				CompletionMode: ptr.To(batchv1.IndexedCompletion),
				Parallelism:    ptr.To[int32](2), Completions: ptr.To[int32](2),
				Template: podTemplate(),
			}},
		}}},
	}
	if _, err := cluster.JobSets.JobsetV1alpha2().JobSets(ns).Create(context.Background(), js, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	waitScaled(b, ns, "elastic.workers", perJobSet, 2)
	var up, down, upStatus, downStatus time.Duration
	for i := 0; i < b.N; i++ {
		for _, step := range []struct {
			to           int32
			pods, status *time.Duration
		}{{6, &up, &upStatus}, {2, &down, &downStatus}} {
			start := time.Now()
			scaleTo(b, ns, "elastic.workers", step.to)
			podsAt, statusAt := waitScaled(b, ns, "elastic.workers", perJobSet, step.to)
			*step.pods += podsAt.Sub(start)
			*step.status += statusAt.Sub(start)
		}
	}
	n := float64(b.N)
	b.ReportMetric(up.Seconds()/n, "s-up-to-all-pods")
	b.ReportMetric(upStatus.Seconds()/n, "s-up-to-status")
	b.ReportMetric(down.Seconds()/n, "s-down-to-all-pods")
	b.ReportMetric(downStatus.Seconds()/n, "s-down-to-status")
}

// scaleTo writes spec.replicas of a replicatedjobs/scale, retrying on a
// conflict as an autoscaler would.
func scaleTo(b *testing.B, ns, name string, replicas int32) {
	b.Helper()
	rjs := cluster.JobSets.JobsetV1alpha2().ReplicatedJobResources(ns)
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true,
		func(ctx context.Context) (bool, error) {
			sc, err := rjs.GetScale(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			sc.Spec.Replicas = replicas
			_, err = rjs.UpdateScale(ctx, name, sc, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) {
				return false, nil
			}
			return err == nil, err
		})
	if err != nil {
		b.Fatalf("scaling %s to %d: %v", name, replicas, err)
	}
}

// waitScaled polls until each of the namespace's jobs Jobs has exactly want
// pods that are not being deleted and the Scale's status.replicas reads
// want; it returns when each was first seen.
func waitScaled(b *testing.B, ns, name string, jobs int, want int32) (podsAt, statusAt time.Time) {
	b.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Minute, true,
		func(ctx context.Context) (bool, error) {
			if statusAt.IsZero() {
				sc, err := cluster.JobSets.JobsetV1alpha2().ReplicatedJobResources(ns).GetScale(ctx, name, metav1.GetOptions{})
				if err == nil && sc.Status.Replicas == want {
					statusAt = time.Now()
				}
			}
			if podsAt.IsZero() && podsPerJobAre(ctx, ns, jobs, int(want)) {
				podsAt = time.Now()
			}
			return !podsAt.IsZero() && !statusAt.IsZero(), nil
		})
	if err != nil {
		b.Fatalf("waiting for %d pods in each of %d Jobs and status.replicas %d: %v", want, jobs, want, err)
	}
	return podsAt, statusAt
}

// podsPerJobAre reports whether each of jobs Jobs has exactly want live pods.
func podsPerJobAre(ctx context.Context, ns string, jobs, want int) bool {
	pods, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return false
	}
	perJob := map[string]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			perJob[p.Labels["batch.kubernetes.io/job-name"]]++
		}
	}
	if len(perJob) != jobs {
		return false
	}
	for _, n := range perJob {
		if n != want {
			return false
		}
	}
	return true
}
