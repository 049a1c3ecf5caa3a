package controller

import (
	"reflect"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

var allJobs = []string{"js-leader-0", "js-workers-0", "js-workers-1"}

func TestCreatesJobsAndService(t *testing.T) {
	fx := newFixture(t, newJobSet("js"))
	fx.sync("js")
	if got := fx.jobNames(); !reflect.DeepEqual(got, allJobs) {
		t.Fatalf("jobs = %v", got)
	}
	svc, err := fx.kube.CoreV1().Services(ns).Get(fx.ctx, "js", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != "None" || !svc.Spec.PublishNotReadyAddresses || svc.Spec.Selector[jobset.JobSetNameKey] != "js" || !isOwnedBy(svc.OwnerReferences, newJobSet("js")) {
		t.Fatalf("service = %+v", svc)
	}
	js := fx.jobSet("js")
	if len(js.Status.ReplicatedJobsStatus) != 2 || js.Status.ReplicatedJobsStatus[0].Name != "leader" {
		t.Fatalf("status = %+v", js.Status)
	}
	// The next sync observes the created Jobs (their parallelism enters the
	// status); one more with nothing new writes nothing.
	fx.sync("js")
	if p := js.Status.ReplicatedJobsStatus[1].ObservedParallelism; p != nil {
		t.Fatalf("observedParallelism %d before any Job was observed", *p)
	}
	if p := rjStatus(&fx.jobSet("js").Status, "workers").ObservedParallelism; p == nil || *p != 2 {
		t.Fatalf("observedParallelism = %v, want 2", p)
	}
	fx.kube.ClearActions()
	fx.jsc.ClearActions()
	fx.sync("js")
	if a := writes(fx.kube.Actions()); len(a) != 0 {
		t.Fatalf("unexpected child writes %v", a)
	}
	if a := writes(fx.jsc.Actions()); len(a) != 0 {
		t.Fatalf("unexpected JobSet writes %v", a)
	}
	// A deleted Service is recreated.
	if err := fx.kube.CoreV1().Services(ns).Delete(fx.ctx, "js", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fx.sync("js")
	if _, err := fx.kube.CoreV1().Services(ns).Get(fx.ctx, "js", metav1.GetOptions{}); err != nil {
		t.Fatalf("service not recreated: %v", err)
	}
}

func writes(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
		}
	}
	return out
}

func TestServiceNotStolen(t *testing.T) {
	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: ns, Labels: map[string]string{jobset.JobSetNameKey: "js"}}}
	fx := newFixture(t, newJobSet("js"), foreign)
	fx.sync("js")
	svc, _ := fx.kube.CoreV1().Services(ns).Get(fx.ctx, "js", metav1.GetOptions{})
	if len(svc.OwnerReferences) != 0 || svc.Spec.ClusterIP != "" {
		t.Fatalf("foreign service modified: %+v", svc)
	}
	if len(fx.jobs()) != 3 {
		t.Fatalf("jobs not created")
	}
}

func TestExpectationsPreventDoubleCreate(t *testing.T) {
	fx := newFixture(t, newJobSet("js"))
	fx.sync("js")
	fx.kube.ClearActions()
	// The Job cache has not caught up: sync without refreshing it.
	if _, err := fx.c.sync(fx.ctx, ns+"/js"); err != nil {
		t.Fatal(err)
	}
	for _, a := range fx.kube.Actions() {
		if a.GetVerb() == "create" {
			t.Fatalf("created again from a stale cache: %v", a)
		}
	}
}

func TestExpectationsObservedThroughEvents(t *testing.T) {
	fx := newFixture(t, newJobSet("js"))
	fx.sync("js")
	// js-workers-1 is created and deleted again before the next sync: the
	// cache never shows it, but the informer delivered its events.
	j := fx.job("js-workers-1")
	if err := fx.kube.BatchV1().Jobs(ns).Delete(fx.ctx, j.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if fx.c.exp.satisfied(ns+"/js", func(string) *batchv1.Job { return nil }) {
		t.Fatalf("expectations satisfied before any event")
	}
	for _, n := range allJobs {
		fx.c.observeJob(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns, OwnerReferences: []metav1.OwnerReference{ownerRef(newJobSet("js"))}}}, false)
	}
	fx.sync("js")
	if _, err := fx.kube.BatchV1().Jobs(ns).Get(fx.ctx, "js-workers-1", metav1.GetOptions{}); err != nil {
		t.Fatalf("deleted Job not recreated: %v", err)
	}
}

