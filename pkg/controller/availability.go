package controller

import (
	"context"
	"encoding/json"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// trackAvailability advances the JobSet's availability state (interruption.go)
// after the sync's status write and persists it in the JobSet's
// annotations. stored is the JobSet as the server holds it after that
// write (its status is the new one). The samples of a transition are
// observed only once the annotation write succeeded: it carries
// stored's resourceVersion, so a sync working from a stale copy gets a
// conflict and cannot record the same transition twice.
func (c *Controller) trackAvailability(ctx context.Context, key string, stored *jobset.JobSet, jobs *childJobs, now time.Time) error {
	prev := availabilityFromAnnotations(stored.Annotations)
	next, samples := nextAvailability(prev, observeAvailability(stored, jobs), now)
	changes := availabilityPatch(stored.Annotations, next.annotations())
	if len(changes) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": stored.ResourceVersion,
		"uid":             string(stored.UID),
		"annotations":     changes,
	}})
	if err != nil {
		return wrapf(err, "encoding the availability annotations")
	}
	_, err = c.jsClient.JobsetV1alpha2().JobSets(stored.Namespace).Patch(ctx, stored.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: "jobset-controller"})
	switch {
	case apierrors.IsConflict(err):
		return errConflict
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return wrapf(err, "writing the availability annotations")
	}
	c.exp.wroteAvailability(key, stored.UID, next.annotations())
	if samples.empty() {
		return nil
	}
	if d := samples.TimeToRecover; d != nil {
		c.metrics.Recovered(stored, *d)
	}
	if d := samples.TimeBetweenInterruptions; d != nil {
		c.metrics.Interrupted(stored, *d)
	}
	return nil
}

// observeAvailability derives what the state machine needs from a JobSet
// carrying its new status and the Jobs this sync saw.
func observeAvailability(js *jobset.JobSet, jobs *childJobs) availabilityObservation {
	obs := availabilityObservation{
		Phase:      phaseRunning,
		Generation: js.Generation,
	}
	switch {
	case conditionTrue(js.Status.Conditions, string(jobset.JobSetCompleted)):
		obs.Phase = phaseCompleted
	case conditionTrue(js.Status.Conditions, string(jobset.JobSetFailed)):
		obs.Phase = phaseFailed
	case ptr.Deref(js.Spec.Suspend, false):
		obs.Phase = phaseSuspended
	}
	obs.Available = allJobsReady(js) && !conditionTrue(js.Status.Conditions, conditionRestartingJobSet)
	obs.Disrupted = disrupted(js, jobs)
	return obs
}

// disrupted reports a failure or restart under way: a whole-set restart
// not yet recovered, a failed Job, Jobs of a superseded attempt, or a Job
// whose pods failed and that is not ready.
func disrupted(js *jobset.JobSet, jobs *childJobs) bool {
	if conditionTrue(js.Status.Conditions, conditionRestartingJobSet) || len(jobs.failed) > 0 || len(jobs.previous) > 0 {
		return true
	}
	for _, s := range js.Status.ReplicatedJobsStatus {
		if s.Failed > 0 {
			return true
		}
	}
	for _, j := range jobs.active {
		if j.Status.Failed > 0 && !jobReady(j) {
			return true
		}
	}
	return false
}
