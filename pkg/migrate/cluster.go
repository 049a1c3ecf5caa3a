package migrate

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"

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

// stopUpstream scales upstream's controller to zero, waits until its pods
// are gone and its leader election Lease is free, so that it cannot
// recreate the Jobs it no longer owns.
func (m *migrator) stopUpstream(ctx context.Context) error {
	if err := m.stopDeployment(ctx); err != nil {
		return err
	}
	return m.waitLeaseFree(ctx)
}

// upstreamDeployment reads upstream's controller Deployment; nil when
// none is named, or none is found and the operator said that none runs.
func (m *migrator) upstreamDeployment(ctx context.Context) (*appsv1.Deployment, error) {
	if m.o.UpstreamController == "" {
		return nil, nil // validate allows this only with NoUpstreamController
	}
	ns, name, err := splitName("upstream controller", m.o.UpstreamController)
	if err != nil {
		return nil, err
	}
	dep, err := m.c.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if m.o.NoUpstreamController {
			return nil, nil
		}
		// Helm installs name it differently; both controllers would then
		// manage the same Jobs.
		return nil, fmt.Errorf("Deployment %s of upstream's controller not found: name it with --upstream-controller, "+
			"or pass --no-upstream-controller if no upstream controller runs in this cluster", m.o.UpstreamController)
	}
	if err != nil {
		return nil, fmt.Errorf("reading Deployment %s: %w", m.o.UpstreamController, err)
	}
	return dep, nil
}

func (m *migrator) stopDeployment(ctx context.Context) error {
	dep, err := m.upstreamDeployment(ctx)
	if err != nil {
		return err
	}
	if dep == nil {
		m.logf("no Deployment of upstream's controller (%q); none runs, as told", m.o.UpstreamController)
		return nil
	}
	ns, name := dep.Namespace, dep.Name
	deps := m.c.Kube.AppsV1().Deployments(ns)
	// An empty selector would match every pod of the namespace.
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil || dep.Spec.Selector == nil || sel.Empty() {
		return fmt.Errorf("Deployment %s: cannot find its pods by its selector %v", m.o.UpstreamController, dep.Spec.Selector)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 0 {
		if _, err := deps.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("scaling %s to zero: %w", m.o.UpstreamController, err)
		}
		m.logf("scaled Deployment %s to zero", m.o.UpstreamController)
	}
	// A terminating pod may still be reconciling: wait until no pod of
	// the Deployment is left at all.
	var left []string
	err = m.wait(ctx, "upstream's controller to stop", func(ctx context.Context) (bool, error) {
		d, err := deps.Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		if err == nil && (d.Status.ObservedGeneration < d.Generation || d.Status.Replicas != 0) {
			return false, nil
		}
		pods, err := m.c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return false, err
		}
		left = left[:0]
		for _, p := range pods.Items {
			left = append(left, p.Name)
		}
		return len(left) == 0, nil
	})
	if err != nil && len(left) > 0 {
		return fmt.Errorf("%w; pods left: %s", err, strings.Join(left, ", "))
	}
	return err
}

// waitLeaseFree waits until upstream's leader election Lease is released
// (no holder) or expired (not renewed within its duration), or is absent:
// then no upstream controller acts, whatever its Deployment is called.
func (m *migrator) waitLeaseFree(ctx context.Context) error {
	ns, name, err := splitName("upstream lease", m.o.UpstreamLease)
	if err != nil {
		return err
	}
	var holder string
	err = m.wait(ctx, "upstream's leader election Lease "+m.o.UpstreamLease+" to be released or to expire", func(ctx context.Context) (bool, error) {
		l, err := m.c.Kube.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		holder = ptr.Deref(l.Spec.HolderIdentity, "")
		return holder == "" || leaseExpired(l, time.Now()), nil
	})
	if err != nil && holder != "" {
		return fmt.Errorf("%w: held by %q; an upstream controller still runs (name its Deployment with --upstream-controller), "+
			"or, if none does, delete the Lease", err, holder)
	}
	return err
}

// leaseExpired reports whether the holder let the Lease lapse. Without a
// renew time or duration it counts as held.
func leaseExpired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second).Before(now)
}

// stripFinalizers lets the CRD's deletion remove every JobSet of list even
// with upstream's controller stopped.
func (m *migrator) stripFinalizers(ctx context.Context, list *unstructured.UnstructuredList) error {
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