func TestCompletedDeletesActiveJobs(t *testing.T) {
	js := newJobSet("js", func(js *jobset.JobSet) {
		js.Spec.SuccessPolicy = &jobset.SuccessPolicy{Operator: jobset.OperatorAny, TargetReplicatedJobs: []string{"leader"}}
	})
	fx := newFixture(t, js)
	fx.sync("js")
	fx.setJob("js-leader-0", completeJob)
	fx.events()
	if d := fx.sync("js"); d == 0 {
		t.Fatalf("expected an immediate requeue after finishing")
	}
	got := fx.jobSet("js")
	wantCond(t, got, "Completed", metav1.ConditionTrue, "AllJobsCompleted", "jobset completed successfully")
	if got.Status.TerminalState != "Completed" {
		t.Fatalf("terminalState = %q", got.Status.TerminalState)
	}
	if evs := fx.events(); len(evs) != 1 || evs[0] != "Normal AllJobsCompleted jobset completed successfully" {
		t.Fatalf("events = %q", evs)
	}
	fx.sync("js")
	if got := fx.jobNames(); !reflect.DeepEqual(got, []string{"js-leader-0"}) {
		t.Fatalf("after completion jobs = %v, want only the finished one", got)
	}
	// Finished JobSets create nothing more.
	fx.sync("js")
	if got := fx.jobNames(); len(got) != 1 {
		t.Fatalf("jobs = %v", got)
	}
}

func TestRestartRecreate(t *testing.T) {
	for _, strategy := range []jobset.JobSetRestartStrategy{jobset.Recreate, jobset.BlockingRecreate} {
		t.Run(string(strategy), func(t *testing.T) {
			js := newJobSet("js", func(js *jobset.JobSet) {
				js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 3, RestartStrategy: strategy}
			})
			fx := newFixture(t, js)
			fx.sync("js")
			fx.setJob("js-workers-0", failJob("BackoffLimitExceeded", "x", t0))
			// Foreground deletion: js-leader-0 stays terminating.
			now := metav1.NewTime(t0)
			fx.kube.PrependReactor("delete", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
				d := a.(k8stesting.DeleteAction)
				if d.GetName() != "js-leader-0" {
					return false, nil, nil
				}
				o, err := fx.kube.Tracker().Get(batchv1.SchemeGroupVersion.WithResource("jobs"), ns, d.GetName())
				if err != nil {
					return true, nil, err
				}
				j := o.(*batchv1.Job).DeepCopy()
				j.DeletionTimestamp = &now
				j.Finalizers = []string{"foregroundDeletion"}
				return true, nil, fx.kube.Tracker().Update(batchv1.SchemeGroupVersion.WithResource("jobs"), j, ns)
			})
			fx.sync("js") // decide the restart and delete the old attempt
			if got := fx.jobSet("js").Status; got.Restarts != 1 || ptr.Deref(got.ExecutionAttempts, 0) != 1 {
				t.Fatalf("status = %+v", got)
			}
			if !reflect.DeepEqual(fx.jobNames(), []string{"js-leader-0"}) {
				t.Fatalf("old attempt not deleted in the deciding sync: %v", fx.jobNames())
			}
			fx.sync("js") // create what may be created
			var fresh []string
			for _, j := range fx.jobs() {
				if j.Labels[jobset.RestartsKey] == "1" {
					fresh = append(fresh, j.Name)
					if j.Annotations[jobset.ExecutionAttemptKey] != "1" {
						t.Errorf("%s execution-attempt = %q", j.Name, j.Annotations[jobset.ExecutionAttemptKey])
					}
				}
			}
			switch strategy {
			case jobset.Recreate:
				if !reflect.DeepEqual(fresh, []string{"js-workers-0", "js-workers-1"}) {
					t.Fatalf("Recreate: new jobs = %v", fresh)
				}
			case jobset.BlockingRecreate:
				if len(fresh) != 0 {
					t.Fatalf("BlockingRecreate created %v before the old attempt was gone", fresh)
				}
			}
			// The old Job finally goes.
			fx.kube.ReactionChain = fx.kube.ReactionChain[1:]
			if err := fx.kube.Tracker().Delete(batchv1.SchemeGroupVersion.WithResource("jobs"), ns, "js-leader-0"); err != nil {
				t.Fatal(err)
			}
			fx.sync("js")
			for _, j := range fx.jobs() {
				if j.Labels[jobset.RestartsKey] != "1" {
					t.Fatalf("%s has restart-attempt %q", j.Name, j.Labels[jobset.RestartsKey])
				}
			}
			if got := fx.jobNames(); !reflect.DeepEqual(got, allJobs) {
				t.Fatalf("jobs = %v", got)
			}
			// All new Jobs ready: RestartingJobSet ends.
			for _, n := range allJobs {
				fx.setJob(n, readyJob)
			}
			fx.sync("js")
			wantCond(t, fx.jobSet("js"), conditionRestartingJobSet, metav1.ConditionFalse, "JobsReady", "all jobs are ready")
		})
	}
}

