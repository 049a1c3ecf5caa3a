package v1alpha2

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// JobSet runs a group of Kubernetes Jobs as one unit: the Jobs share a
// network identity, start in a chosen order, and are restarted, completed or
// failed together according to the JobSet's policies.
type JobSet struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec is the desired state of the JobSet.
	// +optional
	Spec JobSetSpec `json:"spec,omitempty" protobuf:"bytes,2,opt,name=spec"`

	// status is the observed state of the JobSet, written by the controller.
	// +optional
	Status JobSetStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// JobSetList is a list of JobSets.
type JobSetList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// items are the JobSets.
	Items []JobSet `json:"items" protobuf:"bytes,2,rep,name=items"`
}

// JobSetSpec is the desired state of a JobSet.
type JobSetSpec struct {
	// replicatedJobs are the groups of identical Jobs that make up the set.
	// Each entry yields `replicas` Jobs named <jobset>-<name>-<index>.
	// +patchMergeKey=name
	// +patchStrategy=merge
	// +listType=map
	// +listMapKey=name
	// +optional
	ReplicatedJobs []ReplicatedJob `json:"replicatedJobs,omitempty" patchStrategy:"merge" patchMergeKey:"name" protobuf:"bytes,1,rep,name=replicatedJobs"`

	// network configures DNS for the pods of the JobSet. Immutable.
	// +optional
	Network *Network `json:"network,omitempty" protobuf:"bytes,2,opt,name=network"`

	// successPolicy says which Jobs must complete for the JobSet to complete.
	// Defaults to all Jobs. Immutable.
	// +optional
	SuccessPolicy *SuccessPolicy `json:"successPolicy,omitempty" protobuf:"bytes,3,opt,name=successPolicy"`

	// failurePolicy says how the JobSet reacts when a child Job fails.
	// Without it, the first failed Job fails the JobSet. Immutable.
	// +optional
	FailurePolicy *FailurePolicy `json:"failurePolicy,omitempty" protobuf:"bytes,4,opt,name=failurePolicy"`

	// startupPolicy orders the start of the replicatedJobs. Deprecated in
	// favour of dependsOn, with which it cannot be combined. Immutable.
	// +optional
	StartupPolicy *StartupPolicy `json:"startupPolicy,omitempty" protobuf:"bytes,5,opt,name=startupPolicy"`

	// suspend, when true, suspends every active child Job; setting it back
	// to false resumes them.
	// +optional
	Suspend *bool `json:"suspend,omitempty" protobuf:"varint,6,opt,name=suspend"`

	// coordinator names one pod whose stable DNS name is published to every
	// Job and pod in the annotation and label jobset.sigs.k8s.io/coordinator.
	// +optional
	Coordinator *Coordinator `json:"coordinator,omitempty" protobuf:"bytes,7,opt,name=coordinator"`

	// managedBy names the controller that reconciles this JobSet. The
	// built-in controller handles JobSets without it or with
	// "jobset.sigs.k8s.io/jobset-controller" and leaves all others alone.
	// It must be a domain-prefixed path of at most 63 characters. Immutable.
	// +optional
	ManagedBy *string `json:"managedBy,omitempty" protobuf:"bytes,8,opt,name=managedBy"`

	// ttlSecondsAfterFinished deletes the JobSet that many seconds after it
	// completed or failed. Unset keeps it; zero deletes it at once.
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty" protobuf:"varint,9,opt,name=ttlSecondsAfterFinished"`

	// volumeClaimPolicies declares PersistentVolumeClaims shared by the pods
	// of the JobSet. Each claim is created once as <claim>-<jobset> and must
	// be mounted by some container of some template. At most 50. Immutable.
	// +listType=atomic
	// +optional
	VolumeClaimPolicies []VolumeClaimPolicy `json:"volumeClaimPolicies,omitempty" protobuf:"bytes,10,rep,name=volumeClaimPolicies"`

	// updatePolicy says whether edits of the replicatedJob templates are
	// accepted on a JobSet that has not finished, and when they reach its
	// Jobs. Absent means updateStrategy Never. May change until the JobSet
	// has finished.
	// +optional
	UpdatePolicy *UpdatePolicy `json:"updatePolicy,omitempty" protobuf:"bytes,11,opt,name=updatePolicy"`
}

