package validation

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

const (
	// maxNameLength bounds the names of child Jobs, pods, Services and PVCs
	// derived from the JobSet: all of them must fit in a DNS label.
	maxNameLength = validation.DNS1035LabelMaxLength

	// generatedNameSuffix stands in for the five random characters the
	// server appends to generateName; the generator first cuts the prefix to
	// maxGeneratedPrefixLength.
	generatedNameSuffix      = "xxxxx"
	maxGeneratedPrefixLength = maxNameLength - len(generatedNameSuffix)

	// podNameSuffix stands in for the random suffix the Job controller
	// appends to the name of every pod it creates.
	podNameSuffix = "-abcde"

	maxManagedByLength        = 63
	maxDependsOn              = 5
	maxVolumeClaimPolicies    = 50
	maxClaimTemplates         = 50
	maxRuleNameLength         = 128
	maxReplicasWithJobRestart = 1024

	jobNameTooLongMsg = "JobSet name is too long, job names generated for this JobSet will exceed 63 characters"
	podNameTooLongMsg = "JobSet name is too long, pod names generated for this JobSet will exceed 63 characters"
	mutuallyExclusive = "StartupPolicy and DependsOn APIs are mutually exclusive"

	// Upstream's wording, kept so that tools matching its messages work.
	dnsLabelTooLongMsg    = "must be no more than 63 characters"
	subdomainTooLongMsg   = ".spec.network.subdomain is too long, must be less than 63 characters"
	groupNameTooLongMsg   = ".spec.replicatedJob[].groupName is too long, must be less than 63 characters"
	dependsOnFirstMsg     = "DependsOn can't be set for the first ReplicatedJob"
	restartJobReplicasMsg = "JobSet cannot have a failure policy rule with RestartJob or RestartJobAndIgnoreMaxRestarts action and a replicated job with replicas > %d"
	immutableValueMsg     = "Value is immutable"
)

// ruleNamePattern is the format of failure policy rule names; it is the
// format of Kubernetes condition reasons.
var ruleNamePattern = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

var (
	supportedDependsOnStatuses = []jobset.DependsOnStatus{jobset.DependencyReady, jobset.DependencyComplete}
	supportedOperators         = []jobset.Operator{jobset.OperatorAll, jobset.OperatorAny}
	supportedStartupOrders     = []jobset.StartupPolicyOptions{jobset.AnyOrder, jobset.InOrder}
	supportedRestartStrategies = []jobset.JobSetRestartStrategy{jobset.Recreate, jobset.BlockingRecreate, jobset.InPlaceRestart}
	supportedActions           = []jobset.FailurePolicyAction{
		jobset.FailJobSet,
		jobset.RestartJobSet,
		jobset.RestartJobSetAndIgnoreMaxRestarts,
		jobset.RestartJob,
		jobset.RestartJobAndIgnoreMaxRestarts,
	}
	supportedFailureReasons = []string{
		batchv1.JobReasonBackoffLimitExceeded,
		batchv1.JobReasonDeadlineExceeded,
		batchv1.JobReasonFailedIndexes,
		batchv1.JobReasonMaxFailedIndexesExceeded,
		batchv1.JobReasonPodFailurePolicy,
	}
	supportedCompletionModes  = []batchv1.CompletionMode{batchv1.IndexedCompletion, batchv1.NonIndexedCompletion}
	supportedRetentionTypes   = []jobset.RetentionPolicyType{jobset.RetentionPolicyDelete, jobset.RetentionPolicyRetain}
	supportedUpdateStrategies = []jobset.UpdateStrategy{jobset.UpdateNever, jobset.UpdateOpportunistic, jobset.UpdateImmediate}
)

// specView is a JobSet spec together with what its rules keep looking up:
// the JobSet name that child object names are built from, and the index of
// every replicatedJob name.
type specView struct {
	spec *jobset.JobSetSpec
	path *field.Path

	// name is the JobSet name, or a stand-in for the one the server will
	// generate; empty when neither name nor generateName is set.
	name string
	// namePath is the metadata field that name comes from.
	namePath *field.Path

	// rjIndex maps each non-empty replicatedJob name to its first index.
	rjIndex map[string]int
	// rjNames lists the distinct non-empty replicatedJob names in order.
	rjNames []string
}

