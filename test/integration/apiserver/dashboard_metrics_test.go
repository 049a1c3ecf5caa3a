package apiserver

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nativejobset/jobset/test/integration/framework"
	"github.com/nativejobset/jobset/test/metricslist"
)

// The jobset-apiserver families the Grafana dashboard uses
// (hack/dashboard/apiserver-metrics.txt; the dashboard's own test ties
// every query to that list) are served by the real server with the listed
// type and labels, once it answered some JobSet requests.
func TestDashboardMetricsServed(t *testing.T) {
	want, err := metricslist.Read(filepath.Join("..", "..", "..", "hack", "dashboard", "apiserver-metrics.txt"))
	if err != nil {
		t.Fatal(err)
	}
	s := framework.StartServer(t)
	ctx := context.Background()
	js := mustCreate(t, s, newJobSet("default", "dashboard"))
	if _, err := s.Client.JobsetV1alpha2().JobSets("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Client.JobsetV1alpha2().JobSets("default").Delete(ctx, js.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	raw := newRawClient(t, s.Config)
	r := raw.get(t, "/metrics", "Accept", "text/plain")
	if r.code != http.StatusOK {
		t.Fatalf("/metrics: %v", r)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	for name, w := range want {
		f, ok := fams[name]
		if !ok {
			t.Errorf("%s is not served", name)
			continue
		}
		if got := strings.ToLower(f.GetType().String()); got != w.Type {
			t.Errorf("%s is a %s, the list says %s", name, got, w.Type)
		}
		have := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				have[l.GetName()] = true
			}
		}
		for _, l := range w.Labels {
			if !have[l] {
				t.Errorf("%s has no label %q", name, l)
			}
		}
		// The dashboard selects resource="jobsets" and group="jobset.x-k8s.io".
		if have["resource"] && !hasSeries(f, "resource", "jobsets") {
			t.Errorf("%s has no series for resource jobsets", name)
		}
		if have["group"] && !hasSeries(f, "group", "jobset.x-k8s.io") {
			t.Errorf("%s has no series for group jobset.x-k8s.io", name)
		}
	}
}

// hasSeries reports whether a family has a series with the label value.
func hasSeries(f *dto.MetricFamily, label, value string) bool {
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				return true
			}
		}
	}
	return false
}
