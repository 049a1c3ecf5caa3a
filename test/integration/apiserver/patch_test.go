package apiserver

import (
	"bytes"
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metaac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	jobsetac "github.com/nativejobset/jobset/pkg/generated/applyconfiguration/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/integration/framework"
)

// TestPatch covers the JSON, merge, strategic merge and apply patch types.
func TestPatch(t *testing.T) {
	s := framework.StartServer(t)
	ctx := context.Background()
	ns := "patch"
	client := s.Client.JobsetV1alpha2().JobSets(ns)

	t.Run("JSONPatch", func(t *testing.T) {
		mustCreate(t, s, newJobSet(ns, "json"))
		out, err := client.Patch(ctx, "json", types.JSONPatchType, []byte(`[
			{"op":"test","path":"/spec/replicatedJobs/1/name","value":"workers"},
			{"op":"replace","path":"/spec/replicatedJobs/1/replicas","value":3},
			{"op":"add","path":"/metadata/labels","value":{"patched":"json"}}]`), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("json patch: %v", err)
		}
		if *out.Spec.ReplicatedJobs[1].Replicas != 3 || out.Labels["patched"] != "json" || out.Generation != 2 {
			t.Errorf("json patch result: replicas %d labels %v generation %d", *out.Spec.ReplicatedJobs[1].Replicas, out.Labels, out.Generation)
		}
		// A failing test op changes nothing.
		_, err = client.Patch(ctx, "json", types.JSONPatchType, []byte(`[
			{"op":"test","path":"/spec/replicatedJobs/1/name","value":"nope"},
			{"op":"replace","path":"/spec/replicatedJobs/1/replicas","value":4}]`), metav1.PatchOptions{})
		if err == nil {
			t.Errorf("json patch with failing test op accepted")
		}
		if got := mustGet(t, s, ns, "json"); got.ResourceVersion != out.ResourceVersion {
			t.Errorf("failed json patch changed the object")
		}
	})

	t.Run("MergePatch", func(t *testing.T) {
		mustCreate(t, s, newJobSet(ns, "merge", suspended))
		out, err := client.Patch(ctx, "merge", types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"m":"1"}},"spec":{"suspend":false,"ttlSecondsAfterFinished":30}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("merge patch: %v", err)
		}
		if ptr.Deref(out.Spec.Suspend, true) || out.Labels["m"] != "1" || ptr.Deref(out.Spec.TTLSecondsAfterFinished, 0) != 30 {
			t.Errorf("merge patch result: suspend %v labels %v ttl %v", out.Spec.Suspend, out.Labels, out.Spec.TTLSecondsAfterFinished)
		}
		// null removes a field.
		out, err = client.Patch(ctx, "merge", types.MergePatchType, []byte(`{"spec":{"ttlSecondsAfterFinished":null}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("merge patch null: %v", err)
		}
		if out.Spec.TTLSecondsAfterFinished != nil {
			t.Errorf("ttlSecondsAfterFinished = %v after null, want unset", *out.Spec.TTLSecondsAfterFinished)
		}
	})

	t.Run("StrategicMergePatch", func(t *testing.T) {
		mustCreate(t, s, newJobSet(ns, "smp", suspended))
		// Only the "workers" entry is named: the list is merged by name, so
		// "leader" stays.
		out, err := client.Patch(ctx, "smp", types.StrategicMergePatchType, []byte(`{"spec":{"replicatedJobs":[
			{"name":"workers","template":{"spec":{"template":{
				"metadata":{"labels":{"queue":"a"}},
				"spec":{"nodeSelector":{"pool":"gpu"}}}}}}]}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("strategic merge patch: %v", err)
		}
		if len(out.Spec.ReplicatedJobs) != 2 || out.Spec.ReplicatedJobs[0].Name != "leader" {
			t.Fatalf("replicatedJobs not merged by name: %d entries", len(out.Spec.ReplicatedJobs))
		}
		pod := out.Spec.ReplicatedJobs[1].Template.Spec.Template
		if pod.Labels["queue"] != "a" || pod.Labels["app"] != "test" || pod.Spec.NodeSelector["pool"] != "gpu" {
			t.Errorf("workers pod template: labels %v nodeSelector %v", pod.Labels, pod.Spec.NodeSelector)
		}
		if len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Image != "busybox" {
			t.Errorf("containers lost by the merge: %+v", pod.Spec.Containers)
		}
		if sel := out.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector; len(sel) != 0 {
			t.Errorf("leader got nodeSelector %v", sel)
		}

		// A new env var merged into container "main" by name is a change
		// of containers, which stays immutable even while suspended.
		_, err = client.Patch(ctx, "smp", types.StrategicMergePatchType, []byte(`{"spec":{"replicatedJobs":[
			{"name":"workers","template":{"spec":{"template":{"spec":{"containers":[
				{"name":"main","env":[{"name":"NEW","value":"1"}]}]}}}}}]}}`), metav1.PatchOptions{})
		if !apierrors.IsInvalid(err) || !hasCause(err, "spec.replicatedJobs[1].template.spec.template.spec.containers") {
			t.Errorf("env change: err = %v (causes %v), want Invalid at ...containers", err, causeFields(err))
		}
	})

	t.Run("ApplyPatch", func(t *testing.T) {
		body := []byte(`apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: applied
  namespace: patch
spec:
  replicatedJobs:
  - name: workers
    replicas: 2
    template:
      spec:
        template:
          spec:
            containers:
            - name: main
              image: busybox
`)
		out, err := client.Patch(ctx, "applied", types.ApplyYAMLPatchType, body, metav1.PatchOptions{FieldManager: "yaml-applier"})
		if err != nil {
			t.Fatalf("apply create: %v", err)
		}
		if out.Generation != 1 || *out.Spec.ReplicatedJobs[0].Replicas != 2 || out.Spec.SuccessPolicy == nil {
			t.Errorf("applied object: generation %d replicas %d successPolicy %v", out.Generation, *out.Spec.ReplicatedJobs[0].Replicas, out.Spec.SuccessPolicy)
		}
		if !owns(t, out, "yaml-applier", "", workersReplicasPath) {
			t.Errorf("managedFields do not give replicas to yaml-applier: %s", managedFieldsString(out))
		}
	})
}

