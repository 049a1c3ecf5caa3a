package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/nativejobset/jobset/artifacts/monitoring"
	jobsetapi "github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// A real Prometheus (hack/tools/prometheus) on the host scrapes the
// in-cluster install with the shipped scrape config and RBAC
// (artifacts/monitoring): kubernetes service discovery against
// kube-apiserver with the token of the ServiceAccount that rbac.yaml
// binds, HTTPS to every pod of both servers with their serving
// certificates verified. It also loads the alert rules of
// prometheusrule.yaml. While one JobSet runs, is interrupted by a container
// that exits 1, and recovers, and another fails, the test asks Prometheus'
// HTTP API for every target's up, for every alert's expression and for
// every panel query of artifacts/monitoring/dashboard.json (when that file
// exists).
//
// Prometheus' configuration and data stay in <NODE_LOCAL_DIR>/prometheus
// after the run, for a look or for the pictures of docs/operations
// (hack/prometheus-screenshots.sh).
func TestPrometheusScrapesTheInstall(t *testing.T) {
	dir := filepath.Join(cluster.LocalDir, "prometheus")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	prom := startPrometheus(t, dir)

	// Every target of the in-cluster jobs is discovered and up: both
	// controller replicas and the API server pod.
	wantTargets := map[string]int{"jobset-controller": 2, "jobset-apiserver": 1}
	eventually(t, 2*time.Minute, "every target discovered and up", func(ctx context.Context) (bool, error) {
		targets, err := prom.targets(ctx)
		if err != nil {
			return false, nil
		}
		byJob := map[string]int{}
		for _, tg := range targets {
			if tg.Health != "up" {
				if tg.Health == "down" {
					t.Logf("target %s of %s is down: %s", tg.ScrapeURL, tg.Labels["job"], tg.LastError)
				}
				return false, nil
			}
			byJob[tg.Labels["job"]]++
		}
		for job, n := range wantTargets {
			if byJob[job] != n {
				return false, nil
			}
		}
		return len(byJob) == len(wantTargets), nil
	})
	for job, n := range wantTargets {
		up := prom.mustQuery(t, fmt.Sprintf(`up{job=%q}`, job))
		if len(up) != n {
			t.Errorf("up{job=%q}: %d series, want %d", job, len(up), n)
		}
		for _, s := range up {
			if s.value() != 1 {
				t.Errorf("%v = %v, want 1", s.Metric, s.value())
			}
			if s.Metric["pod"] == "" {
				t.Errorf("%v has no pod label", s.Metric)
			}
		}
	}
	// The API server's own series come through its /metrics.
	if s := prom.mustQuery(t, `apiserver_request_total{job="jobset-apiserver"}`); len(s) == 0 {
		t.Error("no apiserver_request_total from jobset-apiserver")
	}

	ns := cluster.Namespace(t, "prometheus")
	const (
		recovering = "recovering"
		failing    = "failing"
	)
	// recovering: attempt 0's first pod exits 1 after a while, the failure
	// policy restarts the JobSet, and attempt 1 runs on. Every pod becomes
	// ready some seconds after it starts, so that the interruption lasts
	// several scrapes. failing: no restart allowed, it fails at once.
	apply(t, ns, fmt.Sprintf(`apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: %s
spec:
  failurePolicy:
    maxRestarts: 2
  replicatedJobs:
  - name: workers
    replicas: 1
    template:
      spec:
        parallelism: 2
        completions: 2
        backoffLimit: 0
        template:
          spec:
            restartPolicy: Never
            terminationGracePeriodSeconds: 1%s
            containers:
            - name: main
              image: %s
              imagePullPolicy: Never
              command: ["sh", "-c", %q]
              readinessProbe:
                exec: {command: ["true"]}
                initialDelaySeconds: 6
                periodSeconds: 1
              env:
              - name: ATTEMPT
                valueFrom:
                  fieldRef:
                    fieldPath: metadata.labels['jobset.sigs.k8s.io/restart-attempt']
---
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: %s
spec:
  failurePolicy:
    maxRestarts: 0
  replicatedJobs:
  - name: workers
    replicas: 1
    template:
      spec:
        backoffLimit: 0
        template:
          spec:
            restartPolicy: Never
            terminationGracePeriodSeconds: 1%s
            containers:
            - name: main
              image: %s
              imagePullPolicy: Never
              command: ["sh", "-c", "exit 1"]
`, recovering, onRealNode, busyboxImage,
		`trap 'exit 0' TERM
if [ "$ATTEMPT" = 0 ] && [ "$JOB_COMPLETION_INDEX" = 0 ]; then sleep 30; exit 1; fi
while :; do sleep 1; done`,
		failing, onRealNode, busyboxImage))

	sel := fmt.Sprintf(`namespace=%q,jobset=%q`, ns, recovering)
	alerts := alertRules(t)

	// Running and available: its gauges are scraped, and no alert's
	// expression names it.
	waitAnnotation(t, ns, recovering, "to be available", func(a map[string]string) bool {
		return a[jobsetapi.AvailableSinceAnnotation] != ""
	})
	prom.eventuallySeries(t, "the available JobSet's uptime", fmt.Sprintf(`jobset_uptime_seconds{%s} > 0`, sel), 1)
	prom.eventuallySeries(t, "its ready replicas", fmt.Sprintf(`kube_jobset_ready_replicas{%s,replicatedjob="workers"} == 1`, sel), 1)

	// The interruption: JobSetRecoverySlow's expression, with its 10 minute
	// threshold lowered, returns the JobSet while it is down.
	interrupted := alerts.expr(t, "JobSetRecoverySlow", "> 600", "> 0")
	prom.eventuallyMatching(t, "JobSetRecoverySlow's expression (threshold 0) during the interruption", interrupted, 2*time.Minute,
		func(s series) bool {
			return s.Metric["namespace"] == ns && s.Metric["jobset"] == recovering && s.value() > 0
		})

	// The recovery.
	js := waitAnnotation(t, ns, recovering, "to recover", func(a map[string]string) bool {
		return a[jobsetapi.InterruptionsAnnotation] == "1" && a[jobsetapi.AvailableSinceAnnotation] != "" &&
			a[jobsetapi.InterruptedSecondsAnnotation] == ""
	})
	if js.Status.Restarts != 1 {
		t.Fatalf("restarts = %d, want 1", js.Status.Restarts)
	}
	prom.eventuallySeries(t, "the interruption over", fmt.Sprintf(`jobset_interruption_seconds{%s} == 0`, sel), 1)
	if s := prom.mustQuery(t, interrupted); len(s) != 0 {
		t.Errorf("%s after the recovery: %v, want nothing", interrupted, s)
	}
	// The failing JobSet: JobSetFailed's own expression returns its series
	// (and not the recovered one's), and Prometheus fires the alert (it has
	// no 'for').
	waitCondition(t, ns, failing, v1alpha2.JobSetFailed, 3*time.Minute)
	failedExpr := alerts.expr(t, "JobSetFailed", "", "")
	var failedSeries []series
	if !waitFor(2*time.Minute, func(ctx context.Context) bool {
		failedSeries, _ = prom.query(ctx, failedExpr)
		return hasJobSet(failedSeries, ns, failing)
	}) {
		t.Fatalf("JobSetFailed's expression %s returned %v, want %s/%s", failedExpr, failedSeries, ns, failing)
	}
	if hasJobSet(failedSeries, ns, recovering) {
		t.Errorf("JobSetFailed's expression returned the recovered JobSet: %v", failedSeries)
	}
	eventually(t, time.Minute, "the JobSetFailed alert firing", func(ctx context.Context) (bool, error) {
		firing, err := prom.firingAlerts(ctx)
		if err != nil {
			return false, nil
		}
		for _, a := range firing {
			if a.Labels["alertname"] == "JobSetFailed" && a.Labels["jobset"] == failing && a.Labels["namespace"] == ns {
				return true, nil
			}
		}
		return false, nil
	})

	// The recovery took more than a second (a pod start and a readiness
	// delay of 6 s): JobSetRecoveriesSlow's expression with the 1 s bucket
	// for the 600 s one counts it. (Prometheus stores the bound as "1.0".)
	prom.eventuallyMatching(t, "JobSetRecoveriesSlow's expression (the 1 s bucket)",
		alerts.expr(t, "JobSetRecoveriesSlow", `le=~"600|600\\.0"`, `le=~"1|1\\.0"`), time.Minute,
		func(s series) bool { return s.value() > 0 })
	prom.eventuallyMatching(t, "JobSetRestartsClimbing's expression (threshold 0)", alerts.expr(t, "JobSetRestartsClimbing", "> 5", "> 0"), time.Minute,
		func(s series) bool { return s.value() > 0 })
	// Every controller replica exports its error counter (the threshold
	// lowered so that a rate of 0 passes).
	errorsExpr := alerts.expr(t, "JobSetControllerErrors", "> 0.5", ">= 0")
	prom.eventuallySeries(t, "JobSetControllerErrors's expression (threshold >= 0) for both replicas", errorsExpr, 2)

	// At their shipped thresholds, the alerts other than JobSetFailed have
	// nothing to say about this run.
	for _, name := range []string{"JobSetRecoverySlow", "JobSetRecoveriesSlow", "JobSetRestartsClimbing", "JobSetControllerErrors"} {
		if s := prom.mustQuery(t, alerts.expr(t, name, "", "")); len(s) != 0 {
			t.Errorf("%s's expression returned %v, want nothing", name, s)
		}
	}
	alerts.checkCovered(t)

	// Prometheus evaluated every rule without an error.
	eventually(t, time.Minute, "every rule evaluated", func(ctx context.Context) (bool, error) {
		rules, err := prom.rules(ctx)
		if err != nil || len(rules) != len(alerts.rules) {
			return false, nil
		}
		for _, r := range rules {
			if r.Health != "ok" {
				t.Logf("rule %s: health %q %s", r.Name, r.Health, r.LastError)
				return false, nil
			}
		}
		return true, nil
	})

	checkDashboard(t, prom, ns, recovering, failing)
}