func TestRestartJobRecreatesOneJob(t *testing.T) {
	js := newJobSet("js", func(js *jobset.JobSet) {
		js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 3, Rules: []jobset.FailurePolicyRule{{Name: "one", Action: jobset.RestartJob}}}
	})
	fx := newFixture(t, js)
	fx.sync("js")
	uid0 := fx.job("js-workers-0").UID
	fx.setJob("js-workers-1", failJob("BackoffLimitExceeded", "x", t0))
	fx.sync("js") // jobRestarts[1] = 1
	fx.sync("js") // delete the failed Job
	fx.sync("js") // recreate it
	j := fx.job("js-workers-1")
	if j.Labels[jobset.JobRestartsKey] != "1" || j.Labels[jobset.RestartsKey] != "0" || jobFailed(j) {
		t.Fatalf("recreated job labels = %v", j.Labels)
	}
	if fx.job("js-workers-0").UID != uid0 || len(fx.jobs()) != 3 {
		t.Fatalf("other jobs touched")
	}
	if got := fx.jobSet("js").Status; got.Restarts != 0 || ptr.Deref(got.ExecutionAttempts, 0) != 0 {
		t.Fatalf("status = %+v", got)
	}
}

func jobFailed(j *batchv1.Job) bool { return jobFinished(j) == batchv1.JobFailed }

func TestMaxRestartsSequence(t *testing.T) {
	js := newJobSet("js", func(js *jobset.JobSet) {
		js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 2}
	})
	fx := newFixture(t, js)
	fx.sync("js")
	for attempt := 1; attempt <= 3; attempt++ {
		fx.setJob("js-leader-0", failJob("BackoffLimitExceeded", "x", t0))
		fx.sync("js") // failure policy
		fx.sync("js") // delete
		fx.sync("js") // create
		got := fx.jobSet("js")
		if attempt <= 2 {
			if got.Status.Restarts != int32(attempt) || finished(got) {
				t.Fatalf("attempt %d: status %+v", attempt, got.Status)
			}
			if fx.job("js-leader-0").Labels[jobset.RestartsKey] != strings.TrimSpace(string(rune('0'+attempt))) {
				t.Fatalf("attempt %d: leader labels %v", attempt, fx.job("js-leader-0").Labels)
			}
		} else {
			wantCond(t, got, "Failed", metav1.ConditionTrue, "ReachedMaxRestarts", "")
			wantCond(t, got, conditionRestartingJobSet, metav1.ConditionFalse, "JobSetFailed", "jobset failed")
			if got.Status.Restarts != 2 {
				t.Fatalf("restarts = %d", got.Status.Restarts)
			}
		}
	}
}

