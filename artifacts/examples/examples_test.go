package examples_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/apis/jobset/install"
	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/apis/jobset/validation"
)

// documentSeparator matches a YAML document separator on a line of its own.
var documentSeparator = regexp.MustCompile(`(?m)^---\s*$`)

func exampleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no *.yaml examples found")
	}
	return files
}

// TestExamplesAreValidJobSets decodes every example strictly (unknown and
// duplicate fields are errors) as a v1alpha2 JobSet, defaults it the way the
// API server does, converts it to the internal type and validates it as a
// create.
func TestExamplesAreValidJobSets(t *testing.T) {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	decoder := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme,
		json.SerializerOptions{Yaml: true, Strict: true})

	for _, file := range exampleFiles(t) {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if docs := documentSeparator.Split(string(data), -1); len(nonEmpty(docs)) != 1 {
				t.Fatalf("want exactly one YAML document, found %d", len(nonEmpty(docs)))
			}

			obj, gvk, err := decoder.Decode(data, nil, &v1alpha2.JobSet{})
			if err != nil {
				t.Fatalf("strict decoding: %v", err)
			}
			if *gvk != v1alpha2.SchemeGroupVersion.WithKind("JobSet") {
				t.Fatalf("decoded %v, want a %v JobSet", gvk, v1alpha2.SchemeGroupVersion)
			}
			external, ok := obj.(*v1alpha2.JobSet)
			if !ok {
				t.Fatalf("decoded a %T, want *v1alpha2.JobSet", obj)
			}
			if external.Name == "" {
				t.Fatal("metadata.name is empty")
			}
			if external.Namespace != "" {
				t.Errorf("metadata.namespace is %q; examples go to the namespace of the kubectl context", external.Namespace)
			}

			scheme.Default(external)
			internal := &jobset.JobSet{}
			if err := scheme.Convert(external, internal, nil); err != nil {
				t.Fatalf("converting to the internal version: %v", err)
			}
			// The API server takes the namespace from the request path.
			internal.Namespace = "default"
			for _, e := range validation.ValidateJobSet(internal) {
				t.Errorf("validation: %v", e)
			}
			checkSize(t, external)
		})
	}
}

// checkSize keeps the examples small enough for the local kwok cluster.
func checkSize(t *testing.T, js *v1alpha2.JobSet) {
	t.Helper()
	if n := len(js.Spec.ReplicatedJobs); n > 3 {
		t.Errorf("%d replicatedJobs; examples have at most 3", n)
	}
	jobs := int32(0)
	for _, rj := range js.Spec.ReplicatedJobs {
		jobs += *rj.Replicas
		spec := rj.Template.Spec
		if p := spec.Parallelism; p != nil && *p > 4 {
			t.Errorf("replicatedJob %s: parallelism %d; examples run at most 4 pods per Job", rj.Name, *p)
		}
		if c := spec.Completions; c != nil && *c > 4 {
			t.Errorf("replicatedJob %s: completions %d; examples run at most 4 pods per Job", rj.Name, *c)
		}
	}
	if jobs > 3 {
		t.Errorf("%d Jobs in all; examples have at most 3", jobs)
	}
}

// TestSimpleIsTheDemo pins what `make run` relies on.
func TestSimpleIsTheDemo(t *testing.T) {
	data, err := os.ReadFile("simple.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js := &v1alpha2.JobSet{}
	scheme := runtime.NewScheme()
	install.Install(scheme)
	decoder := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	if _, _, err := decoder.Decode(data, nil, js); err != nil {
		t.Fatal(err)
	}
	if js.Name != "simple" || len(js.Spec.ReplicatedJobs) != 1 {
		t.Fatalf("want JobSet simple with one replicatedJob, got %s with %d", js.Name, len(js.Spec.ReplicatedJobs))
	}
	rj := js.Spec.ReplicatedJobs[0]
	spec := rj.Template.Spec
	if rj.Name != "workers" || rj.Replicas == nil || *rj.Replicas != 2 ||
		spec.Parallelism == nil || *spec.Parallelism != 2 || spec.Completions == nil || *spec.Completions != 2 {
		t.Fatalf("want replicatedJob workers with replicas, parallelism and completions 2, got %+v", rj)
	}
}

// TestReadmeListsEveryExample keeps README.md in step with the files.
func TestReadmeListsEveryExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range exampleFiles(t) {
		if !bytes.Contains(readme, []byte("`"+file+"`")) {
			t.Errorf("README.md does not mention `%s`", file)
		}
	}
}

func nonEmpty(docs []string) []string {
	var out []string
	for _, d := range docs {
		for _, line := range strings.Split(d, "\n") {
			if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
				out = append(out, d)
				break
			}
		}
	}
	return out
}
