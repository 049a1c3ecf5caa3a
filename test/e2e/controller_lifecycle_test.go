package e2e

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// TestSuspendEditResume is Kueue's admission cycle on a JobSet that already
// ran: suspend, change the pod template's scheduling fields and its
// container's resources (KEP-1150), resume.
func TestSuspendEditResume(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createJobSet(t, runningJobSet(ns, "admit", replicatedJob("workers", 2, 1, "")))
	waitStatus(t, ns, "admit", "workers ready", time.Minute, func(js *v1alpha2.JobSet) bool {
		return rjStatus(js, "workers").Ready == 2
	})
	// KEP-1282 on the wire: 0 during the first run, not an absent field.
	if out := kubectl(t, "get", "jobset", "admit", "-n", ns, "-o", "jsonpath={.status.executionAttempts}"); strings.TrimSpace(out) != "0" {
		t.Errorf("status.executionAttempts of a running JobSet = %q, want 0", out)
	}

	suspendAndWait(t, ns, "admit", 2)
	waitCondition(t, ns, "admit", v1alpha2.JobSetSuspended, time.Minute)

	edit := `{"spec":{"replicatedJobs":[{"name":"workers","template":{"spec":{"template":{
		"metadata":{"labels":{"kueue.x-k8s.io/flavor":"big"},"annotations":{"kueue.x-k8s.io/admitted-by":"cq"}},
		"spec":{"nodeSelector":{"kubernetes.io/os":"linux"},
		        "tolerations":[{"key":"dedicated","operator":"Equal","value":"jobs","effect":"NoSchedule"}],
		        "containers":[{"name":"main","resources":{"requests":{"cpu":"250m"}}}]}}}}}]}}`
	kubectl(t, "patch", "jobset", "admit", "-n", ns, "--type=strategic", "-p", edit)
	kubectl(t, "patch", "jobset", "admit", "-n", ns, "--type=merge", "-p", `{"spec":{"suspend":false}}`)

	var jobs []batchv1.Job
	eventually(t, time.Minute, "the Jobs to be resumed", func(ctx context.Context) (bool, error) {
		all, err := childJobs(ctx, ns, "admit")
		if err != nil || len(all) != 2 {
			return false, nil
		}
		for _, j := range all {
			if ptr.Deref(j.Spec.Suspend, true) {
				return false, nil
			}
		}
		jobs = all
		return true, nil
	})
	for _, j := range jobs {
		tmpl := j.Spec.Template
		if tmpl.Labels["kueue.x-k8s.io/flavor"] != "big" || tmpl.Annotations["kueue.x-k8s.io/admitted-by"] != "cq" {
			t.Errorf("Job %s pod template metadata lacks the edits: labels %v annotations %v", j.Name, tmpl.Labels, tmpl.Annotations)
		}
		if tmpl.Spec.NodeSelector["kubernetes.io/os"] != "linux" {
			t.Errorf("Job %s nodeSelector = %v", j.Name, tmpl.Spec.NodeSelector)
		}
		if cpu := tmpl.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; cpu.String() != "250m" {
			t.Errorf("Job %s container cpu request = %s, want the new 250m", j.Name, cpu.String())
		}
		found := false
		for _, tol := range tmpl.Spec.Tolerations {
			found = found || (tol.Key == "dedicated" && tol.Value == "jobs" && tol.Effect == corev1.TaintEffectNoSchedule)
		}
		if !found {
			t.Errorf("Job %s tolerations = %v, want the added one", j.Name, tmpl.Spec.Tolerations)
		}
		if got := j.Labels[v1alpha2.RestartsKey]; got != "0" {
			t.Errorf("Job %s restart-attempt = %q, want 0", j.Name, got)
		}
		if got := j.Annotations[v1alpha2.ExecutionAttemptKey]; got != "1" {
			t.Errorf("Job %s execution-attempt annotation = %q, want 1", j.Name, got)
		}
		if got := tmpl.Annotations[v1alpha2.ExecutionAttemptKey]; got != "1" {
			t.Errorf("Job %s pod template execution-attempt = %q, want 1", j.Name, got)
		}
	}
	// The new pods carry the edits and run.
	eventually(t, time.Minute, "running pods with the new label and cpu request", func(ctx context.Context) (bool, error) {
		pods, err := podsOf(ctx, ns, "admit")
		if err != nil {
			return false, nil
		}
		n := 0
		for _, p := range pods {
			cpu := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
			if p.Labels["kueue.x-k8s.io/flavor"] == "big" && p.Status.Phase == corev1.PodRunning &&
				p.Annotations[v1alpha2.ExecutionAttemptKey] == "1" && cpu.String() == "250m" {
				n++
			}
		}
		return n == 2, nil
	})
	got := waitStatus(t, ns, "admit", "resumed", time.Minute, func(js *v1alpha2.JobSet) bool {
		return conditionReason(js, v1alpha2.JobSetSuspended) == "" && ptr.Deref(js.Status.ExecutionAttempts, 0) == 1
	})
	if got.Status.Restarts != 0 {
		t.Errorf("restarts = %d, want 0", got.Status.Restarts)
	}
	if c := apimeta.FindStatusCondition(got.Status.Conditions, string(v1alpha2.JobSetSuspended)); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "ResumeJobs" {
		t.Errorf("Suspended condition after resuming = %+v, want False/ResumeJobs", c)
	}
	waitEvent(t, ns, "admit", "SuspendedJobs")
	waitEvent(t, ns, "admit", "ResumeJobs")
}

