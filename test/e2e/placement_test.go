package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// Label keys of the placement tests' own topologies (see labelPools).
const (
	poolsKey   = "e2e.jobset.x-k8s.io/pools"
	queueKey   = "e2e.jobset.x-k8s.io/queue-pools"
	restartKey = "e2e.jobset.x-k8s.io/restart-pools"
	repairKey  = "e2e.jobset.x-k8s.io/repair-pools"
)

// 4 Jobs × 4 pods on 8 pools of 2 nodes: every Job runs in one pool of
// its own, chosen by the scheduler, and no pod passed a webhook.
func TestExclusivePlacementOnPools(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	labelPools(t, poolsKey, 0, 16)
	createJobSet(t, exclusiveJobSet(ns, "pools", poolsKey, replicatedJob("w", 4, 4, "")))
	waitExclusive(t, ns, poolsKey, []string{"pools"}, jobNames("pools", "w", 4), 4, 90*time.Second)

	pods, err := podsOf(context.Background(), ns, "pools")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Annotations[v1alpha2.ExclusiveKey] != poolsKey {
			t.Errorf("pod %s lacks the exclusive-topology annotation: %v", p.Name, p.Annotations)
		}
		if hasGate(&p) {
			t.Errorf("pod %s still gated", p.Name)
		}
	}
	js := getJobSet(t, ns, "pools")
	if c := meta.FindStatusCondition(js.Status.Conditions, "TopologyPlacementPending"); c != nil && c.Status == metav1.ConditionTrue {
		t.Errorf("placement condition still true: %+v", c)
	}
}

// Two exclusive JobSets want 4 domains, 2 exist: the second waits, without
// touching its pods, and runs once the first finished.
func TestExclusivePlacementQueues(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	labelPools(t, queueKey, 0, 4)
	createJobSet(t, exclusiveJobSet(ns, "first", queueKey, replicatedJob("w", 2, 2, "25s")))
	waitExclusive(t, ns, queueKey, []string{"first"}, jobNames("first", "w", 2), 2, 90*time.Second)

	createJobSet(t, exclusiveJobSet(ns, "second", queueKey, replicatedJob("w", 2, 2, "")))
	waitStatus(t, ns, "second", "waiting for a topology domain", time.Minute, func(js *v1alpha2.JobSet) bool {
		c := meta.FindStatusCondition(js.Status.Conditions, "TopologyPlacementPending")
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "WaitingForTopologyDomain"
	})
	waitEvent(t, ns, "second", "WaitingForTopologyDomain")

	// While the first runs, the second's pods stay gated and unchanged:
	// the controller waits for an event, it does not retry in a loop.
	var snapshot map[string]string
	eventually(t, time.Minute, "4 gated pods of the second JobSet", func(ctx context.Context) (bool, error) {
		snapshot = map[string]string{}
		pods, err := podsOf(ctx, ns, "second")
		if err != nil {
			return false, nil
		}
		for _, p := range pods {
			if !hasGate(&p) {
				return false, fmt.Errorf("pod %s released while no domain is free", p.Name)
			}
			snapshot[p.Name] = p.ResourceVersion
		}
		return len(snapshot) == 4, nil
	})
	polls := 0
	eventually(t, 2*time.Minute, "the first JobSet to complete", func(ctx context.Context) (bool, error) {
		js, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Get(ctx, "first", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if meta.IsStatusConditionTrue(js.Status.Conditions, string(v1alpha2.JobSetCompleted)) {
			return true, nil
		}
		pods, err := podsOf(ctx, ns, "second")
		if err != nil {
			return false, nil
		}
		// Once the first JobSet's pods end, the second may move on; until
		// then nothing may have written its pods.
		first, err := podsOf(ctx, ns, "first")
		if err != nil || !allRunning(first, 4) {
			return false, nil
		}
		polls++
		for _, p := range pods {
			if rv, ok := snapshot[p.Name]; !ok || rv != p.ResourceVersion {
				return false, fmt.Errorf("pod %s was written while the JobSet waited (resourceVersion %s → %s)", p.Name, rv, p.ResourceVersion)
			}
		}
		return false, nil
	})
	if polls == 0 {
		t.Fatal("the second JobSet's pods were never checked while the first ran")
	}
	waitExclusive(t, ns, queueKey, []string{"second"}, jobNames("second", "w", 2), 2, 90*time.Second)
	waitStatus(t, ns, "second", "placement condition false", time.Minute, func(js *v1alpha2.JobSet) bool {
		c := meta.FindStatusCondition(js.Status.Conditions, "TopologyPlacementPending")
		return c != nil && c.Status == metav1.ConditionFalse
	})
	r, err := eventReasons(context.Background(), ns, "second")
	if err != nil {
		t.Fatal(err)
	}
	if r["WaitingForTopologyDomain"] > 2 {
		t.Errorf("%d WaitingForTopologyDomain events; the wait should be reported once", r["WaitingForTopologyDomain"])
	}
}

func allRunning(pods []corev1.Pod, n int) bool {
	running := 0
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning {
			running++
		}
	}
	return running == n
}