func newSpecView(js *jobset.JobSet) *specView {
	v := &specView{
		spec:    &js.Spec,
		path:    field.NewPath("spec"),
		rjIndex: make(map[string]int, len(js.Spec.ReplicatedJobs)),
	}
	meta := field.NewPath("metadata")
	switch {
	case js.Name != "":
		v.name, v.namePath = js.Name, meta.Child("name")
	case js.GenerateName != "":
		prefix := js.GenerateName
		if len(prefix) > maxGeneratedPrefixLength {
			prefix = prefix[:maxGeneratedPrefixLength]
		}
		v.name, v.namePath = prefix+generatedNameSuffix, meta.Child("generateName")
	}
	for i := range js.Spec.ReplicatedJobs {
		name := js.Spec.ReplicatedJobs[i].Name
		if _, seen := v.rjIndex[name]; !seen && name != "" {
			v.rjIndex[name] = i
			v.rjNames = append(v.rjNames, name)
		}
	}
	return v
}

func (v *specView) rjPath(i int) *field.Path {
	return v.path.Child("replicatedJobs").Index(i)
}

// validateFixedParts checks the rules that only involve fields an update
// cannot change. They run on create; on update the immutability checks keep
// them true.
func (v *specView) validateFixedParts() field.ErrorList {
	var allErrs field.ErrorList
	spec := v.spec

	if len(spec.ReplicatedJobs) == 0 {
		allErrs = append(allErrs, field.Required(v.path.Child("replicatedJobs"), "at least one replicatedJob is required"))
	}
	seen := sets.New[string]()
	for i := range spec.ReplicatedJobs {
		rj := &spec.ReplicatedJobs[i]
		p := v.rjPath(i)
		allErrs = append(allErrs, validateReplicatedJobName(rj.Name, p.Child("name"))...)
		if rj.Name != "" {
			if seen.Has(rj.Name) {
				allErrs = append(allErrs, field.Duplicate(p.Child("name"), rj.Name))
			}
			seen.Insert(rj.Name)
		}
		allErrs = append(allErrs, validateDNS1035(rj.GroupName, p.Child("groupName"), groupNameTooLongMsg)...)
		allErrs = append(allErrs, v.validateDependsOn(i)...)
		if mode := rj.Template.Spec.CompletionMode; mode != nil && !slices.Contains(supportedCompletionModes, *mode) {
			allErrs = append(allErrs, field.NotSupported(p.Child("template", "spec", "completionMode"), *mode, supportedCompletionModes))
		}
	}

	allErrs = append(allErrs, validateNetwork(spec.Network, v.path.Child("network"))...)
	allErrs = append(allErrs, validateManagedBy(spec.ManagedBy, v.path.Child("managedBy"))...)
	allErrs = append(allErrs, v.validateSuccessPolicy()...)
	allErrs = append(allErrs, validateStartupPolicy(spec.StartupPolicy, v.path.Child("startupPolicy"))...)
	allErrs = append(allErrs, v.validateFailurePolicy()...)
	allErrs = append(allErrs, v.validateVolumeClaimPolicies()...)
	return allErrs
}

