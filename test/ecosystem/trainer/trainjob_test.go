package trainer

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

var (
	trainJobs = schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "trainjobs"}
	jobSets   = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
)

const (
	// runtimeName is the ClusterTrainingRuntime hack/local-up.sh installs
	// from Trainer's manifests (base/runtimes/torch_distributed.yaml).
	runtimeName = "torch-distributed"
	// replicatedJob is the one replicatedJob of that runtime.
	replicatedJob = "node"
	// patchManager owns the test's runtime patch of the TrainJob.
	patchManager = "e2e.nativejobset.io/kwok"
	// otherManager is a second field manager of the JobSet.
	otherManager = "e2e-other"

	phaseLabel    = "e2e.nativejobset.io/phase"
	firstOnlyNote = "e2e.nativejobset.io/first-only"
	teamLabel     = "e2e.nativejobset.io/team"
)

// runtimePatch is the TrainJob's patch of the runtime's pod template: the
// kwok annotation that completes the pods, a phase label, and (first) an
// annotation a later apply drops.
func runtimePatch(phase string, firstOnly bool) map[string]any {
	annotations := map[string]any{"pod-complete.stage.kwok.x-k8s.io/delay": "2s"}
	if firstOnly {
		annotations[firstOnlyNote] = "true"
	}
	return map[string]any{
		"manager": patchManager,
		"trainingRuntimeSpec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"replicatedJobs": []any{map[string]any{
				"name": replicatedJob,
				"template": map[string]any{"spec": map[string]any{"template": map[string]any{
					"metadata": map[string]any{
						"labels":      map[string]any{phaseLabel: phase},
						"annotations": annotations,
					},
				}}},
			}},
		}}},
	}
}

// TestTrainJobServerSideApply runs a TrainJob through Trainer and our
// JobSet API: Trainer server-side-applies the JobSet (suspended), applies it
// again when the TrainJob is resumed with a changed runtime patch, and the
// managedFields record exactly what each apply sent; the Jobs run on kwok and
// the TrainJob completes.
func TestTrainJobServerSideApply(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	ns := newNamespace(ctx, t)
	const name = "mnist"

	tc, err := jobSetTypeConverter()
	if err != nil {
		t.Fatalf("OpenAPI of jobset.x-k8s.io/v1alpha2: %v", err)
	}

	tj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "trainer.kubeflow.org/v1alpha1",
		"kind":       "TrainJob",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"runtimeRef": map[string]any{"name": runtimeName},
			"suspend":    true,
			"trainer": map[string]any{
				"numNodes": int64(2),
				"image":    "registry.example/mnist:v1",
				"command":  []any{"torchrun", "train.py"},
				"env":      []any{map[string]any{"name": "EPOCHS", "value": "1"}},
			},
			"runtimePatches": []any{runtimePatch("first", true)},
		},
	}}
	if _, err := dyn.Resource(trainJobs).Namespace(ns).Create(ctx, tj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating TrainJob: %v", err)
	}

	// 1. Trainer applies a suspended JobSet; its managedFields entry holds
	// exactly the fields of the last apply.
	js := waitApplied(ctx, t, tc, ns, name, 1, func(js *unstructured.Unstructured) error {
		if s, _, _ := unstructured.NestedBool(js.Object, "spec", "suspend"); !s {
			return fmt.Errorf("spec.suspend is not true")
		}
		return nil
	})
	owner := metav1.GetControllerOf(js)
	if owner == nil || owner.Kind != "TrainJob" || owner.Name != name {
		t.Fatalf("JobSet's controller owner is %+v, want TrainJob %s", owner, name)
	}
	if got := podTemplateMeta(js, "annotations")[firstOnlyNote]; got != "true" {
		t.Fatalf("pod template annotation %s = %q after the first apply, want \"true\"", firstOnlyNote, got)
	}
	checkTrainerEntry(t, js)
	firstApplies := mustApplies(t, ns, name)

	// 2. Another manager adds a label by server-side apply.
	other := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2",
		"kind":       "JobSet",
		"metadata":   map[string]any{"name": name, "namespace": ns, "labels": map[string]any{teamLabel: "research"}},
	}}
	if _, err := dyn.Resource(jobSets).Namespace(ns).Apply(ctx, name, other, metav1.ApplyOptions{FieldManager: otherManager}); err != nil {
		t.Fatalf("applying a label as %s: %v", otherManager, err)
	}

	// 3. Resume with a changed runtime patch: Trainer applies again (the
	// JobSet was suspended) with suspend false, the new label and without
	// the first-only annotation.
	resume, _ := json.Marshal(map[string]any{"spec": map[string]any{
		"suspend":        false,
		"runtimePatches": []any{runtimePatch("second", false)},
	}})
	if _, err := dyn.Resource(trainJobs).Namespace(ns).Patch(ctx, name, types.MergePatchType, resume, metav1.PatchOptions{}); err != nil {
		t.Fatalf("resuming the TrainJob: %v", err)
	}
	js = waitApplied(ctx, t, tc, ns, name, len(firstApplies)+1, func(js *unstructured.Unstructured) error {
		if s, _, _ := unstructured.NestedBool(js.Object, "spec", "suspend"); s {
			return fmt.Errorf("spec.suspend is still true")
		}
		if got := podTemplateMeta(js, "labels")[phaseLabel]; got != "second" {
			return fmt.Errorf("pod template label %s = %q, want second", phaseLabel, got)
		}
		return nil
	})
	checkTrainerEntry(t, js)
	// A field only the first apply held is gone: Trainer was its only owner.
	if got, ok := podTemplateMeta(js, "annotations")[firstOnlyNote]; ok {
		t.Errorf("pod template annotation %s = %q survived an apply that no longer sets it", firstOnlyNote, got)
	}
	// The other manager's label is untouched and still its own.
	if got := js.GetLabels()[teamLabel]; got != "research" {
		t.Errorf("label %s = %q after Trainer's second apply, want research", teamLabel, got)
	}
	otherSet, ok, err := ownedFields(js, otherManager, "Apply")
	if err != nil || !ok {
		t.Fatalf("no Apply entry of %s in managedFields (err %v)", otherManager, err)
	}
	wantOther := fieldpath.NewSet(fieldpath.MakePathOrDie("metadata", "labels", teamLabel))
	if !otherSet.Equals(wantOther) {
		t.Errorf("%s owns %v, want only %v", otherManager, otherSet, wantOther)
	}

	// 4. The Jobs run on kwok and complete; so do the JobSet and the TrainJob.
	waitFor(ctx, t, "TrainJob Complete", func(ctx context.Context) (bool, error) {
		tj, err := dyn.Resource(trainJobs).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return conditionTrue(tj, "Complete"), nil
	})
	js, err = dyn.Resource(jobSets).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !conditionTrue(js, "Completed") {
		t.Errorf("TrainJob is Complete but its JobSet is not Completed: %v", js.Object["status"])
	}
	jobs, err := stack.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 || jobs.Items[0].Status.Succeeded != 2 {
		t.Errorf("want 1 Job with 2 succeeded pods (numNodes 2), got %d Jobs", len(jobs.Items))
		for _, j := range jobs.Items {
			t.Logf("Job %s: succeeded %d failed %d", j.Name, j.Status.Succeeded, j.Status.Failed)
		}
	}
	pods, err := stack.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded || p.Labels[phaseLabel] != "second" {
			t.Errorf("pod %s: phase %s, label %s=%q; want Succeeded and second", p.Name, p.Status.Phase, phaseLabel, p.Labels[phaseLabel])
		}
	}
}

