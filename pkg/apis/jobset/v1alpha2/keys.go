package v1alpha2

import "github.com/nativejobset/jobset/pkg/apis/jobset"

// The label and annotation keys of upstream JobSet, re-exported so that
// clients written against upstream's v1alpha2 package find them here.
const (
	JobSetNameKey            = jobset.JobSetNameKey
	JobSetUIDKey             = jobset.JobSetUIDKey
	ReplicatedJobNameKey     = jobset.ReplicatedJobNameKey
	ReplicatedJobReplicas    = jobset.ReplicatedJobReplicas
	GlobalReplicasKey        = jobset.GlobalReplicasKey
	JobIndexKey              = jobset.JobIndexKey
	JobGlobalIndexKey        = jobset.JobGlobalIndexKey
	JobKey                   = jobset.JobKey
	GroupNameKey             = jobset.GroupNameKey
	GroupReplicasKey         = jobset.GroupReplicasKey
	JobGroupIndexKey         = jobset.JobGroupIndexKey
	RestartsKey              = jobset.RestartsKey
	JobRestartsKey           = jobset.JobRestartsKey
	CoordinatorKey           = jobset.CoordinatorKey
	InPlaceRestartAttemptKey = jobset.InPlaceRestartAttemptKey
	DisableInPlaceRestartKey = jobset.DisableInPlaceRestartKey
	ExecutionAttemptKey      = jobset.ExecutionAttemptKey
	TemplateRevisionKey      = jobset.TemplateRevisionKey
	PriorityKey              = jobset.PriorityKey
	MigratingKey             = jobset.MigratingKey
	ExclusiveKey             = jobset.ExclusiveKey
	NodeSelectorStrategyKey  = jobset.NodeSelectorStrategyKey
	NamespacedJobKey         = jobset.NamespacedJobKey
	NoScheduleTaintKey       = jobset.NoScheduleTaintKey
	TopologyGate             = jobset.TopologyGate
	ExclusivePlacementLabel  = jobset.ExclusivePlacementLabel
	TopologyDomainKey        = jobset.TopologyDomainKey
	JobSetControllerName     = jobset.JobSetControllerName
	DefaultGroupName         = jobset.DefaultGroupName

	AllowScaleUnderQueueAnnotation = jobset.AllowScaleUnderQueueAnnotation
	QueueNameLabel                 = jobset.QueueNameLabel
)
