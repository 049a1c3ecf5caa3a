package replicatedjob

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

// REST serves replicatedjobs: get, list and watch, all answered from the
// JobSet storage. It stores nothing of its own.
type REST struct {
	jobsets *genericregistry.Store
}

// Storage holds the REST endpoints of replicatedjobs and replicatedjobs/scale.
type Storage struct {
	ReplicatedJob *REST
	Scale         *ScaleREST
}

// NewStorage builds the replicatedjobs endpoints on top of the JobSet store,
// whose strategy then governs every scale write.
func NewStorage(jobsets *genericregistry.Store) *Storage {
	return &Storage{
		ReplicatedJob: &REST{jobsets: jobsets},
		Scale:         &ScaleREST{jobsets: jobsets},
	}
}

var (
	_ rest.Getter               = &REST{}
	_ rest.Lister               = &REST{}
	_ rest.Watcher              = &REST{}
	_ rest.Scoper               = &REST{}
	_ rest.ShortNamesProvider   = &REST{}
	_ rest.SingularNameProvider = &REST{}
	_ rest.Storage              = &REST{}
)

func (r *REST) New() runtime.Object { return &jobset.ReplicatedJobResource{} }

func (r *REST) NewList() runtime.Object { return &jobset.ReplicatedJobResourceList{} }

// Destroy does nothing: the JobSet storage owns the store.
func (r *REST) Destroy() {}

func (r *REST) NamespaceScoped() bool { return true }

func (r *REST) GetSingularName() string { return "replicatedjob" }

// ShortNames lets `kubectl get rj` work.
func (r *REST) ShortNames() []string { return []string{"rj"} }

func (r *REST) ConvertToTable(ctx context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return convertToTable(obj)
}

// Get projects one replicatedJob of a JobSet.
func (r *REST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	jsName, rjName, ok := SplitName(name)
	if !ok {
		return nil, notFound(name)
	}
	obj, err := r.jobsets.Get(ctx, jsName, options)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, notFound(name)
		}
		return nil, err
	}
	js := obj.(*jobset.JobSet)
	i := findReplicatedJob(js, rjName)
	if i < 0 {
		return nil, notFound(name)
	}
	return project(js, i), nil
}

// jobSetListOptions turns the options of a replicatedjobs list or watch into
// those of the JobSet list or watch behind it. Labels select JobSets
// directly; the field selector (metadata.name, metadata.namespace) applies
// to the projected objects. Paging is not passed on: a page of JobSets
// would hold an unknown number of ReplicatedJobs, so lists are whole.
func jobSetListOptions(options *metainternalversion.ListOptions) (*metainternalversion.ListOptions, fields.Selector, error) {
	out := &metainternalversion.ListOptions{}
	if options != nil {
		out = options.DeepCopy()
	}
	field := out.FieldSelector
	if field != nil {
		for _, req := range field.Requirements() {
			if req.Field != "metadata.name" && req.Field != "metadata.namespace" {
				return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
			}
		}
	}
	out.FieldSelector = nil
	out.Limit = 0
	out.Continue = ""
	return out, field, nil
}

// List projects every replicatedJob of the JobSets the options select.
func (r *REST) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	jsOptions, field, err := jobSetListOptions(options)
	if err != nil {
		return nil, err
	}
	obj, err := r.jobsets.List(ctx, jsOptions)
	if err != nil {
		return nil, err
	}
	jsList := obj.(*jobset.JobSetList)
	out := &jobset.ReplicatedJobResourceList{}
	out.ResourceVersion = jsList.ResourceVersion
	out.Items = []jobset.ReplicatedJobResource{}
	for i := range jsList.Items {
		out.Items = append(out.Items, projectAll(&jsList.Items[i], field)...)
	}
	return out, nil
}

// Watch translates the watch of the selected JobSets: each JobSet event
// becomes one event per replicatedJob of the JobSet.
func (r *REST) Watch(ctx context.Context, options *metainternalversion.ListOptions) (watch.Interface, error) {
	jsOptions, field, err := jobSetListOptions(options)
	if err != nil {
		return nil, err
	}
	w, err := r.jobsets.Watch(ctx, jsOptions)
	if err != nil {
		return nil, err
	}
	return newProjectingWatch(w, field), nil
}
