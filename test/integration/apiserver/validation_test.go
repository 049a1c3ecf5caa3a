package apiserver

import (
	"context"
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/integration/framework"
)

// TestCreateValidation sends invalid JobSets; each must be refused with
// 422, name the field at fault, and leave nothing behind.
func TestCreateValidation(t *testing.T) {
	s := framework.StartServer(t)
	ctx := context.Background()
	ns := "validation"

	workers := func(js *v1alpha2.JobSet) *v1alpha2.ReplicatedJob { return &js.Spec.ReplicatedJobs[1] }
	rule := func(r v1alpha2.FailurePolicyRule) func(*v1alpha2.JobSet) {
		return func(js *v1alpha2.JobSet) {
			js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{Rules: []v1alpha2.FailurePolicyRule{r}}
		}
	}
	cases := []struct {
		name   string
		jsName string // defaults to the case index
		mutate func(*v1alpha2.JobSet)
		field  string
		msg    string // optional fragment of the cause message
	}{
		{name: "dependsOn unknown", field: "spec.replicatedJobs[1].dependsOn[0].name",
			mutate: func(js *v1alpha2.JobSet) {
				workers(js).DependsOn = []v1alpha2.DependsOn{{Name: "ghost", Status: v1alpha2.DependencyReady}}
			}},
		{name: "dependsOn later replicatedJob", field: "spec.replicatedJobs[1].dependsOn[0].name",
			mutate: func(js *v1alpha2.JobSet) {
				workers(js).DependsOn = []v1alpha2.DependsOn{{Name: "workers", Status: v1alpha2.DependencyReady}}
			}},
		{name: "dependsOn bad status", field: "spec.replicatedJobs[1].dependsOn[0].status",
			mutate: func(js *v1alpha2.JobSet) {
				workers(js).DependsOn = []v1alpha2.DependsOn{{Name: "leader", Status: "Running"}}
			}},
		{name: "dependsOn on the first", field: "spec.replicatedJobs[0].dependsOn",
			mutate: func(js *v1alpha2.JobSet) {
				js.Spec.ReplicatedJobs[0].DependsOn = []v1alpha2.DependsOn{{Name: "workers", Status: v1alpha2.DependencyReady}}
			}},
		{name: "dependsOn with InOrder", field: "spec.replicatedJobs[1].dependsOn", msg: "mutually exclusive",
			mutate: func(js *v1alpha2.JobSet) {
				js.Spec.StartupPolicy = &v1alpha2.StartupPolicy{StartupPolicyOrder: v1alpha2.InOrder}
				workers(js).DependsOn = []v1alpha2.DependsOn{{Name: "leader", Status: v1alpha2.DependencyReady}}
			}},
		{name: "bad message pattern", field: "spec.failurePolicy.rules[0].onJobFailureMessagePatterns[0]",
			mutate: rule(v1alpha2.FailurePolicyRule{Action: v1alpha2.FailJobSet, OnJobFailureMessagePatterns: []string{"(["}})},
		{name: "bad failure reason", field: "spec.failurePolicy.rules[0].onJobFailureReasons[0]",
			mutate: rule(v1alpha2.FailurePolicyRule{Action: v1alpha2.FailJobSet, OnJobFailureReasons: []string{"OOMKilled"}})},
		{name: "bad action", field: "spec.failurePolicy.rules[0].action",
			mutate: rule(v1alpha2.FailurePolicyRule{Action: "Explode"})},
		{name: "bad rule name", field: "spec.failurePolicy.rules[0].name",
			mutate: rule(v1alpha2.FailurePolicyRule{Name: "1-bad rule", Action: v1alpha2.FailJobSet})},
		{name: "rule targets unknown", field: "spec.failurePolicy.rules[0].targetReplicatedJobs[0]",
			mutate: rule(v1alpha2.FailurePolicyRule{Action: v1alpha2.FailJobSet, TargetReplicatedJobs: []string{"ghost"}})},
		{name: "negative maxRestarts", field: "spec.failurePolicy.maxRestarts",
			mutate: func(js *v1alpha2.JobSet) { js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: -1} }},
		{name: "bad restartStrategy", field: "spec.failurePolicy.restartStrategy",
			mutate: func(js *v1alpha2.JobSet) {
				js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{RestartStrategy: "Sometimes"}
			}},
		{name: "managedBy not a path", field: "spec.managedBy",
			mutate: func(js *v1alpha2.JobSet) { js.Spec.ManagedBy = ptr.To("not a controller") }},
		{name: "managedBy too long", field: "spec.managedBy",
			mutate: func(js *v1alpha2.JobSet) { js.Spec.ManagedBy = ptr.To("example.com/" + strings.Repeat("x", 60)) }},
		{name: "uppercase name", jsName: "Bad_Name", field: "metadata.name"},
		{name: "name starting with a digit", jsName: "1abc", field: "metadata.name"},
		{name: "name too long for child jobs", jsName: strings.Repeat("n", 55), field: "metadata.name", msg: "job names generated for this JobSet will exceed 63 characters"},
		{name: "no replicatedJobs", field: "spec.replicatedJobs",
			mutate: func(js *v1alpha2.JobSet) { js.Spec.ReplicatedJobs = nil }},
		{name: "duplicate replicatedJob", field: "spec.replicatedJobs[1].name",
			mutate: func(js *v1alpha2.JobSet) { workers(js).Name = "leader" }},
		{name: "replicatedJob name not DNS-1035", field: "spec.replicatedJobs[1].name",
			mutate: func(js *v1alpha2.JobSet) { workers(js).Name = "Workers" }},
		{name: "negative replicas", field: "spec.replicatedJobs[1].replicas",
			mutate: func(js *v1alpha2.JobSet) { workers(js).Replicas = ptr.To[int32](-1) }},
		{name: "bad completionMode", field: "spec.replicatedJobs[1].template.spec.completionMode",
			mutate: func(js *v1alpha2.JobSet) {
				workers(js).Template.Spec.CompletionMode = ptr.To(batchv1.CompletionMode("Sometimes"))
			}},
		{name: "bad pod label", field: "spec.replicatedJobs[1].template.spec.template.metadata.labels",
			mutate: func(js *v1alpha2.JobSet) { workers(js).Template.Spec.Template.Labels["bad key!"] = "x" }},
		{name: "bad success operator", field: "spec.successPolicy.operator",
			mutate: func(js *v1alpha2.JobSet) { js.Spec.SuccessPolicy = &v1alpha2.SuccessPolicy{Operator: "Most"} }},
		{name: "success target unknown", field: "spec.successPolicy.targetReplicatedJobs[0]",
			mutate: func(js *v1alpha2.JobSet) {
				js.Spec.SuccessPolicy = &v1alpha2.SuccessPolicy{Operator: v1alpha2.OperatorAny, TargetReplicatedJobs: []string{"ghost"}}
			}},
		{name: "bad startup order", field: "spec.startupPolicy.startupPolicyOrder",
			mutate: func(js *v1alpha2.JobSet) {
				js.Spec.StartupPolicy = &v1alpha2.StartupPolicy{StartupPolicyOrder: "Random"}
			}},
		{name: "bad subdomain", field: "spec.network.subdomain",
			mutate: func(js *v1alpha2.JobSet) { js.Spec.Network = &v1alpha2.Network{Subdomain: "Not_A_Label"} }},
		{name: "negative ttl", field: "spec.ttlSecondsAfterFinished",
			mutate: func(js *v1alpha2.JobSet) { js.Spec.TTLSecondsAfterFinished = ptr.To[int32](-5) }},
		{name: "coordinator unknown", field: "spec.coordinator.replicatedJob",
			mutate: func(js *v1alpha2.JobSet) { js.Spec.Coordinator = &v1alpha2.Coordinator{ReplicatedJob: "ghost"} }},
		{name: "coordinator pod out of range", field: "spec.coordinator.podIndex",
			mutate: func(js *v1alpha2.JobSet) {
				js.Spec.Coordinator = &v1alpha2.Coordinator{ReplicatedJob: "workers", PodIndex: 7}
			}},

		// As upstream's CRD schema: required fields and enums of the
		// embedded templates, and the exclusive-topology key.
		{name: "pod template without containers", field: "spec.replicatedJobs[1].template.spec.template.spec.containers", msg: "Required value",
			mutate: func(js *v1alpha2.JobSet) { workers(js).Template.Spec.Template.Spec.Containers = nil }},
		{name: "restartPolicy outside its enum", field: "spec.replicatedJobs[1].template.spec.template.spec.restartPolicy", msg: "Unsupported value",
			mutate: func(js *v1alpha2.JobSet) { workers(js).Template.Spec.Template.Spec.RestartPolicy = "Sometimes" }},
		{name: "exclusive topology not a label key", field: "metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology]",
			mutate: func(js *v1alpha2.JobSet) {
				js.Annotations = map[string]string{v1alpha2.ExclusiveKey: "not a key"}
			}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.jsName
			if name == "" {
				name = fmt.Sprintf("invalid-%d", i)
			}
			js := newJobSet(ns, name)
			if tc.mutate != nil {
				tc.mutate(js)
			}
			_, err := s.Client.JobsetV1alpha2().JobSets(ns).Create(ctx, js, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create: err = %v, want 422 Invalid", err)
			}
			if !hasCause(err, tc.field) {
				t.Errorf("causes %v lack field %q (error: %v)", causeFields(err), tc.field, err)
			}
			if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q lacks %q", err.Error(), tc.msg)
			}
			assertAbsent(t, s, ns, name)
		})
	}

	// Nothing at all was stored.
	list, err := s.Client.JobsetV1alpha2().JobSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("%d JobSets stored after invalid creates", len(list.Items))
	}
}