// hasJobSet reports whether one of the series is labelled with the JobSet.
func hasJobSet(ss []series, ns, name string) bool {
	for _, s := range ss {
		if s.Metric["namespace"] == ns && s.Metric["jobset"] == name {
			return true
		}
	}
	return false
}

// prometheusServer is a running prometheus and its HTTP API.
type prometheusServer struct {
	base string
}

// startPrometheus writes prometheus.yml into dir from the shipped scrape
// config and rules, and runs prometheus on 127.0.0.1 with its data in
// dir/data until the test ends.
func startPrometheus(t *testing.T, dir string) *prometheusServer {
	t.Helper()
	bin := filepath.Join(cluster.Root, "_output", "bin", "prometheus")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v: build it with 'make prometheus-tools'", err)
	}
	// Prometheus' identity: the ServiceAccount that rbac.yaml binds, in its
	// namespace.
	if out, err := cluster.Kubectl(`apiVersion: v1
kind: Namespace
metadata: {name: monitoring}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: prometheus-k8s, namespace: monitoring}
`, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	rbac := filepath.Join(cluster.Root, "artifacts", "monitoring", "rbac.yaml")
	kubectl(t, "apply", "-f", rbac)
	t.Cleanup(func() {
		_, _ = cluster.Kubectl("", "delete", "--ignore-not-found", "-f", rbac)
		_, _ = cluster.Kubectl("", "delete", "--ignore-not-found", "namespace", "monitoring")
	})
	token := strings.TrimSpace(kubectl(t, "create", "token", "prometheus-k8s", "-n", "monitoring", "--duration=2h"))
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(cluster.LocalDir, "pki", "ca.crt")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: %q, certificate-authority: %q}
users:
- name: prometheus
  user: {tokenFile: %q}
