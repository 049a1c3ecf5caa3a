package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller/cachedmeta"
	"github.com/nativejobset/jobset/pkg/podresources"
)

// A template revision is the set of replicatedJob templates a restart
// applies. Each one is stored as a ControllerRevision <jobset>-<hash> owned
// by the JobSet; status.updateRevision names the revision of the spec and
// status.currentRevision the one the current attempt's Jobs are built from.
// parallelism and completions are applied to running Jobs in place, so they
// are left out: a scale is not a template update.

// revisionTemplate is one replicatedJob's template as a revision stores it.
type revisionTemplate struct {
	Name     string                  `json:"name"`
	Template batchv1.JobTemplateSpec `json:"template"`
}

// revisionData is the content of a ControllerRevision's data.
type revisionData struct {
	ReplicatedJobs []revisionTemplate `json:"replicatedJobs"`
}

// revisionHashLength is the number of hex digits of a revision's name suffix.
const revisionHashLength = 10

// Event reasons and messages of template revisions.
const (
	reasonRevisionAccepted  = "TemplateRevisionAccepted"
	reasonRevisionRolledOut = "TemplateRevisionRolledOut"
	reasonRevisionFailed    = "TemplateRevisionFailed"

	// Condition UpdatePending.
	reasonUpdatePending    = "TemplateUpdatePending"
	reasonUpdateRolledOut  = "TemplateUpdateRolledOut"
	reasonUpdateRestarting = "TemplateUpdate"
)

// templatesOf returns the revision data of a spec.
func templatesOf(js *jobset.JobSet) revisionData {
	out := revisionData{ReplicatedJobs: make([]revisionTemplate, len(js.Spec.ReplicatedJobs))}
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		t := rj.Template.DeepCopy()
		t.Spec.Parallelism, t.Spec.Completions = nil, nil
		out.ReplicatedJobs[i] = revisionTemplate{Name: rj.Name, Template: *t}
	}
	return out
}

// encode returns the canonical JSON of the data (encoding/json sorts map
// keys and follows the struct field order) and its hash.
func (d revisionData) encode() ([]byte, string, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(raw)
	return raw, hex.EncodeToString(sum[:])[:revisionHashLength], nil
}

func (d revisionData) template(name string) *batchv1.JobTemplateSpec {
	for i := range d.ReplicatedJobs {
		if d.ReplicatedJobs[i].Name == name {
			return &d.ReplicatedJobs[i].Template
		}
	}
	return nil
}

// revisionName is the ControllerRevision name of a hash.
func revisionName(js *jobset.JobSet, hash string) string {
	return js.Name + "-" + hash
}

// updateStrategy of a JobSet; an absent policy means Never.
func updateStrategy(js *jobset.JobSet) jobset.UpdateStrategy {
	if js.Spec.UpdatePolicy == nil || js.Spec.UpdatePolicy.UpdateStrategy == "" {
		return jobset.UpdateNever
	}
	return js.Spec.UpdatePolicy.UpdateStrategy
}

func revisionHistoryLimit(js *jobset.JobSet) int {
	if js.Spec.UpdatePolicy == nil || js.Spec.UpdatePolicy.RevisionHistoryLimit == nil {
		return int(jobset.DefaultRevisionHistoryLimit)
	}
	return int(max(*js.Spec.UpdatePolicy.RevisionHistoryLimit, 0))
}

// revisions is what one sync knows about a JobSet's template revisions.
type revisions struct {
	// current holds the templates of status.currentRevision; nil when they
	// are the spec's or could not be read.
	current *revisionData
	// update holds the spec's templates.
	update revisionData
}

