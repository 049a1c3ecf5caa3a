package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/generated/openapi"
)

var typesPath = filepath.Join("..", "..", typesDir)

func loadTypes(t *testing.T) *apiPackage {
	t.Helper()
	p, err := load(typesPath, typesImportPath, v1alpha2.SchemeGroupVersion, v1alpha2.AddToScheme)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFieldsMatchTheServedOpenAPI compares every documented struct with
// the OpenAPI definition the server publishes, which openapi-gen derives
// from the same types: the same properties, and the same required ones.
func TestFieldsMatchTheServedOpenAPI(t *testing.T) {
	p := loadTypes(t)
	defs := openapi.GetOpenAPIDefinitions(func(name string) spec.Ref { return spec.MustCreateRef("#/definitions/" + name) })
	structs := 0
	for name, td := range p.types {
		if td.expr == nil {
			continue
		}
		structs++
		def, ok := defs["io.x-k8s.jobset.v1alpha2."+name]
		if !ok {
			t.Errorf("%s: no OpenAPI definition", name)
			continue
		}
		var fields, required []string
		for _, f := range td.fields {
			fields = append(fields, f.json)
			if !f.optional {
				required = append(required, f.json)
			}
		}
		var props []string
		for prop := range def.Schema.Properties {
			// TypeMeta's fields are inlined; the reference leaves them out
			// and names the kind in the section's header instead.
			if prop == "apiVersion" || prop == "kind" {
				continue
			}
			props = append(props, prop)
		}
		if a, b := sorted(fields), sorted(props); a != b {
			t.Errorf("%s: fields %s, OpenAPI properties %s", name, a, b)
		}
		if a, b := sorted(required), sorted(def.Schema.Required); a != b {
			t.Errorf("%s: required %s, OpenAPI required %s", name, a, b)
		}
	}
	if structs < 15 {
		t.Errorf("only %d struct types documented", structs)
	}
}

func sorted(s []string) string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return strings.Join(s, ",")
}

var literalDefault = regexp.MustCompile(`^"?[A-Za-z0-9]+"?$`)

// TestDocumentedDefaultsAreApplied defaults a JobSet that reaches every
// type with a documented default and checks that each literal default the
// reference states is the value the scheme's defaulting writes.
func TestDocumentedDefaultsAreApplied(t *testing.T) {
	p := loadTypes(t)
	scheme := runtime.NewScheme()
	if err := v1alpha2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	js := &v1alpha2.JobSet{Spec: v1alpha2.JobSetSpec{
		ReplicatedJobs:      []v1alpha2.ReplicatedJob{{Name: "workers"}},
		FailurePolicy:       &v1alpha2.FailurePolicy{Rules: []v1alpha2.FailurePolicyRule{{Action: v1alpha2.FailJobSet}}},
		UpdatePolicy:        &v1alpha2.UpdatePolicy{},
		VolumeClaimPolicies: []v1alpha2.VolumeClaimPolicy{{}},
	}}
	scheme.Default(js)
	raw, err := json.Marshal(js)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}

	// Where each type's first instance is in the JSON, following the
	// fields from JobSet (lists: their first item).
	paths := map[string][]string{"JobSet": nil}
	queue := []string{"JobSet"}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		for _, f := range p.types[name].fields {
			for _, n := range localIdents(f.typ) {
				if r, ok := p.types[n]; ok && r.expr != nil {
					if _, seen := paths[n]; !seen {
						paths[n] = append(append([]string(nil), paths[name]...), f.json)
						queue = append(queue, n)
					}
				}
			}
		}
	}

	checked := 0
	for name, td := range p.types {
		for _, f := range td.fields {
			if !literalDefault.MatchString(f.def) {
				continue
			}
			path, ok := paths[name]
			if !ok {
				t.Errorf("%s.%s documents a default, but %s is not reached from JobSet", name, f.json, name)
				continue
			}
			container, ok := lookup(obj, path)
			if !ok {
				t.Errorf("%s.%s: the sample JobSet has no %s at %s; extend the sample", name, f.json, name, strings.Join(path, "."))
				continue
			}
			got, ok := container[f.json]
			want := strings.Trim(f.def, `"`)
			if !ok || fmt.Sprint(got) != want {
				t.Errorf("%s.%s: the reference says the default is %s, defaulting wrote %v", name, f.json, f.def, got)
			}
			checked++
		}
	}
	if checked < 5 {
		t.Errorf("only %d documented defaults checked", checked)
	}
}

// lookup follows path through objects, taking the first item of a list.
func lookup(obj map[string]any, path []string) (map[string]any, bool) {
	cur := any(obj)
	for _, key := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur = m[key]
		if list, ok := cur.([]any); ok {
			if len(list) == 0 {
				return nil, false
			}
			cur = list[0]
		}
	}
	m, ok := cur.(map[string]any)
	return m, ok
}

// TestRender checks the shape of a few entries and that two runs agree.
func TestRender(t *testing.T) {
	first, err := generate(typesPath)
	if err != nil {
		t.Fatal(err)
	}
	second, err := generate(typesPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Error("two runs of the generator differ")
	}
	out := string(first)
	for _, want := range []string{
		"| [JobSet](#jobset) | `jobsets` | `JobSet` |",
		"| [ReplicatedJob](#replicatedjobresource) | `replicatedjobs` | `ReplicatedJobResource` |",
		"| [JobSetList](#jobsetlist) | list of `jobsets` | `JobSetList` |",
		"| `replicatedJobs` | [][ReplicatedJob](#replicatedjob) | optional |",
		"| `template` | [batch/v1.JobTemplateSpec](https://pkg.go.dev/k8s.io/api/batch/v1#JobTemplateSpec) | required |",
		"| `enableDNSHostnames` | bool | optional | true |",
		"| `InPlaceRestart` |",
		// Placeholders survive Markdown.
		"named &lt;jobset&gt;-&lt;name&gt;-&lt;index&gt;",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the reference lacks %q", want)
		}
	}
	// Every linked type has a section.
	for _, m := range regexp.MustCompile(`\]\(#([a-z0-9]+)\)`).FindAllStringSubmatch(out, -1) {
		if !strings.Contains(out, "\n### ") || !regexp.MustCompile(`(?mi)^### `+m[1]+`$`).MatchString(out) {
			t.Errorf("link to #%s has no section", m[1])
		}
	}
}
