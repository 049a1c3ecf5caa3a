package metrics

import (
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller"
	"github.com/nativejobset/jobset/pkg/controller/jobsetcache"
)

var (
	rjLabels   = []string{"namespace", "jobset", "replicatedjob"}
	condLabels = []string{"namespace", "jobset", "condition", "status"}

	descSpecified = prometheus.NewDesc("kube_jobset_specified_replicas",
		"Number of child Jobs the replicatedJob specifies (spec.replicatedJobs[].replicas).", rjLabels, nil)
	descReady = prometheus.NewDesc("kube_jobset_ready_replicas",
		"Number of ready child Jobs of the replicatedJob (status.replicatedJobsStatus[].ready).", rjLabels, nil)
	descSucceeded = prometheus.NewDesc("kube_jobset_succeeded_replicas",
		"Number of succeeded child Jobs of the replicatedJob.", rjLabels, nil)
	descFailed = prometheus.NewDesc("kube_jobset_failed_replicas",
		"Number of failed child Jobs of the replicatedJob.", rjLabels, nil)
	descActive = prometheus.NewDesc("kube_jobset_active_replicas",
		"Number of active child Jobs of the replicatedJob.", rjLabels, nil)
	descSuspended = prometheus.NewDesc("kube_jobset_suspended_replicas",
		"Number of suspended child Jobs of the replicatedJob.", rjLabels, nil)
	descCondition = prometheus.NewDesc("kube_jobset_status_condition",
		"The JobSet's status conditions: 1 for the condition's current status (true, false or unknown), 0 for the others.", condLabels, nil)
	descUptime = prometheus.NewDesc("jobset_uptime_seconds",
		"Total time the JobSet has been available (every Job of its current attempt ready or succeeded), suspended time excluded; frozen once it finished.",
		[]string{"namespace", "jobset"}, nil)
	descInterruption = prometheus.NewDesc("jobset_interruption_seconds",
		"Downtime so far of the JobSet's current interruption (suspended time excluded); 0 when it is not interrupted.",
		[]string{"namespace", "jobset"}, nil)
	descTruncated = prometheus.NewDesc("kube_jobset_metrics_jobsets_skipped",
		"JobSets left out of the kube_jobset_* series by --metrics-max-jobsets in this scrape.", nil, nil)
)

// Lister lists the summaries of the JobSets to export
// (jobsetcache.Summaries).
type Lister interface {
	List() []jobsetcache.Summary
}

// JobSetCollector exports per-JobSet gauges from the JobSet lister at
// scrape time. It keeps no per-object state: a deleted JobSet's series
// disappear with it from the next scrape. Until SetLister is called (for
// instance while the process is not the leader) it exports no JobSet.
type JobSetCollector struct {
	lister     atomic.Pointer[Lister]
	maxJobSets int
	// now is the scrape time (a field for tests).
	now func() time.Time
}

var _ prometheus.Collector = (*JobSetCollector)(nil)

// NewJobSetCollector returns a collector exporting at most maxJobSets
// JobSets (the first ones by namespace and name); 0 means no limit.
func NewJobSetCollector(maxJobSets int) *JobSetCollector {
	return &JobSetCollector{maxJobSets: maxJobSets, now: time.Now}
}

// SetLister sets the lister read at scrape time; nil stops the export.
func (c *JobSetCollector) SetLister(l Lister) {
	if l == nil {
		c.lister.Store(nil)
		return
	}
	c.lister.Store(&l)
}

// Describe implements prometheus.Collector.
func (c *JobSetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSpecified, descReady, descSucceeded, descFailed, descActive, descSuspended, descCondition, descUptime, descInterruption, descTruncated} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *JobSetCollector) Collect(ch chan<- prometheus.Metric) {
	var list []jobsetcache.Summary
	if l := c.lister.Load(); l != nil {
		list = (*l).List()
	}
	skipped := 0
	if c.maxJobSets > 0 && len(list) > c.maxJobSets {
		// A stable choice, so the exported set does not flap between
		// scrapes.
		sort.Slice(list, func(i, j int) bool {
			if list[i].Namespace != list[j].Namespace {
				return list[i].Namespace < list[j].Namespace
			}
			return list[i].Name < list[j].Name
		})
		skipped = len(list) - c.maxJobSets
		list = list[:c.maxJobSets]
	}
	ch <- prometheus.MustNewConstMetric(descTruncated, prometheus.GaugeValue, float64(skipped))
	now := c.now()
	for _, js := range list {
		collectJobSet(ch, js)
		// The uptime is persisted up to the last transition; the running
		// available period is added at scrape time.
		ch <- prometheus.MustNewConstMetric(descUptime, prometheus.GaugeValue,
			controller.UptimeSeconds(js.Annotations.Annotation, now), js.Namespace, js.Name)
		ch <- prometheus.MustNewConstMetric(descInterruption, prometheus.GaugeValue,
			controller.InterruptionSeconds(js.Annotations.Annotation, now), js.Namespace, js.Name)
	}
}

func collectJobSet(ch chan<- prometheus.Metric, js jobsetcache.Summary) {
	gauge := func(d *prometheus.Desc, v int32, rj string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), js.Namespace, js.Name, rj)
	}
	status := make(map[string]*jobset.ReplicatedJobStatus, len(js.Status.ReplicatedJobsStatus))
	for i := range js.Status.ReplicatedJobsStatus {
		status[js.Status.ReplicatedJobsStatus[i].Name] = &js.Status.ReplicatedJobsStatus[i]
	}
	for _, rj := range js.ReplicatedJobs {
		gauge(descSpecified, ptr.Deref(rj.Replicas, 1), rj.Name)
		st := status[rj.Name]
		if st == nil {
			st = &jobset.ReplicatedJobStatus{}
		}
		gauge(descReady, st.Ready, rj.Name)
		gauge(descSucceeded, st.Succeeded, rj.Name)
		gauge(descFailed, st.Failed, rj.Name)
		gauge(descActive, st.Active, rj.Name)
		gauge(descSuspended, st.Suspended, rj.Name)
	}
	for _, cond := range js.Status.Conditions {
		for _, s := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown} {
			v := 0.0
			if cond.Status == s {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descCondition, prometheus.GaugeValue, v,
				js.Namespace, js.Name, cond.Type, strings.ToLower(string(s)))
		}
	}
}