func TestTTLAfterFinished(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	js := runningJobSet(ns, "shortlived", replicatedJob("workers", 1, 1, "3s"))
	js.Spec.TTLSecondsAfterFinished = ptr.To[int32](5)
	createJobSet(t, js)
	done := waitCondition(t, ns, "shortlived", v1alpha2.JobSetCompleted, time.Minute)
	finishedAt := conditionTime(done, v1alpha2.JobSetCompleted)
	eventually(t, time.Minute, "the JobSet to be deleted", func(ctx context.Context) (bool, error) {
		_, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Get(ctx, "shortlived", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if since := time.Since(finishedAt); since < 5*time.Second {
		t.Errorf("deleted %s after finishing, before its TTL of 5s", since)
	}
	waitJobGone(t, ns, "shortlived-workers-0")
}

// A finished JobSet's ttlSecondsAfterFinished may still change: patching
// it to 0 deletes a JobSet that had none.
func TestTTLPatchedOnFinishedJobSet(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createJobSet(t, runningJobSet(ns, "kept", replicatedJob("workers", 1, 1, "2s")))
	waitCondition(t, ns, "kept", v1alpha2.JobSetCompleted, time.Minute)
	kubectl(t, "patch", "jobset", "kept", "-n", ns, "--type=merge", "-p", `{"spec":{"ttlSecondsAfterFinished":0}}`)
	eventually(t, time.Minute, "the JobSet to be deleted", func(ctx context.Context) (bool, error) {
		_, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Get(ctx, "kept", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func conditionTime(js *v1alpha2.JobSet, cond v1alpha2.JobSetConditionType) time.Time {
	for _, c := range js.Status.Conditions {
		if c.Type == string(cond) {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// TestManagedByOtherController: the controller leaves such a JobSet alone.
// A JobSet created after it in the same namespace runs to completion, so
// the controller had every chance to act on the first.
func TestManagedByOtherController(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ctx := context.Background()
	other := runningJobSet(ns, "foreign", replicatedJob("workers", 2, 1, "3s"))
	other.Spec.ManagedBy = ptr.To("example.com/other")
	createJobSet(t, other)
	createJobSet(t, runningJobSet(ns, "ours", replicatedJob("workers", 1, 1, "3s")))
	waitCondition(t, ns, "ours", v1alpha2.JobSetCompleted, time.Minute)

	if jobs, err := childJobs(ctx, ns, "foreign"); err != nil || len(jobs) != 0 {
		t.Errorf("Jobs of a JobSet managed elsewhere: %d (err %v), want 0", len(jobs), err)
	}
	if _, err := cluster.kube.CoreV1().Services(ns).Get(ctx, "foreign", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Service of a JobSet managed elsewhere: err %v, want NotFound", err)
	}
	got := getJobSet(t, ns, "foreign")
	if len(got.Status.Conditions) != 0 || len(got.Status.ReplicatedJobsStatus) != 0 || got.Status.Restarts != 0 || got.Status.TerminalState != "" {
		t.Errorf("status of a JobSet managed elsewhere was written: %+v", got.Status)
	}
}

// TestVolumeClaimPolicies: the claims exist before the Jobs and are mounted
// by the pods; a retained claim outlives the JobSet, a deleted one does not.
func TestVolumeClaimPolicies(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ctx := context.Background()
	claim := func(name string) corev1.PersistentVolumeClaim {
		return corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
	}
	workers := replicatedJob("workers", 2, 1, "")
	workers.Template.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "data", MountPath: "/data"}, {Name: "scratch", MountPath: "/scratch"},
	}
	js := runningJobSet(ns, "claims", workers)
	js.Spec.VolumeClaimPolicies = []v1alpha2.VolumeClaimPolicy{
		{Templates: []corev1.PersistentVolumeClaim{claim("data")},
			RetentionPolicy: &v1alpha2.VolumeRetentionPolicy{WhenDeleted: ptr.To(v1alpha2.RetentionPolicyRetain)}},
		{Templates: []corev1.PersistentVolumeClaim{claim("scratch")},
			RetentionPolicy: &v1alpha2.VolumeRetentionPolicy{WhenDeleted: ptr.To(v1alpha2.RetentionPolicyDelete)}},
	}
	created := createJobSet(t, js)
	jobs := waitJobs(t, ns, "claims", 2, "0")

	pvcs := map[string]*corev1.PersistentVolumeClaim{}
	for _, name := range []string{"data-claims", "scratch-claims"} {
		pvc, err := cluster.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("claim %s: %v", name, err)
		}
		pvcs[name] = pvc
		if pvc.Labels[v1alpha2.JobSetNameKey] != "claims" {
			t.Errorf("claim %s labels = %v", name, pvc.Labels)
		}
		for _, j := range jobs {
			if j.CreationTimestamp.Before(&pvc.CreationTimestamp) {
				t.Errorf("Job %s created (%s) before claim %s (%s)", j.Name, j.CreationTimestamp, name, pvc.CreationTimestamp)
			}
		}
	}
	if owned := metav1.IsControlledBy(pvcs["scratch-claims"], created); !owned {
		t.Errorf("claim scratch-claims (Delete) is not owned by the JobSet: %v", pvcs["scratch-claims"].OwnerReferences)
	}
	if len(pvcs["data-claims"].OwnerReferences) != 0 {
		t.Errorf("claim data-claims (Retain) has owners %v", pvcs["data-claims"].OwnerReferences)
	}
	for _, j := range jobs {
		want := map[string]string{"data": "data-claims", "scratch": "scratch-claims"}
		for _, v := range j.Spec.Template.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && want[v.Name] == v.PersistentVolumeClaim.ClaimName {
				delete(want, v.Name)
			}
		}
		if len(want) != 0 {
			t.Errorf("Job %s lacks the claim volumes %v: %+v", j.Name, want, j.Spec.Template.Spec.Volumes)
		}
	}
	eventually(t, time.Minute, "pods that use the claims", func(ctx context.Context) (bool, error) {
		pods, err := podsOf(ctx, ns, "claims")
		if err != nil || len(pods) != 2 {
			return false, nil
		}
		for _, p := range pods {
			n := 0
			for _, v := range p.Spec.Volumes {
				if v.PersistentVolumeClaim != nil {
					n++
				}
			}
			if n != 2 {
				return false, fmt.Errorf("pod %s mounts %d claims, want 2", p.Name, n)
			}
		}
		return true, nil
	})

	kubectl(t, "delete", "jobset", "claims", "-n", ns, "--wait=false")
	eventually(t, 2*time.Minute, "claim scratch-claims to be deleted", func(ctx context.Context) (bool, error) {
		pvc, err := cluster.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "scratch-claims", metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && pvc.DeletionTimestamp != nil), nil
	})
	eventually(t, 2*time.Minute, "the JobSet to be gone", func(ctx context.Context) (bool, error) {
		_, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Get(ctx, "claims", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	pvc, err := cluster.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-claims", metav1.GetOptions{})
	if err != nil || pvc.DeletionTimestamp != nil || pvc.UID != pvcs["data-claims"].UID {
		t.Fatalf("retained claim data-claims after the JobSet's deletion: err %v, %+v", err, pvc)
	}

	// A new JobSet of the same name whose template differs from the
	// retained claim, or that would delete it, is refused, as upstream's
	// webhook refuses it.
	js.ResourceVersion = ""
	bigger := js.DeepCopy()
	bigger.Spec.VolumeClaimPolicies[0].Templates[0].Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	deleting := js.DeepCopy()
	deleting.Spec.VolumeClaimPolicies[0].RetentionPolicy.WhenDeleted = ptr.To(v1alpha2.RetentionPolicyDelete)
	for what, bad := range map[string]*v1alpha2.JobSet{
		"spec.volumeClaimPolicies[0].templates[0].spec: Invalid value: \"object\": spec does not match existing PVC data-claims":             bigger,
		"spec.volumeClaimPolicies[0].retentionPolicy.whenDeleted: Invalid value: \"Delete\": retentionPolicy must be retain when PVC exists": deleting,
	} {
		_, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Create(ctx, bad, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), what) {
			t.Errorf("create refused with %v, want 422 %s", err, what)
		}
	}

	// A new JobSet of the same name adopts the retained claim as it is and
	// gets a new claim of its own for the deleted one.
	again := createJobSet(t, js)
	waitJobs(t, ns, "claims", 2, "0")
	eventually(t, 2*time.Minute, "a new scratch-claims owned by the new JobSet", func(ctx context.Context) (bool, error) {
		pvc, err := cluster.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "scratch-claims", metav1.GetOptions{})
		return err == nil && pvc.DeletionTimestamp == nil && metav1.IsControlledBy(pvc, again), nil
	})
	pvc, err = cluster.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-claims", metav1.GetOptions{})
	if err != nil || pvc.UID != pvcs["data-claims"].UID || pvc.DeletionTimestamp != nil {
		t.Errorf("the retained claim was not reused: err %v, %+v", err, pvc)
	}
}

func TestHeadlessServiceRecreated(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ctx := context.Background()
	js := runningJobSet(ns, "svc", replicatedJob("workers", 1, 1, ""))
	js.Spec.Network = &v1alpha2.Network{Subdomain: "net", PublishNotReadyAddresses: ptr.To(false)}
	createJobSet(t, js)
	waitJobs(t, ns, "svc", 1, "0")
	var old *corev1.Service
	eventually(t, time.Minute, "the headless Service", func(ctx context.Context) (bool, error) {
		s, err := cluster.kube.CoreV1().Services(ns).Get(ctx, "net", metav1.GetOptions{})
		old = s
		return err == nil, nil
	})
	if err := cluster.kube.CoreV1().Services(ns).Delete(ctx, "net", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the Service: %v", err)
	}
	var svc *corev1.Service
	eventually(t, time.Minute, "the Service to be recreated", func(ctx context.Context) (bool, error) {
		s, err := cluster.kube.CoreV1().Services(ns).Get(ctx, "net", metav1.GetOptions{})
		if err != nil || s.UID == old.UID {
			return false, nil
		}
		svc = s
		return true, nil
	})
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.PublishNotReadyAddresses || svc.Spec.Selector[v1alpha2.JobSetNameKey] != "svc" {
		t.Errorf("recreated Service spec = %+v", svc.Spec)
	}
	if owner := metav1.GetControllerOf(svc); owner == nil || owner.Name != "svc" || owner.Kind != "JobSet" {
		t.Errorf("recreated Service owner = %+v", owner)
	}
}

func TestCoordinatorLabel(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	js := runningJobSet(ns, "coord", replicatedJob("leader", 1, 1, ""), replicatedJob("workers", 2, 2, ""))
	js.Spec.Coordinator = &v1alpha2.Coordinator{ReplicatedJob: "workers", JobIndex: 1, PodIndex: 1}
	createJobSet(t, js)
	const want = "coord-workers-1-1.coord"
	for _, j := range waitJobs(t, ns, "coord", 3, "0") {
		if j.Labels[v1alpha2.CoordinatorKey] != want || j.Annotations[v1alpha2.CoordinatorKey] != want {
			t.Errorf("Job %s coordinator label %q annotation %q, want %q", j.Name,
				j.Labels[v1alpha2.CoordinatorKey], j.Annotations[v1alpha2.CoordinatorKey], want)
		}
	}
	eventually(t, time.Minute, "5 pods naming the coordinator", func(ctx context.Context) (bool, error) {
		pods, err := podsOf(ctx, ns, "coord")
		if err != nil || len(pods) != 5 {
			return false, nil
		}
		for _, p := range pods {
			if p.Labels[v1alpha2.CoordinatorKey] != want || p.Annotations[v1alpha2.CoordinatorKey] != want {
				return false, fmt.Errorf("pod %s coordinator label %q annotation %q, want %q", p.Name,
					p.Labels[v1alpha2.CoordinatorKey], p.Annotations[v1alpha2.CoordinatorKey], want)
			}
		}
		return true, nil
	})
	// The coordinator's own pod has that hostname under the subdomain.
	eventually(t, time.Minute, "the coordinator pod", func(ctx context.Context) (bool, error) {
		pods, err := podsOf(ctx, ns, "coord")
		if err != nil {
			return false, nil
		}
		for _, p := range pods {
			if p.Spec.Hostname == "coord-workers-1-1" && p.Spec.Subdomain == "coord" {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestElasticReplicatedJob resizes a running replicatedJob: pods per Job
// and the number of Jobs, up and down.
func TestElasticReplicatedJob(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ctx := context.Background()
	createJobSet(t, runningJobSet(ns, "elastic", replicatedJob("workers", 2, 2, "")))
	jobs := waitJobs(t, ns, "elastic", 2, "0")
	uid0 := jobs[0].UID
	if jobs[0].Name != "elastic-workers-0" {
		uid0 = jobs[1].UID
	}

	kubectl(t, "patch", "jobset", "elastic", "-n", ns, "--type=strategic", "-p",
		`{"spec":{"replicatedJobs":[{"name":"workers","template":{"spec":{"parallelism":3,"completions":3}}}]}}`)
	eventually(t, time.Minute, "Jobs with parallelism 3 and 3 pods each", func(ctx context.Context) (bool, error) {
		all, err := childJobs(ctx, ns, "elastic")
		if err != nil || len(all) != 2 {
			return false, nil
		}
		for _, j := range all {
			if ptr.Deref(j.Spec.Parallelism, 0) != 3 || ptr.Deref(j.Spec.Completions, 0) != 3 {
				return false, nil
			}
		}
		pods, err := podsOf(ctx, ns, "elastic")
		if err != nil {
			return false, nil
		}
		per := map[string]int{}
		for _, p := range pods {
			per[p.Labels["batch.kubernetes.io/job-name"]]++
		}
		return len(pods) == 6 && per["elastic-workers-0"] == 3 && per["elastic-workers-1"] == 3, nil
	})

	kubectl(t, "patch", "jobset", "elastic", "-n", ns, "--type=strategic", "-p",
		`{"spec":{"replicatedJobs":[{"name":"workers","replicas":3}]}}`)
	waitJobs(t, ns, "elastic", 3, "0")
	third := getJob(ctx, ns, "elastic-workers-2")
	if third == nil {
		t.Fatal("no Job elastic-workers-2 after raising replicas to 3")
	}
	for _, key := range []string{v1alpha2.ReplicatedJobReplicas, v1alpha2.GlobalReplicasKey, v1alpha2.GroupReplicasKey} {
		if got := third.Labels[key]; got != "3" {
			t.Errorf("new Job label %s = %q, want 3", key, got)
		}
	}
	if ptr.Deref(third.Spec.Parallelism, 0) != 3 {
		t.Errorf("new Job parallelism = %v, want 3", third.Spec.Parallelism)
	}

	kubectl(t, "patch", "jobset", "elastic", "-n", ns, "--type=strategic", "-p",
		`{"spec":{"replicatedJobs":[{"name":"workers","replicas":1}]}}`)
	waitJobGone(t, ns, "elastic-workers-2")
	waitJobGone(t, ns, "elastic-workers-1")
	if j := getJob(ctx, ns, "elastic-workers-0"); j == nil || j.UID != uid0 || j.DeletionTimestamp != nil {
		t.Errorf("elastic-workers-0 should survive scaling down: %v", j)
	}
	got := waitStatus(t, ns, "elastic", "one active Job", time.Minute, func(js *v1alpha2.JobSet) bool {
		s := rjStatus(js, "workers")
		return s.Active == 1 && s.Ready == 1
	})
	if got.Status.Restarts != 0 {
		t.Errorf("restarts = %d, want 0: resizing is no restart", got.Status.Restarts)
	}
}

// TestServiceNotStolen: a Service of the subdomain's name that the JobSet
// does not own is left as it is.
func TestServiceNotStolen(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ctx := context.Background()
	mine, err := cluster.kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "shared"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "other"},
			Ports:    []corev1.ServicePort{{Port: 80}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	js := runningJobSet(ns, "guest", replicatedJob("workers", 1, 1, "3s"))
	js.Spec.Network = &v1alpha2.Network{Subdomain: "shared"}
	createJobSet(t, js)
	waitCondition(t, ns, "guest", v1alpha2.JobSetCompleted, time.Minute)
	got, err := cluster.kube.CoreV1().Services(ns).Get(ctx, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != mine.UID || got.ResourceVersion != mine.ResourceVersion || len(got.OwnerReferences) != 0 {
		t.Errorf("the foreign Service was changed: %+v", got.ObjectMeta)
	}
}

// TestExecutionAttemptsAcrossRestartAndResume: a failure-triggered restart
// and a later suspend/resume each add an execution attempt; only the
// failure counts as a restart.
func TestExecutionAttemptsAcrossRestartAndResume(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	js := runningJobSet(ns, "attempts", replicatedJob("workers", 2, 1, ""))
	js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 2}
	createJobSet(t, js)
	waitJobs(t, ns, "attempts", 2, "0")
	failPodWithCode(t, ns, "attempts-workers-0", otherExitCode)
	waitJobs(t, ns, "attempts", 2, "1")
	waitStatus(t, ns, "attempts", "restarted and ready", time.Minute, func(js *v1alpha2.JobSet) bool {
		return js.Status.Restarts == 1 && rjStatus(js, "workers").Ready == 2
	})

	kubectl(t, "patch", "jobset", "attempts", "-n", ns, "--type=merge", "-p", `{"spec":{"suspend":true}}`)
	waitCondition(t, ns, "attempts", v1alpha2.JobSetSuspended, time.Minute)
	kubectl(t, "patch", "jobset", "attempts", "-n", ns, "--type=merge", "-p", `{"spec":{"suspend":false}}`)
	eventually(t, time.Minute, "resumed Jobs of execution attempt 2", func(ctx context.Context) (bool, error) {
		jobs, err := childJobs(ctx, ns, "attempts")
		if err != nil || len(jobs) != 2 {
			return false, nil
		}
		for _, j := range jobs {
			if ptr.Deref(j.Spec.Suspend, true) || j.Spec.Template.Annotations[v1alpha2.ExecutionAttemptKey] != "2" {
				return false, nil
			}
			if j.Labels[v1alpha2.RestartsKey] != "1" {
				return false, fmt.Errorf("Job %s restart-attempt %q, want 1", j.Name, j.Labels[v1alpha2.RestartsKey])
			}
		}
		return true, nil
	})
	got := waitStatus(t, ns, "attempts", "execution attempts 2", time.Minute, func(js *v1alpha2.JobSet) bool {
		return ptr.Deref(js.Status.ExecutionAttempts, 0) == 2
	})
	if got.Status.Restarts != 1 || got.Status.RestartsCountTowardsMax != 1 {
		t.Errorf("restarts %d towards max %d, want 1/1", got.Status.Restarts, got.Status.RestartsCountTowardsMax)
	}
}

// TestChildLabelValues checks the exact index labels of Jobs spread over
// two groups.
func TestChildLabelValues(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	leader := replicatedJob("leader", 1, 1, "")
	leader.GroupName = "front"
	workers := replicatedJob("workers", 2, 1, "")
	workers.GroupName = "front"
	ps := replicatedJob("ps", 2, 1, "")
	ps.GroupName = "back"
	created := createJobSet(t, runningJobSet(ns, "labels", leader, workers, ps))
	jobs := waitJobs(t, ns, "labels", 5, "0")
	type want struct{ rj, idx, global, group, groupReplicas, replicas string }
	wants := map[string]want{
		"labels-leader-0":  {"leader", "0", "0", "front", "3", "1"},
		"labels-workers-0": {"workers", "0", "1", "front", "3", "2"},
		"labels-workers-1": {"workers", "1", "2", "front", "3", "2"},
		"labels-ps-0":      {"ps", "0", "3", "back", "2", "2"},
		"labels-ps-1":      {"ps", "1", "4", "back", "2", "2"},
	}
	groupIndex := map[string]string{
		"labels-leader-0": "0", "labels-workers-0": "1", "labels-workers-1": "2", "labels-ps-0": "0", "labels-ps-1": "1",
	}
	for _, j := range jobs {
		w, ok := wants[j.Name]
		if !ok {
			t.Errorf("unexpected Job %s", j.Name)
			continue
		}
		sum := sha1.Sum([]byte(ns + "/" + j.Name))
		expect := map[string]string{
			v1alpha2.JobSetNameKey:         "labels",
			v1alpha2.JobSetUIDKey:          string(created.UID),
			v1alpha2.ReplicatedJobNameKey:  w.rj,
			v1alpha2.ReplicatedJobReplicas: w.replicas,
			v1alpha2.JobIndexKey:           w.idx,
			v1alpha2.JobGlobalIndexKey:     w.global,
			v1alpha2.GlobalReplicasKey:     "5",
			v1alpha2.GroupNameKey:          w.group,
			v1alpha2.GroupReplicasKey:      w.groupReplicas,
			v1alpha2.JobGroupIndexKey:      groupIndex[j.Name],
			v1alpha2.JobKey:                hex.EncodeToString(sum[:]),
			v1alpha2.RestartsKey:           "0",
			// Written on the first attempt too, as upstream.
			v1alpha2.JobRestartsKey: "0",
		}
		for k, v := range expect {
			if j.Labels[k] != v || j.Annotations[k] != v || j.Spec.Template.Labels[k] != v {
				t.Errorf("Job %s %s: label %q annotation %q pod label %q, want %q", j.Name, k,
					j.Labels[k], j.Annotations[k], j.Spec.Template.Labels[k], v)
			}
		}
		if metav1.GetControllerOf(&j) == nil || metav1.GetControllerOf(&j).UID != created.UID {
			t.Errorf("Job %s controller = %+v", j.Name, metav1.GetControllerOf(&j))
		}
	}
}

// TestDNSHostnamesDisabled: no Service and no subdomain.
func TestDNSHostnamesDisabled(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	js := runningJobSet(ns, "nodns", replicatedJob("workers", 1, 1, "3s"))
	js.Spec.Network = &v1alpha2.Network{EnableDNSHostnames: ptr.To(false)}
	createJobSet(t, js)
	for _, j := range waitJobs(t, ns, "nodns", 1, "0") {
		if j.Spec.Template.Spec.Subdomain != "" {
			t.Errorf("Job %s pods get subdomain %q with DNS hostnames disabled", j.Name, j.Spec.Template.Spec.Subdomain)
		}
	}
	waitCondition(t, ns, "nodns", v1alpha2.JobSetCompleted, time.Minute)
	svcs, err := cluster.kube.CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(svcs.Items) != 0 {
		t.Errorf("Services with DNS hostnames disabled: %d (err %v), want 0", len(svcs.Items), err)
	}
}

// TestJobSetRecreatedUnderSameName: a JobSet deleted and created again at
// once under the same name gets its own Jobs and Service once the old ones
// are garbage collected.
func TestJobSetRecreatedUnderSameName(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ctx := context.Background()
	first := createJobSet(t, runningJobSet(ns, "again", replicatedJob("workers", 2, 1, "")))
	waitJobs(t, ns, "again", 2, "0")
	eventually(t, time.Minute, "the first Service", func(ctx context.Context) (bool, error) {
		_, err := cluster.kube.CoreV1().Services(ns).Get(ctx, "again", metav1.GetOptions{})
		return err == nil, nil
	})
	if err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Delete(ctx, "again", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var second *v1alpha2.JobSet
	eventually(t, time.Minute, "creating the JobSet again", func(ctx context.Context) (bool, error) {
		js, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Create(ctx, runningJobSet(ns, "again", replicatedJob("workers", 2, 1, "")), metav1.CreateOptions{})
		second = js
		return err == nil, nil
	})
	if second.UID == first.UID {
		t.Fatal("same UID")
	}
	eventually(t, 2*time.Minute, "Jobs and Service owned by the new JobSet", func(ctx context.Context) (bool, error) {
		jobs, err := childJobs(ctx, ns, "again")
		if err != nil || len(jobs) != 2 {
			return false, nil
		}
		for i := range jobs {
			if !metav1.IsControlledBy(&jobs[i], second) || jobs[i].DeletionTimestamp != nil {
				return false, nil
			}
		}
		svc, err := cluster.kube.CoreV1().Services(ns).Get(ctx, "again", metav1.GetOptions{})
		return err == nil && metav1.IsControlledBy(svc, second), nil
	})
	waitStatus(t, ns, "again", "two ready workers", time.Minute, func(js *v1alpha2.JobSet) bool {
		return rjStatus(js, "workers").Ready == 2
	})
}
