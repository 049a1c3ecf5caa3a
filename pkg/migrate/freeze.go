package migrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// The freeze: while the JobSets are backed up and the CRD deleted, a
// ValidatingAdmissionPolicy refuses every JobSet write but this run's own,
// since a write in that window would be lost with the CRD.
const (
	freezeName = "jobset-migrate-freeze"
	// freezeMessage is the policy's message; the probe recognizes a
	// refusal by it.
	freezeMessage = "JobSets are read-only while jobset-migrate moves them to the native API; retry when it is done"
	// probeName is a JobSet that the policy refuses even to this run, so
	// that a dry-run create of it shows whether the policy is enforced.
	probeName      = "jobset-migrate-freeze-probe"
	probeNamespace = "kube-system"
)

// whoAmI returns the user this run acts as, which the freeze lets through.
func (m *migrator) whoAmI(ctx context.Context) (string, error) {
	r, err := m.c.Kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("finding out which user this run acts as (SelfSubjectReview): %w", err)
	}
	if r.Status.UserInfo.Username == "" {
		return "", errors.New("finding out which user this run acts as: the SelfSubjectReview names none")
	}
	return r.Status.UserInfo.Username, nil
}

func freezePolicy(user string) *admissionv1.ValidatingAdmissionPolicy {
	return &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: freezeName, Labels: map[string]string{"app.kubernetes.io/managed-by": "jobset-migrate"}},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete},
					Rule: admissionv1.Rule{
						APIGroups:   []string{upstreamGVR.Group},
						APIVersions: []string{"*"},
						Resources:   []string{"jobsets", "jobsets/status"},
					},
				},
			}}},
			Validations: []admissionv1.Validation{{
				// strconv.Quote's escapes are valid in CEL string literals.
				Expression: fmt.Sprintf("request.userInfo.username == %s && request.name != %s", strconv.Quote(user), strconv.Quote(probeName)),
				Message:    freezeMessage,
				Reason:     ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
}

func freezeBinding() *admissionv1.ValidatingAdmissionPolicyBinding {
	return &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: freezeName, Labels: map[string]string{"app.kubernetes.io/managed-by": "jobset-migrate"}},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        freezeName,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
}

// freeze installs the policy and its binding (replacing a leftover of a
// killed run) and waits until kube-apiserver enforces them.
func (m *migrator) freeze(ctx context.Context) error {
	user, err := m.whoAmI(ctx)
	if err != nil {
		return err
	}
	adm := m.c.Kube.AdmissionregistrationV1()
	if err := upsert(ctx, adm.ValidatingAdmissionPolicies(), freezePolicy(user), func(cur, want *admissionv1.ValidatingAdmissionPolicy) {
		cur.Spec = want.Spec
	}); err != nil {
		return fmt.Errorf("installing ValidatingAdmissionPolicy %s: %w", freezeName, err)
	}
	if err := upsert(ctx, adm.ValidatingAdmissionPolicyBindings(), freezeBinding(), func(cur, want *admissionv1.ValidatingAdmissionPolicyBinding) {
		cur.Spec = want.Spec
	}); err != nil {
		return fmt.Errorf("installing ValidatingAdmissionPolicyBinding %s: %w", freezeName, err)
	}

	// kube-apiserver loads policies asynchronously: go on once it refuses a
	// dry-run create of the probe.
	var last error
	err = m.wait(ctx, "ValidatingAdmissionPolicy "+freezeName+" to be enforced", func(ctx context.Context) (bool, error) {
		_, err := m.c.Dynamic.Resource(upstreamGVR).Namespace(probeNamespace).Create(ctx, probeJobSet(),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), freezeMessage) {
			return true, nil
		}
		last = err
		return false, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (the probe's last error: %v)", err, last)
	}
	if err != nil {
		return err
	}
	m.logf("JobSet writes blocked for everyone but %s (ValidatingAdmissionPolicy %s)", user, freezeName)
	return nil
}

// probeJobSet is the smallest JobSet the CRD's schema accepts.
func probeJobSet() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": upstreamGVR.GroupVersion().String(),
		"kind":       "JobSet",
		"metadata":   map[string]any{"name": probeName, "namespace": probeNamespace},
		"spec": map[string]any{"replicatedJobs": []any{map[string]any{
			"name": "probe",
			"template": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"restartPolicy": "Never",
				"containers":    []any{map[string]any{"name": "probe", "image": "probe"}},
			}}}},
		}}},
	}}
}

