package migrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	jsfake "github.com/nativejobset/jobset/pkg/generated/clientset/versioned/fake"
)

const ns = "team"

var workloadGVR = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta1", Resource: "workloads"}

// upstreamJobSet is a JobSet as kube-apiserver serves it from the CRD.
func upstreamJobSet(name, uid string, restarts int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2",
		"kind":       "JobSet",
		"metadata": map[string]any{
			"name": name, "namespace": ns, "uid": uid, "resourceVersion": "42", "generation": int64(3),
			"labels":      map[string]any{"app": name},
			"annotations": map[string]any{"owner": "ml-team"},
			"finalizers":  []any{"example.com/keep"},
		},
		"spec": map[string]any{
			"failurePolicy": map[string]any{"maxRestarts": int64(5)},
			"replicatedJobs": []any{map[string]any{
				"name": "workers", "replicas": int64(2),
				"template": map[string]any{"spec": map[string]any{
					"parallelism": int64(2), "completions": int64(2),
					"template": map[string]any{"spec": map[string]any{
						"restartPolicy": "Never",
						"containers":    []any{map[string]any{"name": "w", "image": "busybox"}},
					}},
				}},
			}},
		},
		"status": map[string]any{
			"restarts":                restarts,
			"restartsCountTowardsMax": restarts,
			"replicatedJobsStatus": []any{map[string]any{
				"name": "workers", "ready": int64(2), "active": int64(2), "succeeded": int64(0), "failed": int64(0), "suspended": int64(0),
			}},
		},
	}}
}

func owner(name, uid string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: name, UID: types.UID(uid),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
}

func upstreamJob(js, uid string, idx int) *batchv1.Job {
	name := js + "-workers-" + string(rune('0'+idx))
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: ns, UID: types.UID("job-" + name),
		Labels:          map[string]string{v1alpha2.JobSetNameKey: js, v1alpha2.JobSetUIDKey: uid, v1alpha2.RestartsKey: "1"},
		OwnerReferences: owner(js, uid),
	}}
}

type env struct {
	t    *testing.T
	dyn  *dynamicfake.FakeDynamicClient
	kube *kfake.Clientset
	jsc  *jsfake.Clientset
	out  bytes.Buffer
	dir  string

	// probes counts the freeze's dry-run probes; the first
	// probesBeforeEnforced of them pass as if kube-apiserver had not loaded
	// the policy yet.
	probes, probesBeforeEnforced int
}

var upstreamPodLabels = map[string]string{"control-plane": "controller-manager"}

// frozen reports whether the freeze's policy and binding are installed,
// letting only the user "admin" write JobSets.
func (e *env) frozen() bool {
	ctx := context.Background()
	adm := e.kube.AdmissionregistrationV1()
	p, err := adm.ValidatingAdmissionPolicies().Get(ctx, freezeName, metav1.GetOptions{})
	if err != nil {
		return false
	}
	b, err := adm.ValidatingAdmissionPolicyBindings().Get(ctx, freezeName, metav1.GetOptions{})
	if err != nil || b.Spec.PolicyName != freezeName || !reflect.DeepEqual(b.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
		return false
	}
	return len(p.Spec.Validations) == 1 && strings.Contains(p.Spec.Validations[0].Expression, `request.userInfo.username == "admin"`)
}

func newEnv(t *testing.T, jobsets ...*unstructured.Unstructured) *env {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "jobsets.jobset.x-k8s.io"},
	}}
	objs := []runtime.Object{crd}
	var kubeObjs []runtime.Object
	for _, js := range jobsets {
		objs = append(objs, js)
		uid := string(js.GetUID())
		kubeObjs = append(kubeObjs, upstreamJob(js.GetName(), uid, 0), upstreamJob(js.GetName(), uid, 1),
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: js.GetName(), Namespace: ns, UID: types.UID("svc-" + uid), OwnerReferences: owner(js.GetName(), uid)}},
			&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + js.GetName(), Namespace: ns, UID: types.UID("pvc-" + uid), OwnerReferences: owner(js.GetName(), uid)}})
	}
	kubeObjs = append(kubeObjs,
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: ns, UID: "unrelated"}},
		&admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "jobset-mutating-webhook-configuration"}},
		&admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "jobset-validating-webhook-configuration"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "jobset-controller-manager", Namespace: "jobset-system"}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: upstreamPodLabels}}},
		// Not upstream's: the Deployment's selector does not match it.
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "jobset-apiserver-0", Namespace: "jobset-system", Labels: map[string]string{"app": "jobset-apiserver"}}},
	)
	e := &env{t: t, kube: kfake.NewSimpleClientset(kubeObjs...), jsc: jsfake.NewSimpleClientset(), dir: t.TempDir()}
	e.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		upstreamGVR: "JobSetList", crdGVR: "CustomResourceDefinitionList", apiServiceGVR: "APIServiceList", workloadGVR: "WorkloadList",
	}, objs...)
	// kube-aggregator reports a registered APIService Available.
	e.dyn.PrependReactor("create", "apiservices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.CreateAction).GetObject().(*unstructured.Unstructured)
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Available", "status": "True"}}, "status", "conditions")
		return false, nil, nil
	})
	// kube-apiserver tells the run who it is.
	e.kube.PrependReactor("create", "selfsubjectreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.SelfSubjectReview).DeepCopy()
		r.Status.UserInfo.Username = "admin"
		return true, r, nil
	})
	// kube-apiserver enforces the freeze once its binding exists: the dry-run
	// probe is refused; without it the probe is admitted (and, being a dry
	// run, not stored).
	e.dyn.PrependReactor("create", "jobsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.CreateAction).GetObject().(*unstructured.Unstructured)
		if u.GetName() != probeName {
			return false, nil, nil
		}
		e.probes++
		if e.frozen() && e.probes > e.probesBeforeEnforced {
			return true, nil, apierrors.NewForbidden(upstreamGVR.GroupResource(), probeName, errors.New(freezeMessage))
		}
		return true, u, nil
	})
	// The native server assigns UIDs.
	e.jsc.PrependReactor("create", "jobsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		js := a.(k8stesting.CreateAction).GetObject().(*v1alpha2.JobSet)
		js.UID = types.UID("native-" + js.Name)
		return false, nil, nil
	})
	return e
}

