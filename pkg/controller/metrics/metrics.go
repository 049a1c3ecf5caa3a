// Package metrics exports the JobSet controller's Prometheus metrics:
// event counters and reconcile health (Recorder, an implementation of
// controller.Metrics), client-go work queue metrics (WorkqueueProvider) and
// per-JobSet gauges read from the JobSet lister at scrape time
// (JobSetCollector).
//
// Everything is registered in one plain prometheus.Registry owned by the
// caller, not in a process-global registry, so tests and several
// controllers in one process stay independent.
package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller"
)

// Histogram buckets, in seconds.
var (
	// Recoveries take from seconds (a pod restarted in place) to hours
	// (waiting for capacity).
	recoveryBuckets = []float64{1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 43200}
	// Training runs go minutes to weeks between interruptions.
	betweenBuckets = []float64{60, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400, 172800, 604800, 1209600}
	// Creating a JobSet's Jobs takes from milliseconds to minutes for
	// thousands of Jobs under client rate limits.
	jobCreationBuckets = prometheus.ExponentialBuckets(0.05, 2, 14) // 50ms .. ~410s
)

// NewRegistry returns a registry holding the Go runtime and process
// collectors, as every Kubernetes component's /metrics does.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Recorder implements controller.Metrics with Prometheus counters and a
// histogram. The controller calls the terminal and restart methods only
// once the status write carrying the transition succeeded, so each JobSet
// counts once per transition.
type Recorder struct {
	restarts          *prometheus.CounterVec
	attempts          *prometheus.CounterVec
	timeToRecover     prometheus.Histogram
	timeBetween       prometheus.Histogram
	jobCreation       prometheus.Histogram
	completed         *prometheus.CounterVec
	failed            *prometheus.CounterVec
	failedByReason    *prometheus.CounterVec
	jobsCreated       prometheus.Counter
	reconcileDuration prometheus.Histogram
	reconcileErrors   prometheus.Counter
}

var _ controller.Metrics = (*Recorder)(nil)

// NewRecorder creates the controller's counters and registers them in reg.
func NewRecorder(reg prometheus.Registerer) (*Recorder, error) {
	r := &Recorder{
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobset_restarts_total",
			Help: "Whole-JobSet restarts decided by the controller, by reason (failure: a failure policy restart; update: a restart after a template update).",
		}, []string{"reason"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobset_execution_attempts_total",
			Help: "New execution attempts of JobSets (growth of status.executionAttempts), by reason (failure, resume, update).",
		}, []string{"reason"}),
		timeToRecover: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "jobset_time_to_recover_seconds",
			Help:    "Downtime of each interruption of a JobSet that ended with the JobSet available again (suspended time excluded).",
			Buckets: recoveryBuckets,
		}),
		timeBetween: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "jobset_time_between_interruptions_seconds",
			Help:    "Available time of a JobSet between the end of one interruption and the start of the next.",
			Buckets: betweenBuckets,
		}),
		jobCreation: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "jobset_job_creation_latency_seconds",
			Help:    "Time from a JobSet's creation (or first resume, when created suspended) until the controller saw every child Job of its first execution attempt exist.",
			Buckets: jobCreationBuckets,
		}),
		// The two series upstream exports, with its names and labels, so
		// that dashboards and alerts written for upstream work.
		completed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobset_completed_total",
			Help: "JobSets the controller marked Completed, per JobSet (as upstream).",
		}, []string{"jobset_name", "namespace"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobset_failed_total",
			Help: "JobSets the controller marked Failed, per JobSet (as upstream).",
		}, []string{"jobset_name", "namespace"}),
		failedByReason: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobset_failed_by_reason_total",
			Help: "JobSets the controller marked Failed, by condition reason.",
		}, []string{"reason"}),
		jobsCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobset_jobs_created_total",
			Help: "Child Jobs created by the controller.",
		}),
		reconcileDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "jobset_reconcile_duration_seconds",
			Help:    "Duration of one sync of a JobSet key.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15), // 1ms .. ~16s
		}),
		reconcileErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobset_reconcile_errors_total",
			Help: "Syncs of a JobSet key that ended with an error (and were requeued), status write conflicts included.",
		}),
	}
	for _, c := range []prometheus.Collector{r.restarts, r.attempts, r.timeToRecover, r.timeBetween, r.jobCreation, r.completed, r.failed, r.failedByReason, r.jobsCreated, r.reconcileDuration, r.reconcileErrors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Expose the zero series of the known reasons, so rate() works from
	// the first scrape.
	for _, reason := range []string{controller.RestartReasonFailure, controller.RestartReasonUpdate} {
		r.restarts.WithLabelValues(reason)
	}
	for _, reason := range []string{controller.RestartReasonFailure, controller.RestartReasonResume, controller.RestartReasonUpdate} {
		r.attempts.WithLabelValues(reason)
	}
	return r, nil
}

// Restarted counts a whole-JobSet restart.
func (r *Recorder) Restarted(_ *jobset.JobSet, reason string) {
	r.restarts.WithLabelValues(reason).Inc()
}

// ExecutionAttemptStarted counts a new execution attempt.
func (r *Recorder) ExecutionAttemptStarted(_ *jobset.JobSet, reason string) {
	r.attempts.WithLabelValues(reason).Inc()
}

// JobsCreatedLatency observes the Job creation latency of one JobSet.
func (r *Recorder) JobsCreatedLatency(_ *jobset.JobSet, d time.Duration) {
	r.jobCreation.Observe(d.Seconds())
}

// Recovered observes the downtime of an interruption that ended.
func (r *Recorder) Recovered(_ *jobset.JobSet, d time.Duration) {
	r.timeToRecover.Observe(d.Seconds())
}

// Interrupted observes the uptime since the previous interruption.
func (r *Recorder) Interrupted(_ *jobset.JobSet, d time.Duration) {
	r.timeBetween.Observe(d.Seconds())
}

// JobRestarted is not exported yet (per-Job restarts are not JobSet
// restarts).
func (r *Recorder) JobRestarted(*jobset.JobSet, string, string) {}

// Completed counts a JobSet that reached Completed.
func (r *Recorder) Completed(js *jobset.JobSet) {
	r.completed.WithLabelValues(js.Name, js.Namespace).Inc()
}

// Failed counts a JobSet that reached Failed.
func (r *Recorder) Failed(js *jobset.JobSet, reason string) {
	r.failed.WithLabelValues(js.Name, js.Namespace).Inc()
	r.failedByReason.WithLabelValues(reason).Inc()
}

// JobsCreated counts created child Jobs.
func (r *Recorder) JobsCreated(_ *jobset.JobSet, n int) {
	if n > 0 {
		r.jobsCreated.Add(float64(n))
	}
}

// SyncDone observes a sync's duration and counts its error.
func (r *Recorder) SyncDone(d time.Duration, err error) {
	r.reconcileDuration.Observe(d.Seconds())
	if err != nil {
		r.reconcileErrors.Inc()
	}
}

// registerOrGet registers c, or returns the collector already registered
// with the same descriptors.
func registerOrGet[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(T); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}
