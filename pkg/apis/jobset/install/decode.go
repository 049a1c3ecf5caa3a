package install

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// JobSetDecoder turns a v1alpha2 request body into an internal JobSet the
// way the API server does: decode (a body without a kind is taken to be a
// JobSet), default, convert. Tests and fuzz targets use it to feed the
// strategies what the server would.
type JobSetDecoder struct {
	scheme  *runtime.Scheme
	decoder runtime.Decoder
}

// NewJobSetDecoder builds a decoder over a scheme of its own.
func NewJobSetDecoder() *JobSetDecoder {
	scheme := runtime.NewScheme()
	Install(scheme)
	return &JobSetDecoder{scheme: scheme, decoder: serializer.NewCodecFactory(scheme).UniversalDeserializer()}
}

// Decode decodes, defaults and converts one JobSet.
func (d *JobSetDecoder) Decode(data []byte) (*jobset.JobSet, error) {
	gvk := v1alpha2.SchemeGroupVersion.WithKind("JobSet")
	obj, _, err := d.decoder.Decode(data, &gvk, &v1alpha2.JobSet{})
	if err != nil {
		return nil, err
	}
	external, ok := obj.(*v1alpha2.JobSet)
	if !ok {
		return nil, fmt.Errorf("decoded a %T, not a JobSet", obj)
	}
	d.scheme.Default(external)
	js := &jobset.JobSet{}
	if err := d.scheme.Convert(external, js, nil); err != nil {
		return nil, err
	}
	return js, nil
}