func (e *env) run(mod func(*Options)) error {
	o := Options{BackupDir: e.dir, RegisterAPIService: true, CABundle: []byte("pem"), UpstreamController: "jobset-system/jobset-controller-manager",
		Out: &e.out, Timeout: 5 * time.Second, Poll: time.Millisecond}
	if mod != nil {
		mod(&o)
	}
	return Run(context.Background(), Clients{Dynamic: e.dyn, Kube: e.kube, JobSets: e.jsc}, o)
}

func writeActions(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
			out = append(out, v+" "+a.GetResource().Resource)
		}
	}
	return out
}

func (e *env) writes() []string {
	return append(append(writeActions(e.dyn.Actions()), writeActions(e.kube.Actions())...), writeActions(e.jsc.Actions())...)
}

func (e *env) job(name string) *batchv1.Job {
	e.t.Helper()
	j, err := e.kube.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

func (e *env) crdExists() bool {
	_, err := e.dyn.Resource(crdGVR).Get(context.Background(), "jobsets.jobset.x-k8s.io", metav1.GetOptions{})
	return err == nil
}

// checkMigrated asserts the end state of one JobSet.
func (e *env) checkMigrated(name string, restarts int32) {
	e.t.Helper()
	ctx := context.Background()
	js, err := e.jsc.JobsetV1alpha2().JobSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("native JobSet %s: %v", name, err)
	}
	if _, ok := js.Annotations[v1alpha2.MigratingKey]; ok {
		e.t.Errorf("%s still annotated %s", name, v1alpha2.MigratingKey)
	}
	if !reflect.DeepEqual(js.Labels, map[string]string{"app": name}) || !reflect.DeepEqual(js.Annotations, map[string]string{"owner": "ml-team"}) {
		e.t.Errorf("%s metadata = %v %v", name, js.Labels, js.Annotations)
	}
	if len(js.Spec.ReplicatedJobs) != 1 || *js.Spec.ReplicatedJobs[0].Replicas != 2 || js.Spec.FailurePolicy.MaxRestarts != 5 {
		e.t.Errorf("%s spec = %+v", name, js.Spec)
	}
	if js.Spec.SuccessPolicy == nil || js.Spec.SuccessPolicy.Operator != v1alpha2.OperatorAll {
		e.t.Errorf("%s not defaulted: %+v", name, js.Spec.SuccessPolicy)
	}
	st := js.Status
	if st.Restarts != restarts || ptr.Deref(st.ExecutionAttempts, 0) != restarts || len(st.ReplicatedJobsStatus) != 1 || st.ReplicatedJobsStatus[0].Ready != 2 {
		e.t.Errorf("%s status = %+v", name, st)
	}
	for _, jn := range []string{name + "-workers-0", name + "-workers-1"} {
		j := e.job(jn)
		if !reflect.DeepEqual(j.OwnerReferences, owner(name, string(js.UID))) {
			e.t.Errorf("Job %s owners = %+v", jn, j.OwnerReferences)
		}
		if j.Labels[v1alpha2.JobSetUIDKey] != string(js.UID) {
			e.t.Errorf("Job %s jobset-uid = %q", jn, j.Labels[v1alpha2.JobSetUIDKey])
		}
		if j.UID != types.UID("job-"+jn) {
			e.t.Errorf("Job %s replaced", jn)
		}
	}
	svc, _ := e.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	pvc, _ := e.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-"+name, metav1.GetOptions{})
	if !reflect.DeepEqual(svc.OwnerReferences, owner(name, string(js.UID))) || !reflect.DeepEqual(pvc.OwnerReferences, owner(name, string(js.UID))) {
		e.t.Errorf("%s: Service owners %+v, PVC owners %+v", name, svc.OwnerReferences, pvc.OwnerReferences)
	}
}

func (e *env) checkUpstreamGone() {
	e.t.Helper()
	ctx := context.Background()
	if e.crdExists() {
		e.t.Error("CRD not deleted")
	}
	if _, err := e.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "jobset-mutating-webhook-configuration", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		e.t.Errorf("mutating webhook configuration: %v", err)
	}
	if _, err := e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "jobset-validating-webhook-configuration", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		e.t.Errorf("validating webhook configuration: %v", err)
	}
	d, _ := e.kube.AppsV1().Deployments("jobset-system").Get(ctx, "jobset-controller-manager", metav1.GetOptions{})
	if *d.Spec.Replicas != 0 {
		e.t.Errorf("upstream controller still has %d replicas", *d.Spec.Replicas)
	}
	as, err := e.dyn.Resource(apiServiceGVR).Get(ctx, apiServiceName, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("APIService: %v", err)
	}
	svc, _, _ := unstructured.NestedMap(as.Object, "spec", "service")
	if svc["namespace"] != "jobset-system" || svc["name"] != "jobset-apiserver" {
		e.t.Errorf("APIService service = %v", svc)
	}
	if j := e.job("unrelated"); len(j.OwnerReferences) != 0 {
		e.t.Errorf("unrelated Job touched: %+v", j.OwnerReferences)
	}
}

