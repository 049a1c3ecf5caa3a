package migration

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	upv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

var (
	apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	crdGVR        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

const apiServiceName = "v1alpha2.jobset.x-k8s.io"

// registration is what the tool needs to register the native API again.
type registration struct {
	namespace, name string
	port            int64
	caFile          string
}

// becomeUpstream turns the stack into an upstream JobSet installation:
// jobset-controller stopped, the APIService removed, upstream's CRD
// installed and served. It returns the controller's command line and the
// registration to restore.
func becomeUpstream(t *testing.T) ([]string, registration) {
	t.Helper()
	ctx := context.Background()
	as, err := dyn.Resource(apiServiceGVR).Get(ctx, apiServiceName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the APIService: %v", err)
	}
	var reg registration
	svcNS, _, _ := unstructured.NestedString(as.Object, "spec", "service", "namespace")
	svcName, _, _ := unstructured.NestedString(as.Object, "spec", "service", "name")
	port, _, _ := unstructured.NestedInt64(as.Object, "spec", "service", "port")
	caB64, _, _ := unstructured.NestedString(as.Object, "spec", "caBundle")
	ca, err := base64.StdEncoding.DecodeString(caB64)
	if err != nil || len(ca) == 0 || port == 0 {
		t.Fatalf("the APIService names no Service or CA: %v", as.Object["spec"])
	}
	reg.namespace, reg.name, reg.port = svcNS, svcName, port
	reg.caFile = filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(reg.caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}

	args := stopController(t)
	if err := dyn.Resource(apiServiceGVR).Delete(ctx, apiServiceName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "", "apply", "--server-side", "-f", crdFile)
	eventually(t, time.Minute, "the CRD to be Established", func(ctx context.Context) (bool, error) {
		crd, err := dyn.Resource(crdGVR).Get(ctx, "jobsets.jobset.x-k8s.io", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	eventually(t, time.Minute, "JobSets to be served by the CRD", func(ctx context.Context) (bool, error) {
		_, err := upstreamClient.JobsetV1alpha2().JobSets("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		as, err := dyn.Resource(apiServiceGVR).Get(ctx, apiServiceName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		// kube-apiserver's own registration of the CRD's group version.
		_, hasService, _ := unstructured.NestedMap(as.Object, "spec", "service")
		return !hasService, nil
	})
	return args, reg
}

func namespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := stack.Kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// upstreamJobSet creates a JobSet through the CRD with one replicatedJob of
// replicas Jobs × 2 pods, then its Jobs and headless Service the way
// upstream's controller names and labels them, and sets its status as of
// restarts failure restarts. It waits until every pod runs.
func upstreamJobSet(t *testing.T, ns, name string, replicas, restarts int32) *upv1.JobSet {
	t.Helper()
	ctx := context.Background()
	js := &upv1.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"team": "ml"}, Annotations: map[string]string{"note": "from upstream"}},
		Spec: upv1.JobSetSpec{
			FailurePolicy: &upv1.FailurePolicy{MaxRestarts: 3},
			Network:       &upv1.Network{EnableDNSHostnames: ptr.To(true), PublishNotReadyAddresses: ptr.To(true)},
			SuccessPolicy: &upv1.SuccessPolicy{Operator: upv1.OperatorAll},
			StartupPolicy: &upv1.StartupPolicy{StartupPolicyOrder: upv1.AnyOrder},
			ReplicatedJobs: []upv1.ReplicatedJob{{
				Name:      "workers",
				GroupName: "default",
				Replicas:  replicas,
				Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
					Parallelism:    ptr.To[int32](2),
					Completions:    ptr.To[int32](2),
					BackoffLimit:   ptr.To[int32](0),
					CompletionMode: ptr.To(batchv1.IndexedCompletion),
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						Containers:    []corev1.Container{{Name: "worker", Image: "registry.k8s.io/pause:3.10"}},
						Tolerations:   []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					}},
				}},
			}},
		},
	}
	created, err := upstreamClient.JobsetV1alpha2().JobSets(ns).Create(ctx, js, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating JobSet %s through the CRD: %v", name, err)
	}

	for idx := int32(0); idx < replicas; idx++ {
		job := upstreamJob(created, idx, restarts)
		if _, err := stack.Kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: []metav1.OwnerReference{ownerOf(created)}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true,
			Selector: map[string]string{upv1.JobSetNameKey: name}},
	}
	if _, err := stack.Kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	created.Status = upv1.JobSetStatus{
		Restarts:                restarts,
		RestartsCountTowardsMax: restarts,
		ReplicatedJobsStatus:    []upv1.ReplicatedJobStatus{{Name: "workers", Ready: replicas, Active: replicas}},
		Conditions: []metav1.Condition{{Type: string(upv1.JobSetStartupPolicyCompleted), Status: metav1.ConditionTrue,
			Reason: "AllReplicatedJobsStarted", Message: "all replicated jobs have started", LastTransitionTime: metav1.Now()}},
	}
	if _, err := upstreamClient.JobsetV1alpha2().JobSets(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("setting the status of %s: %v", name, err)
	}
	eventually(t, 2*time.Minute, "the pods of "+name+" to run", func(ctx context.Context) (bool, error) {
		pods := podsOf(t, ns, name)
		running := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == int(replicas)*2, nil
	})
	return created
}

