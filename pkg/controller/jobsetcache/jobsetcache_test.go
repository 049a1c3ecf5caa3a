package jobsetcache

import (
	"math/rand"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apitestingfuzzer "k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// TestCachedJobSetReadsBackWhole fills JobSets with random values: the
// cached form, read back, is the JobSet it was made from.
func TestCachedJobSetReadsBackWhole(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := jobset.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	f := apitestingfuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(7), serializer.NewCodecFactory(scheme))
	for range 30 {
		in := &jobset.JobSet{}
		f.Fill(in)
		c, err := Compact(in.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.JobSet()
		if err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(in, out) {
			t.Fatalf("the cached JobSet reads back changed:\n%s", diff.Diff(in, out))
		}
		if cp := c.DeepCopyObject().(*JobSet); !reflect.DeepEqual(cp, c) {
			t.Fatalf("deep copy differs:\n%s", diff.Diff(c, cp))
		}
		sum := c.Summary()
		if len(sum.ReplicatedJobs) != len(in.Spec.ReplicatedJobs) {
			t.Fatalf("summary has %d replicated Jobs, want %d", len(sum.ReplicatedJobs), len(in.Spec.ReplicatedJobs))
		}
		for i, rj := range sum.ReplicatedJobs {
			want := in.Spec.ReplicatedJobs[i]
			if rj.Name != want.Name || !apiequality.Semantic.DeepEqual(rj.Replicas, want.Replicas) {
				t.Fatalf("summary's replicated Job %d is %q/%v, want %q/%v", i, rj.Name, rj.Replicas, want.Name, want.Replicas)
			}
		}
		if !apiequality.Semantic.DeepEqual(*sum.Status, in.Status) || sum.Name != in.Name || sum.Namespace != in.Namespace ||
			!apiequality.Semantic.DeepEqual(sum.Annotations.Annotations(), in.Annotations) {
			t.Fatal("summary lost the status, the name or the annotations")
		}
	}
}

// TestCorruptSpecIsAnError: a cached spec that does not decode is an
// error for the sync, not a JobSet with an empty spec.
func TestCorruptSpecIsAnError(t *testing.T) {
	c := &JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "js"}, spec: []byte{0x0a, 0xff}}
	if _, err := c.JobSet(); err == nil {
		t.Fatal("decoding a truncated spec succeeded")
	}
}

func TestLister(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	whole := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "whole", Labels: map[string]string{"a": "b"}}}
	cached := &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cached"},
		Spec: jobset.JobSetSpec{ReplicatedJobs: []jobset.ReplicatedJob{{Name: "w", Replicas: ptr.To[int32](3)}},
			Suspend: ptr.To(true)},
	}
	c, err := Compact(cached)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []interface{}{whole, c} {
		if err := idx.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	l := Lister{Indexer: idx}
	got, err := l.Get("ns", "cached")
	if err != nil || !apiequality.Semantic.DeepEqual(got, cached) {
		t.Fatalf("Get(cached) = %+v, %v; want %+v", got, err, cached)
	}
	if got, err := l.Get("ns", "whole"); err != nil || got != whole {
		t.Fatalf("Get(whole) = %p, %v; want the object itself", got, err)
	}
	if _, err := l.Get("other", "cached"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a missing JobSet: %v, want NotFound", err)
	}

	list := Summaries{Indexer: idx}.List()
	if len(list) != 2 {
		t.Fatalf("List = %d summaries, want 2", len(list))
	}
	for _, js := range list {
		want := []Replicas(nil)
		if js.Name == "cached" {
			want = []Replicas{{Name: "w", Replicas: ptr.To[int32](3)}}
		}
		if !apiequality.Semantic.DeepEqual(js.ReplicatedJobs, want) {
			t.Fatalf("summary of %s: replicated Jobs %+v, want %+v", js.Name, js.ReplicatedJobs, want)
		}
	}
}

// TestSummaryDoesNotAllocate: the metrics summarize every JobSet at each
// scrape.
func TestSummaryDoesNotAllocate(t *testing.T) {
	c, err := Compact(&jobset.JobSet{Spec: jobset.JobSetSpec{ReplicatedJobs: []jobset.ReplicatedJob{{Name: "w"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(10, func() { _ = c.Summary() }); n != 0 {
		t.Fatalf("Summary allocates %v times", n)
	}
}

// BenchmarkGet is what a sync pays to read its JobSet: the spec decoded
// from the cache, for a JobSet of two replicated Jobs of one container.
func BenchmarkGet(b *testing.B) {
	tmpl := func(name string) jobset.ReplicatedJob {
		rj := jobset.ReplicatedJob{Name: name, Replicas: ptr.To[int32](4)}
		rj.Template.Spec.Parallelism, rj.Template.Spec.Completions = ptr.To[int32](1), ptr.To[int32](1)
		rj.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "registry.example/trainer:v1",
			Command: []string{"python", "train.py"}, Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}
		return rj
	}
	js := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "js"},
		Spec: jobset.JobSetSpec{ReplicatedJobs: []jobset.ReplicatedJob{tmpl("leader"), tmpl("workers")}}}
	c, err := Compact(js)
	if err != nil {
		b.Fatal(err)
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := idx.Add(c); err != nil {
		b.Fatal(err)
	}
	l := Lister{Indexer: idx}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Get("ns", "js"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(c.spec)), "spec-bytes")
}
