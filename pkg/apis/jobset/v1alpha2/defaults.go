package v1alpha2

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	return RegisterDefaults(scheme)
}

// DefaultRuleNameFormat names failure policy rules that have no name.
const DefaultRuleNameFormat = "failurePolicyRule%d"

// SetDefaults_JobSet fills the fields upstream JobSet defaults. Explicit
// values, including an explicit replicas of 0, are kept.
func SetDefaults_JobSet(obj *JobSet) {
	spec := &obj.Spec
	if spec.SuccessPolicy == nil {
		spec.SuccessPolicy = &SuccessPolicy{Operator: OperatorAll}
	}
	if spec.StartupPolicy == nil {
		spec.StartupPolicy = &StartupPolicy{StartupPolicyOrder: AnyOrder}
	}
	if spec.Network == nil {
		spec.Network = &Network{}
	}
	if spec.Network.EnableDNSHostnames == nil {
		spec.Network.EnableDNSHostnames = ptr.To(true)
	}
	if spec.Network.PublishNotReadyAddresses == nil {
		spec.Network.PublishNotReadyAddresses = ptr.To(true)
	}
	if spec.FailurePolicy != nil {
		if spec.FailurePolicy.RestartStrategy == "" {
			spec.FailurePolicy.RestartStrategy = Recreate
		}
		for i := range spec.FailurePolicy.Rules {
			if spec.FailurePolicy.Rules[i].Name == "" {
				spec.FailurePolicy.Rules[i].Name = fmt.Sprintf(DefaultRuleNameFormat, i)
			}
		}
	}
	// An absent updatePolicy stays absent (it means Never), so objects of
	// clients that never set it look as they do upstream.
	if up := spec.UpdatePolicy; up != nil {
		if up.UpdateStrategy == "" {
			up.UpdateStrategy = UpdateNever
		}
		if up.RevisionHistoryLimit == nil {
			up.RevisionHistoryLimit = ptr.To(DefaultRevisionHistoryLimit)
		}
	}
}

// SetDefaults_ReplicatedJob defaults one replicatedJob and its Job template.
func SetDefaults_ReplicatedJob(obj *ReplicatedJob) {
	if obj.GroupName == "" {
		obj.GroupName = DefaultGroupName
	}
	if obj.Replicas == nil {
		obj.Replicas = ptr.To[int32](1)
	}
	if obj.Template.Spec.CompletionMode == nil {
		obj.Template.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	}
	if obj.Template.Spec.Template.Spec.RestartPolicy == "" {
		obj.Template.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	}
}

// SetDefaults_VolumeClaimPolicy defaults retentionPolicy to
// {whenDeleted: Delete}, as upstream's schema does, whether it is absent or
// given without whenDeleted.
func SetDefaults_VolumeClaimPolicy(obj *VolumeClaimPolicy) {
	if obj.RetentionPolicy == nil {
		obj.RetentionPolicy = &VolumeRetentionPolicy{}
	}
	if obj.RetentionPolicy.WhenDeleted == nil {
		obj.RetentionPolicy.WhenDeleted = ptr.To(RetentionPolicyDelete)
	}
}
