package cachedmeta

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func fullMeta() metav1.ObjectMeta {
	// Local, as decoded times are (metav1.Time's decoders).
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC).Local())
	return metav1.ObjectMeta{
		Name: "x", GenerateName: "x-", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 2,
		CreationTimestamp: now, DeletionTimestamp: &now, DeletionGracePeriodSeconds: ptr.To[int64](30),
		Labels:          map[string]string{"b": "2", "a": "1"},
		Annotations:     map[string]string{"c": "3"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v", Kind: "K", Name: "o", UID: "ou", Controller: ptr.To(true)}},
		Finalizers:      []string{"f"},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "m"}},
	}
}

// TestKeepsWhatChildrenRead: identity, times, owners, labels and
// annotations come back; the rest reads as empty.
func TestKeepsWhatChildrenRead(t *testing.T) {
	full := fullMeta()
	m := Of(&full)
	want := metav1.ObjectMeta{
		Name: "x", Namespace: "ns", UID: "u", ResourceVersion: "7",
		CreationTimestamp: full.CreationTimestamp, DeletionTimestamp: full.DeletionTimestamp,
		Labels: full.Labels, Annotations: full.Annotations, OwnerReferences: full.OwnerReferences,
	}
	if got := m.ObjectMeta(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ObjectMeta() =\n%+v\nwant\n%+v", got, want)
	}
	obj := NewObject(&full)
	acc, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	if acc.GetGeneration() != 0 || acc.GetFinalizers() != nil || acc.GetManagedFields() != nil || acc.GetGenerateName() != "" {
		t.Fatal("a field not kept reads as set")
	}
	if key, err := cache.MetaNamespaceKeyFunc(obj); err != nil || key != "ns/x" {
		t.Fatalf("key %q, %v", key, err)
	}
	if c := metav1.GetControllerOf(acc); c == nil || c.Name != "o" {
		t.Fatalf("controller %v", c)
	}
	acc.SetLabels(map[string]string{"z": "9"})
	if got := obj.GetLabels(); !reflect.DeepEqual(got, map[string]string{"z": "9"}) {
		t.Fatalf("labels after SetLabels = %v", got)
	}
	if (&Meta{}).GetLabels() != nil || (&Meta{}).GetAnnotations() != nil {
		t.Fatal("no labels read as a map")
	}
}

func TestDeepCopySharesNoState(t *testing.T) {
	full := fullMeta()
	orig := NewObject(&full)
	cp := orig.DeepCopyObject().(*Object)
	if !reflect.DeepEqual(cp, orig) {
		t.Fatalf("copy %+v differs from %+v", cp, orig)
	}
	cp.GetOwnerReferences()[0].Name = "changed"
	*cp.GetDeletionTimestamp() = metav1.Now()
	cp.pairs.values[0] = "changed"
	if orig.GetOwnerReferences()[0].Name != "o" || !orig.GetDeletionTimestamp().Equal(&full.CreationTimestamp) ||
		orig.GetLabels()["a"] != "1" {
		t.Fatal("changing the copy changed the original")
	}
}

func TestRevision(t *testing.T) {
	full := fullMeta()
	cr := &appsv1.ControllerRevision{ObjectMeta: full, Revision: 4}
	cr.Data.Raw = []byte(`{}`)
	r := NewRevision(cr)
	for _, obj := range []interface{}{r, cache.DeletedFinalStateUnknown{Key: "ns/x", Obj: r}} {
		got, ok := RevisionOf(obj)
		if !ok || got.Name != "x" || got.UID != "u" || got.Revision != 4 || got.Data.Raw != nil || len(got.OwnerReferences) != 1 {
			t.Fatalf("RevisionOf(%T) = %+v, %v", obj, got, ok)
		}
	}
	if got, ok := RevisionOf(cr); !ok || got != cr {
		t.Fatal("a ControllerRevision is not returned as is")
	}
	if _, ok := RevisionOf("x"); ok {
		t.Fatal("a string read as a revision")
	}
	if cp := r.DeepCopyObject().(*Revision); !reflect.DeepEqual(cp, r) {
		t.Fatalf("DeepCopyObject = %+v, want %+v", cp, r)
	}
}

// TestKeysShared: objects with the same label and annotation keys share
// one list of keys, and a key that is a label in one and an annotation in
// another does not mix them up.
func TestKeysShared(t *testing.T) {
	a := Of(&metav1.ObjectMeta{Labels: map[string]string{"k": "1", "l": "2"}, Annotations: map[string]string{"n": "a"}})
	b := Of(&metav1.ObjectMeta{Labels: map[string]string{"l": "3", "k": "4"}, Annotations: map[string]string{"n": "b"}})
	if a.pairs.keys != b.pairs.keys {
		t.Fatal("same keys, two lists")
	}
	c := Of(&metav1.ObjectMeta{Labels: map[string]string{"k": "1"}, Annotations: map[string]string{"l": "2", "n": "a"}})
	if c.pairs.keys == a.pairs.keys {
		t.Fatal("a label and an annotation of the same key share a list")
	}
	if got := b.GetLabels(); !reflect.DeepEqual(got, map[string]string{"k": "4", "l": "3"}) {
		t.Fatalf("labels %v", got)
	}
	if got := c.GetAnnotations(); !reflect.DeepEqual(got, map[string]string{"l": "2", "n": "a"}) {
		t.Fatalf("annotations %v", got)
	}
	b.SetLabels(nil)
	if b.GetLabels() != nil || !reflect.DeepEqual(b.GetAnnotations(), map[string]string{"n": "b"}) {
		t.Fatalf("after SetLabels(nil): labels %v, annotations %v", b.GetLabels(), b.GetAnnotations())
	}
	if !reflect.DeepEqual(a.GetLabels(), map[string]string{"k": "1", "l": "2"}) {
		t.Fatal("changing one object's labels changed another's")
	}
}

// TestCreationTime: the zero time stays zero; a time keeps its instant.
func TestCreationTime(t *testing.T) {
	if m := Of(&metav1.ObjectMeta{}); !m.GetCreationTimestamp().Time.IsZero() {
		t.Fatalf("zero time read back as %v", m.GetCreationTimestamp())
	}
	at := time.Date(1999, 12, 31, 23, 59, 59, 123, time.UTC)
	m := Of(&metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(at)})
	if got := m.GetCreationTimestamp(); !got.Time.Equal(at) {
		t.Fatalf("read back %v, want %v", got, at)
	}
}
