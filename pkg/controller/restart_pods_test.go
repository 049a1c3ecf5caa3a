package controller

import (
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// A Recreate restart deletes the old Jobs in the background and their pods
// directly, and creates a Job of the new attempt only once no pod of an
// earlier Job of its name still runs. BlockingRecreate deletes in the
// foreground.
func TestRestartWaitsForRunningOldPods(t *testing.T) {
	for _, strategy := range []jobset.JobSetRestartStrategy{jobset.Recreate, jobset.BlockingRecreate} {
		t.Run(string(strategy), func(t *testing.T) {
			js := newJobSet("js", func(js *jobset.JobSet) {
				js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 3, RestartStrategy: strategy}
			})
			fx := newFixture(t, js)
			fx.sync("js")
			for _, n := range allJobs {
				fx.setJob(n, func(j *batchv1.Job) { j.UID = types.UID("uid-" + j.Name) }) // the fake assigns none
			}
			oldUID := fx.job("js-workers-1").UID
			// A pod of the old js-workers-1, being deleted but still running.
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "js-workers-1-x", Namespace: ns, DeletionTimestamp: &metav1.Time{Time: t0},
					Finalizers: []string{"batch.kubernetes.io/job-tracking"},
					Labels: map[string]string{jobset.JobSetNameKey: "js", batchv1.JobNameLabel: "js-workers-1",
						batchv1.ControllerUidLabel: string(oldUID), jobset.RestartsKey: "0"}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning},
			}
			if _, err := fx.kube.CoreV1().Pods(ns).Create(fx.ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			fx.setJob("js-workers-0", failJob("BackoffLimitExceeded", "x", t0))
			fx.kube.ClearActions()
			fx.sync("js") // decide the restart and delete the old attempt

			wantPolicy := metav1.DeletePropagationBackground
			if strategy == jobset.BlockingRecreate {
				wantPolicy = metav1.DeletePropagationForeground
			}
			podsDeleted := map[string]bool{}
			for _, a := range fx.kube.Actions() {
				switch d := a.(type) {
				case k8stesting.DeleteActionImpl:
					if d.GetResource().Resource == "jobs" {
						if p := d.GetDeleteOptions().PropagationPolicy; p == nil || *p != wantPolicy {
							t.Errorf("Job %s deleted with propagation %v, want %s", d.GetName(), p, wantPolicy)
						}
					}
				case k8stesting.DeleteCollectionActionImpl:
					if d.GetResource().Resource == "pods" {
						podsDeleted[d.GetListRestrictions().Labels.String()] = true
					}
				}
			}
			if sel := batchv1.ControllerUidLabel + "=" + string(oldUID); !podsDeleted[sel] {
				t.Errorf("the pods of the old js-workers-1 were not deleted (%v)", podsDeleted)
			}
			if strategy == jobset.BlockingRecreate {
				return // the wait for the Jobs is TestRestartRecreate's
			}
			if len(fx.jobs()) != 0 {
				t.Fatalf("old Jobs left: %v", fx.jobNames())
			}

			// The pod still runs: every Job but js-workers-1 is created.
			if d := fx.sync("js"); d <= 0 {
				t.Errorf("no retry while an old pod runs (requeue %v)", d)
			}
			if got := fx.jobNames(); !reflect.DeepEqual(got, []string{"js-leader-0", "js-workers-0"}) {
				t.Fatalf("jobs = %v, want js-workers-1 held back", got)
			}
			// It finished: js-workers-1 follows.
			pod.Status.Phase = corev1.PodFailed
			if _, err := fx.kube.CoreV1().Pods(ns).Update(fx.ctx, pod, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			fx.sync("js")
			if got := fx.jobNames(); !reflect.DeepEqual(got, allJobs) {
				t.Fatalf("jobs = %v", got)
			}
			if l := fx.job("js-workers-1").Labels[jobset.RestartsKey]; l != "1" {
				t.Errorf("js-workers-1 restart-attempt = %q", l)
			}
		})
	}
}

// A pod of an earlier Job that nobody deleted (created while its Job was
// going away) is deleted before the Job of its name is created again.
func TestStrayOldPodDeleted(t *testing.T) {
	js := newJobSet("js", func(js *jobset.JobSet) {
		js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 3}
	})
	fx := newFixture(t, js)
	fx.sync("js")
	fx.setJob("js-workers-0", failJob("BackoffLimitExceeded", "x", t0))
	fx.sync("js")
	stray := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "js-leader-0-late", Namespace: ns,
			Labels: map[string]string{jobset.JobSetNameKey: "js", batchv1.JobNameLabel: "js-leader-0", jobset.RestartsKey: "0"}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if _, err := fx.kube.CoreV1().Pods(ns).Create(fx.ctx, stray, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fx.sync("js")
	if _, err := fx.kube.CoreV1().Pods(ns).Get(fx.ctx, stray.Name, metav1.GetOptions{}); err == nil {
		t.Error("the stray pod of the old attempt was not deleted")
	}
	if got := fx.jobNames(); !reflect.DeepEqual(got, []string{"js-workers-0", "js-workers-1"}) {
		t.Fatalf("jobs = %v, want js-leader-0 held back for one more look", got)
	}
	fx.sync("js")
	if got := fx.jobNames(); !reflect.DeepEqual(got, allJobs) {
		t.Fatalf("jobs = %v", got)
	}
}