// waitApplied waits until Trainer has applied the JobSet at least n times,
// the JobSet passes check, and Trainer's managedFields entry equals the
// fields of its last apply; it returns the JobSet.
func waitApplied(ctx context.Context, t *testing.T, tc managedfields.TypeConverter, ns, name string, n int, check func(*unstructured.Unstructured) error) *unstructured.Unstructured {
	t.Helper()
	var js *unstructured.Unstructured
	var last error
	applied := 0
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		js, err = dyn.Resource(jobSets).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			last = fmt.Errorf("JobSet %s/%s does not exist", ns, name)
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if last = check(js); last != nil {
			return false, nil
		}
		applies, err := trainerApplies(ns, name)
		if err != nil {
			return false, err
		}
		applied = len(applies)
		if len(applies) < n {
			last = fmt.Errorf("%d applies by Trainer in the audit log, want at least %d", len(applies), n)
			return false, nil
		}
		want, err := appliedFields(tc, applies[len(applies)-1])
		if err != nil {
			return false, err
		}
		got, ok, err := ownedFields(js, trainerManager, "Apply")
		if err != nil {
			return false, err
		}
		if !ok {
			last = fmt.Errorf("no Apply entry of %q in managedFields", trainerManager)
			return false, nil
		}
		if !got.Equals(want) {
			// Trainer may be applying again right now; the entry must match
			// the latest apply once the writes settle.
			last = fmt.Errorf("%q owns fields it did not apply:\n%v\nand does not own applied fields:\n%v",
				trainerManager, got.Difference(want), want.Difference(got))
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("waiting for Trainer's apply %d of JobSet %s/%s: %v; last: %v", n, ns, name, err, last)
	}
	owned, _, _ := ownedFields(js, trainerManager, "Apply")
	t.Logf("Trainer's apply %d: %d applies in the audit log, %d fields owned by %q", n, applied, owned.Leaves().Size(), trainerManager)
	return js
}

// checkTrainerEntry checks the form of Trainer's managedFields entry.
func checkTrainerEntry(t *testing.T, js *unstructured.Unstructured) {
	t.Helper()
	for _, e := range js.GetManagedFields() {
		if e.Manager != trainerManager {
			continue
		}
		if e.Operation != metav1.ManagedFieldsOperationApply || e.APIVersion != "jobset.x-k8s.io/v1alpha2" || e.Subresource != "" || e.FieldsType != "FieldsV1" {
			t.Errorf("Trainer's managedFields entry: operation %s, apiVersion %s, subresource %q, fieldsType %s; want Apply, jobset.x-k8s.io/v1alpha2, main resource, FieldsV1",
				e.Operation, e.APIVersion, e.Subresource, e.FieldsType)
		}
	}
}

func mustApplies(t *testing.T, ns, name string) []map[string]any {
	t.Helper()
	applies, err := trainerApplies(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return applies
}

// podTemplateMeta returns the labels or annotations of the pod template of
// the JobSet's first replicatedJob.
func podTemplateMeta(js *unstructured.Unstructured, which string) map[string]string {
	rjs, _, _ := unstructured.NestedSlice(js.Object, "spec", "replicatedJobs")
	if len(rjs) == 0 {
		return nil
	}
	rj, _ := rjs[0].(map[string]any)
	m, _, _ := unstructured.NestedStringMap(rj, "template", "spec", "template", "metadata", which)
	return m
}

func conditionTrue(obj *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

func waitFor(ctx context.Context, t *testing.T, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(ctx context.Context, t *testing.T) string {
	t.Helper()
	ns, err := stack.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "trainer-e2e-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stack.Kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}
