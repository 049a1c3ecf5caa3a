package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	batchv1 "k8s.io/api/batch/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// staleRetry is how soon a JobSet is looked at again when its cached status
// is older than its Jobs.
const staleRetry = time.Second

// reconcile drives one JobSet one step toward its desired state and writes
// its status at most once.
func (c *Controller) reconcile(ctx context.Context, key string, cached *jobset.JobSet, owned map[string]*batchv1.Job) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	list := make([]*batchv1.Job, 0, len(owned))
	for _, j := range owned {
		list = append(list, j)
	}
	jobs := classifyJobs(cached, list)
	if jobs.staleJobSet || !c.exp.statusCurrent(key, cached.UID, &cached.Status) ||
		!c.exp.availabilityCurrent(key, cached.UID, cached.Annotations) {
		logger.V(2).Info("JobSet cache older than its Jobs; retrying")
		return staleRetry, nil
	}

	now := metav1.NewTime(c.clock.Now())
	s := &syncState{js: cached.DeepCopy()}
	js := s.js
	js.Status.ReplicatedJobsStatus = computeReplicatedJobsStatus(js, jobs)

	var requeue time.Duration
	var stepErr error
	switch {
	case finished(js):
		stepErr = c.deleteJobs(ctx, key, js, jobs.active)
		if stepErr == nil {
			requeue, stepErr = c.executeTTL(ctx, js)
		}
	default:
		revs, revErr := c.syncRevisions(ctx, s, jobs)
		requeue, stepErr = c.reconcileRunning(ctx, key, s, jobs, revs, now)
		stepErr = errors.Join(stepErr, c.syncInPlaceRestart(s, cached.Status.Restarts, now))
		stepErr = errors.Join(stepErr, revErr, s.beside.wait())
		if !finished(js) {
			if js.Status.Restarts != cached.Status.Restarts {
				// A whole-JobSet restart adopts the pending templates.
				s.rollOut()
			}
			s.setUpdatePending(now)
		}
	}

	stored, held, err := c.writeStatus(ctx, key, cached, s)
	if err != nil {
		return 0, err
	}
	if held > 0 && (requeue == 0 || held < requeue) {
		requeue = held
	}
	var trackErr error
	if stored != nil {
		trackErr = c.trackAvailability(ctx, key, stored, jobs, now.Time)
	}
	if stepErr != nil {
		return 0, errors.Join(stepErr, trackErr)
	}
	if !finished(js) && restartDecided(&cached.Status, &js.Status) {
		// A restart decided in this sync is stored: start deleting the
		// superseded Jobs now rather than one round trip later.
		if err := c.deletePrevious(ctx, key, js, classifyJobs(js, list).previous); err != nil {
			return 0, err
		}
	}
	if trackErr != nil {
		return 0, trackErr
	}
	if finished(js) && !finished(cached) {
		// Delete the remaining active Jobs in the next pass.
		return time.Millisecond, nil
	}
	return requeue, nil
}

// restartDecided reports whether the new status starts a whole-set or a
// per-Job restart.
func restartDecided(old, cur *jobset.JobSetStatus) bool {
	if old.Restarts != cur.Restarts {
		return true
	}
	for _, s := range cur.ReplicatedJobsStatus {
		prev := rjStatus(old, s.Name)
		if !apiequality.Semantic.DeepEqual(prev.JobRestarts, s.JobRestarts) {
			return true
		}
	}
	return false
}

