package anchor

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	clientset "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
)

// tracker follows one namespace's Jobs, pods and (when asked) one JobSet
// through watches opened before the first write, and keeps what the
// benchmark waits for. Times are when the tracker saw the event, so every
// side pays the same watch delay.
type tracker struct {
	mu sync.Mutex
	// jobs: the restart-attempt label of each Job that exists and is not
	// being deleted; failed: Jobs seen with a Failed condition.
	jobs   map[string]string
	failed map[string]bool
	// pods: the pods that exist, by name; podFailedAt: when each pod was
	// first seen failed (kept after the pod is gone).
	pods        map[string]podState
	podFailedAt map[string]time.Time
	// onJobGone, when set, is called (outside the lock) with the name of
	// each Job whose deletion finished.
	onJobGone func(name string)

	jobEvents     int
	statusWrites  int
	statusBytes   int
	maxStatusSize int
	lastStatus    string
}

type podState struct {
	attempt   string
	scheduled bool
	running   bool
}

func newTracker() *tracker {
	return &tracker{jobs: map[string]string{}, failed: map[string]bool{}, pods: map[string]podState{}, podFailedAt: map[string]time.Time{}}
}

// start opens the watches; they end with ctx. It returns once every watch
// is open, so that nothing written afterwards is missed.
func (t *tracker) start(ctx context.Context, kube kubernetes.Interface, jobsets clientset.Interface, ns, jobSet string) error {
	open := []struct {
		what   string
		watch  func(ctx context.Context, rv string) (watch.Interface, error)
		handle func(watch.Event)
	}{
		{"Jobs", func(ctx context.Context, rv string) (watch.Interface, error) {
			return kube.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		}, t.job},
		{"pods", func(ctx context.Context, rv string) (watch.Interface, error) {
			return kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		}, t.pod},
	}
	if jobsets != nil {
		open = append(open, struct {
			what   string
			watch  func(ctx context.Context, rv string) (watch.Interface, error)
			handle func(watch.Event)
		}{"the JobSet", func(ctx context.Context, rv string) (watch.Interface, error) {
			return jobsets.JobsetV1alpha2().JobSets(ns).Watch(ctx, metav1.ListOptions{
				ResourceVersion: rv, AllowWatchBookmarks: true, FieldSelector: "metadata.name=" + jobSet})
		}, t.jobSet})
	}
	for _, o := range open {
		w, err := o.watch(ctx, "")
		if err != nil {
			return fmt.Errorf("watching %s: %w", o.what, err)
		}
		go follow(ctx, w, o.watch, o.handle)
	}
	return nil
}

// follow hands every event of w to handle, and opens the watch again from
// the last resource version when the server ends it.
func follow(ctx context.Context, w watch.Interface, reopen func(ctx context.Context, rv string) (watch.Interface, error), handle func(watch.Event)) {
	rv := ""
	for {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				rv = "" // too old: start over; the handlers are idempotent
				continue
			}
			if m, err := meta.Accessor(ev.Object); err == nil {
				rv = m.GetResourceVersion()
			}
			if ev.Type != watch.Bookmark {
				handle(ev)
			}
		}
		w.Stop()
		for {
			if ctx.Err() != nil {
				return
			}
			var err error
			if w, err = reopen(ctx, rv); err == nil {
				break
			}
			rv = ""
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second): // back off before reopening
			}
		}
	}
}

func (t *tracker) job(ev watch.Event) {
	job, ok := ev.Object.(*batchv1.Job)
	if !ok {
		return
	}
	var gone func(string)
	t.mu.Lock()
	t.jobEvents++
	if ev.Type == watch.Deleted {
		delete(t.jobs, job.Name)
		gone = t.onJobGone
	} else if job.DeletionTimestamp != nil {
		delete(t.jobs, job.Name)
	} else {
		t.jobs[job.Name] = job.Labels[v1alpha2.RestartsKey]
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			t.failed[job.Name] = true
		}
	}
	t.mu.Unlock()
	if gone != nil {
		gone(job.Name)
	}
}

func (t *tracker) pod(ev watch.Event) {
	pod, ok := ev.Object.(*corev1.Pod)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if ev.Type == watch.Deleted {
		delete(t.pods, pod.Name)
		return
	}
	t.pods[pod.Name] = podState{
		attempt:   pod.Labels[v1alpha2.RestartsKey],
		scheduled: pod.Spec.NodeName != "",
		running:   pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil,
	}
	if _, seen := t.podFailedAt[pod.Name]; !seen && pod.Status.Phase == corev1.PodFailed {
		t.podFailedAt[pod.Name] = time.Now()
	}
}

// jobSet counts the writes that changed the JobSet's status, and their size.
func (t *tracker) jobSet(ev watch.Event) {
	js, ok := ev.Object.(*v1alpha2.JobSet)
	if !ok || ev.Type == watch.Deleted {
		return
	}
	status, err := json.Marshal(js.Status)
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if string(status) == t.lastStatus {
		return
	}
	if t.lastStatus != "" || ev.Type == watch.Modified {
		t.statusWrites++
		t.statusBytes += len(status)
	}
	t.lastStatus = string(status)
	if len(status) > t.maxStatusSize {
		t.maxStatusSize = len(status)
	}
}

func (t *tracker) setOnJobGone(fn func(string)) {
	t.mu.Lock()
	t.onJobGone = fn
	t.mu.Unlock()
}

// jobsOf counts the live Jobs of a restart attempt.
func (t *tracker) jobsOf(attempt string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, a := range t.jobs {
		if a == attempt {
			n++
		}
	}
	return n
}

// scheduledOf counts the scheduled pods of a restart attempt.
func (t *tracker) scheduledOf(attempt string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.pods {
		if p.attempt == attempt && p.scheduled {
			n++
		}
	}
	return n
}

func (t *tracker) running(pod string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pods[pod].running
}

// podFailed tells whether the pod was seen failed, and when.
func (t *tracker) podFailed(pod string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.podFailedAt[pod]
	return at, ok
}

func (t *tracker) jobFailed(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed[name]
}

// statusFigures: status writes seen so far, their bytes, the largest
// status, and the Job events seen so far.
func (t *tracker) statusFigures() (writes, bytes, largest, jobEvents int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.statusWrites, t.statusBytes, t.maxStatusSize, t.jobEvents
}

// await polls the tracker's state (memory only) until cond holds, and
// returns when it was first seen to.
func await(ctx context.Context, timeout time.Duration, cond func() bool) (time.Time, error) {
	var at time.Time
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		at = time.Now()
		return cond(), nil
	})
	return at, err
}
