package migrate

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

var (
	crdGVR        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	// upstreamGVR is the same resource as the native one; while the CRD
	// exists kube-apiserver serves it from the CRD.
	upstreamGVR = v1alpha2.SchemeGroupVersion.WithResource("jobsets")
)

// apiServiceName is the APIService of the native JobSet API.
const apiServiceName = "v1alpha2.jobset.x-k8s.io"

// automanagedLabel marks the APIService kube-apiserver keeps for a CRD's
// group version.
const automanagedLabel = "kube-aggregator.kubernetes.io/automanaged"

// crdState reports whether the CRD exists and whether it is being deleted.
func (m *migrator) crdState(ctx context.Context) (exists, deleting bool, err error) {
	crd, err := m.c.Dynamic.Resource(crdGVR).Get(ctx, m.o.CRDName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("reading CustomResourceDefinition %s: %w", m.o.CRDName, err)
	}
	return true, crd.GetDeletionTimestamp() != nil, nil
}

// deleteWebhooks deletes upstream's webhook configurations; missing ones
// are fine.
func (m *migrator) deleteWebhooks(ctx context.Context) error {
	adm := m.c.Kube.AdmissionregistrationV1()
	for _, name := range m.o.WebhookConfigurations {
		err := adm.MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})
		if err == nil {
			m.logf("deleted MutatingWebhookConfiguration %s", name)
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting MutatingWebhookConfiguration %s: %w", name, err)
		}
		err = adm.ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})
		if err == nil {
			m.logf("deleted ValidatingWebhookConfiguration %s", name)
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting ValidatingWebhookConfiguration %s: %w", name, err)
		}
	}
	return nil
}

// stopUpstream scales upstream's controller to zero and waits until its
// pods are gone, so that it cannot recreate the Jobs it no longer owns.
func (m *migrator) stopUpstream(ctx context.Context) error {
	if m.o.UpstreamController == "" {
		return nil
	}
	ns, name, ok := strings.Cut(m.o.UpstreamController, "/")
	if !ok || ns == "" || name == "" {
		return fmt.Errorf("upstream controller %q: want <namespace>/<name>", m.o.UpstreamController)
	}
	deps := m.c.Kube.AppsV1().Deployments(ns)
	dep, err := deps.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		m.logf("Deployment %s not found; assuming upstream's controller is not running", m.o.UpstreamController)
		return nil
	}
	if err != nil {
		return err
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 0 {
		if _, err := deps.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("scaling %s to zero: %w", m.o.UpstreamController, err)
		}
		m.logf("scaled Deployment %s to zero", m.o.UpstreamController)
	}
	return m.wait(ctx, "upstream's controller to stop", func(ctx context.Context) (bool, error) {
		d, err := deps.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return d.Status.Replicas == 0, nil
	})
}

// stripFinalizers lets the CRD's deletion remove every JobSet even with
// upstream's controller stopped.
func (m *migrator) stripFinalizers(ctx context.Context) error {
	list, err := m.c.Dynamic.Resource(upstreamGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing JobSets: %w", err)
	}
	for i := range list.Items {
		u := &list.Items[i]
		if len(u.GetFinalizers()) == 0 {
			continue
		}
		_, err := m.c.Dynamic.Resource(upstreamGVR).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(),
			types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing the finalizers of JobSet %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
	}
	return nil
}

// deleteCRD deletes the CRD and waits until it is gone.
func (m *migrator) deleteCRD(ctx context.Context) error {
	err := m.c.Dynamic.Resource(crdGVR).Delete(ctx, m.o.CRDName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting CustomResourceDefinition %s: %w", m.o.CRDName, err)
	}
	if err := m.wait(ctx, "the CustomResourceDefinition to be deleted", func(ctx context.Context) (bool, error) {
		exists, _, err := m.crdState(ctx)
		return !exists, err
	}); err != nil {
		return err
	}
	m.logf("deleted CustomResourceDefinition %s", m.o.CRDName)
	return nil
}

