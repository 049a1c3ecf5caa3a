package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	clientset "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
	"github.com/nativejobset/jobset/test/invariants"
	"github.com/nativejobset/jobset/test/localcluster"
)

const (
	// etcdWorkers clients write at etcdRate writes per second in all.
	etcdWorkers = 8
	etcdRate    = 20
	// etcdWriteTimeout bounds one write, so that a client blocked by an
	// etcd without quorum gives up (a retryable outcome) and sends again.
	etcdWriteTimeout = 30 * time.Second
)

// TestEtcdClusterMembersKilledDuringWrites runs the jobset-apiserver
// replicas on an etcd cluster of three members (the external-etcd overlay's
// shape) while eight clients write JobSets through kube-apiserver at a
// steady rate, and kills etcd members with SIGKILL: first a follower (the
// quorum holds), then the leader (one member of three is left: no quorum,
// so writes fail until a member is back), and then starts both again.
// Every error a client sees must be one it may retry (5xx, 429, a timeout
// or a broken connection; never another 4xx); afterwards every
// acknowledged write is stored, a watch opened through kube-apiserver
// before the kills has delivered every acknowledged write, each replica's
// watch cache equals a quorum read of etcd, and the controller has created
// the Jobs of the JobSets created with one member down, during the outage
// (retried until it succeeded) and after it.
func TestEtcdClusterMembersKilledDuringWrites(t *testing.T) {
	ns := namespace(t, "etcdkills")
	etcd := startEtcdCluster(t)
	moveAPIServersTo(t, etcd)

	w := watchJobSets(t, ns)
	ld := &etcdLoad{ns: ns, l: newLedger(), st: newStats(), deleted: map[string]bool{}}
	ld.st.mayRetry = clientMayRetry
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	ld.start(ctx, &wg)
	stopLoad := func() {
		cancel()
		wg.Wait()
	}
	defer stopLoad()
	waitAcks := func(n int, what string) {
		t.Helper()
		eventually(t, 3*time.Minute, what, func(context.Context) (bool, error) { return ld.st.ackCount() >= n, nil })
	}

	waitAcks(50, "50 writes acknowledged on three etcd members")
	leader := etcd.waitLeader(t)
	follower := etcd.other(leader)
	etcd.kill(t, follower)
	t.Logf("killed the etcd follower %s after %d acknowledged writes", follower.name, ld.st.ackCount())
	oneDown := jobSet(ns, "one-down", 1, 1)
	createRetrying(t, oneDown)
	waitAcks(ld.st.ackCount()+100, "100 more writes acknowledged with one etcd member down")

	leader = etcd.waitLeader(t)
	errorsWithOneDown := ld.st.errorSnapshot()
	etcd.kill(t, leader)
	killed := time.Now()
	ackedAtKill := ld.st.ackCount()
	t.Logf("killed the etcd leader %s after %d acknowledged writes: one member of three left", leader.name, ackedAtKill)
	// A create sent during the outage, retried as a client would until it
	// succeeds once the quorum is back.
	duringOutage := jobSet(ns, "during-outage", 1, 1)
	outageCreated := make(chan error, 1)
	go func() { outageCreated <- createRetryingErr(duringOutage, 5*time.Minute) }()
	errsAtKill := total(errorsWithOneDown)
	eventually(t, 3*time.Minute, fmt.Sprintf("%d writes to fail without quorum", etcdWorkers), func(context.Context) (bool, error) {
		return total(ld.st.errorSnapshot())-errsAtKill >= etcdWorkers, nil
	})

	etcd.restart(t, follower)
	etcd.restart(t, leader)
	restarted := time.Now()
	atRestart := ld.st.errorSnapshot()
	errorsWithoutQuorum := diff(atRestart, errorsWithOneDown)
	ackedWithoutQuorum := ld.st.ackCount() - ackedAtKill
	t.Logf("started %s and %s again %.1fs after the leader was killed", follower.name, leader.name, restarted.Sub(killed).Seconds())
	etcd.waitLeader(t)
	at := ld.st.ackCount()
	waitAcks(at+100, "100 more writes acknowledged after the restart")
	if err := <-outageCreated; err != nil {
		t.Fatalf("creating %s: %v", duringOutage.Name, err)
	}
	var outageJobsAfter time.Duration
	eventually(t, 3*time.Minute, "the Job of the JobSet created during the outage", func(ctx context.Context) (bool, error) {
		_, err := cl.Kube.BatchV1().Jobs(ns).Get(ctx, duringOutage.Name+"-w-0", metav1.GetOptions{})
		outageJobsAfter = time.Since(restarted)
		return err == nil, nil
	})
	createRetrying(t, jobSet(ns, "after-restart", 1, 1))
	stopLoad()

	// Figures.
	firstAck, firstRV := ld.firstAckAfter(restarted)
	var caughtUp time.Duration = -1
	if seenAt, ok := w.seenAt(firstRV); ok {
		caughtUp = seenAt.Sub(restarted)
	}
	p99 := ld.st.p99()
	ld.st.mu.Lock()
	t.Logf("figures: %d writes acknowledged (%d after the leader was killed and before the restart); errors by code: with one member down %s, without quorum %s, after the restart %s; "+
		"after the restart the first write was acknowledged in %.1fs, the watch through kube-apiserver delivered it %.1fs after the restart, "+
		"the controller created the Job of the JobSet created during the outage %.1fs after the restart; p99 latency %s; writes not sent (every client busy): %d; load average %s",
		ld.st.acked, ackedWithoutQuorum, formatCounts(errorsWithOneDown), formatCounts(errorsWithoutQuorum), formatCounts(diff(ld.st.errors, atRestart)),
		firstAck.Sub(restarted).Seconds(), caughtUp.Seconds(), outageJobsAfter.Seconds(), p99.Round(time.Millisecond), ld.notSent.Load(), loadAverage())
	for _, code := range sortedKeys(ld.st.examples) {
		t.Logf("first %s: %s", code, ld.st.examples[code])
	}
	for i, e := range ld.st.unretried {
		if i == 10 {
			t.Errorf("... and %d more", len(ld.st.unretried)-10)
			break
		}
		t.Errorf("a client saw an error it may not retry: %s", e)
	}
	ld.st.mu.Unlock()

	// Nothing acknowledged was lost.
	var lost []string
	if err := waitPoll(time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		lost, err = ld.l.lost(ctx, ns)
		return err == nil, nil
	}); err != nil {
		t.Fatalf("listing the JobSets: %v", err)
	}
	for _, x := range lost {
		t.Errorf("acknowledged write lost: %s", x)
	}

	// The controller's informers resumed: every JobSet has its Jobs.
	checkInvariants(t, ns, invariants.Expectation{Running: true}, 3*time.Minute)

	// The watch, and each replica's watch cache, caught up with etcd.
	w.checkCaughtUp(t, ld, etcd, ns)
	for _, name := range apiservers {
		checkWatchCache(t, name, ns, etcd)
	}
	t.Logf("checked %d JobSet names against the acknowledged writes", len(ld.l.recs))
}

