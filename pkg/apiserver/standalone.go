package apiserver

import (
	"context"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	jobsetstorage "github.com/nativejobset/jobset/pkg/registry/jobset"
)

// standaloneJobSets serves jobsets without a Kubernetes cluster. There is
// no garbage collector to remove the foregroundDeletion and orphan
// finalizers that those propagation policies put on the object, so a JobSet
// deleted with them would stay Terminating forever. Nothing in a standalone
// store can depend on a JobSet (its Jobs live in a cluster there is none
// of), so every policy means the same as Background here: the deletion is
// carried out as one.
type standaloneJobSets struct {
	*jobsetstorage.REST
}

func (r standaloneJobSets) Delete(ctx context.Context, name string, validate rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	return r.REST.Delete(ctx, name, validate, withoutDependents(options))
}

func (r standaloneJobSets) DeleteCollection(ctx context.Context, validate rest.ValidateObjectFunc, options *metav1.DeleteOptions, list *metainternalversion.ListOptions) (runtime.Object, error) {
	return r.REST.DeleteCollection(ctx, validate, withoutDependents(options), list)
}

// withoutDependents returns options whose propagation is Background.
func withoutDependents(options *metav1.DeleteOptions) *metav1.DeleteOptions {
	if options == nil {
		return nil
	}
	out := options.DeepCopy()
	background := metav1.DeletePropagationBackground
	out.PropagationPolicy = &background
	out.OrphanDependents = nil //nolint:staticcheck // the deprecated field still selects orphaning
	return out
}
