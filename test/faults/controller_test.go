package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/invariants"
	"github.com/nativejobset/jobset/test/localcluster"
)

// takeoverWait is how long the tests wait for a standby to hold the lease
// after the leader died (the lease must expire, then the standby's next
// attempt wins it), with room for a loaded machine: a standby that never
// takes over fails the test, a slow one does not (the time is logged; speed
// belongs in benchmarks).
const takeoverWait = 3 * (leaseDuration + 2*retryPeriod + 10*time.Second)

// killLeader kills the controller holding the lease, runs afterKill (when
// not nil) before a standby can take over, waits for the other one to take
// over, and starts the killed one again as a standby.
func killLeader(t *testing.T, afterKill func()) {
	t.Helper()
	old, oldID, _ := liveLeader(t, "", time.Minute)
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if afterKill != nil {
		afterKill()
	}
	_, _, seen := liveLeader(t, oldID, takeoverWait)
	took := seen.Sub(killed)
	t.Logf("killed the leader %s (pid %d); a standby held the lease %.1fs later (lease %s)", old.Component, old.PID, took.Seconds(), leaseDuration)
	revive(t, "killed by "+t.Name())
}

// createAll creates the JobSets with a few clients in parallel, retrying
// a create that failed with a retryable error (an ambiguous create that
// did happen then reports AlreadyExists).
func createAll(t *testing.T, jss []*v1alpha2.JobSet) {
	t.Helper()
	var wg sync.WaitGroup
	next := make(chan *v1alpha2.JobSet)
	errs := make(chan error, len(jss))
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for js := range next {
				err := waitPoll(time.Minute, func(ctx context.Context) (bool, error) {
					_, err := cl.JobSets.JobsetV1alpha2().JobSets(js.Namespace).Create(ctx, js, metav1.CreateOptions{})
					switch {
					case err == nil, apierrors.IsAlreadyExists(err):
						return true, nil
					case retryable(err):
						return false, nil
					}
					return false, err
				})
				if err != nil {
					errs <- fmt.Errorf("creating %s: %w", js.Name, err)
				}
			}
		}()
	}
	for _, js := range jss {
		next <- js
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestControllerLeaderKilledDuringFanOut creates 200 JobSets of one Job
// each and kills the controller leader once a quarter of the Jobs exist,
// while the Jobs of the second hundred are held back (refused by an
// admission policy), so that the kill lands mid-way. The standby takes
// over, and in the end every JobSet has exactly its Job, created once, and
// counts it active.
func TestControllerLeaderKilledDuringFanOut(t *testing.T) {
	ns := namespace(t, "fanout")
	ledger := watchJobLedger(t, ns)
	const n = 200
	var jss []*v1alpha2.JobSet
	for i := 0; i < n; i++ {
		jss = append(jss, jobSet(ns, fmt.Sprintf("fan-%03d", i), 1, 1))
	}
	hold := cl.HoldJobCreates(t, ns, "object.metadata.name.startsWith('fan-1')", localcluster.ProbeJob("fan-199-w-0", nil))
	created := make(chan struct{})
	go func() {
		defer close(created)
		createAll(t, jss)
	}()
	eventually(t, 3*time.Minute, "a quarter of the Jobs to exist", func(context.Context) (bool, error) {
		all, _ := ledger.count("0")
		return all >= n/4, nil
	})
	var atKill int
	killLeader(t, func() { atKill = countJobs(t, ns, "0") })
	t.Logf("killed the leader with %d of %d Jobs created", atKill, n)
	if atKill >= n {
		t.Fatalf("%d of %d Jobs existed at the kill: it did not land during the fan-out", atKill, n)
	}
	hold.Release()
	<-created
	checkInvariants(t, ns, invariants.Expectation{Restarts: ptr.To[int32](0), Running: true}, 4*time.Minute)
	if all, _ := ledger.count("0"); all != n {
		t.Errorf("%d distinct Jobs were created, want %d", all, n)
	}
	for _, d := range ledger.duplicates() {
		t.Error(d)
	}
}

// TestControllerLeaderKilledDuringRestarts fails one pod of each of 10
// running JobSets and kills the controller leader as soon as the first Job
// of a restart appears. Every JobSet then counts exactly one restart
// (restarts, restartsCountTowardsMax, executionAttempts) and has exactly
// its Jobs of attempt 1, each created once.
func TestControllerLeaderKilledDuringRestarts(t *testing.T) {
	ns := namespace(t, "restarts")
	ledger := watchJobLedger(t, ns)
	const n, replicas = 10, 2
	var jss []*v1alpha2.JobSet
	for i := 0; i < n; i++ {
		js := jobSet(ns, fmt.Sprintf("rs-%02d", i), replicas, 1)
		js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 3}
		jss = append(jss, js)
	}
	createAll(t, jss)
	checkInvariants(t, ns, invariants.Expectation{Restarts: ptr.To[int32](0), Running: true}, 3*time.Minute)
	if t.Failed() {
		t.FailNow()
	}

	// The last JobSet's second Job of attempt 1 is held back until the
	// kill, so that the kill lands mid-restart.
	hold := cl.HoldJobCreates(t, ns, localcluster.HeldRestartJob("rs-09-w-1", 1),
		localcluster.ProbeJob("rs-09-w-1", map[string]string{v1alpha2.RestartsKey: "1"}))
	for _, js := range jss {
		eventually(t, 2*time.Minute, "failing a pod of "+js.Name, func(ctx context.Context) (bool, error) {
			return failPod(ctx, ns, js.Name+"-w-0")
		})
	}
	eventually(t, 2*time.Minute, "the first Job of a restart", func(context.Context) (bool, error) {
		_, restarted := ledger.count("1")
		return restarted > 0, nil
	})
	var atKill int
	killLeader(t, func() { atKill = countJobs(t, ns, "1") })
	t.Logf("killed the leader with %d of %d Jobs of attempt 1 created", atKill, n*replicas)
	if atKill >= n*replicas {
		t.Fatalf("%d of %d Jobs of attempt 1 existed at the kill: it did not land during the restarts", atKill, n*replicas)
	}
	hold.Release()

	checkInvariants(t, ns, invariants.Expectation{Restarts: ptr.To[int32](1), Running: true}, 4*time.Minute)
	if _, restarted := ledger.count("1"); restarted != n*replicas {
		t.Errorf("%d distinct Jobs of attempt 1 were created, want %d", restarted, n*replicas)
	}
	for _, d := range ledger.duplicates() {
		t.Error(d)
	}
}

// countJobs counts the Jobs of the restart attempt in ns, as stored now.
func countJobs(t *testing.T, ns, attempt string) int {
	t.Helper()
	jobs, err := cl.Kube.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{LabelSelector: v1alpha2.RestartsKey + "=" + attempt})
	if err != nil {
		t.Fatalf("listing Jobs: %v", err)
	}
	return len(jobs.Items)
}