func TestSuspendResumeExecutionAttempts(t *testing.T) {
	js := newJobSet("js", func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(true) })
	fx := newFixture(t, js)

	// Created suspended and never run: no Jobs, no Service.
	fx.sync("js")
	if len(fx.jobs()) != 0 {
		t.Fatalf("jobs created for a never-run suspended JobSet")
	}
	if svcs, _ := fx.kube.CoreV1().Services(ns).List(fx.ctx, metav1.ListOptions{}); len(svcs.Items) != 0 {
		t.Fatalf("service created for a never-run suspended JobSet")
	}
	wantCond(t, fx.jobSet("js"), "Suspended", metav1.ConditionTrue, "SuspendedJobs", "jobset is suspended")
	if a := fx.jobSet("js").Status.ExecutionAttempts; a != nil {
		t.Fatalf("executionAttempts %d before the first run, want absent (KEP-1282)", *a)
	}

	// First resume: Jobs created, execution attempt 0, shown as 0.
	fx.updateJobSet("js", func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(false) })
	fx.sync("js")
	got := fx.jobSet("js")
	wantCond(t, got, "Suspended", metav1.ConditionFalse, "ResumeJobs", "jobset is resumed")
	if got.Status.ExecutionAttempts == nil || *got.Status.ExecutionAttempts != 0 || len(fx.jobs()) != 3 {
		t.Fatalf("first resume: attempts %v, jobs %v; want 0 (not absent) and 3 Jobs", got.Status.ExecutionAttempts, fx.jobNames())
	}
	for _, j := range fx.jobs() {
		if ptr.Deref(j.Spec.Suspend, true) || j.Annotations[jobset.ExecutionAttemptKey] != "0" || j.Labels[jobset.RestartsKey] != "0" {
			t.Fatalf("job %s: suspend %v labels %v annotations %v", j.Name, j.Spec.Suspend, j.Labels, j.Annotations)
		}
	}
	fx.setJob("js-leader-0", func(j *batchv1.Job) { j.Status.StartTime = ptr.To(metav1.NewTime(t0)) })

	// Suspend: every active Job suspended.
	fx.updateJobSet("js", func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(true) })
	fx.sync("js")
	for _, j := range fx.jobs() {
		if !ptr.Deref(j.Spec.Suspend, false) {
			t.Fatalf("job %s not suspended", j.Name)
		}
	}
	wantCond(t, fx.jobSet("js"), "Suspended", metav1.ConditionTrue, "SuspendedJobs", "")
	fx.sync("js") // idempotent while suspended
	if ptr.Deref(fx.jobSet("js").Status.ExecutionAttempts, 0) != 0 {
		t.Fatalf("attempts changed while suspended")
	}

	// Kueue edits the template while suspended, then resumes.
	fx.updateJobSet("js", func(js *jobset.JobSet) {
		js.Spec.Suspend = ptr.To(false)
		for i := range js.Spec.ReplicatedJobs {
			pt := &js.Spec.ReplicatedJobs[i].Template.Spec.Template
			pt.Labels["kueue.x-k8s.io/podset"] = "main"
			pt.Annotations = map[string]string{"kueue.x-k8s.io/workload": "wl"}
			pt.Spec.NodeSelector = map[string]string{"flavor": "a"}
			pt.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
			pt.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/topology"}}
		}
	})
	fx.sync("js")
	got = fx.jobSet("js")
	if ptr.Deref(got.Status.ExecutionAttempts, 0) != 1 || got.Status.Restarts != 0 {
		t.Fatalf("after resume: attempts %d restarts %d", ptr.Deref(got.Status.ExecutionAttempts, 0), got.Status.Restarts)
	}
	wantCond(t, got, "Suspended", metav1.ConditionFalse, "ResumeJobs", "")
	for _, j := range fx.jobs() {
		pt := j.Spec.Template
		switch {
		case ptr.Deref(j.Spec.Suspend, true):
			t.Errorf("%s still suspended", j.Name)
		case j.Labels[jobset.RestartsKey] != "0":
			t.Errorf("%s restart-attempt %q", j.Name, j.Labels[jobset.RestartsKey])
		case j.Annotations[jobset.ExecutionAttemptKey] != "1" || pt.Annotations[jobset.ExecutionAttemptKey] != "1":
			t.Errorf("%s execution-attempt %q/%q", j.Name, j.Annotations[jobset.ExecutionAttemptKey], pt.Annotations[jobset.ExecutionAttemptKey])
		case pt.Labels["kueue.x-k8s.io/podset"] != "main" || pt.Labels[jobset.JobSetNameKey] != "js" || pt.Annotations["kueue.x-k8s.io/workload"] != "wl":
			t.Errorf("%s template metadata not merged: %v %v", j.Name, pt.Labels, pt.Annotations)
		case pt.Spec.NodeSelector["flavor"] != "a" || len(pt.Spec.Tolerations) != 1 || len(pt.Spec.SchedulingGates) != 1:
			t.Errorf("%s scheduling edits not merged: %+v", j.Name, pt.Spec)
		case j.Status.StartTime != nil:
			t.Errorf("%s startTime not cleared", j.Name)
		}
	}
	// The resume is counted once.
	fx.sync("js")
	if ptr.Deref(fx.jobSet("js").Status.ExecutionAttempts, 0) != 1 {
		t.Fatalf("attempts counted twice")
	}

	// A failure restart afterwards: restart-attempt 1, execution-attempt 2.
	fx.updateJobSet("js", func(js *jobset.JobSet) {
		js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 1}
	})
	fx.setJob("js-leader-0", failJob("BackoffLimitExceeded", "x", t0))
	fx.sync("js")
	fx.sync("js")
	fx.sync("js")
	j := fx.job("js-workers-1")
	if j.Labels[jobset.RestartsKey] != "1" || j.Annotations[jobset.ExecutionAttemptKey] != "2" {
		t.Fatalf("after restart: %v %v", j.Labels, j.Annotations)
	}
}

