package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of JobSets.
const GroupName = "jobset.x-k8s.io"

// SchemeGroupVersion is the version served by this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha2"}

// GroupVersion is an alias kept for clients written against upstream.
var GroupVersion = SchemeGroupVersion

var (
	SchemeBuilder      runtime.SchemeBuilder
	localSchemeBuilder = &SchemeBuilder
	AddToScheme        = localSchemeBuilder.AddToScheme
)

func init() {
	// Generated functions (defaults, conversions) register themselves in
	// their own files; only hand-written registration is here.
	localSchemeBuilder.Register(addKnownTypes, addDefaultingFuncs)
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&JobSet{},
		&JobSetList{},
	)
	// The replicatedjobs resource: kind ReplicatedJob, whose Go name is
	// taken by the spec entry.
	scheme.AddKnownTypeWithName(SchemeGroupVersion.WithKind(ReplicatedJobKind), &ReplicatedJobResource{})
	scheme.AddKnownTypeWithName(SchemeGroupVersion.WithKind(ReplicatedJobKind+"List"), &ReplicatedJobResourceList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}

// Resource qualifies a resource with the group.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// Kind qualifies a kind with the group.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}
