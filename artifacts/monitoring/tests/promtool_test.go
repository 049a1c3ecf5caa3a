// Package tests evaluates the alert rules of ../prometheusrule.yaml with
// Prometheus' own rule engine: promtool (built from hack/tools/prometheus,
// 'make prometheus-tools') checks the rules and runs the unit tests in this
// directory, one file per alert, each with cases where the alert fires and
// where it does not. The shipped scrape config is checked by 'promtool check
// config' inside a minimal prometheus.yml.
//
// 'make test-monitoring-rules' runs it; PROMTOOL names the binary (default
// _output/bin/promtool). A missing promtool fails the test: it never skips.
package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nativejobset/jobset/artifacts/monitoring"
)

// ruleFileName is the rule file every test file here names in rule_files.
const ruleFileName = "jobset.rules.yaml"

// promtool returns the promtool binary, failing the test when it is missing.
func promtool(t *testing.T) string {
	t.Helper()
	path := os.Getenv("PROMTOOL")
	if path == "" {
		path = filepath.Join("..", "..", "..", "_output", "bin", "promtool")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(abs); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("promtool not found at %s (%v): build it with 'make prometheus-tools' or set PROMTOOL", abs, err)
	}
	return abs
}

// run runs promtool in dir and fails the test when it exits non-zero.
func run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// ruleFile returns the spec of ../prometheusrule.yaml as a plain Prometheus
// rule file, and the alert names it defines.
func ruleFile(t *testing.T) ([]byte, []string) {
	t.Helper()
	out, alerts, err := monitoring.Rules("..")
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(alerts))
	for i, a := range alerts {
		names[i] = a.Name
	}
	return out, names
}

// testFiles returns the promtool test files of this directory.
func testFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no promtool test files here: %v", err)
	}
	sort.Strings(files)
	return files
}

// workDir writes the extracted rule file and copies of the test files into
// a new directory (promtool reads rule_files relative to the test file).
func workDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	rules, _ := ruleFile(t)
	if err := os.WriteFile(filepath.Join(dir, ruleFileName), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range testFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCheckRules(t *testing.T) {
	dir := workDir(t)
	// --lint=all with --lint-fatal: duplicate rules fail too.
	out := run(t, dir, "check", "rules", "--lint=all", "--lint-fatal", ruleFileName)
	_, alerts := ruleFile(t)
	if want := "SUCCESS: " + strconv.Itoa(len(alerts)) + " rules found"; !strings.Contains(out, want) {
		t.Errorf("promtool check rules said\n%s\nwant %q", out, want)
	}
}

func TestRuleUnitTests(t *testing.T) {
	dir := workDir(t)
	files := testFiles(t)
	out := run(t, dir, append([]string{"test", "rules"}, files...)...)
	for _, f := range files {
		if !strings.Contains(out, "Processing test file: "+f+"\n  SUCCESS") {
			t.Errorf("no SUCCESS for %s in\n%s", f, out)
		}
	}
}

// The negative control: a test file expecting an alert that cannot fire
// makes promtool fail, so the unit tests above can fail.
func TestRuleUnitTestsCanFail(t *testing.T) {
	dir := workDir(t)
	bad := `rule_files: [` + ruleFileName + `]
evaluation_interval: 1m
tests:
- interval: 1m
  input_series:
  - series: 'kube_jobset_status_condition{namespace="ml",jobset="train",condition="Failed",status="true"}'
    values: '0 0 0'
  alert_rule_test:
  - eval_time: 2m
    alertname: JobSetFailed
    exp_alerts:
    - exp_labels: {severity: warning, namespace: ml, jobset: train, condition: Failed, status: "true"}
`
	if err := os.WriteFile(filepath.Join(dir, "bad.yml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool(t), "test", "rules", "bad.yml")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "FAILED") {
		t.Fatalf("promtool test rules passed a wrong expectation (%v):\n%s", err, out)
	}
}

// promtoolTest is the part of a promtool test file that says which alerts
// are checked, and whether to fire.
type promtoolTest struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// Every alert of prometheusrule.yaml is tested both firing and not firing,
// and the tests name no alert that does not exist.
func TestEveryAlertFiresAndStaysQuiet(t *testing.T) {
	_, alerts := ruleFile(t)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, f := range testFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var pt promtoolTest
		if err := yaml.Unmarshal(data, &pt); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(pt.RuleFiles) != 1 || pt.RuleFiles[0] != ruleFileName {
			t.Errorf("%s: rule_files %v, want [%s]", f, pt.RuleFiles, ruleFileName)
		}
		for _, tc := range pt.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
		}
	}
	known := map[string]bool{}
	for _, a := range alerts {
		known[a] = true
		if !fires[a] {
			t.Errorf("no test expects %s to fire", a)
		}
		if !quiet[a] {
			t.Errorf("no test expects %s not to fire", a)
		}
	}
	for a := range fires {
		if !known[a] {
			t.Errorf("a test expects %s, which prometheusrule.yaml does not define", a)
		}
	}
	for a := range quiet {
		if !known[a] {
			t.Errorf("a test checks %s, which prometheusrule.yaml does not define", a)
		}
	}
}