func TestSuspendedAfterRunCreatesSuspendedJobs(t *testing.T) {
	fx := newFixture(t, newJobSet("js"))
	fx.sync("js")
	fx.sync("js")
	if err := fx.kube.BatchV1().Jobs(ns).Delete(fx.ctx, "js-workers-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fx.updateJobSet("js", func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(true) })
	fx.sync("js")
	if !ptr.Deref(fx.job("js-workers-1").Spec.Suspend, false) {
		t.Fatalf("job recreated unsuspended while the JobSet is suspended")
	}
}

func TestStartupOrder(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*jobset.JobSet)
		// jobs expected after each step; between steps every existing Job
		// becomes ready (or complete when complete is set)
		steps    [][]string
		complete bool
	}{
		{
			name: "AnyOrder",
			mod:  func(*jobset.JobSet) {},
			steps: [][]string{
				{"js-leader-0", "js-ps-0", "js-workers-0", "js-workers-1"},
			},
		},
		{
			name: "InOrder",
			mod: func(js *jobset.JobSet) {
				js.Spec.StartupPolicy = &jobset.StartupPolicy{StartupPolicyOrder: jobset.InOrder}
			},
			steps: [][]string{
				{"js-leader-0"},
				{"js-leader-0", "js-workers-0", "js-workers-1"},
				{"js-leader-0", "js-ps-0", "js-workers-0", "js-workers-1"},
			},
		},
		{
			name: "dependsOn Complete",
			mod: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].DependsOn = []jobset.DependsOn{{Name: "leader", Status: jobset.DependencyComplete}}
				js.Spec.ReplicatedJobs[2].DependsOn = []jobset.DependsOn{{Name: "leader", Status: jobset.DependencyComplete}}
			},
			complete: true,
			steps: [][]string{
				{"js-leader-0"},
				{"js-leader-0", "js-ps-0", "js-workers-0", "js-workers-1"},
			},
		},
		{
			name: "dependsOn Ready",
			mod: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[2].DependsOn = []jobset.DependsOn{{Name: "workers", Status: jobset.DependencyReady}}
			},
			steps: [][]string{
				{"js-leader-0", "js-workers-0", "js-workers-1"},
				{"js-leader-0", "js-ps-0", "js-workers-0", "js-workers-1"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			js := newJobSet("js", func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, rjob("ps", 1))
				js.Spec.SuccessPolicy = &jobset.SuccessPolicy{Operator: jobset.OperatorAll, TargetReplicatedJobs: []string{"ps"}}
				tc.mod(js)
			})
			fx := newFixture(t, js)
			for i, want := range tc.steps {
				fx.sync("js")
				if got := fx.jobNames(); !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d: jobs = %v, want %v", i, got, want)
				}
				for _, n := range want {
					if tc.complete {
						fx.setJob(n, completeJob)
					} else {
						fx.setJob(n, readyJob)
					}
				}
				fx.sync("js") // recount
			}
			if tc.name == "InOrder" {
				got := fx.jobSet("js")
				wantCond(t, got, "StartupPolicyCompleted", metav1.ConditionTrue, "InOrderStartupPolicyCompleted", "in order startup policy has completed")
				// As upstream, completion flips InProgress's status only.
				wantCond(t, got, "StartupPolicyInProgress", metav1.ConditionFalse, "InOrderStartupPolicyInProgress", "in order startup policy is in progress")
			}
		})
	}
}

