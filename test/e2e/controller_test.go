package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// Pod annotations and labels understood by the local cluster's kwok stages
// (hack/local/kwok/stages.yaml).
const (
	completeDelay = "pod-complete.stage.kwok.x-k8s.io/delay"
	failLabel     = "pod-fail.stage.kwok.x-k8s.io"
)

// replicatedJob builds an Indexed replicatedJob of `replicas` Jobs with
// `pods` pods each. A non-empty completeAfter makes the pods succeed after
// that long; otherwise they run until told to fail.
func replicatedJob(name string, replicas, pods int32, completeAfter string) v1alpha2.ReplicatedJob {
	annotations := map[string]string{}
	if completeAfter != "" {
		annotations[completeDelay] = completeAfter
	}
	return v1alpha2.ReplicatedJob{
		Name:     name,
		Replicas: ptr.To(replicas),
		Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Parallelism:  ptr.To(pods),
			Completions:  ptr.To(pods),
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		}},
	}
}

func createJobSet(t *testing.T, js *v1alpha2.JobSet) *v1alpha2.JobSet {
	t.Helper()
	created, err := cluster.jobsets.JobsetV1alpha2().JobSets(js.Namespace).Create(context.Background(), js, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating JobSet %s: %v", js.Name, err)
	}
	return created
}

func getJobSet(t *testing.T, ns, name string) *v1alpha2.JobSet {
	t.Helper()
	js, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting JobSet %s: %v", name, err)
	}
	return js
}

func childJobs(ctx context.Context, ns, jobset string) ([]batchv1.Job, error) {
	list, err := cluster.kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha2.JobSetNameKey + "=" + jobset})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// suspendAndWait suspends a JobSet with a merge patch and waits until its
// Jobs (want of them; 0 means any number but none) are all suspended.
func suspendAndWait(t *testing.T, ns, name string, want int) {
	t.Helper()
	kubectl(t, "patch", "jobset", name, "-n", ns, "--type=merge", "-p", `{"spec":{"suspend":true}}`)
	eventually(t, time.Minute, "every Job to be suspended", func(ctx context.Context) (bool, error) {
		jobs, err := childJobs(ctx, ns, name)
		if err != nil || len(jobs) == 0 || (want > 0 && len(jobs) != want) {
			return false, nil
		}
		for _, j := range jobs {
			if !ptr.Deref(j.Spec.Suspend, false) {
				return false, nil
			}
		}
		return true, nil
	})
}

// waitCondition waits until the JobSet has the condition with status True.
func waitCondition(t *testing.T, ns, name string, cond v1alpha2.JobSetConditionType, timeout time.Duration) *v1alpha2.JobSet {
	t.Helper()
	return waitStatus(t, ns, name, "to be "+string(cond), timeout, func(js *v1alpha2.JobSet) bool {
		return meta.IsStatusConditionTrue(js.Status.Conditions, string(cond))
	})
}

// waitJobs waits until the JobSet has n child Jobs of the given restart
// attempt that are not being deleted.
func waitJobs(t *testing.T, ns, jobset string, n int, attempt string) []batchv1.Job {
	t.Helper()
	var jobs []batchv1.Job
	eventually(t, 2*time.Minute, fmt.Sprintf("%d Jobs of attempt %s", n, attempt), func(ctx context.Context) (bool, error) {
		all, err := childJobs(ctx, ns, jobset)
		if err != nil {
			return false, nil
		}
		jobs = jobs[:0]
		for _, j := range all {
			if j.DeletionTimestamp == nil && j.Labels[v1alpha2.RestartsKey] == attempt {
				jobs = append(jobs, j)
			}
		}
		return len(jobs) == n, nil
	})
	return jobs
}

// failOnePod labels one running pod of the Job so that kwok fails it.
func failOnePod(t *testing.T, ns, job string) {
	t.Helper()
	eventually(t, 2*time.Minute, "a running pod of "+job, func(ctx context.Context) (bool, error) {
		pods, err := cluster.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, failLabel)
				_, err := cluster.kube.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				return err == nil, nil
			}
		}
		return false, nil
	})
}

