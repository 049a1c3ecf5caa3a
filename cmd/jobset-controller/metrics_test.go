package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller/jobsetcache"
)

func TestMetricsFlags(t *testing.T) {
	d := defaultOptions()
	if d.metricsAddr != "127.0.0.1:8080" || d.metricsMaxJobSets != 0 {
		t.Fatalf("defaults: %q %d", d.metricsAddr, d.metricsMaxJobSets)
	}
	o := defaultOptions()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse([]string{"--metrics-bind-address=", "--metrics-max-jobsets=500"}); err != nil {
		t.Fatal(err)
	}
	if o.metricsAddr != "" || o.metricsMaxJobSets != 500 {
		t.Fatalf("options = %q %d", o.metricsAddr, o.metricsMaxJobSets)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	o.metricsMaxJobSets = -1
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "--metrics-max-jobsets") {
		t.Fatalf("validate = %v", err)
	}
}

func TestMetricsServed(t *testing.T) {
	m, err := newControllerMetrics(0)
	if err != nil {
		t.Fatal(err)
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	js := &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train"},
		Spec:       jobset.JobSetSpec{ReplicatedJobs: []jobset.ReplicatedJob{{Name: "workers", Replicas: ptr.To[int32](4)}}},
		Status: jobset.JobSetStatus{Conditions: []metav1.Condition{
			{Type: string(jobset.JobSetCompleted), Status: metav1.ConditionTrue},
		}},
	}
	if err := idx.Add(js); err != nil {
		t.Fatal(err)
	}
	m.jobsets.SetLister(jobsetcache.Summaries{Indexer: idx})
	m.recorder.Failed(js, "FailedJobs")
	m.recorder.SyncDone(time.Millisecond, nil)
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "jobset", MetricsProvider: m.workqueue})
	defer q.ShutDown()
	q.Add("ns/train")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := serveMetrics(ctx, "127.0.0.1:0", m.handler(false), false)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	text := string(body)
	for _, want := range []string{
		`jobset_restarts_total{reason="failure"} 0`,
		`jobset_failed_total{jobset_name="train",namespace="ns"} 1`,
		`jobset_failed_by_reason_total{reason="FailedJobs"} 1`,
		`jobset_reconcile_duration_seconds_count 1`,
		`jobset_reconcile_errors_total 0`,
		`workqueue_depth{name="jobset"} 1`,
		`workqueue_adds_total{name="jobset"} 1`,
		`workqueue_queue_duration_seconds_bucket{name="jobset",`,
		`kube_jobset_specified_replicas{jobset="train",namespace="ns",replicatedjob="workers"} 4`,
		`kube_jobset_ready_replicas{jobset="train",namespace="ns",replicatedjob="workers"} 0`,
		`kube_jobset_status_condition{condition="Completed",jobset="train",namespace="ns",status="true"} 1`,
		`go_goroutines `,
		`process_start_time_seconds `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}
}

// TestProfilingHandlers: /debug/pprof/ is served only with --profiling.
func TestProfilingHandlers(t *testing.T) {
	m, err := newControllerMetrics(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, profiling := range []bool{false, true} {
		rec := httptest.NewRecorder()
		m.handler(profiling).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/heap?debug=1", nil))
		want := http.StatusNotFound
		if profiling {
			want = http.StatusOK
		}
		if rec.Code != want {
			t.Errorf("profiling=%v: GET /debug/pprof/heap: %d, want %d", profiling, rec.Code, want)
		}
	}
}
