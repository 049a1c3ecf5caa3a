package controller

import (
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// migratedJobSet is a JobSet as jobset-migrate leaves it: copied from
// upstream after one failure restart, with children that upstream's
// controller created (no template-revision or execution-attempt
// annotations, no ControllerRevision), re-pointed to the new UID.
func migratedJobSet(t *testing.T, annotate bool) (*jobset.JobSet, []runtime.Object) {
	t.Helper()
	js := newJobSet("mig", func(js *jobset.JobSet) {
		js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 3}
		if annotate {
			js.Annotations = map[string]string{jobset.MigratingKey: "old-uid"}
		}
	})
	js.Status = jobset.JobSetStatus{
		Restarts:                1,
		RestartsCountTowardsMax: 1,
		ExecutionAttempts:       ptr.To[int32](1),
		ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{
			{Name: "leader", Ready: 1, Active: 1},
			{Name: "workers", Ready: 2, Active: 2},
		},
		Conditions: []metav1.Condition{{
			Type: string(jobset.JobSetStartupPolicyCompleted), Status: metav1.ConditionTrue,
			Reason: "AllReplicatedJobsStarted", Message: "x", LastTransitionTime: metav1.NewTime(t0),
		}},
	}
	objs := []runtime.Object{js}
	layout := newIndexLayout(js)
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		for idx := 0; idx < int(replicasOf(rj)); idx++ {
			job := constructJob(js, layout, rj, idx, jobParams{restarts: 1})
			for _, m := range []map[string]string{job.Annotations, job.Spec.Template.Annotations} {
				delete(m, jobset.ExecutionAttemptKey)
				delete(m, jobset.TemplateRevisionKey)
			}
			job.UID = types.UID("job-uid-" + job.Name)
			readyJob(job)
			objs = append(objs, job)
		}
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{
		Name: "mig", Namespace: ns, Labels: map[string]string{jobset.JobSetNameKey: "mig"},
		OwnerReferences: []metav1.OwnerReference{ownerRef(js)},
	}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}}
	return js, append(objs, svc)
}

func jobUIDs(fx *fixture) map[string]types.UID {
	out := map[string]types.UID{}
	for _, j := range fx.jobs() {
		out[j.Name] = j.UID
	}
	return out
}

// A JobSet annotated as being migrated is not touched at all.
func TestMigratingJobSetSkipped(t *testing.T) {
	_, objs := migratedJobSet(t, true)
	fx := newFixture(t, objs...)
	fx.sync("mig")
	if w := append(writes(fx.kube.Actions()), writes(fx.jsc.Actions())...); len(w) != 0 {
		t.Fatalf("writes for a migrating JobSet: %v", w)
	}
}

// Once the annotation is gone the controller adopts the upstream Jobs as
// they are: no Job created or deleted, counters unchanged, and the
// template revision recorded as the current one.
func TestMigratedJobsAdopted(t *testing.T) {
	_, objs := migratedJobSet(t, false)
	fx := newFixture(t, objs...)
	before := jobUIDs(fx)
	for i := 0; i < 3; i++ {
		fx.sync("mig")
	}
	for _, w := range writes(fx.kube.Actions()) {
		if w == "create jobs/" || w == "delete jobs/" || w == "update jobs/" || w == "patch jobs/" {
			t.Fatalf("migrated Jobs touched: %v", writes(fx.kube.Actions()))
		}
	}
	if got := jobUIDs(fx); !reflect.DeepEqual(got, before) {
		t.Fatalf("Jobs changed: %v, want %v", got, before)
	}
	st := fx.jobSet("mig").Status
	if st.Restarts != 1 || st.RestartsCountTowardsMax != 1 || ptr.Deref(st.ExecutionAttempts, 0) != 1 {
		t.Fatalf("counters changed: %+v", st)
	}
	if st.CurrentRevision == "" || st.CurrentRevision != st.UpdateRevision {
		t.Fatalf("revisions = %q/%q, want the spec's as current", st.CurrentRevision, st.UpdateRevision)
	}
	if c := cond(fx.jobSet("mig"), conditionRestartingJobSet); c != nil && c.Status == metav1.ConditionTrue {
		t.Fatalf("adoption started a restart: %+v", c)
	}

	// A later failure restarts the JobSet through this controller.
	fx.setJob("mig-workers-1", failJob("BackoffLimitExceeded", "x", t0))
	fx.sync("mig")
	if st := fx.jobSet("mig").Status; st.Restarts != 2 || ptr.Deref(st.ExecutionAttempts, 0) != 2 {
		t.Fatalf("after a failure: %+v", st)
	}
	if names := fx.jobNames(); len(names) != 0 {
		t.Fatalf("old attempt's Jobs not deleted: %v", names)
	}
}

// An upstream Job whose pods are still suspended (a suspended JobSet) is
// adopted and stays suspended.
func TestMigratedSuspendedJobSetStaysSuspended(t *testing.T) {
	js, objs := migratedJobSet(t, false)
	js.Spec.Suspend = ptr.To(true)
	js.Status.Conditions = append(js.Status.Conditions, metav1.Condition{
		Type: string(jobset.JobSetSuspended), Status: metav1.ConditionTrue, Reason: reasonSuspended, Message: messageSuspended,
		LastTransitionTime: metav1.NewTime(t0),
	})
	for _, o := range objs {
		if j, ok := o.(*batchv1.Job); ok {
			j.Spec.Suspend = ptr.To(true)
			j.Status = batchv1.JobStatus{}
		}
	}
	fx := newFixture(t, objs...)
	before := jobUIDs(fx)
	fx.sync("mig")
	fx.sync("mig")
	if got := jobUIDs(fx); !reflect.DeepEqual(got, before) {
		t.Fatalf("Jobs changed: %v", got)
	}
	if st := fx.jobSet("mig").Status; st.Restarts != 1 || ptr.Deref(st.ExecutionAttempts, 0) != 1 {
		t.Fatalf("counters changed: %+v", st)
	}
}
