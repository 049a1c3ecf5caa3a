package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// kubectl scale on a replicatedJob changes the pods per child Job of a
// running JobSet, up and back down.
func TestKubectlScaleReplicatedJob(t *testing.T) {
	ns := namespace(t)
	createJobSet(t, &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "elastic", Namespace: ns},
		Spec:       v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{replicatedJob("workers", 2, 2, "")}},
	})
	waitJobs(t, ns, "elastic", 2, "0")

	for _, want := range []int32{6, 2} {
		kubectl(t, "scale", "-n", ns, "replicatedjob/elastic.workers", fmt.Sprintf("--replicas=%d", want))
		eventually(t, 2*time.Minute, fmt.Sprintf("%d running pods in each child Job", want), func(ctx context.Context) (bool, error) {
			jobs, err := childJobs(ctx, ns, "elastic")
			if err != nil || len(jobs) != 2 {
				return false, nil
			}
			for _, j := range jobs {
				if ptr.Deref(j.Spec.Parallelism, 0) != want || ptr.Deref(j.Spec.Completions, 0) != want {
					return false, nil
				}
				pods, err := cluster.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + j.Name})
				if err != nil {
					return false, nil
				}
				running := 0
				for _, p := range pods.Items {
					if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
						running++
					}
				}
				if running != int(want) {
					return false, nil
				}
			}
			return true, nil
		})
		out := kubectl(t, "get", "rj", "elastic.workers", "-n", ns, "--no-headers", "-o", "custom-columns=P:.spec.parallelism")
		if strings.TrimSpace(out) != fmt.Sprint(want) {
			t.Errorf("kubectl get rj parallelism = %q, want %d", out, want)
		}
	}

	// Scaling to zero is refused with a pointer to suspend.
	out, err := kubectlErr("scale", "-n", ns, "replicatedjob/elastic.workers", "--replicas=0")
	if err == nil || !strings.Contains(out, "suspend") {
		t.Errorf("scale to 0: err=%v output=%s, want a refusal that mentions suspend", err, out)
	}
}
