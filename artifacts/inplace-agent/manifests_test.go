// Package inplaceagent holds the manifests of the in-place restart agent;
// this test decodes them strictly and keeps the admission policy in step
// with the service account the RBAC creates.
package inplaceagent

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

var separator = regexp.MustCompile(`(?m)^---\s*$`)

// decode strictly decodes every document of file into the type its kind
// names.
func decode(t *testing.T, file string) []any {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	for i, doc := range separator.Split(string(data), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("%s document %d: %v", file, i, err)
		}
		var obj any
		switch tm.Kind {
		case "ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "Role":
			obj = &rbacv1.Role{}
		case "RoleBinding":
			obj = &rbacv1.RoleBinding{}
		case "ValidatingAdmissionPolicy":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicy{}
		case "ValidatingAdmissionPolicyBinding":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		default:
			t.Fatalf("%s document %d: unexpected kind %q", file, i, tm.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(bytes.TrimSpace([]byte(doc))), obj); err != nil {
			t.Fatalf("%s document %d (%s): %v", file, i, tm.Kind, err)
		}
		out = append(out, obj)
	}
	return out
}

func TestManifests(t *testing.T) {
	var sa *corev1.ServiceAccount
	for _, obj := range decode(t, "rbac.yaml") {
		if o, ok := obj.(*corev1.ServiceAccount); ok {
			sa = o
		}
	}
	if sa == nil {
		t.Fatal("rbac.yaml has no ServiceAccount")
	}
	var policy *admissionregistrationv1.ValidatingAdmissionPolicy
	var binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, obj := range decode(t, "admission-policy.yaml") {
		switch o := obj.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			policy = o
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			binding = o
		}
	}
	if policy == nil || binding == nil {
		t.Fatal("admission-policy.yaml lacks the policy or its binding")
	}
	if binding.Spec.PolicyName != policy.Name {
		t.Errorf("binding.spec.policyName %q, policy %q", binding.Spec.PolicyName, policy.Name)
	}
	if len(binding.Spec.ValidationActions) != 1 || binding.Spec.ValidationActions[0] != admissionregistrationv1.Deny {
		t.Errorf("binding.spec.validationActions = %v, want [Deny]", binding.Spec.ValidationActions)
	}
	if binding.Spec.MatchResources != nil {
		t.Error("binding.spec.matchResources is set: the shipped binding covers every namespace")
	}
	if policy.Spec.FailurePolicy == nil || *policy.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Error("policy.spec.failurePolicy is not Fail")
	}
	// The policy names the ServiceAccount of rbac.yaml and the annotation
	// the agent writes.
	var matched bool
	for _, c := range policy.Spec.MatchConditions {
		matched = matched || strings.Contains(c.Expression, "':"+sa.Name+"'")
	}
	if !matched {
		t.Errorf("no matchCondition of the policy names the service account %q", sa.Name)
	}
	var attempt bool
	for _, v := range policy.Spec.Variables {
		attempt = attempt || strings.Contains(v.Expression, "'"+jobset.InPlaceRestartAttemptKey+"'")
	}
	if !attempt {
		t.Errorf("no variable of the policy names the annotation %s", jobset.InPlaceRestartAttemptKey)
	}
	for i, v := range policy.Spec.Validations {
		if v.Reason == nil || *v.Reason != metav1.StatusReasonForbidden || v.Message == "" {
			t.Errorf("spec.validations[%d]: reason %v, message %q; want Forbidden and a message", i, v.Reason, v.Message)
		}
	}
}
