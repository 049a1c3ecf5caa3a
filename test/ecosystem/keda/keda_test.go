package keda

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// The example the tests apply, and the names in it.
const (
	example      = "artifacts/examples/autoscaling/keda-workload.yaml"
	jobSetName   = "keda-demo"
	scaledObject = "keda-demo-workers"
	pendingLabel = "keda-demo.example.com/work"
)

var scaledObjects = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}

// KEDA's kubernetes-workload scaler counts the pods labelled
// keda-demo.example.com/work=pending; with value 1, KEDA's HPA asks for one
// worker pod per child Job for each of them. The ReplicatedJob
// keda-demo.workers follows 2 -> 6 -> 2 through replicatedjobs/scale, in the
// JobSet and in both of its running child Jobs, while the replicatedJob
// driver keeps its one Job untouched.
func TestKEDAScalesReplicatedJob(t *testing.T) {
	ns := namespace(t)
	for i := 0; i < 2; i++ {
		createPending(t, ns, i)
	}
	kubectl(t, "apply", "-n", ns, "-f", filepath.Join(stack.Root, example))

	waitReady(t, ns)
	waitWorkers(t, ns, 2)
	driver := driverJob(t, ns)
	start := time.Now()

	for i := 2; i < 6; i++ {
		createPending(t, ns, i)
	}
	waitWorkers(t, ns, 6)
	t.Logf("workers at 6 pods per Job %s after 4 more pending pods", time.Since(start).Round(time.Second))
	checkDriver(t, ns, driver)

	start = time.Now()
	for i := 2; i < 6; i++ {
		kubectl(t, "delete", "pod", "-n", ns, fmt.Sprintf("pending-%d", i), "--grace-period=0", "--force")
	}
	waitWorkers(t, ns, 2)
	t.Logf("workers at 2 pods per Job %s after 4 pending pods went away", time.Since(start).Round(time.Second))
	checkDriver(t, ns, driver)

	// KEDA drove the scale through the HPA it manages for the ScaledObject.
	hpa, err := stack.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "keda-hpa-"+scaledObject, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("KEDA's HPA: %v", err)
	}
	if ref := hpa.Spec.ScaleTargetRef; ref.APIVersion != "jobset.x-k8s.io/v1alpha2" || ref.Kind != "ReplicatedJob" || ref.Name != jobSetName+".workers" {
		t.Errorf("KEDA's HPA targets %+v, want ReplicatedJob %s.workers", ref, jobSetName)
	}
	if hpa.Status.LastScaleTime == nil {
		t.Errorf("KEDA's HPA never scaled")
	}
}

// With minReplicaCount 0 (KEDA's default) and no pending pod, KEDA tries to
// deactivate the target by scaling it to 0. The replicatedJob refuses, and
// KEDA reports the server's reason on the ScaledObject (Ready=False,
// ErrorScalingTarget) and in a Warning event; the JobSet never runs Jobs of
// zero pods, and KEDA's HPA (whose minimum is 1) keeps one pod per Job.
func TestKEDAMinReplicaCountZeroRefused(t *testing.T) {
	ns := namespace(t)
	kubectl(t, "apply", "-n", ns, "-f", filepath.Join(stack.Root, example))
	waitReady(t, ns)
	kubectl(t, "patch", "scaledobject", scaledObject, "-n", ns, "--type=merge", "-p", `{"spec":{"minReplicaCount":0}}`)

	const reason = "must be at least 1"
	var last string
	eventually(t, 3*time.Minute, "ScaledObject Ready=False with the server's reason", func(ctx context.Context) (bool, error) {
		status, condReason, msg := readyCondition(ctx, ns)
		last = fmt.Sprintf("Ready=%s reason=%s message=%q", status, condReason, msg)
		return status == "False" && condReason == "ErrorScalingTarget" && strings.Contains(msg, reason), nil
	})
	t.Logf("ScaledObject: %s", last)

	eventually(t, time.Minute, "a Warning event with the server's reason", func(ctx context.Context) (bool, error) {
		events, err := stack.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == scaledObject && e.Type == corev1.EventTypeWarning &&
				e.Reason == "KEDAScaleTargetDeactivationFailed" && strings.Contains(e.Message, reason) {
				return true, nil
			}
		}
		return false, nil
	})

	// The HPA holds its minimum of one pod per Job; zero was never written.
	waitWorkers(t, ns, 1)
	js, err := stack.JobSets.JobsetV1alpha2().JobSets(ns).Get(context.Background(), jobSetName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting JobSet: %v", err)
	}
	if js.Spec.Suspend != nil && *js.Spec.Suspend {
		t.Errorf("JobSet suspended, want running")
	}
}

// createPending creates one pod that the ScaledObject's trigger counts.
func createPending(t *testing.T, ns string, i int) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pending-%d", i), Labels: map[string]string{pendingLabel: "pending"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "item", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	if _, err := stack.Kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s: %v", pod.Name, err)
	}
}