func TestInOrderResume(t *testing.T) {
	js := newJobSet("js", func(js *jobset.JobSet) {
		js.Spec.StartupPolicy = &jobset.StartupPolicy{StartupPolicyOrder: jobset.InOrder}
	})
	fx := newFixture(t, js)
	fx.sync("js")
	fx.setJob("js-leader-0", readyJob)
	fx.sync("js")
	fx.sync("js")
	fx.updateJobSet("js", func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(true) })
	fx.sync("js")
	for _, n := range fx.jobNames() {
		fx.setJob(n, func(j *batchv1.Job) { j.Status = batchv1.JobStatus{} })
	}
	fx.sync("js")
	fx.updateJobSet("js", func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(false) })
	fx.sync("js")
	if ptr.Deref(fx.job("js-leader-0").Spec.Suspend, true) || !ptr.Deref(fx.job("js-workers-0").Spec.Suspend, false) {
		t.Fatalf("resume must follow the startup order")
	}
	fx.setJob("js-leader-0", readyJob)
	fx.sync("js")
	fx.sync("js")
	if ptr.Deref(fx.job("js-workers-0").Spec.Suspend, true) {
		t.Fatalf("workers not resumed after the leader became ready")
	}
}

func TestTTLAfterFinished(t *testing.T) {
	js := newJobSet("js", func(js *jobset.JobSet) { js.Spec.TTLSecondsAfterFinished = ptr.To[int32](60) })
	fx := newFixture(t, js)
	fx.sync("js")
	for _, n := range allJobs {
		fx.setJob(n, completeJob)
	}
	fx.sync("js")
	if !finished(fx.jobSet("js")) {
		t.Fatalf("not completed")
	}
	fx.clock.Step(10 * time.Second)
	if d := fx.sync("js"); d != 50*time.Second {
		t.Fatalf("requeue after %v, want 50s", d)
	}
	fx.clock.Step(50 * time.Second)
	fx.sync("js")
	if _, err := fx.jsc.JobsetV1alpha2().JobSets(ns).Get(fx.ctx, "js", metav1.GetOptions{}); err == nil {
		t.Fatalf("JobSet not deleted after its TTL")
	}
	var policy *metav1.DeletionPropagation
	for _, a := range fx.jsc.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok {
			policy = d.GetDeleteOptions().PropagationPolicy
		}
	}
	if policy == nil || *policy != metav1.DeletePropagationForeground {
		t.Fatalf("JobSet not deleted in the foreground")
	}
}