// UpdatePolicy says whether and when edits of the replicatedJob templates
// reach a running JobSet.
type UpdatePolicy struct {
	// updateStrategy is Never (the templates are immutable, except the
	// scheduling fields of a suspended JobSet), Opportunistic (template
	// edits are accepted and used from the next whole-JobSet restart or
	// resume on; running Jobs are left alone) or Immediate (template edits
	// are accepted and a restart that does not count toward maxRestarts
	// applies them at once). Under Opportunistic and Immediate the
	// replicatedJobs' names, number and order and each template's
	// completionMode stay immutable. Defaults to Never.
	// +enum
	// +optional
	UpdateStrategy UpdateStrategy `json:"updateStrategy,omitempty" protobuf:"bytes,1,opt,name=updateStrategy,casttype=UpdateStrategy"`

	// revisionHistoryLimit is how many template revisions (ControllerRevisions
	// named <jobset>-<hash>) are kept; the revisions in use are never
	// removed. Defaults to 10.
	// +optional
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty" protobuf:"varint,2,opt,name=revisionHistoryLimit"`
}

// UpdateStrategy says when template edits reach a running JobSet.
// +enum
type UpdateStrategy string

const (
	// UpdateNever keeps the templates immutable.
	UpdateNever UpdateStrategy = "Never"
	// UpdateOpportunistic applies template edits at the next whole-JobSet
	// restart or resume.
	UpdateOpportunistic UpdateStrategy = "Opportunistic"
	// UpdateImmediate applies template edits by restarting the JobSet at
	// once, without counting toward maxRestarts.
	UpdateImmediate UpdateStrategy = "Immediate"
)

// DefaultRevisionHistoryLimit is the default of updatePolicy.revisionHistoryLimit.
const DefaultRevisionHistoryLimit int32 = 10

// ReplicatedJob is one Job template and the number of Jobs made from it.
type ReplicatedJob struct {
	// name identifies the replicatedJob and is the middle part of its Jobs'
	// names.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`

	// groupName puts the replicatedJob into a group; Jobs and pods get
	// group-wide indices. Defaults to "default".
	// +optional
	GroupName string `json:"groupName,omitempty" protobuf:"bytes,2,opt,name=groupName"`

	// template is the Job template the child Jobs are built from.
	Template batchv1.JobTemplateSpec `json:"template" protobuf:"bytes,3,opt,name=template"`

	// replicas is the number of Jobs made from the template. Defaults to 1
	// when absent; an explicit 0 creates no Jobs.
	// +optional
	Replicas *int32 `json:"replicas,omitempty" protobuf:"varint,4,opt,name=replicas"`

	// dependsOn delays the creation of this replicatedJob's Jobs until an
	// earlier replicatedJob is Ready or Complete. The first replicatedJob
	// cannot depend on anything. Immutable.
	// +patchMergeKey=name
	// +patchStrategy=merge
	// +listType=map
	// +listMapKey=name
	// +optional
	DependsOn []DependsOn `json:"dependsOn,omitempty" patchStrategy:"merge" patchMergeKey:"name" protobuf:"bytes,5,rep,name=dependsOn"`
}

// DependsOn names an earlier replicatedJob and the state it must reach.
type DependsOn struct {
	// name of an earlier replicatedJob.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`

	// status the earlier replicatedJob must reach: Ready or Complete.
	Status DependsOnStatus `json:"status" protobuf:"bytes,2,opt,name=status,casttype=DependsOnStatus"`
}

// DependsOnStatus is the state a dependency must reach.
type DependsOnStatus string