// clientMayRetry: a retryable error, or any 5xx (etcd's "request timed
// out" without quorum is a 500, as for built-in resources).
func clientMayRetry(err error) bool { return retryable(err) || serverError(err) }

// createRetrying creates a JobSet, retrying errors a client may retry (an
// ambiguous create that did happen then reports AlreadyExists).
func createRetrying(t *testing.T, js *v1alpha2.JobSet) {
	t.Helper()
	if err := createRetryingErr(js, 3*time.Minute); err != nil {
		t.Fatalf("creating %s: %v", js.Name, err)
	}
}

func createRetryingErr(js *v1alpha2.JobSet, timeout time.Duration) error {
	var last error
	err := waitPoll(timeout, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, etcdWriteTimeout)
		defer cancel()
		_, err := cl.JobSets.JobsetV1alpha2().JobSets(js.Namespace).Create(ctx, js, metav1.CreateOptions{})
		switch {
		case err == nil, apierrors.IsAlreadyExists(err):
			return true, nil
		case clientMayRetry(err):
			last = err
			return false, nil
		}
		return false, err
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (last error: %v)", err, last)
	}
	return err
}

// etcdLoad writes JobSets from etcdWorkers clients at etcdRate writes per
// second: each creates a suspended JobSet, patches its label twice and
// deletes every other one.
type etcdLoad struct {
	ns      string
	l       *ledger
	st      *stats
	notSent atomic.Int64

	mu      sync.Mutex
	acks    []ack           // acknowledged creates and patches
	deleted map[string]bool // acknowledged deletes
}