// validateMutableParts checks the rules that involve a field an update may
// change: replicas, parallelism, completions, the Kueue-mutable parts of the
// pod template (or the whole template under an update strategy), the
// coordinator, the update policy and ttlSecondsAfterFinished.
func (v *specView) validateMutableParts() field.ErrorList {
	var allErrs field.ErrorList
	spec := v.spec
	restartJobRule := v.firstRestartJobRule()

	for i := range spec.ReplicatedJobs {
		rj := &spec.ReplicatedJobs[i]
		p := v.rjPath(i)
		jobSpec := &rj.Template.Spec
		specPath := p.Child("template", "spec")

		allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(rj.Replicas), p.Child("replicas"))...)
		parallelism := int64(1)
		if jobSpec.Parallelism != nil {
			parallelism = int64(*jobSpec.Parallelism)
			allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(parallelism, specPath.Child("parallelism"))...)
		}
		if jobSpec.Completions != nil {
			allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(*jobSpec.Completions), specPath.Child("completions"))...)
		}
		if pods := parallelism * int64(rj.Replicas); pods > math.MaxInt32 {
			allErrs = append(allErrs, field.Invalid(p.Child("replicas"), rj.Replicas,
				fmt.Sprintf("the product of replicas and parallelism (%d) must not exceed %d", pods, math.MaxInt32)))
		}
		if restartJobRule != nil && rj.Replicas > maxReplicasWithJobRestart {
			allErrs = append(allErrs, field.Invalid(p.Child("replicas"), rj.Replicas,
				fmt.Sprintf(restartJobReplicasMsg+" (%s uses %s)", maxReplicasWithJobRestart, restartJobRule.path, restartJobRule.action)))
		}

		allErrs = append(allErrs, validateTemplateMetadata(&rj.Template, p.Child("template"))...)
		allErrs = append(allErrs, v.validateGeneratedNames(rj)...)
		allErrs = append(allErrs, v.validateInPlaceRestart(i)...)
	}

	allErrs = append(allErrs, v.validateCoordinator()...)
	allErrs = append(allErrs, validateUpdatePolicy(spec.UpdatePolicy, v.path.Child("updatePolicy"))...)
	if ttl := spec.TTLSecondsAfterFinished; ttl != nil {
		allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(*ttl), v.path.Child("ttlSecondsAfterFinished"))...)
	}
	return allErrs
}

// validateUpdatePolicy checks the update strategy and the revision history
// limit. Both may change at any time before the JobSet finishes.
func validateUpdatePolicy(up *jobset.UpdatePolicy, p *field.Path) field.ErrorList {
	if up == nil {
		return nil
	}
	var allErrs field.ErrorList
	if !slices.Contains(supportedUpdateStrategies, up.UpdateStrategy) {
		allErrs = append(allErrs, field.NotSupported(p.Child("updateStrategy"), up.UpdateStrategy, supportedUpdateStrategies))
	}
	if up.RevisionHistoryLimit != nil {
		allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(*up.RevisionHistoryLimit), p.Child("revisionHistoryLimit"))...)
	}
	return allErrs
}

// validateTemplateMetadata checks the labels and annotations of the Job
// template and of its pod template.
func validateTemplateMetadata(t *batchv1.JobTemplateSpec, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	jobMeta := p.Child("metadata")
	podMeta := p.Child("spec", "template", "metadata")
	allErrs = append(allErrs, metav1validation.ValidateLabels(t.Labels, jobMeta.Child("labels"))...)
	allErrs = append(allErrs, apivalidation.ValidateAnnotations(t.Annotations, jobMeta.Child("annotations"))...)
	allErrs = append(allErrs, metav1validation.ValidateLabels(t.Spec.Template.Labels, podMeta.Child("labels"))...)
	allErrs = append(allErrs, apivalidation.ValidateAnnotations(t.Spec.Template.Annotations, podMeta.Child("annotations"))...)
	return allErrs
}

// validateGeneratedNames checks that the longest child Job name, and for
// Indexed Jobs with completions the longest pod name, fit in a DNS label.
// The shape of those names (letters, digits, dashes) follows from the JobSet
// and replicatedJob names, which are checked on their own; only the length
// can go wrong here.
func (v *specView) validateGeneratedNames(rj *jobset.ReplicatedJob) field.ErrorList {
	if v.name == "" || rj.Name == "" {
		return nil
	}
	lastJob := max(int64(rj.Replicas)-1, 0)
	jobName := fmt.Sprintf("%s-%s-%d", v.name, rj.Name, lastJob)
	if len(jobName) > maxNameLength {
		return field.ErrorList{field.Invalid(v.namePath, v.name,
			fmt.Sprintf("%s (replicatedJob %q: %q has %d characters)", jobNameTooLongMsg, rj.Name, jobName, len(jobName)))}
	}
	if !isIndexed(&rj.Template.Spec) || rj.Template.Spec.Completions == nil {
		return nil
	}
	lastPod := max(int64(*rj.Template.Spec.Completions)-1, 0)
	podName := fmt.Sprintf("%s-%d%s", jobName, lastPod, podNameSuffix)
	if len(podName) > maxNameLength {
		return field.ErrorList{field.Invalid(v.namePath, v.name,
			fmt.Sprintf("%s (replicatedJob %q: %q has %d characters)", podNameTooLongMsg, rj.Name, podName, len(podName)))}
	}
	return nil
}

