package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// More kwok pod annotations (hack/local/kwok/stages.yaml).
const (
	runningDelay  = "pod-running.stage.kwok.x-k8s.io/delay"
	failExitCode  = "pod-fail.stage.kwok.x-k8s.io/exit-code"
	exitFailJob   = 42 // exit code that withPodFailurePolicy turns into a FailJob
	otherExitCode = 7
)

// withPodFailurePolicy makes a Job fail with reason PodFailurePolicy (and
// a message naming the exit code) when a container exits with code 42;
// other exit codes fail it with BackoffLimitExceeded.
func withPodFailurePolicy(rj v1alpha2.ReplicatedJob) v1alpha2.ReplicatedJob {
	rj.Template.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action: batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: ptr.To("main"),
			Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
			Values:        []int32{exitFailJob},
		},
	}}}
	return rj
}

// failPodWithCode makes kwok fail one running pod of the Job with the exit
// code.
func failPodWithCode(t *testing.T, ns, job string, code int) {
	t.Helper()
	eventually(t, 2*time.Minute, "a running pod of "+job, func(ctx context.Context) (bool, error) {
		pods, err := cluster.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"},"annotations":{%q:"%d"}}}`, failLabel, failExitCode, code)
				_, err := cluster.kube.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				return err == nil, nil
			}
		}
		return false, nil
	})
}

// waitStatus polls the JobSet until cond holds for it.
func waitStatus(t *testing.T, ns, name, what string, timeout time.Duration, cond func(js *v1alpha2.JobSet) bool) *v1alpha2.JobSet {
	t.Helper()
	var js *v1alpha2.JobSet
	eventually(t, timeout, fmt.Sprintf("JobSet %s: %s", name, what), func(ctx context.Context) (bool, error) {
		got, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		js = got
		return cond(got), nil
	})
	return js
}

// conditionReason returns the reason of a true condition, or "".
func conditionReason(js *v1alpha2.JobSet, cond v1alpha2.JobSetConditionType) string {
	c := meta.FindStatusCondition(js.Status.Conditions, string(cond))
	if c == nil || c.Status != metav1.ConditionTrue {
		return ""
	}
	return c.Reason
}

func rjStatus(js *v1alpha2.JobSet, name string) v1alpha2.ReplicatedJobStatus {
	for _, s := range js.Status.ReplicatedJobsStatus {
		if s.Name == name {
			return s
		}
	}
	return v1alpha2.ReplicatedJobStatus{Name: name}
}

// jobFinished reports whether a Job has a true Complete or Failed condition.
func jobHas(job *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// getJob returns a Job or nil when it does not exist.
func getJob(ctx context.Context, ns, name string) *batchv1.Job {
	j, err := cluster.kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return j
}

// jobWatch follows the child Jobs of a JobSet through a watch and keeps the
// latest state of each one that still exists. check runs under the lock on
// every event, after the event was applied, with the event's Job.
type jobWatch struct {
	mu     sync.Mutex
	jobs   map[types.UID]*batchv1.Job
	added  map[string]int // ADDED events per name and restart attempt
	events int
	cancel context.CancelFunc
	done   chan struct{}
}

func watchJobs(t *testing.T, ns, jobset string, check func(w *jobWatch, typ watch.EventType, job *batchv1.Job)) *jobWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &jobWatch{jobs: map[types.UID]*batchv1.Job{}, added: map[string]int{}, cancel: cancel, done: make(chan struct{})}
	sel := v1alpha2.JobSetNameKey + "=" + jobset
	list, err := cluster.kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		cancel()
		t.Fatalf("listing Jobs: %v", err)
	}
	for i := range list.Items {
		j := list.Items[i]
		w.jobs[j.UID] = &j
		w.added[addedKey(&j)]++
	}
	wi, err := cluster.kube.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{
		LabelSelector: sel, ResourceVersion: list.ResourceVersion, TimeoutSeconds: ptr.To[int64](600),
	})
	if err != nil {
		cancel()
		t.Fatalf("watching Jobs: %v", err)
	}
	go func() {
		defer close(w.done)
		defer wi.Stop()
		for ev := range wi.ResultChan() {
			job, ok := ev.Object.(*batchv1.Job)
			if !ok {
				if ctx.Err() == nil {
					t.Errorf("unexpected watch event %s: %#v", ev.Type, ev.Object)
				}
				return
			}
			w.mu.Lock()
			w.events++
			switch ev.Type {
			case watch.Added:
				w.added[addedKey(job)]++
				w.jobs[job.UID] = job
			case watch.Modified:
				w.jobs[job.UID] = job
			case watch.Deleted:
				delete(w.jobs, job.UID)
			}
			if check != nil {
				check(w, ev.Type, job)
			}
			w.mu.Unlock()
		}
		if ctx.Err() == nil {
			t.Errorf("the watch of the Jobs of %s ended early", jobset)
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func addedKey(j *batchv1.Job) string {
	return j.Name + "@" + j.Labels[v1alpha2.RestartsKey] + "/" + j.Labels[v1alpha2.JobRestartsKey]
}

func (w *jobWatch) stop() {
	w.cancel()
	<-w.done
}

// byName returns the latest state of the existing Job of that name, or nil
// (caller holds the lock).
func (w *jobWatch) byName(name string) *batchv1.Job {
	for _, j := range w.jobs {
		if j.Name == name {
			return j
		}
	}
	return nil
}

// countAttempt counts the existing Jobs of a restart attempt (caller holds
// the lock).
func (w *jobWatch) countAttempt(attempt string) int {
	n := 0
	for _, j := range w.jobs {
		if j.Labels[v1alpha2.RestartsKey] == attempt {
			n++
		}
	}
	return n
}

// runningJobSet builds a JobSet whose pods run until told otherwise.
func runningJobSet(ns, name string, rjs ...v1alpha2.ReplicatedJob) *v1alpha2.JobSet {
	return &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1alpha2.JobSetSpec{ReplicatedJobs: rjs},
	}
}

// podsOf lists the pods of a JobSet that are not being deleted.
func podsOf(ctx context.Context, ns, jobset string) ([]corev1.Pod, error) {
	list, err := cluster.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha2.JobSetNameKey + "=" + jobset})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

func itoa(n int) string { return strconv.Itoa(n) }

// eventReasons returns the reasons of the events.k8s.io events about a
// JobSet.
func eventReasons(ctx context.Context, ns, name string) (map[string]int, error) {
	list, err := cluster.kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + name})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, e := range list.Items {
		if e.Regarding.Kind == "JobSet" {
			out[e.Reason]++
		}
	}
	return out, nil
}

// waitEvent waits for an event with the reason about the JobSet.
func waitEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	eventually(t, time.Minute, fmt.Sprintf("an event %s about %s", reason, name), func(ctx context.Context) (bool, error) {
		r, err := eventReasons(ctx, ns, name)
		return err == nil && r[reason] > 0, nil
	})
}

// await polls cond under the watch's lock until it holds: the watch may
// lag behind what a List already shows.
func (w *jobWatch) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually(t, time.Minute, what, func(context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return cond(), nil
	})
}
