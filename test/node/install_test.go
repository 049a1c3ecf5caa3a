package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nativejobset/jobset/test/localcluster"
)

// The install serves the API: kubectl get, apply and scale work through the
// aggregator, the Service and kube-proxy to the pod.
func TestInstalledAPIWithKubectl(t *testing.T) {
	ns := cluster.Namespace(t, "kubectl")
	apply(t, ns, sleeperJobSet("kubectl-js", 1))
	if out := kubectl(t, "-n", ns, "get", "jobsets"); !strings.Contains(out, "kubectl-js") {
		t.Fatalf("kubectl get jobsets does not list kubectl-js:\n%s", out)
	}
	if out := kubectl(t, "-n", ns, "get", "rj"); !strings.Contains(out, "kubectl-js.workers") {
		t.Fatalf("kubectl get rj does not list kubectl-js.workers:\n%s", out)
	}
	kubectl(t, "-n", ns, "scale", "replicatedjob/kubectl-js.workers", "--replicas=2")
	eventually(t, 2*time.Minute, "two running containers after scaling to 2", func(ctx context.Context) (bool, error) {
		pods, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=kubectl-js"})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 2, nil
	})
}

// Deleting the API server pod: the StatefulSet brings it back on the same
// volume, with every JobSet.
func TestAPIServerPodRestartKeepsJobSets(t *testing.T) {
	ns := cluster.Namespace(t, "apiserver-restart")
	const n = 5
	for i := 0; i < n; i++ {
		apply(t, ns, sleeperJobSet(fmt.Sprintf("keep-%d", i), 1))
	}
	ctx := context.Background()
	old, err := cluster.Kube.CoreV1().Pods(localcluster.SystemNamespace).Get(ctx, "jobset-apiserver-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, "-n", localcluster.SystemNamespace, "delete", "pod", "jobset-apiserver-0", "--wait=false")
	eventually(t, 3*time.Minute, "a new jobset-apiserver-0 Ready and the APIService Available", func(ctx context.Context) (bool, error) {
		p, err := cluster.Kube.CoreV1().Pods(localcluster.SystemNamespace).Get(ctx, "jobset-apiserver-0", metav1.GetOptions{})
		if err != nil || p.UID == old.UID || !podReady(p) {
			return false, nil
		}
		return cluster.APIServiceAvailable(), nil
	})
	list, err := cluster.JobSets.JobsetV1alpha2().JobSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != n {
		t.Fatalf("after the API server pod's restart %d JobSets are left, want %d", len(list.Items), n)
	}
}

// Deleting the leader controller pod: another replica takes the Lease and
// goes on reconciling.
func TestControllerLeaderFailover(t *testing.T) {
	ctx := context.Background()
	lease, err := cluster.Kube.CoordinationV1().Leases(localcluster.SystemNamespace).Get(ctx, "jobset-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil {
		t.Fatal("the jobset-controller Lease has no holder")
	}
	leader := strings.SplitN(*lease.Spec.HolderIdentity, "_", 2)[0]
	pods, err := cluster.Kube.CoreV1().Pods(localcluster.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=jobset-controller"})
	if err != nil {
		t.Fatal(err)
	}
	var standby string
	for _, p := range pods.Items {
		if p.Name != leader && p.DeletionTimestamp == nil {
			standby = p.Name
		}
	}
	if standby == "" {
		t.Fatalf("no standby beside leader %s among %d controller pods", leader, len(pods.Items))
	}
	kubectl(t, "-n", localcluster.SystemNamespace, "delete", "pod", leader, "--wait=false")
	// The leader releases the Lease as it stops; whichever replica asks
	// first takes it: the standby, or the leader's replacement.
	var holder string
	eventually(t, 2*time.Minute, "another controller pod holding the Lease", func(ctx context.Context) (bool, error) {
		l, err := cluster.Kube.CoordinationV1().Leases(localcluster.SystemNamespace).Get(ctx, "jobset-controller", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || strings.HasPrefix(*l.Spec.HolderIdentity, leader+"_") {
			return false, nil
		}
		holder = strings.SplitN(*l.Spec.HolderIdentity, "_", 2)[0]
		return true, nil
	})
	t.Logf("leader %s deleted; %s took over (standby was %s)", leader, holder, standby)
	// The new leader reconciles: a new JobSet gets its Job.
	ns := cluster.Namespace(t, "failover")
	apply(t, ns, sleeperJobSet("after-failover", 1))
	eventually(t, 2*time.Minute, "the Job of a JobSet created after the failover", func(ctx context.Context) (bool, error) {
		_, err := cluster.Kube.BatchV1().Jobs(ns).Get(ctx, "after-failover-workers-0", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	eventually(t, 3*time.Minute, "two controller replicas available again", func(ctx context.Context) (bool, error) {
		d, err := cluster.Kube.AppsV1().Deployments(localcluster.SystemNamespace).Get(ctx, "jobset-controller", metav1.GetOptions{})
		return err == nil && deploymentAvailable(d, 2), nil
	})
}

func deploymentAvailable(d *appsv1.Deployment, n int32) bool {
	return d.Status.AvailableReplicas >= n
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// sleeperJobSet is a JobSet of replicas Jobs whose one pod sleeps on the
// real node until deleted.
func sleeperJobSet(name string, replicas int) string {
	return fmt.Sprintf(`apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: %s
spec:
  replicatedJobs:
  - name: workers
    replicas: %d
    template:
      spec:
        completionMode: Indexed
        parallelism: 1
        completions: 1
        template:
          spec:
            restartPolicy: Never
            terminationGracePeriodSeconds: 1%s
            containers:
            - name: sleep
              image: %s
              imagePullPolicy: Never
              command: ["sleep", "3600"]
`, name, replicas, onRealNode, busyboxImage)
}
