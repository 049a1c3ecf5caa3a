package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const jobsetCountQuota = "count/jobsets.jobset.x-k8s.io"

// suspendedJobSet is a small JobSet manifest for kubectl; suspended, so it
// costs no Jobs.
func suspendedJobSet(name string) string {
	return fmt.Sprintf(`apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: %s
spec:
  suspend: true
  replicatedJobs:
  - name: workers
    template:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: main
              image: registry.k8s.io/pause:3.10
`, name)
}

// quotaUsage reads "used" and "hard" of count/jobsets.jobset.x-k8s.io from
// `kubectl describe quota`, empty when the line is not there yet.
func quotaUsage(t *testing.T, ns, name string) (used, hard string) {
	t.Helper()
	out := kubectl(t, "describe", "quota", name, "-n", ns)
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == jobsetCountQuota {
			return f[1], f[2]
		}
	}
	return "", ""
}

// A ResourceQuota on count/jobsets.jobset.x-k8s.io limits JobSets as it did
// under the CRD: jobset-apiserver runs the ResourceQuota admission plugin
// against the cluster's quotas, and kube-controller-manager's quota
// controller counts the JobSets.
func TestResourceQuotaLimitsJobSets(t *testing.T) {
	ns := namespace(t)
	createQuota := func() { kubectl(t, "create", "quota", "jobsets", "-n", ns, "--hard="+jobsetCountQuota+"=2") }
	createQuota()

	// kube-controller-manager counts a quota when it is created, but only
	// the resources it has discovered by then: it looks for new aggregated
	// resources every 30 s, and a quota it saw before finding jobsets would
	// wait for the full resync (5 minutes), in a fresh cluster as for any new
	// CRD. Such a quota is created again.
	eventually(t, 3*time.Minute, "kube-controller-manager to count JobSets in the quota", func(ctx context.Context) (bool, error) {
		q, err := cluster.kube.CoreV1().ResourceQuotas(ns).Get(ctx, "jobsets", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if _, counted := q.Status.Used[jobsetCountQuota]; counted {
			return true, nil
		}
		if _, seen := q.Status.Hard[jobsetCountQuota]; seen {
			kubectl(t, "delete", "quota", "jobsets", "-n", ns, "--wait=true")
			createQuota()
		}
		return false, nil
	})

	// Creates are refused ("status unknown for quota") until
	// jobset-apiserver's informer has seen the count too. A server-side dry
	// run goes through admission without charging the quota.
	eventually(t, time.Minute, "jobset-apiserver to see the quota counted", func(ctx context.Context) (bool, error) {
		out, err := kubectlIn(suspendedJobSet("first"), "create", "--dry-run=server", "-n", ns, "-f", "-")
		if err != nil && !strings.Contains(out, "status unknown for quota") {
			return false, fmt.Errorf("dry-run create: %v\n%s", err, out)
		}
		return err == nil, nil
	})
	if used, hard := quotaUsage(t, ns, "jobsets"); used != "0" || hard != "2" {
		t.Fatalf("kubectl describe quota before any JobSet: %s/%s, want 0/2", used, hard)
	}

	for _, name := range []string{"first", "second"} {
		if out, err := kubectlIn(suspendedJobSet(name), "create", "-n", ns, "-f", "-"); err != nil {
			t.Fatalf("creating JobSet %s within the quota: %v\n%s", name, err, out)
		}
	}
	out, err := kubectlIn(suspendedJobSet("third"), "create", "-n", ns, "-f", "-")
	if err == nil {
		t.Fatalf("the third JobSet was created in a quota of 2:\n%s", out)
	}
	want := "exceeded quota: jobsets, requested: " + jobsetCountQuota + "=1, used: " + jobsetCountQuota + "=2, limited: " + jobsetCountQuota + "=2"
	if !strings.Contains(out, "Error from server (Forbidden)") || !strings.Contains(out, want) {
		t.Errorf("third create: want a Forbidden error containing %q, got:\n%s", want, out)
	}
	// The same refusal is a 403 to any client.
	_, err = cluster.jobsets.JobsetV1alpha2().JobSets(ns).Create(context.Background(), simpleJobSet(ns, "third"), metav1.CreateOptions{})
	if status, ok := err.(apierrors.APIStatus); !ok || status.Status().Code != http.StatusForbidden || !strings.Contains(err.Error(), "exceeded quota") {
		t.Errorf("third create through client-go: want 403 exceeded quota, got %v", err)
	}
	if _, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Get(context.Background(), "third", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get of the refused JobSet: %v, want NotFound", err)
	}

	eventually(t, 2*time.Minute, "kubectl describe quota to show 2/2", func(ctx context.Context) (bool, error) {
		used, hard := quotaUsage(t, ns, "jobsets")
		return used == "2" && hard == "2", nil
	})

	// Deleting one frees its place once kube-controller-manager has seen
	// the deletion; until then creates are refused for the quota only.
	kubectl(t, "delete", "jobset", "first", "-n", ns, "--wait=true", "--timeout=60s")
	eventually(t, 2*time.Minute, "a new JobSet to be admitted after a deletion", func(ctx context.Context) (bool, error) {
		out, err := kubectlIn(suspendedJobSet("fourth"), "create", "-n", ns, "-f", "-")
		if err == nil {
			return true, nil
		}
		if !strings.Contains(out, "exceeded quota") {
			return false, fmt.Errorf("create after a deletion failed for another reason: %v\n%s", err, out)
		}
		return false, nil
	})
	if out, err := kubectlIn(suspendedJobSet("fifth"), "create", "-n", ns, "-f", "-"); err == nil || !strings.Contains(out, "exceeded quota") {
		t.Errorf("a third JobSet after the replacement: want exceeded quota, got err=%v\n%s", err, out)
	}
	got := strings.Fields(kubectl(t, "get", "jobsets", "-n", ns, "-o", "jsonpath={.items[*].metadata.name}"))
	if strings.Join(got, ",") != "fourth,second" {
		t.Errorf("JobSets in the namespace: %v, want [fourth second]", got)
	}
}