// validateDependsOn checks the dependencies of replicatedJob i.
func (v *specView) validateDependsOn(i int) field.ErrorList {
	deps := v.spec.ReplicatedJobs[i].DependsOn
	if len(deps) == 0 {
		return nil
	}
	p := v.rjPath(i).Child("dependsOn")
	if i == 0 {
		return field.ErrorList{field.Forbidden(p, dependsOnFirstMsg)}
	}

	var allErrs field.ErrorList
	if sp := v.spec.StartupPolicy; sp != nil && sp.StartupPolicyOrder == jobset.InOrder {
		allErrs = append(allErrs, field.Forbidden(p, mutuallyExclusive+": dependsOn cannot be used with startupPolicyOrder InOrder"))
	}
	if len(deps) > maxDependsOn {
		allErrs = append(allErrs, field.TooMany(p, len(deps), maxDependsOn))
	}
	seen := sets.New[string]()
	for j, d := range deps {
		dp := p.Index(j)
		namePath := dp.Child("name")
		switch idx, found := v.rjIndex[d.Name]; {
		case d.Name == "":
			allErrs = append(allErrs, field.Required(namePath, "must name an earlier replicatedJob"))
		case seen.Has(d.Name):
			allErrs = append(allErrs, field.Duplicate(namePath, d.Name))
		case !found:
			allErrs = append(allErrs, field.Invalid(namePath, d.Name, "must name an earlier replicatedJob; there is no replicatedJob with this name"))
		case idx == i:
			allErrs = append(allErrs, field.Invalid(namePath, d.Name, "must name an earlier replicatedJob; a replicatedJob cannot depend on itself"))
		case idx > i:
			allErrs = append(allErrs, field.Invalid(namePath, d.Name, "must name an earlier replicatedJob; this one comes later in spec.replicatedJobs"))
		}
		seen.Insert(d.Name)

		statusPath := dp.Child("status")
		if d.Status == "" {
			allErrs = append(allErrs, field.Required(statusPath, ""))
		} else if !slices.Contains(supportedDependsOnStatuses, d.Status) {
			allErrs = append(allErrs, field.NotSupported(statusPath, d.Status, supportedDependsOnStatuses))
		}
	}
	return allErrs
}

// validateNetwork checks the subdomain, which is also the name of the
// headless Service and so must be a DNS-1035 label as well as a DNS-1123
// subdomain.
func validateNetwork(n *jobset.Network, p *field.Path) field.ErrorList {
	if n == nil || n.Subdomain == "" {
		return nil
	}
	var allErrs field.ErrorList
	sub := p.Child("subdomain")
	for _, msg := range validation.IsDNS1123Subdomain(n.Subdomain) {
		allErrs = append(allErrs, field.Invalid(sub, n.Subdomain, msg))
	}
	if len(allErrs) > 0 {
		return allErrs
	}
	// Every DNS-1035 label is a DNS-1123 subdomain, so this only adds
	// errors for what the Service name rules reject on top (dots, a leading
	// digit, more than 63 characters).
	for _, msg := range validation.IsDNS1035Label(n.Subdomain) {
		if strings.Contains(msg, dnsLabelTooLongMsg) {
			msg = subdomainTooLongMsg
		}
		allErrs = append(allErrs, field.Invalid(sub, n.Subdomain, msg+" (the subdomain is the name of the JobSet's headless Service)"))
	}
	return allErrs
}

func validateManagedBy(managedBy *string, p *field.Path) field.ErrorList {
	if managedBy == nil {
		return nil
	}
	allErrs := validation.IsDomainPrefixedPath(p, *managedBy)
	if len(*managedBy) > maxManagedByLength {
		allErrs = append(allErrs, field.TooLong(p, *managedBy, maxManagedByLength))
	}
	return allErrs
}