// desiredAPIService is the APIService to register.
func (m *migrator) desiredAPIService() (*unstructured.Unstructured, error) {
	if m.o.APIServiceFile != "" {
		return apiServiceFromFile(m.o.APIServiceFile)
	}
	if len(m.o.CABundle) == 0 {
		return nil, fmt.Errorf("a CA bundle (or an APIService manifest) is needed to register %s", apiServiceName)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": apiServiceName},
		"spec": map[string]any{
			"group":                "jobset.x-k8s.io",
			"version":              "v1alpha2",
			"groupPriorityMinimum": int64(1000),
			"versionPriority":      int64(15),
			"service": map[string]any{
				"namespace": m.o.ServiceNamespace,
				"name":      m.o.ServiceName,
				"port":      int64(m.o.ServicePort),
			},
			"caBundle": base64.StdEncoding.EncodeToString(m.o.CABundle),
		},
	}}, nil
}

// ensureAPIService registers the native API (unless told not to) and waits
// until kube-apiserver reports it Available.
func (m *migrator) ensureAPIService(ctx context.Context) error {
	api := m.c.Dynamic.Resource(apiServiceGVR)
	if m.o.RegisterAPIService {
		want, err := m.desiredAPIService()
		if err != nil {
			return err
		}
		// The CRD's own APIService goes away shortly after the CRD.
		if err := m.wait(ctx, "kube-apiserver to drop the CRD's APIService", func(ctx context.Context) (bool, error) {
			cur, err := api.Get(ctx, apiServiceName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			return cur.GetLabels()[automanagedLabel] == "", nil
		}); err != nil {
			return err
		}
		cur, err := api.Get(ctx, apiServiceName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err := api.Create(ctx, want, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating APIService %s: %w", apiServiceName, err)
			}
			m.logf("created APIService %s", apiServiceName)
		case err != nil:
			return err
		default:
			keepInjectedCABundle(want, cur)
			if equality.Semantic.DeepEqual(cur.Object["spec"], want.Object["spec"]) {
				break
			}
			cur.Object["spec"] = want.Object["spec"]
			if _, err := api.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("updating APIService %s: %w", apiServiceName, err)
			}
		}
	}
	if err := m.wait(ctx, "APIService "+apiServiceName+" to be Available", func(ctx context.Context) (bool, error) {
		cur, err := api.Get(ctx, apiServiceName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return apiServiceAvailable(cur), nil
	}); err != nil {
		return err
	}
	// The first requests through a fresh registration may still fail.
	return m.wait(ctx, "the native JobSet API to answer", func(ctx context.Context) (bool, error) {
		_, err := m.c.JobSets.JobsetV1alpha2().JobSets("").List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
}

func apiServiceAvailable(u *unstructured.Unstructured) bool {
	if labels := u.GetLabels(); labels[automanagedLabel] != "" {
		return false // still the CRD's
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		cm, ok := c.(map[string]any)
		if ok && cm["type"] == "Available" && cm["status"] == "True" {
			return true
		}
	}
	return false
}

// wait polls cond until it holds, fails, or the timeout passes.
func (m *migrator) wait(ctx context.Context, what string, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextTimeout(ctx, m.o.Poll, m.o.Timeout, true, cond)
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// apiServiceFromFile picks the APIService of the native API from a
// manifest file, which may hold many documents (say, a rendered kustomize
// overlay).
func apiServiceFromFile(path string) (*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if err == io.EOF {
			return nil, fmt.Errorf("%s holds no APIService %s", path, apiServiceName)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if u.GetKind() == "APIService" && u.GetName() == apiServiceName {
			return u, nil
		}
	}
}

// keepInjectedCABundle keeps a caBundle that something else (cert-manager's
// cainjector) wrote when the wanted APIService leaves it empty.
func keepInjectedCABundle(want, cur *unstructured.Unstructured) {
	wantCA, _, _ := unstructured.NestedString(want.Object, "spec", "caBundle")
	curCA, _, _ := unstructured.NestedString(cur.Object, "spec", "caBundle")
	if wantCA == "" && curCA != "" {
		_ = unstructured.SetNestedField(want.Object, curCA, "spec", "caBundle")
	}
}
