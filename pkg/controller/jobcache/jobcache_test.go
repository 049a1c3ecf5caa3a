package jobcache

import (
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func job() *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "u", ResourceVersion: "3",
			Labels: map[string]string{"b": "2", "a": "1"}, Annotations: map[string]string{"c": "3"}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](2), Suspend: ptr.To(true),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionIgnore}}}},
		Status: batchv1.JobStatus{Active: 1, Ready: ptr.To[int32](1)},
	}
}

func TestMetadataThroughTheObjectInterface(t *testing.T) {
	c := Compact(job())
	var m metav1.Object = c
	if got := m.GetLabels(); !reflect.DeepEqual(got, map[string]string{"a": "1", "b": "2"}) {
		t.Fatalf("GetLabels = %v", got)
	}
	if got := m.GetAnnotations(); !reflect.DeepEqual(got, map[string]string{"c": "3"}) {
		t.Fatalf("GetAnnotations = %v", got)
	}
	if key, err := cache.MetaNamespaceKeyFunc(c); err != nil || key != "ns/j" {
		t.Fatalf("key %q, %v", key, err)
	}
	m.SetLabels(map[string]string{"x": "y"})
	if got := c.Job().Labels; !reflect.DeepEqual(got, map[string]string{"x": "y"}) {
		t.Fatalf("labels after SetLabels = %v", got)
	}
	if (&Job{}).GetLabels() != nil {
		t.Fatal("no labels read as a map")
	}
}

func TestOf(t *testing.T) {
	full := job()
	c := Compact(full)
	got, ok := Of(cache.DeletedFinalStateUnknown{Key: "ns/j", Obj: c})
	if !ok || got.Name != "j" || got.UID != "u" || *got.Spec.Parallelism != 2 || !*got.Spec.Suspend ||
		got.Spec.PodFailurePolicy != PodFailurePolicy || got.Status.Active != 1 || *got.Status.Ready != 1 {
		t.Fatalf("Of = %+v, %v", got, ok)
	}
	if j, ok := Of(full); !ok || j != full {
		t.Fatal("a batchv1.Job is not returned as is")
	}
	if _, ok := Of("x"); ok {
		t.Fatal("a string read as a Job")
	}
	cp := c.DeepCopyObject().(*Job)
	if !reflect.DeepEqual(cp, c) || cp.Job().Spec.Parallelism == c.Job().Spec.Parallelism {
		t.Fatalf("DeepCopyObject = %+v, not a deep copy of %+v", cp, c)
	}
}

// TestOptionalFieldsReadBack: each optional number and boolean reads back
// unset when it was, and with its value when set, zero included.
func TestOptionalFieldsReadBack(t *testing.T) {
	unset := &batchv1.Job{}
	if got := Compact(unset).Job(); !reflect.DeepEqual(got.Spec, batchv1.JobSpec{}) || got.Status.Ready != nil {
		t.Fatalf("unset fields read back as %+v, ready %v", got.Spec, got.Status.Ready)
	}
	zero := &batchv1.Job{
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](0), Completions: ptr.To[int32](0), BackoffLimit: ptr.To[int32](0),
			BackoffLimitPerIndex: ptr.To[int32](0), Suspend: ptr.To(false), ManagedBy: ptr.To("m")},
		Status: batchv1.JobStatus{Ready: ptr.To[int32](0), Succeeded: 3, Failed: 4,
			Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: "True"}}},
	}
	got := Compact(zero).Job()
	if !reflect.DeepEqual(got.Spec, zero.Spec) || !reflect.DeepEqual(got.Status, zero.Status) {
		t.Fatalf("read back\n%+v\n%+v\nwant\n%+v\n%+v", got.Spec, got.Status, zero.Spec, zero.Status)
	}
	big := &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](100000), Completions: ptr.To[int32](-1), Suspend: ptr.To(true)}}
	if got := Compact(big).Job(); *got.Spec.Parallelism != 100000 || *got.Spec.Completions != -1 || !*got.Spec.Suspend {
		t.Fatalf("read back %+v", got.Spec)
	}
}

func TestSameButCounts(t *testing.T) {
	now := metav1.Now()
	cases := map[string]struct {
		change func(*batchv1.Job)
		same   bool
	}{
		"nothing but the resource version": {func(j *batchv1.Job) { j.ResourceVersion = "4" }, true},
		"a field not cached":               {func(j *batchv1.Job) { j.Status.StartTime = &now }, true},
		"active":                           {func(j *batchv1.Job) { j.Status.Active = 2 }, true},
		"ready":                            {func(j *batchv1.Job) { j.Status.Ready = ptr.To[int32](0) }, true},
		"ready unset":                      {func(j *batchv1.Job) { j.Status.Ready = nil }, true},
		"succeeded":                        {func(j *batchv1.Job) { j.Status.Succeeded = 1 }, true},
		"failed":                           {func(j *batchv1.Job) { j.Status.Failed = 1 }, false},
		"a condition": {func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: "True"}}
		}, false},
		"a label":            {func(j *batchv1.Job) { j.Labels["a"] = "2" }, false},
		"a new annotation":   {func(j *batchv1.Job) { j.Annotations["d"] = "4" }, false},
		"deleted":            {func(j *batchv1.Job) { j.DeletionTimestamp = &now }, false},
		"an owner":           {func(j *batchv1.Job) { j.OwnerReferences = []metav1.OwnerReference{{UID: "o"}} }, false},
		"parallelism":        {func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3) }, false},
		"resumed":            {func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) }, false},
		"managed elsewhere":  {func(j *batchv1.Job) { j.Spec.ManagedBy = ptr.To("other") }, false},
		"no failure policy":  {func(j *batchv1.Job) { j.Spec.PodFailurePolicy = nil }, false},
		"a new backoffLimit": {func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To[int32](1) }, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cur := job()
			tc.change(cur)
			if got := SameButCounts(Compact(job()), Compact(cur)); got != tc.same {
				t.Fatalf("SameButCounts = %v, want %v", got, tc.same)
			}
		})
	}
	withCondition := func(msg string) *batchv1.Job {
		j := job()
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: "True", Message: msg}}
		return j
	}
	if SameButCounts(Compact(withCondition("a")), Compact(withCondition("b"))) {
		t.Fatal("a changed condition message read as the same")
	}
	if !SameButCounts(Compact(withCondition("a")), Compact(withCondition("a"))) {
		t.Fatal("equal conditions read as changed")
	}
}
