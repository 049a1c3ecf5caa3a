package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/integration/framework"
)

// TestCRUD covers create (with every server-side default), get, list,
// update, delete and deletecollection, and the serialized form of status.
func TestCRUD(t *testing.T) {
	s := framework.StartServer(t)
	raw := newRawClient(t, s.Config)
	ctx := context.Background()

	t.Run("CreateAppliesDefaults", func(t *testing.T) {
		ns := "crud-defaults"
		js := newJobSet(ns, "defaults", func(js *v1alpha2.JobSet) {
			js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{Rules: []v1alpha2.FailurePolicyRule{
				{Action: v1alpha2.FailJobSet},
				{Name: "named", Action: v1alpha2.RestartJobSet},
				{Action: v1alpha2.RestartJobSet, OnJobFailureReasons: []string{batchv1.JobReasonDeadlineExceeded}},
			}}
			// No restartPolicy and no completionMode: both come from defaults.
			js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.RestartPolicy = ""
			// No retentionPolicy: {whenDeleted: Delete}, as upstream.
			js.Spec.VolumeClaimPolicies = []v1alpha2.VolumeClaimPolicy{{
				Templates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}},
			}}
			c := &js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0]
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/data"})
		})
		created := mustCreate(t, s, js)
		got := mustGet(t, s, ns, "defaults")
		if got.Generation != 1 || got.ResourceVersion != created.ResourceVersion || got.UID == "" {
			t.Errorf("generation %d rv %q uid %q; want generation 1, rv %q, a uid", got.Generation, got.ResourceVersion, got.UID, created.ResourceVersion)
		}
		spec := got.Spec
		if spec.SuccessPolicy == nil || spec.SuccessPolicy.Operator != v1alpha2.OperatorAll {
			t.Errorf("successPolicy = %+v, want operator All", spec.SuccessPolicy)
		}
		if spec.StartupPolicy == nil || spec.StartupPolicy.StartupPolicyOrder != v1alpha2.AnyOrder {
			t.Errorf("startupPolicy = %+v, want AnyOrder", spec.StartupPolicy)
		}
		if n := spec.Network; n == nil || !ptr.Deref(n.EnableDNSHostnames, false) || !ptr.Deref(n.PublishNotReadyAddresses, false) {
			t.Errorf("network = %+v, want enableDNSHostnames and publishNotReadyAddresses true", n)
		}
		if spec.FailurePolicy.RestartStrategy != v1alpha2.Recreate {
			t.Errorf("restartStrategy = %q, want Recreate", spec.FailurePolicy.RestartStrategy)
		}
		wantRules := []string{"failurePolicyRule0", "named", "failurePolicyRule2"}
		for i, r := range spec.FailurePolicy.Rules {
			if r.Name != wantRules[i] {
				t.Errorf("rule %d name = %q, want %q", i, r.Name, wantRules[i])
			}
		}
		for i, rj := range spec.ReplicatedJobs {
			if rj.GroupName != "default" {
				t.Errorf("replicatedJobs[%d].groupName = %q, want default", i, rj.GroupName)
			}
			if m := rj.Template.Spec.CompletionMode; m == nil || *m != batchv1.IndexedCompletion {
				t.Errorf("replicatedJobs[%d] completionMode = %v, want Indexed", i, m)
			}
			pod := rj.Template.Spec.Template.Spec
			if pod.RestartPolicy != corev1.RestartPolicyOnFailure {
				t.Errorf("replicatedJobs[%d] restartPolicy = %q, want OnFailure", i, pod.RestartPolicy)
			}
			if p := pod.Containers[0].Ports[0].Protocol; p != corev1.ProtocolTCP {
				t.Errorf("replicatedJobs[%d] port protocol = %q, want TCP", i, p)
			}
		}
		if r := spec.ReplicatedJobs[0].Replicas; r == nil || *r != 1 {
			t.Errorf("leader replicas = %v, want defaulted 1", r)
		}
		if rp := spec.VolumeClaimPolicies[0].RetentionPolicy; rp == nil || ptr.Deref(rp.WhenDeleted, "") != v1alpha2.RetentionPolicyDelete {
			t.Errorf("retentionPolicy = %+v, want {whenDeleted: Delete}", rp)
		}
		if r := spec.ReplicatedJobs[1].Replicas; r == nil || *r != 2 {
			t.Errorf("workers replicas = %v, want 2 as sent", r)
		}
	})

	t.Run("ReplicasAbsentAndZeroAsRawJSON", func(t *testing.T) {
		ns := "crud-replicas"
		body := []byte(`{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet",
			"metadata":{"name":"zero"},
			"spec":{"replicatedJobs":[
				{"name":"absent","template":{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}},
				{"name":"zero","replicas":0,"template":{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}}
			]}}`)
		resp := raw.do(t, http.MethodPost, jobsetsPath(ns), "application/json", body)
		if resp.code != http.StatusCreated {
			t.Fatalf("POST: %v", resp)
		}
		var obj struct {
			Spec struct {
				ReplicatedJobs []map[string]json.RawMessage `json:"replicatedJobs"`
			} `json:"spec"`
		}
		got := raw.get(t, jobsetPath(ns, "zero"))
		if err := json.Unmarshal(got.body, &obj); err != nil {
			t.Fatalf("decoding %v: %v", got, err)
		}
		if r := string(obj.Spec.ReplicatedJobs[0]["replicas"]); r != "1" {
			t.Errorf("absent replicas serialized as %q, want 1", r)
		}
		if r := string(obj.Spec.ReplicatedJobs[1]["replicas"]); r != "0" {
			t.Errorf("explicit replicas 0 serialized as %q, want 0", r)
		}
		typed := mustGet(t, s, ns, "zero")
		if r := typed.Spec.ReplicatedJobs[1].Replicas; r == nil || *r != 0 {
			t.Errorf("typed client sees replicas %v, want 0", r)
		}
	})

	t.Run("StatusAlwaysHasRestarts", func(t *testing.T) {
		ns := "crud-status"
		mustCreate(t, s, newJobSet(ns, "fresh"))
		check := func(resp rawResponse, where string) {
			t.Helper()
			if resp.code != http.StatusOK && resp.code != http.StatusCreated {
				t.Fatalf("%s: %v", where, resp)
			}
			var obj struct {
				Status map[string]json.RawMessage `json:"status"`
			}
			if err := json.Unmarshal(resp.body, &obj); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if r, ok := obj.Status["restarts"]; !ok || string(r) != "0" {
				t.Errorf("%s: status = %s, want restarts serialized as 0", where, resp.body)
			}
		}
		check(raw.get(t, jobsetPath(ns, "fresh")), "GET")
		check(raw.get(t, jobsetPath(ns, "fresh")+"/status"), "GET status")

		list := raw.get(t, jobsetsPath(ns))
		if !strings.Contains(string(list.body), `"restarts":0`) {
			t.Errorf("list body lacks \"restarts\":0: %v", list)
		}
	})

	t.Run("GetListUpdateDelete", func(t *testing.T) {
		ns := "crud-cycle"
		client := s.Client.JobsetV1alpha2().JobSets(ns)
		for _, name := range []string{"a", "b", "c"} {
			mustCreate(t, s, newJobSet(ns, name))
		}
		mustCreate(t, s, newJobSet("crud-other", "a"))

		list, err := client.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		if len(list.Items) != 3 || list.ResourceVersion == "" {
			t.Fatalf("list has %d items (rv %q), want 3 from this namespace only", len(list.Items), list.ResourceVersion)
		}

		b := mustGet(t, s, ns, "b")
		b.Labels = map[string]string{"tier": "gold"}
		b.Spec.ReplicatedJobs[1].Replicas = ptr.To[int32](5)
		updated, err := client.Update(ctx, b, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		if updated.ResourceVersion == b.ResourceVersion || updated.Labels["tier"] != "gold" || *updated.Spec.ReplicatedJobs[1].Replicas != 5 {
			t.Errorf("update not applied: rv %s→%s labels %v replicas %d", b.ResourceVersion, updated.ResourceVersion, updated.Labels, *updated.Spec.ReplicatedJobs[1].Replicas)
		}

		// An update from a stale copy conflicts.
		b.Labels = map[string]string{"tier": "silver"}
		if _, err := client.Update(ctx, b, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			t.Errorf("update with stale resourceVersion: err = %v, want Conflict", err)
		}

		if err := client.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete: %v", err)
		}
		assertAbsent(t, s, ns, "a")
		if err := client.Delete(ctx, "a", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("second delete: err = %v, want NotFound", err)
		}
		// Delete with a precondition on a wrong UID is refused.
		if err := client.Delete(ctx, "c", metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions("nope")}); !apierrors.IsConflict(err) {
			t.Errorf("delete with wrong uid precondition: err = %v, want Conflict", err)
		}
	})

	t.Run("DynamicClient", func(t *testing.T) {
		ns := "crud-dynamic"
		dyn, err := dynamic.NewForConfig(s.Config)
		if err != nil {
			t.Fatal(err)
		}
		res := dyn.Resource(jobsetsGVR).Namespace(ns)
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "jobset.x-k8s.io/v1alpha2",
			"kind":       "JobSet",
			"metadata":   map[string]any{"name": "dyn"},
			"spec": map[string]any{"replicatedJobs": []any{map[string]any{
				"name": "w",
				"template": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
					"containers": []any{map[string]any{"name": "c", "image": "busybox"}},
				}}}},
			}}},
		}}
		created, err := res.Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("dynamic create: %v", err)
		}
		rjs, _, _ := unstructured.NestedSlice(created.Object, "spec", "replicatedJobs")
		if len(rjs) != 1 || rjs[0].(map[string]any)["replicas"] != int64(1) || rjs[0].(map[string]any)["groupName"] != "default" {
			t.Errorf("dynamic create result replicatedJobs = %v", rjs)
		}
		if r, found, _ := unstructured.NestedInt64(created.Object, "status", "restarts"); !found || r != 0 {
			t.Errorf("dynamic object status.restarts = %d (found %v), want 0", r, found)
		}
		if err := unstructured.SetNestedField(created.Object, true, "spec", "suspend"); err != nil {
			t.Fatal(err)
		}
		updated, err := res.Update(ctx, created, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("dynamic update: %v", err)
		}
		if v, _, _ := unstructured.NestedBool(updated.Object, "spec", "suspend"); !v || updated.GetGeneration() != 2 {
			t.Errorf("dynamic update: suspend %v generation %d", v, updated.GetGeneration())
		}
		got, err := res.Get(ctx, "dyn", metav1.GetOptions{})
		if err != nil || got.GetResourceVersion() != updated.GetResourceVersion() {
			t.Errorf("dynamic get: %v (rv %s want %s)", err, got.GetResourceVersion(), updated.GetResourceVersion())
		}
		if err := res.Delete(ctx, "dyn", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("dynamic delete: %v", err)
		}
		assertAbsent(t, s, ns, "dyn")
	})

	t.Run("GenerateNameAndDryRun", func(t *testing.T) {
		ns := "crud-generate"
		client := s.Client.JobsetV1alpha2().JobSets(ns)
		gen := newJobSet(ns, "")
		gen.GenerateName = "gen-"
		out, err := client.Create(ctx, gen, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create with generateName: %v", err)
		}
		if !strings.HasPrefix(out.Name, "gen-") || len(out.Name) != len("gen-")+5 {
			t.Errorf("generated name %q", out.Name)
		}
		// A prefix so long that the child Job names would not fit is
		// refused. The server generates the name before validating, so the
		// error is about metadata.name.
		long := newJobSet(ns, "")
		long.GenerateName = strings.Repeat("g", 50) + "-"
		if _, err := client.Create(ctx, long, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !hasCause(err, "metadata.name") ||
			!strings.Contains(err.Error(), "job names generated for this JobSet will exceed 63 characters") {
			t.Errorf("long generateName: err = %v (causes %v), want 422 at metadata.name", err, causeFields(err))
		}

		dry, err := client.Create(ctx, newJobSet(ns, "dry"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatalf("dry-run create: %v", err)
		}
		if dry.Spec.SuccessPolicy == nil || dry.Generation != 1 {
			t.Errorf("dry-run result not defaulted: %+v generation %d", dry.Spec.SuccessPolicy, dry.Generation)
		}
		assertAbsent(t, s, ns, "dry")
		// A dry-run of an invalid object is still validated.
		bad := newJobSet(ns, "dry-bad")
		bad.Spec.ReplicatedJobs = nil
		if _, err := client.Create(ctx, bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsInvalid(err) {
			t.Errorf("dry-run of an invalid object: err = %v, want 422", err)
		}
	})

	t.Run("AllNamespaces", func(t *testing.T) {
		mustCreate(t, s, newJobSet("crud-all-a", "one"))
		mustCreate(t, s, newJobSet("crud-all-b", "one"))
		all, err := s.Client.JobsetV1alpha2().JobSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=one"})
		if err != nil {
			t.Fatal(err)
		}
		namespaces := map[string]bool{}
		for _, js := range all.Items {
			namespaces[js.Namespace] = true
		}
		if !namespaces["crud-all-a"] || !namespaces["crud-all-b"] {
			t.Errorf("cluster-wide list by name found namespaces %v", namespaces)
		}
		onlyB, err := s.Client.JobsetV1alpha2().JobSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "metadata.namespace=crud-all-b"})
		if err != nil {
			t.Fatal(err)
		}
		if len(onlyB.Items) != 1 || onlyB.Items[0].Namespace != "crud-all-b" {
			t.Errorf("cluster-wide list by namespace: %d items", len(onlyB.Items))
		}
	})

	t.Run("DeleteCollection", func(t *testing.T) {
		ns := "crud-collection"
		client := s.Client.JobsetV1alpha2().JobSets(ns)
		for _, name := range []string{"x1", "x2", "x3"} {
			mustCreate(t, s, newJobSet(ns, name, withLabels(map[string]string{"batch": "x"})))
		}
		mustCreate(t, s, newJobSet(ns, "keep", withLabels(map[string]string{"batch": "y"})))
		if err := client.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "batch=x"}); err != nil {
			t.Fatalf("deletecollection: %v", err)
		}
		list, err := client.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		if len(list.Items) != 1 || list.Items[0].Name != "keep" {
			var names []string
			for _, i := range list.Items {
				names = append(names, i.Name)
			}
			t.Errorf("after deletecollection batch=x: %v, want [keep]", names)
		}
	})
}