// syncRevisions records the spec's templates as a revision, sets
// status.updateRevision (and currentRevision when nothing ran yet), prunes
// the history and loads the current revision's templates.
func (c *Controller) syncRevisions(ctx context.Context, s *syncState, jobs *childJobs) (*revisions, error) {
	js := s.js
	if ptr.Deref(js.Spec.Suspend, false) && !hasRun(js, jobs) {
		// Queued and never admitted: the revision is recorded at the
		// first resume, so that a queued JobSet stays one object.
		return nil, nil
	}
	revs := &revisions{update: templatesOf(js)}
	raw, hash, err := revs.update.encode()
	if err != nil {
		return revs, wrapf(err, "encoding the templates")
	}
	updateName := revisionName(js, hash)
	owned, err := c.ownedRevisions(js)
	if err != nil {
		return revs, err
	}
	st := &js.Status
	if st.UpdateRevision == "" && len(owned) == 0 {
		// The JobSet's first revision: its Jobs are built from the spec
		// and need not wait for it to be stored.
		ref := revisionOwner(js)
		s.beside.start(func() error {
			if err := c.ensureRevision(ctx, ref, updateName, raw, owned); err != nil {
				c.warn(ref, reasonRevisionFailed, err)
				return err
			}
			return nil
		})
	} else if err := c.ensureRevision(ctx, js, updateName, raw, owned); err != nil {
		c.warn(js, reasonRevisionFailed, err)
		return revs, err
	}

	if st.UpdateRevision != updateName {
		if st.UpdateRevision != "" {
			s.eventf("Normal", reasonRevisionAccepted, "template revision %s accepted (update strategy %s); the current Jobs use revision %s",
				updateName, updateStrategy(js), orNone(st.CurrentRevision))
		}
		st.UpdateRevision = updateName
	}
	if st.CurrentRevision == "" && hasRun(js, jobs) {
		// The status write that named the revision of the running Jobs
		// may have been lost; their annotation still names it.
		st.CurrentRevision = revisionOfJobs(jobs, owned)
	}
	if st.CurrentRevision == "" || !hasRun(js, jobs) {
		// Nothing runs from an older template: adopt the spec's at once.
		st.CurrentRevision = updateName
	}

	if st.CurrentRevision != st.UpdateRevision {
		cr := owned[st.CurrentRevision]
		var raw []byte
		if cr != nil {
			if raw, err = c.revisionData(ctx, cr); err != nil {
				return revs, wrapf(err, "reading template revision %s", cr.Name)
			}
		}
		var data revisionData
		if raw == nil {
			klog.FromContext(ctx).Info("Current template revision not found; building Jobs from the spec", "revision", st.CurrentRevision)
		} else if err := json.Unmarshal(raw, &data); err != nil {
			klog.FromContext(ctx).Error(err, "Unreadable template revision; building Jobs from the spec", "revision", cr.Name)
		} else {
			revs.current = &data
		}
	}
	if err := c.pruneRevisions(ctx, js, owned); err != nil {
		return revs, err
	}
	return revs, nil
}

// revisionData returns the data of a cached revision, nil if it is gone.
// The revision cache holds no data (trimObject): it is read from the API
// server, once per revision since a revision's data cannot change, and
// only while a template update is pending.
func (c *Controller) revisionData(ctx context.Context, cr *appsv1.ControllerRevision) ([]byte, error) {
	if raw := cr.Data.Raw; raw != nil {
		return raw, nil
	}
	if raw, ok := c.revData.Load(cr.UID); ok {
		return raw.([]byte), nil
	}
	full, err := c.kube.AppsV1().ControllerRevisions(cr.Namespace).Get(ctx, cr.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && full.UID != cr.UID) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	raw := full.Data.Raw
	if raw == nil {
		raw = []byte{}
	}
	c.revData.Store(cr.UID, raw)
	return raw, nil
}

// forgetRevisionData drops the remembered data of a deleted revision.
func (c *Controller) forgetRevisionData(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if cr, ok := cachedmeta.RevisionOf(obj); ok {
		c.revData.Delete(cr.UID)
	}
}

// revisionOwner is a shallow copy of the JobSet's metadata and status, for a
// revision write running beside the sync (which goes on changing its own
// copy's status).
func revisionOwner(js *jobset.JobSet) *jobset.JobSet {
	return &jobset.JobSet{TypeMeta: js.TypeMeta, ObjectMeta: js.ObjectMeta, Status: js.Status}
}

// revisionOfJobs returns the template revision the current attempt's Jobs
// are annotated with, if it is one of the JobSet's revisions.
func revisionOfJobs(jobs *childJobs, owned map[string]*appsv1.ControllerRevision) string {
	for _, j := range jobs.current() {
		if rev := j.Annotations[jobset.TemplateRevisionKey]; owned[rev] != nil {
			return rev
		}
	}
	return ""
}

func orNone(name string) string {
	if name == "" {
		return "<none>"
	}
	return name
}

// ownedRevisions lists the cached ControllerRevisions the JobSet controls,
// by name.
func (c *Controller) ownedRevisions(js *jobset.JobSet) (map[string]*appsv1.ControllerRevision, error) {
	list, err := c.revs.ByIndex(byJobSet, js.Namespace+"/"+js.Name)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*appsv1.ControllerRevision, len(list))
	for _, o := range list {
		if cr, ok := cachedmeta.RevisionOf(o); ok && isOwnedBy(cr.OwnerReferences, js) {
			out[cr.Name] = cr
		}
	}
	return out, nil
}

func maxRevisionNumber(owned map[string]*appsv1.ControllerRevision) int64 {
	var n int64
	for _, cr := range owned {
		n = max(n, cr.Revision)
	}
	return n
}