func TestManagedByOtherControllerIgnored(t *testing.T) {
	js := newJobSet("js", func(js *jobset.JobSet) { js.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue") })
	fx := newFixture(t, js)
	fx.sync("js")
	if len(fx.jobs()) != 0 || len(writes(fx.jsc.Actions())) != 0 {
		t.Fatalf("managedBy JobSet reconciled")
	}
	own := newJobSet("own", func(js *jobset.JobSet) { js.Spec.ManagedBy = ptr.To(jobset.JobSetControllerName) })
	fx = newFixture(t, own)
	fx.sync("own")
	if len(fx.jobs()) != 3 {
		t.Fatalf("JobSet managed by this controller not reconciled")
	}
}

func TestVolumeClaimPolicies(t *testing.T) {
	claim := func(name string) corev1.PersistentVolumeClaim {
		return corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
	}
	js := newJobSet("js", func(js *jobset.JobSet) {
		js.Spec.VolumeClaimPolicies = []jobset.VolumeClaimPolicy{
			{Templates: []corev1.PersistentVolumeClaim{claim("data")}},
			{Templates: []corev1.PersistentVolumeClaim{claim("ckpt")}, RetentionPolicy: &jobset.VolumeRetentionPolicy{WhenDeleted: ptr.To(jobset.RetentionPolicyRetain)}},
		}
		js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/d"}, {Name: "ckpt", MountPath: "/c"}}
	})
	fx := newFixture(t, js)
	fx.sync("js")
	data, err := fx.kube.CoreV1().PersistentVolumeClaims(ns).Get(fx.ctx, "data-js", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !isOwnedBy(data.OwnerReferences, js) || data.Labels[jobset.JobSetNameKey] != "js" {
		t.Fatalf("data claim = %+v", data.ObjectMeta)
	}
	ckpt, err := fx.kube.CoreV1().PersistentVolumeClaims(ns).Get(fx.ctx, "ckpt-js", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ckpt.OwnerReferences) != 0 {
		t.Fatalf("retained claim owned: %+v", ckpt.OwnerReferences)
	}
	if vols := fx.job("js-leader-0").Spec.Template.Spec.Volumes; len(vols) != 2 {
		t.Fatalf("volumes = %+v", vols)
	}
	// Created once.
	fx.kube.ClearActions()
	fx.sync("js")
	for _, a := range fx.kube.Actions() {
		if a.GetVerb() == "create" {
			t.Fatalf("re-created %v", a.GetResource())
		}
	}
}

func TestElasticChanges(t *testing.T) {
	js := newJobSet("js", func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].Replicas = ptr.To[int32](3) })
	fx := newFixture(t, js)
	fx.sync("js")
	if len(fx.jobs()) != 4 {
		t.Fatalf("jobs = %v", fx.jobNames())
	}
	// Scale down and change parallelism.
	fx.updateJobSet("js", func(js *jobset.JobSet) {
		js.Spec.ReplicatedJobs[1].Replicas = ptr.To[int32](1)
		js.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = ptr.To[int32](4)
		js.Spec.ReplicatedJobs[1].Template.Spec.Completions = ptr.To[int32](4)
	})
	fx.sync("js")
	if got := fx.jobNames(); !reflect.DeepEqual(got, []string{"js-leader-0", "js-workers-0"}) {
		t.Fatalf("after scale down jobs = %v", got)
	}
	w := fx.job("js-workers-0")
	if *w.Spec.Parallelism != 4 || *w.Spec.Completions != 4 {
		t.Fatalf("parallelism/completions not patched: %v/%v", *w.Spec.Parallelism, *w.Spec.Completions)
	}
	if *fx.job("js-leader-0").Spec.Parallelism != 2 {
		t.Fatalf("leader patched")
	}
	// The next sync sees the patched Job and reports it for the scale's
	// status.replicas.
	fx.sync("js")
	if got := rjStatus(&fx.jobSet("js").Status, "workers").ObservedParallelism; got == nil || *got != 4 {
		t.Fatalf("observedParallelism = %v, want 4", got)
	}
	// Scale up: new index with labels carrying the new counts.
	fx.updateJobSet("js", func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].Replicas = ptr.To[int32](2) })
	fx.sync("js")
	n := fx.job("js-workers-1")
	if n.Labels[jobset.ReplicatedJobReplicas] != "2" || n.Labels[jobset.GlobalReplicasKey] != "3" {
		t.Fatalf("new job labels = %v", n.Labels)
	}
}

func TestStaleJobSetCacheWaits(t *testing.T) {
	js := newJobSet("js")
	fx := newFixture(t, js)
	fx.sync("js")
	// A Job of attempt 1 exists although the cached JobSet says 0.
	fx.setJob("js-leader-0", func(j *batchv1.Job) { j.Labels[jobset.RestartsKey] = "1" })
	fx.kube.ClearActions()
	if d := fx.sync("js"); d == 0 {
		t.Fatalf("expected a requeue")
	}
	if a := writes(fx.kube.Actions()); len(a) != 0 {
		t.Fatalf("acted on a stale JobSet: %v", a)
	}
}

func TestNeverPanicsOnOddInput(t *testing.T) {
	js := newJobSet("js", func(js *jobset.JobSet) {
		js.Spec.ReplicatedJobs[0].Replicas = ptr.To[int32](-1)
		js.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = nil
		js.Spec.Network = nil
		js.Spec.StartupPolicy = nil
		js.Spec.SuccessPolicy = nil
		js.Spec.FailurePolicy = &jobset.FailurePolicy{Rules: []jobset.FailurePolicyRule{{Name: "x", Action: "Bogus"}}}
		js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "nope"}
		js.Spec.ReplicatedJobs[1].DependsOn = []jobset.DependsOn{{Name: "missing", Status: "Weird"}}
	})
	fx := newFixture(t, js)
	// Foreign and malformed Jobs carrying the label.
	fx.kube.Tracker().Add(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: ns, Labels: map[string]string{jobset.JobSetNameKey: "js"}}})
	fx.sync("js")
	fx.setJob("js-workers-0", failJob("", "", t0))
	fx.sync("js")
	fx.sync("js")
	if _, err := fx.kube.BatchV1().Jobs(ns).Get(fx.ctx, "stray", metav1.GetOptions{}); err != nil {
		t.Fatalf("a Job not owned by the JobSet was touched: %v", err)
	}
}