type ack struct {
	name string
	rv   string
	at   time.Time
}

func (ld *etcdLoad) start(ctx context.Context, wg *sync.WaitGroup) {
	tokens := make(chan struct{}, etcdRate)
	for w := 0; w < etcdWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ld.worker(ctx, w, tokens)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / etcdRate)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				select {
				case tokens <- struct{}{}:
				default:
					ld.notSent.Add(1)
				}
			}
		}
	}()
}

func (ld *etcdLoad) worker(ctx context.Context, w int, tokens <-chan struct{}) {
	take := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-tokens:
			return true
		}
	}
	for i := 0; take(); i++ {
		name := fmt.Sprintf("e%d-%04d", w, i)
		js := jobSet(ld.ns, name, 1, 1)
		js.Spec.Suspend = ptr.To(true) // the writes are the subject, not the Jobs
		if ld.create(ctx, js) != nil {
			continue // unknown outcome or refused: leave the name alone
		}
		for seq := 1; seq <= 2 && take(); seq++ {
			ld.patch(ctx, name, seq)
		}
		if i%2 == 0 && take() {
			ld.delete(ctx, name)
		}
	}
}

func (ld *etcdLoad) create(ctx context.Context, js *v1alpha2.JobSet) error {
	ctx, cancel := context.WithTimeout(ctx, etcdWriteTimeout)
	defer cancel()
	start := time.Now()
	got, err := cl.JobSets.JobsetV1alpha2().JobSets(ld.ns).Create(ctx, js, metav1.CreateOptions{})
	ld.st.record("create "+js.Name, time.Since(start), err)
	ld.l.created(js, got, err)
	if err == nil {
		ld.acked(js.Name, got.ResourceVersion)
	}
	return err
}

func (ld *etcdLoad) patch(ctx context.Context, name string, seq int) {
	ctx, cancel := context.WithTimeout(ctx, etcdWriteTimeout)
	defer cancel()
	start := time.Now()
	got, err := cl.JobSets.JobsetV1alpha2().JobSets(ld.ns).Patch(ctx, name, types.MergePatchType, labelPatch(seq), metav1.PatchOptions{})
	ld.st.record("merge patch "+name, time.Since(start), err)
	ld.l.wrote(name, func(r *record) *invariants.Field { return &r.label }, strconv.Itoa(seq), err)
	if err == nil {
		ld.acked(name, got.ResourceVersion)
	}
}

func (ld *etcdLoad) delete(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(ctx, etcdWriteTimeout)
	defer cancel()
	if deleteJobSet(ctx, ld.l, ld.st, ld.ns, name) == nil {
		ld.mu.Lock()
		ld.deleted[name] = true
		ld.mu.Unlock()
	}
}

func (ld *etcdLoad) acked(name, rv string) {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	ld.acks = append(ld.acks, ack{name: name, rv: rv, at: time.Now()})
}

// firstAckAfter returns the time and resourceVersion of the first create
// or patch acknowledged after t.
func (ld *etcdLoad) firstAckAfter(t time.Time) (time.Time, string) {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	for _, a := range ld.acks {
		if a.at.After(t) {
			return a.at, a.rv
		}
	}
	return time.Time{}, ""
}

