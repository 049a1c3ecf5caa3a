// Package install registers the JobSet API group in a scheme.
package install

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/apis/jobset/schemadefaults"
	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// Install adds the internal and every served version to the scheme, with the
// defaulting of RegisterDefaults.
func Install(scheme *runtime.Scheme) {
	utilruntime.Must(jobset.AddToScheme(scheme))
	utilruntime.Must(v1alpha2.AddToScheme(scheme))
	utilruntime.Must(RegisterDefaults(scheme))
	utilruntime.Must(scheme.SetVersionPriority(v1alpha2.SchemeGroupVersion))
}

// RegisterDefaults makes the scheme default a v1alpha2 JobSet (and each item
// of a JobSetList) with SetJobSetDefaults. It must run after
// v1alpha2.AddToScheme: AddTypeDefaultingFunc replaces the generated
// registration for the type, which SetJobSetDefaults therefore calls itself.
func RegisterDefaults(scheme *runtime.Scheme) error {
	scheme.AddTypeDefaultingFunc(&v1alpha2.JobSet{}, func(obj interface{}) {
		SetJobSetDefaults(obj.(*v1alpha2.JobSet))
	})
	scheme.AddTypeDefaultingFunc(&v1alpha2.JobSetList{}, func(obj interface{}) {
		list := obj.(*v1alpha2.JobSetList)
		for i := range list.Items {
			SetJobSetDefaults(&list.Items[i])
		}
	})
	return nil
}

// SetJobSetDefaults applies every default a CRD-served JobSet gets: first
// the generated defaulters (v1alpha2.SetObjectDefaults_JobSet, which hold
// the JobSet defaults of upstream and the +default markers that
// defaulter-gen reads), then the defaults that the OpenAPI schema declares
// for each replicatedJob template and each volumeClaimPolicies template.
//
// A defaulting func cannot return an error, and the schema pass cannot fail
// on a typed value (see package schemadefaults): the only possible errors
// come from converting a typed value to and from unstructured, which is
// total for k8s.io/api types. Should one happen anyway, it is reported
// through utilruntime.HandleError and the template is left as the generated
// defaulters made it.
func SetJobSetDefaults(obj *v1alpha2.JobSet) {
	v1alpha2.SetObjectDefaults_JobSet(obj)
	for i := range obj.Spec.ReplicatedJobs {
		rj := &obj.Spec.ReplicatedJobs[i]
		if err := schemadefaults.ApplyToJobTemplate(&rj.Template); err != nil {
			utilruntime.HandleError(fmt.Errorf("jobset %s/%s: replicatedJobs[%d] (%s): %w",
				obj.Namespace, obj.Name, i, rj.Name, err))
		}
	}
	for i := range obj.Spec.VolumeClaimPolicies {
		policy := &obj.Spec.VolumeClaimPolicies[i]
		for j := range policy.Templates {
			if err := schemadefaults.ApplyToPersistentVolumeClaim(&policy.Templates[j]); err != nil {
				utilruntime.HandleError(fmt.Errorf("jobset %s/%s: volumeClaimPolicies[%d].templates[%d]: %w",
					obj.Namespace, obj.Name, i, j, err))
			}
		}
	}
}