// TestUpdateValidation covers immutable fields, the terminal state guard
// and the changes elastic JobSets allow.
func TestUpdateValidation(t *testing.T) {
	s := framework.StartServer(t)
	ctx := context.Background()
	ns := "mutability"
	client := s.Client.JobsetV1alpha2().JobSets(ns)

	immutable := []struct {
		name   string
		mutate func(*v1alpha2.JobSet)
		field  string
	}{
		{"successPolicy", func(js *v1alpha2.JobSet) { js.Spec.SuccessPolicy.Operator = v1alpha2.OperatorAny }, "spec.successPolicy"},
		{"network", func(js *v1alpha2.JobSet) { js.Spec.Network.EnableDNSHostnames = ptr.To(false) }, "spec.network"},
		{"startupPolicy", func(js *v1alpha2.JobSet) { js.Spec.StartupPolicy.StartupPolicyOrder = v1alpha2.InOrder }, "spec.startupPolicy"},
		{"failurePolicy added", func(js *v1alpha2.JobSet) { js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 3} }, "spec.failurePolicy"},
		{"managedBy", func(js *v1alpha2.JobSet) { js.Spec.ManagedBy = ptr.To("example.com/other") }, "spec.managedBy"},
		{"replicatedJob renamed", func(js *v1alpha2.JobSet) { js.Spec.ReplicatedJobs[1].Name = "helpers" }, "spec.replicatedJobs[1].name"},
		{"groupName", func(js *v1alpha2.JobSet) { js.Spec.ReplicatedJobs[1].GroupName = "other" }, "spec.replicatedJobs[1].groupName"},
		{"dependsOn", func(js *v1alpha2.JobSet) {
			js.Spec.ReplicatedJobs[1].DependsOn = []v1alpha2.DependsOn{{Name: "leader", Status: v1alpha2.DependencyComplete}}
		}, "spec.replicatedJobs[1].dependsOn"},
		{"container image", func(js *v1alpha2.JobSet) {
			js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0].Image = "busybox:2"
		}, "spec.replicatedJobs[1].template.spec.template.spec.containers"},
		{"nodeSelector while running", func(js *v1alpha2.JobSet) {
			js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.NodeSelector = map[string]string{"a": "b"}
		}, "spec.replicatedJobs[1].template.spec.template.spec.nodeSelector"},
		{"backoffLimit", func(js *v1alpha2.JobSet) {
			js.Spec.ReplicatedJobs[1].Template.Spec.BackoffLimit = ptr.To[int32](9)
		}, "spec.replicatedJobs[1].template.spec.backoffLimit"},
	}
	for i, tc := range immutable {
		t.Run("Immutable/"+tc.name, func(t *testing.T) {
			name := fmt.Sprintf("imm-%d", i)
			created := mustCreate(t, s, newJobSet(ns, name))
			changed := created.DeepCopy()
			tc.mutate(changed)
			_, err := client.Update(ctx, changed, metav1.UpdateOptions{})
			if !apierrors.IsInvalid(err) || !hasCause(err, tc.field) {
				t.Fatalf("update: err = %v (causes %v), want 422 at %s", err, causeFields(err), tc.field)
			}
			if got := mustGet(t, s, ns, name); got.ResourceVersion != created.ResourceVersion {
				t.Errorf("rejected update changed the object")
			}
		})
	}

	t.Run("TerminalState", func(t *testing.T) {
		js := mustCreate(t, s, newJobSet(ns, "done"))
		js.Status.TerminalState = string(v1alpha2.JobSetCompleted)
		js.Status.Conditions = []metav1.Condition{{
			Type: string(v1alpha2.JobSetCompleted), Status: metav1.ConditionTrue,
			Reason: "AllJobsCompleted", Message: "jobset completed successfully",
			LastTransitionTime: metav1.Now(),
		}}
		done, err := client.UpdateStatus(ctx, js, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("marking completed: %v", err)
		}

		suspend := done.DeepCopy()
		suspend.Spec.Suspend = ptr.To(true)
		_, err = client.Update(ctx, suspend, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "Cannot mutate a JobSet in a terminal state") {
			t.Errorf("suspending a completed JobSet: err = %v, want 422 with the terminal state message", err)
		}
		// The same through a merge patch.
		_, err = client.Patch(ctx, "done", "application/merge-patch+json", []byte(`{"spec":{"replicatedJobs":null}}`), metav1.PatchOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("patching the spec of a completed JobSet: err = %v, want 422", err)
		}

		label := done.DeepCopy()
		label.Labels = map[string]string{"archived": "true"}
		if _, err := client.Update(ctx, label, metav1.UpdateOptions{}); err != nil {
			t.Errorf("label change on a completed JobSet: %v", err)
		}
		if err := client.Delete(ctx, "done", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete completed JobSet: %v", err)
		}
		assertAbsent(t, s, ns, "done")
	})

	t.Run("Elastic", func(t *testing.T) {
		js := mustCreate(t, s, newJobSet(ns, "elastic"))
		w := &js.Spec.ReplicatedJobs[1]
		w.Template.Spec.Parallelism = ptr.To[int32](4)
		w.Template.Spec.Completions = ptr.To[int32](4)
		grown, err := client.Update(ctx, js, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("growing parallelism and completions: %v", err)
		}
		if *grown.Spec.ReplicatedJobs[1].Template.Spec.Completions != 4 || grown.Generation != 2 {
			t.Errorf("after growing: completions %d generation %d", *grown.Spec.ReplicatedJobs[1].Template.Spec.Completions, grown.Generation)
		}

		grown.Spec.ReplicatedJobs[1].Replicas = ptr.To[int32](6)
		scaled, err := client.Update(ctx, grown, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("changing replicas: %v", err)
		}
		if *scaled.Spec.ReplicatedJobs[1].Replicas != 6 {
			t.Errorf("replicas = %d, want 6", *scaled.Spec.ReplicatedJobs[1].Replicas)
		}

		uneven := scaled.DeepCopy()
		uneven.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = ptr.To[int32](3)
		if _, err := client.Update(ctx, uneven, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) ||
			!hasCause(err, "spec.replicatedJobs[1].template.spec.completions") {
			t.Errorf("parallelism != completions: err = %v (causes %v), want 422 at ...completions", err, causeFields(err))
		}

		added := scaled.DeepCopy()
		added.Spec.ReplicatedJobs = append(added.Spec.ReplicatedJobs, v1alpha2.ReplicatedJob{
			Name: "extra", Replicas: ptr.To[int32](1), GroupName: "default", Template: scaled.Spec.ReplicatedJobs[0].Template,
		})
		if _, err := client.Update(ctx, added, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !hasCause(err, "spec.replicatedJobs") {
			t.Errorf("adding a replicatedJob: err = %v (causes %v), want 422 at spec.replicatedJobs", err, causeFields(err))
		}

		removed := scaled.DeepCopy()
		removed.Spec.ReplicatedJobs = removed.Spec.ReplicatedJobs[:1]
		if _, err := client.Update(ctx, removed, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !hasCause(err, "spec.replicatedJobs") {
			t.Errorf("removing a replicatedJob: err = %v (causes %v), want 422 at spec.replicatedJobs", err, causeFields(err))
		}

		// A NonIndexed template cannot change parallelism.
		nonIndexed := mustCreate(t, s, newJobSet(ns, "non-indexed", func(js *v1alpha2.JobSet) {
			js.Spec.ReplicatedJobs[1].Template.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
		}))
		nonIndexed.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = ptr.To[int32](3)
		if _, err := client.Update(ctx, nonIndexed, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) ||
			!hasCause(err, "spec.replicatedJobs[1].template.spec.parallelism") {
			t.Errorf("parallelism change of a NonIndexed template: err = %v (causes %v), want 422 at ...parallelism", err, causeFields(err))
		}
	})

	t.Run("StatusValidation", func(t *testing.T) {
		js := mustCreate(t, s, newJobSet(ns, "bad-status"))
		js.Status.TerminalState = "Exploded"
		js.Status.ReplicatedJobsStatus = []v1alpha2.ReplicatedJobStatus{{Name: "ghost"}}
		js.Status.Restarts = -1
		_, err := client.UpdateStatus(ctx, js, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Fatalf("invalid status: err = %v, want 422", err)
		}
		for _, f := range []string{"status.terminalState", "status.replicatedJobsStatus[0].name", "status.restarts"} {
			if !hasCause(err, f) {
				t.Errorf("causes %v lack %s", causeFields(err), f)
			}
		}
	})
}