func TestStaleStatusAfterRestartWaits(t *testing.T) {
	js := newJobSet("js", func(js *jobset.JobSet) { js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 2} })
	fx := newFixture(t, js)
	fx.sync("js")
	fx.setJob("js-leader-0", failJob("BackoffLimitExceeded", "x", t0))
	fx.sync("js") // restart decided, old attempt deleted
	// The JobSet cache still shows the status before the restart, and the
	// old Jobs are gone: nothing may be created from that stale status.
	fx.refresh()
	stale := js.DeepCopy()
	if err := fx.f.JobSet.Jobset().V1alpha2().JobSets().Informer().GetIndexer().Update(stale); err != nil {
		t.Fatal(err)
	}
	fx.kube.ClearActions()
	d, err := fx.c.sync(fx.ctx, ns+"/js")
	if err != nil || d == 0 {
		t.Fatalf("sync = %v, %v; want a requeue", d, err)
	}
	if a := writes(fx.kube.Actions()); len(a) != 0 {
		t.Fatalf("acted on a stale status: %v", a)
	}
	fx.sync("js")
	for _, j := range fx.jobs() {
		if j.Labels[jobset.RestartsKey] != "1" {
			t.Fatalf("job %s of attempt %s", j.Name, j.Labels[jobset.RestartsKey])
		}
	}
	if len(fx.jobs()) != 3 {
		t.Fatalf("jobs = %v", fx.jobNames())
	}
}

// TestControllerRestartMidRestart replaces the controller (fresh caches and
// expectations) while a JobSet restart is half done: the new controller
// converges without duplicate or lost Jobs and without counting again.
func TestControllerRestartMidRestart(t *testing.T) {
	js := newJobSet("js", func(js *jobset.JobSet) { js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 3} })
	fx := newFixture(t, js)
	fx.sync("js")
	fx.setJob("js-workers-1", failJob("BackoffLimitExceeded", "x", t0))
	// Deletions stall: only js-workers-0 goes away before the "crash".
	now := metav1.NewTime(t0)
	fx.kube.PrependReactor("delete", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.DeleteAction).GetName()
		if name == "js-workers-0" {
			return false, nil, nil
		}
		o, err := fx.kube.Tracker().Get(batchv1.SchemeGroupVersion.WithResource("jobs"), ns, name)
		if err != nil {
			return true, nil, err
		}
		j := o.(*batchv1.Job).DeepCopy()
		j.DeletionTimestamp = &now
		return true, nil, fx.kube.Tracker().Update(batchv1.SchemeGroupVersion.WithResource("jobs"), j, ns)
	})
	fx.sync("js") // restart decided; js-workers-0 deleted, the others terminating
	fx.sync("js") // js-workers-0 of attempt 1 created
	if got := fx.job("js-workers-0").Labels[jobset.RestartsKey]; got != "1" {
		t.Fatalf("js-workers-0 attempt %s", got)
	}

	// New controller process while two old Jobs are still terminating.
	fx.kube.ReactionChain = fx.kube.ReactionChain[1:]
	fx.f = NewFactories(fx.kube, fx.jsc, 0)
	c, err := New(fx.kube, fx.jsc, fx.f, Options{Recorder: fx.rec, Clock: fx.clock})
	if err != nil {
		t.Fatal(err)
	}
	fx.c = c
	fx.sync("js")
	if n := len(fx.jobs()); n != 3 {
		t.Fatalf("%d jobs while the old ones terminate", n)
	}
	for _, n := range []string{"js-leader-0", "js-workers-1"} {
		if err := fx.kube.Tracker().Delete(batchv1.SchemeGroupVersion.WithResource("jobs"), ns, n); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		fx.sync("js")
	}
	got := fx.jobSet("js")
	if got.Status.Restarts != 1 || got.Status.RestartsCountTowardsMax != 1 {
		t.Fatalf("restarts counted again: %+v", got.Status)
	}
	if names := fx.jobNames(); !reflect.DeepEqual(names, allJobs) {
		t.Fatalf("jobs = %v", names)
	}
	for _, j := range fx.jobs() {
		if j.Labels[jobset.RestartsKey] != "1" || jobFailed(&j) {
			t.Fatalf("job %s attempt %s", j.Name, j.Labels[jobset.RestartsKey])
		}
	}
}