func (v *specView) validateSuccessPolicy() field.ErrorList {
	sp := v.spec.SuccessPolicy
	if sp == nil {
		return nil
	}
	p := v.path.Child("successPolicy")
	var allErrs field.ErrorList
	if sp.Operator == "" {
		allErrs = append(allErrs, field.Required(p.Child("operator"), ""))
	} else if !slices.Contains(supportedOperators, sp.Operator) {
		allErrs = append(allErrs, field.NotSupported(p.Child("operator"), sp.Operator, supportedOperators))
	}
	allErrs = append(allErrs, v.validateTargets(sp.TargetReplicatedJobs, p.Child("targetReplicatedJobs"))...)
	return allErrs
}

// validateTargets checks that every name refers to a replicatedJob.
func (v *specView) validateTargets(targets []string, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, name := range targets {
		if _, ok := v.rjIndex[name]; !ok {
			allErrs = append(allErrs, field.NotSupported(p.Index(i), name, v.rjNames))
		}
	}
	return allErrs
}

func validateStartupPolicy(sp *jobset.StartupPolicy, p *field.Path) field.ErrorList {
	if sp == nil {
		return nil
	}
	order := p.Child("startupPolicyOrder")
	if sp.StartupPolicyOrder == "" {
		return field.ErrorList{field.Required(order, "")}
	}
	if !slices.Contains(supportedStartupOrders, sp.StartupPolicyOrder) {
		return field.ErrorList{field.NotSupported(order, sp.StartupPolicyOrder, supportedStartupOrders)}
	}
	return nil
}

func (v *specView) validateFailurePolicy() field.ErrorList {
	fp := v.spec.FailurePolicy
	if fp == nil {
		return nil
	}
	p := v.path.Child("failurePolicy")
	allErrs := apivalidation.ValidateNonnegativeField(int64(fp.MaxRestarts), p.Child("maxRestarts"))
	if !slices.Contains(supportedRestartStrategies, fp.RestartStrategy) {
		allErrs = append(allErrs, field.NotSupported(p.Child("restartStrategy"), fp.RestartStrategy, supportedRestartStrategies))
	}
	ruleNames := sets.New[string]()
	for i := range fp.Rules {
		rule := &fp.Rules[i]
		rp := p.Child("rules").Index(i)
		allErrs = append(allErrs, validateRuleName(rule.Name, rp.Child("name"))...)
		if rule.Name != "" {
			if ruleNames.Has(rule.Name) {
				allErrs = append(allErrs, field.Duplicate(rp.Child("name"), rule.Name))
			}
			ruleNames.Insert(rule.Name)
		}

		if rule.Action == "" {
			allErrs = append(allErrs, field.Required(rp.Child("action"), ""))
		} else if !slices.Contains(supportedActions, rule.Action) {
			allErrs = append(allErrs, field.NotSupported(rp.Child("action"), rule.Action, supportedActions))
		}

		reasons := sets.New[string]()
		for j, reason := range rule.OnJobFailureReasons {
			rsp := rp.Child("onJobFailureReasons").Index(j)
			switch {
			case reasons.Has(reason):
				allErrs = append(allErrs, field.Duplicate(rsp, reason))
			case !slices.Contains(supportedFailureReasons, reason):
				allErrs = append(allErrs, field.NotSupported(rsp, reason, supportedFailureReasons))
			}
			reasons.Insert(reason)
		}

		patterns := sets.New[string]()
		for j, pattern := range rule.OnJobFailureMessagePatterns {
			pp := rp.Child("onJobFailureMessagePatterns").Index(j)
			if patterns.Has(pattern) {
				allErrs = append(allErrs, field.Duplicate(pp, pattern))
			} else if _, err := regexp.Compile(pattern); err != nil {
				allErrs = append(allErrs, field.Invalid(pp, pattern, fmt.Sprintf("must be a valid regular expression: %v", err)))
			}
			patterns.Insert(pattern)
		}

		allErrs = append(allErrs, v.validateTargets(rule.TargetReplicatedJobs, rp.Child("targetReplicatedJobs"))...)
	}
	return allErrs
}

func validateRuleName(name string, p *field.Path) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(p, "")}
	case len(name) > maxRuleNameLength:
		return field.ErrorList{field.TooLong(p, name, maxRuleNameLength)}
	case !ruleNamePattern.MatchString(name):
		return field.ErrorList{field.Invalid(p, name,
			"must start with a letter, continue with letters, digits or '_,:', and end with a letter, digit or '_' (regex used for validation is '"+ruleNamePattern.String()+"')")}
	}
	return nil
}

