package localcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const holdMessage = "held back by the test"

// JobHold refuses the creation of chosen Jobs in one namespace, through a
// ValidatingAdmissionPolicy, until Release: a test that kills a controller
// "during" its work holds part of that work back, so that the kill lands
// mid-way whatever the machine's speed.
type JobHold struct {
	c    *Cluster
	name string
}

// HoldJobCreates refuses creates of Jobs in ns for which the CEL expression
// held (over `object`, the Job) is true, and returns once kube-apiserver
// enforces it: a server-side dry run of probe, which held must match, is
// refused. The hold is released when the test ends, if not before.
func (c *Cluster) HoldJobCreates(t *testing.T, ns, held string, probe *batchv1.Job) *JobHold {
	t.Helper()
	ctx := context.Background()
	h := &JobHold{c: c, name: "hold-jobs-" + ns}
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: h.name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
				},
			}}},
			Validations: []admissionv1.Validation{{Expression: "!(" + held + ")", Message: holdMessage}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: h.name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        h.name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns},
			}},
		},
	}
	api := c.Kube.AdmissionregistrationV1()
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the hold policy: %v", err)
	}
	t.Cleanup(h.Release)
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the hold binding: %v", err)
	}
	probe = probe.DeepCopy()
	probe.Namespace = ns
	Eventually(t, time.Minute, "the hold on Job creates to be enforced", func(ctx context.Context) (bool, error) {
		_, err := c.Kube.BatchV1().Jobs(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return false, nil
		}
		if strings.Contains(err.Error(), holdMessage) {
			return true, nil
		}
		if apierrors.IsAlreadyExists(err) {
			// A Job of that name exists (say, of an earlier attempt):
			// storage refused it, so admission let it through.
			return false, nil
		}
		return false, fmt.Errorf("dry run of the probe Job: %w", err)
	})
	return h
}

// Release lifts the hold; it may be called more than once.
func (h *JobHold) Release() {
	ctx := context.Background()
	api := h.c.Kube.AdmissionregistrationV1()
	_ = api.ValidatingAdmissionPolicyBindings().Delete(ctx, h.name, metav1.DeleteOptions{})
	_ = api.ValidatingAdmissionPolicies().Delete(ctx, h.name, metav1.DeleteOptions{})
}

// ProbeJob is a valid Job named name with labels, for HoldJobCreates.
func ProbeJob(name string, labels map[string]string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "probe", Image: "probe"}},
		}}},
	}
}

// HeldRestartJob is the CEL condition of a hold on the Job name of the
// JobSet restart attempt (label jobset.sigs.k8s.io/restart-attempt).
func HeldRestartJob(name string, attempt int) string {
	return fmt.Sprintf("object.metadata.name == %q && has(object.metadata.labels) && "+
		"'jobset.sigs.k8s.io/restart-attempt' in object.metadata.labels && "+
		"object.metadata.labels['jobset.sigs.k8s.io/restart-attempt'] == '%d'", name, attempt)
}
