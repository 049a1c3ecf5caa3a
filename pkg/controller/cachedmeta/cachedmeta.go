// Package cachedmeta holds the object metadata that the controller keeps
// of a cached child object, and the cached forms of the children read only
// through it (Services, ControllerRevisions): a metav1.ObjectMeta is 232 bytes of struct,
// and of its fields a cached child needs its name, namespace, UID,
// resource version, creation and deletion times, owner references, and a
// few labels and annotations. Meta keeps those in 168 bytes, the labels and
// annotations as pairs (a map of a few entries takes 336 bytes), and
// implements metav1.Object so that informers' key and index functions
// apply.
package cachedmeta

import (
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Meta is the cached metadata of an object. The fields it does not keep
// (generateName, selfLink, generation, deletion grace period, finalizers,
// managed fields) read as empty, and setting them does nothing.
type Meta struct {
	name, namespace, resourceVersion string
	uid                              types.UID
	creationTimestamp                metav1.Time
	deletionTimestamp                *metav1.Time
	ownerReferences                  []metav1.OwnerReference
	labels, annotations              []pair
}

type pair struct{ key, value string }

// Of returns the cached form of m. It shares m's owner references and
// strings; its labels and annotations are copied into pairs.
func Of(m *metav1.ObjectMeta) Meta {
	return Meta{
		name: m.Name, namespace: m.Namespace, resourceVersion: m.ResourceVersion, uid: m.UID,
		creationTimestamp: m.CreationTimestamp, deletionTimestamp: m.DeletionTimestamp,
		ownerReferences: m.OwnerReferences,
		labels:          pairsOf(m.Labels), annotations: pairsOf(m.Annotations),
	}
}

// ObjectMeta returns the metadata as a metav1.ObjectMeta. Its labels and
// annotations are new maps; it shares the owner references and the
// deletion time: like any cached object, they must not be changed.
func (m *Meta) ObjectMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.name, Namespace: m.namespace, ResourceVersion: m.resourceVersion, UID: m.uid,
		CreationTimestamp: m.creationTimestamp, DeletionTimestamp: m.deletionTimestamp,
		OwnerReferences: m.ownerReferences,
		Labels:          mapOf(m.labels), Annotations: mapOf(m.annotations),
	}
}

// DeepCopy returns a copy that shares nothing with m but the strings.
func (m *Meta) DeepCopy() Meta {
	out := *m
	if m.deletionTimestamp != nil {
		t := *m.deletionTimestamp
		out.deletionTimestamp = &t
	}
	if m.ownerReferences != nil {
		out.ownerReferences = make([]metav1.OwnerReference, len(m.ownerReferences))
		for i := range m.ownerReferences {
			m.ownerReferences[i].DeepCopyInto(&out.ownerReferences[i])
		}
	}
	out.labels = append([]pair(nil), m.labels...)
	out.annotations = append([]pair(nil), m.annotations...)
	return out
}

func pairsOf(m map[string]string) []pair {
	if len(m) == 0 {
		return nil
	}
	out := make([]pair, 0, len(m))
	for k, v := range m {
		out = append(out, pair{k, v})
	}
	// In key order, so that a cached object does not depend on map order.
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

func mapOf(pairs []pair) map[string]string {
	if pairs == nil {
		return nil
	}
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		out[p.key] = p.value
	}
	return out
}