// reconcileRunning handles a JobSet that has neither completed nor failed.
func (c *Controller) reconcileRunning(ctx context.Context, key string, s *syncState, jobs *childJobs, revs *revisions, now metav1.Time) (time.Duration, error) {
	js := s.js

	// Jobs of superseded attempts go first.
	if err := c.deletePrevious(ctx, key, js, jobs.previous); err != nil {
		return 0, err
	}

	if len(jobs.failed) > 0 {
		c.executeFailurePolicy(s, jobs.failed, now)
		return 0, nil
	}
	if len(jobs.successful) > 0 && successPolicyMet(js, jobs.successful) {
		s.setCompleted(now)
		s.record(func(m Metrics) { m.Completed(js) })
		return 0, nil
	}

	suspended := ptr.Deref(js.Spec.Suspend, false)
	if suspended && !hasRun(js, jobs) {
		// Queued and never admitted: no children until the first resume.
		s.setCondition(string(jobset.JobSetSuspended), metav1.ConditionTrue, reasonSuspended, messageSuspended, "Normal", now)
		return 0, nil
	}
	if !suspended && conditionTrue(js.Status.Conditions, string(jobset.JobSetSuspended)) {
		if hasRun(js, jobs) {
			s.newExecutionAttempt(RestartReasonResume)
		}
		s.setCondition(string(jobset.JobSetSuspended), metav1.ConditionFalse, reasonResumed, messageResumed, "Normal", now)
		if s.adoptOnResume(revs, jobs, now) {
			return 0, nil
		}
	}
	if !suspended && js.Status.ExecutionAttempts == nil {
		// The first run: executionAttempts is 0 during it (KEP-1282).
		js.Status.ExecutionAttempts = ptr.To[int32](0)
	}
	if !suspended && s.startImmediateUpdate(jobs, now) {
		return 0, nil
	}

	var errs []error
	if err := c.ensureClaims(ctx, js); err != nil {
		errs = append(errs, err)
	}
	// The Service only names the pods; the Jobs need not wait for it.
	// It reads a shallow copy: the sync goes on changing js's status.
	svcOwner := &jobset.JobSet{TypeMeta: js.TypeMeta, ObjectMeta: js.ObjectMeta, Spec: js.Spec}
	s.beside.start(func() error { return c.ensureHeadlessService(ctx, svcOwner) })
	if err := c.deleteJobs(ctx, key, js, excessJobs(js, jobs)); err != nil {
		errs = append(errs, err)
	}
	requeue, err := c.createJobs(ctx, key, revs.buildView(js), jobs, suspended)
	if err != nil {
		errs = append(errs, err)
	}
	if err := c.patchElastic(ctx, js, jobs.active); err != nil {
		errs = append(errs, err)
	}
	if suspended {
		if err := c.suspendJobs(ctx, s, jobs.active, now); err != nil {
			errs = append(errs, err)
		}
	} else {
		if err := c.resumeJobs(ctx, js, jobs.active); err != nil {
			errs = append(errs, err)
		}
		s.updateStartupConditions(now)
		c.updatePlacementCondition(s, key, now)
		if allJobsReady(js) {
			s.endRestarting(reasonRestartingJobsReady, messageRestartingJobsReady, now)
		}
	}
	return requeue, errors.Join(errs...)
}

// writeStatus persists the new status with one write when it changed, and
// emits the sync's events once it is stored. It returns the JobSet as
// stored (cached when nothing was written), nil when it is gone. A change
// of counters only may be held (statusPacer): it then returns the cached
// JobSet with the new status, and how soon to sync again to write it.
func (c *Controller) writeStatus(ctx context.Context, key string, cached *jobset.JobSet, s *syncState) (*jobset.JobSet, time.Duration, error) {
	if apiequality.Semantic.DeepEqual(cached.Status, s.js.Status) {
		c.emit(s.js, s.events)
		return cached, 0, nil
	}
	if len(s.events) == 0 && len(s.recorded) == 0 && countersOnly(&cached.Status, &s.js.Status) {
		if wait := c.pacer.hold(key); wait > 0 {
			pending := *cached
			pending.Status = s.js.Status
			return &pending, wait, nil
		}
	}
	patch, err := statusPatch(cached, s.js)
	if err != nil {
		return nil, 0, wrapf(err, "computing the status patch")
	}
	stored, err := c.jsClient.JobsetV1alpha2().JobSets(s.js.Namespace).Patch(ctx, s.js.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: "jobset-controller"}, "status")
	if apierrors.IsConflict(err) {
		return nil, 0, errConflict
	}
	if apierrors.IsNotFound(err) {
		return nil, 0, nil // deleted meanwhile (e.g. by its TTL)
	}
	if err != nil {
		return nil, 0, wrapf(err, "updating status")
	}
	c.pacer.wrote(key)
	c.exp.wroteStatus(key, s.js.UID, &s.js.Status)
	c.emit(s.js, s.events)
	for _, fn := range s.recorded {
		fn(c.metrics)
	}
	return stored, 0, nil
}

