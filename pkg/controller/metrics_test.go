package controller

import (
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	jobsetapi "github.com/nativejobset/jobset/pkg/apis/jobset"
	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// countingMetrics records the calls of the Metrics interface.
type countingMetrics struct {
	mu                                 sync.Mutex
	restarted, jobRestarted, completed int
	failed                             map[string]int
	jobsCreated, syncs, syncErrs       int
	attempts                           map[string]int
	recovered, between, jobsLatency    []time.Duration
}

func (m *countingMetrics) ExecutionAttemptStarted(_ *jobset.JobSet, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.attempts == nil {
		m.attempts = map[string]int{}
	}
	m.attempts[reason]++
}
func (m *countingMetrics) JobsCreatedLatency(_ *jobset.JobSet, d time.Duration) {
	m.mu.Lock()
	m.jobsLatency = append(m.jobsLatency, d)
	m.mu.Unlock()
}
func (m *countingMetrics) Recovered(_ *jobset.JobSet, d time.Duration) {
	m.mu.Lock()
	m.recovered = append(m.recovered, d)
	m.mu.Unlock()
}
func (m *countingMetrics) Interrupted(_ *jobset.JobSet, d time.Duration) {
	m.mu.Lock()
	m.between = append(m.between, d)
	m.mu.Unlock()
}

func (m *countingMetrics) Restarted(*jobset.JobSet, string) {
	m.mu.Lock()
	m.restarted++
	m.mu.Unlock()
}
func (m *countingMetrics) JobRestarted(*jobset.JobSet, string, string) {
	m.mu.Lock()
	m.jobRestarted++
	m.mu.Unlock()
}
func (m *countingMetrics) Completed(*jobset.JobSet) { m.mu.Lock(); m.completed++; m.mu.Unlock() }
func (m *countingMetrics) Failed(_ *jobset.JobSet, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed == nil {
		m.failed = map[string]int{}
	}
	m.failed[reason]++
}
func (m *countingMetrics) JobsCreated(_ *jobset.JobSet, n int) {
	m.mu.Lock()
	m.jobsCreated += n
	m.mu.Unlock()
}
func (m *countingMetrics) SyncDone(_ time.Duration, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncs++
	if err != nil {
		m.syncErrs++
	}
}

func withMetrics(fx *fixture) *countingMetrics {
	m := &countingMetrics{}
	fx.c.metrics = m
	return m
}

// failStatusWrites makes the next n status writes fail with err.
func (fx *fixture) failStatusWrites(n int, err error) {
	fx.jsc.PrependReactor("patch", "jobsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" || n == 0 {
			return false, nil, nil
		}
		n--
		return true, nil, err
	})
}

// syncErr syncs once and returns the sync's error.
func (fx *fixture) syncErr(name string) error {
	fx.t.Helper()
	fx.refresh()
	_, err := fx.c.sync(fx.ctx, ns+"/"+name)
	return err
}

var conflict = apierrors.NewConflict(schema.GroupResource{Group: jobset.GroupName, Resource: "jobsets"}, "js", errors.New("stale"))

func TestTerminalMetricsCountOnlyStoredTransitions(t *testing.T) {
	t.Run("failed", func(t *testing.T) {
		fx := newFixture(t, newJobSet("js"))
		m := withMetrics(fx)
		fx.sync("js")
		if m.jobsCreated != 3 {
			t.Fatalf("jobsCreated = %d, want 3", m.jobsCreated)
		}
		fx.setJob("js-workers-0", failJob("BackoffLimitExceeded", "x", t0))
		fx.failStatusWrites(1, conflict)
		if err := fx.syncErr("js"); !errors.Is(err, errConflict) {
			t.Fatalf("sync error = %v, want the conflict", err)
		}
		if len(m.failed) != 0 {
			t.Fatalf("a conflicting write counted: %v", m.failed)
		}
		for i := 0; i < 3; i++ {
			fx.sync("js")
		}
		if !finished(fx.jobSet("js")) || m.failed[reasonFailedJobs] != 1 || len(m.failed) != 1 {
			t.Fatalf("failed = %v, want FailedJobs once", m.failed)
		}
	})
	t.Run("completed", func(t *testing.T) {
		fx := newFixture(t, newJobSet("js", func(js *jobset.JobSet) {
			js.Spec.SuccessPolicy = &jobset.SuccessPolicy{Operator: jobset.OperatorAny, TargetReplicatedJobs: []string{"leader"}}
		}))
		m := withMetrics(fx)
		fx.sync("js")
		fx.setJob("js-leader-0", completeJob)
		fx.failStatusWrites(1, errors.New("apiserver unavailable"))
		if err := fx.syncErr("js"); err == nil {
			t.Fatal("the failed status write was not reported")
		}
		if m.completed != 0 {
			t.Fatalf("a failed write counted: %d", m.completed)
		}
		for i := 0; i < 3; i++ {
			fx.sync("js")
		}
		if m.completed != 1 {
			t.Fatalf("completed = %d, want 1", m.completed)
		}
	})
	t.Run("deleted meanwhile", func(t *testing.T) {
		fx := newFixture(t, newJobSet("js"))
		m := withMetrics(fx)
		fx.sync("js")
		fx.setJob("js-workers-0", failJob("BackoffLimitExceeded", "x", t0))
		fx.failStatusWrites(1, apierrors.NewNotFound(schema.GroupResource{Group: jobset.GroupName, Resource: "jobsets"}, "js"))
		fx.sync("js")
		if len(m.failed) != 0 {
			t.Fatalf("a write to a deleted JobSet counted: %v", m.failed)
		}
	})
}

