package apiserver

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/integration/framework"
)

func withUpdateStrategy(s v1alpha2.UpdateStrategy) func(*v1alpha2.JobSet) {
	return func(js *v1alpha2.JobSet) {
		js.Spec.UpdatePolicy = &v1alpha2.UpdatePolicy{UpdateStrategy: s}
	}
}

// TestUpdatePolicy drives spec.updatePolicy through the real server: its
// defaults, its absence on the wire when never set, and which template
// edits each strategy lets through.
func TestUpdatePolicy(t *testing.T) {
	s := framework.StartServer(t)
	ctx := context.Background()
	ns := "updates"
	client := s.Client.JobsetV1alpha2().JobSets(ns)
	raw := newRawClient(t, s.Config)
	imagePath := "spec.replicatedJobs[1].template.spec.template.spec.containers"
	setImage := func(js *v1alpha2.JobSet, image string) {
		js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0].Image = image
	}

	t.Run("AbsentStaysAbsent", func(t *testing.T) {
		mustCreate(t, s, newJobSet(ns, "plain"))
		resp := raw.get(t, jobsetPath(ns, "plain"))
		if resp.code != 200 {
			t.Fatalf("get: %s", resp)
		}
		if strings.Contains(string(resp.body), "updatePolicy") {
			t.Errorf("a JobSet created without updatePolicy has one on the wire: %s", resp)
		}
	})

	t.Run("Defaults", func(t *testing.T) {
		js := newJobSet(ns, "defaults")
		js.Spec.UpdatePolicy = &v1alpha2.UpdatePolicy{}
		got := mustCreate(t, s, js)
		up := got.Spec.UpdatePolicy
		if up == nil || up.UpdateStrategy != v1alpha2.UpdateNever || ptr.Deref(up.RevisionHistoryLimit, -1) != 10 {
			t.Errorf("updatePolicy = %+v, want Never with a history of 10", up)
		}
	})

	t.Run("NeverRejectsTemplateEdits", func(t *testing.T) {
		for _, name := range []string{"never-absent", "never-explicit"} {
			js := newJobSet(ns, name)
			if name == "never-explicit" {
				withUpdateStrategy(v1alpha2.UpdateNever)(js)
			}
			created := mustCreate(t, s, js)
			changed := created.DeepCopy()
			setImage(changed, "busybox:2")
			_, err := client.Update(ctx, changed, metav1.UpdateOptions{})
			if !apierrors.IsInvalid(err) || !hasCause(err, imagePath) || !strings.Contains(err.Error(), "field is immutable") {
				t.Errorf("%s: err = %v (causes %v), want 422 field is immutable at %s", name, err, causeFields(err), imagePath)
			}
			if got := mustGet(t, s, ns, name); got.ResourceVersion != created.ResourceVersion {
				t.Errorf("%s: a rejected update changed the object", name)
			}
		}
	})

	for _, strategy := range []v1alpha2.UpdateStrategy{v1alpha2.UpdateOpportunistic, v1alpha2.UpdateImmediate} {
		t.Run(string(strategy), func(t *testing.T) {
			name := strings.ToLower(string(strategy))
			created := mustCreate(t, s, newJobSet(ns, name, withUpdateStrategy(strategy)))

			changed := created.DeepCopy()
			setImage(changed, "busybox:2")
			changed.Spec.ReplicatedJobs[0].Template.Spec.BackoffLimit = ptr.To[int32](3)
			updated, err := client.Update(ctx, changed, metav1.UpdateOptions{})
			if err != nil {
				t.Fatalf("template edit under %s: %v", strategy, err)
			}
			if img := updated.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0].Image; img != "busybox:2" || updated.Generation != 2 {
				t.Errorf("after the edit: image %q generation %d", img, updated.Generation)
			}

			// The same through a JSON patch, as kubectl patch sends it.
			patch := `[{"op":"replace","path":"/spec/replicatedJobs/1/template/spec/template/spec/containers/0/image","value":"busybox:3"}]`
			if _, err := client.Patch(ctx, name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Errorf("JSON patch of the image: %v", err)
			}

			// completionMode, names and count stay immutable.
			bad := mustGet(t, s, ns, name)
			bad.Spec.ReplicatedJobs[1].Template.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
			bad.Spec.ReplicatedJobs[0].Name = "boss"
			_, err = client.Update(ctx, bad, metav1.UpdateOptions{})
			for _, f := range []string{"spec.replicatedJobs[1].template.spec.completionMode", "spec.replicatedJobs[0].name"} {
				if !apierrors.IsInvalid(err) || !hasCause(err, f) {
					t.Errorf("err = %v (causes %v), want 422 at %s", err, causeFields(err), f)
				}
			}
			fewer := mustGet(t, s, ns, name)
			fewer.Spec.ReplicatedJobs = fewer.Spec.ReplicatedJobs[:1]
			if _, err := client.Update(ctx, fewer, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !hasCause(err, "spec.replicatedJobs") {
				t.Errorf("removing a replicatedJob: err = %v, want 422 at spec.replicatedJobs", err)
			}
			// Other fields keep their rules.
			net := mustGet(t, s, ns, name)
			net.Spec.Network.Subdomain = "other"
			if _, err := client.Update(ctx, net, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !hasCause(err, "spec.network") {
				t.Errorf("network change: err = %v, want 422 at spec.network", err)
			}
		})
	}

	t.Run("SwitchStrategy", func(t *testing.T) {
		mustCreate(t, s, newJobSet(ns, "switch"))
		// Switching to Opportunistic and editing in one merge patch.
		patch := `{"spec":{"updatePolicy":{"updateStrategy":"Opportunistic"}}}`
		if _, err := client.Patch(ctx, "switch", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("setting the strategy: %v", err)
		}
		js := mustGet(t, s, ns, "switch")
		setImage(js, "busybox:2")
		js.Spec.UpdatePolicy.UpdateStrategy = v1alpha2.UpdateImmediate
		if _, err := client.Update(ctx, js, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("switching to Immediate with an edit: %v", err)
		}
		// Back to Never together with an edit is refused as a whole.
		js = mustGet(t, s, ns, "switch")
		setImage(js, "busybox:3")
		js.Spec.UpdatePolicy.UpdateStrategy = v1alpha2.UpdateNever
		if _, err := client.Update(ctx, js, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !hasCause(err, imagePath) {
			t.Errorf("switching to Never with an edit: err = %v, want 422 at %s", err, imagePath)
		}
		if got := mustGet(t, s, ns, "switch"); got.Spec.UpdatePolicy.UpdateStrategy != v1alpha2.UpdateImmediate {
			t.Errorf("strategy = %s after a refused write, want Immediate", got.Spec.UpdatePolicy.UpdateStrategy)
		}
	})

	t.Run("BadPolicy", func(t *testing.T) {
		js := newJobSet(ns, "bad-policy")
		js.Spec.UpdatePolicy = &v1alpha2.UpdatePolicy{UpdateStrategy: "Rolling", RevisionHistoryLimit: ptr.To[int32](-1)}
		_, err := client.Create(ctx, js, metav1.CreateOptions{})
		for _, f := range []string{"spec.updatePolicy.updateStrategy", "spec.updatePolicy.revisionHistoryLimit"} {
			if !apierrors.IsInvalid(err) || !hasCause(err, f) {
				t.Errorf("err = %v (causes %v), want 422 at %s", err, causeFields(err), f)
			}
		}
		assertAbsent(t, s, ns, "bad-policy")
	})

	t.Run("TerminalStaysImmutable", func(t *testing.T) {
		js := mustCreate(t, s, newJobSet(ns, "finished", withUpdateStrategy(v1alpha2.UpdateOpportunistic)))
		js.Status.TerminalState = string(v1alpha2.JobSetCompleted)
		js.Status.Conditions = []metav1.Condition{{
			Type: string(v1alpha2.JobSetCompleted), Status: metav1.ConditionTrue,
			Reason: "AllJobsCompleted", Message: "jobset completed successfully", LastTransitionTime: metav1.Now(),
		}}
		done, err := client.UpdateStatus(ctx, js, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("marking completed: %v", err)
		}
		edit := done.DeepCopy()
		setImage(edit, "busybox:2")
		if _, err := client.Update(ctx, edit, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) ||
			!strings.Contains(err.Error(), "Cannot mutate a JobSet in a terminal state") {
			t.Errorf("editing a completed JobSet: err = %v, want 422 terminal state", err)
		}
		never := done.DeepCopy()
		never.Spec.UpdatePolicy.UpdateStrategy = v1alpha2.UpdateNever
		if _, err := client.Update(ctx, never, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("changing the strategy of a completed JobSet: err = %v, want 422", err)
		}
	})

	t.Run("StatusRevisions", func(t *testing.T) {
		js := mustCreate(t, s, newJobSet(ns, "revs"))
		js.Status.CurrentRevision = "revs-abc"
		js.Status.UpdateRevision = "revs-def"
		got, err := client.UpdateStatus(ctx, js, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("writing revisions: %v", err)
		}
		if got.Status.CurrentRevision != "revs-abc" || got.Status.UpdateRevision != "revs-def" {
			t.Errorf("status revisions = %q/%q", got.Status.CurrentRevision, got.Status.UpdateRevision)
		}
		got.Status.UpdateRevision = "Not A Name"
		if _, err := client.UpdateStatus(ctx, got, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !hasCause(err, "status.updateRevision") {
			t.Errorf("bad revision name: err = %v, want 422 at status.updateRevision", err)
		}
	})
}