// excessJobs returns current Jobs no longer described by the spec: indices
// at or above a lowered replicas, and Jobs of unknown replicatedJobs.
func excessJobs(js *jobset.JobSet, jobs *childJobs) []*batchv1.Job {
	var out []*batchv1.Job
	for _, job := range jobs.current() {
		rj := replicatedJobByName(js, job.Labels[jobset.ReplicatedJobNameKey])
		idx, ok := labelInt(job, jobset.JobIndexKey)
		if rj == nil || !ok || idx >= replicasOf(rj) {
			out = append(out, job)
		}
	}
	// Highest indices first.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// createJobs creates the missing Jobs of the current attempt that the
// startup order allows, in parallel. It returns when to look again for a
// Job held back by a running pod of an earlier attempt.
func (c *Controller) createJobs(ctx context.Context, key string, js *jobset.JobSet, jobs *childJobs, suspended bool) (time.Duration, error) {
	blocking := js.Spec.FailurePolicy != nil && js.Spec.FailurePolicy.RestartStrategy == jobset.BlockingRecreate
	if blocking && (len(jobs.previous) > 0 || hasOlderAttempt(js, jobs.deleting)) {
		return 0, nil
	}
	// The Jobs are built only once their names are clear: a restart's
	// wait syncs its JobSet on every old pod that ends.
	var pending []jobToCreate
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		if (suspended && !mayCreateSuspended(js, i)) || (!suspended && !mayStart(js, i)) {
			continue
		}
		for idx := 0; idx < int(replicasOf(rj)); idx++ {
			name := jobName(js.Name, rj.Name, idx)
			if _, exists := jobs.byName[name]; exists {
				continue // current, or a predecessor still going away
			}
			pending = append(pending, jobToCreate{name: name, rj: rj, idx: idx, attempt: jobAttempt{
				restarts:    js.Status.Restarts,
				jobRestarts: jobRestartsFor(&js.Status, rj.Name, int32(idx)),
			}})
		}
	}
	if len(pending) == 0 {
		return 0, nil
	}
	var requeue time.Duration
	if !firstAttempt(js) {
		// Earlier Jobs of these names may have left running pods.
		var held bool
		var err error
		if pending, held, err = c.withoutRunningPredecessors(ctx, key, js, pending); err != nil {
			return 0, err
		}
		if held {
			requeue = oldPodRetry(js, c.clock.Now())
		}
		if len(pending) == 0 {
			return requeue, nil
		}
	}
	layout := newIndexLayout(js)
	want := make([]*batchv1.Job, len(pending))
	for i, p := range pending {
		want[i] = constructJob(js, layout, p.rj, p.idx, jobParams{
			restarts:         p.attempt.restarts,
			jobRestarts:      p.attempt.jobRestarts,
			executionAttempt: ptr.Deref(js.Status.ExecutionAttempts, 0),
			templateRevision: js.Status.CurrentRevision,
			suspend:          suspended,
			priority:         c.priorityOf(ctx, p.rj),
		})
	}
	var mu sync.Mutex
	var errs []error
	created := 0
	createdNames := map[string]bool{}
	c.parallel(len(want), func(i int) {
		job := want[i]
		got, err := c.kube.BatchV1().Jobs(js.Namespace).Create(ctx, job, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = c.foreignJob(ctx, js, job.Name, err)
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			created++
			createdNames[job.Name] = true
			c.exp.expectCreate(key, job.Name, got.UID)
		case namespaceTerminating(err):
			// Nothing can be created any more; the JobSet goes too.
		case apierrors.IsAlreadyExists(err):
			// The cache is behind: the Job's event requeues the JobSet.
			klog.FromContext(ctx).V(2).Info("Job already exists", "job", job.Name)
		default:
			errs = append(errs, wrapf(err, "creating Job %s", job.Name))
		}
	})
	if created > 0 {
		c.metrics.JobsCreated(js, created)
		klog.FromContext(ctx).V(2).Info("Created Jobs", "count", created)
	}
	if err := errors.Join(errs...); err != nil {
		c.warn(js, reasonJobCreationFailed, err)
		return 0, err
	}
	if created > 0 {
		c.observeJobCreation(key, js, jobs, createdNames)
	}
	return requeue, nil
}

// jobToCreate is a Job of the current attempt that the cache does not
// show, before it is built.
type jobToCreate struct {
	name    string
	rj      *jobset.ReplicatedJob
	idx     int
	attempt jobAttempt
}

// withoutRunningPredecessors drops from pending the Jobs whose names still
// have a running pod (runningPredecessors), and tells whether it did.
func (c *Controller) withoutRunningPredecessors(ctx context.Context, key string, js *jobset.JobSet, pending []jobToCreate) ([]jobToCreate, bool, error) {
	byName := make(map[string]jobAttempt, len(pending))
	for _, j := range pending {
		byName[j.name] = j.attempt
	}
	blocked, err := c.runningPredecessors(ctx, key, js, byName)
	if err != nil {
		return nil, false, err
	}
	out := make([]jobToCreate, 0, len(pending))
	for _, j := range pending {
		if !blocked[j.name] {
			out = append(out, j)
		}
	}
	if len(blocked) > 0 {
		klog.FromContext(ctx).V(2).Info("Waiting for pods of an earlier attempt to finish", "jobs", len(blocked))
	}
	return out, len(blocked) > 0, nil
}

