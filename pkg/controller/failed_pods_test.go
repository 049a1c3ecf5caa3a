package controller

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller/jobcache"
)

func TestEarlyFailure(t *testing.T) {
	now := metav1.NewTime(t0)
	target := batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue,
		Reason: batchv1.JobReasonPodFailurePolicy, Message: "container main exited with 42", LastTransitionTime: metav1.NewTime(t0.Add(-5))}
	base := func(mods ...func(*batchv1.Job)) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", UID: "uid-j"},
			Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](1)}}
		for _, m := range mods {
			m(j)
		}
		return j
	}
	withCond := func(c batchv1.JobCondition) func(*batchv1.Job) {
		return func(j *batchv1.Job) { j.Status.Conditions = append(j.Status.Conditions, c) }
	}
	failures := func(n int) func(types.UID) int {
		return func(uid types.UID) int {
			if uid != "uid-j" {
				return 0
			}
			return n
		}
	}
	backoffExceeded := &batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
		Reason: batchv1.JobReasonBackoffLimitExceeded, Message: messageBackoffLimitExceeded, LastTransitionTime: now}
	cases := []struct {
		name       string
		job        *batchv1.Job
		selfFailed func(types.UID) int
		want       *batchv1.JobCondition
	}{
		{"no failed pod", base(), failures(0), nil},
		{"failures within the backoff limit", base(), failures(1), nil},
		{"failures beyond the backoff limit", base(), failures(2), backoffExceeded},
		{"default backoff limit is 6", base(func(j *batchv1.Job) { j.Spec.BackoffLimit = nil }), failures(6), nil},
		{"default backoff limit exceeded", base(func(j *batchv1.Job) { j.Spec.BackoffLimit = nil }), failures(7), backoffExceeded},
		{"FailureTarget: its reason and message", base(withCond(target)), failures(0),
			&batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: target.Reason,
				Message: target.Message, LastTransitionTime: target.LastTransitionTime}},
		{"FailureTarget not true", base(withCond(batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionFalse})), failures(0), nil},
		{"already failed: the Job's own condition is used", base(withCond(batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue})), failures(5), nil},
		{"complete", base(withCond(batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})), failures(5), nil},
		{"success criteria met", base(withCond(batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue})), failures(5), nil},
		{"pod failure policy decides", base(func(j *batchv1.Job) { j.Spec.PodFailurePolicy = hasPodFailurePolicy }), failures(5), nil},
		{"per-index backoff decides", base(func(j *batchv1.Job) { j.Spec.BackoffLimitPerIndex = ptr.To[int32](0) }), failures(5), nil},
		{"suspended", base(func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }), failures(5), nil},
		{"managed by another controller", base(func(j *batchv1.Job) { j.Spec.ManagedBy = ptr.To("example.com/other") }), failures(5), nil},
		{"managed by the Job controller", base(func(j *batchv1.Job) { j.Spec.ManagedBy = ptr.To(jobControllerName) }), failures(5), backoffExceeded},
		{"being deleted", base(func(j *batchv1.Job) { j.DeletionTimestamp = &now }), failures(5), nil},
		{"no failed-pod cache", base(), nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := earlyFailure(tc.job, tc.selfFailed, now)
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Fatalf("earlyFailure = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTrimFailedPodKeepsPodFailurePolicyMarker(t *testing.T) {
	j := &batchv1.Job{Spec: batchv1.JobSpec{PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionIgnore}}}}}
	out, _ := trimObject(j)
	if cached, _ := jobcache.Of(out); cached.Spec.PodFailurePolicy == nil {
		t.Fatal("the Job cache lost the presence of the pod failure policy")
	}
}

// failedPod is a pod of Job job (UID uid) in phase Failed.
func failedPod(name, job string, uid types.UID, deleted bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{jobset.JobSetNameKey: "js", batchv1.JobNameLabel: job, jobset.RestartsKey: "0"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job, UID: uid,
				Controller: ptr.To(true)}}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed},
	}
	if deleted {
		p.DeletionTimestamp = &metav1.Time{Time: t0}
	}
	return p
}

// A pod that fails on its own restarts the JobSet in the sync that sees it,
// before the Job controller marks its Job Failed; a pod that failed because
// it was deleted does not.
func TestFailedPodRestartsBeforeJobFailed(t *testing.T) {
	for _, deleted := range []bool{false, true} {
		js := newJobSet("js", func(js *jobset.JobSet) {
			js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 3}
			for i := range js.Spec.ReplicatedJobs {
				js.Spec.ReplicatedJobs[i].Template.Spec.BackoffLimit = ptr.To[int32](0)
			}
		})
		fx := newFixture(t, js)
		fx.sync("js")
		fx.setJob("js-workers-1", func(j *batchv1.Job) { j.UID = "uid-js-workers-1" })
		if _, err := fx.kube.CoreV1().Pods(ns).Create(fx.ctx, failedPod("js-workers-1-0-x", "js-workers-1", "uid-js-workers-1", deleted), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// A failed pod of another Job of that name (an earlier UID) counts
		// for nothing.
		if _, err := fx.kube.CoreV1().Pods(ns).Create(fx.ctx, failedPod("js-workers-0-0-y", "js-workers-0", "uid-gone", false), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		fx.sync("js")
		st := fx.jobSet("js").Status
		if deleted {
			if st.Restarts != 0 {
				t.Fatalf("a deleted pod restarted the JobSet: %+v", st)
			}
			continue
		}
		if st.Restarts != 1 || st.RestartsCountTowardsMax != 1 {
			t.Fatalf("restarts = %d/%d, want 1/1", st.Restarts, st.RestartsCountTowardsMax)
		}
		c := cond(fx.jobSet("js"), conditionRestartingJobSet)
		if c == nil || c.Status != metav1.ConditionTrue {
			t.Fatalf("RestartingJobSet = %+v", c)
		}
	}
}
