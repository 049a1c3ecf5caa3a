package controller

import (
	"errors"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// countingMetrics records the calls of the Metrics interface.
type countingMetrics struct {
	mu                                 sync.Mutex
	restarted, jobRestarted, completed int
	failed                             map[string]int
	jobsCreated, syncs, syncErrs       int
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