func (m *Meta) GetNamespace() string                { return m.namespace }
func (m *Meta) SetNamespace(namespace string)       { m.namespace = namespace }
func (m *Meta) GetName() string                     { return m.name }
func (m *Meta) SetName(name string)                 { m.name = name }
func (m *Meta) GetGenerateName() string             { return "" }
func (m *Meta) SetGenerateName(string)              {}
func (m *Meta) GetUID() types.UID                   { return m.uid }
func (m *Meta) SetUID(uid types.UID)                { m.uid = uid }
func (m *Meta) GetResourceVersion() string          { return m.resourceVersion }
func (m *Meta) SetResourceVersion(version string)   { m.resourceVersion = version }
func (m *Meta) GetGeneration() int64                { return 0 }
func (m *Meta) SetGeneration(int64)                 {}
func (m *Meta) GetSelfLink() string                 { return "" }
func (m *Meta) SetSelfLink(string)                  {}
func (m *Meta) GetCreationTimestamp() metav1.Time   { return m.creationTimestamp }
func (m *Meta) SetCreationTimestamp(t metav1.Time)  { m.creationTimestamp = t }
func (m *Meta) GetDeletionTimestamp() *metav1.Time  { return m.deletionTimestamp }
func (m *Meta) SetDeletionTimestamp(t *metav1.Time) { m.deletionTimestamp = t }
func (m *Meta) GetDeletionGracePeriodSeconds() *int64 {
	return nil
}
func (m *Meta) SetDeletionGracePeriodSeconds(*int64) {}

// GetLabels returns a new map of the labels.
func (m *Meta) GetLabels() map[string]string { return mapOf(m.labels) }

// SetLabels sets the labels.
func (m *Meta) SetLabels(labels map[string]string) { m.labels = pairsOf(labels) }

// GetAnnotations returns a new map of the annotations.
func (m *Meta) GetAnnotations() map[string]string { return mapOf(m.annotations) }

// SetAnnotations sets the annotations.
func (m *Meta) SetAnnotations(annotations map[string]string) {
	m.annotations = pairsOf(annotations)
}

func (m *Meta) GetFinalizers() []string { return nil }
func (m *Meta) SetFinalizers([]string)  {}
func (m *Meta) GetOwnerReferences() []metav1.OwnerReference {
	return m.ownerReferences
}
func (m *Meta) SetOwnerReferences(refs []metav1.OwnerReference) {
	m.ownerReferences = refs
}
func (m *Meta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (m *Meta) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

var _ metav1.Object = &Meta{}

// Object is a cached object of which only the metadata is read (a
// Service: its existence and owner).
type Object struct {
	Meta
}

// NewObject returns the cached form of an object with metadata m.
func NewObject(m *metav1.ObjectMeta) *Object {
	return &Object{Meta: Of(m)}
}

// GetObjectKind is empty: Object is a runtime.Object, so that client-go's
// helpers that want one (the cache mutation detector) accept it.
func (o *Object) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject returns a deep copy.
func (o *Object) DeepCopyObject() runtime.Object { return &Object{Meta: o.Meta.DeepCopy()} }

// Revision is a cached ControllerRevision: its metadata and number. Its
// data is read from the API server, and only while an update is pending.
type Revision struct {
	Meta
	Revision int64
}

// NewRevision returns the cached form of cr.
func NewRevision(cr *appsv1.ControllerRevision) *Revision {
	return &Revision{Meta: Of(&cr.ObjectMeta), Revision: cr.Revision}
}

// ControllerRevision returns the cached revision as a ControllerRevision
// without data. Like any cached object, it must not be changed.
func (r *Revision) ControllerRevision() *appsv1.ControllerRevision {
	return &appsv1.ControllerRevision{ObjectMeta: r.Meta.ObjectMeta(), Revision: r.Revision}
}

// RevisionOf returns the ControllerRevision an informer object holds: a
// cached Revision, a ControllerRevision, or either inside a
// cache.DeletedFinalStateUnknown.
func RevisionOf(obj interface{}) (*appsv1.ControllerRevision, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	switch o := obj.(type) {
	case *Revision:
		return o.ControllerRevision(), true
	case *appsv1.ControllerRevision:
		return o, true
	}
	return nil, false
}

// GetObjectKind is empty (see Object's).
func (r *Revision) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject returns a deep copy.
func (r *Revision) DeepCopyObject() runtime.Object {
	return &Revision{Meta: r.Meta.DeepCopy(), Revision: r.Revision}
}
