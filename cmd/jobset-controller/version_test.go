package main

import (
	"bytes"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/nativejobset/jobset/pkg/version"
)

func TestVersionFlag(t *testing.T) {
	var out bytes.Buffer
	// --version wins over the other flags on the line.
	o, exit, err := parseArgs([]string{"--kubeconfig=/nonexistent", "--version"}, &out)
	if err != nil || !exit || o != nil {
		t.Fatalf("parseArgs = %v, %v, %v; want nil options, exit, no error", o, exit, err)
	}
	if got, want := out.String(), version.String("jobset-controller")+"\n"; got != want {
		t.Fatalf("printed %q, want %q", got, want)
	}
	out.Reset()
	o, exit, err = parseArgs([]string{"--workers=3"}, &out)
	if err != nil || exit || o == nil || o.workers != 3 || out.Len() != 0 {
		t.Fatalf("without --version: %+v, %v, %v, printed %q", o, exit, err, out.String())
	}
}

func TestBuildInfoMetric(t *testing.T) {
	m, err := newControllerMetrics(0)
	if err != nil {
		t.Fatal(err)
	}
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	v := version.Get()
	want := map[string]string{"version": v.Version, "revision": v.Commit, "goversion": v.GoVersion}
	for _, f := range families {
		if f.GetName() != "jobset_build_info" {
			continue
		}
		if len(f.Metric) != 1 {
			t.Fatalf("jobset_build_info has %d series, want 1", len(f.Metric))
		}
		checkBuildInfo(t, f.Metric[0], want)
		return
	}
	t.Fatal("jobset_build_info is not in the registry")
}

func checkBuildInfo(t *testing.T, m *dto.Metric, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	if len(got) != len(want) {
		t.Errorf("labels %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v || strings.TrimSpace(v) == "" {
			t.Errorf("label %s = %q, want %q (non-empty)", k, got[k], v)
		}
	}
	if m.GetGauge().GetValue() != 1 {
		t.Errorf("value %v, want 1", m.GetGauge().GetValue())
	}
}
