package main

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// The dashboard's identity: importing the file again replaces the
// dashboard instead of adding a copy.
const (
	uid   = "jobset-overview"
	title = "JobSet"
)

// Label matchers the panels share. The per-JobSet series of the
// controller label the JobSet "jobset"; upstream's two counters
// (jobset_completed_total, jobset_failed_total) call it "jobset_name".
const (
	perJobSet         = `namespace=~"$namespace", jobset=~"$jobset"`
	perJobSetUpstream = `namespace=~"$namespace", jobset_name=~"$jobset"`
	controllerQueue   = `name="jobset"`
	apiserverJob      = `job=~"$apiserver_job"`
	jobsetRequests    = `job=~"$apiserver_job", group="jobset.x-k8s.io", resource="jobsets"`
)

// Rare events (recoveries, restarts, Job creation latency: a few per
// JobSet) are counted over the $window variable; steady ones (work queue,
// requests) over Grafana's $__rate_interval.
const (
	window       = "$window"
	rateInterval = "$__rate_interval"
)

func datasource() common.DataSourceRef {
	return common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}
}

// target is one query of a panel.
type target struct {
	expr, legend string
	instant      bool
}

func q(expr, legend string) target { return target{expr: expr, legend: legend} }

func (t target) builder(refID string) *prometheus.DataqueryBuilder {
	b := prometheus.NewDataqueryBuilder().
		Datasource(datasource()).
		RefId(refID).
		Expr(t.expr).
		LegendFormat(t.legend).
		EditorMode(prometheus.QueryEditorModeCode)
	if t.instant {
		b.Instant()
	} else {
		b.Range()
	}
	return b
}

// builder assembles the dashboard, numbering panels in order.
type builder struct {
	d      *dashboard.DashboardBuilder
	nextID uint32
}

func (b *builder) id() uint32 {
	b.nextID++
	return b.nextID
}

func (b *builder) row(title string) {
	b.d.WithRow(dashboard.NewRowBuilder(title).Id(b.id()))
}

func refID(i int) string { return string(rune('A' + i)) }

// series adds a time series panel of width w (of 24).
func (b *builder) series(title, description, unit string, w uint32, targets ...target) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().
		Id(b.id()).
		Title(title).
		Description(description).
		Datasource(datasource()).
		Unit(unit).
		Span(w).
		Height(8).
		FillOpacity(10).
		ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().
			ShowLegend(true).
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom))
	for i, t := range targets {
		p.WithTarget(t.builder(refID(i)))
	}
	b.d.WithPanel(p)
	return p
}

// single adds a stat panel showing the last value of each series.
func (b *builder) single(title, description, unit string, w uint32, thresholds []dashboard.Threshold, mappings []dashboard.ValueMapping, targets ...target) {
	p := stat.NewPanelBuilder().
		Id(b.id()).
		Title(title).
		Description(description).
		Datasource(datasource()).
		Unit(unit).
		Span(w).
		Height(4).
		GraphMode(common.BigValueGraphModeNone).
		ColorMode(common.BigValueColorModeValue).
		TextMode(common.BigValueTextModeAuto).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		Thresholds(dashboard.NewThresholdsConfigBuilder().
			Mode(dashboard.ThresholdsModeAbsolute).
			Steps(thresholds))
	if len(mappings) > 0 {
		p.Mappings(mappings)
	}
	for i, t := range targets {
		t.instant = true
		p.WithTarget(t.builder(refID(i)))
	}
	b.d.WithPanel(p)
}

// steps are stat thresholds: the first colour from -Inf, then each
// colour from its value.
func steps(base string, more ...any) []dashboard.Threshold {
	out := []dashboard.Threshold{{Color: base}}
	for i := 0; i+1 < len(more); i += 2 {
		out = append(out, dashboard.Threshold{Value: cog.ToPtr(more[i].(float64)), Color: more[i+1].(string)})
	}
	return out
}

// valueText maps exact values to texts (and colours).
func valueText(pairs ...string) []dashboard.ValueMapping {
	opts := map[string]dashboard.ValueMappingResult{}
	for i := 0; i+2 < len(pairs); i += 3 {
		opts[pairs[i]] = dashboard.ValueMappingResult{Text: cog.ToPtr(pairs[i+1]), Color: cog.ToPtr(pairs[i+2]), Index: cog.ToPtr(int32(i / 3))}
	}
	return []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText, Options: opts}}}
}

