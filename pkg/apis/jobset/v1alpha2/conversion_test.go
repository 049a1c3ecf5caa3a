package v1alpha2_test

import (
	"math/rand"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

const (
	fuzzSeed  = 1234567
	fuzzIters = 60
)

// externalFuzzerFuncs keep fuzzed v1alpha2 values inside what the internal
// version can hold: replicas is never nil, since nil becomes 1 on
// conversion by design (TestReplicasConversion covers that case).
func externalFuzzerFuncs(serializer.CodecFactory) []interface{} {
	return []interface{}{
		func(r *v1alpha2.ReplicatedJob, c randfill.Continue) {
			c.FillNoCustom(r)
			if r.Replicas == nil {
				// Small values, 0 included: the interesting ones.
				r.Replicas = ptr.To(c.Int31n(3))
			}
		},
	}
}

// internalFuzzerFuncs make a fuzzed internal JobSet one the API server could
// have stored: already defaulted, so that decoding it (which defaults)
// gives it back unchanged. scheme converts and defaults.
func internalFuzzerFuncs(scheme *runtime.Scheme) fuzzer.FuzzerFuncs {
	return func(serializer.CodecFactory) []interface{} {
		return []interface{}{
			func(js *jobset.JobSet, c randfill.Continue) {
				c.FillNoCustom(js)
				ext := &v1alpha2.JobSet{}
				if err := scheme.Convert(js, ext, nil); err != nil {
					panic(err)
				}
				scheme.Default(ext)
				if err := scheme.Convert(ext, js, nil); err != nil {
					panic(err)
				}
			},
		}
	}
}

func newFiller(scheme *runtime.Scheme, seed int64, funcs ...fuzzer.FuzzerFuncs) *randfill.Filler {
	all := append([]fuzzer.FuzzerFuncs{metafuzzer.Funcs}, funcs...)
	return fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(all...), rand.NewSource(seed), serializer.NewCodecFactory(scheme))
}

// TestConversionRoundTrip converts fuzzed v1alpha2 JobSets and lists to the
// internal version and back: nothing may be lost or changed.
func TestConversionRoundTrip(t *testing.T) {
	scheme := newScheme()
	f := newFiller(scheme, fuzzSeed, externalFuzzerFuncs).NilChance(.2).NumElements(1, 2)
	containers, replicas0 := 0, 0
	for i := 0; i < fuzzIters; i++ {
		for _, pair := range []struct {
			ext, back runtime.Object
			internal  runtime.Object
		}{
			{&v1alpha2.JobSet{}, &v1alpha2.JobSet{}, &jobset.JobSet{}},
			{&v1alpha2.JobSetList{}, &v1alpha2.JobSetList{}, &jobset.JobSetList{}},
		} {
			f.Fill(pair.ext)
			if err := scheme.Convert(pair.ext, pair.internal, nil); err != nil {
				t.Fatalf("iteration %d: to internal: %v", i, err)
			}
			if err := scheme.Convert(pair.internal, pair.back, nil); err != nil {
				t.Fatalf("iteration %d: to v1alpha2: %v", i, err)
			}
			if !apiequality.Semantic.DeepEqual(pair.ext, pair.back) {
				t.Fatalf("iteration %d: %T changed by the round trip:\n%s", i, pair.ext, diff.Diff(pair.ext, pair.back))
			}
			if js, ok := pair.ext.(*v1alpha2.JobSet); ok {
				for _, rj := range js.Spec.ReplicatedJobs {
					containers += len(rj.Template.Spec.Template.Spec.Containers)
					if *rj.Replicas == 0 {
						replicas0++
					}
				}
			}
		}
	}
	// The fuzzer must reach into the templates for the test to mean much.
	if containers == 0 {
		t.Errorf("no fuzzed JobSet had a container")
	}
	t.Logf("%d containers, %d replicatedJobs with replicas 0", containers, replicas0)
}

// TestReplicasConversion pins the one conversion that is not a bijection:
// an absent replicas is 1, an explicit one (0 included) is kept both ways.
func TestReplicasConversion(t *testing.T) {
	scheme := newScheme()
	for _, tc := range []struct {
		in   *int32
		want int32
	}{{nil, 1}, {ptr.To[int32](0), 0}, {ptr.To[int32](1), 1}, {ptr.To[int32](7), 7}} {
		ext := &v1alpha2.JobSet{Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{{Name: "r", Replicas: tc.in}}}}
		internal := &jobset.JobSet{}
		if err := scheme.Convert(ext, internal, nil); err != nil {
			t.Fatal(err)
		}
		if got := internal.Spec.ReplicatedJobs[0].Replicas; got != tc.want {
			t.Errorf("replicas %v: internal %d, want %d", tc.in, got, tc.want)
		}
		back := &v1alpha2.JobSet{}
		if err := scheme.Convert(internal, back, nil); err != nil {
			t.Fatal(err)
		}
		if got := back.Spec.ReplicatedJobs[0].Replicas; got == nil || *got != tc.want {
			t.Errorf("replicas %v: back %v, want %d", tc.in, got, tc.want)
		}
	}
}

// TestSerializationRoundTrip uses apimachinery's round-trip helpers:
// v1alpha2 -> JSON -> v1alpha2, and internal -> v1alpha2 -> JSON -> v1alpha2
// (defaulted on decode) -> internal. There is no protobuf for JobSet.
func TestSerializationRoundTrip(t *testing.T) {
	scheme := newScheme()
	codecs := serializer.NewCodecFactory(scheme)
	// Kinds that metav1.AddToGroupVersion registers in the group, which are
	// not JobSet's to test.
	skip := map[schema.GroupVersionKind]bool{}
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Group == jobset.GroupName && gvk.Kind != "JobSet" && gvk.Kind != "JobSetList" {
			skip[gvk] = true
		}
	}
	t.Run("external", func(t *testing.T) {
		f := newFiller(scheme, fuzzSeed+1, externalFuzzerFuncs).NilChance(.3).NumElements(1, 2)
		roundtrip.RoundTripExternalTypesWithoutProtobuf(t, scheme, codecs, f, skip)
	})
	t.Run("internal", func(t *testing.T) {
		f := newFiller(scheme, fuzzSeed+2, internalFuzzerFuncs(scheme)).NilChance(.3).NumElements(1, 2)
		roundtrip.RoundTripTypesWithoutProtobuf(t, scheme, codecs, f, skip)
	})
}

// The install scheme must know the JobSet kinds in both versions; the rest
// of this file relies on it.
func TestSchemeKinds(t *testing.T) {
	scheme := newScheme()
	for _, obj := range []runtime.Object{&v1alpha2.JobSet{}, &jobset.JobSet{}, &v1alpha2.JobSetList{}, &jobset.JobSetList{}} {
		if _, _, err := scheme.ObjectKinds(obj); err != nil {
			t.Errorf("%T: %v", obj, err)
		}
	}
}
