package jobset

// Label and annotation keys that the controller writes on child Jobs and
// pods. The values are part of the wire contract with upstream JobSet: Kueue,
// training operators and user scripts select on them.
const (
	JobSetNameKey         = "jobset.sigs.k8s.io/jobset-name"
	JobSetUIDKey          = "jobset.sigs.k8s.io/jobset-uid"
	ReplicatedJobNameKey  = "jobset.sigs.k8s.io/replicatedjob-name"
	ReplicatedJobReplicas = "jobset.sigs.k8s.io/replicatedjob-replicas"
	GlobalReplicasKey     = "jobset.sigs.k8s.io/global-replicas"
	JobIndexKey           = "jobset.sigs.k8s.io/job-index"
	JobGlobalIndexKey     = "jobset.sigs.k8s.io/job-global-index"
	JobKey                = "jobset.sigs.k8s.io/job-key"
	GroupNameKey          = "jobset.sigs.k8s.io/group-name"
	GroupReplicasKey      = "jobset.sigs.k8s.io/group-replicas"
	JobGroupIndexKey      = "jobset.sigs.k8s.io/job-group-index"
	RestartsKey           = "jobset.sigs.k8s.io/restart-attempt"
	JobRestartsKey        = "jobset.sigs.k8s.io/job-restart-attempt"
	CoordinatorKey        = "jobset.sigs.k8s.io/coordinator"

	// InPlaceRestartAttemptKey is the pod annotation on which the in-place
	// restart agent reports the attempt its pod has reached (a non-negative
	// integer).
	InPlaceRestartAttemptKey = "jobset.sigs.k8s.io/in-place-restart-attempt"
	// DisableInPlaceRestartKey, present on a JobSet, makes the agents skip
	// the barrier and run the workload at once; the controller then
	// restarts the JobSet by recreating its Jobs.
	DisableInPlaceRestartKey = "jobset.sigs.k8s.io/disable-in-place-restart"

	// ExecutionAttemptKey counts execution cycles: failure restarts and every
	// resume after a suspension. It goes beyond upstream.
	ExecutionAttemptKey = "jobset.sigs.k8s.io/execution-attempt"

	// TemplateRevisionKey names the template revision (the ControllerRevision
	// <jobset>-<hash>) a child Job and its pods were built from. It goes
	// beyond upstream.
	TemplateRevisionKey = "jobset.sigs.k8s.io/template-revision"

	// PriorityKey is a pod label holding the pod's priority (a negative one
	// written "n<magnitude>"); exclusive placement only separates Jobs of
	// the same priority.
	PriorityKey = "jobset.sigs.k8s.io/priority"
	// MigratingKey marks a JobSet that jobset-migrate is moving from
	// upstream's CustomResourceDefinition; its value is the UID of the JobSet
	// it was copied from. The controller leaves such a JobSet alone until the
	// annotation is removed, because its Jobs still point at the old UID.
	// It goes beyond upstream.
	MigratingKey = "jobset.sigs.k8s.io/migrating"

	// ExclusiveKey names a node label; each child Job then gets a topology
	// domain (one value of that label) of its own.
	ExclusiveKey = "alpha.jobset.sigs.k8s.io/exclusive-topology"
	// NodeSelectorStrategyKey makes pods select nodes pre-labelled with
	// NamespacedJobKey instead of letting the controller choose a domain.
	NodeSelectorStrategyKey = "alpha.jobset.sigs.k8s.io/node-selector"
	NamespacedJobKey        = "alpha.jobset.sigs.k8s.io/namespaced-job"
	NoScheduleTaintKey      = "alpha.jobset.sigs.k8s.io/no-schedule"

	// TopologyGate is the scheduling gate that holds the pods of an
	// exclusive Job until the controller has given them a topology domain.
	TopologyGate = "jobset.sigs.k8s.io/topology-placement"
	// ExclusivePlacementLabel marks the pods whose placement the controller
	// drives, so that it can watch only those (a selector cannot match
	// scheduling gates).
	ExclusivePlacementLabel = "jobset.sigs.k8s.io/exclusive-placement"
	// TopologyDomainKey records on a child Job the value of the exclusive
	// topology label its pods were placed in.
	TopologyDomainKey = "jobset.sigs.k8s.io/topology-domain"

	// JobSetControllerName is the managedBy value of the built-in controller.
	JobSetControllerName = "jobset.sigs.k8s.io/jobset-controller"

	// DefaultGroupName is the groupName of a replicatedJob that names none.
	DefaultGroupName = "default"

	// AllowScaleUnderQueueAnnotation, set to "true" on a JobSet, lets the
	// scale subresource of its replicatedJobs change parallelism although
	// the JobSet is managed by a queue (label QueueNameLabel). Without it
	// such a scale write is refused: a changed pod count makes Kueue evict
	// and requeue the JobSet.
	AllowScaleUnderQueueAnnotation = "jobset.x-k8s.io/allow-scale-under-queue"

	// QueueNameLabel is Kueue's label naming the LocalQueue of a workload.
	QueueNameLabel = "kueue.x-k8s.io/queue-name"
)

// Annotations the controller keeps on a JobSet to measure its availability
// across controller restarts (see docs/reference/metrics.md). Times are
// RFC 3339 with milliseconds, durations are seconds with three decimals.
// They go beyond upstream and are written by the controller only.
const (
	// AvailableSinceAnnotation is when the current available period began;
	// absent while the JobSet is not available.
	AvailableSinceAnnotation = "jobset.sigs.k8s.io/available-since"
	// AvailableGenerationAnnotation is the metadata.generation at which the
	// current available period was last seen; losing availability after a
	// spec change (an elastic scale-up) is not an interruption.
	AvailableGenerationAnnotation = "jobset.sigs.k8s.io/available-generation"
	// UptimeSecondsAnnotation is the available time accumulated before the
	// current available period.
	UptimeSecondsAnnotation = "jobset.sigs.k8s.io/uptime-seconds"
	// InterruptedSinceAnnotation is when the downtime clock of the current
	// interruption last started (the interruption's start, or the resume
	// that ended a suspension during it).
	InterruptedSinceAnnotation = "jobset.sigs.k8s.io/interrupted-since"
	// InterruptedSecondsAnnotation is the downtime of the current
	// interruption accumulated before a suspension paused it.
	InterruptedSecondsAnnotation = "jobset.sigs.k8s.io/interrupted-seconds"
	// InterruptionsAnnotation counts the interruptions that started.
	InterruptionsAnnotation = "jobset.sigs.k8s.io/interruptions"
	// UptimeAtLastRecoveryAnnotation is the total uptime when the last
	// interruption ended; absent until one did.
	UptimeAtLastRecoveryAnnotation = "jobset.sigs.k8s.io/uptime-at-last-recovery-seconds"
)