// readyCondition returns the ScaledObject's Ready condition.
func readyCondition(ctx context.Context, ns string) (status, reason, message string) {
	so, err := dyn.Resource(scaledObjects).Namespace(ns).Get(ctx, scaledObject, metav1.GetOptions{})
	if err != nil {
		return "", "", err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(so.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		s, _ := m["status"].(string)
		r, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		return s, r, msg
	}
	return "", "", "no Ready condition"
}

// waitReady waits until KEDA has taken the ScaledObject on: Ready=True and
// the target's kind recorded in its status.
func waitReady(t *testing.T, ns string) {
	t.Helper()
	var last string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ScaledObject %s", last)
		}
	})
	eventually(t, 2*time.Minute, "ScaledObject Ready", func(ctx context.Context) (bool, error) {
		status, reason, msg := readyCondition(ctx, ns)
		last = fmt.Sprintf("Ready=%s reason=%s message=%q", status, reason, msg)
		so, err := dyn.Resource(scaledObjects).Namespace(ns).Get(ctx, scaledObject, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		kind, _, _ := unstructured.NestedString(so.Object, "status", "scaleTargetKind")
		return status == "True" && kind == "jobset.x-k8s.io/v1alpha2.ReplicatedJob", nil
	})
}

// waitWorkers waits until the replicatedJob workers runs `want` pods in each
// of its two child Jobs, as the JobSet's spec says.
func waitWorkers(t *testing.T, ns string, want int32) {
	t.Helper()
	var last string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("workers, last seen: %s", last)
		}
	})
	eventually(t, 3*time.Minute, fmt.Sprintf("workers at %d pods per child Job", want), func(ctx context.Context) (bool, error) {
		js, err := stack.JobSets.JobsetV1alpha2().JobSets(ns).Get(ctx, jobSetName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, rj := range js.Spec.ReplicatedJobs {
			p, c := ptr.Deref(rj.Template.Spec.Parallelism, 0), ptr.Deref(rj.Template.Spec.Completions, 0)
			if p == 0 || c == 0 {
				// Never written by anyone: the server refuses it.
				t.Errorf("replicatedJob %s at parallelism/completions %d/%d", rj.Name, p, c)
				return false, fmt.Errorf("scaled to zero")
			}
			if rj.Name == "workers" && (p != want || c != want) {
				last = fmt.Sprintf("JobSet spec: workers %d/%d", p, c)
				return false, nil
			}
		}
		jobs, err := jobsOf(ctx, ns, "workers")
		if err != nil || len(jobs) != 2 {
			last = fmt.Sprintf("%d worker Jobs (%v)", len(jobs), err)
			return false, nil
		}
		for _, j := range jobs {
			if ptr.Deref(j.Spec.Parallelism, 0) != want {
				last = fmt.Sprintf("Job %s parallelism %d", j.Name, ptr.Deref(j.Spec.Parallelism, 0))
				return false, nil
			}
			running, err := runningPods(ctx, ns, j.Name)
			if err != nil || running != int(want) {
				last = fmt.Sprintf("Job %s runs %d pods", j.Name, running)
				return false, nil
			}
		}
		return true, nil
	})
}

// driverJob returns the one Job of the replicatedJob driver, once it runs.
func driverJob(t *testing.T, ns string) batchv1.Job {
	t.Helper()
	var job batchv1.Job
	eventually(t, time.Minute, "the driver Job running", func(ctx context.Context) (bool, error) {
		jobs, err := jobsOf(ctx, ns, "driver")
		if err != nil || len(jobs) != 1 {
			return false, nil
		}
		job = jobs[0]
		running, err := runningPods(ctx, ns, job.Name)
		return err == nil && running == 1, nil
	})
	return job
}

// checkDriver checks that the driver's Job is the same one, unchanged in
// size, with its pod still running.
func checkDriver(t *testing.T, ns string, before batchv1.Job) {
	t.Helper()
	ctx := context.Background()
	jobs, err := jobsOf(ctx, ns, "driver")
	if err != nil || len(jobs) != 1 {
		t.Fatalf("driver Jobs: %d (%v), want 1", len(jobs), err)
	}
	j := jobs[0]
	if j.UID != before.UID || ptr.Deref(j.Spec.Parallelism, 0) != 1 || ptr.Deref(j.Spec.Completions, 0) != 1 {
		t.Errorf("driver Job %s (uid %s) parallelism/completions %d/%d, want the same Job %s at 1/1",
			j.Name, j.UID, ptr.Deref(j.Spec.Parallelism, 0), ptr.Deref(j.Spec.Completions, 0), before.UID)
	}
	if running, err := runningPods(ctx, ns, j.Name); err != nil || running != 1 {
		t.Errorf("driver Job runs %d pods (%v), want 1", running, err)
	}
	js, err := stack.JobSets.JobsetV1alpha2().JobSets(ns).Get(ctx, jobSetName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting JobSet: %v", err)
	}
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name == "driver" && (ptr.Deref(rj.Replicas, 0) != 1 || ptr.Deref(rj.Template.Spec.Parallelism, 0) != 1) {
			t.Errorf("JobSet driver replicas %d parallelism %d, want 1 and 1", ptr.Deref(rj.Replicas, 0), ptr.Deref(rj.Template.Spec.Parallelism, 0))
		}
	}
}

// jobsOf lists the live child Jobs of one replicatedJob of the example's JobSet.
func jobsOf(ctx context.Context, ns, rj string) ([]batchv1.Job, error) {
	list, err := stack.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{
		LabelSelector: v1alpha2.JobSetNameKey + "=" + jobSetName + "," + v1alpha2.ReplicatedJobNameKey + "=" + rj,
	})
	if err != nil {
		return nil, err
	}
	var live []batchv1.Job
	for _, j := range list.Items {
		if j.DeletionTimestamp == nil {
			live = append(live, j)
		}
	}
	return live, nil
}

// runningPods counts the Job's running pods that are not being deleted.
func runningPods(ctx context.Context, ns, job string) (int, error) {
	pods, err := stack.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}
