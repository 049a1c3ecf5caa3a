package jobset

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

// REST serves the jobsets resource.
type REST struct {
	*genericregistry.Store
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// ShortNames lets `kubectl get js` work.
func (r *REST) ShortNames() []string { return []string{"js"} }

// Categories puts JobSets into `kubectl get all`.
func (r *REST) Categories() []string { return []string{"all"} }

// StatusREST serves jobsets/status: only status changes are kept.
type StatusREST struct {
	store *genericregistry.Store
}

// Storage holds the REST endpoints of the jobsets resource.
type Storage struct {
	JobSet *REST
	Status *StatusREST
}

// NewStorage builds the etcd-backed storage of jobsets and jobsets/status.
func NewStorage(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (*Storage, error) {
	strategy := NewStrategy(scheme)
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &jobset.JobSet{} },
		NewListFunc:               func() runtime.Object { return &jobset.JobSetList{} },
		PredicateFunc:             MatchJobSet,
		DefaultQualifiedResource:  jobset.Resource("jobsets"),
		SingularQualifiedResource: jobset.Resource("jobset"),

		CreateStrategy:      strategy,
		UpdateStrategy:      strategy,
		DeleteStrategy:      strategy,
		ResetFieldsStrategy: strategy,

		TableConvertor: tableConvertor{},
	}
	options := &generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: GetAttrs}
	if err := store.CompleteWithOptions(options); err != nil {
		return nil, err
	}

	statusStrategy := NewStatusStrategy(strategy)
	statusStore := *store
	statusStore.UpdateStrategy = statusStrategy
	statusStore.ResetFieldsStrategy = statusStrategy

	return &Storage{
		JobSet: &REST{store},
		Status: &StatusREST{store: &statusStore},
	}, nil
}

var (
	_ rest.Patcher              = &StatusREST{}
	_ rest.ResetFieldsStrategy  = &StatusREST{}
	_ rest.TableConvertor       = &StatusREST{}
	_ rest.SingularNameProvider = &StatusREST{}
	_ rest.StorageWithReadiness = &StatusREST{}
)

func (r *StatusREST) New() runtime.Object { return &jobset.JobSet{} }

// Destroy does nothing: the store is shared with the main resource, which
// shuts it down.
func (r *StatusREST) Destroy() {}

func (r *StatusREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

func (r *StatusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	// Status writes never create the object.
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

func (r *StatusREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

func (r *StatusREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}

func (r *StatusREST) GetSingularName() string { return r.store.GetSingularName() }

func (r *StatusREST) ReadinessCheck() error { return r.store.ReadinessCheck() }