// workersApply is the typed apply configuration used by the SSA tests.
func workersApply(ns, name string, replicas int32) *jobsetac.JobSetApplyConfiguration {
	// The generated apply configuration takes the Job template as a typed
	// batch/v1 value.
	tmpl := jobTemplate(1)
	return jobsetac.JobSet(name, ns).
		WithLabels(map[string]string{"owner": "alice"}).
		WithSpec(jobsetac.JobSetSpec().WithReplicatedJobs(
			jobsetac.ReplicatedJob().WithName("leader").WithTemplate(tmpl),
			jobsetac.ReplicatedJob().WithName("workers").WithReplicas(replicas).WithTemplate(tmpl),
		))
}

func managedFieldsString(js *v1alpha2.JobSet) string {
	var b strings.Builder
	for _, m := range js.ManagedFields {
		b.WriteString(m.Manager + "/" + string(m.Operation) + "/" + m.Subresource + ": ")
		if m.FieldsV1 != nil {
			b.Write(m.FieldsV1.GetRawBytes())
		}
		b.WriteString("\n")
	}
	return b.String()
}

// owns reports whether manager's managedFields entry for subresource
// holds the field at path.
func owns(t *testing.T, js *v1alpha2.JobSet, manager, subresource string, path fieldpath.Path) bool {
	t.Helper()
	for _, m := range js.ManagedFields {
		if m.Manager != manager || m.Subresource != subresource || m.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(bytes.NewReader(m.FieldsV1.GetRawBytes())); err != nil {
			t.Fatalf("decoding managedFields of %s: %v", manager, err)
		}
		if set.Has(path) {
			return true
		}
	}
	return false
}

var (
	workersReplicasPath = fieldpath.MakePathOrDie("spec", "replicatedJobs", fieldpath.KeyByFields("name", "workers"), "replicas")
	statusRestartsPath  = fieldpath.MakePathOrDie("status", "restarts")
)