// unfreeze removes the policy and its binding, if there. It runs after a
// failure too, so it does not give up when ctx is cancelled.
func (m *migrator) unfreeze(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.o.Timeout)
	defer cancel()
	adm := m.c.Kube.AdmissionregistrationV1()
	removedB, errB := deleteIfPresent[*admissionv1.ValidatingAdmissionPolicyBinding](ctx, adm.ValidatingAdmissionPolicyBindings(), freezeName)
	removedP, errP := deleteIfPresent[*admissionv1.ValidatingAdmissionPolicy](ctx, adm.ValidatingAdmissionPolicies(), freezeName)
	removed := removedB || removedP
	errs := []error{errB, errP}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing ValidatingAdmissionPolicy %s and its binding (JobSet writes stay blocked until they are gone; delete them by hand): %w", freezeName, err)
	}
	if removed {
		m.logf("JobSet writes unblocked (ValidatingAdmissionPolicy %s removed)", freezeName)
	}
	return nil
}

// namedClient is what upsert needs of a typed client of cluster-scoped
// objects.
type namedClient[T metav1.Object] interface {
	Get(context.Context, string, metav1.GetOptions) (T, error)
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Update(context.Context, T, metav1.UpdateOptions) (T, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
}

// upsert creates want, or updates the existing object of its name after
// copySpec gave it want's spec.
func upsert[T metav1.Object](ctx context.Context, c namedClient[T], want T, copySpec func(cur, want T)) error {
	cur, err := c.Get(ctx, want.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = c.Create(ctx, want, metav1.CreateOptions{})
	case err == nil:
		copySpec(cur, want)
		_, err = c.Update(ctx, cur, metav1.UpdateOptions{})
	}
	return err
}

// deleteIfPresent deletes the object name if it exists (reading first, so
// that a run with nothing to remove writes nothing) and reports whether it
// deleted it.
func deleteIfPresent[T metav1.Object](ctx context.Context, c namedClient[T], name string) (bool, error) {
	_, err := c.Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		err = c.Delete(ctx, name, metav1.DeleteOptions{})
	}
	return err == nil, ignoreNotFound(err)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// unchangedSinceBackup lists the CRD's JobSets right before its deletion
// and refuses to go on if any differs from the backup by UID or
// resourceVersion: a write that got past the freeze (say, through a
// kube-apiserver that had not loaded the policy yet) would be lost.
func (m *migrator) unchangedSinceBackup(ctx context.Context, items []*Item) (*unstructured.UnstructuredList, error) {
	list, err := m.c.Dynamic.Resource(upstreamGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing JobSets of the CustomResourceDefinition: %w", err)
	}
	backedUp := map[types.UID]*Item{}
	for _, it := range items {
		backedUp[it.OldUID] = it
	}
	var diffs []string
	for i := range list.Items {
		u := &list.Items[i]
		key := u.GetNamespace() + "/" + u.GetName()
		it, ok := backedUp[u.GetUID()]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("JobSet %s (uid %s) was created since the backup", key, u.GetUID()))
		case u.GetResourceVersion() != it.ResourceVersion:
			diffs = append(diffs, fmt.Sprintf("JobSet %s changed since the backup (resourceVersion %s, backed up at %s)", key, u.GetResourceVersion(), it.ResourceVersion))
		}
		delete(backedUp, u.GetUID())
	}
	for _, it := range backedUp {
		diffs = append(diffs, fmt.Sprintf("JobSet %s (uid %s) was deleted since the backup", it.key(), it.OldUID))
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		return nil, fmt.Errorf("the JobSets differ from the backup, so the CustomResourceDefinition was not deleted; run again to back them up anew:\n  %s",
			strings.Join(diffs, "\n  "))
	}
	return list, nil
}
