// Package monitoring holds JobSet's scrape configurations, alerting rules
// and Grafana dashboard (the files beside this one); Rules reads the rules
// for the tests that evaluate them with promtool and a real Prometheus.
package monitoring

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Alert is one alerting rule of prometheusrule.yaml.
type Alert struct {
	Name string
	Expr string
}

// Rules reads prometheusrule.yaml in dir and returns the PrometheusRule's
// spec, which is a plain Prometheus rule file (what promtool and a
// Prometheus without the operator load), and its alerts in file order.
func Rules(dir string) (ruleFile []byte, alerts []Alert, err error) {
	path := filepath.Join(dir, "prometheusrule.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var obj struct {
		Kind string         `json:"kind"`
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if obj.Kind != "PrometheusRule" || obj.Spec == nil {
		return nil, nil, fmt.Errorf("%s is no PrometheusRule with a spec (kind %q)", path, obj.Kind)
	}
	if ruleFile, err = yaml.Marshal(obj.Spec); err != nil {
		return nil, nil, err
	}
	var spec struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(ruleFile, &spec); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts = append(alerts, Alert{Name: r.Alert, Expr: strings.TrimSpace(r.Expr)})
			}
		}
	}
	if len(alerts) == 0 {
		return nil, nil, fmt.Errorf("%s defines no alert", path)
	}
	return ruleFile, alerts, nil
}