const (
	// DependencyReady is reached when every Job of the dependency is ready,
	// succeeded or failed.
	DependencyReady DependsOnStatus = "Ready"
	// DependencyComplete is reached when every Job of the dependency succeeded.
	DependencyComplete DependsOnStatus = "Complete"
)

// Network configures DNS for the pods of a JobSet.
type Network struct {
	// enableDNSHostnames gives every pod the DNS name
	// <jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain> through a
	// headless Service. Defaults to true.
	// +optional
	EnableDNSHostnames *bool `json:"enableDNSHostnames,omitempty" protobuf:"varint,1,opt,name=enableDNSHostnames"`

	// subdomain is the name of the headless Service and the pods' subdomain.
	// Defaults to the JobSet's name.
	// +optional
	Subdomain string `json:"subdomain,omitempty" protobuf:"bytes,2,opt,name=subdomain"`

	// publishNotReadyAddresses publishes pod DNS records before the pods are
	// ready. Defaults to true.
	// +optional
	PublishNotReadyAddresses *bool `json:"publishNotReadyAddresses,omitempty" protobuf:"varint,3,opt,name=publishNotReadyAddresses"`
}

// Operator says whether all or any of the selected Jobs count.
type Operator string

const (
	// OperatorAll requires every selected Job.
	OperatorAll Operator = "All"
	// OperatorAny requires one selected Job.
	OperatorAny Operator = "Any"
)

// SuccessPolicy says when a JobSet is complete.
type SuccessPolicy struct {
	// operator is All (every targeted Job succeeded) or Any (one did).
	Operator Operator `json:"operator" protobuf:"bytes,1,opt,name=operator,casttype=Operator"`

	// targetReplicatedJobs limits the policy to these replicatedJobs; empty
	// means all of them.
	// +listType=atomic
	// +optional
	TargetReplicatedJobs []string `json:"targetReplicatedJobs,omitempty" protobuf:"bytes,2,rep,name=targetReplicatedJobs"`
}

// FailurePolicyAction is what the controller does when a rule matches.
type FailurePolicyAction string

const (
	// FailJobSet fails the JobSet at once.
	FailJobSet FailurePolicyAction = "FailJobSet"
	// RestartJobSet recreates every Job, counting toward maxRestarts.
	RestartJobSet FailurePolicyAction = "RestartJobSet"
	// RestartJobSetAndIgnoreMaxRestarts recreates every Job without counting
	// toward maxRestarts.
	RestartJobSetAndIgnoreMaxRestarts FailurePolicyAction = "RestartJobSetAndIgnoreMaxRestarts"
	// RestartJob recreates only the failed Job, counting toward maxRestarts.
	RestartJob FailurePolicyAction = "RestartJob"
	// RestartJobAndIgnoreMaxRestarts recreates only the failed Job without
	// counting toward maxRestarts.
	RestartJobAndIgnoreMaxRestarts FailurePolicyAction = "RestartJobAndIgnoreMaxRestarts"
)

// FailurePolicyRule maps a kind of Job failure to an action. A rule matches
// when the failed Job's reason and message both match; rules are tried in
// order and the first match wins.
type FailurePolicyRule struct {
	// name of the rule, unique within the policy, matching
	// ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$. Defaults to failurePolicyRule<i>.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`

	// action to take when the rule matches: FailJobSet, RestartJobSet,
	// RestartJobSetAndIgnoreMaxRestarts, RestartJob or
	// RestartJobAndIgnoreMaxRestarts.
	Action FailurePolicyAction `json:"action" protobuf:"bytes,2,opt,name=action,casttype=FailurePolicyAction"`

	// onJobFailureReasons are Job failure reasons (BackoffLimitExceeded,
	// DeadlineExceeded, PodFailurePolicy, MaxFailedIndexesExceeded,
	// FailedIndexes); empty matches any reason.
	// +listType=atomic
	// +optional
	OnJobFailureReasons []string `json:"onJobFailureReasons,omitempty" protobuf:"bytes,3,rep,name=onJobFailureReasons"`

	// onJobFailureMessagePatterns are RE2 regular expressions; one must match
	// the Job's failure message. Empty matches any message.
	// +listType=atomic
	// +optional
	OnJobFailureMessagePatterns []string `json:"onJobFailureMessagePatterns,omitempty" protobuf:"bytes,4,rep,name=onJobFailureMessagePatterns"`

	// targetReplicatedJobs limits the rule to Jobs of these replicatedJobs;
	// empty means all of them.
	// +listType=atomic
	// +optional
	TargetReplicatedJobs []string `json:"targetReplicatedJobs,omitempty" protobuf:"bytes,5,rep,name=targetReplicatedJobs"`
}