contexts:
- name: local
  context: {cluster: local, user: prometheus}
current-context: local
`, cluster.Config.Host, caFile, tokenFile)
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}

	// The rules: prometheusrule.yaml's spec is a plain rule file.
	rulesFile := filepath.Join(dir, "jobset.rules.yaml")
	if err := os.WriteFile(rulesFile, ruleFileOf(t), 0o644); err != nil {
		t.Fatal(err)
	}
	// The shipped in-cluster jobs, with the paths of a pod (token, CA
	// Secrets) replaced by this host's, and discovery through kubeconfig
	// instead of the in-cluster environment. The loopback job is for a
	// controller on the host, which this install has not.
	data, err := os.ReadFile(filepath.Join(cluster.Root, "artifacts", "monitoring", "prometheus-scrape-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var shipped struct {
		ScrapeConfigs []map[string]any `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(data, &shipped); err != nil {
		t.Fatal(err)
	}
	var jobs []map[string]any
	for _, job := range shipped.ScrapeConfigs {
		sds, _ := job["kubernetes_sd_configs"].([]any)
		if len(sds) == 0 {
			continue
		}
		auth, _ := job["authorization"].(map[string]any)
		tls, _ := job["tls_config"].(map[string]any)
		if auth["credentials_file"] == nil || tls["ca_file"] == nil || tls["server_name"] == nil {
			t.Fatalf("job %v: want authorization.credentials_file, tls_config.ca_file and tls_config.server_name", job["job_name"])
		}
		auth["credentials_file"] = tokenFile
		tls["ca_file"] = caFile
		for _, sd := range sds {
			sd.(map[string]any)["kubeconfig_file"] = kubeconfig
		}
		jobs = append(jobs, job)
	}
	cfg := map[string]any{
		"global": map[string]any{
			"scrape_interval":     "2s",
			"scrape_timeout":      "2s",
			"evaluation_interval": "2s",
		},
		"rule_files":     []string{rulesFile},
		"scrape_configs": jobs,
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, out, 0o644); err != nil {
		t.Fatal(err)
	}

	addr := freeLoopbackAddr(t)
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin,
		"--config.file="+cfgFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
	)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = logFile.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("prometheus log:\n%s", tail(string(b), 40))
			}
		}
	})
	p := &prometheusServer{base: "http://" + addr}
	eventually(t, time.Minute, "prometheus ready", func(ctx context.Context) (bool, error) {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logFile.Name())
			t.Fatalf("prometheus exited: %v\n%s", err, tail(string(b), 40))
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/-/ready", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	t.Logf("prometheus on %s, data in %s", p.base, dir)
	return p
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// freeLoopbackAddr returns a port on 127.0.0.1 that was free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// get decodes the data of one Prometheus API response.
func (p *prometheusServer) get(ctx context.Context, path string, params url.Values, into any) error {
	u := p.base + path
	if params != nil {
		u += "?" + params.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("GET %s: %s: %w", u, resp.Status, err)
	}
	if r.Status != "success" {
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, r.Error)
	}
	return json.Unmarshal(r.Data, into)
}