// errorSnapshot copies the error counts.
func (s *stats) errorSnapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.errors {
		out[k] = v
	}
	return out
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// diff returns the counts of b grown in a.
func diff(a, b map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range a {
		if d := v - b[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// jobSetWatch records every event of a watch of a namespace's JobSets
// through kube-apiserver, resumed from the last resourceVersion it saw
// whenever the connection ends, as a client would.
type jobSetWatch struct {
	mu     sync.Mutex
	events []seenEvent
	rvs    map[string]time.Time // resourceVersion -> when delivered
	ended  error                // why the watch gave up, if it did
	// lastErr is the last error opening the watch (the RetryWatcher tries
	// again after each, even after 410 Gone).
	lastErr error
	opens   int
	cancel  context.CancelFunc
	done    chan struct{}
}

type seenEvent struct {
	typ  watch.EventType
	name string
	rv   string
}

func watchJobSets(t *testing.T, ns string) *jobSetWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &jobSetWatch{rvs: map[string]time.Time{}, cancel: cancel, done: make(chan struct{})}
	list, err := cl.JobSets.JobsetV1alpha2().JobSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing the JobSets of %s: %v", ns, err)
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			wi, err := cl.JobSets.JobsetV1alpha2().JobSets(ns).Watch(ctx, o)
			w.mu.Lock()
			defer w.mu.Unlock()
			w.opens++
			if err != nil {
				w.lastErr = fmt.Errorf("from resourceVersion %s: %w", o.ResourceVersion, err)
			}
			return wi, err
		},
	})
	if err != nil {
		t.Fatalf("watching the JobSets of %s: %v", ns, err)
	}
	go func() {
		defer close(w.done)
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				w.add(ev)
			}
		}
	}()
	t.Cleanup(func() {
		w.cancel()
		<-w.done
	})
	return w
}

func (w *jobSetWatch) add(ev watch.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted:
		js, ok := ev.Object.(*v1alpha2.JobSet)
		if !ok {
			return
		}
		w.events = append(w.events, seenEvent{typ: ev.Type, name: js.Name, rv: js.ResourceVersion})
		if _, ok := w.rvs[js.ResourceVersion]; !ok {
			w.rvs[js.ResourceVersion] = time.Now()
		}
	case watch.Error:
		// The RetryWatcher gives up only on errors it cannot resume from
		// (410 Gone: the resourceVersion left the watch cache).
		if w.ended == nil {
			w.ended = apierrors.FromObject(ev.Object)
		}
	}
}

func (w *jobSetWatch) seenAt(rv string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.rvs[rv]
	return at, ok
}