func TestMigrate(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 1), upstreamJobSet("b", "old-b", 0))
	if err := e.run(nil); err != nil {
		t.Fatalf("%v\n%s", err, e.out.String())
	}
	e.checkUpstreamGone()
	e.checkMigrated("a", 1)
	e.checkMigrated("b", 0)

	// The backups hold what was migrated.
	data, err := os.ReadFile(backupFile(e.dir, ns, "a"))
	if err != nil {
		t.Fatal(err)
	}
	var it Item
	if err := json.Unmarshal(data, &it); err != nil || it.OldUID != "old-a" || len(it.Children) != 4 {
		t.Fatalf("backup = %+v, %v", it, err)
	}

	// A second run finds nothing left to do and changes nothing.
	e.dyn.ClearActions()
	e.kube.ClearActions()
	e.jsc.ClearActions()
	if err := e.run(nil); err != nil {
		t.Fatalf("second run: %v\n%s", err, e.out.String())
	}
	for _, w := range e.writes() {
		if !strings.HasPrefix(w, "delete ") || !strings.HasSuffix(w, "webhookconfigurations") {
			t.Errorf("second run wrote %s", w)
		}
	}
	e.checkMigrated("a", 1)
}

func TestInvalidJobSetChangesNothing(t *testing.T) {
	bad := upstreamJobSet("bad", "old-bad", 0)
	rjs, _, _ := unstructured.NestedSlice(bad.Object, "spec", "replicatedJobs")
	rjs[0].(map[string]any)["name"] = "Not_A_DNS_Label"
	_ = unstructured.SetNestedSlice(bad.Object, rjs, "spec", "replicatedJobs")
	unknown := upstreamJobSet("unknown", "old-unknown", 0)
	_ = unstructured.SetNestedField(unknown.Object, "x", "spec", "notAField")
	e := newEnv(t, upstreamJobSet("good", "old-good", 0), bad, unknown)

	err := e.run(nil)
	var inv *InvalidError
	if err == nil || !errors.As(err, &inv) {
		t.Fatalf("err = %v, want an InvalidError", err)
	}
	msg := err.Error()
	for _, want := range []string{"JobSet team/bad: spec.replicatedJobs[0].name", "JobSet team/unknown:", "notAField"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "team/good") {
		t.Errorf("valid JobSet reported:\n%s", msg)
	}
	if w := e.writes(); len(w) != 0 {
		t.Fatalf("writes despite invalid JobSets: %v", w)
	}
	if entries, _ := os.ReadDir(e.dir); len(entries) != 0 {
		t.Fatalf("backups written: %v", entries)
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 1))
	if err := e.run(func(o *Options) { o.DryRun = true }); err != nil {
		t.Fatal(err)
	}
	if w := e.writes(); len(w) != 0 {
		t.Fatalf("dry run wrote: %v", w)
	}
	out := e.out.String()
	for _, want := range []string{"dry run", "JobSet team/a (uid old-a, restarts 1): orphan Job a-workers-0, Job a-workers-1, PersistentVolumeClaim data-a, Service a",
		"delete CustomResourceDefinition jobsets.jobset.x-k8s.io", "register APIService v1alpha2.jobset.x-k8s.io"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}

// A run that stops once the CRD is gone (as a crash would) is finished by
// the next run, from the backups.
func TestResumeAfterCRDDeleted(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 2))
	if err := e.run(func(o *Options) { o.StopAfter = StepCRDDeleted }); err != nil {
		t.Fatal(err)
	}
	if e.crdExists() {
		t.Fatal("CRD still there")
	}
	if j := e.job("a-workers-0"); len(j.OwnerReferences) != 0 {
		t.Fatalf("Job not orphaned: %+v", j.OwnerReferences)
	}
	if l, _ := e.jsc.JobsetV1alpha2().JobSets(ns).List(context.Background(), metav1.ListOptions{}); len(l.Items) != 0 {
		t.Fatalf("native JobSets created too early: %d", len(l.Items))
	}
	// The dry run of the second half reads the backups.
	e.out.Reset()
	if err := e.run(func(o *Options) { o.DryRun = true }); err != nil || !strings.Contains(e.out.String(), "backups in") {
		t.Fatalf("dry run after the crash: %v\n%s", err, e.out.String())
	}
	if err := e.run(nil); err != nil {
		t.Fatalf("%v\n%s", err, e.out.String())
	}
	e.checkUpstreamGone()
	e.checkMigrated("a", 2)
}

// A run that stops after orphaning, with the CRD still there, keeps the
// orphaned children in the plan of the next run.
func TestResumeAfterOrphaning(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 0))
	if err := e.run(func(o *Options) { o.StopAfter = StepOrphaned }); err != nil {
		t.Fatal(err)
	}
	if !e.crdExists() {
		t.Fatal("CRD deleted too early")
	}
	if err := e.run(nil); err != nil {
		t.Fatalf("%v\n%s", err, e.out.String())
	}
	e.checkMigrated("a", 0)
}

