package apiserver

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/nativejobset/jobset/test/integration/framework"
)

// validBody is a JobSet manifest in JSON with a placeholder for extra spec
// fields and one for the replicas of its only replicatedJob.
func validBody(name, extraSpec, replicas string) []byte {
	return []byte(`{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet","metadata":{"name":"` + name + `"},
		"spec":{` + extraSpec + `"replicatedJobs":[{"name":"w","replicas":` + replicas + `,
		"template":{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}}]}}`)
}

// TestBadInput sends malformed, mistyped, oversized and unknown-field
// requests over raw HTTP. Each must get a 4xx with a useful message, and
// none may disturb the server or an existing object.
func TestBadInput(t *testing.T) {
	s := framework.StartServer(t)
	raw := newRawClient(t, s.Config)
	ns := "bad-input"
	coll := jobsetsPath(ns)

	if r := raw.do(t, http.MethodPost, coll, "application/json", validBody("existing", "", "1")); r.code != http.StatusCreated {
		t.Fatalf("creating the reference object: %v", r)
	}
	existingPath := jobsetPath(ns, "existing")
	before := raw.get(t, existingPath)
	if before.code != http.StatusOK {
		t.Fatalf("get: %v", before)
	}

	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	huge := `"metadata":{"name":"huge","annotations":{"a":"` + strings.Repeat("x", 3*1024*1024+1024) + `"}}`

	cases := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        []byte
		wantCode    int
		wantMsg     []string // fragments of the Status message, any one must match
	}{
		{"malformed JSON", http.MethodPost, coll, "application/json", []byte(`{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":`),
			http.StatusBadRequest, []string{"unexpected end of JSON input"}},
		{"malformed YAML", http.MethodPost, coll, "application/yaml", []byte("apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: [unclosed\n  name: x\n"),
			http.StatusBadRequest, []string{"yaml: line 3: did not find expected"}},
		{"replicas is a string", http.MethodPost, coll, "application/json", validBody("typed", "", `"two"`),
			http.StatusBadRequest, []string{"into Go struct field ReplicatedJob.spec.replicatedJobs.replicas of type int32"}},
		{"replicas 1e30", http.MethodPost, coll, "application/json", validBody("huge-float", "", `1e30`),
			http.StatusBadRequest, []string{"into Go struct field ReplicatedJob.spec.replicatedJobs.replicas of type int32"}},
		{"replicas over int32", http.MethodPost, coll, "application/json", validBody("huge-int", "", `99999999999`),
			http.StatusBadRequest, []string{"into Go struct field ReplicatedJob.spec.replicatedJobs.replicas of type int32"}},
		{"replicas fractional", http.MethodPost, coll, "application/json", validBody("fraction", "", `1.5`),
			http.StatusBadRequest, []string{"into Go struct field ReplicatedJob.spec.replicatedJobs.replicas of type int32"}},
		{"suspend is a number", http.MethodPost, coll, "application/json", validBody("suspend-num", `"suspend":1,`, "1"),
			http.StatusBadRequest, []string{"JobSetSpec.spec.suspend of type bool"}},
		{"unknown field strict", http.MethodPost, coll + "?fieldValidation=Strict", "application/json", validBody("strict", `"bogusField":1,`, "1"),
			http.StatusBadRequest, []string{`unknown field "spec.bogusField"`}},
		{"duplicate field strict", http.MethodPost, coll + "?fieldValidation=Strict", "application/json", validBody("dup", `"suspend":true,"suspend":false,`, "1"),
			http.StatusBadRequest, []string{`duplicate field "spec.suspend"`}},
		{"deeply nested JSON", http.MethodPost, coll, "application/json", validBody("deep", `"deep":`+deep+`,`, "1"),
			http.StatusBadRequest, []string{"exceeded max depth"}},
		{"body over 3MiB", http.MethodPost, coll, "application/json",
			[]byte(`{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet",` + huge + `}`),
			http.StatusRequestEntityTooLarge, []string{"Request entity too large: limit is 3145728"}},
		{"wrong kind", http.MethodPost, coll, "application/json",
			[]byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"job"}}`),
			http.StatusBadRequest, []string{"cannot be handled as a JobSet"}},
		{"unsupported media type", http.MethodPost, coll, "text/plain", []byte("hello"),
			http.StatusUnsupportedMediaType, []string{"accepted media types include: application/json"}},
		{"PUT malformed JSON", http.MethodPut, existingPath, "application/json", []byte(`{"metadata":`),
			http.StatusBadRequest, []string{"unexpected end of JSON input"}},
		{"PUT name mismatch", http.MethodPut, existingPath, "application/json", validBody("other-name", "", "1"),
			http.StatusBadRequest, []string{"does not match the name on the URL"}},
		{"PUT replicas string", http.MethodPut, existingPath, "application/json", validBody("existing", "", `"many"`),
			http.StatusBadRequest, []string{"into Go struct field ReplicatedJob.spec.replicatedJobs.replicas of type int32"}},
		{"PUT body over 3MiB", http.MethodPut, existingPath, "application/json",
			[]byte(`{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet",` + strings.Replace(huge, "huge", "existing", 1) + `}`),
			http.StatusRequestEntityTooLarge, []string{"Request entity too large: limit is 3145728"}},
		{"PATCH malformed merge patch", http.MethodPatch, existingPath, "application/merge-patch+json", []byte(`{"spec":`),
			http.StatusBadRequest, []string{"invalid JSON patch"}},
		{"PATCH malformed JSON patch", http.MethodPatch, existingPath, "application/json-patch+json", []byte(`[{"op":"explode"}]`),
			// The generic server's message does not say which operation.
			http.StatusUnprocessableEntity, []string{"error in our request"}},
		// A patch whose result does not decode is a 422 "patch" error whose
		// message quotes the patched object and ends with the decode error.
		{"PATCH wrong type", http.MethodPatch, existingPath, "application/merge-patch+json", []byte(`{"spec":{"replicatedJobs":"lots"}}`),
			http.StatusUnprocessableEntity, []string{"cannot unmarshal string into Go struct field JobSetSpec.spec.replicatedJobs"}},
		{"PATCH absurd number", http.MethodPatch, existingPath, "application/json-patch+json",
			[]byte(`[{"op":"replace","path":"/spec/replicatedJobs/0/replicas","value":1e30}]`),
			http.StatusUnprocessableEntity, []string{"cannot unmarshal number 1e30 into Go struct field ReplicatedJob.spec.replicatedJobs.replicas"}},
		{"PATCH strict unknown field", http.MethodPatch, existingPath + "?fieldValidation=Strict", "application/merge-patch+json",
			[]byte(`{"spec":{"nonsense":true}}`),
			http.StatusUnprocessableEntity, []string{`unknown field "spec.nonsense"`}},
		{"PATCH apply YAML malformed", http.MethodPatch, existingPath + "?fieldManager=x", "application/apply-patch+yaml",
			[]byte("spec: [\n"), http.StatusBadRequest, []string{"yaml: line 1"}},
		{"PATCH deeply nested", http.MethodPatch, existingPath, "application/merge-patch+json",
			[]byte(`{"spec":{"deep":` + deep + `}}`), http.StatusBadRequest, []string{"invalid JSON patch"}},
		{"PATCH unsupported type", http.MethodPatch, existingPath, "application/xml", []byte("<x/>"),
			http.StatusUnsupportedMediaType, []string{"Unsupported Media Type"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := raw.do(t, tc.method, tc.path, tc.contentType, tc.body)
			if r.code != tc.wantCode {
				t.Fatalf("got %v, want HTTP %d", r, tc.wantCode)
			}
			st, ok := r.status()
			if !ok {
				t.Fatalf("response is not a Status: %v", r)
			}
			if st.Code != int32(tc.wantCode) || st.Status != "Failure" {
				t.Errorf("Status code %d status %q, want %d Failure", st.Code, st.Status, tc.wantCode)
			}
			found := false
			for _, m := range tc.wantMsg {
				if strings.Contains(strings.ToLower(st.Message), strings.ToLower(m)) {
					found = true
				}
			}
			if !found {
				t.Errorf("message %q contains none of %q", st.Message, tc.wantMsg)
			}
		})
	}

	t.Run("UnknownFieldWarn", func(t *testing.T) {
		r := raw.do(t, http.MethodPost, coll+"?fieldValidation=Warn", "application/json", validBody("warned", `"bogusField":1,`, "1"))
		if r.code != http.StatusCreated {
			t.Fatalf("got %v, want 201", r)
		}
		// The header value escapes the quotes: 299 - "unknown field \"spec.bogusField\"".
		if w := strings.Join(r.header.Values("Warning"), "; "); !strings.HasPrefix(w, "299 ") || !strings.Contains(w, `unknown field \"spec.bogusField\"`) {
			t.Errorf("Warning header %q does not name spec.bogusField", w)
		}
		if bytes.Contains(raw.get(t, jobsetPath(ns, "warned")).body, []byte("bogusField")) {
			t.Errorf("unknown field was stored")
		}
	})

	t.Run("UnknownFieldIgnore", func(t *testing.T) {
		r := raw.do(t, http.MethodPost, coll+"?fieldValidation=Ignore", "application/json", validBody("ignored", `"bogusField":1,`, "1"))
		if r.code != http.StatusCreated {
			t.Fatalf("got %v, want 201", r)
		}
		if w := r.header.Values("Warning"); len(w) != 0 {
			t.Errorf("Warning headers %q with fieldValidation=Ignore, want none", w)
		}
	})

	t.Run("ServerUnharmed", func(t *testing.T) {
		if r := raw.get(t, "/readyz"); r.code != http.StatusOK || string(r.body) != "ok" {
			t.Errorf("/readyz: %v", r)
		}
		after := raw.get(t, existingPath)
		if !bytes.Equal(before.body, after.body) {
			t.Errorf("reference object changed:\nbefore %s\nafter  %s", before.body, after.body)
		}
		for _, name := range []string{"typed", "huge-float", "huge-int", "strict", "deep", "huge", "dup", "fraction"} {
			if r := raw.get(t, jobsetPath(ns, name)); r.code != http.StatusNotFound {
				t.Errorf("%s: %v, want 404", name, r)
			}
		}
	})
}