// quantiles returns the φ-quantile queries of a histogram over a range,
// summed over every controller or server instance (and grouped by the
// extra labels), and its mean.
func quantiles(metric, selector, rng, by string, legendPrefix string, phis ...float64) []target {
	grouping := "le"
	if by != "" {
		grouping = "le, " + by
	}
	var out []target
	for _, phi := range phis {
		out = append(out, q(
			fmt.Sprintf("histogram_quantile(%g, sum by (%s) (rate(%s_bucket%s[%s])))", phi, grouping, metric, braces(selector), rng),
			fmt.Sprintf("%sp%g", legendPrefix, phi*100)))
	}
	return out
}

// mean is sum/count of a histogram over a range.
func mean(metric, selector, rng, legend string) target {
	return q(fmt.Sprintf("sum(rate(%s_sum%s[%s])) / sum(rate(%s_count%s[%s]))", metric, braces(selector), rng, metric, braces(selector), rng), legend)
}

// countedInWindow is the growth of a counter over the window, series
// that appeared within it included: a counter the controller creates on
// its first event (no zero sample before it) counts with its whole value,
// the others with increase().
func countedInWindow(metric, selector string) string {
	sel := metric + braces(selector)
	return fmt.Sprintf("(%s unless %s offset %s) or increase(%s[%s])", sel, sel, window, sel, window)
}

// braces returns {selector}, or nothing for an empty selector.
func braces(selector string) string {
	if selector == "" {
		return ""
	}
	return "{" + selector + "}"
}

func variables() []cog.Builder[dashboard.VariableModel] {
	all := dashboard.VariableOption{
		Selected: cog.ToPtr(true),
		Text:     dashboard.StringOrArrayOfString{String: cog.ToPtr("All")},
		Value:    dashboard.StringOrArrayOfString{ArrayOfString: []string{"$__all"}},
	}
	labelValues := func(name, label, query, description string, allValue string) *dashboard.QueryVariableBuilder {
		v := dashboard.NewQueryVariableBuilder(name).
			Label(label).
			Description(description).
			Datasource(datasource()).
			Query(dashboard.StringOrMap{String: cog.ToPtr(query)}).
			Definition(query).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortAlphabeticalAsc).
			Multi(true).
			IncludeAll(true).
			Current(all)
		if allValue != "" {
			v.AllValue(allValue)
		}
		return v
	}
	windows := []string{"1h", "6h", "1d", "7d"}
	var windowOpts []dashboard.VariableOption
	for i, w := range windows {
		windowOpts = append(windowOpts, dashboard.VariableOption{
			Selected: cog.ToPtr(i == 0),
			Text:     dashboard.StringOrArrayOfString{String: cog.ToPtr(w)},
			Value:    dashboard.StringOrArrayOfString{String: cog.ToPtr(w)},
		})
	}
	return []cog.Builder[dashboard.VariableModel]{
		dashboard.NewDatasourceVariableBuilder("datasource").
			Label("Data source").
			Type("prometheus"),
		labelValues("namespace", "Namespace",
			`label_values(kube_jobset_specified_replicas, namespace)`,
			"Namespaces with JobSets (the controller's per-JobSet series).", ".*"),
		labelValues("jobset", "JobSet",
			`label_values(kube_jobset_specified_replicas{namespace=~"$namespace"}, jobset)`,
			"JobSets of the selected namespaces.", ".*"),
		labelValues("apiserver_job", "jobset-apiserver job",
			`label_values(apiserver_request_total{group="jobset.x-k8s.io"}, job)`,
			"Scrape jobs whose servers answered JobSet API requests: jobset-apiserver (its ServiceMonitor or scrape job).", ""),
		dashboard.NewIntervalVariableBuilder("window").
			Label("Window").
			Description("Range over which rare events (recoveries, restarts, completions, Job creation latency) are counted.").
			Values(dashboard.StringOrMap{String: cog.ToPtr("1h,6h,1d,7d")}).
			Options(windowOpts).
			Current(windowOpts[0]),
	}
}

