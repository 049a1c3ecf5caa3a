// Package jobsetcache holds the compact form in which the controller caches
// JobSets. A replicated Job's template is held inline: a JobSet of one
// replicated Job of one container is about 2 KB of struct, most of it
// empty fields of the Job and pod templates, and it is read only while the
// JobSet is synced. The cached JobSet keeps its spec in protobuf (a few
// hundred bytes) and decodes it for each sync; its metadata and status,
// which the event handlers and the metrics read, stay decoded.
package jobsetcache

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller/cachedmeta"
)

// JobSet is a cached JobSet. Through its metadata it implements
// metav1.Object, so that the informer's key and index functions apply.
type JobSet struct {
	metav1.TypeMeta
	// ObjectMeta is the JobSet's metadata without its labels and
	// annotations, which pairs holds (in a sixth of the bytes of maps):
	// read them with GetLabels and GetAnnotations.
	metav1.ObjectMeta
	pairs  cachedmeta.Pairs
	Status jobset.JobSetStatus
	// spec is the JobSet's spec in protobuf.
	spec []byte
	// replicas are the replicated Jobs' names and replicas, which the
	// metrics read for every JobSet at each scrape (decoding every spec
	// there would cost more than keeping them).
	replicas []Replicas
}

// Replicas is a replicated Job's name and its spec's replicas.
type Replicas struct {
	Name     string
	Replicas *int32
}

// Compact returns the cached form of js. It shares js's metadata and
// status (the caller trims them first).
func Compact(js *jobset.JobSet) (*JobSet, error) {
	spec, err := js.Spec.Marshal()
	if err != nil {
		return nil, fmt.Errorf("encoding the spec of JobSet %s/%s: %w", js.Namespace, js.Name, err)
	}
	out := &JobSet{TypeMeta: js.TypeMeta, ObjectMeta: js.ObjectMeta, Status: js.Status, spec: spec,
		pairs: cachedmeta.PairsOf(js.Labels, js.Annotations)}
	out.Labels, out.Annotations = nil, nil
	if n := len(js.Spec.ReplicatedJobs); n > 0 {
		out.replicas = make([]Replicas, n)
		for i := range js.Spec.ReplicatedJobs {
			rj := &js.Spec.ReplicatedJobs[i]
			out.replicas[i] = Replicas{Name: rj.Name, Replicas: rj.Replicas}
		}
	}
	return out, nil
}

// JobSet returns the cached JobSet with its spec decoded. The spec is new;
// the metadata and status are the cache's: like any cached object, they
// must not be changed.
func (c *JobSet) JobSet() (*jobset.JobSet, error) {
	out := &jobset.JobSet{TypeMeta: c.TypeMeta, ObjectMeta: c.ObjectMeta, Status: c.Status}
	out.Labels, out.Annotations = c.pairs.Labels(), c.pairs.Annotations()
	if err := out.Spec.Unmarshal(c.spec); err != nil {
		return nil, fmt.Errorf("decoding the cached spec of JobSet %s/%s: %w", c.Namespace, c.Name, err)
	}
	return out, nil
}

// Summary is what the metrics read of a JobSet: its name, annotations,
// status, and its replicated Jobs' names and replicas. It shares them with
// the cache and must not be changed.
type Summary struct {
	Namespace, Name string
	Annotations     *cachedmeta.Pairs
	Status          *jobset.JobSetStatus
	ReplicatedJobs  []Replicas
}

// Summary returns the cached JobSet's summary, without allocating.
func (c *JobSet) Summary() Summary {
	return Summary{Namespace: c.Namespace, Name: c.Name, Annotations: &c.pairs, Status: &c.Status, ReplicatedJobs: c.replicas}
}

func summaryOf(js *jobset.JobSet) Summary {
	annotations := cachedmeta.PairsOf(nil, js.Annotations)
	out := Summary{Namespace: js.Namespace, Name: js.Name, Annotations: &annotations, Status: &js.Status}
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		out.ReplicatedJobs = append(out.ReplicatedJobs, Replicas{Name: rj.Name, Replicas: rj.Replicas})
	}
	return out
}

// DeepCopyObject returns a deep copy: JobSet is a runtime.Object, so that
// client-go's helpers that want one (the cache mutation detector) accept
// it.
func (c *JobSet) DeepCopyObject() runtime.Object {
	out := &JobSet{TypeMeta: c.TypeMeta, Status: *c.Status.DeepCopy(), spec: append([]byte(nil), c.spec...),
		pairs: c.pairs.DeepCopy()}
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if c.replicas != nil {
		out.replicas = make([]Replicas, len(c.replicas))
		for i, r := range c.replicas {
			out.replicas[i] = Replicas{Name: r.Name}
			if r.Replicas != nil {
				n := *r.Replicas
				out.replicas[i].Replicas = &n
			}
		}
	}
	return out
}

// Lister reads JobSets from an informer's indexer that holds cached
// JobSets (or whole ones, as tests put there).
type Lister struct {
	Indexer cache.Indexer
}

// Get returns the JobSet namespace/name with its spec, or a NotFound
// error.
func (l Lister) Get(namespace, name string) (*jobset.JobSet, error) {
	obj, exists, err := l.Indexer.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, apierrors.NewNotFound(jobset.Resource("jobset"), name)
	}
	switch o := obj.(type) {
	case *JobSet:
		return o.JobSet()
	case *jobset.JobSet:
		return o, nil
	}
	return nil, fmt.Errorf("unexpected %T cached as JobSet %s/%s", obj, namespace, name)
}

// Summaries lists the summaries of an informer's cached JobSets (or of
// whole ones, as tests put there). It is the lister of the JobSet metrics.
type Summaries struct {
	Indexer cache.Indexer
}

// List returns the summaries of every JobSet.
func (s Summaries) List() []Summary {
	objs := s.Indexer.List()
	out := make([]Summary, 0, len(objs))
	for _, obj := range objs {
		switch o := obj.(type) {
		case *JobSet:
			out = append(out, o.Summary())
		case *jobset.JobSet:
			out = append(out, summaryOf(o))
		}
	}
	return out
}

// GetLabels returns a new map of the labels.
func (c *JobSet) GetLabels() map[string]string { return c.pairs.Labels() }

// SetLabels sets the labels.
func (c *JobSet) SetLabels(labels map[string]string) {
	c.pairs = cachedmeta.PairsOf(labels, c.pairs.Annotations())
}

// GetAnnotations returns a new map of the annotations.
func (c *JobSet) GetAnnotations() map[string]string { return c.pairs.Annotations() }

// SetAnnotations sets the annotations.
func (c *JobSet) SetAnnotations(annotations map[string]string) {
	c.pairs = cachedmeta.PairsOf(c.pairs.Labels(), annotations)
}
