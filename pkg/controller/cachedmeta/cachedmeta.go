// Package cachedmeta holds the object metadata that the controller keeps
// of a cached child object, and the cached forms of the children read
// only through it (Services, ControllerRevisions). A metav1.ObjectMeta is
// 232 bytes of struct, and of its fields a cached child needs its name,
// namespace, UID, resource version, creation and deletion times, owner
// references, and a few labels and annotations. Meta keeps those in 152
// bytes, the labels and annotations as a list of values beside a shared
// list of keys (a map of a few entries takes 336 bytes), and implements
// metav1.Object so that informers' key and index functions apply.
package cachedmeta

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// Meta is the cached metadata of an object. The fields it does not keep
// (generateName, selfLink, generation, deletion grace period, finalizers,
// managed fields) read as empty, and setting them does nothing.
type Meta struct {
	name, namespace, resourceVersion string
	uid                              uid
	// created is the creation time in Unix nanoseconds, 0 for none: a
	// time.Time is 24 bytes.
	created           int64
	deletionTimestamp *metav1.Time
	ownerReferences   []metav1.OwnerReference
	pairs             Pairs
}

// Pairs holds labels and annotations: their values, and the list of their
// keys in the same order. Objects of one kind carry the same keys, so one
// list of them is shared (sharedKeys): a Job's seven labels and
// annotations as key-value pairs took 224 bytes, as values 112, and as
// maps over 600.
type Pairs struct {
	keys   *keyList
	values []string
}

// keyList is the keys of an object's labels (the first nlabels, in
// order) and then of its annotations (in order). Shared: never changed.
type keyList struct {
	keys    []string
	nlabels int
}

// Of returns the cached form of m. It shares m's owner references and
// strings; its labels and annotations are copied into a list of values.
func Of(m *metav1.ObjectMeta) Meta {
	return Meta{
		name: m.Name, namespace: m.Namespace, resourceVersion: m.ResourceVersion, uid: uidOf(m.UID),
		created:           unixNano(m.CreationTimestamp),
		deletionTimestamp: m.DeletionTimestamp,
		ownerReferences:   m.OwnerReferences,
		pairs:             PairsOf(m.Labels, m.Annotations),
	}
}

// unixNano is t in Unix nanoseconds, 0 for the zero time (an object's
// times are seconds since 1970, well within int64 nanoseconds).
func unixNano(t metav1.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// ObjectMeta returns the metadata as a metav1.ObjectMeta. Its labels and
// annotations are new maps; it shares the owner references and the
// deletion time: like any cached object, they must not be changed.
func (m *Meta) ObjectMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.name, Namespace: m.namespace, ResourceVersion: m.resourceVersion, UID: m.uid.UID(),
		CreationTimestamp: m.GetCreationTimestamp(), DeletionTimestamp: m.deletionTimestamp,
		OwnerReferences: m.ownerReferences,
		Labels:          m.GetLabels(), Annotations: m.GetAnnotations(),
	}
}

// SameButVersion reports whether m and o hold the same metadata but
// perhaps for the resource version: the same object, labels, annotations,
// owners and deletion time.
func (m *Meta) SameButVersion(o *Meta) bool {
	if m.name != o.name || m.namespace != o.namespace || m.uid != o.uid || m.created != o.created {
		return false
	}
	if !m.deletionTimestamp.Equal(o.deletionTimestamp) || len(m.ownerReferences) != len(o.ownerReferences) {
		return false
	}
	for i := range m.ownerReferences {
		a, b := &m.ownerReferences[i], &o.ownerReferences[i]
		if a.UID != b.UID || a.Kind != b.Kind || a.Name != b.Name || a.APIVersion != b.APIVersion ||
			!ptr.Equal(a.Controller, b.Controller) || !ptr.Equal(a.BlockOwnerDeletion, b.BlockOwnerDeletion) {
			return false
		}
	}
	return m.pairs.same(&o.pairs)
}

// same reports whether p and o hold the same labels and annotations.
func (p *Pairs) same(o *Pairs) bool {
	if (p.keys == nil) != (o.keys == nil) || !slices.Equal(p.values, o.values) {
		return false
	}
	return p.keys == o.keys || (p.keys.nlabels == o.keys.nlabels && slices.Equal(p.keys.keys, o.keys.keys))
}

// DeepCopy returns a copy that shares nothing with m but the strings and
// the (never changed) list of keys.
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
	out.pairs = m.pairs.DeepCopy()
	return out
}

// DeepCopy returns a copy that shares only the strings and the (never
// changed) list of keys.
func (p *Pairs) DeepCopy() Pairs {
	return Pairs{keys: p.keys, values: append([]string(nil), p.values...)}
}

