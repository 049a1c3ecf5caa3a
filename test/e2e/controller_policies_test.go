package e2e

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// waitJobGone waits until the Job no longer exists.
func waitJobGone(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, 2*time.Minute, "Job "+name+" to be deleted", func(ctx context.Context) (bool, error) {
		_, err := cluster.kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func TestSuccessPolicyAnyWithTargets(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	js := runningJobSet(ns, "anyof", replicatedJob("driver", 1, 1, "4s"), replicatedJob("workers", 2, 1, ""))
	js.Spec.SuccessPolicy = &v1alpha2.SuccessPolicy{Operator: v1alpha2.OperatorAny, TargetReplicatedJobs: []string{"driver"}}
	createJobSet(t, js)
	got := waitCondition(t, ns, "anyof", v1alpha2.JobSetCompleted, 2*time.Minute)
	if got.Status.TerminalState != string(v1alpha2.JobSetCompleted) {
		t.Errorf("terminalState = %q, want Completed", got.Status.TerminalState)
	}
	// The workers never finish: they are deleted; the driver's Job stays.
	waitJobGone(t, ns, "anyof-workers-0")
	waitJobGone(t, ns, "anyof-workers-1")
	if j := getJob(context.Background(), ns, "anyof-driver-0"); j == nil || !jobHas(j, batchv1.JobComplete) {
		t.Errorf("the completed driver Job should stay: %v", j)
	}
}

func TestSuccessPolicyAllWithTargets(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	workers := replicatedJob("workers", 2, 1, "3s")
	// The second worker takes longer: the JobSet must wait for it.
	workers.Template.Spec.Template.Annotations["pod-complete.stage.kwok.x-k8s.io/jitter-delay"] = "8s"
	js := runningJobSet(ns, "allof", replicatedJob("monitor", 1, 1, ""), workers)
	js.Spec.SuccessPolicy = &v1alpha2.SuccessPolicy{Operator: v1alpha2.OperatorAll, TargetReplicatedJobs: []string{"workers"}}
	createJobSet(t, js)
	got := waitCondition(t, ns, "allof", v1alpha2.JobSetCompleted, 2*time.Minute)
	if s := rjStatus(got, "workers"); s.Succeeded != 2 {
		t.Errorf("Completed with %d of 2 workers succeeded: %+v", s.Succeeded, got.Status.ReplicatedJobsStatus)
	}
	ctx := context.Background()
	for _, name := range []string{"allof-workers-0", "allof-workers-1"} {
		if j := getJob(ctx, ns, name); j == nil || !jobHas(j, batchv1.JobComplete) {
			t.Errorf("worker Job %s not complete at the JobSet's completion", name)
		}
	}
	waitJobGone(t, ns, "allof-monitor-0")
}

// TestStartupPolicyInOrder watches the Jobs: a worker Job may only appear
// after the leader Job reported all its pods ready. The watch delivers the
// events of one resource in order, so the leader's readiness, which the
// controller acted on, precedes the workers' creation.
func TestStartupPolicyInOrder(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	leader := replicatedJob("leader", 1, 2, "")
	leader.Template.Spec.Template.Annotations[runningDelay] = "3s"
	js := runningJobSet(ns, "inorder", leader, replicatedJob("workers", 2, 1, ""))
	js.Spec.StartupPolicy = &v1alpha2.StartupPolicy{StartupPolicyOrder: v1alpha2.InOrder}
	var sawWorkers int
	w := watchJobs(t, ns, "inorder", func(w *jobWatch, typ watch.EventType, job *batchv1.Job) {
		if typ != watch.Added || job.Labels[v1alpha2.ReplicatedJobNameKey] != "workers" {
			return
		}
		sawWorkers++
		l := w.byName("inorder-leader-0")
		if l == nil || ptr.Deref(l.Status.Ready, 0) < 2 {
			t.Errorf("worker Job %s created before the leader was ready (leader: %+v)", job.Name, l)
		}
	})
	createJobSet(t, js)
	waitJobs(t, ns, "inorder", 3, "0")
	got := waitCondition(t, ns, "inorder", v1alpha2.JobSetStartupPolicyCompleted, time.Minute)
	if c := conditionReason(got, v1alpha2.JobSetStartupPolicyCompleted); c != "InOrderStartupPolicyCompleted" {
		t.Errorf("StartupPolicyCompleted reason = %q", c)
	}
	waitEvent(t, ns, "inorder", "InOrderStartupPolicyInProgress")
	waitEvent(t, ns, "inorder", "InOrderStartupPolicyCompleted")
	w.await(t, "the watch to see both worker Jobs created", func() bool { return sawWorkers == 2 })
}

// TestDependsOnComplete: the workers are created only once the initializer
// completed.
func TestDependsOnComplete(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	workers := replicatedJob("workers", 2, 1, "")
	workers.DependsOn = []v1alpha2.DependsOn{{Name: "init", Status: v1alpha2.DependencyComplete}}
	js := runningJobSet(ns, "deps", replicatedJob("init", 1, 1, "4s"), workers)
	var sawWorkers int
	w := watchJobs(t, ns, "deps", func(w *jobWatch, typ watch.EventType, job *batchv1.Job) {
		if typ != watch.Added || job.Labels[v1alpha2.ReplicatedJobNameKey] != "workers" {
			return
		}
		sawWorkers++
		if i := w.byName("deps-init-0"); i == nil || !jobHas(i, batchv1.JobComplete) {
			t.Errorf("worker Job %s created before the initializer completed (init: %+v)", job.Name, i)
		}
	})
	createJobSet(t, js)
	waitJobs(t, ns, "deps", 3, "0")
	w.await(t, "the watch to see both worker Jobs created", func() bool { return sawWorkers == 2 })
	// The initializer stays; the JobSet is running, not completed.
	got := waitStatus(t, ns, "deps", "workers active", time.Minute, func(js *v1alpha2.JobSet) bool {
		return rjStatus(js, "workers").Active == 2
	})
	if conditionReason(got, v1alpha2.JobSetCompleted) != "" || rjStatus(got, "init").Succeeded != 1 {
		t.Errorf("status = %+v, want init succeeded and the JobSet running", got.Status)
	}
}

// TestResumeInOrder: resuming an InOrder JobSet unsuspends the workers only
// once the leader is ready again.
func TestResumeInOrder(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	leader := replicatedJob("leader", 1, 2, "")
	leader.Template.Spec.Template.Annotations[runningDelay] = "3s"
	js := runningJobSet(ns, "reorder", leader, replicatedJob("workers", 2, 1, ""))
	js.Spec.StartupPolicy = &v1alpha2.StartupPolicy{StartupPolicyOrder: v1alpha2.InOrder}
	createJobSet(t, js)
	waitCondition(t, ns, "reorder", v1alpha2.JobSetStartupPolicyCompleted, time.Minute)

	kubectl(t, "patch", "jobset", "reorder", "-n", ns, "--type=merge", "-p", `{"spec":{"suspend":true}}`)
	eventually(t, time.Minute, "suspended Jobs without ready pods", func(ctx context.Context) (bool, error) {
		jobs, err := childJobs(ctx, ns, "reorder")
		if err != nil || len(jobs) != 3 {
			return false, nil
		}
		for _, j := range jobs {
			if !ptr.Deref(j.Spec.Suspend, false) || ptr.Deref(j.Status.Ready, 0) != 0 || j.Status.Active != 0 {
				return false, nil
			}
		}
		return true, nil
	})

	suspended := map[string]bool{}
	var resumedWorkers int
	w := watchJobs(t, ns, "reorder", func(w *jobWatch, typ watch.EventType, job *batchv1.Job) {
		was, seen := suspended[job.Name]
		now := ptr.Deref(job.Spec.Suspend, false)
		suspended[job.Name] = now
		if !seen || !was || now || job.Labels[v1alpha2.ReplicatedJobNameKey] != "workers" {
			return
		}
		resumedWorkers++
		if l := w.byName("reorder-leader-0"); l == nil || ptr.Deref(l.Status.Ready, 0) < 2 {
			t.Errorf("worker Job %s resumed before the leader was ready again (leader %+v)", job.Name, l)
		}
	})
	w.mu.Lock()
	for _, j := range w.jobs {
		suspended[j.Name] = ptr.Deref(j.Spec.Suspend, false)
	}
	w.mu.Unlock()
	kubectl(t, "patch", "jobset", "reorder", "-n", ns, "--type=merge", "-p", `{"spec":{"suspend":false}}`)
	eventually(t, time.Minute, "both workers resumed", func(context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return resumedWorkers == 2, nil
	})
	w.stop()
}

// TestRestartRegatesDependsOn: after a restart, the workers of the new
// attempt wait again for the new initializer to complete.
func TestRestartRegatesDependsOn(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	workers := replicatedJob("workers", 2, 1, "")
	workers.DependsOn = []v1alpha2.DependsOn{{Name: "init", Status: v1alpha2.DependencyComplete}}
	js := runningJobSet(ns, "redeps", replicatedJob("init", 1, 1, "3s"), workers)
	js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 1}
	createJobSet(t, js)
	waitJobs(t, ns, "redeps", 3, "0")
	var sawWorkers int
	w := watchJobs(t, ns, "redeps", func(w *jobWatch, typ watch.EventType, job *batchv1.Job) {
		if typ != watch.Added || job.Labels[v1alpha2.ReplicatedJobNameKey] != "workers" {
			return
		}
		sawWorkers++
		i := w.byName("redeps-init-0")
		if i == nil || i.Labels[v1alpha2.RestartsKey] != "1" || !jobHas(i, batchv1.JobComplete) {
			t.Errorf("worker Job %s of attempt %s created before the new initializer completed (init: %v)",
				job.Name, job.Labels[v1alpha2.RestartsKey], i)
		}
	})
	failPodWithCode(t, ns, "redeps-workers-0", otherExitCode)
	waitJobs(t, ns, "redeps", 3, "1")
	w.await(t, "the watch to see both new worker Jobs created", func() bool { return sawWorkers == 2 })
}

// TestDependsOnReady: the workers are created only once every pod of the
// leader is ready.
func TestDependsOnReady(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	leader := replicatedJob("leader", 1, 2, "")
	leader.Template.Spec.Template.Annotations[runningDelay] = "3s"
	workers := replicatedJob("workers", 2, 1, "")
	workers.DependsOn = []v1alpha2.DependsOn{{Name: "leader", Status: v1alpha2.DependencyReady}}
	var sawWorkers int
	w := watchJobs(t, ns, "ready", func(w *jobWatch, typ watch.EventType, job *batchv1.Job) {
		if typ != watch.Added || job.Labels[v1alpha2.ReplicatedJobNameKey] != "workers" {
			return
		}
		sawWorkers++
		if l := w.byName("ready-leader-0"); l == nil || ptr.Deref(l.Status.Ready, 0) < 2 {
			t.Errorf("worker Job %s created before the leader was ready (leader: %+v)", job.Name, l)
		}
	})
	createJobSet(t, runningJobSet(ns, "ready", leader, workers))
	waitJobs(t, ns, "ready", 3, "0")
	w.await(t, "the watch to see both worker Jobs created", func() bool { return sawWorkers == 2 })
}
