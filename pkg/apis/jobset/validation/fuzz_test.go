package validation

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/install"
)

// FuzzValidateJobSet decodes v1alpha2 JSON the way the API server does
// (decode, default, convert to the internal version) and runs every
// validation entry point on the result. Validation must never panic and
// every error must name a field. The JSON files in testdata/seed are the
// seed corpus, which also runs under a plain `go test`.
func FuzzValidateJobSet(f *testing.F) {
	dec := install.NewJobSetDecoder()
	seeds, err := filepath.Glob(filepath.Join("testdata", "seed", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	if len(seeds) == 0 {
		f.Fatal("no seed corpus in testdata/seed")
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		js, err := dec.Decode(data)
		if err != nil {
			return
		}

		checkPaths(t, "ValidateJobSet", ValidateJobSet(js))
		checkPaths(t, "ValidateJobSetUpdate", ValidateJobSetUpdate(js, js))
		checkPaths(t, "ValidateJobSetStatusUpdate", ValidateJobSetStatusUpdate(js, js))
		_ = IsTerminal(js)

		// An update that touches the mutable fields and the template, both
		// while running and while suspended.
		changed := js.DeepCopy()
		changed.Spec.Suspend = ptr.To(!ptr.Deref(js.Spec.Suspend, false))
		for i := range changed.Spec.ReplicatedJobs {
			rj := &changed.Spec.ReplicatedJobs[i]
			rj.Replicas++
			rj.Template.Spec.Parallelism = ptr.To(ptr.Deref(rj.Template.Spec.Parallelism, 1) + 1)
			rj.Template.Spec.Template.Spec.NodeSelector = map[string]string{"fuzz": "yes"}
		}
		checkPaths(t, "ValidateJobSetUpdate", ValidateJobSetUpdate(changed, js))
		checkPaths(t, "ValidateJobSetUpdate", ValidateJobSetUpdate(js, changed))
		if len(changed.Spec.ReplicatedJobs) > 0 {
			changed.Spec.ReplicatedJobs = changed.Spec.ReplicatedJobs[1:]
			checkPaths(t, "ValidateJobSetUpdate", ValidateJobSetUpdate(changed, js))
		}
	})
}

func checkPaths(t *testing.T, fn string, errs field.ErrorList) {
	t.Helper()
	for _, e := range errs {
		if e.Field == "" || e.Field == "<nil>" {
			t.Errorf("%s returned an error without a field path: %v", fn, e)
		}
	}
}

// TestSeedCorpus checks that the seeds decode and that the realistic ones
// pass create validation, so that the fuzzer starts from deep inside the
// validation code rather than from the first error.
func TestSeedCorpus(t *testing.T) {
	dec := install.NewJobSetDecoder()
	cases := []struct {
		file    string
		valid   bool
		minErrs int
	}{
		{file: "minimal.json", valid: true},
		{file: "full.json", valid: true},
		{file: "no-kind.json", valid: true},
		{file: "empty-spec.json", minErrs: 2},
		{file: "invalid.json", minErrs: 40},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "seed", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			js, err := dec.Decode(data)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			errs := ValidateJobSet(js)
			if tc.valid && len(errs) != 0 {
				t.Errorf("unexpected errors: %v", errs)
			}
			if len(errs) < tc.minErrs {
				t.Errorf("got %d errors, want at least %d: %v", len(errs), tc.minErrs, errs)
			}
		})
	}
}