// FailurePolicy says how a JobSet reacts to failed Jobs.
type FailurePolicy struct {
	// maxRestarts is how many counted restarts are allowed before the JobSet
	// fails.
	// +optional
	MaxRestarts int32 `json:"maxRestarts,omitempty" protobuf:"varint,1,opt,name=maxRestarts"`

	// restartStrategy is Recreate (each Job is recreated once its
	// predecessor is gone), BlockingRecreate (new Jobs wait until every
	// old one is gone) or InPlaceRestart (the containers of the existing
	// pods restart, coordinated by an agent in each pod, and Jobs are only
	// recreated when a pod is lost). Defaults to Recreate.
	// +optional
	RestartStrategy JobSetRestartStrategy `json:"restartStrategy,omitempty" protobuf:"bytes,2,opt,name=restartStrategy,casttype=JobSetRestartStrategy"`

	// rules are tried in order against a failed Job; when none matches, the
	// JobSet is restarted (RestartJobSet).
	// +listType=atomic
	// +optional
	Rules []FailurePolicyRule `json:"rules,omitempty" protobuf:"bytes,3,rep,name=rules"`
}

// JobSetRestartStrategy is how the Jobs of a JobSet are recreated.
type JobSetRestartStrategy string

const (
	// Recreate recreates each Job as soon as its previous attempt is gone.
	Recreate JobSetRestartStrategy = "Recreate"
	// BlockingRecreate waits until every Job of the previous attempt is gone.
	BlockingRecreate JobSetRestartStrategy = "BlockingRecreate"
	// InPlaceRestart keeps the pods and restarts their containers: an agent
	// in every pod reports the pod's attempt and holds the workload at a
	// barrier until every pod has reached the same attempt. Every Job
	// needs backoffLimit 2147483647, podReplacementPolicy Failed and equal
	// completions and parallelism.
	InPlaceRestart JobSetRestartStrategy = "InPlaceRestart"
)

// StartupPolicyOptions is the order in which replicatedJobs start.
type StartupPolicyOptions string

const (
	// AnyOrder starts every replicatedJob at once.
	AnyOrder StartupPolicyOptions = "AnyOrder"
	// InOrder starts each replicatedJob once the previous one is ready.
	InOrder StartupPolicyOptions = "InOrder"
)

// StartupPolicy orders the start of replicatedJobs.
type StartupPolicy struct {
	// startupPolicyOrder is AnyOrder or InOrder.
	StartupPolicyOrder StartupPolicyOptions `json:"startupPolicyOrder" protobuf:"bytes,1,opt,name=startupPolicyOrder,casttype=StartupPolicyOptions"`
}

// Coordinator names one pod of the JobSet.
type Coordinator struct {
	// replicatedJob holding the coordinator pod.
	ReplicatedJob string `json:"replicatedJob" protobuf:"bytes,1,opt,name=replicatedJob"`

	// jobIndex of the Job holding the coordinator pod.
	// +optional
	JobIndex int32 `json:"jobIndex,omitempty" protobuf:"varint,2,opt,name=jobIndex"`

	// podIndex is the completion index of the coordinator pod in that Job.
	// +optional
	PodIndex int32 `json:"podIndex,omitempty" protobuf:"varint,3,opt,name=podIndex"`
}

