package trainer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/spec3"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// trainerUser is the identity hack/local-up.sh gives Trainer's controller
// manager (its client certificate); trainerManager is the field manager
// Trainer applies with.
const (
	trainerUser    = "system:kubeflow-trainer"
	trainerManager = "trainer"
)

// auditEvent is the part of an audit.k8s.io/v1 Event the test reads.
type auditEvent struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject json.RawMessage `json:"requestObject"`
}

// trainerApplies returns the bodies of the successful server-side applies
// (201 for the one that created it, 200 after) of the JobSet ns/name by
// Trainer, oldest first, as jobset-apiserver's audit
// log recorded them (hack/local/trainer-audit-policy.yaml).
func trainerApplies(ns, name string) ([]map[string]any, error) {
	f, err := os.Open(filepath.Join(stack.LocalDir, "logs", "jobset-apiserver-audit.log"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("audit log line: %w", err)
		}
		if e.Stage != "ResponseComplete" || e.Verb != "patch" || e.User.Username != trainerUser ||
			e.ObjectRef.Resource != "jobsets" || e.ObjectRef.Namespace != ns || e.ObjectRef.Name != name ||
			(e.ResponseStatus.Code != 200 && e.ResponseStatus.Code != 201) {
			continue
		}
		u, err := url.Parse(e.RequestURI)
		if err != nil {
			return nil, err
		}
		// Only server-side applies by Trainer's field manager count.
		if u.Query().Get("fieldManager") != trainerManager || len(e.RequestObject) == 0 {
			continue
		}
		var body map[string]any
		if err := json.Unmarshal(e.RequestObject, &body); err != nil {
			return nil, fmt.Errorf("request body of %s: %w", e.RequestURI, err)
		}
		out = append(out, body)
	}
	return out, sc.Err()
}

// jobSetTypeConverter types JobSets with the OpenAPI schema jobset-apiserver
// publishes, list keys and all: the same rules server-side apply follows.
func jobSetTypeConverter() (managedfields.TypeConverter, error) {
	paths, err := disc.OpenAPIV3().Paths()
	if err != nil {
		return nil, err
	}
	gv, ok := paths["apis/jobset.x-k8s.io/v1alpha2"]
	if !ok {
		return nil, fmt.Errorf("no OpenAPI v3 document for jobset.x-k8s.io/v1alpha2")
	}
	raw, err := gv.Schema("application/json")
	if err != nil {
		return nil, err
	}
	var doc spec3.OpenAPI
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if doc.Components == nil {
		return nil, fmt.Errorf("OpenAPI v3 document of jobset.x-k8s.io/v1alpha2 has no components")
	}
	return managedfields.NewTypeConverter(doc.Components.Schemas, false)
}

// notOwned are the fields of an applied object that never enter its
// managedFields: the object's identity and bookkeeping.
var notOwned = fieldpath.NewSet(
	fieldpath.MakePathOrDie("apiVersion"),
	fieldpath.MakePathOrDie("kind"),
	fieldpath.MakePathOrDie("metadata", "name"),
	fieldpath.MakePathOrDie("metadata", "namespace"),
	fieldpath.MakePathOrDie("metadata", "uid"),
	fieldpath.MakePathOrDie("metadata", "resourceVersion"),
	fieldpath.MakePathOrDie("metadata", "generation"),
	fieldpath.MakePathOrDie("metadata", "creationTimestamp"),
	fieldpath.MakePathOrDie("metadata", "managedFields"),
)

// appliedFields is the set of fields an apply of body claims.
func appliedFields(tc managedfields.TypeConverter, body map[string]any) (*fieldpath.Set, error) {
	typed, err := tc.ObjectToTyped(&unstructured.Unstructured{Object: body})
	if err != nil {
		return nil, fmt.Errorf("typing the applied JobSet: %w", err)
	}
	set, err := typed.ToFieldSet()
	if err != nil {
		return nil, err
	}
	return set.Difference(notOwned), nil
}

// ownedFields returns the fields the JobSet's managedFields give manager for
// operation (Apply or Update), and whether there is such an entry.
func ownedFields(js *unstructured.Unstructured, manager, operation string) (*fieldpath.Set, bool, error) {
	for _, e := range js.GetManagedFields() {
		if e.Manager != manager || string(e.Operation) != operation || e.Subresource != "" {
			continue
		}
		set := &fieldpath.Set{}
		if e.FieldsV1 != nil {
			if err := set.FromJSON(bytes.NewReader(e.FieldsV1.GetRawBytes())); err != nil {
				return nil, true, err
			}
		}
		return set, true, nil
	}
	return nil, false, nil
}