// series is one element of an instant vector.
type series struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s series) value() float64 {
	str, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return -1
	}
	return v
}

func (s series) String() string { return fmt.Sprintf("%v %v", s.Metric, s.Value[1]) }

func (p *prometheusServer) query(ctx context.Context, expr string) ([]series, error) {
	var data struct {
		ResultType string   `json:"resultType"`
		Result     []series `json:"result"`
	}
	if err := p.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("%s: result type %s, want vector", expr, data.ResultType)
	}
	return data.Result, nil
}

func (p *prometheusServer) mustQuery(t *testing.T, expr string) []series {
	t.Helper()
	s, err := p.query(context.Background(), expr)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// eventuallySeries waits until expr returns exactly n series.
func (p *prometheusServer) eventuallySeries(t *testing.T, what, expr string, n int) {
	t.Helper()
	var last []series
	var lastErr error
	if !waitFor(2*time.Minute, func(ctx context.Context) bool {
		last, lastErr = p.query(ctx, expr)
		return lastErr == nil && len(last) == n
	}) {
		t.Fatalf("%s: %s returned %v (%v), want %d series", what, expr, last, lastErr, n)
	}
}

// eventuallyMatching waits until expr returns at least one series and all
// of them match.
func (p *prometheusServer) eventuallyMatching(t *testing.T, what, expr string, timeout time.Duration, match func(series) bool) {
	t.Helper()
	var last []series
	var lastErr error
	if !waitFor(timeout, func(ctx context.Context) bool {
		last, lastErr = p.query(ctx, expr)
		if lastErr != nil || len(last) == 0 {
			return false
		}
		for _, e := range last {
			if !match(e) {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("%s: %s returned %v (%v)", what, expr, last, lastErr)
	}
}

type target struct {
	Labels    map[string]string `json:"labels"`
	ScrapeURL string            `json:"scrapeUrl"`
	Health    string            `json:"health"`
	LastError string            `json:"lastError"`
}

func (p *prometheusServer) targets(ctx context.Context) ([]target, error) {
	var data struct {
		ActiveTargets []target `json:"activeTargets"`
	}
	err := p.get(ctx, "/api/v1/targets", url.Values{"state": {"active"}}, &data)
	return data.ActiveTargets, err
}

type alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

func (p *prometheusServer) firingAlerts(ctx context.Context) ([]alert, error) {
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	if err := p.get(ctx, "/api/v1/alerts", nil, &data); err != nil {
		return nil, err
	}
	var out []alert
	for _, a := range data.Alerts {
		if a.State == "firing" {
			out = append(out, a)
		}
	}
	return out, nil
}

type ruleStatus struct {
	Name      string `json:"name"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
}

func (p *prometheusServer) rules(ctx context.Context) ([]ruleStatus, error) {
	var data struct {
		Groups []struct {
			Rules []ruleStatus `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get(ctx, "/api/v1/rules", nil, &data); err != nil {
		return nil, err
	}
	var out []ruleStatus
	for _, g := range data.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// ruleFileOf returns artifacts/monitoring/prometheusrule.yaml's spec, a
// plain rule file.
func ruleFileOf(t *testing.T) []byte {
	t.Helper()
	out, _, err := monitoring.Rules(filepath.Join(cluster.Root, "artifacts", "monitoring"))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// alertSet holds the alerts' expressions and which of them the test used.
type alertSet struct {
	rules map[string]string
	used  map[string]bool
}

func alertRules(t *testing.T) *alertSet {
	t.Helper()
	_, alerts, err := monitoring.Rules(filepath.Join(cluster.Root, "artifacts", "monitoring"))
	if err != nil {
		t.Fatal(err)
	}
	a := &alertSet{rules: map[string]string{}, used: map[string]bool{}}
	for _, alert := range alerts {
		a.rules[alert.Name] = alert.Expr
	}
	return a
}

// expr returns the expression of an alert with the text from replaced by
// to (a threshold the test can reach), failing when from is not in it.
func (a *alertSet) expr(t *testing.T, alert, from, to string) string {
	t.Helper()
	e, ok := a.rules[alert]
	if !ok {
		t.Fatalf("prometheusrule.yaml has no alert %s", alert)
	}
	a.used[alert] = true
	if from == "" {
		return e
	}
	if !strings.Contains(e, from) {
		t.Fatalf("alert %s: %q is not in its expression %q; update this test with the alert", alert, from, e)
	}
	return strings.Replace(e, from, to, 1)
}

// checkCovered fails when an alert of prometheusrule.yaml was not checked.
func (a *alertSet) checkCovered(t *testing.T) {
	t.Helper()
	for name := range a.rules {
		if !a.used[name] {
			t.Errorf("alert %s is not checked against the real Prometheus; add it to this test", name)
		}
	}
}

// waitAnnotation waits until the JobSet's annotations satisfy ok.
func waitAnnotation(t *testing.T, ns, name, what string, ok func(map[string]string) bool) *v1alpha2.JobSet {
	t.Helper()
	var last *v1alpha2.JobSet
	eventually(t, 3*time.Minute, fmt.Sprintf("JobSet %s/%s %s", ns, name, what), func(ctx context.Context) (bool, error) {
		js, err := cluster.JobSets.JobsetV1alpha2().JobSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = js
		return ok(js.Annotations), nil
	})
	return last
}

// grafanaVar matches a Grafana variable in a query: $name, ${name} or
// ${name:format}.
var grafanaVar = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)(?::[a-z]+)?\}?`)

// checkDashboard runs every panel query of artifacts/monitoring/dashboard.json,
// when it exists, with its variables set to this run's namespace and
// JobSets (an interval variable to its first choice, any other to match
// everything). Every query must be valid, and every panel must show
// something: at least one of its queries returns a series. (One query of a
// panel may rightly be empty, e.g. the completed JobSets when none
// completed.)
func checkDashboard(t *testing.T, prom *prometheusServer, ns string, jobsets ...string) {
	t.Helper()
	path := filepath.Join(cluster.Root, "artifacts", "monitoring", "dashboard.json")
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		t.Logf("%s does not exist: no dashboard queries to check", path)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	exprs, intervals := dashboardExprs(t, data)
	if len(exprs) == 0 {
		t.Fatalf("%s has no panel queries", path)
	}
	values := map[string]string{
		"__rate_interval": "1m", "__interval": "10s", "__range": "1h", "__range_s": "3600",
		"namespace": ns, "jobset": strings.Join(jobsets, "|"),
	}
	for name, v := range intervals {
		values[name] = v
	}
	panels := map[string][]string{}
	var order []string
	for _, e := range exprs {
		q := grafanaVar.ReplaceAllStringFunc(e.expr, func(m string) string {
			if v, ok := values[grafanaVar.FindStringSubmatch(m)[1]]; ok {
				return v
			}
			return ".*"
		})
		if _, ok := panels[e.panel]; !ok {
			order = append(order, e.panel)
		}
		panels[e.panel] = append(panels[e.panel], q)
	}
	empty := 0
	for _, panel := range order {
		var results []string
		var badQuery error
		shows := waitFor(time.Minute, func(ctx context.Context) bool {
			results = results[:0]
			shows := false
			for _, q := range panels[panel] {
				s, err := prom.query(ctx, q)
				if err != nil && ctx.Err() == nil {
					badQuery = err
					return true
				}
				results = append(results, fmt.Sprintf("%s: %d series", q, len(s)))
				shows = shows || len(s) > 0
			}
			return shows
		})
		switch {
		case badQuery != nil:
			t.Errorf("dashboard panel %q: %v", panel, badQuery)
		case !shows:
			empty++
			t.Errorf("dashboard panel %q shows nothing:\n%s", panel, strings.Join(results, "\n"))
		}
	}
	t.Logf("dashboard.json: %d of %d panels (%d queries) show series", len(order)-empty, len(order), len(exprs))
}

type dashboardExpr struct{ panel, expr string }

// dashboardExprs collects panels[].targets[].expr, rows' nested panels
// included, and the first choice of every interval variable.
func dashboardExprs(t *testing.T, data []byte) ([]dashboardExpr, map[string]string) {
	t.Helper()
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var d struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query string `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	intervals := map[string]string{}
	for _, v := range d.Templating.List {
		if v.Type == "interval" {
			intervals[v.Name] = strings.TrimSpace(strings.Split(v.Query, ",")[0])
		}
	}
	var out []dashboardExpr
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, raw := range ps {
			var p panel
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatalf("dashboard.json panel: %v", err)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) != "" {
					out = append(out, dashboardExpr{p.Title, tg.Expr})
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	sort.SliceStable(out, func(i, j int) bool { return out[i].panel < out[j].panel })
	return out, intervals
}

// waitFor polls cond every 250 ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func(ctx context.Context) bool) bool {
	return wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true,
		func(ctx context.Context) (bool, error) { return cond(ctx), nil }) == nil
}