// VolumeClaimPolicy declares PersistentVolumeClaims shared by the pods of a
// JobSet and what happens to them when the JobSet is deleted.
type VolumeClaimPolicy struct {
	// templates of the shared claims. Each is created as <name>-<jobset>,
	// must not set a namespace, must not clash with a volume of a pod
	// template, and must be mounted by some container. At most 50.
	// +listType=atomic
	// +optional
	Templates []corev1.PersistentVolumeClaim `json:"templates,omitempty" protobuf:"bytes,1,rep,name=templates"`

	// retentionPolicy says what happens to the claims when the JobSet is
	// deleted.
	// +optional
	RetentionPolicy *VolumeRetentionPolicy `json:"retentionPolicy,omitempty" protobuf:"bytes,2,opt,name=retentionPolicy"`
}

// VolumeRetentionPolicy is the lifecycle of claims made from a policy.
type VolumeRetentionPolicy struct {
	// whenDeleted is Delete (the claims go with the JobSet) or Retain.
	// Defaults to Delete.
	// +optional
	WhenDeleted *RetentionPolicyType `json:"whenDeleted,omitempty" protobuf:"bytes,1,opt,name=whenDeleted,casttype=RetentionPolicyType"`
}

// RetentionPolicyType is what happens to a shared claim on deletion.
type RetentionPolicyType string

const (
	// RetentionPolicyDelete deletes the claims with the JobSet.
	RetentionPolicyDelete RetentionPolicyType = "Delete"
	// RetentionPolicyRetain keeps the claims after the JobSet is deleted.
	RetentionPolicyRetain RetentionPolicyType = "Retain"
)

// JobSetStatus is the observed state of a JobSet.
type JobSetStatus struct {
	// conditions of the JobSet: Completed, Failed, Suspended,
	// StartupPolicyInProgress, StartupPolicyCompleted, RestartingJobSet,
	// UpdatePending.
	// +patchMergeKey=type
	// +patchStrategy=merge
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type" protobuf:"bytes,1,rep,name=conditions"`

	// restarts counts whole-JobSet restarts, whether or not they count
	// toward maxRestarts.
	// +optional
	Restarts int32 `json:"restarts" protobuf:"varint,2,opt,name=restarts"`

	// restartsCountTowardsMax counts the whole-JobSet restarts that count
	// toward maxRestarts.
	// +optional
	RestartsCountTowardsMax int32 `json:"restartsCountTowardsMax,omitempty" protobuf:"varint,3,opt,name=restartsCountTowardsMax"`

	// terminalState is Completed or Failed once the JobSet has finished.
	// +optional
	TerminalState string `json:"terminalState,omitempty" protobuf:"bytes,4,opt,name=terminalState"`

	// replicatedJobsStatus counts the Jobs of each replicatedJob, in spec
	// order.
	// +patchMergeKey=name
	// +patchStrategy=merge
	// +listType=map
	// +listMapKey=name
	// +optional
	ReplicatedJobsStatus []ReplicatedJobStatus `json:"replicatedJobsStatus,omitempty" patchStrategy:"merge" patchMergeKey:"name" protobuf:"bytes,5,rep,name=replicatedJobsStatus"`

	// executionAttempts counts execution cycles: absent until the JobSet
	// first runs, 0 during its first run, and one more on every restart
	// that recreates its Jobs and on every resume after a suspension.
	// +optional
	ExecutionAttempts *int32 `json:"executionAttempts,omitempty" protobuf:"varint,6,opt,name=executionAttempts"`

	// currentRevision names the template revision (a ControllerRevision
	// <jobset>-<hash>) that the Jobs of the current attempt were built from.
	// +optional
	CurrentRevision string `json:"currentRevision,omitempty" protobuf:"bytes,7,opt,name=currentRevision"`

	// updateRevision names the template revision of the latest accepted
	// spec. It differs from currentRevision while an update is pending
	// (condition UpdatePending).
	// +optional
	UpdateRevision string `json:"updateRevision,omitempty" protobuf:"bytes,8,opt,name=updateRevision"`

	// previousInPlaceRestartAttempt is the newest in-place restart attempt
	// that is over: the agent of a pod whose attempt is at most this value
	// restarts its pod's containers. Written by the controller under
	// restartStrategy InPlaceRestart.
	// +optional
	PreviousInPlaceRestartAttempt *int32 `json:"previousInPlaceRestartAttempt,omitempty" protobuf:"varint,9,opt,name=previousInPlaceRestartAttempt"`

	// currentInPlaceRestartAttempt is the attempt every pod has reached: the
	// agent of a pod at this attempt lifts its barrier and lets the workload
	// run. Written by the controller under restartStrategy InPlaceRestart.
	// +optional
	CurrentInPlaceRestartAttempt *int32 `json:"currentInPlaceRestartAttempt,omitempty" protobuf:"varint,10,opt,name=currentInPlaceRestartAttempt"`
}

