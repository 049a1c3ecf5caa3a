package migration

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	upv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// migrate runs jobset-migrate and returns its output.
func migrate(t *testing.T, reg registration, backups string, extra ...string) string {
	t.Helper()
	out, err := migrateErr(reg, backups, extra...)
	if err != nil {
		t.Fatalf("jobset-migrate %s: %v\n%s", strings.Join(extra, " "), err, out)
	}
	t.Logf("jobset-migrate %s:\n%s", strings.Join(extra, " "), out)
	return out
}

// migrateErr runs jobset-migrate and returns its output and error.
func migrateErr(reg registration, backups string, extra ...string) (string, error) {
	args := append([]string{
		"--kubeconfig", stack.Kubeconfig,
		"--backup-dir", backups,
		"--no-upstream-controller", // none runs here
		"--service-namespace", reg.namespace,
		"--service-name", reg.name,
		"--service-port", fmt.Sprint(reg.port),
		"--ca-bundle-file", reg.caFile,
		"--timeout", "2m",
	}, extra...)
	out, err := exec.Command(migrateBin, args...).CombinedOutput()
	return string(out), err
}

// checkNative checks a migrated JobSet against its upstream original, and
// that its Jobs and pods are the same objects, now owned by it. It waits
// until the controller took the JobSet over.
func checkNative(t *testing.T, orig *upv1.JobSet, before map[string]types.UID) *v1alpha2.JobSet {
	t.Helper()
	ctx := context.Background()
	var js *v1alpha2.JobSet
	eventually(t, 2*time.Minute, "the controller to take "+orig.Name+" over", func(ctx context.Context) (bool, error) {
		var err error
		js, err = stack.JobSets.JobsetV1alpha2().JobSets(orig.Namespace).Get(ctx, orig.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return js.Status.CurrentRevision != "", nil
	})
	if js.UID == orig.UID {
		t.Errorf("%s kept the CRD's UID", orig.Name)
	}
	if _, ok := js.Annotations[v1alpha2.MigratingKey]; ok {
		t.Errorf("%s still annotated %s", orig.Name, v1alpha2.MigratingKey)
	}
	// The controller adds its availability annotations; the original ones
	// must all be there.
	if !reflect.DeepEqual(js.Labels, orig.Labels) {
		t.Errorf("%s labels: %v, want %v", orig.Name, js.Labels, orig.Labels)
	}
	for k, v := range orig.Annotations {
		if js.Annotations[k] != v {
			t.Errorf("%s annotation %s = %q, want %q", orig.Name, k, js.Annotations[k], v)
		}
	}
	rj, orj := js.Spec.ReplicatedJobs[0], orig.Spec.ReplicatedJobs[0]
	if len(js.Spec.ReplicatedJobs) != 1 || rj.Name != orj.Name || *rj.Replicas != orj.Replicas ||
		*rj.Template.Spec.Parallelism != *orj.Template.Spec.Parallelism ||
		rj.Template.Spec.Template.Spec.Containers[0].Image != orj.Template.Spec.Template.Spec.Containers[0].Image ||
		js.Spec.FailurePolicy.MaxRestarts != orig.Spec.FailurePolicy.MaxRestarts {
		t.Errorf("%s spec differs: %+v", orig.Name, js.Spec)
	}
	st := js.Status
	if st.Restarts != orig.Status.Restarts || st.RestartsCountTowardsMax != orig.Status.RestartsCountTowardsMax ||
		ptr.Deref(st.ExecutionAttempts, 0) != orig.Status.Restarts {
		t.Errorf("%s status: restarts %d/%d, executionAttempts %d; want %d", orig.Name, st.Restarts, st.RestartsCountTowardsMax, ptr.Deref(st.ExecutionAttempts, 0), orig.Status.Restarts)
	}
	if c := findCondition(st.Conditions, string(v1alpha2.JobSetStartupPolicyCompleted)); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("%s lost its conditions: %+v", orig.Name, st.Conditions)
	}
	if after := uids(t, orig.Namespace, orig.Name); !reflect.DeepEqual(after, before) {
		t.Errorf("%s: Jobs or pods recreated:\n got %v\nwant %v", orig.Name, after, before)
	}
	jobs, err := stack.Kube.BatchV1().Jobs(orig.Namespace).List(ctx, metav1.ListOptions{LabelSelector: upv1.JobSetNameKey + "=" + orig.Name})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		refs := j.OwnerReferences
		if len(refs) != 1 || refs[0].UID != js.UID || refs[0].Controller == nil || !*refs[0].Controller || refs[0].BlockOwnerDeletion == nil || !*refs[0].BlockOwnerDeletion {
			t.Errorf("Job %s owners: %+v", j.Name, refs)
		}
		if j.Labels[upv1.JobSetUIDKey] != string(js.UID) {
			t.Errorf("Job %s jobset-uid = %s", j.Name, j.Labels[upv1.JobSetUIDKey])
		}
	}
	svc, err := stack.Kube.CoreV1().Services(orig.Namespace).Get(ctx, orig.Name, metav1.GetOptions{})
	if err != nil || len(svc.OwnerReferences) != 1 || svc.OwnerReferences[0].UID != js.UID {
		t.Errorf("Service of %s: %v %+v", orig.Name, err, svc)
	}
	return js
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// failAPod makes one running pod of the JobSet fail (kwok's fail stage) and
// waits until the controller restarted the JobSet: a new attempt of Jobs
// whose pods run.
func failAPod(t *testing.T, js *v1alpha2.JobSet) {
	t.Helper()
	ctx := context.Background()
	pods := podsOf(t, js.Namespace, js.Name)
	if len(pods) == 0 {
		t.Fatal("no pods")
	}
	patch := `{"metadata":{"labels":{"pod-fail.stage.kwok.x-k8s.io":"true"}}}`
	if _, err := stack.Kube.CoreV1().Pods(js.Namespace).Patch(ctx, pods[0].Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	want := js.Status.Restarts + 1
	eventually(t, 3*time.Minute, fmt.Sprintf("%s to restart (restarts %d) and run again", js.Name, want), func(ctx context.Context) (bool, error) {
		cur, err := stack.JobSets.JobsetV1alpha2().JobSets(js.Namespace).Get(ctx, js.Name, metav1.GetOptions{})
		if err != nil || cur.Status.Restarts != want {
			return false, err
		}
		running := 0
		for _, p := range podsOf(t, js.Namespace, js.Name) {
			if p.Labels["jobset.sigs.k8s.io/restart-attempt"] == fmt.Sprint(want) && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == int(*js.Spec.ReplicatedJobs[0].Replicas)*2, nil
	})
}

// TestMigrateRunningJobSets: two running upstream JobSets (one after a
// restart) move to the native API; no pod is recreated; a later pod
// failure restarts one through jobset-controller.
func TestMigrateRunningJobSets(t *testing.T) {
	ctrlArgs, reg := becomeUpstream(t)
	ns := namespace(t, "migrate-running")
	fresh := upstreamJobSet(t, ns, "fresh", 2, 0)
	restarted := upstreamJobSet(t, ns, "restarted", 1, 1)
	fresh, _ = upstreamClient.JobsetV1alpha2().JobSets(ns).Get(context.Background(), "fresh", metav1.GetOptions{})
	restarted, _ = upstreamClient.JobsetV1alpha2().JobSets(ns).Get(context.Background(), "restarted", metav1.GetOptions{})
	beforeFresh, beforeRestarted := uids(t, ns, "fresh"), uids(t, ns, "restarted")
	backups := t.TempDir()

	// A running JobSet that restarts in place is refused, changing nothing,
	// until it is gone (or finished).
	inPlace := &upv1.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "inplace", Namespace: ns},
		Spec: upv1.JobSetSpec{
			FailurePolicy: &upv1.FailurePolicy{MaxRestarts: 3, RestartStrategy: upv1.InPlaceRestart},
			ReplicatedJobs: []upv1.ReplicatedJob{{Name: "workers", Replicas: 1, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](math.MaxInt32),
				PodReplacementPolicy: ptr.To(batchv1.Failed),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyOnFailure,
					Containers: []corev1.Container{{Name: "worker", Image: "registry.k8s.io/pause:3.10"}}}},
			}}}},
		},
	}
	if _, err := upstreamClient.JobsetV1alpha2().JobSets(ns).Create(context.Background(), inPlace, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := migrateErr(reg, backups)
	if err == nil || !strings.Contains(out, "JobSet migrate-running/inplace: spec.failurePolicy.restartStrategy") ||
		!strings.Contains(out, "cannot be migrated until it has finished") {
		t.Fatalf("migrating a running InPlaceRestart JobSet: err=%v, want a refusal naming it:\n%s", err, out)
	}
	if gone, _ := crdGone(context.Background()); gone {
		t.Fatal("the refused migration deleted the CRD")
	}
	if err := upstreamClient.JobsetV1alpha2().JobSets(ns).Delete(context.Background(), "inplace", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the in-place JobSet to be gone", func(ctx context.Context) (bool, error) {
		_, err := upstreamClient.JobsetV1alpha2().JobSets(ns).Get(ctx, "inplace", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})

	plan := migrate(t, reg, backups, "--dry-run")
	for _, want := range []string{"JobSet migrate-running/fresh", "orphan Job fresh-workers-0, Job fresh-workers-1, Service fresh", "JobSet migrate-running/restarted"} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan lacks %q", want)
		}
	}
	if gone, _ := crdGone(context.Background()); gone {
		t.Fatal("the dry run deleted the CRD")
	}

	migrate(t, reg, backups)
	startController(t, ctrlArgs)
	checkNative(t, fresh, beforeFresh)
	native := checkNative(t, restarted, beforeRestarted)
	failAPod(t, native)
	// Observed over a whole restart of the other JobSet, which the
	// controller saw and handled after the takeover: the migrated JobSet
	// that did not fail still has its Jobs and pods.
	if cur := uids(t, ns, "fresh"); !reflect.DeepEqual(cur, beforeFresh) {
		t.Errorf("fresh: Jobs or pods recreated after the takeover:\n got %v\nwant %v", cur, beforeFresh)
	}
}

