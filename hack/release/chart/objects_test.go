package chart_test

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// objKey names an object the way the comparison matches them.
type objKey struct{ apiVersion, kind, namespace, name string }

func (k objKey) String() string {
	ns := k.namespace
	if ns != "" {
		ns += "/"
	}
	return fmt.Sprintf("%s %s %s%s", k.apiVersion, k.kind, ns, k.name)
}

// parseObjects splits multi-document YAML and indexes the objects; empty
// documents (only comments) are skipped, duplicates are an error.
func parseObjects(t *testing.T, what string, data []byte) map[objKey]map[string]any {
	t.Helper()
	objs := map[objKey]map[string]any{}
	for i, doc := range splitDocuments(string(data)) {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%s: document %d: %v\n%s", what, i, err, doc)
		}
		if obj == nil {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		k := objKey{str(obj["apiVersion"]), str(obj["kind"]), str(meta["namespace"]), str(meta["name"])}
		if k.kind == "" || k.name == "" {
			t.Fatalf("%s: document %d has no kind or name:\n%s", what, i, doc)
		}
		if _, dup := objs[k]; dup {
			t.Fatalf("%s: %s twice", what, k)
		}
		objs[k] = obj
	}
	return objs
}

func splitDocuments(s string) []string {
	var docs []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if strings.TrimRight(line, " \t\r\n") == "---" {
			docs = append(docs, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line)
	}
	return append(docs, cur.String())
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// helmLabels are the only differences the chart may have from the
// kustomize manifests, and only in metadata.labels.
var helmLabels = []string{
	"helm.sh/chart",
	"app.kubernetes.io/managed-by",
	"app.kubernetes.io/instance",
	"app.kubernetes.io/version",
}

// withoutHelmLabels returns obj with helmLabels removed from
// metadata.labels, failing if one is missing: the chart must set them all.
func withoutHelmLabels(t *testing.T, k objKey, obj map[string]any) map[string]any {
	t.Helper()
	c := deepCopy(obj).(map[string]any)
	meta, _ := c["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	for _, l := range helmLabels {
		if _, ok := labels[l]; !ok {
			t.Errorf("%s: the chart does not set the label %s", k, l)
		}
		delete(labels, l)
	}
	if labels != nil && len(labels) == 0 {
		delete(meta, "labels")
	}
	return c
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(v))
		for k, e := range v {
			c[k] = deepCopy(e)
		}
		return c
	case []any:
		c := make([]any, len(v))
		for i, e := range v {
			c[i] = deepCopy(e)
		}
		return c
	default:
		return v
	}
}

// compareObjects checks that got (the chart) and want (kustomize) hold
// the same objects, equal field by field once helmLabels are ignored, and
// reports each missing, extra or differing object with the field paths.
func compareObjects(t *testing.T, want, got map[objKey]map[string]any) {
	t.Helper()
	for _, k := range sortedKeys(want) {
		g, ok := got[k]
		if !ok {
			t.Errorf("missing from the chart: %s", k)
			continue
		}
		var diffs []string
		diff("", want[k], withoutHelmLabels(t, k, g), &diffs)
		if len(diffs) > 0 {
			t.Errorf("%s differs (want = kustomize, got = chart):\n  %s", k, strings.Join(diffs, "\n  "))
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			t.Errorf("only in the chart: %s", k)
		}
	}
}

func sortedKeys(m map[objKey]map[string]any) []objKey {
	keys := make([]objKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// diff appends "path: want …, got …" for every difference of a and b.
func diff(path string, want, got any, out *[]string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			p := k
			if path != "" {
				p = path + "." + k
			}
			wv, wok := w[k]
			gv, gok := g[k]
			switch {
			case !gok:
				*out = append(*out, fmt.Sprintf("%s: want %s, missing", p, show(wv)))
			case !wok:
				*out = append(*out, fmt.Sprintf("%s: not wanted, got %s", p, show(gv)))
			default:
				diff(p, wv, gv, out)
			}
		}
		return
	case []any:
		g, ok := got.([]any)
		if !ok {
			break
		}
		for i := 0; i < len(w) || i < len(g); i++ {
			p := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i >= len(g):
				*out = append(*out, fmt.Sprintf("%s: want %s, missing", p, show(w[i])))
			case i >= len(w):
				*out = append(*out, fmt.Sprintf("%s: not wanted, got %s", p, show(g[i])))
			default:
				diff(p, w[i], g[i], out)
			}
		}
		return
	}
	if !reflect.DeepEqual(want, got) {
		*out = append(*out, fmt.Sprintf("%s: want %s, got %s", path, show(want), show(got)))
	}
}

func show(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	s := strings.TrimSpace(string(b))
	if strings.Contains(s, "\n") {
		return fmt.Sprintf("%#v", v)
	}
	return fmt.Sprintf("%s (%T)", s, v)
}

// The comparison itself must catch what it is there for.
func TestCompareObjectsFindsDifferences(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": "s", "labels": map[string]any{"a": "b"}},
			"spec":     map[string]any{"ports": []any{map[string]any{"port": float64(443)}}},
		}
	}
	var diffs []string
	w, g := base(), base()
	g["spec"].(map[string]any)["ports"].([]any)[0].(map[string]any)["port"] = float64(444)
	g["metadata"].(map[string]any)["labels"].(map[string]any)["extra"] = "x"
	diff("", w, g, &diffs)
	want := []string{
		"metadata.labels.extra: not wanted, got x (string)",
		"spec.ports[0].port: want 443 (float64), got 444 (float64)",
	}
	if !reflect.DeepEqual(diffs, want) {
		t.Errorf("diff = %q, want %q", diffs, want)
	}

	// Helm labels in a selector are not ignored.
	g = base()
	g["spec"].(map[string]any)["selector"] = map[string]any{"helm.sh/chart": "x"}
	labels := g["metadata"].(map[string]any)["labels"].(map[string]any)
	for _, l := range helmLabels {
		labels[l] = "v"
	}
	k := objKey{"v1", "Service", "", "s"}
	diffs = nil
	diff("", base(), withoutHelmLabels(t, k, g), &diffs)
	if len(diffs) != 1 || !strings.HasPrefix(diffs[0], "spec.selector: not wanted") {
		t.Errorf("diff = %q, want only spec.selector", diffs)
	}
}
