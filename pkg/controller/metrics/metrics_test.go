package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/util/workqueue"
)

func TestRecorder(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	r, err := NewRecorder(reg)
	if err != nil {
		t.Fatal(err)
	}
	js := testJobSet("ns", "a")
	r.Restarted(js, "RestartJobSet")
	r.Restarted(js, "RestartJobSetAndIgnoreMaxRestarts")
	r.JobRestarted(js, "a-workers-0", "RestartJob")
	r.Completed(js)
	r.Failed(js, "ReachedMaxRestarts")
	r.JobsCreated(js, 4)
	r.SyncDone(3*time.Millisecond, nil)
	r.SyncDone(time.Second, errors.New("boom"))

	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP jobset_completed_total JobSets the controller marked Completed.
# TYPE jobset_completed_total counter
jobset_completed_total 1
# HELP jobset_failed_total JobSets the controller marked Failed, by condition reason.
# TYPE jobset_failed_total counter
jobset_failed_total{reason="ReachedMaxRestarts"} 1
# HELP jobset_jobs_created_total Child Jobs created by the controller.
# TYPE jobset_jobs_created_total counter
jobset_jobs_created_total 4
# HELP jobset_reconcile_errors_total Syncs of a JobSet key that ended with an error (and were requeued), status write conflicts included.
# TYPE jobset_reconcile_errors_total counter
jobset_reconcile_errors_total 1
# HELP jobset_restarts_total Whole-JobSet restarts decided by the controller, by reason.
# TYPE jobset_restarts_total counter
jobset_restarts_total{reason="failure"} 2
`), "jobset_completed_total", "jobset_failed_total", "jobset_jobs_created_total", "jobset_reconcile_errors_total", "jobset_restarts_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(r.reconcileDuration); n != 1 {
		t.Fatalf("histogram series = %d", n)
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