// A failure restart replaces the Jobs; the new Jobs are placed again.
func TestExclusivePlacementAfterRestart(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	labelPools(t, restartKey, 4, 8)
	js := exclusiveJobSet(ns, "restart", restartKey, replicatedJob("w", 2, 2, ""))
	js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 1}
	createJobSet(t, js)
	names := jobNames("restart", "w", 2)
	before := waitExclusive(t, ns, restartKey, []string{"restart"}, names, 2, 90*time.Second)
	t.Logf("attempt 0 domains: %v", before.recorded)

	failPodWithCode(t, ns, "restart-w-1", otherExitCode)
	waitJobs(t, ns, "restart", 2, "1")
	pl := waitExclusive(t, ns, restartKey, []string{"restart"}, names, 2, 90*time.Second)
	jobs, err := childJobs(context.Background(), ns, "restart")
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Labels[v1alpha2.RestartsKey] != "1" {
			t.Errorf("Job %s of attempt %s still there", j.Name, j.Labels[v1alpha2.RestartsKey])
		}
	}
	t.Logf("attempt 1 domains: %v", pl.recorded)
}

// A node moved to another domain under a running Job: its pods there are
// deleted with a DisruptionTarget condition and come back in the Job's
// domain.
func TestExclusivePlacementRepair(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	labelPools(t, repairKey, 10, 6)
	createJobSet(t, exclusiveJobSet(ns, "repair", repairKey, ignoreDisruptions(replicatedJob("w", 1, 1, ""))))
	pl := waitExclusive(t, ns, repairKey, []string{"repair"}, []string{"repair-w-0"}, 1, 90*time.Second)
	domain := pl.recorded["repair-w-0"]

	pods, err := podsOf(context.Background(), ns, "repair")
	if err != nil || len(pods) != 1 {
		t.Fatalf("pods: %v %d", err, len(pods))
	}
	moved := pods[0]
	setNodeLabel(t, moved.Spec.NodeName, repairKey, "elsewhere")

	eventually(t, time.Minute, "the misplaced pod to be replaced in "+domain, func(ctx context.Context) (bool, error) {
		now, err := observePlacement(ctx, ns, repairKey, "repair")
		if err != nil {
			return false, nil
		}
		return now.exclusive([]string{"repair-w-0"}, 1) == "" && now.recorded["repair-w-0"] == domain, nil
	})
	eventually(t, time.Minute, "the replacement to be a new pod", func(ctx context.Context) (bool, error) {
		pods, err := podsOf(ctx, ns, "repair")
		return err == nil && len(pods) == 1 && pods[0].UID != moved.UID && pods[0].Spec.NodeName != moved.Spec.NodeName, nil
	})
	eventually(t, time.Minute, "an ExclusivePlacementViolation event on the Job", func(ctx context.Context) (bool, error) {
		list, err := cluster.kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=repair-w-0"})
		if err != nil {
			return false, nil
		}
		for _, e := range list.Items {
			if e.Reason == "ExclusivePlacementViolation" {
				return true, nil
			}
		}
		return false, nil
	})
	job := getJob(context.Background(), ns, "repair-w-0")
	if job == nil || job.Status.Failed != 0 {
		t.Fatalf("the repair counted as a failure of the Job: %+v", job)
	}
}

