package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller/jobsetcache"
)

var scrapeTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func testJobSet(ns, name string) *jobset.JobSet {
	return &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{
			// 100s before the last transition, available for 20s since.
			"jobset.sigs.k8s.io/uptime-seconds":  "100.000",
			"jobset.sigs.k8s.io/available-since": "2026-01-02T03:03:45.000Z",
		}},
		Spec: jobset.JobSetSpec{ReplicatedJobs: []jobset.ReplicatedJob{
			{Name: "driver", Replicas: ptr.To[int32](1)},
			{Name: "workers", Replicas: ptr.To[int32](3)},
		}},
		Status: jobset.JobSetStatus{
			ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{
				// No status yet for driver: its counts are 0.
				{Name: "workers", Ready: 2, Active: 3, Succeeded: 1, Failed: 4, Suspended: 0},
			},
			Conditions: []metav1.Condition{
				{Type: "StartupPolicyCompleted", Status: metav1.ConditionTrue},
				{Type: "Suspended", Status: metav1.ConditionFalse},
			},
		},
	}
}

func lister(t *testing.T, objs ...*jobset.JobSet) (jobsetcache.Summaries, cache.Indexer) {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if err := idx.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return jobsetcache.Summaries{Indexer: idx}, idx
}

const oneJobSet = `
# HELP kube_jobset_active_replicas Number of active child Jobs of the replicatedJob.
# TYPE kube_jobset_active_replicas gauge
kube_jobset_active_replicas{jobset="a",namespace="ns",replicatedjob="driver"} 0
kube_jobset_active_replicas{jobset="a",namespace="ns",replicatedjob="workers"} 3
# HELP kube_jobset_failed_replicas Number of failed child Jobs of the replicatedJob.
# TYPE kube_jobset_failed_replicas gauge
kube_jobset_failed_replicas{jobset="a",namespace="ns",replicatedjob="driver"} 0
kube_jobset_failed_replicas{jobset="a",namespace="ns",replicatedjob="workers"} 4
# HELP kube_jobset_metrics_jobsets_skipped JobSets left out of the kube_jobset_* series by --metrics-max-jobsets in this scrape.
# TYPE kube_jobset_metrics_jobsets_skipped gauge
kube_jobset_metrics_jobsets_skipped 0
# HELP kube_jobset_ready_replicas Number of ready child Jobs of the replicatedJob (status.replicatedJobsStatus[].ready).
# TYPE kube_jobset_ready_replicas gauge
kube_jobset_ready_replicas{jobset="a",namespace="ns",replicatedjob="driver"} 0
kube_jobset_ready_replicas{jobset="a",namespace="ns",replicatedjob="workers"} 2
# HELP kube_jobset_specified_replicas Number of child Jobs the replicatedJob specifies (spec.replicatedJobs[].replicas).
# TYPE kube_jobset_specified_replicas gauge
kube_jobset_specified_replicas{jobset="a",namespace="ns",replicatedjob="driver"} 1
kube_jobset_specified_replicas{jobset="a",namespace="ns",replicatedjob="workers"} 3
# HELP kube_jobset_status_condition The JobSet's status conditions: 1 for the condition's current status (true, false or unknown), 0 for the others.
# TYPE kube_jobset_status_condition gauge
kube_jobset_status_condition{condition="StartupPolicyCompleted",jobset="a",namespace="ns",status="false"} 0
kube_jobset_status_condition{condition="StartupPolicyCompleted",jobset="a",namespace="ns",status="true"} 1
kube_jobset_status_condition{condition="StartupPolicyCompleted",jobset="a",namespace="ns",status="unknown"} 0
kube_jobset_status_condition{condition="Suspended",jobset="a",namespace="ns",status="false"} 1
kube_jobset_status_condition{condition="Suspended",jobset="a",namespace="ns",status="true"} 0
kube_jobset_status_condition{condition="Suspended",jobset="a",namespace="ns",status="unknown"} 0
# HELP kube_jobset_succeeded_replicas Number of succeeded child Jobs of the replicatedJob.
# TYPE kube_jobset_succeeded_replicas gauge
kube_jobset_succeeded_replicas{jobset="a",namespace="ns",replicatedjob="driver"} 0
kube_jobset_succeeded_replicas{jobset="a",namespace="ns",replicatedjob="workers"} 1
# HELP kube_jobset_suspended_replicas Number of suspended child Jobs of the replicatedJob.
# TYPE kube_jobset_suspended_replicas gauge
kube_jobset_suspended_replicas{jobset="a",namespace="ns",replicatedjob="driver"} 0
kube_jobset_suspended_replicas{jobset="a",namespace="ns",replicatedjob="workers"} 0
# HELP jobset_interruption_seconds Downtime so far of the JobSet's current interruption (suspended time excluded); 0 when it is not interrupted.
# TYPE jobset_interruption_seconds gauge
jobset_interruption_seconds{jobset="a",namespace="ns"} 0
# HELP jobset_uptime_seconds Total time the JobSet has been available (every Job of its current attempt ready or succeeded), suspended time excluded; frozen once it finished.
# TYPE jobset_uptime_seconds gauge
jobset_uptime_seconds{jobset="a",namespace="ns"} 120
`

