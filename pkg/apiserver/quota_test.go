package apiserver

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

const jobsetCount corev1.ResourceName = "count/jobsets.jobset.x-k8s.io"

// jobsetQuota is a quota on JobSets whose usage kube-controller-manager has
// (or, with used nil, has not yet) computed.
func jobsetQuota(ns string, hard int64, used *int64) *corev1.ResourceQuota {
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "jobsets", Namespace: ns, ResourceVersion: "1"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{jobsetCount: *resource.NewQuantity(hard, resource.DecimalSI)}},
		Status:     corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{jobsetCount: *resource.NewQuantity(hard, resource.DecimalSI)}},
	}
	if used != nil {
		q.Status.Used = corev1.ResourceList{jobsetCount: *resource.NewQuantity(*used, resource.DecimalSI)}
	}
	return q
}

// quotaAdmission builds the admission chain as the server does (the default
// plugins of NewOptions, the initializers of Config), on a fake cluster
// holding objects, and returns its validating half. disable names plugins
// to turn off, as --disable-admission-plugins does; the admission policy
// plugins are always off, as they read OpenAPI that a fake cluster lacks.
func quotaAdmission(t *testing.T, disable []string, objects ...runtime.Object) (admission.ValidationInterface, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objects...)
	// A real API server gives every write a newer resourceVersion, by which
	// the plugin tells its own last charge from an older informer copy.
	client.PrependReactor("update", "resourcequotas", func(action clienttesting.Action) (bool, runtime.Object, error) {
		q := action.(clienttesting.UpdateAction).GetObject().(*corev1.ResourceQuota)
		rv, _ := strconv.Atoi(q.ResourceVersion)
		q.ResourceVersion = strconv.Itoa(rv + 1)
		return false, nil, nil
	})
	informers := kubeinformers.NewSharedInformerFactory(client, 0)
	o := NewOptions(io.Discard, io.Discard)
	o.Recommended.Admission.DisablePlugins = append([]string{"MutatingAdmissionPolicy", "ValidatingAdmissionPolicy"}, disable...)
	cfg := genericapiserver.NewRecommendedConfig(Codecs)
	cfg.SharedInformerFactory = informers
	// The admission policy plugins need one; quota does not look at it.
	cfg.Authorization.Authorizer = authorizerfactory.NewAlwaysAllowAuthorizer()
	initializers, err := admissionInitializers(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = o.Recommended.Admission.ApplyTo(&cfg.Config, informers, client, dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()),
		utilfeature.DefaultFeatureGate, compatibility.DefaultBuildEffectiveVersion(), initializers...)
	if err != nil {
		t.Fatalf("building the admission chain: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	informers.Start(ctx.Done())
	for typ, synced := range informers.WaitForCacheSync(ctx.Done()) {
		if !synced {
			t.Fatalf("informer for %v did not sync", typ)
		}
	}
	v, ok := cfg.AdmissionControl.(admission.ValidationInterface)
	if !ok {
		t.Fatalf("admission chain %T does not validate", cfg.AdmissionControl)
	}
	return v, client
}

func jobsetAttributes(ns, name string, op admission.Operation, resourceName, subresource string) admission.Attributes {
	js := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: "5"}}
	var old runtime.Object
	var opts runtime.Object = &metav1.CreateOptions{}
	if op == admission.Update {
		old, opts = js.DeepCopy(), &metav1.UpdateOptions{}
	}
	return admission.NewAttributesRecord(js, old, jobset.Kind("JobSet").WithVersion("v1alpha2"), ns, name,
		jobset.Resource(resourceName).WithVersion("v1alpha2"), subresource, op, opts, false, nil)
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
}

// ResourceQuota is on by default, runs with what the server's initializers
// give it, counts JobSet creates against count/jobsets.jobset.x-k8s.io with
// kube-apiserver's 403, and charges what it admits.
func TestResourceQuotaAdmission(t *testing.T) {
	two, one := int64(2), int64(1)
	v, client := quotaAdmission(t, nil,
		namespace("full"), jobsetQuota("full", 2, &two),
		namespace("room"), jobsetQuota("room", 2, &one),
		namespace("uncounted"), jobsetQuota("uncounted", 2, nil),
		namespace("free"),
	)
	ctx := context.Background()

	err := v.Validate(ctx, jobsetAttributes("full", "third", admission.Create, "jobsets", ""), nil)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: jobsets") {
		t.Fatalf("create over the quota: want 403 exceeded quota, got %v", err)
	}
	if code := err.(apierrors.APIStatus).Status().Code; code != http.StatusForbidden {
		t.Errorf("create over the quota: code %d, want 403", code)
	}
	want := "requested: count/jobsets.jobset.x-k8s.io=1, used: count/jobsets.jobset.x-k8s.io=2, limited: count/jobsets.jobset.x-k8s.io=2"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("create over the quota: message %q does not contain %q", err, want)
	}

	// Quota counts creates only: updates, status and scale writes of
	// existing JobSets go through a full quota.
	for _, a := range []admission.Attributes{
		jobsetAttributes("full", "first", admission.Update, "jobsets", ""),
		jobsetAttributes("full", "first", admission.Update, "jobsets", "status"),
		jobsetAttributes("full", "first", admission.Update, "replicatedjobs", "scale"),
	} {
		if err := v.Validate(ctx, a, nil); err != nil {
			t.Errorf("%s %s/%s in a full quota: %v", a.GetOperation(), a.GetResource().Resource, a.GetSubresource(), err)
		}
	}

	if err := v.Validate(ctx, jobsetAttributes("free", "any", admission.Create, "jobsets", ""), nil); err != nil {
		t.Errorf("create without a quota: %v", err)
	}

	// Until kube-controller-manager has counted, nothing is admitted.
	err = v.Validate(ctx, jobsetAttributes("uncounted", "first", admission.Create, "jobsets", ""), nil)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "status unknown for quota: jobsets") {
		t.Errorf("create before usage is known: want 403 status unknown, got %v", err)
	}

	if err := v.Validate(ctx, jobsetAttributes("room", "second", admission.Create, "jobsets", ""), nil); err != nil {
		t.Fatalf("create within the quota: %v", err)
	}
	q, err := client.CoreV1().ResourceQuotas("room").Get(ctx, "jobsets", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if used := q.Status.Used[jobsetCount]; used.Value() != 2 {
		t.Errorf("quota used after an admitted create = %s, want 2 (charged)", used.String())
	}
	// The charge counts at once: the next create no longer fits.
	err = v.Validate(ctx, jobsetAttributes("room", "third", admission.Create, "jobsets", ""), nil)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") {
		t.Errorf("create after the quota was charged full: want 403 exceeded quota, got %v", err)
	}
}

// --disable-admission-plugins=ResourceQuota turns it off like any other.
func TestResourceQuotaAdmissionCanBeDisabled(t *testing.T) {
	v, _ := quotaAdmission(t, []string{"ResourceQuota"}, namespace("full"), jobsetQuota("full", 0, new(int64)))
	if err := v.Validate(context.Background(), jobsetAttributes("full", "one", admission.Create, "jobsets", ""), nil); err != nil {
		t.Errorf("create with ResourceQuota disabled: %v", err)
	}
}
