package migrate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// InvalidError lists the JobSets the native API would refuse.
type InvalidError struct {
	// Errors by "<namespace>/<name>".
	Errors map[string]field.ErrorList
}

func (e *InvalidError) Error() string {
	keys := make([]string, 0, len(e.Errors))
	for k := range e.Errors {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%d JobSet(s) do not fit the native API; nothing was changed:", len(keys))
	for _, k := range keys {
		for _, fe := range e.Errors[k] {
			fmt.Fprintf(&b, "\n  JobSet %s: %s", k, fe.Error())
		}
	}
	return b.String()
}

// errStopped ends a run early, on request.
var errStopped = errors.New("stopped")

type migrator struct {
	c Clients
	o Options
}

// Run migrates every JobSet. It is safe to run again after any failure or
// crash: each step looks at the cluster first.
func Run(ctx context.Context, c Clients, o Options) error {
	o.Defaults()
	if err := o.validate(); err != nil {
		return err
	}
	m := &migrator{c: c, o: o}
	err := m.run(ctx)
	if errors.Is(err, errStopped) {
		m.logf("stopped after step %s, as asked; run again without --stop-after to finish", o.StopAfter)
		return nil
	}
	return err
}

func (m *migrator) logf(format string, args ...any) {
	fmt.Fprintf(m.o.Out, format+"\n", args...)
}

// done ends the run after step when it was asked to stop there.
func (m *migrator) done(step string) error {
	if m.o.StopAfter == step {
		return errStopped
	}
	return nil
}

func (m *migrator) run(ctx context.Context) error {
	exists, deleting, err := m.crdState(ctx)
	if err != nil {
		return err
	}
	live := exists && !deleting
	var items, stale []*Item
	if live {
		if items, err = m.discover(ctx); err != nil {
			return err
		}
		if stale, err = staleBackups(m.o.BackupDir, items); err != nil {
			return err
		}
		// Refuse a missing upstream Deployment before changing anything.
		if _, err := m.upstreamDeployment(ctx); err != nil {
			return err
		}
	} else {
		if items, err = readBackups(m.o.BackupDir); err != nil {
			return err
		}
		if len(items) == 0 && !exists {
			m.logf("no CustomResourceDefinition %s and no backups in %s: nothing to migrate", m.o.CRDName, m.o.BackupDir)
			return nil
		}
	}
	if m.o.RegisterAPIService {
		// Refuse a registration that cannot work before changing anything.
		if _, err := m.desiredAPIService(); err != nil {
			return err
		}
	}
	if m.o.DryRun {
		return m.printPlan(items, stale, live, exists)
	}
	if err := m.setAsideStale(stale); err != nil {
		return err
	}
	if err := m.done(StepValidated); err != nil {
		return err
	}

	if live {
		if err := m.deleteWebhooks(ctx); err != nil {
			return err
		}
		if err := m.stopUpstream(ctx); err != nil {
			return err
		}
		if err := m.done(StepUpstreamOff); err != nil {
			return err
		}
		if items, err = m.moveFrozen(ctx); err != nil {
			return err
		}
	} else if err := m.resume(ctx, items, exists); err != nil {
		return err
	}
	if err := m.done(StepCRDDeleted); err != nil {
		return err
	}

	if err := m.ensureAPIService(ctx); err != nil {
		return err
	}
	if err := m.done(StepAPIService); err != nil {
		return err
	}

	native := make([]*v1alpha2.JobSet, len(items))
	for i, it := range items {
		if native[i], err = m.ensureNative(ctx, it); err != nil {
			return err
		}
	}
	if err := m.done(StepCreated); err != nil {
		return err
	}
	migrated := 0
	for i, it := range items {
		if native[i] == nil {
			continue // finished by an earlier run
		}
		if err := m.adopt(ctx, it, native[i]); err != nil {
			return err
		}
		migrated++
	}
	m.logf("migrated %d JobSet(s)", migrated)
	return nil
}

// moveFrozen backs the JobSets up, orphans their children and deletes the
// CRD while a ValidatingAdmissionPolicy refuses every other client's JobSet
// writes: a write in between would be lost with the CRD. The policy goes
// when this returns, whether it succeeded or not.
func (m *migrator) moveFrozen(ctx context.Context) (items []*Item, err error) {
	if err := m.freeze(ctx); err != nil {
		return nil, errors.Join(err, m.unfreeze(ctx))
	}
	defer func() { err = errors.Join(err, m.unfreeze(ctx)) }()

	// Read again: nothing changes the JobSets or their children now.
	if items, err = m.discover(ctx); err != nil {
		return nil, err
	}
	stale, err := staleBackups(m.o.BackupDir, items)
	if err != nil {
		return nil, err
	}
	if err := m.setAsideStale(stale); err != nil {
		return nil, err
	}
	if err := m.backup(items); err != nil {
		return nil, err
	}
	if err := m.done(StepBackedUp); err != nil {
		return nil, err
	}
	if err := m.orphanAll(ctx, items); err != nil {
		return nil, err
	}
	list, err := m.unchangedSinceBackup(ctx, items)
	if err != nil {
		return nil, err
	}
	return items, m.deleteCRDOf(ctx, list)
}

// resume finishes the first half of a run that got as far as deleting the
// CRD (which may still be going), from the backups.
func (m *migrator) resume(ctx context.Context, items []*Item, exists bool) error {
	// A killed run may have left its freeze behind.
	if err := m.unfreeze(ctx); err != nil {
		return err
	}
	if err := m.deleteWebhooks(ctx); err != nil {
		return err
	}
	if err := m.done(StepBackedUp); err != nil {
		return err
	}
	if err := m.orphanAll(ctx, items); err != nil {
		return err
	}
	if !exists {
		return nil
	}
	list, err := m.c.Dynamic.Resource(upstreamGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing JobSets: %w", err)
	}
	return m.deleteCRDOf(ctx, list)
}

// orphanAll orphans the children of every item whose backup is not marked
// done (a JobSet of the live CRD never is), then ends StepOrphaned.
func (m *migrator) orphanAll(ctx context.Context, items []*Item) error {
	for _, it := range items {
		mk, err := readMarker(m.o.BackupDir, it)
		if err != nil {
			return err
		}
		if mk != nil {
			continue // its children point at the native JobSet
		}
		if err := m.orphan(ctx, it); err != nil {
			return err
		}
	}
	return m.done(StepOrphaned)
}

// deleteCRDOf removes the finalizers of the JobSets of list, then deletes
// the CRD and waits until it is gone.
func (m *migrator) deleteCRDOf(ctx context.Context, list *unstructured.UnstructuredList) error {
	if err := m.stripFinalizers(ctx, list); err != nil {
		return err
	}
	return m.deleteCRD(ctx)
}

// setAsideStale moves backups whose JobSet the CRD no longer holds out of
// the way and stops the run: they may be all that is left of JobSets a
// killed run had not finished, so they are never deleted.
func (m *migrator) setAsideStale(stale []*Item) error {
	if len(stale) == 0 {
		return nil
	}
	to, err := setAside(m.o.BackupDir, stale, time.Now())
	if err != nil {
		return fmt.Errorf("moving backups without a JobSet to %s: %w", to, err)
	}
	names := make([]string, 0, len(stale))
	for _, it := range stale {
		names = append(names, it.file)
	}
	return fmt.Errorf("%d backup(s) in %s belong to no JobSet of the CustomResourceDefinition (deleted since an earlier run, "+
		"or the CRD was installed again after a migration): %s; moved them to %s and stopped; check them, then run again",
		len(stale), m.o.BackupDir, strings.Join(names, ", "), to)
}

// discover reads and checks every JobSet of the CRD, with its children.
func (m *migrator) discover(ctx context.Context) ([]*Item, error) {
	list, err := m.c.Dynamic.Resource(upstreamGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing JobSets of the CustomResourceDefinition: %w", err)
	}
	invalid := &InvalidError{Errors: map[string]field.ErrorList{}}
	var items []*Item
	byNamespace := map[string]childIndex{}
	for i := range list.Items {
		u := &list.Items[i]
		if u.GetDeletionTimestamp() != nil {
			invalid.Errors[u.GetNamespace()+"/"+u.GetName()] = field.ErrorList{field.Forbidden(field.NewPath("metadata", "deletionTimestamp"),
				"the JobSet is being deleted; wait until it is gone")}
			continue
		}
		js, errs := convert(u)
		if js != nil {
			errs = append(errs, refuseRunningInPlace(js)...)
		}
		if len(errs) > 0 {
			invalid.Errors[u.GetNamespace()+"/"+u.GetName()] = errs
			continue
		}
		idx, ok := byNamespace[u.GetNamespace()]
		if !ok {
			if idx, err = m.listChildren(ctx, u.GetNamespace()); err != nil {
				return nil, err
			}
			byNamespace[u.GetNamespace()] = idx
		}
		items = append(items, &Item{OldUID: u.GetUID(), ResourceVersion: u.GetResourceVersion(), JobSet: js, Children: idx.of(u.GetUID())})
	}
	if len(invalid.Errors) > 0 {
		return nil, invalid
	}
	// A run that crashed after orphaning left children that no longer
	// point at the JobSet; its backup still lists them.
	earlier, err := readBackups(m.o.BackupDir)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		for _, old := range earlier {
			if old.OldUID == it.OldUID {
				it.Children = mergeChildren(it.Children, old.Children)
			}
		}
	}
	sortItems(items)
	return items, nil
}

