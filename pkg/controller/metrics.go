package controller

import (
	"time"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// Metrics receives the controller's notable events; pkg/controller/metrics
// has the Prometheus implementation, NoopMetrics is the default.
//
// Restarted, ExecutionAttemptStarted, JobRestarted, Completed and Failed
// are called only after the status write carrying the decision succeeded
// (like events), so a write that conflicts and is retried counts once. The
// availability samples (Recovered, Interrupted) are observed only after the
// annotation write that records their transition succeeded;
// JobsCreatedLatency once per JobSet by the sync that created its last
// missing Job (jobcreation.go).
type Metrics interface {
	// Restarted: a whole-JobSet restart was decided, for reason
	// RestartReasonFailure or RestartReasonUpdate.
	Restarted(js *jobset.JobSet, reason string)
	// ExecutionAttemptStarted: status.executionAttempts grew, for reason
	// RestartReasonFailure, RestartReasonResume or RestartReasonUpdate.
	ExecutionAttemptStarted(js *jobset.JobSet, reason string)
	// JobRestarted: a single child Job restart was decided.
	JobRestarted(js *jobset.JobSet, job, action string)
	// Completed: the JobSet reached Completed.
	Completed(js *jobset.JobSet)
	// Failed: the JobSet reached Failed with the given reason.
	Failed(js *jobset.JobSet, reason string)
	// JobsCreated: n child Jobs were created in one sync.
	JobsCreated(js *jobset.JobSet, n int)
	// JobsCreatedLatency: every Job of the first attempt exists, d after
	// the JobSet was created (or first resumed).
	JobsCreatedLatency(js *jobset.JobSet, d time.Duration)
	// Recovered: an interruption ended after d of downtime.
	Recovered(js *jobset.JobSet, d time.Duration)
	// Interrupted: an interruption started, d of uptime after the previous
	// one ended (not called for the first interruption).
	Interrupted(js *jobset.JobSet, d time.Duration)
	// SyncDone: one sync of a JobSet key ended.
	SyncDone(d time.Duration, err error)
}

// Reasons of a new execution attempt or a whole-JobSet restart.
const (
	RestartReasonFailure = "failure"
	RestartReasonResume  = "resume"
	// RestartReasonUpdate is a restart that applies a pending template
	// revision (update strategy Immediate, or a resume that must recreate
	// the Jobs).
	RestartReasonUpdate = "update"
)

// NoopMetrics discards everything.
type NoopMetrics struct{}

func (NoopMetrics) Restarted(*jobset.JobSet, string)                 {}
func (NoopMetrics) JobRestarted(*jobset.JobSet, string, string)      {}
func (NoopMetrics) Completed(*jobset.JobSet)                         {}
func (NoopMetrics) Failed(*jobset.JobSet, string)                    {}
func (NoopMetrics) JobsCreated(*jobset.JobSet, int)                  {}
func (NoopMetrics) SyncDone(time.Duration, error)                    {}
func (NoopMetrics) ExecutionAttemptStarted(*jobset.JobSet, string)   {}
func (NoopMetrics) JobsCreatedLatency(*jobset.JobSet, time.Duration) {}
func (NoopMetrics) Recovered(*jobset.JobSet, time.Duration)          {}
func (NoopMetrics) Interrupted(*jobset.JobSet, time.Duration)        {}