// ReplicatedJobStatus counts the Jobs of the current attempt of one
// replicatedJob.
type ReplicatedJobStatus struct {
	// name of the replicatedJob.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`

	// ready counts Jobs whose ready and succeeded pods reach
	// min(parallelism, completions).
	Ready int32 `json:"ready" protobuf:"varint,2,opt,name=ready"`

	// succeeded counts Jobs that completed.
	Succeeded int32 `json:"succeeded" protobuf:"varint,3,opt,name=succeeded"`

	// failed counts Jobs that failed.
	Failed int32 `json:"failed" protobuf:"varint,4,opt,name=failed"`

	// active counts Jobs with a pending or running pod that are not being
	// deleted.
	Active int32 `json:"active" protobuf:"varint,5,opt,name=active"`

	// suspended counts suspended Jobs.
	Suspended int32 `json:"suspended" protobuf:"varint,6,opt,name=suspended"`

	// jobRestarts[i] counts per-Job restarts of the Job with index i.
	// +listType=atomic
	// +optional
	JobRestarts []int32 `json:"jobRestarts,omitempty" protobuf:"varint,7,rep,name=jobRestarts"`

	// jobRestartsCountTowardsMax[i] counts the per-Job restarts of the Job
	// with index i that count toward maxRestarts.
	// +listType=atomic
	// +optional
	JobRestartsCountTowardsMax []int32 `json:"jobRestartsCountTowardsMax,omitempty" protobuf:"varint,8,rep,name=jobRestartsCountTowardsMax"`

	// observedParallelism is the smallest spec.parallelism among the
	// unfinished Jobs of the current attempt, as the controller last saw
	// them. The replicatedjobs/scale subresource reports it as
	// status.replicas; it is absent when no Job is unfinished. Not part of
	// upstream JobSet.
	// +optional
	ObservedParallelism *int32 `json:"observedParallelism,omitempty" protobuf:"varint,9,opt,name=observedParallelism"`
}

// JobSetConditionType is the type of a JobSet condition.
type JobSetConditionType string

const (
	JobSetCompleted               JobSetConditionType = "Completed"
	JobSetFailed                  JobSetConditionType = "Failed"
	JobSetSuspended               JobSetConditionType = "Suspended"
	JobSetStartupPolicyInProgress JobSetConditionType = "StartupPolicyInProgress"
	JobSetStartupPolicyCompleted  JobSetConditionType = "StartupPolicyCompleted"
	JobSetRestarting              JobSetConditionType = "RestartingJobSet"
	// JobSetUpdatePending is True while status.updateRevision differs from
	// status.currentRevision.
	JobSetUpdatePending JobSetConditionType = "UpdatePending"
)