// mergeChildren adds the children of b missing from a (by UID).
func mergeChildren(a, b []Child) []Child {
	seen := map[types.UID]bool{}
	for _, ch := range a {
		seen[ch.UID] = true
	}
	for _, ch := range b {
		if !seen[ch.UID] {
			a = append(a, ch)
		}
	}
	return a
}

// backup writes every item before anything destructive happens.
func (m *migrator) backup(items []*Item) error {
	if err := os.MkdirAll(m.o.BackupDir, 0o700); err != nil {
		return err
	}
	for _, it := range items {
		if err := writeBackup(m.o.BackupDir, it); err != nil {
			return fmt.Errorf("backing up JobSet %s: %w", it.key(), err)
		}
	}
	m.logf("backed up %d JobSet(s) to %s", len(items), m.o.BackupDir)
	return nil
}

// orphan removes the old JobSet from its children's owner references.
func (m *migrator) orphan(ctx context.Context, it *Item) error {
	for _, ch := range it.Children {
		_, err := m.editChild(ctx, it.JobSet.Namespace, ch, func(obj metav1.Object) bool {
			return withoutOwner(obj, it.OldUID)
		})
		if err != nil {
			return fmt.Errorf("orphaning %s %s/%s: %w", ch.Kind, it.JobSet.Namespace, ch.Name, err)
		}
	}
	return nil
}

