// These tests keep the scrape configurations and alerting rules in step
// with the metrics the controller really exports.

package monitoring

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/nativejobset/jobset/pkg/controller/metrics/metricstest"
)

// documents decodes every YAML document of a file.
func documents(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			out = append(out, doc)
		}
	}
}

// exportedFamilies gathers the controller's real registry
// (metricstest.Gather), in which every metric family appears.
func exportedFamilies(t *testing.T) map[string]dto.MetricType {
	t.Helper()
	fams, err := metricstest.Families()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]dto.MetricType{}
	for name, f := range fams {
		out[name] = f.Type
	}
	return out
}

var metricName = regexp.MustCompile(`\b(kube_jobset_|jobset_|workqueue_)[a-z_]+`)

// referencedMetrics returns the known families an expression uses.
func referencedMetrics(t *testing.T, expr string, families map[string]dto.MetricType) []string {
	t.Helper()
	var out []string
	for _, name := range metricName.FindAllString(expr, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && families[b] == dto.MetricType_HISTOGRAM {
				base = b
			}
		}
		if _, ok := families[base]; !ok {
			t.Errorf("expression %q uses %s, which the controller does not export", expr, name)
		}
		out = append(out, base)
	}
	return out
}

func TestPrometheusRules(t *testing.T) {
	families := exportedFamilies(t)
	type rule struct {
		Alert  string            `json:"alert"`
		Expr   string            `json:"expr"`
		For    string            `json:"for"`
		Labels map[string]string `json:"labels"`
	}
	var pr struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []rule `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	docs := documents(t, "prometheusrule.yaml")
	if len(docs) != 1 {
		t.Fatalf("%d documents, want 1", len(docs))
	}
	if err := yaml.Unmarshal(docs[0], &pr); err != nil {
		t.Fatal(err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Fatalf("%s/%s, want a monitoring.coreos.com/v1 PrometheusRule", pr.APIVersion, pr.Kind)
	}
	alerts := map[string][]string{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" {
				t.Errorf("rule %+v needs alert, expr and a severity label", r)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			alerts[r.Alert] = referencedMetrics(t, r.Expr, families)
		}
	}
	// The alerts the issue asks for.
	for alert, metric := range map[string]string{
		"JobSetFailed":           "kube_jobset_status_condition",
		"JobSetRecoverySlow":     "jobset_interruption_seconds",
		"JobSetRecoveriesSlow":   "jobset_time_to_recover_seconds",
		"JobSetRestartsClimbing": "jobset_restarts_total",
	} {
		if !contains(alerts[alert], metric) {
			t.Errorf("alert %s missing or not on %s (uses %v)", alert, metric, alerts[alert])
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// The ServiceMonitor scrapes the port the deployed Service and Deployment
// name.
func TestServiceMonitorMatchesDeployment(t *testing.T) {
	var sm struct {
		Kind string `json:"kind"`
		Spec struct {
			Selector  metav1.LabelSelector `json:"selector"`
			Endpoints []struct {
				Port        string `json:"port"`
				Scheme      string `json:"scheme"`
				Path        string `json:"path"`
				HonorLabels bool   `json:"honorLabels"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(documents(t, "servicemonitor.yaml")[0], &sm); err != nil {
		t.Fatal(err)
	}
	var svc struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     struct {
			Ports []struct {
				Name       string `json:"name"`
				TargetPort string `json:"targetPort"`
			} `json:"ports"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(documents(t, filepath.Join("..", "deploy", "base", "controller-metrics-service.yaml"))[0], &svc); err != nil {
		t.Fatal(err)
	}
	if sm.Kind != "ServiceMonitor" || len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("servicemonitor.yaml: %+v", sm)
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Scheme != "https" || ep.Path != "/metrics" {
		t.Errorf("endpoint %+v, want https /metrics", ep)
	}
	// The controller's series name the JobSet's namespace "namespace"; the
	// operator's target label of the same name would rename it.
	if !ep.HonorLabels {
		t.Errorf("the controller's endpoint does not honor its labels: its namespace label would become exported_namespace")
	}
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Metadata.Labels[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s; the Service has %q", k, v, svc.Metadata.Labels[k])
		}
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != ep.Port {
		t.Errorf("Service ports %+v, the ServiceMonitor scrapes %q", svc.Spec.Ports, ep.Port)
	}
	deployment, err := os.ReadFile(filepath.Join("..", "deploy", "base", "controller-deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(deployment), "- name: "+svc.Spec.Ports[0].TargetPort+"\n") ||
		!strings.Contains(string(deployment), "--secure-metrics-bind-address=") {
		t.Errorf("the controller Deployment has no container port %q serving --secure-metrics-bind-address", svc.Spec.Ports[0].TargetPort)
	}
}

func TestScrapeConfigAndRBAC(t *testing.T) {
	var cfg struct {
		ScrapeConfigs []struct {
			JobName     string `json:"job_name"`
			Scheme      string `json:"scheme"`
			MetricsPath string `json:"metrics_path"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(documents(t, "prometheus-scrape-config.yaml")[0], &cfg); err != nil {
		t.Fatal(err)
	}
	schemes := map[string]string{}
	for _, c := range cfg.ScrapeConfigs {
		schemes[c.JobName] = c.Scheme
		if c.MetricsPath != "/metrics" {
			t.Errorf("job %s scrapes %q, want /metrics", c.JobName, c.MetricsPath)
		}
	}
	want := map[string]string{"jobset-controller": "https", "jobset-apiserver": "https", "jobset-controller-local": "http"}
	if len(schemes) != len(want) {
		t.Errorf("scrape configs = %+v, want the jobs %v", cfg.ScrapeConfigs, want)
	}
	for job, scheme := range want {
		if schemes[job] != scheme {
			t.Errorf("job %s has scheme %q, want %q", job, schemes[job], scheme)
		}
	}

	var role struct {
		Kind  string `json:"kind"`
		Rules []struct {
			NonResourceURLs []string `json:"nonResourceURLs"`
			Verbs           []string `json:"verbs"`
		} `json:"rules"`
	}
	if err := yaml.Unmarshal(documents(t, "rbac.yaml")[0], &role); err != nil {
		t.Fatal(err)
	}
	if role.Kind != "ClusterRole" || len(role.Rules) != 1 || !contains(role.Rules[0].NonResourceURLs, "/metrics") || !contains(role.Rules[0].Verbs, "get") {
		t.Errorf("rbac.yaml ClusterRole = %+v, want get on /metrics", role)
	}
}

// Every YAML file here is well formed and every Kubernetes object has an
// apiVersion, a kind and a name.
func TestManifestsParse(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no YAML files: %v", err)
	}
	for _, f := range files {
		for i, doc := range documents(t, f) {
			var obj map[string]any
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				t.Errorf("%s document %d: %v", f, i, err)
				continue
			}
			if _, ok := obj["scrape_configs"]; ok {
				continue
			}
			meta, _ := obj["metadata"].(map[string]any)
			if obj["apiVersion"] == nil || obj["kind"] == nil || meta["name"] == nil {
				t.Errorf("%s document %d lacks apiVersion, kind or metadata.name", f, i)
			}
		}
	}
}