// TestStatusIsolationAndGeneration checks that the main resource and the
// status subresource each change only their own half, and how generation
// moves.
func TestStatusIsolationAndGeneration(t *testing.T) {
	s := framework.StartServer(t)
	ctx := context.Background()
	ns := "gen"
	client := s.Client.JobsetV1alpha2().JobSets(ns)

	js := mustCreate(t, s, newJobSet(ns, "g", suspended))
	if js.Generation != 1 {
		t.Fatalf("generation on create = %d, want 1", js.Generation)
	}

	// Status sent on create is dropped.
	withStatus := newJobSet(ns, "created-with-status")
	withStatus.Status = v1alpha2.JobSetStatus{Restarts: 7, TerminalState: "Completed"}
	created := mustCreate(t, s, withStatus)
	if created.Status.Restarts != 0 || created.Status.TerminalState != "" {
		t.Errorf("status sent on create was kept: %+v", created.Status)
	}

	// UpdateStatus: the status changes, a spec or metadata change in the
	// same request is ignored (as on a CRD's status subresource),
	// generation stays.
	js.Labels = map[string]string{"via": "status"}
	js.Finalizers = []string{"example.com/via-status"}
	js.Status.Restarts = 2
	js.Status.ExecutionAttempts = ptr.To[int32](3)
	js.Spec.ReplicatedJobs[1].Replicas = ptr.To[int32](9)
	js.Spec.Suspend = ptr.To(false)
	afterStatus, err := client.UpdateStatus(ctx, js, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if afterStatus.Status.Restarts != 2 || ptr.Deref(afterStatus.Status.ExecutionAttempts, 0) != 3 {
		t.Errorf("status not written: %+v", afterStatus.Status)
	}
	if *afterStatus.Spec.ReplicatedJobs[1].Replicas != 2 || !ptr.Deref(afterStatus.Spec.Suspend, false) {
		t.Errorf("UpdateStatus changed the spec: replicas %d suspend %v", *afterStatus.Spec.ReplicatedJobs[1].Replicas, afterStatus.Spec.Suspend)
	}
	if afterStatus.Generation != 1 {
		t.Errorf("generation after status write = %d, want 1", afterStatus.Generation)
	}
	if len(afterStatus.Labels) != 0 || len(afterStatus.Finalizers) != 0 {
		t.Errorf("UpdateStatus changed metadata: labels %v finalizers %v", afterStatus.Labels, afterStatus.Finalizers)
	}

	// Update: a status change in the same request is ignored.
	afterStatus.Status.Restarts = 40
	afterStatus.Labels = map[string]string{"l": "v"}
	afterLabel, err := client.Update(ctx, afterStatus, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update labels: %v", err)
	}
	if afterLabel.Status.Restarts != 2 {
		t.Errorf("Update changed status.restarts to %d, want 2", afterLabel.Status.Restarts)
	}
	if afterLabel.Generation != 1 {
		t.Errorf("generation after label change = %d, want 1", afterLabel.Generation)
	}

	afterLabel.Annotations = map[string]string{"a": "b"}
	afterAnno, err := client.Update(ctx, afterLabel, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update annotations: %v", err)
	}
	if afterAnno.Generation != 1 {
		t.Errorf("generation after annotation change = %d, want 1", afterAnno.Generation)
	}

	afterAnno.Spec.ReplicatedJobs[1].Replicas = ptr.To[int32](4)
	afterSpec, err := client.Update(ctx, afterAnno, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update spec: %v", err)
	}
	if afterSpec.Generation != 2 {
		t.Errorf("generation after spec change = %d, want 2", afterSpec.Generation)
	}

	// A no-op update keeps generation and resourceVersion.
	same, err := client.Update(ctx, afterSpec, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("no-op update: %v", err)
	}
	if same.Generation != 2 || same.ResourceVersion != afterSpec.ResourceVersion {
		t.Errorf("no-op update: generation %d rv %s, want 2 and %s", same.Generation, same.ResourceVersion, afterSpec.ResourceVersion)
	}

	// Another status write keeps generation 2.
	same.Status.Restarts = 3
	afterStatus2, err := client.UpdateStatus(ctx, same, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("second status update: %v", err)
	}
	if afterStatus2.Generation != 2 || afterStatus2.Status.Restarts != 3 {
		t.Errorf("after second status write: generation %d restarts %d, want 2 and 3", afterStatus2.Generation, afterStatus2.Status.Restarts)
	}

	// A merge patch of status through the main resource is ignored too.
	patched, err := client.Patch(ctx, "g", "application/merge-patch+json", []byte(`{"status":{"restarts":99}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patching status through the main resource: %v", err)
	}
	if patched.Status.Restarts != 3 {
		t.Errorf("status.restarts via main resource patch = %d, want 3", patched.Status.Restarts)
	}
	// And a spec patch through /status is ignored.
	patched, err = client.Patch(ctx, "g", "application/merge-patch+json", []byte(`{"spec":{"suspend":false},"status":{"restarts":4}}`), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatalf("patching /status: %v", err)
	}
	if !ptr.Deref(patched.Spec.Suspend, false) || patched.Status.Restarts != 4 || patched.Generation != 2 {
		t.Errorf("after /status patch: suspend %v restarts %d generation %d, want true 4 2", patched.Spec.Suspend, patched.Status.Restarts, patched.Generation)
	}
}
