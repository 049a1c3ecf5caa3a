package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
			return podsPerJob(ctx, ns, "elastic", "workers", 2, want)
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
