package jobset

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JobSet runs a group of Kubernetes Jobs as one unit.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type JobSet struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Spec   JobSetSpec
	Status JobSetStatus
}

// JobSetList is a list of JobSets.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type JobSetList struct {
	metav1.TypeMeta
	metav1.ListMeta

	Items []JobSet
}

// JobSetSpec is the desired state of a JobSet.
type JobSetSpec struct {
	ReplicatedJobs          []ReplicatedJob
	Network                 *Network
	SuccessPolicy           *SuccessPolicy
	FailurePolicy           *FailurePolicy
	StartupPolicy           *StartupPolicy
	Suspend                 *bool
	Coordinator             *Coordinator
	ManagedBy               *string
	TTLSecondsAfterFinished *int32
	VolumeClaimPolicies     []VolumeClaimPolicy
	// UpdatePolicy is nil when the client never set it, which means Never.
	UpdatePolicy *UpdatePolicy
}

// UpdatePolicy says whether and when edits of the replicatedJob templates
// reach a running JobSet.
type UpdatePolicy struct {
	UpdateStrategy UpdateStrategy
	// RevisionHistoryLimit bounds the template revisions kept; nil means
	// DefaultRevisionHistoryLimit.
	RevisionHistoryLimit *int32
}

type UpdateStrategy string

const (
	UpdateNever         UpdateStrategy = "Never"
	UpdateOpportunistic UpdateStrategy = "Opportunistic"
	UpdateImmediate     UpdateStrategy = "Immediate"
)

// DefaultRevisionHistoryLimit is the number of template revisions kept when
// updatePolicy.revisionHistoryLimit is not set.
const DefaultRevisionHistoryLimit int32 = 10

// ReplicatedJob is one template and the number of Jobs made from it.
type ReplicatedJob struct {
	Name      string
	GroupName string
	Template  batchv1.JobTemplateSpec
	// Replicas is always set in the internal form: defaulting turns an
	// absent value into 1 while an explicit 0 stays 0.
	Replicas  int32
	DependsOn []DependsOn
}

// DependsOn makes a replicatedJob wait for an earlier one.
type DependsOn struct {
	Name   string
	Status DependsOnStatus
}

type DependsOnStatus string

const (
	DependencyReady    DependsOnStatus = "Ready"
	DependencyComplete DependsOnStatus = "Complete"
)

// Network configures pod DNS inside the JobSet.
type Network struct {
	EnableDNSHostnames       *bool
	Subdomain                string
	PublishNotReadyAddresses *bool
}

type Operator string

const (
	OperatorAll Operator = "All"
	OperatorAny Operator = "Any"
)

// SuccessPolicy says when the JobSet counts as complete.
type SuccessPolicy struct {
	Operator             Operator
	TargetReplicatedJobs []string
}

type FailurePolicyAction string

const (
	FailJobSet                        FailurePolicyAction = "FailJobSet"
	RestartJobSet                     FailurePolicyAction = "RestartJobSet"
	RestartJobSetAndIgnoreMaxRestarts FailurePolicyAction = "RestartJobSetAndIgnoreMaxRestarts"
	RestartJob                        FailurePolicyAction = "RestartJob"
	RestartJobAndIgnoreMaxRestarts    FailurePolicyAction = "RestartJobAndIgnoreMaxRestarts"
)

// FailurePolicyRule maps a kind of Job failure to an action.
type FailurePolicyRule struct {
	Name                        string
	Action                      FailurePolicyAction
	OnJobFailureReasons         []string
	OnJobFailureMessagePatterns []string
	TargetReplicatedJobs        []string
}

// FailurePolicy says how the JobSet reacts to a failed Job.
type FailurePolicy struct {
	MaxRestarts     int32
	RestartStrategy JobSetRestartStrategy
	Rules           []FailurePolicyRule
}

type JobSetRestartStrategy string

const (
	Recreate         JobSetRestartStrategy = "Recreate"
	BlockingRecreate JobSetRestartStrategy = "BlockingRecreate"
	// InPlaceRestart restarts the containers of the existing pods, driven
	// by an agent in each pod, and recreates Jobs only when that cannot work.
	InPlaceRestart JobSetRestartStrategy = "InPlaceRestart"
)

type StartupPolicyOptions string

const (
	AnyOrder StartupPolicyOptions = "AnyOrder"
	InOrder  StartupPolicyOptions = "InOrder"
)

// StartupPolicy orders the start of replicatedJobs.
type StartupPolicy struct {
	StartupPolicyOrder StartupPolicyOptions
}

// Coordinator names the pod whose address every pod is told about.
type Coordinator struct {
	ReplicatedJob string
	JobIndex      int32
	PodIndex      int32
}

// VolumeClaimPolicy declares PVCs shared by the JobSet's pods.
type VolumeClaimPolicy struct {
	Templates       []corev1.PersistentVolumeClaim
	RetentionPolicy *VolumeRetentionPolicy
}

type VolumeRetentionPolicy struct {
	WhenDeleted *RetentionPolicyType
}

type RetentionPolicyType string

const (
	RetentionPolicyDelete RetentionPolicyType = "Delete"
	RetentionPolicyRetain RetentionPolicyType = "Retain"
)

// JobSetStatus is the observed state of a JobSet.
type JobSetStatus struct {
	Conditions              []metav1.Condition
	Restarts                int32
	RestartsCountTowardsMax int32
	TerminalState           string
	ReplicatedJobsStatus    []ReplicatedJobStatus
	// ExecutionAttempts counts execution cycles: nil until the first run,
	// 0 during it, one more on every restart that recreates the Jobs and on
	// every resume after a suspension.
	ExecutionAttempts *int32
	// CurrentRevision names the template revision the running Jobs were
	// built from; UpdateRevision the latest accepted template.
	CurrentRevision string
	UpdateRevision  string
	// PreviousInPlaceRestartAttempt and CurrentInPlaceRestartAttempt drive
	// the in-place restart agents (restartStrategy InPlaceRestart): a pod
	// whose attempt is at most the previous one restarts in place; a pod
	// whose attempt equals the current one may run its workload.
	PreviousInPlaceRestartAttempt *int32
	CurrentInPlaceRestartAttempt  *int32
}

// ReplicatedJobStatus counts the child Jobs of one replicatedJob.
type ReplicatedJobStatus struct {
	Name                       string
	Ready                      int32
	Succeeded                  int32
	Failed                     int32
	Active                     int32
	Suspended                  int32
	JobRestarts                []int32
	JobRestartsCountTowardsMax []int32

	// ObservedParallelism is the smallest spec.parallelism among the
	// unfinished Jobs of the current attempt; nil when there is none.
	ObservedParallelism *int32
}

type JobSetConditionType string

const (
	JobSetCompleted               JobSetConditionType = "Completed"
	JobSetFailed                  JobSetConditionType = "Failed"
	JobSetSuspended               JobSetConditionType = "Suspended"
	JobSetStartupPolicyInProgress JobSetConditionType = "StartupPolicyInProgress"
	JobSetStartupPolicyCompleted  JobSetConditionType = "StartupPolicyCompleted"
	JobSetRestarting              JobSetConditionType = "RestartingJobSet"
	JobSetUpdatePending           JobSetConditionType = "UpdatePending"
)