func build() (dashboard.Dashboard, error) {
	b := &builder{d: dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description("JobSet availability, restarts, replicas and conditions, jobset-controller's work queue and jobset-apiserver's requests. Generated by hack/dashboard; do not edit by hand.").
		Tags([]string{"jobset", "kubernetes"}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Refresh("1m").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		Variables(variables())}

	// JobSets: the controller's per-JobSet gauges, computed at scrape
	// time from its cache (only the leader exports them).
	b.row("JobSets")
	b.single("JobSets", "JobSets exported by the controller in the selected namespaces.", "none", 6,
		steps("blue"), nil,
		q(`count(count by (namespace, jobset) (kube_jobset_specified_replicas{`+perJobSet+`})) or vector(0)`, "JobSets"))
	b.single("Interrupted now", "JobSets whose current interruption has lasted more than 0 s (jobset_interruption_seconds > 0).", "none", 6,
		steps("green", 1.0, "orange"), nil,
		q(`count(jobset_interruption_seconds{`+perJobSet+`} > 0) or vector(0)`, "interrupted"))
	b.single("Failed", "JobSets whose Failed condition is true.", "none", 6,
		steps("green", 1.0, "red"), nil,
		q(`count(kube_jobset_status_condition{`+perJobSet+`, condition="Failed", status="true"} == 1) or vector(0)`, "failed"))
	b.single("JobSets left out of the series", "JobSets the controller left out of the per-JobSet series because of --metrics-max-jobsets, in its last scrape. Above 0, this dashboard does not show every JobSet.", "none", 6,
		steps("green", 1.0, "orange"), nil,
		q(`max(kube_jobset_metrics_jobsets_skipped)`, "skipped"))
	b.series("Uptime", "Total time each JobSet has been available (every Job of its current attempt ready or succeeded), suspended time excluded; frozen once the JobSet finished.", "s", 12,
		q(`jobset_uptime_seconds{`+perJobSet+`}`, "{{namespace}}/{{jobset}}"))
	b.series("Current interruption", "Downtime so far of each JobSet's current interruption (suspended time excluded); 0 while it is not interrupted. The alert JobSetRecoverySlow fires above 10 minutes.", "s", 12,
		q(`jobset_interruption_seconds{`+perJobSet+`}`, "{{namespace}}/{{jobset}}"))
	b.series("Replicas by state", "Child Jobs of each replicatedJob: specified by the spec, and ready, active, succeeded, failed, suspended from the status.", "none", 24,
		q(`kube_jobset_specified_replicas{`+perJobSet+`}`, "{{namespace}}/{{jobset}}/{{replicatedjob}} specified"),
		q(`kube_jobset_ready_replicas{`+perJobSet+`}`, "{{namespace}}/{{jobset}}/{{replicatedjob}} ready"),
		q(`kube_jobset_active_replicas{`+perJobSet+`}`, "{{namespace}}/{{jobset}}/{{replicatedjob}} active"),
		q(`kube_jobset_succeeded_replicas{`+perJobSet+`}`, "{{namespace}}/{{jobset}}/{{replicatedjob}} succeeded"),
		q(`kube_jobset_failed_replicas{`+perJobSet+`}`, "{{namespace}}/{{jobset}}/{{replicatedjob}} failed"),
		q(`kube_jobset_suspended_replicas{`+perJobSet+`}`, "{{namespace}}/{{jobset}}/{{replicatedjob}} suspended"))
	conditions := statetimeline.NewPanelBuilder().
		Id(b.id()).
		Title("Conditions").
		Description("Each JobSet condition over time: true or false (kube_jobset_status_condition with status=\"true\").").
		Datasource(datasource()).
		Span(24).
		Height(8).
		ShowValue(common.VisibilityModeNever).
		MergeValues(true).
		Mappings(valueText("0", "false", "transparent", "1", "true", "green")).
		Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(steps("transparent", 1.0, "green")))
	conditions.WithTarget(q(`kube_jobset_status_condition{`+perJobSet+`, status="true"}`, "{{namespace}}/{{jobset}} {{condition}}").builder("A"))
	b.d.WithPanel(conditions)

	// Availability: the histograms have no per-JobSet labels; they cover
	// every JobSet the controller runs.
	b.row("Availability (all JobSets)")
	b.series("Time to recover", "Downtime of the interruptions that ended within the window, all JobSets together (jobset_time_to_recover_seconds): quantiles and mean. Empty when nothing recovered in the window.", "s", 12,
		append(quantiles("jobset_time_to_recover_seconds", "", window, "", "", 0.5, 0.9, 0.99),
			mean("jobset_time_to_recover_seconds", "", window, "mean"))...)
	b.series("Time between interruptions", "Available time between the end of one interruption of a JobSet and the start of its next, for the interruptions that started within the window (jobset_time_between_interruptions_seconds): quantiles and mean (MTBI).", "s", 12,
		append(quantiles("jobset_time_between_interruptions_seconds", "", window, "", "", 0.5, 0.9),
			mean("jobset_time_between_interruptions_seconds", "", window, "mean"))...)
	b.series("Recoveries", "Interruptions that ended with the JobSet available again, within the window, and those of them that took more than 10 minutes (the alert JobSetRecoveriesSlow). The bucket's bound is matched as Prometheus 3 stores it (le=\"600.0\") and as Prometheus 2 did (le=\"600\").", "none", 12,
		q(`sum(increase(jobset_time_to_recover_seconds_count[`+window+`]))`, "recoveries"),
		q(`sum(increase(jobset_time_to_recover_seconds_count[`+window+`])) - sum(increase(jobset_time_to_recover_seconds_bucket{le=~"600|600\\.0"}[`+window+`]))`, "slower than 10m"))
	b.series("Job creation latency", "Time from a JobSet's creation (or first resume) until every child Job of its first attempt existed, for the JobSets that started within the window (jobset_job_creation_latency_seconds).", "s", 12,
		quantiles("jobset_job_creation_latency_seconds", "", window, "", "", 0.5, 0.99)...)

	// Restarts, attempts and terminal states: counters, counted once the
	// status write recording them succeeded.
	b.row("Restarts and execution attempts")
	b.series("Restarts by reason", "Whole-JobSet restarts within the window, by reason: failure (a failure policy restart) or update (to apply a template update).", "none", 12,
		q(`sum by (reason) (increase(jobset_restarts_total[`+window+`]))`, "{{reason}}"))
	b.series("Execution attempts by reason", "New execution attempts within the window (growth of status.executionAttempts), by reason: failure, resume, update.", "none", 12,
		q(`sum by (reason) (increase(jobset_execution_attempts_total[`+window+`]))`, "{{reason}}"))
	b.series("Completed and failed", "JobSets of the selected namespaces and names marked Completed or Failed within the window (upstream's per-JobSet counters). Each counter series starts at 1 when its JobSet finishes, so a series new in the window counts with its value: increase() alone would miss it.", "none", 12,
		q(`sum(`+countedInWindow("jobset_completed_total", perJobSetUpstream)+`)`, "completed"),
		q(`sum(`+countedInWindow("jobset_failed_total", perJobSetUpstream)+`)`, "failed"))
	b.series("Failures by reason", "JobSets marked Failed within the window, by the Failed condition's reason (a reason's series starts with its first failure, which counts too).", "none", 12,
		q(`sum by (reason) (`+countedInWindow("jobset_failed_by_reason_total", "")+`)`, "{{reason}}"))

	// The controller itself.
	b.row("jobset-controller")
	b.series("Work queue depth", "Keys waiting in the controller's work queue, per controller instance (the standby replica's queue stays empty).", "none", 8,
		q(`sum by (instance) (workqueue_depth{`+controllerQueue+`})`, "{{instance}}"))
	b.series("Work queue latency", "Time a key waits in the queue before a worker takes it, and the time a sync takes (99th percentile, all instances).", "s", 8,
		append(quantiles("workqueue_queue_duration_seconds", controllerQueue, rateInterval, "", "queue ", 0.99),
			quantiles("workqueue_work_duration_seconds", controllerQueue, rateInterval, "", "work ", 0.99)...)...)
	b.series("Work queue adds and retries", "Keys added to the queue, and keys requeued with back-off after a failed sync, per second.", "ops", 8,
		q(`sum(rate(workqueue_adds_total{`+controllerQueue+`}[`+rateInterval+`]))`, "adds"),
		q(`sum(rate(workqueue_retries_total{`+controllerQueue+`}[`+rateInterval+`]))`, "retries"))
	b.series("Work in progress", "Seconds of sync work in progress not yet observed by the work duration, and the age of the longest running sync. A value that keeps growing means a stuck worker.", "s", 8,
		q(`max(workqueue_unfinished_work_seconds{`+controllerQueue+`})`, "unfinished work"),
		q(`max(workqueue_longest_running_processor_seconds{`+controllerQueue+`})`, "longest running sync"))
	b.series("Sync duration and errors", "Duration of one sync of a JobSet (quantiles), and syncs per second that ended in an error and were requeued (right axis; status write conflicts included; the alert JobSetControllerErrors fires above 0.5/s for 10 minutes).", "s", 8,
		append(quantiles("jobset_reconcile_duration_seconds", "", rateInterval, "", "", 0.5, 0.99),
			q(`sum(rate(jobset_reconcile_errors_total[`+rateInterval+`]))`, "errors/s"))...).
		OverrideByName("errors/s", []dashboard.DynamicConfigValue{
			{Id: "unit", Value: "ops"},
			{Id: "custom.axisPlacement", Value: "right"},
		})
	b.series("Jobs created", "Child Jobs created by the controller per second.", "ops", 8,
		q(`sum(rate(jobset_jobs_created_total[`+rateInterval+`]))`, "Jobs/s"))
	b.single("Controller versions", "Controller instances by the build they run (jobset_build_info).", "none", 24,
		steps("blue"), nil,
		q(`count by (version, revision) (jobset_build_info)`, "{{version}} ({{revision}})"))

	// jobset-apiserver: k8s.io/apiserver's request metrics for the
	// JobSet resource, and the embedded etcd.
	b.row("jobset-apiserver")
	b.series("Requests by verb", "JobSet API requests per second served by jobset-apiserver, by verb and subresource.", "reqps", 8,
		q(`sum by (verb, subresource) (rate(apiserver_request_total{`+jobsetRequests+`}[`+rateInterval+`]))`, "{{verb}} {{subresource}}"))
	b.series("Requests by code", "JobSet API requests per second by HTTP response code.", "reqps", 8,
		q(`sum by (code) (rate(apiserver_request_total{`+jobsetRequests+`}[`+rateInterval+`]))`, "{{code}}"))
	b.series("Server errors", "The share of JobSet API requests answered with a 5xx code (a 507 is the embedded etcd's NOSPACE, a 504 a stalled etcd).", "percentunit", 8,
		q(`(sum(rate(apiserver_request_total{`+jobsetRequests+`, code=~"5.."}[`+rateInterval+`])) or vector(0)) / sum(rate(apiserver_request_total{`+jobsetRequests+`}[`+rateInterval+`]))`, "5xx"))
	b.series("Request latency", "Latency of JobSet API requests by verb, watches excluded (they last as long as the client keeps them): 99th and 50th percentile.", "s", 12,
		append(quantiles("apiserver_request_duration_seconds", jobsetRequests+`, verb!~"WATCH|CONNECT"`, rateInterval, "verb", "{{verb}} ", 0.99),
			quantiles("apiserver_request_duration_seconds", jobsetRequests+`, verb!~"WATCH|CONNECT"`, rateInterval, "verb", "{{verb}} ", 0.5)...)...)
	b.series("etcd request latency", "Latency of jobset-apiserver's storage requests for JobSets by operation (99th percentile).", "s", 12,
		quantiles("etcd_request_duration_seconds", apiserverJob+`, resource="jobsets"`, rateInterval, "operation", "{{operation}} ", 0.99)...)
	b.series("In-flight requests", "Requests jobset-apiserver is serving, by kind (readOnly, mutating), per instance.", "none", 6,
		q(`sum by (instance, request_kind) (apiserver_current_inflight_requests{`+apiserverJob+`})`, "{{instance}} {{request_kind}}"))
	b.series("Embedded etcd database", "The embedded etcd's database file, the part of it in use, and its quota, per instance: writes are refused (507 NOSPACE) when the file reaches the quota. Empty with an external etcd.", "bytes", 10,
		q(`max by (instance) (jobset_apiserver_embedded_etcd_db_size_bytes{`+apiserverJob+`})`, "{{instance}} size"),
		q(`max by (instance) (jobset_apiserver_embedded_etcd_db_size_in_use_bytes{`+apiserverJob+`})`, "{{instance}} in use"),
		q(`max by (instance) (jobset_apiserver_embedded_etcd_quota_backend_bytes{`+apiserverJob+`})`, "{{instance}} quota"))
	b.series("Stored JobSets", "JobSets stored in jobset-apiserver's etcd, as its periodic count reports them.", "none", 4,
		q(`max(apiserver_resource_objects{`+apiserverJob+`, group="jobset.x-k8s.io", resource="jobsets"})`, "JobSets"))
	b.single("NOSPACE alarm", "1 while an embedded etcd refuses writes for lack of space (nothing with an external etcd).", "none", 4,
		steps("green", 1.0, "red"), valueText("0", "ok", "green", "1", "NOSPACE", "red"),
		q(`max(jobset_apiserver_embedded_etcd_nospace_alarm{`+apiserverJob+`})`, "alarm"))

	return b.d.Build()
}
