package v1alpha2

import (
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReplicatedJobKind is the kind of ReplicatedJobResource on the wire.
const ReplicatedJobKind = "ReplicatedJob"

// +genclient
// +genclient:onlyVerbs=get,list,watch
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +resourceName=replicatedjobs
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ReplicatedJobResource is served as kind ReplicatedJob in the resource
// replicatedjobs: a read-only view of one entry of a JobSet's
// spec.replicatedJobs, named <jobset>.<replicatedJob>, with a scale
// subresource whose unit is the pods of one child Job (the template's
// parallelism). Nothing is stored for it: it carries the JobSet's
// resourceVersion and labels and an owner reference to the JobSet. The Go
// name differs from the kind because ReplicatedJob is the spec entry.
type ReplicatedJobResource struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. The uid is derived from the JobSet's uid
	// and the replicatedJob's name; resourceVersion and labels are the
	// JobSet's.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec is the replicatedJob as the JobSet's spec declares it.
	// +optional
	Spec ReplicatedJobResourceSpec `json:"spec,omitempty" protobuf:"bytes,2,opt,name=spec"`

	// status is the replicatedJob's entry of the JobSet's
	// replicatedJobsStatus.
	// +optional
	Status ReplicatedJobStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// ReplicatedJobResourceSpec is the part of a replicatedJob that its scale
// and `kubectl get` show.
type ReplicatedJobResourceSpec struct {
	// jobSetName is the JobSet the replicatedJob belongs to.
	JobSetName string `json:"jobSetName" protobuf:"bytes,1,opt,name=jobSetName"`

	// replicatedJob is the name of the entry in the JobSet's
	// spec.replicatedJobs.
	ReplicatedJob string `json:"replicatedJob" protobuf:"bytes,2,opt,name=replicatedJob"`

	// groupName is the replicatedJob's group.
	// +optional
	GroupName string `json:"groupName,omitempty" protobuf:"bytes,3,opt,name=groupName"`

	// replicas is the number of child Jobs.
	Replicas int32 `json:"replicas" protobuf:"varint,4,opt,name=replicas"`

	// parallelism is the template's parallelism: the pods each child Job
	// runs at once, and the unit of the scale subresource.
	// +optional
	Parallelism *int32 `json:"parallelism,omitempty" protobuf:"varint,5,opt,name=parallelism"`

	// completions is the template's completions.
	// +optional
	Completions *int32 `json:"completions,omitempty" protobuf:"varint,6,opt,name=completions"`

	// completionMode is the template's completion mode.
	// +optional
	CompletionMode *batchv1.CompletionMode `json:"completionMode,omitempty" protobuf:"bytes,7,opt,name=completionMode,casttype=k8s.io/api/batch/v1.CompletionMode"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ReplicatedJobResourceList is a list of ReplicatedJobs.
type ReplicatedJobResourceList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// items are the ReplicatedJobs.
	Items []ReplicatedJobResource `json:"items" protobuf:"bytes,2,rep,name=items"`
}
