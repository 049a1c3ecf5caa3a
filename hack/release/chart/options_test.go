package chart_test

import (
	"reflect"
	"strings"
	"testing"
)

// get follows a dotted path of map keys.
func get(t *testing.T, obj map[string]any, path string) any {
	t.Helper()
	var cur any = obj
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s: %s is not a mapping", path, k)
		}
		cur = m[k]
	}
	return cur
}

// The values the comparisons leave at their defaults land where they
// should.
func TestPodOptions(t *testing.T) {
	toleration := map[string]any{"key": "dedicated", "operator": "Exists"}
	objs := renderChart(t, map[string]any{
		"image":            map[string]any{"pullPolicy": "Always"},
		"imagePullSecrets": []any{map[string]any{"name": "regcred"}},
		"controller": map[string]any{
			"nodeSelector":      map[string]any{"kubernetes.io/os": "linux"},
			"tolerations":       []any{toleration},
			"priorityClassName": "system-cluster-critical",
			"podAnnotations":    map[string]any{"example.com/a": "b"},
			// The selector's label cannot be overridden.
			"podLabels": map[string]any{"team": "ml", "app.kubernetes.io/name": "other"},
			"extraArgs": []any{"--v=2"},
			"affinity":  nil, // null drops the default
		},
		"apiserver": map[string]any{"etcd": map[string]any{"persistence": map[string]any{"storageClass": "fast", "size": "20Gi"}}},
	})
	d := objs[controllerKey]
	pod := get(t, d, "spec.template.spec").(map[string]any)
	c := pod["containers"].([]any)[0].(map[string]any)
	for path, want := range map[string]any{
		"nodeSelector":      map[string]any{"kubernetes.io/os": "linux"},
		"tolerations":       []any{toleration},
		"priorityClassName": "system-cluster-critical",
		"imagePullSecrets":  []any{map[string]any{"name": "regcred"}},
		"affinity":          nil,
	} {
		if got := pod[path]; !reflect.DeepEqual(got, want) {
			t.Errorf("controller pod %s = %v, want %v", path, got, want)
		}
	}
	if got := c["imagePullPolicy"]; got != "Always" {
		t.Errorf("imagePullPolicy = %v, want Always", got)
	}
	if args := c["args"].([]any); args[len(args)-1] != "--v=2" {
		t.Errorf("controller args = %v, want --v=2 last", args)
	}
	wantLabels := map[string]any{"team": "ml", "app.kubernetes.io/name": "jobset-controller"}
	if got := get(t, d, "spec.template.metadata.labels"); !reflect.DeepEqual(got, wantLabels) {
		t.Errorf("pod labels = %v, want %v", got, wantLabels)
	}
	if got := get(t, d, "spec.template.metadata.annotations"); !reflect.DeepEqual(got, map[string]any{"example.com/a": "b"}) {
		t.Errorf("pod annotations = %v", got)
	}

	claim := get(t, objs[apiserverKey], "spec.volumeClaimTemplates").([]any)[0].(map[string]any)
	if got := get(t, claim, "spec.storageClassName"); got != "fast" {
		t.Errorf("storageClassName = %v, want fast", got)
	}
	if got := get(t, claim, "spec.resources.requests.storage"); got != "20Gi" {
		t.Errorf("volume size = %v, want 20Gi", got)
	}
}

// In external mode a custom affinity replaces the default anti-affinity,
// and the replica count and PDB follow the values.
func TestExternalOptions(t *testing.T) {
	affinity := map[string]any{"nodeAffinity": map[string]any{
		"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{
				map[string]any{"key": "pool", "operator": "In", "values": []any{"system"}},
			}}},
		},
	}}
	objs := renderChart(t, map[string]any{"apiserver": map[string]any{
		"etcd":     map[string]any{"mode": "external", "servers": []any{"https://a:2379", "https://b:2379"}},
		"replicas": 3,
		"affinity": affinity,
		"pdb":      map[string]any{"enabled": false},
	}})
	k := objKey{"apps/v1", "Deployment", namespace, "jobset-apiserver"}
	d, ok := objs[k]
	if !ok {
		t.Fatalf("no %s", k)
	}
	if got := get(t, d, "spec.replicas"); got != float64(3) {
		t.Errorf("replicas = %v, want 3", got)
	}
	if got := get(t, d, "spec.template.spec.affinity"); !reflect.DeepEqual(got, affinity) {
		t.Errorf("affinity = %v, want %v", got, affinity)
	}
	if got := get(t, d, "spec.template.spec.topologySpreadConstraints"); got == nil {
		t.Error("the default zone spread is gone")
	}
	args := get(t, d, "spec.template.spec.containers").([]any)[0].(map[string]any)["args"].([]any)
	if !contains(args, "--etcd-servers=https://a:2379,https://b:2379") {
		t.Errorf("args %v lack the etcd servers", args)
	}
	if _, ok := objs[objKey{"policy/v1", "PodDisruptionBudget", namespace, "jobset-apiserver"}]; ok {
		t.Error("apiserver PDB rendered with pdb.enabled=false")
	}
	if _, ok := objs[apiserverKey]; ok {
		t.Error("a StatefulSet besides the Deployment in external mode")
	}
}

func contains(list []any, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