// TestServerSideApply covers idempotent apply, conflicts between managers,
// forced ownership and status apply.
func TestServerSideApply(t *testing.T) {
	s := framework.StartServer(t)
	ctx := context.Background()
	ns := "ssa"
	client := s.Client.JobsetV1alpha2().JobSets(ns)

	first, err := client.Apply(ctx, workersApply(ns, "ssa", 2), metav1.ApplyOptions{FieldManager: "alice"})
	if err != nil {
		t.Fatalf("first apply: %v", err)
	}
	if first.Generation != 1 {
		t.Errorf("generation after first apply = %d, want 1", first.Generation)
	}

	t.Run("SameApplyIsNoOp", func(t *testing.T) {
		second, err := client.Apply(ctx, workersApply(ns, "ssa", 2), metav1.ApplyOptions{FieldManager: "alice"})
		if err != nil {
			t.Fatalf("second apply: %v", err)
		}
		if second.Generation != first.Generation || second.ResourceVersion != first.ResourceVersion {
			t.Errorf("re-apply: generation %d rv %s, want %d and %s", second.Generation, second.ResourceVersion, first.Generation, first.ResourceVersion)
		}
	})

	t.Run("ConflictThenForce", func(t *testing.T) {
		bob := []byte(`{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet",
			"metadata":{"name":"ssa","namespace":"ssa"},
			"spec":{"replicatedJobs":[{"name":"workers","replicas":5}]}}`)
		_, err := client.Patch(ctx, "ssa", types.ApplyPatchType, bob, metav1.PatchOptions{FieldManager: "bob"})
		if !apierrors.IsConflict(err) {
			t.Fatalf("bob's apply: err = %v, want a 409 Conflict", err)
		}
		msg := err.Error()
		if !strings.Contains(msg, `.spec.replicatedJobs[name="workers"].replicas`) || !strings.Contains(msg, `"alice"`) {
			t.Errorf("conflict message %q should name the field and the manager alice", msg)
		}
		if got := mustGet(t, s, ns, "ssa"); *got.Spec.ReplicatedJobs[1].Replicas != 2 {
			t.Errorf("conflicting apply changed replicas to %d", *got.Spec.ReplicatedJobs[1].Replicas)
		}

		forced, err := client.Patch(ctx, "ssa", types.ApplyPatchType, bob, metav1.PatchOptions{FieldManager: "bob", Force: ptr.To(true)})
		if err != nil {
			t.Fatalf("forced apply: %v", err)
		}
		if *forced.Spec.ReplicatedJobs[1].Replicas != 5 || forced.Generation != 2 {
			t.Errorf("forced apply: replicas %d generation %d, want 5 and 2", *forced.Spec.ReplicatedJobs[1].Replicas, forced.Generation)
		}
		if !owns(t, forced, "bob", "", workersReplicasPath) {
			t.Errorf("bob does not own workers replicas:\n%s", managedFieldsString(forced))
		}
		if owns(t, forced, "alice", "", workersReplicasPath) {
			t.Errorf("alice still owns workers replicas:\n%s", managedFieldsString(forced))
		}
		if !owns(t, forced, "alice", "", fieldpath.MakePathOrDie("spec", "replicatedJobs", fieldpath.KeyByFields("name", "workers"), "template", "spec", "parallelism")) {
			t.Errorf("alice lost the workers template:\n%s", managedFieldsString(forced))
		}
		// The template alice applied is still there and still hers.
		if len(forced.Spec.ReplicatedJobs) != 2 || len(forced.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers) != 1 {
			t.Errorf("forced apply lost alice's fields: %+v", forced.Spec.ReplicatedJobs)
		}
	})

	t.Run("StatusApplyDoesNotConflict", func(t *testing.T) {
		status := jobsetac.JobSet("ssa", ns).WithStatus(jobsetac.JobSetStatus().
			WithRestarts(1).
			WithConditions(metaac.Condition().
				WithType("StartupPolicyCompleted").WithStatus(metav1.ConditionTrue).
				WithReason("AllStarted").WithMessage("all started").
				WithLastTransitionTime(metav1.Now())))
		before := mustGet(t, s, ns, "ssa")
		out, err := client.ApplyStatus(ctx, status, metav1.ApplyOptions{FieldManager: "jobset-controller"})
		if err != nil {
			t.Fatalf("status apply: %v", err)
		}
		if out.Status.Restarts != 1 || len(out.Status.Conditions) != 1 {
			t.Errorf("status after apply: %+v", out.Status)
		}
		if out.Generation != before.Generation || *out.Spec.ReplicatedJobs[1].Replicas != 5 {
			t.Errorf("status apply touched spec: generation %d replicas %d", out.Generation, *out.Spec.ReplicatedJobs[1].Replicas)
		}
		if !owns(t, out, "jobset-controller", "status", statusRestartsPath) {
			t.Errorf("controller does not own status.restarts:\n%s", managedFieldsString(out))
		}
		// Spec owners keep applying without conflicts with the controller.
		if _, err := client.Apply(ctx, workersApply(ns, "ssa", 2).WithLabels(map[string]string{"owner": "alice", "again": "yes"}),
			metav1.ApplyOptions{FieldManager: "alice"}); !apierrors.IsConflict(err) {
			// alice lost workers replicas to bob: applying 2 conflicts with bob, not the controller.
			t.Errorf("alice's re-apply of replicas 2: err = %v, want a conflict with bob", err)
		} else if strings.Contains(err.Error(), "jobset-controller") {
			t.Errorf("spec apply conflicts with the status manager: %v", err)
		}
		if _, err := client.Apply(ctx, workersApply(ns, "ssa", 5), metav1.ApplyOptions{FieldManager: "alice"}); err != nil {
			t.Errorf("alice's apply agreeing with bob: %v", err)
		}
	})
}