// The shipped scrape config, inside a minimal prometheus.yml that loads the
// rules, is a valid Prometheus configuration: first as shipped (syntax,
// relabelling and service discovery; the in-cluster token file is not
// there), then in full with a token file in its place, as in a pod, and
// every lint on.
func TestCheckConfig(t *testing.T) {
	dir := workDir(t)
	data, err := os.ReadFile(filepath.Join("..", "prometheus-scrape-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var scrape struct {
		ScrapeConfigs []map[string]any `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(data, &scrape); err != nil {
		t.Fatal(err)
	}
	if len(scrape.ScrapeConfigs) == 0 {
		t.Fatal("prometheus-scrape-config.yaml has no scrape_configs")
	}
	write := func(name string, cfgs []map[string]any) {
		t.Helper()
		cfg := map[string]any{
			"global":         map[string]any{"scrape_interval": "30s", "evaluation_interval": "30s"},
			"rule_files":     []string{ruleFileName},
			"scrape_configs": cfgs,
		}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("shipped.yml", scrape.ScrapeConfigs)
	out := run(t, dir, "check", "config", "--syntax-only", "shipped.yml")
	if !strings.Contains(out, "SUCCESS: shipped.yml is valid prometheus config file syntax") {
		t.Errorf("promtool check config --syntax-only said\n%s", out)
	}

	// The same jobs, with the token file they read put in place.
	placed := 0
	var cfgs []map[string]any
	for _, c := range scrape.ScrapeConfigs {
		c = replaceFiles(t, dir, c, &placed)
		cfgs = append(cfgs, c)
	}
	if placed == 0 {
		t.Fatal("the scrape config references no credentials file; the in-cluster job should")
	}
	write("placed.yml", cfgs)
	out = run(t, dir, "check", "config", "--lint=all", "--lint-fatal", "placed.yml")
	_, alerts := ruleFile(t)
	if !strings.Contains(out, "SUCCESS: 1 rule files found") ||
		!strings.Contains(out, "Checking "+ruleFileName+"\n  SUCCESS: "+strconv.Itoa(len(alerts))+" rules found") {
		t.Errorf("promtool check config said\n%s", out)
	}
}

// replaceFiles returns a copy of a scrape config whose credentials_file
// fields (at any depth) name a token file in dir. promtool checks that the
// file exists; it reads no CA file, so ca_file stays as shipped.
func replaceFiles(t *testing.T, dir string, v map[string]any, placed *int) map[string]any {
	t.Helper()
	out := map[string]any{}
	for k, val := range v {
		switch k {
		case "credentials_file":
			*placed++
			out[k] = placeFile(t, dir, "token", []byte("token\n"))
		default:
			out[k] = replaceAny(t, dir, val, placed)
		}
	}
	return out
}

func replaceAny(t *testing.T, dir string, v any, placed *int) any {
	switch x := v.(type) {
	case map[string]any:
		return replaceFiles(t, dir, x, placed)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = replaceAny(t, dir, e, placed)
		}
		return out
	default:
		return v
	}
}

func placeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
