package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	dto "github.com/prometheus/client_model/go"

	"github.com/nativejobset/jobset/pkg/controller/metrics/metricstest"
	"github.com/nativejobset/jobset/test/metricslist"
)

var (
	committed = filepath.Join("..", "..", "artifacts", "monitoring", "dashboard.json")
	docsPage  = filepath.Join("..", "..", "docs", "operations", "dashboard.md")
)

// The committed file is what the generator writes ('make dashboard'
// rewrites it; 'make verify-dashboard' fails when it is stale).
func TestCommittedDashboardIsGenerated(t *testing.T) {
	want, err := render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the generator's output: run 'make dashboard'", committed)
	}
	page, err := os.ReadFile(docsPage)
	if err != nil {
		t.Fatal(err)
	}
	section, err := panelReference(want)
	if err != nil {
		t.Fatal(err)
	}
	wantPage, err := replaceSection(page, section)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(page, wantPage) {
		t.Errorf("the panel reference of %s is stale: run 'make dashboard'", docsPage)
	}
}

func readDashboard(t *testing.T) dashboardJSON {
	t.Helper()
	data, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboardJSON
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// panels flattens rows: every panel that is not a row.
func (d dashboardJSON) panels() []panelJSON {
	var out []panelJSON
	var walk func([]panelJSON)
	walk = func(ps []panelJSON) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Panels)
	return out
}

// exportedFamilies is what the panels may use: the controller's real
// registry (metricstest.Gather, every family present) and the
// jobset-apiserver families of apiserver-metrics.txt, which the
// integration test checks against the real server.
func exportedFamilies(t *testing.T) map[string]family {
	t.Helper()
	ctrl, err := metricstest.Families()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]family{}
	for name, f := range ctrl {
		out[name] = family{typ: typeName(f.Type), labels: f.Labels}
	}
	api, err := metricslist.Read("apiserver-metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range api {
		if _, ok := out[name]; ok {
			t.Fatalf("%s is both in the controller's registry and in apiserver-metrics.txt", name)
		}
		labels := map[string]bool{}
		for _, l := range f.Labels {
			labels[l] = true
		}
		out[name] = family{typ: f.Type, labels: labels}
	}
	return out
}

func typeName(t dto.MetricType) string {
	switch t {
	case dto.MetricType_COUNTER:
		return "counter"
	case dto.MetricType_GAUGE:
		return "gauge"
	case dto.MetricType_HISTOGRAM:
		return "histogram"
	case dto.MetricType_SUMMARY:
		return "summary"
	}
	return "untyped"
}

func newChecker(t *testing.T, d dashboardJSON) *checker {
	t.Helper()
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	return &checker{families: exportedFamilies(t), variables: vars}
}

// Every query of every panel parses, names only exported metrics and
// labels, uses each metric as its type requires, and its legend names
// labels the result carries.
func TestPanelQueries(t *testing.T) {
	d := readDashboard(t)
	c := newChecker(t, d)
	panels := d.panels()
	if len(panels) < 20 {
		t.Fatalf("%d panels; the dashboard lost most of them", len(panels))
	}
	used := map[string]bool{}
	for _, p := range panels {
		if p.Title == "" || p.Description == "" {
			t.Errorf("panel %q needs a title and a description", p.Title)
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not query the $datasource variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, err := range c.check(tg.Expr, tg.LegendFormat) {
				t.Errorf("panel %q, query %s: %s\n\t%v", p.Title, tg.RefID, tg.Expr, err)
			}
			if e, _ := c.parse(tg.Expr); e != nil {
				for _, s := range c.selectors(e) {
					used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(s.name, "_bucket"), "_count"), "_sum")] = true
				}
			}
		}
	}
	// What the dashboard is for.
	for _, m := range []string{
		"jobset_uptime_seconds", "jobset_interruption_seconds",
		"jobset_time_to_recover_seconds", "jobset_time_between_interruptions_seconds",
		"kube_jobset_specified_replicas", "kube_jobset_ready_replicas", "kube_jobset_active_replicas",
		"kube_jobset_succeeded_replicas", "kube_jobset_failed_replicas", "kube_jobset_suspended_replicas",
		"kube_jobset_status_condition", "jobset_restarts_total", "jobset_execution_attempts_total",
		"workqueue_depth", "workqueue_queue_duration_seconds", "workqueue_retries_total",
		"apiserver_request_duration_seconds", "apiserver_request_total",
	} {
		if !used[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
}

// Panels sit inside Grafana's 24-column grid without overlapping, with
// unique ids, and the SDK reads the file back.
func TestLayout(t *testing.T) {
	data, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	plugins.RegisterDefaultPlugins()
	var sdk dashboard.Dashboard
	if err := json.Unmarshal(data, &sdk); err != nil {
		t.Fatalf("the SDK does not read %s back: %v", committed, err)
	}
	type rect struct {
		title      string
		x, y, w, h int
	}
	var placed []rect
	ids := map[uint32]string{}
	for _, p := range sdk.Panels {
		var r rect
		var id uint32
		switch {
		case p.Panel != nil && p.Panel.GridPos != nil && p.Panel.Id != nil:
			g := p.Panel.GridPos
			r, id = rect{*p.Panel.Title, int(g.X), int(g.Y), int(g.W), int(g.H)}, *p.Panel.Id
		case p.RowPanel != nil && p.RowPanel.GridPos != nil:
			g := p.RowPanel.GridPos
			r, id = rect{*p.RowPanel.Title, int(g.X), int(g.Y), int(g.W), int(g.H)}, p.RowPanel.Id
		default:
			t.Errorf("a panel without a position or id: %+v", p)
			continue
		}
		if other, ok := ids[id]; ok {
			t.Errorf("panels %q and %q share the id %d", other, r.title, id)
		}
		ids[id] = r.title
		if r.x < 0 || r.w <= 0 || r.h <= 0 || r.x+r.w > 24 {
			t.Errorf("panel %q at x=%d w=%d h=%d leaves the 24-column grid", r.title, r.x, r.w, r.h)
		}
		for _, o := range placed {
			if r.x < o.x+o.w && o.x < r.x+r.w && r.y < o.y+o.h && o.y < r.y+r.h {
				t.Errorf("panels %q and %q overlap", o.title, r.title)
			}
		}
		placed = append(placed, r)
	}
}

// The variables' label_values queries name exported metrics and labels.
func TestVariableQueries(t *testing.T) {
	d := readDashboard(t)
	c := newChecker(t, d)
	n := 0
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		n++
		q, ok := v.Query.(string)
		if !ok {
			t.Errorf("variable %s: query %v is not a string", v.Name, v.Query)
			continue
		}
		for _, err := range c.checkVariableQuery(q) {
			t.Errorf("variable %s: %v", v.Name, err)
		}
	}
	if n < 3 {
		t.Errorf("%d query variables, want namespace, jobset and apiserver_job", n)
	}
}