// The node-selector strategy: pods select nodes labelled for their Job
// ahead of time and tolerate their taint; no gate is involved.
func TestExclusivePlacementNodeSelectorStrategy(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	js := runningJobSet(ns, "pinned", replicatedJob("w", 1, 2, ""))
	js.Annotations = map[string]string{
		v1alpha2.ExclusiveKey:            "cloud.google.com/gke-nodepool",
		v1alpha2.NodeSelectorStrategyKey: "true",
	}
	value := ns + "_pinned-w-0"
	nodes := []string{"kwok-node-6", "kwok-node-7"}
	for _, n := range nodes {
		setNodeLabel(t, n, v1alpha2.NamespacedJobKey, value)
		t.Cleanup(func() { removeNodeLabel(n, v1alpha2.NamespacedJobKey) })
	}
	createJobSet(t, js)
	var pods []corev1.Pod
	eventually(t, 90*time.Second, "2 running pods on the labelled nodes", func(ctx context.Context) (bool, error) {
		var err error
		pods, err = podsOf(ctx, ns, "pinned")
		return err == nil && allRunning(pods, 2) && len(pods) == 2, nil
	})
	for _, p := range pods {
		if p.Spec.NodeName != nodes[0] && p.Spec.NodeName != nodes[1] {
			t.Errorf("pod %s runs on %s, not on a node labelled %s", p.Name, p.Spec.NodeName, value)
		}
		if p.Spec.NodeSelector[v1alpha2.NamespacedJobKey] != value {
			t.Errorf("pod %s nodeSelector %v", p.Name, p.Spec.NodeSelector)
		}
		tolerates := false
		for _, tol := range p.Spec.Tolerations {
			tolerates = tolerates || (tol.Key == v1alpha2.NoScheduleTaintKey && tol.Effect == corev1.TaintEffectNoSchedule)
		}
		if !tolerates {
			t.Errorf("pod %s does not tolerate %s: %v", p.Name, v1alpha2.NoScheduleTaintKey, p.Spec.Tolerations)
		}
		if hasGate(&p) || p.Labels[v1alpha2.ExclusivePlacementLabel] != "" {
			t.Errorf("pod %s went through the placer: gates %v labels %v", p.Name, p.Spec.SchedulingGates, p.Labels)
		}
	}
}

// Placement needs no admission webhook: the deployment manifests define
// none, and no webhook of the running cluster intercepts pods.
func TestNoWebhooksInDeployment(t *testing.T) {
	t.Parallel()
	kind := regexp.MustCompile(`(?m)^kind:\s*(\S+)`)
	checked := 0
	for _, dir := range []string{"artifacts/deploy", "artifacts/local"} {
		err := filepath.Walk(filepath.Join(cluster.root, dir), func(path string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			checked++
			for _, m := range kind.FindAllStringSubmatch(string(data), -1) {
				if strings.HasSuffix(m[1], "WebhookConfiguration") {
					t.Errorf("%s defines a %s", path, m[1])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked == 0 {
		t.Fatal("no manifests found")
	}
	ctx := context.Background()
	mut, err := cluster.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range mut.Items {
		for _, w := range c.Webhooks {
			if interceptsPods(w.Rules) {
				t.Errorf("mutating webhook %s/%s intercepts pods", c.Name, w.Name)
			}
		}
	}
	val, err := cluster.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range val.Items {
		for _, w := range c.Webhooks {
			if interceptsPods(w.Rules) {
				t.Errorf("validating webhook %s/%s intercepts pods", c.Name, w.Name)
			}
		}
	}
}

// interceptsPods reports whether webhook rules match pods.
func interceptsPods(rules []admissionregistrationv1.RuleWithOperations) bool {
	for _, r := range rules {
		for _, res := range r.Resources {
			if res == "pods" || res == "*" {
				return true
			}
		}
	}
	return false
}
