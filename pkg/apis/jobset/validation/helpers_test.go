package validation

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

// wantErr describes one expected error: its type, its exact field path and,
// when set, a substring of its detail.
type wantErr struct {
	typ    field.ErrorType
	field  string
	detail string
}

// checkErrors fails the test unless errs match want one to one, in any
// order.
func checkErrors(t *testing.T, errs field.ErrorList, want []wantErr) {
	t.Helper()
	used := make([]bool, len(errs))
	for _, w := range want {
		found := false
		for i, e := range errs {
			if used[i] || e.Type != w.typ || e.Field != w.field || !strings.Contains(e.Detail, w.detail) {
				continue
			}
			used[i], found = true, true
			break
		}
		if !found {
			t.Errorf("missing error %s at %s (detail containing %q)", w.typ, w.field, w.detail)
		}
	}
	for i, e := range errs {
		if !used[i] {
			t.Errorf("unexpected error: %v", e)
		}
	}
}

// testRJ returns a defaulted Indexed replicatedJob whose template runs
// completions pods, completions at a time.
func testRJ(name string, replicas, completions int32) jobset.ReplicatedJob {
	return jobset.ReplicatedJob{
		Name:      name,
		GroupName: jobset.DefaultGroupName,
		Replicas:  replicas,
		Template: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{
				Parallelism:    ptr.To(completions),
				Completions:    ptr.To(completions),
				CompletionMode: ptr.To(batchv1.IndexedCompletion),
				Template: corev1.PodTemplateSpec{
					Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyOnFailure,
						Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
					},
				},
			},
		},
	}
}

// testJobSet returns a valid, defaulted JobSet "js" with a leader (1 Job of
// 1 pod) and workers (2 Jobs of 4 pods).
func testJobSet() *jobset.JobSet {
	return &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "default", ResourceVersion: "1"},
		Spec: jobset.JobSetSpec{
			ReplicatedJobs: []jobset.ReplicatedJob{testRJ("leader", 1, 1), testRJ("workers", 2, 4)},
			Network: &jobset.Network{
				EnableDNSHostnames:       ptr.To(true),
				PublishNotReadyAddresses: ptr.To(true),
			},
			SuccessPolicy: &jobset.SuccessPolicy{Operator: jobset.OperatorAll},
			StartupPolicy: &jobset.StartupPolicy{StartupPolicyOrder: jobset.AnyOrder},
		},
	}
}

// withFailurePolicy gives js a failure policy with the given rules.
func withFailurePolicy(js *jobset.JobSet, rules ...jobset.FailurePolicyRule) {
	js.Spec.FailurePolicy = &jobset.FailurePolicy{
		MaxRestarts:     3,
		RestartStrategy: jobset.Recreate,
		Rules:           rules,
	}
}

// withClaims adds a volume claim policy with the named templates and mounts
// each claim in the workers' container.
func withClaims(js *jobset.JobSet, names ...string) {
	policy := jobset.VolumeClaimPolicy{
		RetentionPolicy: &jobset.VolumeRetentionPolicy{WhenDeleted: ptr.To(jobset.RetentionPolicyDelete)},
	}
	c := &js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0]
	for _, n := range names {
		policy.Templates = append(policy.Templates, corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: n}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: n, MountPath: "/mnt/" + n})
	}
	js.Spec.VolumeClaimPolicies = append(js.Spec.VolumeClaimPolicies, policy)
}

func completed() metav1.Condition {
	return metav1.Condition{
		Type:               string(jobset.JobSetCompleted),
		Status:             metav1.ConditionTrue,
		Reason:             "AllJobsCompleted",
		LastTransitionTime: metav1.Now(),
	}
}
