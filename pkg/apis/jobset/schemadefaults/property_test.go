package schemadefaults

import (
	"flag"
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

var (
	propertySeed  = flag.Int64("schemadefaults.seed", 20260101, "seed of the randomized template tests")
	propertyIters = flag.Int("schemadefaults.iters", 150, "iterations of the randomized template tests")
)

// templateFiller fills JobTemplateSpecs at random. The apimachinery meta
// fuzzers keep ObjectMeta, Time and Quantity valid; the functions here make
// the defaultable fields absent often enough to matter.
func templateFiller(seed int64) *randfill.Filler {
	codecs := serializer.NewCodecFactory(runtime.NewScheme())
	funcs := fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, func(serializer.CodecFactory) []interface{} {
		return []interface{}{
			func(p *corev1.ContainerPort, c randfill.Continue) {
				c.FillNoCustom(p)
				if c.Bool() {
					p.Protocol = ""
				}
			},
			func(g *corev1.GRPCAction, c randfill.Continue) {
				c.FillNoCustom(g)
				if c.Bool() {
					g.Service = nil
				}
			},
			func(r *corev1.RBDVolumeSource, c randfill.Continue) {
				c.FillNoCustom(r)
				if c.Bool() {
					r.RBDPool, r.RadosUser = "", ""
				}
			},
			func(s *corev1.ScaleIOVolumeSource, c randfill.Continue) {
				c.FillNoCustom(s)
				if c.Bool() {
					s.StorageMode, s.FSType = "", ""
				}
			},
		}
	})
	return fuzzer.FuzzerFor(funcs, rand.NewSource(seed), codecs).NilChance(0.3).NumElements(0, 2)
}

func toUnstructured(t *testing.T, obj interface{}) map[string]interface{} {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatalf("ToUnstructured: %v", err)
	}
	return u
}

// keptIn reports the first path where a non-null value of before is missing
// or different in after, or "" if every set value is kept.
func keptIn(before, after interface{}, path string) string {
	switch b := before.(type) {
	case nil:
		return ""
	case map[string]interface{}:
		a, ok := after.(map[string]interface{})
		if !ok {
			return path
		}
		for k, v := range b {
			if p := keptIn(v, a[k], path+"."+k); p != "" {
				return p
			}
		}
		return ""
	case []interface{}:
		a, ok := after.([]interface{})
		if !ok || len(a) != len(b) {
			return path
		}
		for i := range b {
			if p := keptIn(b[i], a[i], fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
		return ""
	default:
		if !reflect.DeepEqual(before, after) {
			return path
		}
		return ""
	}
}

// TestRandomTemplates checks on random templates that applying the schema
// defaults never changes a value that was set, that it is idempotent, and
// that it agrees with the generated defaulter (defaulter-gen reads the same
// +default markers).
func TestRandomTemplates(t *testing.T) {
	f := templateFiller(*propertySeed)
	defaulted := 0
	for i := 0; i < *propertyIters; i++ {
		orig := &batchv1.JobTemplateSpec{}
		f.Fill(orig)
		// The JobSet-level defaults of the template, so that the generated
		// JobSet defaulter below sets only marker defaults.
		orig.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
		if orig.Spec.Template.Spec.RestartPolicy == "" {
			orig.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		}

		got := orig.DeepCopy()
		if err := ApplyToJobTemplate(got); err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, orig) {
			defaulted++
		}
		if p := keptIn(toUnstructured(t, orig), toUnstructured(t, got), ""); p != "" {
			t.Fatalf("iteration %d: set value changed at %s", i, p)
		}

		again := got.DeepCopy()
		if err := ApplyToJobTemplate(again); err != nil {
			t.Fatalf("iteration %d: second application: %v", i, err)
		}
		if !reflect.DeepEqual(again, got) {
			t.Fatalf("iteration %d: not idempotent", i)
		}

		js := &v1alpha2.JobSet{Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{{
			Name: "r", Replicas: ptr.To[int32](1), Template: *orig.DeepCopy(),
		}}}}
		v1alpha2.SetObjectDefaults_JobSet(js)
		if gen := &js.Spec.ReplicatedJobs[0].Template; !apiequality.Semantic.DeepEqual(gen, got) {
			t.Fatalf("iteration %d: schema defaults and generated defaults differ at %s / %s", i,
				keptIn(toUnstructured(t, gen), toUnstructured(t, got), ""),
				keptIn(toUnstructured(t, got), toUnstructured(t, gen), ""))
		}
	}
	if defaulted == 0 {
		t.Errorf("no random template needed a default: the filler does not exercise the walk")
	}
	t.Logf("%d of %d random templates got defaults", defaulted, *propertyIters)
}

// TestRandomClaims checks that random claims go through unchanged: no
// effective default is declared under a PersistentVolumeClaim.
func TestRandomClaims(t *testing.T) {
	f := templateFiller(*propertySeed + 1)
	for i := 0; i < *propertyIters; i++ {
		orig := &corev1.PersistentVolumeClaim{}
		f.Fill(orig)
		got := orig.DeepCopy()
		if err := ApplyToPersistentVolumeClaim(got); err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, orig) {
			t.Fatalf("iteration %d: claim changed", i)
		}
	}
}