func TestRestartMetricsCountOnlyStoredRestarts(t *testing.T) {
	fx := newFixture(t, newJobSet("js", func(js *jobset.JobSet) {
		js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 1}
	}))
	m := withMetrics(fx)
	fx.sync("js")
	fx.setJob("js-leader-0", failJob("BackoffLimitExceeded", "x", t0))
	fx.failStatusWrites(1, conflict)
	if err := fx.syncErr("js"); !errors.Is(err, errConflict) {
		t.Fatalf("sync error = %v", err)
	}
	fx.sync("js") // failure policy, stored
	fx.sync("js") // delete
	fx.sync("js") // create
	if m.restarted != 1 || len(m.failed) != 0 {
		t.Fatalf("restarted = %d, failed = %v; want one restart", m.restarted, m.failed)
	}
	// The second failure exceeds maxRestarts.
	fx.setJob("js-leader-0", failJob("BackoffLimitExceeded", "x", t0))
	fx.sync("js")
	fx.sync("js")
	if m.restarted != 1 || m.failed[reasonReachedMaxRestarts] != 1 {
		t.Fatalf("restarted = %d, failed = %v", m.restarted, m.failed)
	}
}

func TestSyncDoneReported(t *testing.T) {
	fx := newFixture(t, newJobSet("js"))
	m := withMetrics(fx)
	fx.refresh()
	fx.c.queue.Add(ns + "/js")
	fx.c.processNext(fx.ctx)
	if m.syncs != 1 || m.syncErrs != 0 {
		t.Fatalf("syncs = %d, errors = %d", m.syncs, m.syncErrs)
	}
}

// failMetadataWrites makes the next n JobSet writes to the main resource
// (the availability annotations) fail with err.
func (fx *fixture) failMetadataWrites(n int, err error) {
	fx.jsc.PrependReactor("patch", "jobsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "" || n == 0 {
			return false, nil, nil
		}
		n--
		return true, nil, err
	})
}

func TestInterruptionSamplesObservedOnceStored(t *testing.T) {
	fx := newFixture(t, newJobSet("js", func(js *jobset.JobSet) {
		js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 3}
		js.CreationTimestamp = metav1.NewTime(t0)
	}))
	m := withMetrics(fx)
	allReady := func() {
		for _, name := range allJobs {
			fx.setJob(name, readyJob)
		}
	}
	fx.clock.Step(2 * time.Second)
	fx.sync("js") // creates the Jobs
	if !reflect.DeepEqual(m.jobsLatency, []time.Duration{2 * time.Second}) {
		t.Fatalf("job creation latency samples = %v, want one of 2s", m.jobsLatency)
	}
	allReady()
	fx.sync("js")
	if a := fx.jobSet("js").Annotations; a[jobsetapi.AvailableSinceAnnotation] == "" {
		t.Fatalf("not available: %v", a)
	}

	fx.clock.Step(time.Minute)
	fx.setJob("js-workers-1", failJob("BackoffLimitExceeded", "x", fx.clock.Now()))
	fx.sync("js") // restart decided, interruption starts
	got := fx.jobSet("js")
	if got.Status.Restarts != 1 || got.Annotations[jobsetapi.InterruptedSinceAnnotation] == "" || got.Annotations[jobsetapi.InterruptionsAnnotation] != "1" {
		t.Fatalf("restarts %d, annotations %v", got.Status.Restarts, got.Annotations)
	}
	if m.attempts[RestartReasonFailure] != 1 {
		t.Fatalf("execution attempts = %v", m.attempts)
	}
	fx.sync("js") // deletes the old attempt
	fx.sync("js") // creates the new one
	allReady()
	fx.clock.Step(30 * time.Second)

	// The write recording the recovery conflicts: no sample yet.
	fx.failMetadataWrites(1, conflict)
	if err := fx.syncErr("js"); !errors.Is(err, errConflict) {
		t.Fatalf("sync error = %v, want the conflict", err)
	}
	if len(m.recovered) != 0 {
		t.Fatalf("a conflicting write observed %v", m.recovered)
	}
	for i := 0; i < 3; i++ {
		fx.sync("js")
	}
	if !reflect.DeepEqual(m.recovered, []time.Duration{30 * time.Second}) {
		t.Fatalf("time to recover = %v, want one 30s sample", m.recovered)
	}
	if got := UptimeSeconds(mapReader(fx.jobSet("js").Annotations), fx.clock.Now().Add(10*time.Second)); got != 70 {
		t.Fatalf("uptime = %v, want 70", got)
	}

	// A controller restart (a fresh controller on the same objects)
	// observes nothing again.
	m2 := &countingMetrics{}
	fx2 := newFixture(t, fx.jobSet("js"))
	fx2.kube = fx.kube
	fx2.c.kube = fx.kube
	fx2.f = NewFactories(fx.kube, fx2.jsc, 0)
	c, err := New(fx.kube, fx2.jsc, fx2.f, Options{Recorder: fx2.rec, Clock: fx.clock, Parallelism: 4, Metrics: m2})
	if err != nil {
		t.Fatal(err)
	}
	fx2.c = c
	fx2.sync("js")
	if len(m2.recovered)+len(m2.jobsLatency)+len(m2.between) != 0 {
		t.Fatalf("restarted controller observed again: %+v", m2)
	}
}