// A run that stops with the native JobSet created but not yet adopted
// finishes the adoption next time.
func TestResumeAfterCreate(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 1))
	if err := e.run(func(o *Options) { o.StopAfter = StepCreated }); err != nil {
		t.Fatal(err)
	}
	js, err := e.jsc.JobsetV1alpha2().JobSets(ns).Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil || js.Annotations[v1alpha2.MigratingKey] != "old-a" || js.Status.Restarts != 1 {
		t.Fatalf("after create: %+v, %v", js, err)
	}
	if err := e.run(nil); err != nil {
		t.Fatalf("%v\n%s", err, e.out.String())
	}
	e.checkMigrated("a", 1)
}

func TestExistingNativeJobSetRefused(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 0))
	if err := e.run(func(o *Options) { o.StopAfter = StepAPIService }); err != nil {
		t.Fatal(err)
	}
	other := &v1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns}}
	if _, err := e.jsc.JobsetV1alpha2().JobSets(ns).Create(context.Background(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := e.run(nil)
	if err == nil || !strings.Contains(err.Error(), "already exists natively") {
		t.Fatalf("err = %v", err)
	}
	if j := e.job("a-workers-0"); len(j.OwnerReferences) != 0 {
		t.Fatalf("children given to a foreign JobSet: %+v", j.OwnerReferences)
	}
}

func TestBadOptions(t *testing.T) {
	e := newEnv(t)
	if err := e.run(func(o *Options) { o.StopAfter = "nope" }); err == nil || !strings.Contains(err.Error(), "unknown step") {
		t.Fatalf("err = %v", err)
	}
	if err := e.run(func(o *Options) { o.BackupDir = "" }); err == nil {
		t.Fatal("no error without a backup directory")
	}
}

// The APIService can come from a rendered multi-document manifest; a
// caBundle injected meanwhile (cert-manager) survives a later run.
func TestAPIServiceFromManifest(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 0))
	manifest := `apiVersion: v1
kind: Namespace
metadata:
  name: jobset-system
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1alpha2.jobset.x-k8s.io
  annotations:
    cert-manager.io/inject-ca-from: jobset-system/jobset-apiserver
spec:
  group: jobset.x-k8s.io
  version: v1alpha2
  groupPriorityMinimum: 1000
  versionPriority: 15
  service: {name: apiserver, namespace: js, port: 8443}
  caBundle: ""
`
	path := e.dir + "/../manifest.yaml"
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	withFile := func(o *Options) { o.APIServiceFile, o.CABundle = path, nil }
	if err := e.run(withFile); err != nil {
		t.Fatalf("%v\n%s", err, e.out.String())
	}
	api := e.dyn.Resource(apiServiceGVR)
	as, err := api.Get(context.Background(), apiServiceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc, _, _ := unstructured.NestedMap(as.Object, "spec", "service"); svc["name"] != "apiserver" || svc["namespace"] != "js" {
		t.Fatalf("service = %v", svc)
	}
	_ = unstructured.SetNestedField(as.Object, "aW5qZWN0ZWQ=", "spec", "caBundle")
	if _, err := api.Update(context.Background(), as, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.run(withFile); err != nil {
		t.Fatal(err)
	}
	as, _ = api.Get(context.Background(), apiServiceName, metav1.GetOptions{})
	if ca, _, _ := unstructured.NestedString(as.Object, "spec", "caBundle"); ca != "aW5qZWN0ZWQ=" {
		t.Fatalf("injected caBundle replaced by %q", ca)
	}

	if err := os.WriteFile(path, []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e2 := newEnv(t, upstreamJobSet("a", "old-a", 0))
	if err := e2.run(withFile); err == nil || !strings.Contains(err.Error(), "holds no APIService") {
		t.Fatalf("err = %v", err)
	}
	if w := e2.writes(); len(w) != 0 || !e2.crdExists() {
		t.Fatalf("changes despite an unusable APIService manifest: %v", w)
	}
}

// Objects of an extra child resource (Kueue's Workload) move with the Jobs.
func TestExtraChildResources(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 0))
	wl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
		"metadata": map[string]any{"name": "jobset-a", "namespace": ns, "uid": "wl-uid"},
	}}
	wl.SetOwnerReferences(owner("a", "old-a"))
	if _, err := e.dyn.Resource(workloadGVR).Namespace(ns).Create(context.Background(), wl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.run(func(o *Options) { o.ExtraChildResources = []schema.GroupVersionResource{workloadGVR} }); err != nil {
		t.Fatalf("%v\n%s", err, e.out.String())
	}
	e.checkMigrated("a", 0)
	got, err := e.dyn.Resource(workloadGVR).Namespace(ns).Get(context.Background(), "jobset-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if refs := got.GetOwnerReferences(); !reflect.DeepEqual(refs, owner("a", "native-a")) {
		t.Fatalf("Workload owners = %+v", refs)
	}
}

func TestRefusesJobSetBeingDeleted(t *testing.T) {
	js := upstreamJobSet("going", "old-going", 0)
	js.SetDeletionTimestamp(ptr.To(metav1.Now()))
	e := newEnv(t, js)
	if err := e.run(nil); err == nil || !strings.Contains(err.Error(), "metadata.deletionTimestamp") {
		t.Fatalf("err = %v", err)
	}
	if w := e.writes(); len(w) != 0 {
		t.Fatalf("writes: %v", w)
	}
}