// PairsOf returns labels and annotations as Pairs. It shares their
// strings.
func PairsOf(labels, annotations map[string]string) Pairs {
	if len(labels) == 0 && len(annotations) == 0 {
		return Pairs{}
	}
	keys := make([]string, 0, len(labels)+len(annotations))
	keys = appendSorted(keys, labels)
	keys = appendSorted(keys, annotations)
	values := make([]string, 0, len(keys))
	for i, k := range keys {
		if i < len(labels) {
			values = append(values, labels[k])
		} else {
			values = append(values, annotations[k])
		}
	}
	return Pairs{keys: sharedKeys(keys, len(labels)), values: values}
}

// appendSorted appends the keys of kv in order, so that a cached object
// does not depend on map order.
func appendSorted(keys []string, kv map[string]string) []string {
	start := len(keys)
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys[start:])
	return keys
}

// keyLists holds the shared key lists by their keys. Bounded like the
// controller's string interner: when full it forgets them all, and the
// objects cached after share new ones.
var keyLists = struct {
	sync.Mutex
	m map[string]*keyList
}{m: map[string]*keyList{}}

const maxKeyLists = 1024

// sharedKeys returns the shared list of these keys, of which the first
// nlabels are labels.
func sharedKeys(keys []string, nlabels int) *keyList {
	id := strconv.Itoa(nlabels) + "\x00" + strings.Join(keys, "\x00")
	keyLists.Lock()
	defer keyLists.Unlock()
	if l, ok := keyLists.m[id]; ok {
		return l
	}
	if len(keyLists.m) >= maxKeyLists {
		clear(keyLists.m)
	}
	l := &keyList{keys: keys, nlabels: nlabels}
	keyLists.m[id] = l
	return l
}

// split returns the keys and values of the labels (annotations false) or
// annotations.
func (p *Pairs) split(annotations bool) (keys, values []string) {
	if p.keys == nil {
		return nil, nil
	}
	if annotations {
		return p.keys.keys[p.keys.nlabels:], p.values[p.keys.nlabels:]
	}
	return p.keys.keys[:p.keys.nlabels], p.values[:p.keys.nlabels]
}

// Labels returns a new map of the labels, nil when there are none.
func (p *Pairs) Labels() map[string]string { return mapOf(p.split(false)) }

// Annotations returns a new map of the annotations, nil when there are
// none.
func (p *Pairs) Annotations() map[string]string { return mapOf(p.split(true)) }

// Annotation returns the value of an annotation ("" when absent), without
// building a map.
func (p *Pairs) Annotation(key string) string {
	keys, values := p.split(true)
	for i, k := range keys {
		if k == key {
			return values[i]
		}
	}
	return ""
}

func mapOf(keys, values []string) map[string]string {
	if len(keys) == 0 {
		return nil
	}
	out := make(map[string]string, len(keys))
	for i, k := range keys {
		out[k] = values[i]
	}
	return out
}

func (m *Meta) GetNamespace() string                { return m.namespace }
func (m *Meta) SetNamespace(namespace string)       { m.namespace = namespace }
func (m *Meta) GetName() string                     { return m.name }
func (m *Meta) SetName(name string)                 { m.name = name }
func (m *Meta) GetGenerateName() string             { return "" }
func (m *Meta) SetGenerateName(string)              {}
func (m *Meta) GetUID() types.UID                   { return m.uid.UID() }
func (m *Meta) SetUID(uid types.UID)                { m.uid = uidOf(uid) }
func (m *Meta) GetResourceVersion() string          { return m.resourceVersion }
func (m *Meta) SetResourceVersion(version string)   { m.resourceVersion = version }
func (m *Meta) GetGeneration() int64                { return 0 }
func (m *Meta) SetGeneration(int64)                 {}
func (m *Meta) GetSelfLink() string                 { return "" }
func (m *Meta) SetSelfLink(string)                  {}
func (m *Meta) SetCreationTimestamp(t metav1.Time)  { m.created = unixNano(t) }
func (m *Meta) GetDeletionTimestamp() *metav1.Time  { return m.deletionTimestamp }
func (m *Meta) SetDeletionTimestamp(t *metav1.Time) { m.deletionTimestamp = t }
func (m *Meta) GetDeletionGracePeriodSeconds() *int64 {
	return nil
}
func (m *Meta) SetDeletionGracePeriodSeconds(*int64) {}

// GetCreationTimestamp returns the creation time, in the local time zone
// as decoded times are.
func (m *Meta) GetCreationTimestamp() metav1.Time {
	if m.created == 0 {
		return metav1.Time{}
	}
	return metav1.NewTime(time.Unix(0, m.created).Local())
}

// GetLabels returns a new map of the labels.
func (m *Meta) GetLabels() map[string]string { return m.pairs.Labels() }

// SetLabels sets the labels.
func (m *Meta) SetLabels(labels map[string]string) { m.pairs = PairsOf(labels, m.GetAnnotations()) }

// GetAnnotations returns a new map of the annotations.
func (m *Meta) GetAnnotations() map[string]string { return m.pairs.Annotations() }

// SetAnnotations sets the annotations.
func (m *Meta) SetAnnotations(annotations map[string]string) {
	m.pairs = PairsOf(m.GetLabels(), annotations)
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
