package validation

import (
	"slices"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

// maxJobRestartsItems bounds jobRestarts and jobRestartsCountTowardsMax, as
// upstream's schema does; it is also the most replicas a JobSet with a
// RestartJob rule may have.
const maxJobRestartsItems = maxReplicasWithJobRestart

// supportedTerminalStates are the values of status.terminalState; empty
// means the JobSet has not finished.
var supportedTerminalStates = []string{"", string(jobset.JobSetCompleted), string(jobset.JobSetFailed)}

// ValidateJobSetStatusUpdate validates a write to the status subresource.
func ValidateJobSetStatusUpdate(newJS, oldJS *jobset.JobSet) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMetaUpdate(&newJS.ObjectMeta, &oldJS.ObjectMeta, field.NewPath("metadata"))

	status := &newJS.Status
	p := field.NewPath("status")
	nonNegative := func(value int32, fp *field.Path) {
		allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(value), fp)...)
	}
	nonNegative(status.Restarts, p.Child("restarts"))
	nonNegative(status.RestartsCountTowardsMax, p.Child("restartsCountTowardsMax"))
	if a := status.ExecutionAttempts; a != nil {
		nonNegative(*a, p.Child("executionAttempts"))
	}
	if a := status.PreviousInPlaceRestartAttempt; a != nil {
		nonNegative(*a, p.Child("previousInPlaceRestartAttempt"))
	}
	if a := status.CurrentInPlaceRestartAttempt; a != nil {
		nonNegative(*a, p.Child("currentInPlaceRestartAttempt"))
	}
	allErrs = append(allErrs, metav1validation.ValidateConditions(status.Conditions, p.Child("conditions"))...)

	for _, rev := range []struct {
		name string
		path *field.Path
	}{{status.CurrentRevision, p.Child("currentRevision")}, {status.UpdateRevision, p.Child("updateRevision")}} {
		if rev.name == "" {
			continue
		}
		for _, msg := range validation.IsDNS1123Subdomain(rev.name) {
			allErrs = append(allErrs, field.Invalid(rev.path, rev.name, msg))
		}
	}

	if !slices.Contains(supportedTerminalStates, status.TerminalState) {
		allErrs = append(allErrs, field.NotSupported(p.Child("terminalState"), status.TerminalState, supportedTerminalStates))
	}

	known := newSpecView(newJS)
	seen := sets.New[string]()
	for i := range status.ReplicatedJobsStatus {
		rs := &status.ReplicatedJobsStatus[i]
		rp := p.Child("replicatedJobsStatus").Index(i)
		namePath := rp.Child("name")
		switch _, exists := known.rjIndex[rs.Name]; {
		case rs.Name == "":
			allErrs = append(allErrs, field.Required(namePath, ""))
		case seen.Has(rs.Name):
			allErrs = append(allErrs, field.Duplicate(namePath, rs.Name))
		case !exists:
			allErrs = append(allErrs, field.NotSupported(namePath, rs.Name, known.rjNames))
		}
		seen.Insert(rs.Name)

		nonNegative(rs.Ready, rp.Child("ready"))
		nonNegative(rs.Succeeded, rp.Child("succeeded"))
		nonNegative(rs.Failed, rp.Child("failed"))
		nonNegative(rs.Active, rp.Child("active"))
		nonNegative(rs.Suspended, rp.Child("suspended"))
		if rs.ObservedParallelism != nil {
			nonNegative(*rs.ObservedParallelism, rp.Child("observedParallelism"))
		}
		if len(rs.JobRestarts) > maxJobRestartsItems {
			allErrs = append(allErrs, field.TooMany(rp.Child("jobRestarts"), len(rs.JobRestarts), maxJobRestartsItems))
		}
		if len(rs.JobRestartsCountTowardsMax) > maxJobRestartsItems {
			allErrs = append(allErrs, field.TooMany(rp.Child("jobRestartsCountTowardsMax"), len(rs.JobRestartsCountTowardsMax), maxJobRestartsItems))
		}
		for k, n := range rs.JobRestarts {
			nonNegative(n, rp.Child("jobRestarts").Index(k))
		}
		for k, n := range rs.JobRestartsCountTowardsMax {
			nonNegative(n, rp.Child("jobRestartsCountTowardsMax").Index(k))
		}
	}
	return allErrs
}