// TestMigrationResumes stops jobset-migrate right after the CRD is deleted
// (as a crash there would) and finishes with a second run from the backups.
func TestMigrationResumes(t *testing.T) {
	ctrlArgs, reg := becomeUpstream(t)
	ns := namespace(t, "migrate-resume")
	upstreamJobSet(t, ns, "resumed", 2, 0)
	orig, _ := upstreamClient.JobsetV1alpha2().JobSets(ns).Get(context.Background(), "resumed", metav1.GetOptions{})
	before := uids(t, ns, "resumed")
	backups := t.TempDir()

	migrate(t, reg, backups, "--stop-after", "crd-deleted")
	eventually(t, time.Minute, "the CRD to be gone", crdGone)
	// Between the two runs the children belong to nobody and survive.
	jobs, err := stack.Kube.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if len(j.OwnerReferences) != 0 {
			t.Errorf("Job %s still owned: %+v", j.Name, j.OwnerReferences)
		}
	}
	if got := uids(t, ns, "resumed"); !reflect.DeepEqual(got, before) {
		t.Fatalf("children lost between the runs: %v", got)
	}

	out := migrate(t, reg, backups)
	if !strings.Contains(out, "migrated 1 JobSet(s)") {
		t.Errorf("second run: %s", out)
	}
	startController(t, ctrlArgs)
	checkNative(t, orig, before)
}