// A controller that starts after a JobSet finished (a restart, a new
// leader) does not count the finish again.
func TestTerminalMetricsNotRecountedByANewController(t *testing.T) {
	fx := newFixture(t, newJobSet("js"))
	m := withMetrics(fx)
	fx.sync("js")
	fx.setJob("js-workers-0", failJob("BackoffLimitExceeded", "x", t0))
	fx.sync("js")
	fx.sync("js")
	if m.failed[reasonFailedJobs] != 1 {
		t.Fatalf("failed = %v, want FailedJobs once", m.failed)
	}

	var objs []runtime.Object
	objs = append(objs, fx.jobSet("js"))
	for _, j := range fx.jobs() {
		objs = append(objs, j.DeepCopy())
	}
	fx2 := newFixture(t, objs...)
	m2 := withMetrics(fx2)
	for i := 0; i < 3; i++ {
		fx2.sync("js")
	}
	if len(m2.failed) != 0 || m2.completed != 0 || len(m2.recovered) != 0 {
		t.Fatalf("the new controller counted again: failed %v, completed %d", m2.failed, m2.completed)
	}
}

// A sync working from a JobSet cached before the controller's own
// availability write waits for the cache instead of writing (and
// conflicting).
func TestStaleAvailabilityCacheWaits(t *testing.T) {
	fx := newFixture(t, newJobSet("js"))
	fx.sync("js")
	for _, name := range allJobs {
		fx.setJob(name, readyJob)
	}
	stale := fx.jobSet("js")
	fx.sync("js") // status and availability written
	if fx.jobSet("js").Annotations[jobsetapi.AvailableSinceAnnotation] == "" {
		t.Fatal("not available")
	}
	inf := fx.f.JobSet.Jobset().V1alpha2().JobSets().Informer()
	if err := inf.GetIndexer().Update(stale); err != nil {
		t.Fatal(err)
	}
	fx.jsc.ClearActions()
	d, err := fx.c.sync(fx.ctx, ns+"/js")
	if err != nil || d != staleRetry {
		t.Fatalf("sync on a stale copy = %v, %v; want a retry after %v", d, err, staleRetry)
	}
	if a := writes(fx.jsc.Actions()); len(a) != 0 {
		t.Fatalf("wrote from a stale copy: %v", a)
	}
	fx.sync("js") // caught up
}

// The Job creation latency is observed once per JobSet in a process, also
// when Jobs are created again later on the first attempt.
func TestJobCreationLatencyOnce(t *testing.T) {
	fx := newFixture(t, newJobSet("js", func(js *jobset.JobSet) {
		js.CreationTimestamp = metav1.NewTime(t0)
	}))
	m := withMetrics(fx)
	fx.clock.Step(time.Second)
	fx.sync("js")
	fx.sync("js") // the cache shows the Jobs
	if err := fx.kube.BatchV1().Jobs(ns).Delete(fx.ctx, "js-workers-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fx.sync("js") // recreates it
	if len(fx.jobs()) != 3 {
		t.Fatalf("jobs = %v", fx.jobNames())
	}
	if !reflect.DeepEqual(m.jobsLatency, []time.Duration{time.Second}) {
		t.Fatalf("job creation latency = %v, want one sample of 1s", m.jobsLatency)
	}
}