// Without upstream's CRD and without backups there is nothing to do, and
// nothing is registered.
func TestNothingToMigrate(t *testing.T) {
	e := newEnv(t)
	if err := e.dyn.Resource(crdGVR).Delete(context.Background(), "jobsets.jobset.x-k8s.io", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.dyn.ClearActions()
	if err := e.run(nil); err != nil {
		t.Fatal(err)
	}
	if w := e.writes(); len(w) != 0 || !strings.Contains(e.out.String(), "nothing to migrate") {
		t.Fatalf("writes %v, output %q", w, e.out.String())
	}
}

// inPlace makes an upstream JobSet restart in place, as validation wants it.
func inPlace(u *unstructured.Unstructured) *unstructured.Unstructured {
	_ = unstructured.SetNestedField(u.Object, "InPlaceRestart", "spec", "failurePolicy", "restartStrategy")
	rjs, _, _ := unstructured.NestedSlice(u.Object, "spec", "replicatedJobs")
	spec := rjs[0].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	spec["backoffLimit"] = int64(2147483647)
	spec["podReplacementPolicy"] = "Failed"
	spec["template"].(map[string]any)["spec"].(map[string]any)["restartPolicy"] = "OnFailure"
	_ = unstructured.SetNestedSlice(u.Object, rjs, "spec", "replicatedJobs")
	return u
}

func TestRunningInPlaceJobSetRefused(t *testing.T) {
	running := inPlace(upstreamJobSet("inplace", "old-inplace", 0))
	done := inPlace(upstreamJobSet("inplace-done", "old-inplace-done", 0))
	_ = unstructured.SetNestedSlice(done.Object, []any{map[string]any{
		"type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": "jobset completed successfully",
		"lastTransitionTime": "2026-01-01T00:00:00Z",
	}}, "status", "conditions")
	e := newEnv(t, running, done)
	err := e.run(func(o *Options) { o.DryRun = true })
	if err == nil {
		t.Fatal("a running InPlaceRestart JobSet was accepted")
	}
	msg := err.Error()
	for _, want := range []string{"JobSet team/inplace: spec.failurePolicy.restartStrategy", "cannot be migrated until it has finished"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "inplace-done") {
		t.Errorf("finished InPlaceRestart JobSet refused:\n%s", msg)
	}
	if w := e.writes(); len(w) != 0 {
		t.Fatalf("writes despite the refusal: %v", w)
	}
}

// onCRDDelete calls f when the run deletes the CRD, before the delete.
func (e *env) onCRDDelete(f func()) {
	e.dyn.PrependReactor("delete", "customresourcedefinitions", func(k8stesting.Action) (bool, runtime.Object, error) {
		f()
		return false, nil, nil
	})
}

// backups lists the backup directory's file names.
func (e *env) backups() []string {
	e.t.Helper()
	entries, err := os.ReadDir(e.dir)
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
	}
	return names
}

// untouched asserts that a failed run left the JobSets under the CRD with
// their children and wrote no backup.
func (e *env) untouched(name string) {
	e.t.Helper()
	if !e.crdExists() {
		e.t.Fatal("CRD deleted")
	}
	if j := e.job(name + "-workers-0"); len(j.OwnerReferences) != 1 {
		e.t.Fatalf("Job orphaned: %+v", j.OwnerReferences)
	}
	if b := e.backups(); len(b) != 0 {
		e.t.Fatalf("backups written: %v", b)
	}
}

func TestMissingUpstreamDeploymentRefused(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 0))
	if err := e.kube.AppsV1().Deployments("jobset-system").Delete(context.Background(), "jobset-controller-manager", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.kube.ClearActions()
	err := e.run(nil)
	if err == nil || !strings.Contains(err.Error(), "jobset-system/jobset-controller-manager") || !strings.Contains(err.Error(), "--no-upstream-controller") {
		t.Fatalf("err = %v, want a refusal naming the Deployment and --no-upstream-controller", err)
	}
	if w := e.writes(); len(w) != 0 {
		t.Fatalf("writes despite the refusal: %v", w)
	}
	e.untouched("a")

	// An empty name needs the flag as well.
	if err := e.run(func(o *Options) { o.UpstreamController = "" }); err == nil || !strings.Contains(err.Error(), "--no-upstream-controller") {
		t.Fatalf("empty --upstream-controller: err = %v", err)
	}
	e.untouched("a")

	// The operator's word that none runs lets the run go on.
	if err := e.run(func(o *Options) { o.NoUpstreamController = true }); err != nil {
		t.Fatalf("%v\n%s", err, e.out.String())
	}
	e.checkMigrated("a", 0)
}

func TestBadUpstreamNames(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 0))
	for _, mod := range []func(*Options){
		func(o *Options) { o.UpstreamController = "no-namespace" },
		func(o *Options) { o.UpstreamLease = "jobset-system/" },
		func(o *Options) { o.UpstreamLease = "a/b/c" },
	} {
		if err := e.run(mod); err == nil || !strings.Contains(err.Error(), "want <namespace>/<name>") {
			t.Errorf("err = %v", err)
		}
	}
	if w := e.writes(); len(w) != 0 {
		t.Fatalf("writes: %v", w)
	}
}

func upstreamLease(holder string, renewed time.Time, seconds int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "6d4f6a47.x-k8s.io", Namespace: "jobset-system"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(seconds),
			RenewTime: ptr.To(metav1.NewMicroTime(renewed))},
	}
}

