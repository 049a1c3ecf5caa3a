package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// unlimitedKube is a client without client-side rate limit: the reference
// "plain client" of the ratio benchmarks.
func unlimitedKube() kubernetes.Interface {
	cfg := rest.CopyConfig(cluster.Config)
	cfg.QPS, cfg.Burst = -1, 0
	return kubernetes.NewForConfigOrDie(cfg)
}

// createParallel runs fn(0..n-1) on the given number of goroutines.
func createParallel(b *testing.B, n, goroutines int, fn func(k int) error) {
	b.Helper()
	var wg sync.WaitGroup
	work := make(chan int)
	var mu sync.Mutex
	var first error
	for w := 0; w < goroutines; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				if err := fn(k); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for k := 0; k < n; k++ {
		work <- k
	}
	close(work)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}

// waitPodCount polls until the namespace holds at least n running pods, so
// that the next phase of a benchmark does not share the cluster with the
// Job controller still creating the previous phase's pods.
func waitPodCount(b *testing.B, ns string, n int) {
	b.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 15*time.Minute, true,
		func(ctx context.Context) (bool, error) {
			list, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
			if err != nil {
				return false, nil
			}
			running := 0
			for _, p := range list.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					running++
				}
			}
			return running >= n, nil
		})
	if err != nil {
		b.Fatalf("waiting for %d running pods in %s: %v", n, ns, err)
	}
}

// plainJob is a Job of the plain client; its pods carry bench=plain too.
func plainJob(name string, group int) *batchv1.Job {
	labels := map[string]string{"bench": "plain", "group": fmt.Sprint(group)}
	tmpl := podTemplate()
	tmpl.Labels = labels
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: tmpl},
	}
}

// BenchmarkFanOut: in one op, a plain client without client-side rate limit
// creates N×M Jobs with 50 goroutines, and then N JobSets of M Jobs are
// created at once (16 goroutines); each phase ends when all its Jobs exist,
// and the next starts once the previous phase's pods all run. The ratio
// controller/plain is the plain client's time over the controller's (1.0:
// the controller creates Jobs as fast as the API server takes them from a
// plain client).
func BenchmarkFanOut(b *testing.B) {
	jobsets, perJobSet := envInt("BENCH_JOBSETS", 200), envInt("BENCH_JOBS_PER_JOBSET", 4)
	total := jobsets * perJobSet
	kube := unlimitedKube()
	var plainSum, ctrlSum, createdSum time.Duration
	for i := 0; i < b.N; i++ {
		plainNS := newNamespace(b, "fanout-plain")
		start := time.Now()
		createParallel(b, total, 50, func(k int) error {
			_, err := kube.BatchV1().Jobs(plainNS).Create(context.Background(), plainJob(fmt.Sprintf("plain-%d", k), 0), metav1.CreateOptions{})
			return err
		})
		plain := waitJobCount(b, plainNS, "bench=plain", total).Sub(start)
		waitPodCount(b, plainNS, total)

		ctrlNS := newNamespace(b, "fanout-ctrl")
		start = time.Now()
		createParallel(b, jobsets, 16, func(k int) error {
			js := &v1alpha2.JobSet{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("js-%d", k), Namespace: ctrlNS},
				Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{{
					Name: "w", Replicas: ptr.To(int32(perJobSet)),
					Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podTemplate()}},
				}}},
			}
			_, err := cluster.JobSets.JobsetV1alpha2().JobSets(ctrlNS).Create(context.Background(), js, metav1.CreateOptions{})
			return err
		})
		// No Job of the last JobSet can exist before it does: the
		// controller's time has this floor.
		created := time.Since(start)
		ctrl := waitJobCount(b, ctrlNS, v1alpha2.JobSetNameKey, total).Sub(start)
		waitPodCount(b, ctrlNS, total)
		b.Logf("round %d: plain client %.2fs, controller %.2fs (%d Jobs; the last JobSet existed after %.2fs)",
			i, plain.Seconds(), ctrl.Seconds(), total, created.Seconds())
		plainSum += plain
		ctrlSum += ctrl
		createdSum += created
	}
	n := float64(b.N)
	b.ReportMetric(plainSum.Seconds()/n, "plain-s")
	b.ReportMetric(ctrlSum.Seconds()/n, "controller-s")
	b.ReportMetric(plainSum.Seconds()/ctrlSum.Seconds(), "controller/plain")
	b.ReportMetric(createdSum.Seconds()/n, "jobsets-created-s")
	b.ReportMetric(controllerRSSMiB(b), "controller-RSS-MiB")
}
