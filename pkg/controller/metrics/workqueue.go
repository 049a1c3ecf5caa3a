package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Workqueue metric names follow k8s.io/component-base's workqueue
// provider, so dashboards written for kube-controller-manager work as is.
const workqueueSubsystem = "workqueue"

// WorkqueueProvider is a workqueue.MetricsProvider backed by a Prometheus
// registry. Each metric is labelled with the queue's name.
type WorkqueueProvider struct {
	depth          *prometheus.GaugeVec
	adds           *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	workDuration   *prometheus.HistogramVec
	unfinished     *prometheus.GaugeVec
	longestRunning *prometheus.GaugeVec
	retries        *prometheus.CounterVec
}

var _ workqueue.MetricsProvider = (*WorkqueueProvider)(nil)

// NewWorkqueueProvider registers the work queue metric families in reg.
// Registering twice in the same registry reuses the first families.
func NewWorkqueueProvider(reg prometheus.Registerer) *WorkqueueProvider {
	name := []string{"name"}
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 12) // 10ns .. ~1000s
	return &WorkqueueProvider{
		depth: registerOrGet(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: workqueueSubsystem, Name: "depth",
			Help: "Current depth of the workqueue.",
		}, name)),
		adds: registerOrGet(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: workqueueSubsystem, Name: "adds_total",
			Help: "Total number of adds handled by the workqueue.",
		}, name)),
		latency: registerOrGet(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: workqueueSubsystem, Name: "queue_duration_seconds",
			Help: "How long in seconds an item stays in the workqueue before being requested.", Buckets: buckets,
		}, name)),
		workDuration: registerOrGet(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: workqueueSubsystem, Name: "work_duration_seconds",
			Help: "How long in seconds processing an item from the workqueue takes.", Buckets: buckets,
		}, name)),
		unfinished: registerOrGet(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: workqueueSubsystem, Name: "unfinished_work_seconds",
			Help: "How many seconds of work has been done that is in progress and hasn't been observed by work_duration.",
		}, name)),
		longestRunning: registerOrGet(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: workqueueSubsystem, Name: "longest_running_processor_seconds",
			Help: "How many seconds has the longest running processor for the workqueue been running.",
		}, name)),
		retries: registerOrGet(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: workqueueSubsystem, Name: "retries_total",
			Help: "Total number of retries handled by the workqueue.",
		}, name)),
	}
}

func (p *WorkqueueProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.depth.WithLabelValues(name)
}

func (p *WorkqueueProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.adds.WithLabelValues(name)
}

func (p *WorkqueueProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.latency.WithLabelValues(name)
}

func (p *WorkqueueProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.workDuration.WithLabelValues(name)
}

func (p *WorkqueueProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.unfinished.WithLabelValues(name)
}

func (p *WorkqueueProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.longestRunning.WithLabelValues(name)
}

func (p *WorkqueueProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.retries.WithLabelValues(name)
}
