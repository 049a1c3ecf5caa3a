package controller

import (
	"context"
	"fmt"
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
	"github.com/nativejobset/jobset/test/benchutil"
)

// unlimitedKube is a client without client-side rate limit: the reference
// "plain client" of the ratio benchmarks.
func unlimitedKube() kubernetes.Interface {
	cfg := rest.CopyConfig(cluster.Config)
	cfg.QPS, cfg.Burst = -1, 0
	return kubernetes.NewForConfigOrDie(cfg)
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

// BenchmarkFanOut: the controller's fan-out against a plain client making
// the same writes. The plain client (no client-side rate limit, 50
// goroutines) creates N×M Jobs; the controller's side creates N JobSets of
// M Jobs (16 goroutines) and its time ends when all their Jobs exist. One
// op runs each side twice, in the order plain, controller, controller,
// plain, each in a namespace of its own that is deleted, and waited for,
// before the next starts (after its pods all ran). controller/plain is
// the plain client's time over the controller's (1.0: the controller
// creates Jobs as fast as the API server takes them from a plain client).
func BenchmarkFanOut(b *testing.B) {
	jobsets, perJobSet := envInt("BENCH_JOBSETS", 200), envInt("BENCH_JOBS_PER_JOBSET", 4)
	total := jobsets * perJobSet
	kube := unlimitedKube()
	plainSide := func() time.Duration {
		ns := newNamespace(b, "fanout-plain")
		defer deleteNamespace(b, ns)
		start := time.Now()
		benchutil.Parallel(b, total, 50, func(k int) error {
			_, err := kube.BatchV1().Jobs(ns).Create(context.Background(), plainJob(fmt.Sprintf("plain-%d", k), 0), metav1.CreateOptions{})
			return err
		})
		took := waitJobCount(b, ns, "bench=plain", total).Sub(start)
		waitPodCount(b, ns, total)
		return took
	}
	var created samples
	controllerSide := func() time.Duration {
		ns := newNamespace(b, "fanout-ctrl")
		defer deleteNamespace(b, ns)
		start := time.Now()
		createJobSets(b, ns, jobsets, perJobSet)
		// No Job of the last JobSet can exist before it does: the
		// controller's time has this floor.
		created.add(time.Since(start))
		took := waitJobCount(b, ns, v1alpha2.JobSetNameKey, total).Sub(start)
		waitPodCount(b, ns, total)
		return took
	}
	var plain, ctrl samples
	for i := 0; i < b.N; i++ {
		p1 := plainSide()
		c1 := controllerSide()
		c2 := controllerSide()
		p2 := plainSide()
		b.Logf("op %d (%d Jobs): plain client %.2fs then %.2fs, controller %.2fs then %.2fs",
			i, total, p1.Seconds(), p2.Seconds(), c1.Seconds(), c2.Seconds())
		plain.add(p1, p2)
		ctrl.add(c1, c2)
	}
	b.ReportMetric(plain.mean(), "plain-s")
	b.ReportMetric(ctrl.mean(), "controller-s")
	b.ReportMetric(plain.mean()/ctrl.mean(), "controller/plain")
	b.ReportMetric(created.mean(), "jobsets-created-s")
	b.ReportMetric(controllerRSSMiB(b), "controller-RSS-MiB")
	b.Logf("plain %s; controller %s; the last JobSet existed after %s", plain, ctrl, created)
}
