package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/util/workqueue"

	"github.com/nativejobset/jobset/pkg/controller"
)

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

func TestRecorder(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	r, err := NewRecorder(reg)
	if err != nil {
		t.Fatal(err)
	}
	js := testJobSet("ns", "a")
	r.Restarted(js, controller.RestartReasonFailure)
	r.Restarted(js, controller.RestartReasonFailure)
	r.ExecutionAttemptStarted(js, controller.RestartReasonFailure)
	r.ExecutionAttemptStarted(js, controller.RestartReasonResume)
	r.ExecutionAttemptStarted(js, controller.RestartReasonResume)
	r.Recovered(js, 42*time.Second)
	r.Interrupted(js, time.Hour)
	r.JobsCreatedLatency(js, 300*time.Millisecond)
	r.JobRestarted(js, "a-workers-0", "RestartJob")
	r.Completed(js)
	r.Failed(js, "ReachedMaxRestarts")
	r.JobsCreated(js, 4)
	r.SyncDone(3*time.Millisecond, nil)
	r.SyncDone(time.Second, errors.New("boom"))

	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP jobset_completed_total JobSets the controller marked Completed, per JobSet (as upstream).
# TYPE jobset_completed_total counter
jobset_completed_total{jobset_name="a",namespace="ns"} 1
# HELP jobset_failed_total JobSets the controller marked Failed, per JobSet (as upstream).
# TYPE jobset_failed_total counter
jobset_failed_total{jobset_name="a",namespace="ns"} 1
# HELP jobset_failed_by_reason_total JobSets the controller marked Failed, by condition reason.
# TYPE jobset_failed_by_reason_total counter
jobset_failed_by_reason_total{reason="ReachedMaxRestarts"} 1
# HELP jobset_jobs_created_total Child Jobs created by the controller.
# TYPE jobset_jobs_created_total counter
jobset_jobs_created_total 4
# HELP jobset_reconcile_errors_total Syncs of a JobSet key that ended with an error (and were requeued), status write conflicts included.
# TYPE jobset_reconcile_errors_total counter
jobset_reconcile_errors_total 1
# HELP jobset_execution_attempts_total New execution attempts of JobSets (growth of status.executionAttempts), by reason (failure, resume, update).
# TYPE jobset_execution_attempts_total counter
jobset_execution_attempts_total{reason="failure"} 1
jobset_execution_attempts_total{reason="resume"} 2
jobset_execution_attempts_total{reason="update"} 0
# HELP jobset_restarts_total Whole-JobSet restarts decided by the controller, by reason (failure: a failure policy restart; update: a restart after a template update).
# TYPE jobset_restarts_total counter
jobset_restarts_total{reason="failure"} 2
jobset_restarts_total{reason="update"} 0
`), "jobset_execution_attempts_total", "jobset_completed_total", "jobset_failed_total", "jobset_failed_by_reason_total", "jobset_jobs_created_total", "jobset_reconcile_errors_total", "jobset_restarts_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(r.reconcileDuration); n != 1 {
		t.Fatalf("histogram series = %d", n)
	}
	for name, h := range map[string]prometheus.Histogram{
		"time to recover": r.timeToRecover, "time between": r.timeBetween, "job creation": r.jobCreation,
	} {
		if n := histogramCount(t, h); n != 1 {
			t.Errorf("%s: %d samples, want 1", name, n)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	// A second recorder in the same registry is refused, not silently
	// merged.
	if _, err := NewRecorder(reg); err == nil {
		t.Fatal("registering twice succeeded")
	}
}

func TestWorkqueueProvider(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	p := NewWorkqueueProvider(reg)
	// Registering again in the same registry reuses the families.
	if p2 := NewWorkqueueProvider(reg); p2.depth != p.depth {
		t.Fatal("second provider did not reuse the registered families")
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		// The retried key stays out of the queue during the test.
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Hour, time.Hour),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "jobset", MetricsProvider: p})
	defer q.ShutDown()
	q.Add("ns/a")
	q.Add("ns/b")
	q.AddRateLimited("ns/c")
	k, _ := q.Get()
	q.Done(k)

	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP workqueue_adds_total Total number of adds handled by the workqueue.
# TYPE workqueue_adds_total counter
workqueue_adds_total{name="jobset"} 2
# HELP workqueue_depth Current depth of the workqueue.
# TYPE workqueue_depth gauge
workqueue_depth{name="jobset"} 1
# HELP workqueue_retries_total Total number of retries handled by the workqueue.
# TYPE workqueue_retries_total counter
workqueue_retries_total{name="jobset"} 1
`), "workqueue_adds_total", "workqueue_depth", "workqueue_retries_total"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"workqueue_queue_duration_seconds", "workqueue_work_duration_seconds",
		"workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 1 {
			t.Errorf("%s: %d series, err %v", name, n, err)
		}
	}
}
