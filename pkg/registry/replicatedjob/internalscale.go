package replicatedjob

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Scale is the internal form of autoscaling/v1 Scale, the hub that the
// endpoints of replicatedjobs/scale convert request and response bodies
// through (kind Scale in group autoscaling, version __internal). A type of
// its own keeps the OpenAPI model of autoscaling/v1 Scale tagged with that
// version only.
type Scale struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Spec   autoscalingv1.ScaleSpec
	Status autoscalingv1.ScaleStatus
}

// DeepCopyObject implements runtime.Object.
func (in *Scale) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := &Scale{TypeMeta: in.TypeMeta, Spec: in.Spec, Status: in.Status}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

// internalScaleGroupVersion is the internal version of group autoscaling.
var internalScaleGroupVersion = schema.GroupVersion{Group: autoscalingv1.GroupName, Version: runtime.APIVersionInternal}

// AddScaleToScheme registers autoscaling/v1 Scale, its internal form and the
// conversions between them.
func AddScaleToScheme(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(autoscalingv1.SchemeGroupVersion, &autoscalingv1.Scale{})
	scheme.AddKnownTypeWithName(internalScaleGroupVersion.WithKind("Scale"), &Scale{})
	if err := scheme.AddConversionFunc((*autoscalingv1.Scale)(nil), (*Scale)(nil), func(a, b interface{}, _ conversion.Scope) error {
		in, out := a.(*autoscalingv1.Scale), b.(*Scale)
		out.ObjectMeta = in.ObjectMeta
		out.Spec = in.Spec
		out.Status = in.Status
		return nil
	}); err != nil {
		return err
	}
	return scheme.AddConversionFunc((*Scale)(nil), (*autoscalingv1.Scale)(nil), func(a, b interface{}, _ conversion.Scope) error {
		in, out := a.(*Scale), b.(*autoscalingv1.Scale)
		out.ObjectMeta = in.ObjectMeta
		out.Spec = in.Spec
		out.Status = in.Status
		return nil
	})
}