// The checker catches the mistakes it is there for, and accepts the
// forms the dashboard uses.
func TestCheckerRejectsWrongQueries(t *testing.T) {
	c := &checker{
		families:  exportedFamilies(t),
		variables: map[string]bool{"namespace": true, "window": true},
	}
	for _, tc := range []struct{ expr, legend string }{
		{`jobset_uptime_second{namespace=~"$namespace"}`, ""},                                 // no such metric
		{`rate(jobset_restarts_totl[5m])`, ""},                                                // no such metric
		{`apiserver_requests_total`, ""},                                                      // no such metric
		{`rate(jobset_uptime_seconds[5m])`, ""},                                               // rate on a gauge
		{`jobset_restarts_total`, ""},                                                         // a counter as is
		{`deriv(jobset_restarts_total[5m])`, ""},                                              // a gauge function on a counter
		{`histogram_quantile(0.9, sum(rate(jobset_time_to_recover_seconds_bucket[5m])))`, ""}, // le dropped
		{`histogram_quantile(0.9, rate(jobset_time_to_recover_seconds_count[5m]))`, ""},       // not the buckets
		{`histogram_quantile(90, sum by (le) (rate(jobset_time_to_recover_seconds_bucket[5m])))`, ""},
		{`sum(rate(jobset_time_to_recover_seconds_bucket[5m]))`, ""},               // buckets outside histogram_quantile
		{`jobset_uptime_seconds{jobset_name="x"}`, ""},                             // a label it does not have
		{`sum by (reason) (jobset_uptime_seconds)`, ""},                            // grouping by a label it does not have
		{`sum by (reason) (rate(jobset_restarts_total[5m]))`, "{{jobset}}"},        // legend label not in the result
		{`jobset_uptime_seconds{namespace=~"$nmespace"}`, ""},                      // unknown variable
		{`sum(rate(jobset_restarts_total[5m])`, ""},                                // syntax
		{`jobset_completed_total or vector(0)`, ""},                                // a counter as is
		{`jobset_completed_total unless jobset_completed_total offset $windw`, ""}, // unknown variable
	} {
		if errs := c.check(tc.expr, tc.legend); len(errs) == 0 {
			t.Errorf("%s (legend %q) passed the checks", tc.expr, tc.legend)
		}
	}
	for _, tc := range []struct{ expr, legend string }{
		{`jobset_uptime_seconds{namespace=~"$namespace"}`, "{{namespace}}/{{jobset}}"},
		{`sum by (reason) (increase(jobset_restarts_total[$window]))`, "{{reason}}"},
		{`histogram_quantile(0.99, sum by (le, verb) (rate(apiserver_request_duration_seconds_bucket{resource="jobsets"}[$__rate_interval])))`, "{{verb}}"},
		{`sum(increase(jobset_time_to_recover_seconds_bucket{le="600"}[1h]))`, ""},
		{`sum(increase(jobset_time_to_recover_seconds_bucket{le=~"600|600\\.0"}[1h]))`, ""},
		{`count(jobset_interruption_seconds > 0) or vector(0)`, ""},
		{`sum by (namespace) ((jobset_completed_total unless jobset_completed_total offset $window) or increase(jobset_completed_total[$window]))`, "{{namespace}}"},
	} {
		for _, err := range c.check(tc.expr, tc.legend) {
			t.Errorf("%s (legend %q): %v", tc.expr, tc.legend, err)
		}
	}
	for _, q := range []string{
		`label_values(kube_jobset_specified_replicas{namespace=~"$namespace"}, jobsets)`,
		`label_values(kube_jobset_specified_replica, namespace)`,
	} {
		if len(c.checkVariableQuery(q)) == 0 {
			t.Errorf("variable query %s passed the checks", q)
		}
	}
}