// constructRevision builds the ControllerRevision name of the JobSet.
func constructRevision(js *jobset.JobSet, name string, raw []byte, number int64) *appsv1.ControllerRevision {
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       js.Namespace,
			Labels:          map[string]string{jobset.JobSetNameKey: js.Name},
			OwnerReferences: []metav1.OwnerReference{ownerRef(js)},
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: number,
	}
}

// ensureRevision creates the ControllerRevision name with the given data, or
// makes an existing one the newest of the history (a rollback to an older
// template reuses that template's revision).
func (c *Controller) ensureRevision(ctx context.Context, js *jobset.JobSet, name string, raw []byte, owned map[string]*appsv1.ControllerRevision) error {
	api := c.kube.AppsV1().ControllerRevisions(js.Namespace)
	newest := maxRevisionNumber(owned)
	if cr := owned[name]; cr != nil {
		if cr.Revision == newest || js.Status.UpdateRevision == name {
			return nil
		}
		patch := fmt.Sprintf(`{"revision":%d}`, newest+1)
		_, err := api.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			return nil // deleted meanwhile; the next sync creates it again
		}
		return wrapf(err, "renumbering template revision %s", name)
	}
	if c.exp.revisions.Has(js.Namespace, name) {
		return nil // created by an earlier sync; the cache is behind
	}
	_, err := api.Create(ctx, constructRevision(js, name, raw, newest+1), metav1.CreateOptions{})
	switch {
	case err == nil:
		c.exp.revisions.Expect(js.Namespace, name, struct{}{})
		return nil
	case namespaceTerminating(err):
		return nil
	case apierrors.IsAlreadyExists(err):
		// Either the cache is behind or another object holds the name
		// (the revision of a deleted JobSet of the same name, which the
		// garbage collector removes).
		existing, getErr := api.Get(ctx, name, metav1.GetOptions{})
		if getErr != nil {
			return wrapf(getErr, "reading template revision %s", name)
		}
		if !isOwnedBy(existing.OwnerReferences, js) {
			return fmt.Errorf("template revision %s exists and belongs to another object", name)
		}
		return nil
	default:
		return wrapf(err, "creating template revision %s", name)
	}
}

// pruneRevisions deletes the oldest revisions beyond the history limit,
// never the current or the update revision.
func (c *Controller) pruneRevisions(ctx context.Context, js *jobset.JobSet, owned map[string]*appsv1.ControllerRevision) error {
	live := map[string]bool{js.Status.CurrentRevision: true, js.Status.UpdateRevision: true}
	var old []*appsv1.ControllerRevision
	keep := revisionHistoryLimit(js)
	for name, cr := range owned {
		if live[name] {
			keep--
			continue
		}
		if cr.DeletionTimestamp == nil {
			old = append(old, cr)
		}
	}
	// The update revision may not be in the cache yet.
	if owned[js.Status.UpdateRevision] == nil {
		keep--
	}
	if len(old) <= max(keep, 0) {
		return nil
	}
	sort.Slice(old, func(i, j int) bool {
		if old[i].Revision != old[j].Revision {
			return old[i].Revision < old[j].Revision
		}
		return old[i].Name < old[j].Name
	})
	var errs []error
	for _, cr := range old[:len(old)-max(keep, 0)] {
		uid := cr.UID
		err := c.kube.AppsV1().ControllerRevisions(js.Namespace).Delete(ctx, cr.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, wrapf(err, "deleting template revision %s", cr.Name))
		}
	}
	return errors.Join(errs...)
}

// buildView returns the JobSet whose templates new Jobs of the current
// attempt are built from: the current revision's templates with the spec's
// parallelism and completions. A Job recreated under a pending update thus
// keeps the template of its attempt.
func (r *revisions) buildView(js *jobset.JobSet) *jobset.JobSet {
	if r == nil || r.current == nil || js.Status.CurrentRevision == js.Status.UpdateRevision {
		// Up to date, or rolled out earlier in this sync.
		return js
	}
	view := *js
	view.Spec.ReplicatedJobs = make([]jobset.ReplicatedJob, len(js.Spec.ReplicatedJobs))
	for i := range js.Spec.ReplicatedJobs {
		rj := js.Spec.ReplicatedJobs[i]
		if t := r.current.template(rj.Name); t != nil {
			spec := rj.Template.Spec
			rj.Template = *t.DeepCopy()
			rj.Template.Spec.Parallelism, rj.Template.Spec.Completions = spec.Parallelism, spec.Completions
		}
		view.Spec.ReplicatedJobs[i] = rj
	}
	return &view
}

