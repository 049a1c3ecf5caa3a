package metricstest

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// Every kind of family the controller exports shows up, with its labels:
// the per-JobSet gauges, the recorder's counters and histograms (vectors
// included) and the work queue's.
func TestFamiliesCoverEverySource(t *testing.T) {
	fams, err := Families()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct {
		typ    dto.MetricType
		labels []string
	}{
		"kube_jobset_ready_replicas":                  {dto.MetricType_GAUGE, []string{"namespace", "jobset", "replicatedjob"}},
		"kube_jobset_status_condition":                {dto.MetricType_GAUGE, []string{"namespace", "jobset", "condition", "status"}},
		"jobset_uptime_seconds":                       {dto.MetricType_GAUGE, []string{"namespace", "jobset"}},
		"jobset_completed_total":                      {dto.MetricType_COUNTER, []string{"namespace", "jobset_name"}},
		"jobset_failed_by_reason_total":               {dto.MetricType_COUNTER, []string{"reason"}},
		"jobset_restarts_total":                       {dto.MetricType_COUNTER, []string{"reason"}},
		"jobset_time_to_recover_seconds":              {dto.MetricType_HISTOGRAM, nil},
		"jobset_build_info":                           {dto.MetricType_GAUGE, []string{"version", "revision", "goversion"}},
		"workqueue_depth":                             {dto.MetricType_GAUGE, []string{"name"}},
		"workqueue_retries_total":                     {dto.MetricType_COUNTER, []string{"name"}},
		"workqueue_queue_duration_seconds":            {dto.MetricType_HISTOGRAM, []string{"name"}},
		"workqueue_longest_running_processor_seconds": {dto.MetricType_GAUGE, []string{"name"}},
	} {
		f, ok := fams[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if f.Type != want.typ {
			t.Errorf("%s is a %v, want %v", name, f.Type, want.typ)
		}
		for _, l := range want.labels {
			if !f.Labels[l] {
				t.Errorf("%s has labels %v, want %s among them", name, f.Labels, l)
			}
		}
	}
}