func ownerOf(js *upv1.JobSet) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: js.Name, UID: js.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// upstreamJob is Job idx of the JobSet's only replicatedJob, as upstream's
// controller builds it.
func upstreamJob(js *upv1.JobSet, idx, restarts int32) *batchv1.Job {
	rj := js.Spec.ReplicatedJobs[0]
	name := fmt.Sprintf("%s-%s-%d", js.Name, rj.Name, idx)
	sum := sha1.Sum([]byte(js.Namespace + "/" + name))
	meta := map[string]string{
		upv1.JobSetNameKey:                   js.Name,
		upv1.JobSetUIDKey:                    string(js.UID),
		upv1.ReplicatedJobNameKey:            rj.Name,
		upv1.ReplicatedJobReplicas:           strconv.Itoa(int(rj.Replicas)),
		upv1.GlobalReplicasKey:               strconv.Itoa(int(rj.Replicas)),
		upv1.JobIndexKey:                     strconv.Itoa(int(idx)),
		upv1.JobGlobalIndexKey:               strconv.Itoa(int(idx)),
		upv1.JobKey:                          hex.EncodeToString(sum[:]),
		upv1.GroupNameKey:                    "default",
		upv1.GroupReplicasKey:                strconv.Itoa(int(rj.Replicas)),
		upv1.JobGroupIndexKey:                strconv.Itoa(int(idx)),
		"jobset.sigs.k8s.io/restart-attempt": strconv.Itoa(int(restarts)),
	}
	copyOf := func() map[string]string {
		out := map[string]string{}
		for k, v := range meta {
			out[k] = v
		}
		return out
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: js.Namespace, Labels: copyOf(), Annotations: copyOf(),
			OwnerReferences: []metav1.OwnerReference{ownerOf(js)}},
		Spec: *rj.Template.Spec.DeepCopy(),
	}
	job.Spec.Template.Labels, job.Spec.Template.Annotations = copyOf(), copyOf()
	job.Spec.Template.Spec.Subdomain = js.Name
	job.Spec.Suspend = ptr.To(false)
	return job
}

func podsOf(t *testing.T, ns, jobset string) []corev1.Pod {
	t.Helper()
	l, err := stack.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: upv1.JobSetNameKey + "=" + jobset})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// uids maps names to UIDs of the live pods and Jobs of a JobSet.
func uids(t *testing.T, ns, jobset string) map[string]types.UID {
	t.Helper()
	out := map[string]types.UID{}
	for _, p := range podsOf(t, ns, jobset) {
		if p.DeletionTimestamp == nil {
			out["pod/"+p.Name] = p.UID
		}
	}
	jobs, err := stack.Kube.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{LabelSelector: upv1.JobSetNameKey + "=" + jobset})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		out["job/"+j.Name] = j.UID
	}
	return out
}

func crdGone(ctx context.Context) (bool, error) {
	_, err := dyn.Resource(crdGVR).Get(ctx, "jobsets.jobset.x-k8s.io", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}