// TestKueueSuspendAndRestore is the write Kueue makes when it admits a
// workload: one merge patch, guarded by resourceVersion, that unsuspends
// the JobSet and injects scheduling directives into the pod templates.
func TestKueueSuspendAndRestore(t *testing.T) {
	s := framework.StartServer(t)
	ctx := context.Background()
	ns := "kueue"
	client := s.Client.JobsetV1alpha2().JobSets(ns)

	admitPatch := func(t *testing.T, js *v1alpha2.JobSet, rv string) []byte {
		rjs := make([]v1alpha2.ReplicatedJob, len(js.Spec.ReplicatedJobs))
		for i := range js.Spec.ReplicatedJobs {
			rj := js.Spec.ReplicatedJobs[i].DeepCopy()
			pod := &rj.Template.Spec.Template
			pod.Spec.NodeSelector = map[string]string{"cloud.google.com/gke-accelerator": "tpu"}
			pod.Labels["kueue.x-k8s.io/podset"] = rj.Name
			rjs[i] = *rj
		}
		return mustJSON(t, map[string]any{
			"metadata": map[string]any{"resourceVersion": rv},
			"spec":     map[string]any{"suspend": false, "replicatedJobs": rjs},
		})
	}

	t.Run("Admit", func(t *testing.T) {
		js := mustCreate(t, s, newJobSet(ns, "admit", suspended))
		out, err := client.Patch(ctx, "admit", types.MergePatchType, admitPatch(t, js, js.ResourceVersion), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("admission patch: %v", err)
		}
		if ptr.Deref(out.Spec.Suspend, true) {
			t.Errorf("still suspended")
		}
		for _, rj := range out.Spec.ReplicatedJobs {
			pod := rj.Template.Spec.Template
			if pod.Spec.NodeSelector["cloud.google.com/gke-accelerator"] != "tpu" || pod.Labels["kueue.x-k8s.io/podset"] != rj.Name {
				t.Errorf("%s: nodeSelector %v labels %v", rj.Name, pod.Spec.NodeSelector, pod.Labels)
			}
		}
		if out.Generation != 2 {
			t.Errorf("generation = %d, want 2", out.Generation)
		}

		// Once running, the same directives are frozen.
		_, err = client.Patch(ctx, "admit", types.StrategicMergePatchType, []byte(`{"spec":{"replicatedJobs":[
			{"name":"workers","template":{"spec":{"template":{"spec":{"nodeSelector":{"pool":"other"}}}}}}]}}`), metav1.PatchOptions{})
		if !apierrors.IsInvalid(err) || !hasCause(err, "spec.replicatedJobs[1].template.spec.template.spec.nodeSelector") {
			t.Errorf("nodeSelector change while running: err = %v (causes %v), want Invalid at ...nodeSelector", err, causeFields(err))
		}
	})

	t.Run("StaleResourceVersion", func(t *testing.T) {
		js := mustCreate(t, s, newJobSet(ns, "stale", suspended))
		staleRV := js.ResourceVersion
		// Someone else writes in between.
		js.Labels = map[string]string{"touched": "yes"}
		current, err := client.Update(ctx, js, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.Patch(ctx, "stale", types.MergePatchType, admitPatch(t, current, staleRV), metav1.PatchOptions{})
		if !apierrors.IsConflict(err) {
			t.Fatalf("patch with stale resourceVersion: err = %v, want 409 Conflict", err)
		}
		after := mustGet(t, s, ns, "stale")
		if after.ResourceVersion != current.ResourceVersion || !ptr.Deref(after.Spec.Suspend, false) {
			t.Errorf("stored object changed: rv %s→%s suspend %v", current.ResourceVersion, after.ResourceVersion, after.Spec.Suspend)
		}
		if len(after.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector) != 0 {
			t.Errorf("nodeSelector written despite the conflict")
		}
	})
}
