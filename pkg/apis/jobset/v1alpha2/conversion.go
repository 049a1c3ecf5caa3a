package v1alpha2

import (
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

// Convert_v1alpha2_ReplicatedJob_To_jobset_ReplicatedJob turns an absent
// replicas into 1, the value defaulting would have set.
func Convert_v1alpha2_ReplicatedJob_To_jobset_ReplicatedJob(in *ReplicatedJob, out *jobset.ReplicatedJob, s conversion.Scope) error {
	if err := autoConvert_v1alpha2_ReplicatedJob_To_jobset_ReplicatedJob(in, out, s); err != nil {
		return err
	}
	out.Replicas = ptr.Deref(in.Replicas, 1)
	return nil
}

// Convert_jobset_ReplicatedJob_To_v1alpha2_ReplicatedJob always writes
// replicas, so that an explicit 0 survives a round trip.
func Convert_jobset_ReplicatedJob_To_v1alpha2_ReplicatedJob(in *jobset.ReplicatedJob, out *ReplicatedJob, s conversion.Scope) error {
	if err := autoConvert_jobset_ReplicatedJob_To_v1alpha2_ReplicatedJob(in, out, s); err != nil {
		return err
	}
	out.Replicas = ptr.To(in.Replicas)
	return nil
}