// checkCaughtUp waits until the watch's view of the namespace equals what
// etcd stores, then checks that it delivered every acknowledged create,
// patch and delete, in resourceVersion order.
func (w *jobSetWatch) checkCaughtUp(t *testing.T, ld *etcdLoad, etcd *etcdCluster, ns string) {
	t.Helper()
	view := func() (map[string]string, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.ended != nil {
			return nil, fmt.Errorf("the watch through kube-apiserver could not resume: %w", w.ended)
		}
		out := map[string]string{}
		for _, e := range w.events {
			if e.typ == watch.Deleted {
				delete(out, e.name)
			} else {
				out[e.name] = e.rv
			}
		}
		return out, nil
	}
	var got, stored map[string]string
	var viewErr error
	err := waitPoll(time.Minute, func(ctx context.Context) (bool, error) {
		got, viewErr = view()
		if viewErr != nil {
			return false, viewErr
		}
		var err error
		if stored, err = etcd.jobSets(ctx, ns); err != nil {
			return false, nil
		}
		return equalMaps(got, stored), nil
	})
	if err != nil {
		if viewErr != nil {
			t.Errorf("%v", viewErr)
			return
		}
		w.mu.Lock()
		lastErr := w.lastErr
		w.mu.Unlock()
		t.Errorf("the watch through kube-apiserver did not catch up with etcd within a minute (last error opening it: %v): %s", lastErr, mapDiff(got, stored))
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	deletes := map[string]bool{}
	prev := int64(0)
	for _, e := range w.events {
		rv, err := strconv.ParseInt(e.rv, 10, 64)
		if err != nil || rv <= prev {
			t.Errorf("watch event %s %s at resourceVersion %q after %d: out of order", e.typ, e.name, e.rv, prev)
		}
		prev = rv
		if e.typ == watch.Deleted {
			deletes[e.name] = true
		}
	}
	ld.mu.Lock()
	defer ld.mu.Unlock()
	missed := 0
	for _, a := range ld.acks {
		if _, ok := w.rvs[a.rv]; !ok {
			missed++
			if missed <= 10 {
				t.Errorf("the watch never delivered the acknowledged write of %s at resourceVersion %s", a.name, a.rv)
			}
		}
	}
	for name := range ld.deleted {
		if !deletes[name] {
			missed++
			if missed <= 10 {
				t.Errorf("the watch never delivered the acknowledged delete of %s", name)
			}
		}
	}
	if missed > 10 {
		t.Errorf("... %d acknowledged writes missed in all", missed)
	}
	t.Logf("the watch delivered %d events, covering %d acknowledged creates and patches and %d deletes; it was opened %d times", len(w.events), len(ld.acks), len(ld.deleted), w.opens)
}

// checkWatchCache waits until the JobSets a replica lists from its watch
// cache (resourceVersion 0) are those etcd stores, with the same
// resourceVersions.
func checkWatchCache(t *testing.T, replica, ns string, etcd *etcdCluster) {
	t.Helper()
	c, err := clientset.NewForConfig(replicaConfig(replica))
	if err != nil {
		t.Fatal(err)
	}
	var got, stored map[string]string
	var listErr error
	start := time.Now()
	err = waitPoll(time.Minute, func(ctx context.Context) (bool, error) {
		list, err := c.JobsetV1alpha2().JobSets(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if listErr = err; err != nil {
			return false, nil
		}
		if stored, listErr = etcd.jobSets(ctx, ns); listErr != nil {
			return false, nil
		}
		got = map[string]string{}
		for _, js := range list.Items {
			got[js.Name] = js.ResourceVersion
		}
		return equalMaps(got, stored), nil
	})
	if err != nil {
		t.Errorf("%s's watch cache did not equal etcd within a minute (last list error %v): %s", replica, listErr, mapDiff(got, stored))
		return
	}
	t.Logf("%s's watch cache equals etcd (%d JobSets; %.1fs after the check began)", replica, len(stored), time.Since(start).Seconds())
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// mapDiff describes how got differs from want, in at most ten entries.
func mapDiff(got, want map[string]string) string {
	var out []string
	for _, k := range sortedKeys(want) {
		if g, ok := got[k]; !ok {
			out = append(out, fmt.Sprintf("%s (resourceVersion %s) missing", k, want[k]))
		} else if g != want[k] {
			out = append(out, fmt.Sprintf("%s at resourceVersion %s, etcd has %s", k, g, want[k]))
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("%s (resourceVersion %s) is not in etcd", k, got[k]))
		}
	}
	if len(out) > 10 {
		out = append(out[:10], fmt.Sprintf("... and %d more", len(out)-10))
	}
	return strings.Join(out, "; ")
}

// etcdCluster is a three-member etcd cluster on loopback, run by the test
// as components of the faults cluster (pid files, logs/<member>.log), on
// ports +20 to +25 of the suite's port base, with data under
// <cluster dir>/data/etcd-cluster.
type etcdCluster struct {
	members []*etcdMember
	client  *clientv3.Client
}

type etcdMember struct {
	name string
	url  string // client URL
	proc *localcluster.Process
}

func startEtcdCluster(t *testing.T) *etcdCluster {
	t.Helper()
	bin := filepath.Join(cl.Root, "_output", "bin", "etcd")
	pki := filepath.Join(cl.LocalDir, "pki")
	dir := filepath.Join(cl.LocalDir, "data", "etcd-cluster")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	base := portBase(t)
	e := &etcdCluster{}
	var peers, urls []string
	for i := 0; i < 3; i++ {
		m := &etcdMember{name: fmt.Sprintf("etcd-member-%d", i), url: fmt.Sprintf("https://127.0.0.1:%d", base+20+2*i)}
		e.members = append(e.members, m)
		urls = append(urls, m.url)
		peers = append(peers, fmt.Sprintf("%s=http://127.0.0.1:%d", m.name, base+21+2*i))
	}
	// Stopped after the API servers went back (cleanups run last first).
	t.Cleanup(func() {
		if e.client != nil {
			_ = e.client.Close()
		}
		for _, m := range e.members {
			if p, err := cl.Process(m.name); err == nil {
				if err := p.Stop(20 * time.Second); err != nil {
					t.Errorf("stopping %s: %v", m.name, err)
				}
			}
		}
		_ = os.RemoveAll(dir)
	})
	for i, m := range e.members {
		peer := strings.SplitN(peers[i], "=", 2)[1]
		args := []string{bin,
			"--name", m.name,
			"--data-dir", filepath.Join(dir, m.name),
			"--listen-client-urls", m.url, "--advertise-client-urls", m.url,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(peers, ","),
			"--initial-cluster-token", "faults-etcd-cluster", "--initial-cluster-state", "new",
			"--cert-file", filepath.Join(pki, "etcd-server.crt"), "--key-file", filepath.Join(pki, "etcd-server.key"),
			"--client-cert-auth", "--trusted-ca-file", filepath.Join(pki, "ca.crt"),
			// As the cluster's etcd: the kills are of processes, whose
			// writes the kernel keeps, not of the machine.
			"--unsafe-no-fsync",
			"--log-level", "warn",
		}
		p, err := cl.StartProcess(m.name, args, "started by "+t.Name())
		if err != nil {
			t.Fatalf("starting %s: %v", m.name, err)
		}
		m.proc = p
	}
	tlsConfig, err := cl.EtcdClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	e.client, err = clientv3.New(clientv3.Config{Endpoints: urls, TLS: tlsConfig, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the three etcd members to answer and elect a leader (logs in "+filepath.Join(cl.LocalDir, "logs")+")",
		func(ctx context.Context) (bool, error) {
			for _, m := range e.members {
				if _, err := e.status(ctx, m); err != nil {
					return false, nil
				}
			}
			_, err := e.leader(ctx)
			return err == nil, nil
		})
	return e
}

// portBase is the suite's port base (FAULTS_PORT_BASE, as for the cluster).
func portBase(t *testing.T) int {
	t.Helper()
	v := os.Getenv("FAULTS_PORT_BASE")
	if v == "" {
		return defaultPortBase
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("FAULTS_PORT_BASE=%q: %v", v, err)
	}
	return n
}

func (e *etcdCluster) endpoints() string {
	var urls []string
	for _, m := range e.members {
		urls = append(urls, m.url)
	}
	return strings.Join(urls, ",")
}

func (e *etcdCluster) status(ctx context.Context, m *etcdMember) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return e.client.Status(ctx, m.url)
}

// leader returns the member that says it leads.
func (e *etcdCluster) leader(ctx context.Context) (*etcdMember, error) {
	for _, m := range e.members {
		if !m.proc.Alive() {
			continue
		}
		st, err := e.status(ctx, m)
		if err == nil && st.Leader != 0 && st.Header.MemberId == st.Leader {
			return m, nil
		}
	}
	return nil, errors.New("no member leads")
}

func (e *etcdCluster) waitLeader(t *testing.T) *etcdMember {
	t.Helper()
	var l *etcdMember
	eventually(t, 2*time.Minute, "an etcd leader", func(ctx context.Context) (bool, error) {
		var err error
		l, err = e.leader(ctx)
		return err == nil, nil
	})
	return l
}

// other returns a running member other than m.
func (e *etcdCluster) other(m *etcdMember) *etcdMember {
	for _, o := range e.members {
		if o != m && o.proc.Alive() {
			return o
		}
	}
	return nil
}

func (e *etcdCluster) kill(t *testing.T, m *etcdMember) {
	t.Helper()
	if m == nil {
		t.Fatal("no etcd member to kill")
	}
	if err := m.proc.Kill(); err != nil {
		t.Fatal(err)
	}
}

func (e *etcdCluster) restart(t *testing.T, m *etcdMember) {
	t.Helper()
	p, err := cl.Restart(m.proc, "killed by "+t.Name())
	if err != nil {
		t.Fatalf("restarting %s: %v", m.name, err)
	}
	m.proc = p
}

// jobSets reads the JobSets of a namespace from etcd with a quorum read:
// name -> resourceVersion (the key's last modification).
func (e *etcdCluster) jobSets(ctx context.Context, ns string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := e.client.Get(ctx, "/registry/jobset.x-k8s.io/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("reading the JobSets from etcd: %w", err)
	}
	out := map[string]string{}
	marker := "/jobsets/" + ns + "/"
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		if i := strings.Index(k, marker); i >= 0 {
			out[k[i+len(marker):]] = strconv.FormatInt(kv.ModRevision, 10)
		}
	}
	return out, nil
}

// moveAPIServersTo restarts the jobset-apiserver replicas on the etcd
// cluster, and back on the cluster's etcd when the test ends. Nothing is
// copied over: the JobSets written meanwhile stay in the test's etcd. The
// controllers are stopped meanwhile, so that their informers start afresh
// on what the replicas serve, and the test waits first until no JobSet is
// left in a namespace being deleted, which the move would orphan.
func moveAPIServersTo(t *testing.T, e *etcdCluster) {
	t.Helper()
	eventually(t, 3*time.Minute, "the JobSets of deleted namespaces to be gone", func(ctx context.Context) (bool, error) {
		list, err := cl.JobSets.JobsetV1alpha2().JobSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, js := range list.Items {
			n, err := cl.Kube.CoreV1().Namespaces().Get(ctx, js.Namespace, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && n.DeletionTimestamp != nil) {
				return false, nil
			}
		}
		return true, nil
	})
	original := map[string]*localcluster.Process{}
	moved := map[string]*localcluster.Process{}
	for _, name := range apiservers {
		p := templates[name]
		original[name] = p
		np := *p
		np.Args = nil
		for _, a := range p.Args {
			if strings.HasPrefix(a, "--etcd-servers=") {
				a = "--etcd-servers=" + e.endpoints()
			}
			np.Args = append(np.Args, a)
		}
		moved[name] = &np
	}
	t.Cleanup(func() { restartAPIServers(t, original, "back on the cluster's etcd after "+t.Name()) })
	restartAPIServers(t, moved, "on a three-member etcd cluster for "+t.Name())
}

// restartAPIServers stops the controllers, restarts every API server
// replica with the given command line, waits until each is ready and the
// JobSet API answers through kube-apiserver, and starts the controllers.
func restartAPIServers(t *testing.T, with map[string]*localcluster.Process, why string) {
	t.Helper()
	for _, name := range controllers {
		if p, err := cl.Process(name); err == nil {
			if err := p.Stop(30 * time.Second); err != nil {
				t.Fatalf("stopping %s: %v", name, err)
			}
		}
	}
	for _, name := range apiservers {
		if p, err := cl.Process(name); err == nil {
			if err := p.Kill(); err != nil {
				t.Fatal(err)
			}
		}
		templates[name] = with[name]
		if _, err := cl.Restart(with[name], why); err != nil {
			t.Fatalf("starting %s: %v", name, err)
		}
	}
	for _, name := range apiservers {
		c, err := kubernetes.NewForConfig(replicaConfig(name))
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Minute, name+" /readyz", func(ctx context.Context) (bool, error) {
			_, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			return err == nil, nil
		})
	}
	eventually(t, 2*time.Minute, "the JobSet API through kube-apiserver", func(ctx context.Context) (bool, error) {
		_, err := cl.JobSets.JobsetV1alpha2().JobSets(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	for _, name := range controllers {
		if _, err := cl.Restart(templates[name], why); err != nil {
			t.Fatalf("starting %s: %v", name, err)
		}
	}
	liveLeader(t, "", takeoverWait)
}

// replicaConfig is the admin's client configuration, talking to one API
// server replica directly rather than through kube-apiserver.
func replicaConfig(replica string) *rest.Config {
	cfg := rest.CopyConfig(cl.Config)
	cfg.Host = fmt.Sprintf("https://127.0.0.1:%d", replicaPort(replica))
	return cfg
}

// replicaPort is the port a replica serves on (its --secure-port).
func replicaPort(replica string) int {
	for _, a := range templates[replica].Args {
		if v, ok := strings.CutPrefix(a, "--secure-port="); ok {
			port, _ := strconv.Atoi(v)
			return port
		}
	}
	return 0
}