// restartJobRule locates the first failure policy rule whose action
// restarts single Jobs.
type restartJobRule struct {
	action jobset.FailurePolicyAction
	path   *field.Path
}

func (v *specView) firstRestartJobRule() *restartJobRule {
	fp := v.spec.FailurePolicy
	if fp == nil {
		return nil
	}
	for i, rule := range fp.Rules {
		if rule.Action == jobset.RestartJob || rule.Action == jobset.RestartJobAndIgnoreMaxRestarts {
			return &restartJobRule{
				action: rule.Action,
				path:   v.path.Child("failurePolicy", "rules").Index(i).Child("action"),
			}
		}
	}
	return nil
}

// validateCoordinator checks that the coordinator names an existing pod and
// that its DNS name fits in the value of the coordinator label.
func (v *specView) validateCoordinator() field.ErrorList {
	c := v.spec.Coordinator
	if c == nil {
		return nil
	}
	p := v.path.Child("coordinator")
	rjField := p.Child("replicatedJob")
	if c.ReplicatedJob == "" {
		return field.ErrorList{field.Required(rjField, "")}
	}
	idx, ok := v.rjIndex[c.ReplicatedJob]
	if !ok {
		return field.ErrorList{field.NotSupported(rjField, c.ReplicatedJob, v.rjNames)}
	}
	rj := &v.spec.ReplicatedJobs[idx]

	var allErrs field.ErrorList
	if c.JobIndex < 0 || c.JobIndex >= rj.Replicas {
		allErrs = append(allErrs, field.Invalid(p.Child("jobIndex"), c.JobIndex,
			fmt.Sprintf("must be at least 0 and less than the %d replicas of replicatedJob %q", rj.Replicas, rj.Name)))
	}
	jobSpec := &rj.Template.Spec
	switch {
	case !isIndexed(jobSpec):
		allErrs = append(allErrs, field.Invalid(rjField, c.ReplicatedJob, "must name a replicatedJob whose template has completionMode Indexed"))
	case jobSpec.Completions == nil:
		allErrs = append(allErrs, field.Invalid(rjField, c.ReplicatedJob, "must name a replicatedJob whose template sets completions"))
	case c.PodIndex < 0 || c.PodIndex >= *jobSpec.Completions:
		allErrs = append(allErrs, field.Invalid(p.Child("podIndex"), c.PodIndex,
			fmt.Sprintf("must be at least 0 and less than the %d completions of replicatedJob %q", *jobSpec.Completions, rj.Name)))
	}

	if v.name != "" {
		subdomain := v.name
		if n := v.spec.Network; n != nil && n.Subdomain != "" {
			subdomain = n.Subdomain
		}
		endpoint := fmt.Sprintf("%s-%s-%d-%d.%s", v.name, rj.Name, c.JobIndex, c.PodIndex, subdomain)
		for _, msg := range validation.IsValidLabelValue(endpoint) {
			allErrs = append(allErrs, field.Invalid(p, endpoint,
				"the coordinator endpoint becomes the value of the label "+jobset.CoordinatorKey+" and "+msg))
		}
	}
	return allErrs
}