// foreignJob looks at the Job that made a create fail with AlreadyExists.
// If this JobSet owns it (or it is gone), the cache was behind and err is
// returned unchanged; if something else holds the name, that is a creation
// failure, reported as upstream does (event JobCreationFailed) and retried.
func (c *Controller) foreignJob(ctx context.Context, js *jobset.JobSet, name string, err error) error {
	existing, getErr := c.kube.BatchV1().Jobs(js.Namespace).Get(ctx, name, metav1.GetOptions{})
	if getErr != nil || isOwnedBy(existing.OwnerReferences, js) {
		return err
	}
	return fmt.Errorf("the Job %s already exists and is not owned by JobSet %s", name, js.Name)
}

// hasOlderAttempt reports whether any Job being deleted belongs to an
// attempt before the current one.
func hasOlderAttempt(js *jobset.JobSet, deleting []*batchv1.Job) bool {
	for _, j := range deleting {
		if a, ok := labelInt(j, jobset.RestartsKey); !ok || a < js.Status.Restarts {
			return true
		}
	}
	return false
}

// deleteJobs deletes Jobs in the foreground, in parallel, and their pods
// right away. Foreground deletion keeps a Job's name taken until its pods
// are gone (so a Job of the next attempt, whose pods take the same
// hostnames, cannot start beside them); deleting the pods directly rather
// than leaving it to the garbage collector saves its pass over them, made
// at kube-controller-manager's client rate.
func (c *Controller) deleteJobs(ctx context.Context, key string, js *jobset.JobSet, jobs []*batchv1.Job) error {
	return c.deleteJobsWith(ctx, key, js, jobs, metav1.DeletePropagationForeground)
}

// deletePrevious deletes the Jobs of superseded attempts (restart_pods.go).
func (c *Controller) deletePrevious(ctx context.Context, key string, js *jobset.JobSet, jobs []*batchv1.Job) error {
	return c.deleteJobsWith(ctx, key, js, jobs, restartPropagation(js))
}

func (c *Controller) deleteJobsWith(ctx context.Context, key string, js *jobset.JobSet, jobs []*batchv1.Job, propagation metav1.DeletionPropagation) error {
	var todo []*batchv1.Job
	for _, j := range jobs {
		if j.DeletionTimestamp == nil && !c.exp.deletePending(key, j.Name, j.UID) {
			todo = append(todo, j)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	// A failed list leaves the pods to the garbage collector; the Jobs
	// are deleted all the same.
	pods, listErr := c.podsOf(ctx, js, todo)
	var mu sync.Mutex
	errs := []error{listErr}
	c.parallel(len(todo), func(i int) {
		job := todo[i]
		uid := job.UID
		opts := metav1.DeleteOptions{PropagationPolicy: ptr.To(propagation)}
		if uid != "" {
			opts.Preconditions = &metav1.Preconditions{UID: &uid}
		}
		err := c.kube.BatchV1().Jobs(job.Namespace).Delete(ctx, job.Name, opts)
		var podErr error
		if err == nil {
			podErr = c.deletePods(ctx, job.Namespace, pods[uid])
		}
		mu.Lock()
		defer mu.Unlock()
		if podErr != nil {
			errs = append(errs, wrapf(podErr, "deleting the pods of Job %s", job.Name))
		}
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, wrapf(err, "deleting Job %s", job.Name))
			return
		}
		c.exp.expectDelete(key, job.Name, uid)
	})
	return errors.Join(errs...)
}

// podRef names a pod to delete.
type podRef struct {
	name string
	uid  types.UID
}

// podPage is how many pods one page of the list in podsOf holds.
const podPage = 500

