package migrate

import (
	"encoding/json"
	"fmt"
	"k8s.io/utils/ptr"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"

	internal "github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/apis/jobset/install"
	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/apis/jobset/validation"
)

var (
	scheme = runtime.NewScheme()
	// strict refuses unknown and duplicate fields, naming them.
	strict runtime.Decoder
)

func init() {
	install.Install(scheme)
	strict = serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}

// convert decodes a CRD-served JobSet into the native type, defaults it as
// the native server does, and validates it as a create followed by a status
// write. The returned errors carry field paths.
func convert(u *unstructured.Unstructured) (*v1alpha2.JobSet, field.ErrorList) {
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, field.ErrorList{field.InternalError(nil, err)}
	}
	obj, _, err := strict.Decode(raw, nil, &v1alpha2.JobSet{})
	if err != nil {
		return nil, field.ErrorList{field.Invalid(nil, "", err.Error())}
	}
	js, ok := obj.(*v1alpha2.JobSet)
	if !ok {
		return nil, field.ErrorList{field.InternalError(nil, fmt.Errorf("decoded %T", obj))}
	}
	scheme.Default(js)
	// What was derived from the old API server does not carry over.
	meta := js.ObjectMeta
	js.ObjectMeta = metaToCopy(&meta)
	if js.Status.Restarts > 0 {
		js.Status.ExecutionAttempts = ptr.To(max(ptr.Deref(js.Status.ExecutionAttempts, 0), js.Status.Restarts))
	}

	in := &internal.JobSet{}
	if err := scheme.Convert(js, in, nil); err != nil {
		return nil, field.ErrorList{field.InternalError(nil, err)}
	}
	// The create validation needs what the server would set.
	in.Generation = 1
	in.ResourceVersion = "1"
	errs := validation.ValidateJobSet(in)
	errs = append(errs, validation.ValidateJobSetStatusUpdate(in, in)...)
	return js, errs
}
