package apiserver

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/nativejobset/jobset/pkg/apis/jobset/install"
	"github.com/nativejobset/jobset/pkg/registry/replicatedjob"
)

var (
	// Scheme knows every type the server serves.
	Scheme = runtime.NewScheme()
	// Codecs encodes and decodes the types of Scheme.
	Codecs = serializer.NewCodecFactory(Scheme)
)

func init() {
	install.Install(Scheme)

	// Options types (ListOptions, DeleteOptions...) and the unversioned
	// meta types every API server answers with.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	Scheme.AddUnversionedTypes(schema.GroupVersion{Group: "", Version: "v1"},
		&metav1.Status{},
		&metav1.APIVersions{},
		&metav1.APIGroupList{},
		&metav1.APIGroup{},
		&metav1.APIResourceList{},
	)

	// replicatedjobs/scale speaks autoscaling/v1 Scale.
	utilruntime.Must(replicatedjob.AddScaleToScheme(Scheme))
}