func TestJobSetCollector(t *testing.T) {
	c := NewJobSetCollector(0)
	c.now = func() time.Time { return scrapeTime }
	// No lister yet (not leading): nothing but the skipped gauge.
	if n := testutil.CollectAndCount(c); n != 1 {
		t.Fatalf("without a lister: %d series, want 1", n)
	}
	l, idx := lister(t, testJobSet("ns", "a"))
	c.SetLister(l)
	if err := testutil.CollectAndCompare(c, strings.NewReader(oneJobSet)); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}

	// A deleted JobSet's series disappear on the next scrape.
	if err := idx.Delete(testJobSet("ns", "a")); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "kube_jobset_ready_replicas", "kube_jobset_status_condition", "jobset_uptime_seconds", "jobset_interruption_seconds"); n != 0 {
		t.Fatalf("after deletion: %d series, want 0", n)
	}
}

func TestJobSetCollectorMax(t *testing.T) {
	c := NewJobSetCollector(2)
	l, _ := lister(t, testJobSet("b", "x"), testJobSet("a", "z"), testJobSet("a", "y"))
	c.SetLister(l)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	// Two of three JobSets, picked by namespace then name.
	if n := testutil.CollectAndCount(c, "kube_jobset_specified_replicas"); n != 4 {
		t.Fatalf("specified series = %d, want 4 (2 JobSets x 2 replicatedJobs)", n)
	}
	if n := testutil.CollectAndCount(c, "jobset_uptime_seconds"); n != 2 {
		t.Fatalf("uptime series = %d, want 2", n)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kube_jobset_metrics_jobsets_skipped JobSets left out of the kube_jobset_* series by --metrics-max-jobsets in this scrape.
# TYPE kube_jobset_metrics_jobsets_skipped gauge
kube_jobset_metrics_jobsets_skipped 1
# HELP kube_jobset_specified_replicas Number of child Jobs the replicatedJob specifies (spec.replicatedJobs[].replicas).
# TYPE kube_jobset_specified_replicas gauge
kube_jobset_specified_replicas{jobset="y",namespace="a",replicatedjob="driver"} 1
kube_jobset_specified_replicas{jobset="y",namespace="a",replicatedjob="workers"} 3
kube_jobset_specified_replicas{jobset="z",namespace="a",replicatedjob="driver"} 1
kube_jobset_specified_replicas{jobset="z",namespace="a",replicatedjob="workers"} 3
`), "kube_jobset_metrics_jobsets_skipped", "kube_jobset_specified_replicas"); err != nil {
		t.Fatal(err)
	}
	c.SetLister(nil)
	if n := testutil.CollectAndCount(c, "kube_jobset_specified_replicas"); n != 0 {
		t.Fatalf("after SetLister(nil): %d series", n)
	}
}