// ensureNative creates the native JobSet (marked as migrating) and copies
// its status. It returns nil when an earlier run finished this JobSet.
func (m *migrator) ensureNative(ctx context.Context, it *Item) (*v1alpha2.JobSet, error) {
	mk, err := readMarker(m.o.BackupDir, it)
	if err != nil {
		return nil, err
	}
	api := m.c.JobSets.JobsetV1alpha2().JobSets(it.JobSet.Namespace)
	cur, err := api.Get(ctx, it.JobSet.Name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading JobSet %s: %w", it.key(), err)
	}
	if mk != nil {
		// Migrated before. Only a run killed before it removed the
		// annotation has anything left to do; a JobSet deleted since, or
		// another one of the same name, is none of this run's business.
		if err == nil && cur.UID == mk.NewUID && cur.Annotations[v1alpha2.MigratingKey] == string(it.OldUID) {
			return cur, nil
		}
		m.logf("JobSet %s was migrated by an earlier run (uid %s); skipping its backup", it.key(), mk.NewUID)
		return nil, nil
	}
	switch {
	case apierrors.IsNotFound(err):
		obj := &v1alpha2.JobSet{ObjectMeta: metaToCopy(&it.JobSet.ObjectMeta), Spec: it.JobSet.Spec}
		obj.Annotations = copyWith(obj.Annotations, v1alpha2.MigratingKey, string(it.OldUID))
		if cur, err = api.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating JobSet %s: %w", it.key(), err)
		}
		m.logf("created JobSet %s (uid %s, was %s)", it.key(), cur.UID, it.OldUID)
	case cur.Annotations[v1alpha2.MigratingKey] != string(it.OldUID):
		// Without a marker it is not one this migration finished.
		return nil, fmt.Errorf("JobSet %s already exists natively and was not created by this migration; move it away and run again", it.key())
	}
	want := it.JobSet.Status
	if !apiequality.Semantic.DeepEqual(cur.Status, want) {
		cur.Status = want
		if cur, err = api.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("copying the status of JobSet %s: %w", it.key(), err)
		}
	}
	return cur, nil
}

// adopt points the children at the native JobSet, marks the backup done,
// then lets the controller take the JobSet over. The marker comes before
// the annotation's removal, so that a JobSet without the annotation and
// without a marker is never this migration's.
func (m *migrator) adopt(ctx context.Context, it *Item, js *v1alpha2.JobSet) error {
	for _, ch := range it.Children {
		found, err := m.editChild(ctx, js.Namespace, ch, func(obj metav1.Object) bool {
			return pointAt(obj, ch, it.OldUID, js)
		})
		if err != nil {
			return fmt.Errorf("re-pointing %s %s/%s: %w", ch.Kind, js.Namespace, ch.Name, err)
		}
		if !found {
			m.logf("%s %s/%s is gone; the controller recreates what is missing", ch.Kind, js.Namespace, ch.Name)
		}
	}
	if err := writeMarker(m.o.BackupDir, it, js.UID); err != nil {
		return fmt.Errorf("marking the backup of JobSet %s done: %w", it.key(), err)
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, v1alpha2.MigratingKey))
	if _, err := m.c.JobSets.JobsetV1alpha2().JobSets(js.Namespace).Patch(ctx, js.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("handing JobSet %s/%s to the controller: %w", js.Namespace, js.Name, err)
	}
	m.logf("JobSet %s/%s: %d child object(s) adopted", js.Namespace, js.Name, len(it.Children))
	return nil
}