// onlyResumeEdits reports whether the pending templates differ from the
// current ones only in the pod scheduling fields a resume merges into the
// suspended Jobs (labels, annotations, nodeSelector, tolerations,
// schedulingGates), so the Jobs can be resumed rather than recreated.
func (r *revisions) onlyResumeEdits() bool {
	if r == nil || r.current == nil || len(r.current.ReplicatedJobs) != len(r.update.ReplicatedJobs) {
		return false
	}
	for i := range r.update.ReplicatedJobs {
		cur, upd := &r.current.ReplicatedJobs[i], r.update.ReplicatedJobs[i]
		if cur.Name != upd.Name {
			return false
		}
		t := upd.Template.DeepCopy()
		pod, curPod := &t.Spec.Template, &cur.Template.Spec.Template
		pod.Labels, pod.Annotations = curPod.Labels, curPod.Annotations
		pod.Spec.NodeSelector, pod.Spec.Tolerations, pod.Spec.SchedulingGates = curPod.Spec.NodeSelector, curPod.Spec.Tolerations, curPod.Spec.SchedulingGates
		podresources.Copy(pod.Spec.InitContainers, curPod.Spec.InitContainers)
		podresources.Copy(pod.Spec.Containers, curPod.Spec.Containers)
		if !apiequality.Semantic.DeepEqual(*t, cur.Template) {
			return false
		}
	}
	return true
}

// rollOut makes the pending revision current; it is called when a
// whole-JobSet restart or a resume starts a new attempt.
func (s *syncState) rollOut() {
	st := &s.js.Status
	if st.CurrentRevision == st.UpdateRevision || st.UpdateRevision == "" {
		return
	}
	s.eventf("Normal", reasonRevisionRolledOut, "new Jobs are built from template revision %s (was %s)", st.UpdateRevision, orNone(st.CurrentRevision))
	st.CurrentRevision = st.UpdateRevision
}

// adoptOnResume applies a pending update when a suspended JobSet resumes.
// Scheduling edits (Kueue's) are merged into the suspended Jobs; any other
// edit restarts the JobSet, without counting toward maxRestarts, so that
// every Job is recreated from the new templates. It reports whether a
// restart was started.
func (s *syncState) adoptOnResume(revs *revisions, jobs *childJobs, now metav1.Time) bool {
	st := &s.js.Status
	if st.CurrentRevision == st.UpdateRevision {
		return false
	}
	if len(jobs.current()) == 0 || revs.onlyResumeEdits() {
		s.rollOut()
		return false
	}
	// The resume already counted a new execution attempt.
	s.restartForUpdate("resuming with template revision "+st.UpdateRevision, false, now)
	return true
}

// startImmediateUpdate restarts a running JobSet whose update strategy is
// Immediate as soon as a template update is pending. It reports whether a
// restart was started.
func (s *syncState) startImmediateUpdate(jobs *childJobs, now metav1.Time) bool {
	st := &s.js.Status
	if updateStrategy(s.js) != jobset.UpdateImmediate || st.CurrentRevision == st.UpdateRevision {
		return false
	}
	if len(jobs.current()) == 0 {
		// No Job of the current attempt exists yet (say, a restart is
		// still replacing them): the next ones are simply built from the
		// new templates.
		s.rollOut()
		return false
	}
	s.restartForUpdate("update strategy Immediate: applying template revision "+st.UpdateRevision, true, now)
	return true
}

// restartForUpdate starts a whole-JobSet restart that applies the pending
// template revision. It does not count toward maxRestarts.
func (s *syncState) restartForUpdate(why string, newAttempt bool, now metav1.Time) {
	st := &s.js.Status
	msg := fmt.Sprintf("%s (was %s); not counted toward maxRestarts", why, orNone(st.CurrentRevision))
	st.Restarts++
	if newAttempt {
		s.newExecutionAttempt(RestartReasonUpdate)
	}
	js := s.js
	s.record(func(m Metrics) { m.Restarted(js, RestartReasonUpdate) })
	s.setCondition(conditionRestartingJobSet, metav1.ConditionTrue, reasonUpdateRestarting, msg, "Normal", now)
	s.restartStartup(now)
}

// setUpdatePending keeps the UpdatePending condition in line with the two
// revisions.
func (s *syncState) setUpdatePending(now metav1.Time) {
	st := &s.js.Status
	if st.UpdateRevision == "" {
		return
	}
	if st.CurrentRevision != st.UpdateRevision {
		msg := fmt.Sprintf("template revision %s is pending; the current Jobs use revision %s", st.UpdateRevision, orNone(st.CurrentRevision))
		s.putCondition(string(jobset.JobSetUpdatePending), metav1.ConditionTrue, reasonUpdatePending, msg, now)
		return
	}
	msg := fmt.Sprintf("the current Jobs use template revision %s", st.CurrentRevision)
	s.putCondition(string(jobset.JobSetUpdatePending), metav1.ConditionFalse, reasonUpdateRolledOut, msg, now)
}