// TestPreCheckMatchesWalk checks that the typed pre-check never says
// "nothing to do" when the unstructured walk would set a default (that would
// lose a default), and that it is not needlessly cautious either, on random
// templates and on random values of the hand-made schema.
func TestPreCheckMatchesWalk(t *testing.T) {
	seen := map[bool]int{}
	check := func(t *testing.T, v *structural, root string, obj interface{}) {
		t.Helper()
		n := v.nodes[root]
		pre := n.needs(reflect.ValueOf(obj).Elem())
		walked := n.apply(toUnstructured(t, obj))
		if pre != walked {
			t.Fatalf("pre-check %v, walk %v for %+v", pre, walked, obj)
		}
		seen[pre]++
	}
	f := templateFiller(*propertySeed + 2)
	t.Run("templates", func(t *testing.T) {
		for i := 0; i < *propertyIters; i++ {
			tmpl := &batchv1.JobTemplateSpec{}
			f.Fill(tmpl)
			check(t, get(), JobTemplateSpecDefinition, tmpl)
			// And once more after defaulting: both must say no.
			if err := ApplyToJobTemplate(tmpl); err != nil {
				t.Fatal(err)
			}
			check(t, get(), JobTemplateSpecDefinition, tmpl)
		}
	})
	t.Run("synthetic", func(t *testing.T) {
		v := synView()
		for i := 0; i < *propertyIters; i++ {
			obj := &synRoot{}
			f.Fill(obj)
			check(t, v, "syn.Root", obj)
		}
	})
	if seen[true] == 0 || seen[false] == 0 {
		t.Errorf("one-sided cases: %v", seen)
	}
	t.Logf("cases needing defaults: %d, not: %d", seen[true], seen[false])
}

// TestCleanMatchesCheck checks that the typed fast path of the required and
// enum check never passes a value the exact check rejects, and that it does
// pass the usual valid template (or the fast path would never be taken).
func TestCleanMatchesCheck(t *testing.T) {
	seen := map[bool]int{}
	exact := func(t *testing.T, v *structural, root string, obj interface{}) {
		t.Helper()
		n := v.nodes[root]
		fast := n.clean(reflect.ValueOf(obj))
		var errs field.ErrorList
		n.check(toUnstructured(t, obj), field.NewPath("x"), &errs)
		if fast && len(errs) > 0 {
			t.Fatalf("fast path passed what the exact check rejects (%v): %+v", errs, obj)
		}
		seen[fast]++
	}
	f := templateFiller(*propertySeed + 3)
	for i := 0; i < *propertyIters; i++ {
		tmpl := &batchv1.JobTemplateSpec{}
		f.Fill(tmpl)
		exact(t, get(), JobTemplateSpecDefinition, tmpl)
		claim := &corev1.PersistentVolumeClaim{}
		f.Fill(claim)
		exact(t, get(), PersistentVolumeClaimDefinition, claim)
	}
	v := synView()
	for i := 0; i < *propertyIters; i++ {
		obj := &synRoot{}
		f.Fill(obj)
		exact(t, v, "syn.Root", obj)
	}

	valid := validTemplate()
	if !get().nodes[JobTemplateSpecDefinition].clean(reflect.ValueOf(valid)) {
		t.Errorf("a valid template does not take the fast path")
	}
	if errs := CheckJobTemplate(valid, field.NewPath("t")); len(errs) != 0 {
		t.Errorf("valid template: %v", errs)
	}
	// Each kind of fault falls back to the exact check, which reports it.
	faults := map[string]func(*batchv1.JobTemplateSpec){
		"no containers":  func(t *batchv1.JobTemplateSpec) { t.Spec.Template.Spec.Containers = nil },
		"bad protocol":   func(t *batchv1.JobTemplateSpec) { t.Spec.Template.Spec.Containers[0].Ports[0].Protocol = "SCTPX" },
		"bad pull":       func(t *batchv1.JobTemplateSpec) { t.Spec.Template.Spec.Containers[0].ImagePullPolicy = "Sometimes" },
		"bad restart":    func(t *batchv1.JobTemplateSpec) { t.Spec.Template.Spec.RestartPolicy = "Maybe" },
		"bad completion": func(t *batchv1.JobTemplateSpec) { t.Spec.CompletionMode = ptr.To(batchv1.CompletionMode("Some")) },
	}
	for name, fault := range faults {
		bad := validTemplate()
		fault(bad)
		if get().nodes[JobTemplateSpecDefinition].clean(reflect.ValueOf(bad)) {
			t.Errorf("%s: took the fast path", name)
		}
		if errs := CheckJobTemplate(bad, field.NewPath("t")); len(errs) == 0 {
			t.Errorf("%s: not reported", name)
		}
	}
	t.Logf("fast path taken: %d, exact check: %d", seen[true], seen[false])
}

// validTemplate is a defaulted template of the usual shape.
func validTemplate() *batchv1.JobTemplateSpec {
	tmpl := &batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
		Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2), CompletionMode: ptr.To(batchv1.IndexedCompletion),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "main", Image: "busybox", Command: []string{"sleep", "1"},
				Env:   []corev1.EnvVar{{Name: "A", Value: "1"}},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/healthz", Port: intstr.FromInt32(8080)}}},
			}},
			Volumes: []corev1.Volume{{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}},
		}},
	}}
	js := &v1alpha2.JobSet{Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{{Name: "r", Replicas: ptr.To[int32](1), Template: *tmpl}}}}
	v1alpha2.SetObjectDefaults_JobSet(js)
	return &js.Spec.ReplicatedJobs[0].Template
}
