package jobset

import (
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReplicatedJobResource is the API object of the replicatedjobs resource,
// served with kind ReplicatedJob: a read-only view of one entry of a
// JobSet's spec.replicatedJobs, named <jobset>.<replicatedJob>. Nothing is
// stored for it; every read projects it from the JobSet. The Go name differs
// from the kind because ReplicatedJob is the spec entry.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type ReplicatedJobResource struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Spec   ReplicatedJobResourceSpec
	Status ReplicatedJobStatus
}

// ReplicatedJobResourceSpec is the part of a replicatedJob that its scale
// and `kubectl get` show.
type ReplicatedJobResourceSpec struct {
	JobSetName     string
	ReplicatedJob  string
	GroupName      string
	Replicas       int32
	Parallelism    *int32
	Completions    *int32
	CompletionMode *batchv1.CompletionMode
}

// ReplicatedJobResourceList is a list of ReplicatedJobResources.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type ReplicatedJobResourceList struct {
	metav1.TypeMeta
	metav1.ListMeta

	Items []ReplicatedJobResource
}