// validateVolumeClaimPolicies checks the shared claim templates: names are
// unique across all policies, the created claims have valid names, the
// claims do not collide with pod volumes and every claim is mounted.
func (v *specView) validateVolumeClaimPolicies() field.ErrorList {
	policies := v.spec.VolumeClaimPolicies
	if len(policies) == 0 {
		return nil
	}
	p := v.path.Child("volumeClaimPolicies")
	var allErrs field.ErrorList
	if len(policies) > maxVolumeClaimPolicies {
		allErrs = append(allErrs, field.TooMany(p, len(policies), maxVolumeClaimPolicies))
	}

	type claim struct {
		name string
		path *field.Path
	}
	var claims []claim
	claimNames := sets.New[string]()
	for i := range policies {
		policy := &policies[i]
		pp := p.Index(i)
		if rp := policy.RetentionPolicy; rp != nil && rp.WhenDeleted != nil && !slices.Contains(supportedRetentionTypes, *rp.WhenDeleted) {
			allErrs = append(allErrs, field.NotSupported(pp.Child("retentionPolicy", "whenDeleted"), *rp.WhenDeleted, supportedRetentionTypes))
		}
		if len(policy.Templates) > maxClaimTemplates {
			allErrs = append(allErrs, field.TooMany(pp.Child("templates"), len(policy.Templates), maxClaimTemplates))
		}
		for j := range policy.Templates {
			t := &policy.Templates[j]
			tp := pp.Child("templates").Index(j)
			namePath := tp.Child("metadata", "name")
			if t.Namespace != "" {
				allErrs = append(allErrs, field.Forbidden(tp.Child("metadata", "namespace"), "must be empty: claims are created in the namespace of the JobSet"))
			}
			if t.Name == "" {
				allErrs = append(allErrs, field.Required(namePath, ""))
				continue
			}
			if claimNames.Has(t.Name) {
				allErrs = append(allErrs, field.Duplicate(namePath, t.Name))
				continue
			}
			claimNames.Insert(t.Name)
			claims = append(claims, claim{name: t.Name, path: namePath})

			nameErrs := validation.IsDNS1123Subdomain(t.Name)
			for _, msg := range nameErrs {
				allErrs = append(allErrs, field.Invalid(namePath, t.Name, msg))
			}
			if v.name == "" {
				continue
			}
			claimName := t.Name + "-" + v.name
			if len(claimName) > maxNameLength {
				allErrs = append(allErrs, field.Invalid(namePath, t.Name,
					fmt.Sprintf("the claim name %q made from this template and the JobSet name must be no more than %d characters", claimName, maxNameLength)))
			} else if len(nameErrs) == 0 {
				for _, msg := range validation.IsDNS1123Subdomain(claimName) {
					allErrs = append(allErrs, field.Invalid(namePath, t.Name, fmt.Sprintf("the claim name %q made from this template: %s", claimName, msg)))
				}
			}
		}
	}

	mounted := sets.New[string]()
	for i := range v.spec.ReplicatedJobs {
		podSpec := &v.spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		volumesPath := v.rjPath(i).Child("template", "spec", "template", "spec", "volumes")
		for k, vol := range podSpec.Volumes {
			if claimNames.Has(vol.Name) {
				allErrs = append(allErrs, field.Invalid(volumesPath.Index(k).Child("name"), vol.Name,
					"must not have the name of a volumeClaimPolicies template: the JobSet adds that volume itself"))
			}
		}
		for _, c := range podSpec.InitContainers {
			for _, m := range c.VolumeMounts {
				mounted.Insert(m.Name)
			}
		}
		for _, c := range podSpec.Containers {
			for _, m := range c.VolumeMounts {
				mounted.Insert(m.Name)
			}
		}
	}
	for _, c := range claims {
		if !mounted.Has(c.name) {
			allErrs = append(allErrs, field.Invalid(c.path, c.name,
				"must be mounted (volumeMounts[].name) by at least one container or initContainer of a replicatedJob template"))
		}
	}
	return allErrs
}

// validateReplicatedJobName checks a replicatedJob name. It only ever
// stands inside generated names ("<jobset>-<name>-<index>", which must be
// a DNS-1035 label: a leading digit is fine there, as upstream accepts) and
// as a label value, so it must be a DNS-1123 label.
func validateReplicatedJobName(value string, p *field.Path) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var allErrs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(value) {
		allErrs = append(allErrs, field.Invalid(p, value, msg))
	}
	return allErrs
}

// validateDNS1035 checks a required name that must be a DNS-1035 label;
// tooLong, when set, replaces the message of a name that is too long.
func validateDNS1035(value string, p *field.Path, tooLong string) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var allErrs field.ErrorList
	for _, msg := range validation.IsDNS1035Label(value) {
		if tooLong != "" && strings.Contains(msg, dnsLabelTooLongMsg) {
			msg = tooLong
		}
		allErrs = append(allErrs, field.Invalid(p, value, msg))
	}
	return allErrs
}

func isIndexed(spec *batchv1.JobSpec) bool {
	return spec.CompletionMode != nil && *spec.CompletionMode == batchv1.IndexedCompletion
}
