package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"

	"github.com/nativejobset/jobset/pkg/controller/metrics/metricstest"
)

// loadSeries turns the controller's gathered families into a promqltest
// load: 40 one-minute samples per series, counters and histograms growing
// by their gathered value each minute, gauges constant, with the target
// labels a scrape adds.
func loadSeries(fams []*dto.MetricFamily) string {
	var lines []string
	series := func(name string, labels map[string]string, start, step float64) {
		var parts []string
		for k, v := range labels {
			parts = append(parts, k+"="+strconv.Quote(v))
		}
		sort.Strings(parts)
		lines = append(lines, fmt.Sprintf("  %s{%s} %s+%sx40", name, strings.Join(parts, ", "),
			strconv.FormatFloat(start, 'f', -1, 64), strconv.FormatFloat(step, 'f', -1, 64)))
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			labels := map[string]string{"job": "jobset-controller", "instance": "10.0.0.1:8443"}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			with := func(k, v string) map[string]string {
				out := map[string]string{k: v}
				for a, b := range labels {
					out[a] = b
				}
				return out
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				series(f.GetName(), labels, 0, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				series(f.GetName(), labels, m.GetGauge().GetValue(), 0)
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					series(f.GetName()+"_bucket", with("le", strconv.FormatFloat(b.GetUpperBound(), 'f', -1, 64)), 0, float64(b.GetCumulativeCount()))
				}
				series(f.GetName()+"_bucket", with("le", "+Inf"), 0, float64(h.GetSampleCount()))
				series(f.GetName()+"_count", labels, 0, float64(h.GetSampleCount()))
				series(f.GetName()+"_sum", labels, 0, h.GetSampleSum())
			}
		}
	}
	return "load 1m\n" + strings.Join(lines, "\n") + "\n"
}

// Grafana's variables as a query sees them with every value selected.
var allSelected = strings.NewReplacer(
	"$namespace", ".*", "$jobset", ".*", "$apiserver_job", ".*",
	"$window", "10m", "$__rate_interval", "2m",
)

// Fed the series the controller really exports (one JobSet, one event of
// each kind), every query of the controller's panels returns a number:
// the label values it selects (name="jobset", condition="Failed",
// status="true", ...) exist, not only the names.
func TestControllerQueriesReturnData(t *testing.T) {
	fams, err := metricstest.Gather()
	if err != nil {
		t.Fatal(err)
	}
	storage := promqltest.LoadedStorage(t, loadSeries(fams))
	engine := promqltest.NewTestEngine(t, false, 5*time.Minute, promqltest.DefaultMaxSamplesPerQuery)
	ctrl, err := metricstest.Families()
	if err != nil {
		t.Fatal(err)
	}
	c := &checker{families: exportedFamilies(t)}
	at := time.Unix(0, 0).Add(30 * time.Minute)
	ctx := context.Background()
	n := 0
	for _, p := range readDashboard(t).panels() {
		for _, tg := range p.Targets {
			e, _ := c.parse(tg.Expr)
			if e == nil {
				t.Errorf("panel %q: %s does not parse", p.Title, tg.Expr)
				continue
			}
			controller := true
			for _, s := range c.selectors(e) {
				if _, ok := ctrl[strings.TrimSuffix(s.name, s.suffix)]; !ok {
					controller = false
				}
			}
			if !controller {
				continue
			}
			n++
			expr := allSelected.Replace(tg.Expr)
			q, err := engine.NewInstantQuery(ctx, storage, nil, expr, at)
			if err != nil {
				t.Errorf("panel %q: %s: %v", p.Title, expr, err)
				continue
			}
			res := q.Exec(ctx)
			q.Close()
			if res.Err != nil {
				t.Errorf("panel %q: %s: %v", p.Title, expr, res.Err)
				continue
			}
			vec, err := res.Vector()
			if err != nil {
				t.Errorf("panel %q: %s: %v", p.Title, expr, err)
				continue
			}
			if !hasNumber(vec) {
				t.Errorf("panel %q, query %s returns no number from the controller's series: %s\n\tresult: %v", p.Title, tg.RefID, expr, vec)
			}
			// A fallback (or vector(0)) hides a selector that matches
			// nothing: each selector alone must match a series.
			sel, _ := c.parse(expr)
			parser.Inspect(sel, func(node parser.Node, _ []parser.Node) error {
				vs, ok := node.(*parser.VectorSelector)
				if !ok {
					return nil
				}
				q, err := engine.NewInstantQuery(ctx, storage, nil, vs.String(), at)
				if err != nil {
					t.Errorf("panel %q: %s: %v", p.Title, vs, err)
					return nil
				}
				defer q.Close()
				if v, err := q.Exec(ctx).Vector(); err != nil || len(v) == 0 {
					t.Errorf("panel %q, query %s: %s selects no series the controller exports (%v)", p.Title, tg.RefID, vs, err)
				}
				return nil
			})
		}
	}
	if n < 30 {
		t.Errorf("only %d controller queries evaluated", n)
	}
}

func hasNumber(v promql.Vector) bool {
	for _, s := range v {
		if !math.IsNaN(s.F) {
			return true
		}
	}
	return false
}