// Upstream's controller may run under another Deployment name: the run
// waits until its leader election Lease is released.
func TestWaitsForUpstreamLease(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 0))
	leaseGVR := coordinationv1.SchemeGroupVersion.WithResource("leases")
	if err := e.kube.Tracker().Add(upstreamLease("jobset-controller-manager-7d9f_1", time.Now(), 3600)); err != nil {
		t.Fatal(err)
	}
	gets := 0
	e.kube.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		if gets == 3 { // the holder steps down
			if err := e.kube.Tracker().Update(leaseGVR, upstreamLease("", time.Now(), 3600), "jobset-system"); err != nil {
				t.Error(err)
			}
		}
		return false, nil, nil
	})
	heldAtBackup := true
	syncs := 0
	hookSyncDir(t, func(string) {
		if syncs++; syncs == 1 {
			l, err := e.kube.Tracker().Get(leaseGVR, "jobset-system", "6d4f6a47.x-k8s.io")
			heldAtBackup = err != nil || ptr.Deref(l.(*coordinationv1.Lease).Spec.HolderIdentity, "") != ""
		}
	})
	if err := e.run(nil); err != nil {
		t.Fatalf("%v\n%s", err, e.out.String())
	}
	if gets < 3 || heldAtBackup {
		t.Fatalf("went on with the Lease held (%d reads, held at the backup: %v)", gets, heldAtBackup)
	}
	e.checkMigrated("a", 0)
}

func TestExpiredUpstreamLease(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 0))
	if err := e.kube.Tracker().Add(upstreamLease("gone-pod", time.Now().Add(-time.Hour), 15)); err != nil {
		t.Fatal(err)
	}
	if err := e.run(nil); err != nil {
		t.Fatalf("%v\n%s", err, e.out.String())
	}
	e.checkMigrated("a", 0)
}

// A Lease that stays held stops the run before the backup, even when the
// operator said that no upstream controller runs.
func TestHeldUpstreamLeaseStops(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 0))
	if err := e.kube.Tracker().Add(upstreamLease("helm-jobset-controller-5c6b_2", time.Now(), 3600)); err != nil {
		t.Fatal(err)
	}
	err := e.run(func(o *Options) {
		o.UpstreamController, o.NoUpstreamController = "", true
		o.Timeout = 20 * time.Millisecond
	})
	if err == nil || !strings.Contains(err.Error(), `held by "helm-jobset-controller-5c6b_2"`) || !strings.Contains(err.Error(), "delete the Lease") {
		t.Fatalf("err = %v", err)
	}
	e.untouched("a")
}

func TestLeaseExpired(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		lease *coordinationv1.Lease
		want  bool
	}{
		{upstreamLease("x", now.Add(-16*time.Second), 15), true},
		{upstreamLease("x", now.Add(-14*time.Second), 15), false},
		{&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("x")}}, false},
	} {
		if got := leaseExpired(tc.lease, now); got != tc.want {
			t.Errorf("leaseExpired(%+v) = %v, want %v", tc.lease.Spec, got, tc.want)
		}
	}
}

// A terminating pod of upstream's controller may still reconcile: the run
// waits until it is gone.
func TestWaitsForTerminatingUpstreamPods(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 0))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "jobset-controller-manager-7d9f-x2", Namespace: "jobset-system",
		Labels: upstreamPodLabels, DeletionTimestamp: ptr.To(metav1.Now()), Finalizers: []string{"example.com/hold"}}}
	if err := e.kube.Tracker().Add(pod); err != nil {
		t.Fatal(err)
	}
	podGVR := corev1.SchemeGroupVersion.WithResource("pods")
	lists := 0
	e.kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if lists++; lists == 3 { // the kubelet is done with it
			if err := e.kube.Tracker().Delete(podGVR, "jobset-system", pod.Name); err != nil {
				t.Error(err)
			}
		}
		return false, nil, nil
	})
	podAtBackup := true
	syncs := 0
	hookSyncDir(t, func(string) {
		if syncs++; syncs == 1 {
			_, err := e.kube.Tracker().Get(podGVR, "jobset-system", pod.Name)
			podAtBackup = !apierrors.IsNotFound(err)
		}
	})
	if err := e.run(nil); err != nil {
		t.Fatalf("%v\n%s", err, e.out.String())
	}
	if lists < 3 || podAtBackup {
		t.Fatalf("went on with upstream's pod terminating (%d lists, pod there at the backup: %v)", lists, podAtBackup)
	}
	e.checkMigrated("a", 0)
}

func TestTerminatingUpstreamPodStops(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 0))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "jobset-controller-manager-7d9f-x2", Namespace: "jobset-system",
		Labels: upstreamPodLabels, DeletionTimestamp: ptr.To(metav1.Now()), Finalizers: []string{"example.com/hold"}}}
	if err := e.kube.Tracker().Add(pod); err != nil {
		t.Fatal(err)
	}
	err := e.run(func(o *Options) { o.Timeout = 20 * time.Millisecond })
	if err == nil || !strings.Contains(err.Error(), "pods left: jobset-controller-manager-7d9f-x2") {
		t.Fatalf("err = %v", err)
	}
	e.untouched("a")
}

// hookSyncDir calls f with the directory of every fsync of one.
func hookSyncDir(t *testing.T, f func(dir string)) {
	orig := syncDir
	syncDir = func(dir string) error {
		f(dir)
		return orig(dir)
	}
	t.Cleanup(func() { syncDir = orig })
}