// podsOf returns the pods of the given Jobs that are not being deleted, by
// their Job's UID, from one paged list of the JobSet's pods, so that
// deleteJobsWith can delete each Job's pods right after it and their
// termination starts while the other Jobs are deleted. A deletecollection
// per Job did that with a list of its own per Job, and kube-apiserver
// deleted its pods one after another: at 2,000 Jobs it took three times
// as long as a delete. A pod the Job controller creates after the list is
// the garbage collector's, and runningPredecessors deletes it before a Job
// of its name is created again.
func (c *Controller) podsOf(ctx context.Context, js *jobset.JobSet, jobs []*batchv1.Job) (map[types.UID][]podRef, error) {
	want := make(map[types.UID]bool, len(jobs))
	for _, j := range jobs {
		if j.UID != "" {
			want[j.UID] = true
		}
	}
	out := map[types.UID][]podRef{}
	if len(want) == 0 {
		return out, nil
	}
	opts := metav1.ListOptions{
		LabelSelector: podsOfJobSet(js),
		Limit:         podPage,
	}
	for {
		list, err := c.listPods(ctx, js.Namespace, opts)
		if err != nil {
			return out, wrapf(err, "listing the pods of the Jobs to delete")
		}
		for i := range list.Items {
			p := &list.Items[i]
			if owner := metav1.GetControllerOfNoCopy(p); p.DeletionTimestamp == nil && owner != nil && want[owner.UID] {
				out[owner.UID] = append(out[owner.UID], podRef{name: p.Name, uid: p.UID})
			}
		}
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
}

// deletePods deletes pods one after another.
func (c *Controller) deletePods(ctx context.Context, namespace string, pods []podRef) error {
	var errs []error
	for _, p := range pods {
		if err := c.deletePod(ctx, namespace, p.name, p.uid); err != nil {
			errs = append(errs, wrapf(err, "pod %s", p.name))
		}
	}
	return errors.Join(errs...)
}

// deletePod deletes a pod with its own grace period; one that is gone or
// was replaced (another UID) counts as deleted.
func (c *Controller) deletePod(ctx context.Context, namespace, name string, uid types.UID) error {
	err := c.kube.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// podsOfJobSet selects the pods of a JobSet's Jobs (their template labels).
func podsOfJobSet(js *jobset.JobSet) string {
	return labels.SelectorFromSet(labels.Set{jobset.JobSetNameKey: js.Name}).String()
}

// patchElastic patches a changed parallelism or completions of the
// template into the running Jobs.
func (c *Controller) patchElastic(ctx context.Context, js *jobset.JobSet, active []*batchv1.Job) error {
	var errs []error
	for _, job := range active {
		rj := replicatedJobByName(js, job.Labels[jobset.ReplicatedJobNameKey])
		if rj == nil {
			continue
		}
		want := ptr.Deref(rj.Template.Spec.Parallelism, 1)
		resize := ptr.Deref(job.Spec.Parallelism, 1) != want
		recount := rj.Template.Spec.Completions != nil && job.Spec.Completions != nil && *rj.Template.Spec.Completions != *job.Spec.Completions
		if !resize && !recount {
			continue
		}
		spec := map[string]any{}
		if resize {
			spec["parallelism"] = want
		}
		if recount {
			spec["completions"] = *rj.Template.Spec.Completions
		}
		if err := c.patchJob(ctx, job, map[string]any{"spec": spec}); err != nil {
			errs = append(errs, wrapf(err, "resizing Job %s", job.Name))
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) patchJob(ctx context.Context, job *batchv1.Job, patch map[string]any) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = c.kube.BatchV1().Jobs(job.Namespace).Patch(ctx, job.Name, types.MergePatchType, data, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// parallel runs fn(0..n-1) with at most c.parallelism at once.
func (c *Controller) parallel(n int, fn func(i int)) {
	sem := make(chan struct{}, c.parallelism)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}(i)
	}
	wg.Wait()
}

// statusPatch is a JSON merge patch from the cached status to the new one.
// It carries the cached resourceVersion, so that a status computed from a
// stale cache is refused (409) rather than applied: restart and terminal
// decisions are then taken exactly once.
func statusPatch(cached, updated *jobset.JobSet) ([]byte, error) {
	type statusOnly struct {
		Status jobset.JobSetStatus `json:"status"`
	}
	before, err := json.Marshal(statusOnly{cached.Status})
	if err != nil {
		return nil, err
	}
	after, err := json.Marshal(statusOnly{updated.Status})
	if err != nil {
		return nil, err
	}
	patch, err := jsonpatch.CreateMergePatch(before, after)
	if err != nil {
		return nil, err
	}
	var fields map[string]any
	if err := json.Unmarshal(patch, &fields); err != nil {
		return nil, err
	}
	fields["metadata"] = map[string]any{"resourceVersion": cached.ResourceVersion, "uid": string(cached.UID)}
	return json.Marshal(fields)
}
