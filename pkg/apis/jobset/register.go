package jobset

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group, shared with upstream JobSet so that existing
// manifests and clients work unchanged.
const GroupName = "jobset.x-k8s.io"

// SchemeGroupVersion is the internal version of the group.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: runtime.APIVersionInternal}

// Kind qualifies a kind with the group.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

// Resource qualifies a resource with the group.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	AddToScheme   = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&JobSet{},
		&JobSetList{},
	)
	// The replicatedjobs resource: kind ReplicatedJob, whose Go name is
	// taken by the spec entry.
	scheme.AddKnownTypeWithName(SchemeGroupVersion.WithKind("ReplicatedJob"), &ReplicatedJobResource{})
	scheme.AddKnownTypeWithName(SchemeGroupVersion.WithKind("ReplicatedJobList"), &ReplicatedJobResourceList{})
	return nil
}