// From before the backup until the CRD is gone, only the run itself may
// write JobSets; the block goes afterwards.
func TestFreezeCoversBackupToCRDDeletion(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 0))
	e.probesBeforeEnforced = 2
	frozenAtBackup, enforcedAtBackup, frozenAtDelete := false, false, false
	hookSyncDir(t, func(string) {
		if !frozenAtBackup {
			frozenAtBackup, enforcedAtBackup = e.frozen(), e.probes > e.probesBeforeEnforced
		}
	})
	e.onCRDDelete(func() { frozenAtDelete = e.frozen() })
	if err := e.run(nil); err != nil {
		t.Fatalf("%v\n%s", err, e.out.String())
	}
	if !frozenAtBackup || !enforcedAtBackup || !frozenAtDelete {
		t.Fatalf("freeze at the backup %v (enforced %v), at the CRD's deletion %v", frozenAtBackup, enforcedAtBackup, frozenAtDelete)
	}
	if e.frozen() {
		t.Fatal("JobSet writes still blocked after the migration")
	}
	e.checkMigrated("a", 0)

	// The policy itself: writes of JobSets (and their status), by anyone
	// but the run, and the probe.
	p := freezePolicy(`a"b`)
	rule := p.Spec.MatchConstraints.ResourceRules[0]
	if !reflect.DeepEqual(rule.Operations, []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete}) ||
		!reflect.DeepEqual(rule.APIGroups, []string{"jobset.x-k8s.io"}) || !reflect.DeepEqual(rule.Resources, []string{"jobsets", "jobsets/status"}) {
		t.Errorf("rule = %+v", rule)
	}
	if got, want := p.Spec.Validations[0].Expression, `request.userInfo.username == "a\"b" && request.name != "jobset-migrate-freeze-probe"`; got != want {
		t.Errorf("expression = %s, want %s", got, want)
	}
}

// A write that got past the freeze between the backup and the CRD's
// deletion stops the run with the CRD in place; the next run backs it up.
func TestWriteAfterBackupStops(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(e *env) error
		want  string
	}{
		{"update", func(e *env) error {
			u := upstreamJobSet("a", "old-a", 0)
			u.SetResourceVersion("43")
			u.SetLabels(map[string]string{"app": "a", "late": "write"})
			return e.dyn.Tracker().Update(upstreamGVR, u, ns)
		}, "JobSet team/a changed since the backup (resourceVersion 43, backed up at 42)"},
		{"create", func(e *env) error {
			return e.dyn.Tracker().Add(upstreamJobSet("late", "old-late", 0))
		}, "JobSet team/late (uid old-late) was created since the backup"},
		{"delete", func(e *env) error {
			return e.dyn.Tracker().Delete(upstreamGVR, ns, "a")
		}, "JobSet team/a (uid old-a) was deleted since the backup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, upstreamJobSet("a", "old-a", 0))
			written := false
			e.kube.PrependReactor("update", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
				if !written {
					written = true
					if err := tc.write(e); err != nil {
						t.Error(err)
					}
				}
				return false, nil, nil
			})
			err := e.run(nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "not deleted") {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if !e.crdExists() {
				t.Fatal("CRD deleted despite the write")
			}
			if e.frozen() {
				t.Fatal("JobSet writes still blocked after the failure")
			}
		})
	}
}