func TestJobSetRunsToCompletion(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ctx := context.Background()
	createJobSet(t, &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "done", Namespace: ns},
		Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{
			replicatedJob("leader", 1, 1, "8s"),
			replicatedJob("workers", 2, 2, "8s"),
		}},
	})

	jobs := waitJobs(t, ns, "done", 3, "0")
	for _, j := range jobs {
		for _, key := range []string{v1alpha2.JobSetNameKey, v1alpha2.ReplicatedJobNameKey, v1alpha2.JobIndexKey,
			v1alpha2.JobGlobalIndexKey, v1alpha2.GlobalReplicasKey, v1alpha2.JobKey, v1alpha2.RestartsKey} {
			if _, ok := j.Labels[key]; !ok {
				t.Errorf("Job %s lacks label %s: %v", j.Name, key, j.Labels)
			}
			if _, ok := j.Spec.Template.Labels[key]; !ok {
				t.Errorf("pod template of Job %s lacks label %s", j.Name, key)
			}
		}
		if got := j.Spec.Template.Annotations[v1alpha2.ExecutionAttemptKey]; got != "0" {
			t.Errorf("pod template of Job %s execution-attempt annotation = %q, want 0", j.Name, got)
		}
		if j.Spec.Template.Spec.Subdomain != "done" {
			t.Errorf("Job %s pod subdomain = %q, want done", j.Name, j.Spec.Template.Spec.Subdomain)
		}
	}
	if _, err := cluster.kube.BatchV1().Jobs(ns).Get(ctx, "done-workers-1", metav1.GetOptions{}); err != nil {
		t.Errorf("Job done-workers-1: %v", err)
	}
	svc, err := cluster.kube.CoreV1().Services(ns).Get(ctx, "done", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("headless Service: %v", err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service clusterIP %q publishNotReadyAddresses %v, want None and true", svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	// Pods get stable hostnames <jobset>-<rj>-<job>-<pod> under the subdomain.
	eventually(t, time.Minute, "pods with hostnames", func(ctx context.Context) (bool, error) {
		pods, err := cluster.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha2.JobSetNameKey + "=done"})
		if err != nil || len(pods.Items) < 5 {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Spec.Hostname == "" || !strings.HasPrefix(p.Spec.Hostname, "done-") || p.Spec.Subdomain != "done" {
				t.Errorf("pod %s hostname %q subdomain %q", p.Name, p.Spec.Hostname, p.Spec.Subdomain)
			}
		}
		return true, nil
	})

	js := waitCondition(t, ns, "done", v1alpha2.JobSetCompleted, 3*time.Minute)
	if js.Status.TerminalState != string(v1alpha2.JobSetCompleted) {
		t.Errorf("terminalState = %q, want Completed", js.Status.TerminalState)
	}
	var succeeded int32
	for _, s := range js.Status.ReplicatedJobsStatus {
		succeeded += s.Succeeded
	}
	if succeeded != 3 {
		t.Errorf("succeeded Jobs in status = %d, want 3: %+v", succeeded, js.Status.ReplicatedJobsStatus)
	}
	waitEvent(t, ns, "done", "AllJobsCompleted")
}

func TestFailureRestartsThenFails(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createJobSet(t, &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "flaky", Namespace: ns},
		Spec: v1alpha2.JobSetSpec{
			FailurePolicy:  &v1alpha2.FailurePolicy{MaxRestarts: 1},
			ReplicatedJobs: []v1alpha2.ReplicatedJob{replicatedJob("workers", 2, 1, "")},
		},
	})
	waitJobs(t, ns, "flaky", 2, "0")
	failOnePod(t, ns, "flaky-workers-0")

	// The whole JobSet is recreated as the next attempt.
	jobs := waitJobs(t, ns, "flaky", 2, "1")
	for _, j := range jobs {
		if got := j.Annotations[v1alpha2.ExecutionAttemptKey]; got != "1" {
			t.Errorf("Job %s execution-attempt = %q, want 1", j.Name, got)
		}
	}
	js := getJobSet(t, ns, "flaky")
	if js.Status.Restarts != 1 || js.Status.RestartsCountTowardsMax != 1 || ptr.Deref(js.Status.ExecutionAttempts, 0) != 1 {
		t.Errorf("after one restart: restarts %d towards max %d execution attempts %d, want 1/1/1",
			js.Status.Restarts, js.Status.RestartsCountTowardsMax, ptr.Deref(js.Status.ExecutionAttempts, 0))
	}

	// A second failure exceeds maxRestarts.
	failOnePod(t, ns, "flaky-workers-1")
	js = waitCondition(t, ns, "flaky", v1alpha2.JobSetFailed, 3*time.Minute)
	c := meta.FindStatusCondition(js.Status.Conditions, string(v1alpha2.JobSetFailed))
	if c.Reason != "ReachedMaxRestarts" {
		t.Errorf("Failed reason = %q, want ReachedMaxRestarts", c.Reason)
	}
	waitEvent(t, ns, "flaky", "ReachedMaxRestarts")
	if js.Status.TerminalState != string(v1alpha2.JobSetFailed) {
		t.Errorf("terminalState = %q, want Failed", js.Status.TerminalState)
	}
}

