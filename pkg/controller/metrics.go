package controller

import (
	"time"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// Metrics receives the controller's notable events; pkg/controller/metrics
// has the Prometheus implementation, NoopMetrics is the default.
//
// Restarted, JobRestarted, Completed and Failed are called only after the
// status write carrying the decision succeeded (like events), so a write
// that conflicts and is retried counts once.
type Metrics interface {
	// Restarted: a whole-JobSet restart was decided (action is the
	// failure policy action).
	Restarted(js *jobset.JobSet, action string)
	// JobRestarted: a single child Job restart was decided.
	JobRestarted(js *jobset.JobSet, job, action string)
	// Completed: the JobSet reached Completed.
	Completed(js *jobset.JobSet)
	// Failed: the JobSet reached Failed with the given reason.
	Failed(js *jobset.JobSet, reason string)
	// JobsCreated: n child Jobs were created in one sync.
	JobsCreated(js *jobset.JobSet, n int)
	// SyncDone: one sync of a JobSet key ended.
	SyncDone(d time.Duration, err error)
}

// NoopMetrics discards everything.
type NoopMetrics struct{}

func (NoopMetrics) Restarted(*jobset.JobSet, string)            {}
func (NoopMetrics) JobRestarted(*jobset.JobSet, string, string) {}
func (NoopMetrics) Completed(*jobset.JobSet)                    {}
func (NoopMetrics) Failed(*jobset.JobSet, string)               {}
func (NoopMetrics) JobsCreated(*jobset.JobSet, int)             {}
func (NoopMetrics) SyncDone(time.Duration, error)               {}