// A run killed with the freeze in place leaves it; the next one removes it.
func TestLeftoverFreezeRemoved(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 0))
	if err := e.run(func(o *Options) { o.StopAfter = StepCRDDeleted }); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	adm := e.kube.AdmissionregistrationV1()
	if _, err := adm.ValidatingAdmissionPolicies().Create(ctx, freezePolicy("admin"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.ValidatingAdmissionPolicyBindings().Create(ctx, freezeBinding(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.run(nil); err != nil {
		t.Fatalf("%v\n%s", err, e.out.String())
	}
	if _, err := adm.ValidatingAdmissionPolicies().Get(ctx, freezeName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("leftover policy: %v", err)
	}
	if _, err := adm.ValidatingAdmissionPolicyBindings().Get(ctx, freezeName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("leftover binding: %v", err)
	}
	e.checkMigrated("a", 0)
}

// A JobSet deleted after its migration is not brought back (with a new
// workload) by a later run from its backup.
func TestSecondRunSkipsMigratedJobSets(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 0), upstreamJobSet("b", "old-b", 0))
	if err := e.run(nil); err != nil {
		t.Fatalf("%v\n%s", err, e.out.String())
	}
	ctx := context.Background()
	if err := e.jsc.JobsetV1alpha2().JobSets(ns).Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, j := range []string{"a-workers-0", "a-workers-1"} { // the garbage collector's work
		if err := e.kube.BatchV1().Jobs(ns).Delete(ctx, j, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.jsc.ClearActions()
	if err := e.run(nil); err != nil {
		t.Fatalf("second run: %v\n%s", err, e.out.String())
	}
	if _, err := e.jsc.JobsetV1alpha2().JobSets(ns).Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("deleted JobSet brought back: %v", err)
	}
	if w := writeActions(e.jsc.Actions()); len(w) != 0 {
		t.Fatalf("second run wrote JobSets: %v", w)
	}
	e.checkMigrated("b", 0)
}

// A native JobSet of the same name that this migration did not finish is
// not taken for a migrated one, even when none of the backup's children is
// left to tell.
func TestUnrelatedJobSetOfSameNameNotMigrated(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 0))
	if err := e.run(func(o *Options) { o.StopAfter = StepAPIService }); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, j := range []string{"a-workers-0", "a-workers-1"} {
		if err := e.kube.BatchV1().Jobs(ns).Delete(ctx, j, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.kube.CoreV1().Services(ns).Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	other := &v1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns, Labels: map[string]string{"someone": "else"}}}
	if _, err := e.jsc.JobsetV1alpha2().JobSets(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := e.run(nil)
	if err == nil || !strings.Contains(err.Error(), "JobSet team/a already exists natively") {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(e.out.String(), "migrated 1") {
		t.Fatalf("counted as migrated:\n%s", e.out.String())
	}
}

// A live run never deletes a backup: one whose JobSet the CRD does not hold
// (by UID) is moved aside and the run stops; the next run goes on.
func TestStaleBackupsSetAside(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 0))
	// Left by an earlier migration: a JobSet that is gone, and one of the
	// same name as a JobSet of the CRD installed again since.
	gone := &Item{OldUID: "old-gone", JobSet: &v1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: ns}}}
	older := &Item{OldUID: "older-a", JobSet: &v1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns}}}
	for _, it := range []*Item{gone, older} {
		if err := writeBackup(e.dir, it); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeMarker(e.dir, older, "native-older-a"); err != nil {
		t.Fatal(err)
	}
	olderData, _ := os.ReadFile(backupFile(e.dir, ns, "a"))

	// A dry run names them and moves nothing.
	if err := e.run(func(o *Options) { o.DryRun = true }); err != nil {
		t.Fatal(err)
	}
	if out := e.out.String(); !strings.Contains(out, "backup team_gone.json belongs to no JobSet") || !strings.Contains(out, "backup team_a.json belongs to no JobSet") {
		t.Fatalf("plan:\n%s", out)
	}
	if names := e.backups(); len(names) != 3 {
		t.Fatalf("dry run changed the backups: %v", names)
	}

	err := e.run(nil)
	if err == nil || !strings.Contains(err.Error(), "team_a.json, team_gone.json") || !strings.Contains(err.Error(), "moved them to") {
		t.Fatalf("err = %v", err)
	}
	if w := e.writes(); len(w) != 0 {
		t.Fatalf("writes despite stale backups: %v", w)
	}
	names := e.backups()
	if len(names) != 1 || !strings.HasPrefix(names[0], "set-aside-") {
		t.Fatalf("backup dir = %v", names)
	}
	aside := e.dir + "/" + names[0]
	if data, err := os.ReadFile(aside + "/team_a.json"); err != nil || !bytes.Equal(data, olderData) {
		t.Fatalf("older backup of a not kept: %v", err)
	}
	for _, n := range []string{"team_gone.json", "team_a.done"} {
		if _, err := os.Stat(aside + "/" + n); err != nil {
			t.Fatal(err)
		}
	}

	if err := e.run(nil); err != nil {
		t.Fatalf("%v\n%s", err, e.out.String())
	}
	e.checkMigrated("a", 0)
	if entries, _ := os.ReadDir(aside); len(entries) != 3 {
		t.Fatalf("set-aside backups touched: %v", entries)
	}
}

// Every backup's rename is made durable by an fsync of the directory.
func TestBackupSyncsDirectory(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 0), upstreamJobSet("b", "old-b", 0))
	var synced []string
	hookSyncDir(t, func(dir string) {
		// Record which backups the directory holds at each fsync.
		entries, _ := os.ReadDir(dir)
		n := 0
		for _, en := range entries {
			if isBackup(en) {
				n++
			}
		}
		synced = append(synced, fmt.Sprintf("%s:%d", dir, n))
	})
	if err := e.run(func(o *Options) { o.StopAfter = StepBackedUp }); err != nil {
		t.Fatal(err)
	}
	if want := []string{e.dir + ":1", e.dir + ":2"}; !reflect.DeepEqual(synced, want) {
		t.Fatalf("fsyncs = %v, want %v", synced, want)
	}
}

// Children are listed once per namespace (and discovery), not per JobSet.
func TestListsChildrenOncePerNamespace(t *testing.T) {
	e := newEnv(t, upstreamJobSet("a", "old-a", 0), upstreamJobSet("b", "old-b", 0), upstreamJobSet("c", "old-c", 0))
	if err := e.run(func(o *Options) { o.StopAfter = StepBackedUp }); err != nil {
		t.Fatal(err)
	}
	lists := map[string]int{}
	for _, a := range e.kube.Actions() {
		if a.GetVerb() == "list" {
			lists[a.GetResource().Resource]++
		}
	}
	// Two discoveries: one before any change, one under the freeze.
	if want := map[string]int{"jobs": 2, "services": 2, "persistentvolumeclaims": 2, "pods": 1}; !reflect.DeepEqual(lists, want) {
		t.Fatalf("lists = %v, want %v", lists, want)
	}
	for _, name := range []string{"a", "b", "c"} {
		data, err := os.ReadFile(backupFile(e.dir, ns, name))
		if err != nil {
			t.Fatal(err)
		}
		var it Item
		if err := json.Unmarshal(data, &it); err != nil || len(it.Children) != 4 || it.ResourceVersion != "42" {
			t.Fatalf("backup of %s = %+v, %v", name, it, err)
		}
	}
}