func TestFirstFailureFailsWithoutPolicy(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createJobSet(t, &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "fragile", Namespace: ns},
		Spec:       v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{replicatedJob("workers", 2, 1, "")}},
	})
	waitJobs(t, ns, "fragile", 2, "0")
	failOnePod(t, ns, "fragile-workers-1")
	js := waitCondition(t, ns, "fragile", v1alpha2.JobSetFailed, 3*time.Minute)
	if c := meta.FindStatusCondition(js.Status.Conditions, string(v1alpha2.JobSetFailed)); c.Reason != "FailedJobs" {
		t.Errorf("Failed reason = %q, want FailedJobs", c.Reason)
	}
	waitEvent(t, ns, "fragile", "FailedJobs")
	// Active Jobs are deleted once the JobSet failed; the failed one stays.
	eventually(t, 2*time.Minute, "the active Job to be deleted", func(ctx context.Context) (bool, error) {
		_, err := cluster.kube.BatchV1().Jobs(ns).Get(ctx, "fragile-workers-0", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func TestCreatedSuspendedThenResumed(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ctx := context.Background()
	createJobSet(t, &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "queued", Namespace: ns},
		Spec: v1alpha2.JobSetSpec{
			Suspend:        ptr.To(true),
			ReplicatedJobs: []v1alpha2.ReplicatedJob{replicatedJob("workers", 2, 1, "")},
		},
	})
	waitCondition(t, ns, "queued", v1alpha2.JobSetSuspended, time.Minute)
	// A JobSet that never ran costs one object: no Jobs, no Service.
	if jobs, err := childJobs(ctx, ns, "queued"); err != nil || len(jobs) != 0 {
		t.Errorf("Jobs of a never-run suspended JobSet: %d (err %v), want 0", len(jobs), err)
	}
	if _, err := cluster.kube.CoreV1().Services(ns).Get(ctx, "queued", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Service of a never-run suspended JobSet: err %v, want NotFound", err)
	}

	// Admission: one patch sets the node selector and resumes. The
	// strategic merge patch merges replicatedJobs by name.
	patch := `{"spec":{"suspend":false,"replicatedJobs":[{"name":"workers","template":{"spec":{"template":{"spec":{"nodeSelector":{"kubernetes.io/os":"linux"}}}}}}]}}`
	kubectl(t, "patch", "jobset", "queued", "-n", ns, "--type=strategic", "-p", patch)
	jobs := waitJobs(t, ns, "queued", 2, "0")
	for _, j := range jobs {
		if ptr.Deref(j.Spec.Suspend, false) {
			t.Errorf("Job %s is still suspended", j.Name)
		}
		if got := j.Spec.Template.Spec.NodeSelector["kubernetes.io/os"]; got != "linux" {
			t.Errorf("Job %s nodeSelector = %v, want the one set while suspended", j.Name, j.Spec.Template.Spec.NodeSelector)
		}
	}

	// Suspend and resume again: the next execution attempt.
	suspendAndWait(t, ns, "queued", 0)
	before := ptr.Deref(getJobSet(t, ns, "queued").Status.ExecutionAttempts, 0)
	kubectl(t, "patch", "jobset", "queued", "-n", ns, "--type=merge", "-p", `{"spec":{"suspend":false}}`)
	eventually(t, time.Minute, "execution attempts to grow on resume", func(ctx context.Context) (bool, error) {
		js, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Get(ctx, "queued", metav1.GetOptions{})
		return err == nil && ptr.Deref(js.Status.ExecutionAttempts, 0) == before+1, nil
	})
}
