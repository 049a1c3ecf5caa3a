package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/test/localcluster"
)

// TestNamespaceDeletionWithEveryAPIServerDown deletes namespaces while no
// jobset-apiserver replica runs. kube-controller-manager cannot list the
// JobSets, so the namespaces stay Terminating with a condition saying why
// (a namespace without JobSets too: the namespace controller cannot know
// that it has none), while writes of other resources go on. Once the
// replicas are started again, the deletions complete and the JobSets and
// their Jobs are gone.
func TestNamespaceDeletionWithEveryAPIServerDown(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "outage")
	empty := namespace(t, "outage-empty")
	other := namespace(t, "outage-other")
	const jobsets = 3
	for i := 0; i < jobsets; i++ {
		if _, err := cl.JobSets.JobsetV1alpha2().JobSets(ns).Create(ctx, jobSet(ns, fmt.Sprintf("js-%d", i), 2, 1), metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating JobSet js-%d: %v", i, err)
		}
	}
	eventually(t, 2*time.Minute, "the JobSets' 6 Jobs", func(ctx context.Context) (bool, error) {
		jobs, err := cl.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(jobs.Items) == 2*jobsets, nil
	})

	kcmLog := filepath.Join(cl.LocalDir, "logs", "kube-controller-manager.log")
	logFrom := fileSize(kcmLog)
	t.Cleanup(func() { revive(t, "after "+t.Name()) })
	for _, name := range apiservers {
		p := kill(t, name)
		t.Logf("killed %s (pid %d)", name, p.PID)
	}
	eventually(t, time.Minute, "kube-apiserver to answer 503 for JobSets", func(ctx context.Context) (bool, error) {
		_, err := cl.JobSets.JobsetV1alpha2().JobSets(ns).List(ctx, metav1.ListOptions{})
		return apierrors.IsServiceUnavailable(err), nil
	})
	out, err := cl.Kubectl("", "get", "jobsets", "-n", ns)
	if err == nil {
		t.Errorf("kubectl get jobsets with every replica down succeeded:\n%s", out)
	}
	t.Logf("kubectl get jobsets with every replica down: %s", strings.TrimSpace(out))

	var available string
	eventually(t, 2*time.Minute, "the APIService to be unavailable", func(context.Context) (bool, error) {
		out, err := cl.Kubectl("", "get", "apiservice", "v1alpha2.jobset.x-k8s.io",
			"-o", `jsonpath={range .status.conditions[?(@.type=="Available")]}{.status} {.reason}: {.message}{end}`)
		available = out
		return err == nil && strings.HasPrefix(out, "False "), nil
	})
	t.Logf("APIService Available: %s", available)

	for _, n := range []string{ns, empty} {
		if err := cl.Kube.CoreV1().Namespaces().Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting namespace %s: %v", n, err)
		}
	}
	for _, n := range []string{ns, empty} {
		var cond corev1.NamespaceCondition
		var last []corev1.NamespaceCondition
		err := waitPoll(3*time.Minute, func(ctx context.Context) (bool, error) {
			got, err := cl.Kube.CoreV1().Namespaces().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, fmt.Errorf("namespace %s while jobset-apiserver is down: %w", n, err)
			}
			if got.Status.Phase != corev1.NamespaceTerminating {
				return false, fmt.Errorf("namespace %s is %s, want Terminating", n, got.Status.Phase)
			}
			last = got.Status.Conditions
			for _, c := range last {
				if c.Type == corev1.NamespaceDeletionDiscoveryFailure && c.Status == corev1.ConditionTrue {
					cond = c
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("namespace %s with every jobset-apiserver down: %v; want Terminating with %s=True; its conditions: %+v",
				n, err, corev1.NamespaceDeletionDiscoveryFailure, last)
		}
		if !strings.Contains(cond.Message, "jobset.x-k8s.io/v1alpha2") {
			t.Errorf("namespace %s: %s %s %q does not name jobset.x-k8s.io/v1alpha2", n, cond.Type, cond.Reason, cond.Message)
		}
		t.Logf("namespace %s: %s=%s %s: %s", n, cond.Type, cond.Status, cond.Reason, cond.Message)
	}

	// Other resources' writes are not blocked.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "written-during-outage"}, Data: map[string]string{"k": "v"}}
	if _, err := cl.Kube.CoreV1().ConfigMaps(other).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Errorf("creating a ConfigMap with every jobset-apiserver down: %v", err)
	}
	job := localcluster.ProbeJob("written-during-outage", nil)
	job.Spec.Suspend = ptr.To(true)
	if _, err := cl.Kube.BatchV1().Jobs(other).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Errorf("creating a Job with every jobset-apiserver down: %v", err)
	}
	if err := cl.Kube.CoreV1().ConfigMaps(other).Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting a ConfigMap with every jobset-apiserver down: %v", err)
	}
	for _, n := range []string{ns, empty} {
		if _, err := cl.Kube.CoreV1().Namespaces().Get(ctx, n, metav1.GetOptions{}); err != nil {
			t.Fatalf("namespace %s after the writes, with jobset-apiserver still down: %v; want it still Terminating", n, err)
		}
	}
	if jobs, err := cl.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{}); err == nil {
		t.Logf("%d of the JobSets' %d Jobs left in the Terminating namespace while jobset-apiserver is down", len(jobs.Items), 2*jobsets)
	}
	logKCM(t, kcmLog, logFrom)

	started := revive(t, "started again by "+t.Name())
	t.Logf("started %v", started)
	for _, n := range []string{ns, empty} {
		eventually(t, 3*time.Minute, "namespace "+n+" to be gone", func(ctx context.Context) (bool, error) {
			_, err := cl.Kube.CoreV1().Namespaces().Get(ctx, n, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
	all, err := cl.JobSets.JobsetV1alpha2().JobSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing JobSets in every namespace: %v", err)
	}
	for _, js := range all.Items {
		if js.Namespace == ns {
			t.Errorf("JobSet %s/%s outlived its namespace", js.Namespace, js.Name)
		}
	}
	jobs, err := cl.Kube.BatchV1().Jobs(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing Jobs in every namespace: %v", err)
	}
	for _, j := range jobs.Items {
		if j.Namespace == ns {
			t.Errorf("Job %s/%s outlived its namespace", j.Namespace, j.Name)
		}
	}
	if _, err := cl.Kube.BatchV1().Jobs(other).Get(ctx, job.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the Job written during the outage: %v", err)
	}
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// logKCM logs one line of each kind kube-controller-manager wrote about the
// JobSet API since offset (what an operator finds there during an outage).
func logKCM(t *testing.T, path string, offset int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil || int64(len(data)) < offset {
		t.Logf("reading %s: %v", path, err)
		return
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(data[offset:]), "\n") {
		if !strings.Contains(line, "jobset.x-k8s.io") {
			continue
		}
		// klog's header: "E1202 18:33:39.763051   22173 file.go:365] ..."
		f := strings.Fields(line)
		if len(f) < 4 || seen[f[3]] {
			continue
		}
		seen[f[3]] = true
		if len(line) > 400 {
			line = line[:400] + "..."
		}
		t.Logf("kube-controller-manager: %s", line)
	}
	if len(seen) == 0 {
		t.Logf("kube-controller-manager logged nothing about jobset.x-k8s.io")
	}
}
