// Package metricstest gives tests the metric families jobset-controller
// exports, so that alerting rules and dashboards can be checked against
// the real registry rather than against a list of names kept by hand.
package metricstest

import (
	"errors"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	jobsetapi "github.com/nativejobset/jobset/pkg/apis/jobset"
	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller"
	"github.com/nativejobset/jobset/pkg/controller/jobsetcache"
	ctrlmetrics "github.com/nativejobset/jobset/pkg/controller/metrics"
)

// Gather builds the registry the controller serves on /metrics (the same
// collectors jobset-controller registers at start), with one JobSet in the
// collector's cache, one item through a work queue named as the
// controller's, and every recorder event counted once, so that every
// family appears with all of its labels. It returns the gathered families.
func Gather() ([]*dto.MetricFamily, error) {
	reg := ctrlmetrics.NewRegistry()
	if err := ctrlmetrics.RegisterBuildInfo(reg, "v0.0.0-test", "0000000", "go"); err != nil {
		return nil, err
	}
	rec, err := ctrlmetrics.NewRecorder(reg)
	if err != nil {
		return nil, err
	}
	col := ctrlmetrics.NewJobSetCollector(0)
	if err := reg.Register(col); err != nil {
		return nil, err
	}
	provider := ctrlmetrics.NewWorkqueueProvider(reg)

	js := &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "js", Annotations: map[string]string{
			jobsetapi.UptimeSecondsAnnotation: "1.000",
		}},
		Spec: jobset.JobSetSpec{ReplicatedJobs: []jobset.ReplicatedJob{{Name: "w", Replicas: ptr.To[int32](1)}}},
		Status: jobset.JobSetStatus{Conditions: []metav1.Condition{
			{Type: string(jobset.JobSetFailed), Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Now())},
		}},
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := idx.Add(js); err != nil {
		return nil, err
	}
	col.SetLister(jobsetcache.Summaries{Indexer: idx})

	// The controller's queue (pkg/controller: Name "jobset"), with one key
	// processed and one retried.
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "jobset", MetricsProvider: provider})
	defer q.ShutDown()
	q.Add("ns/js")
	key, _ := q.Get()
	q.AddRateLimited(key)
	q.Done(key)

	rec.Restarted(js, controller.RestartReasonFailure)
	rec.ExecutionAttemptStarted(js, controller.RestartReasonFailure)
	rec.Recovered(js, time.Second)
	rec.Interrupted(js, time.Minute)
	rec.JobsCreated(js, 1)
	rec.JobsCreatedLatency(js, time.Second)
	rec.Completed(js)
	rec.Failed(js, "FailurePolicyAction")
	rec.SyncDone(time.Millisecond, errors.New("conflict"))

	return reg.Gather()
}

// Family is a metric family's type and the label names its series carry.
type Family struct {
	Type   dto.MetricType
	Labels map[string]bool
}

// Families returns Gather's families by name.
func Families() (map[string]Family, error) {
	fams, err := Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]Family{}
	for _, f := range fams {
		labels := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		out[f.GetName()] = Family{Type: f.GetType(), Labels: labels}
	}
	return out, nil
}