func copyWith(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for key, val := range m {
		out[key] = val
	}
	out[k] = v
	return out
}

// printPlan describes what a run would do.
func (m *migrator) printPlan(items, stale []*Item, live, exists bool) error {
	src := "CustomResourceDefinition " + m.o.CRDName
	if !live {
		src = "backups in " + m.o.BackupDir + " (the CustomResourceDefinition is gone or being deleted)"
	}
	m.logf("Plan (dry run; nothing is changed). JobSets from %s: %d", src, len(items))
	step := 0
	say := func(format string, args ...any) {
		step++
		m.logf("%d. "+format, append([]any{step}, args...)...)
	}
	for _, it := range stale {
		say("backup %s belongs to no JobSet of the CustomResourceDefinition: move it aside and stop", it.file)
	}
	if live {
		say("delete webhook configurations %s (if present)", strings.Join(m.o.WebhookConfigurations, ", "))
		if m.o.UpstreamController != "" {
			say("scale Deployment %s to zero and wait until none of its pods is left", m.o.UpstreamController)
		}
		say("wait until upstream's leader election Lease %s is released or expired", m.o.UpstreamLease)
		say("block other clients' JobSet writes (ValidatingAdmissionPolicy %s) until the CustomResourceDefinition is deleted", freezeName)
		say("write one backup per JobSet to %s", m.o.BackupDir)
	} else {
		say("remove ValidatingAdmissionPolicy %s if a killed run left it", freezeName)
	}
	marked := map[*Item]bool{}
	for _, it := range items {
		mk, err := readMarker(m.o.BackupDir, it)
		if err != nil {
			return err
		}
		if mk != nil {
			marked[it] = true
			say("JobSet %s: migrated by an earlier run (uid %s); skip", it.key(), mk.NewUID)
			continue
		}
		say("JobSet %s (uid %s, restarts %d): orphan %s", it.key(), it.OldUID, it.JobSet.Status.Restarts, describeChildren(it.Children))
	}
	if live {
		say("check that no JobSet changed since the backup")
	}
	if exists {
		say("remove the JobSets' finalizers, delete CustomResourceDefinition %s and wait until it is gone", m.o.CRDName)
	}
	if live {
		say("unblock JobSet writes")
	}
	switch {
	case !m.o.RegisterAPIService:
		say("wait for APIService %s (created by someone else) to be Available", apiServiceName)
	case m.o.APIServiceFile != "":
		say("register APIService %s from %s and wait until it is Available", apiServiceName, m.o.APIServiceFile)
	default:
		say("register APIService %s for Service %s/%s port %d and wait until it is Available", apiServiceName, m.o.ServiceNamespace, m.o.ServiceName, m.o.ServicePort)
	}
	for _, it := range items {
		if !marked[it] {
			say("JobSet %s: create natively with annotation %s, copy its status, point %d child object(s) at it, mark its backup done, remove the annotation",
				it.key(), v1alpha2.MigratingKey, len(it.Children))
		}
	}
	return nil
}

func describeChildren(children []Child) string {
	if len(children) == 0 {
		return "no children"
	}
	parts := make([]string, 0, len(children))
	for _, ch := range children {
		parts = append(parts, ch.Kind+" "+ch.Name)
	}
	return strings.Join(parts, ", ")
}

// refuseRunningInPlace refuses a JobSet that restarts in place and has not
// finished: its pods carry neither the label the controller selects
// in-place pods by nor the new JobSet's UID, and its Jobs' pod templates
// cannot be changed while they run, so nothing would coordinate their
// agents after the move.
func refuseRunningInPlace(js *v1alpha2.JobSet) field.ErrorList {
	if js.Spec.FailurePolicy == nil || js.Spec.FailurePolicy.RestartStrategy != v1alpha2.InPlaceRestart {
		return nil
	}
	if apimeta.IsStatusConditionTrue(js.Status.Conditions, string(v1alpha2.JobSetCompleted)) ||
		apimeta.IsStatusConditionTrue(js.Status.Conditions, string(v1alpha2.JobSetFailed)) {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec", "failurePolicy", "restartStrategy"),
		"a JobSet that restarts in place (InPlaceRestart) cannot be migrated until it has finished: "+
			"its running pods' agents could not be coordinated by the native controller; "+
			"wait until it completes or fails, or delete it and create it again after the migration")}
}
