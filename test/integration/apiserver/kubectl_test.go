package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/integration/framework"
)

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

// TestKubectlFacing covers what kubectl reads besides the objects: tables,
// discovery, OpenAPI, health endpoints and metrics.
func TestKubectlFacing(t *testing.T) {
	s := framework.StartServer(t)
	raw := newRawClient(t, s.Config)
	ns := "kubectl"
	mustCreate(t, s, newJobSet(ns, "running"))
	mustCreate(t, s, newJobSet(ns, "paused", suspended))

	t.Run("Table", func(t *testing.T) {
		r := raw.get(t, jobsetsPath(ns)+"?includeObject=None", "Accept", tableAccept)
		if r.code != http.StatusOK {
			t.Fatalf("table list: %v", r)
		}
		var table metav1.Table
		if err := json.Unmarshal(r.body, &table); err != nil || table.Kind != "Table" {
			t.Fatalf("decoding table (%v): %s", err, r.body)
		}
		var cols []string
		for _, c := range table.ColumnDefinitions {
			cols = append(cols, fmt.Sprintf("%s/%d", c.Name, c.Priority))
		}
		want := []string{"Name/0", "TerminalState/0", "Restarts/0", "Completed/0", "Suspended/0", "Age/0", "Ready/1", "Attempts/1"}
		if !slices.Equal(cols, want) {
			t.Errorf("columns %v, want %v", cols, want)
		}
		if table.ResourceVersion == "" {
			t.Errorf("table has no resourceVersion")
		}
		rows := map[string][]any{}
		for _, row := range table.Rows {
			if len(row.Cells) != len(want) {
				t.Fatalf("row has %d cells, want %d: %v", len(row.Cells), len(want), row.Cells)
			}
			rows[row.Cells[0].(string)] = row.Cells
			if len(row.Object.Raw) != 0 {
				t.Errorf("includeObject=None still carries the object")
			}
		}
		paused, ok := rows["paused"]
		if !ok {
			t.Fatalf("no row for paused: %v", rows)
		}
		// JSON numbers decode as float64.
		if paused[1] != "" || paused[2] != "0" || paused[3] != "" || paused[4] != "true" || paused[6] != "0/3" || paused[7] != float64(0) {
			t.Errorf("paused row = %v", paused)
		}
		if age, _ := paused[5].(string); age == "" || age == "<unknown>" {
			t.Errorf("age cell %q", paused[5])
		}
		if running := rows["running"]; running == nil || running[4] != "" {
			t.Errorf("running row = %v, want an empty Suspended cell", running)
		}

		one := raw.get(t, jobsetPath(ns, "paused"), "Accept", tableAccept)
		var single metav1.Table
		if err := json.Unmarshal(one.body, &single); err != nil || len(single.Rows) != 1 {
			t.Fatalf("single-object table: %v", one)
		}
		// By default the row carries the object as PartialObjectMetadata.
		if !strings.Contains(string(single.Rows[0].Object.Raw), `"PartialObjectMetadata"`) {
			t.Errorf("row object = %s, want PartialObjectMetadata", single.Rows[0].Object.Raw)
		}
	})

	// The metadata client (garbage collector, namespace deletion, quota)
	// asks for PartialObjectMetadata in protobuf.
	t.Run("MetadataClient", func(t *testing.T) {
		mc, err := metadata.NewForConfig(s.Config)
		if err != nil {
			t.Fatal(err)
		}
		res := mc.Resource(jobsetsGVR).Namespace(ns)
		list, err := res.List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("metadata list: %v", err)
		}
		var names []string
		for _, item := range list.Items {
			names = append(names, item.Name)
		}
		sort.Strings(names)
		if !slices.Equal(names, []string{"paused", "running"}) {
			t.Errorf("metadata list names %v", names)
		}
		one, err := res.Get(context.Background(), "paused", metav1.GetOptions{})
		if err != nil || one.UID == "" {
			t.Fatalf("metadata get: %v", err)
		}
		w, err := res.Watch(context.Background(), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		mustCreate(t, s, newJobSet(ns, "meta-watched"))
		ev := nextNonBookmark(t, w)
		if pom, ok := ev.Object.(*metav1.PartialObjectMetadata); !ok || ev.Type != "ADDED" || pom.Name != "meta-watched" {
			t.Errorf("metadata watch event %s %T", ev.Type, ev.Object)
		}
		if err := res.Delete(context.Background(), "meta-watched", metav1.DeleteOptions{}); err != nil {
			t.Errorf("metadata delete: %v", err)
		}
	})

	t.Run("Discovery", func(t *testing.T) {
		list, err := s.Client.Discovery().ServerResourcesForGroupVersion(v1alpha2.SchemeGroupVersion.String())
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]metav1.APIResource{}
		for _, r := range list.APIResources {
			byName[r.Name] = r
		}
		js, ok := byName["jobsets"]
		if !ok {
			t.Fatalf("no jobsets in %v", list.APIResources)
		}
		if !slices.Equal(js.ShortNames, []string{"js"}) || !slices.Equal(js.Categories, []string{"all"}) ||
			!js.Namespaced || js.Kind != "JobSet" || js.SingularName != "jobset" {
			t.Errorf("jobsets resource = %+v", js)
		}
		for _, verb := range []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"} {
			if !slices.Contains(js.Verbs, verb) {
				t.Errorf("jobsets verbs %v lack %s", js.Verbs, verb)
			}
		}
		st, ok := byName["jobsets/status"]
		if !ok {
			t.Fatalf("no jobsets/status in %v", list.APIResources)
		}
		if !slices.Contains(st.Verbs, "update") || !slices.Contains(st.Verbs, "patch") || !slices.Contains(st.Verbs, "get") {
			t.Errorf("jobsets/status verbs %v", st.Verbs)
		}
		groups, err := s.Client.Discovery().ServerGroups()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, g := range groups.Groups {
			if g.Name == "jobset.x-k8s.io" && g.PreferredVersion.Version == "v1alpha2" {
				found = true
			}
		}
		if !found {
			t.Errorf("group jobset.x-k8s.io/v1alpha2 not in %v", groups.Groups)
		}
	})

	t.Run("OpenAPIv2", func(t *testing.T) {
		r := raw.get(t, "/openapi/v2")
		if r.code != http.StatusOK {
			t.Fatalf("/openapi/v2: %v", r)
		}
		var doc struct {
			Definitions map[string]struct {
				GVK []map[string]string `json:"x-kubernetes-group-version-kind"`
			} `json:"definitions"`
		}
		if err := json.Unmarshal(r.body, &doc); err != nil {
			t.Fatal(err)
		}
		var found []string
		for name, def := range doc.Definitions {
			for _, gvk := range def.GVK {
				if gvk["group"] == "jobset.x-k8s.io" && gvk["version"] == "v1alpha2" && gvk["kind"] == "JobSet" {
					found = append(found, name)
				}
			}
		}
		if len(found) != 1 || !strings.HasSuffix(found[0], ".JobSet") {
			t.Errorf("definitions with the JobSet GVK: %v, want one named *.JobSet", found)
		}
	})

	t.Run("OpenAPIv3", func(t *testing.T) {
		idx := raw.get(t, "/openapi/v3")
		if idx.code != http.StatusOK || !strings.Contains(string(idx.body), "apis/jobset.x-k8s.io/v1alpha2") {
			t.Errorf("/openapi/v3 index: %v", idx)
		}
		r := raw.get(t, "/openapi/v3/apis/jobset.x-k8s.io/v1alpha2")
		if r.code != http.StatusOK {
			t.Fatalf("openapi v3: %v", r)
		}
		var doc struct {
			Components struct {
				Schemas map[string]schemaV3 `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(r.body, &doc); err != nil {
			t.Fatal(err)
		}
		schemas := doc.Components.Schemas
		var jobSet *schemaV3
		for name, sc := range schemas {
			for _, gvk := range sc.GVK {
				if gvk["group"] == "jobset.x-k8s.io" && gvk["kind"] == "JobSet" {
					sc := sc
					jobSet = &sc
					t.Logf("JobSet schema: %s", name)
				}
			}
		}
		if jobSet == nil {
			t.Fatalf("no schema with the JobSet GVK among %d", len(schemas))
		}
		spec := resolve(t, schemas, jobSet.Properties["spec"])
		rjs, ok := spec.Properties["replicatedJobs"]
		if !ok {
			t.Fatalf("spec schema has no replicatedJobs")
		}
		if rjs.ListType != "map" || !slices.Equal(rjs.ListMapKeys, []string{"name"}) {
			t.Errorf("spec.replicatedJobs: x-kubernetes-list-type %q list-map-keys %v, want map and [name]", rjs.ListType, rjs.ListMapKeys)
		}
		item := resolve(t, schemas, *rjs.Items)
		if !slices.Contains(item.Required, "name") {
			t.Errorf("replicatedJob schema requires %v, want name among them", item.Required)
		}
	})

	t.Run("Health", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/livez", "/readyz"} {
			if r := raw.get(t, p); r.code != http.StatusOK || string(r.body) != "ok" {
				t.Errorf("%s: %v", p, r)
			}
		}
		if r := raw.get(t, "/readyz?verbose"); r.code != http.StatusOK || !strings.Contains(string(r.body), "[+]etcd ok") {
			t.Errorf("/readyz?verbose: %v", r)
		}
	})

	t.Run("Metrics", func(t *testing.T) {
		r := raw.get(t, "/metrics", "Accept", "text/plain")
		if r.code != http.StatusOK {
			t.Fatalf("/metrics: %v", r)
		}
		body := string(r.body)
		if !strings.Contains(body, "apiserver_request_total") {
			t.Errorf("/metrics lacks apiserver_request_total")
		}
		if !strings.Contains(body, `resource="jobsets"`) {
			t.Errorf("/metrics has no series for resource jobsets")
		}
	})
}

// schemaV3 is the part of an OpenAPI v3 schema the test reads.
type schemaV3 struct {
	Ref         string              `json:"$ref"`
	AllOf       []schemaV3          `json:"allOf"`
	Properties  map[string]schemaV3 `json:"properties"`
	Items       *schemaV3           `json:"items"`
	Required    []string            `json:"required"`
	ListType    string              `json:"x-kubernetes-list-type"`
	ListMapKeys []string            `json:"x-kubernetes-list-map-keys"`
	GVK         []map[string]string `json:"x-kubernetes-group-version-kind"`
}

// resolve follows $ref, directly or through a single-element allOf.
func resolve(t *testing.T, schemas map[string]schemaV3, s schemaV3) schemaV3 {
	t.Helper()
	for i := 0; i < 5; i++ {
		ref := s.Ref
		if ref == "" && len(s.AllOf) == 1 {
			ref = s.AllOf[0].Ref
		}
		if ref == "" {
			return s
		}
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		next, ok := schemas[name]
		if !ok {
			t.Fatalf("dangling $ref %s", ref)
		}
		s = next
	}
	t.Fatalf("$ref chain too long")
	return s
}
