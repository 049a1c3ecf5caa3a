package controller

import (
	"context"
	"k8s.io/utils/ptr"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kfake "k8s.io/client-go/kubernetes/fake"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller/jobcache"
	jsfake "github.com/nativejobset/jobset/pkg/generated/clientset/versioned/fake"
)

// TestRunWithInformers wires the controller to running informers over fake
// clients: a new JobSet gets its Jobs, and a failed Job leads to a restart
// whose Jobs replace the old ones.
func TestRunWithInformers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := kfake.NewSimpleClientset()
	jsc := jsfake.NewSimpleClientset()
	f := NewFactories(kube, jsc, 0)
	c, err := New(kube, jsc, f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(ctx, 2)
	}()

	js := newJobSet("js", func(js *jobset.JobSet) {
		js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 1}
	})
	if _, err := jsc.JobsetV1alpha2().JobSets(ns).Create(ctx, js, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return cond(), nil
		}); err != nil {
			l, _ := kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
			for _, j := range l.Items {
				t.Logf("job %s labels %v status %+v del %v", j.Name, j.Labels[jobset.RestartsKey], j.Status.Conditions, j.DeletionTimestamp)
			}
			got, _ := jsc.JobsetV1alpha2().JobSets(ns).Get(ctx, "js", metav1.GetOptions{})
			t.Logf("status %+v", got.Status)
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	jobsWithAttempt := func(attempt string) int {
		l, _ := kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		n := 0
		for _, j := range l.Items {
			if j.Labels[jobset.RestartsKey] == attempt {
				n++
			}
		}
		return n
	}
	waitFor("3 Jobs", func() bool { return jobsWithAttempt("0") == 3 })
	if !c.HasSynced() {
		t.Fatalf("not synced")
	}

	j, err := kube.BatchV1().Jobs(ns).Get(ctx, "js-workers-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	failJob("BackoffLimitExceeded", "x", time.Now())(j)
	if _, err := kube.BatchV1().Jobs(ns).UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("restart", func() bool { return jobsWithAttempt("1") == 3 && jobsWithAttempt("0") == 0 })
	got, _ := jsc.JobsetV1alpha2().JobSets(ns).Get(ctx, "js", metav1.GetOptions{})
	if got.Status.Restarts != 1 || ptr.Deref(got.Status.ExecutionAttempts, 0) != 1 {
		t.Fatalf("status = %+v", got.Status)
	}
	// The cached Jobs are trimmed.
	obj, exists, err := c.jobs.GetByKey(ns + "/js-leader-0")
	if err != nil || !exists {
		t.Fatalf("cached Job: %v %v", exists, err)
	}
	if _, ok := obj.(*jobcache.Job); !ok {
		t.Fatalf("cached Job is a %T, not in its compact form", obj)
	}
	cancel()
	<-done
}

// TestJobCountsBatched: a Job update that changes only its pod counts syncs
// its JobSet after jobCountsBatch, so that many such updates cost one
// sync; a Job that fails syncs it at once.
func TestJobCountsBatched(t *testing.T) {
	fx := newFixture(t, newJobSet("js"))
	fx.sync("js")
	created := fx.job("js-workers-0")
	old := fx.trimmed(created.DeepCopy())
	update := func(mod func(*batchv1.Job)) interface{} {
		j := created.DeepCopy()
		j.ResourceVersion += "1"
		mod(j)
		return fx.trimmed(j)
	}
	if n := fx.c.queue.Len(); n != 0 {
		t.Fatalf("%d keys queued before any Job event", n)
	}

	fx.c.jobUpdated(old, update(readyJob))
	if n := fx.c.queue.Len(); n != 0 {
		t.Fatalf("a change of the pod counts queued the JobSet at once (%d keys)", n)
	}
	fx.c.jobUpdated(old, update(func(j *batchv1.Job) { j.Status.Succeeded = 1 }))
	fx.clock.Step(jobCountsBatch)
	if err := wait.PollUntilContextTimeout(fx.ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return fx.c.queue.Len() == 1, nil
	}); err != nil {
		t.Fatalf("two count changes: %d keys queued after %v, want the JobSet once", fx.c.queue.Len(), jobCountsBatch)
	}
	if key, _ := fx.c.queue.Get(); key != ns+"/js" {
		t.Fatalf("queued %q", key)
	}
	fx.c.queue.Done(ns + "/js")

	fx.c.jobUpdated(old, update(failJob("BackoffLimitExceeded", "x", t0)))
	if n := fx.c.queue.Len(); n != 1 {
		t.Fatalf("a failed Job queued %d keys at once, want its JobSet", n)
	}
	// A resync (the same resource version) queues nothing, even of a Job
	// not in its compact form, whose updates are otherwise queued at once.
	fx.c.queue.Get()
	fx.c.queue.Done(ns + "/js")
	resynced := created.DeepCopy()
	resynced.ResourceVersion = "7"
	fx.c.jobUpdated(resynced, resynced)
	if n := fx.c.queue.Len(); n != 0 {
		t.Fatalf("a resync queued %d keys", n)
	}
}
