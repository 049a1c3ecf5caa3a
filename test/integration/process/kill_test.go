package process

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/integration/framework"
)

// minAcknowledged is how many writes the server must acknowledge before the
// kill: fewer and the test would prove little.
const minAcknowledged = 150

// acked records the writes the server acknowledged, and the deletes sent,
// acknowledged or not: a delete in flight at the kill may have been applied.
type acked struct {
	mu       sync.Mutex
	created  map[string]types.UID
	patched  map[string]bool
	deleting map[string]bool
	deleted  map[string]bool
	// errs are write errors seen before the kill; there must be none.
	errs []error
}

func (a *acked) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.created) + len(a.patched) + len(a.deleted)
}

// kill -9 of jobset-apiserver, and with it the embedded etcd, while four
// clients write: after a restart on the same directory every acknowledged
// create, patch and delete is there, and the store's history survived: a
// watch resumed from the last resourceVersion seen before the kill delivers
// every acknowledged write it had not seen, in resourceVersion order. With
// the watch cache on (the default), that resume is refused with 410 Gone, as
// kube-apiserver does after a restart, so that clients relist.
func TestKill9DuringWritesLosesNoAcknowledgedWrite(t *testing.T) {
	dir := t.TempDir()
	p := framework.StartProcess(t, dir)
	ctx := context.Background()
	ns := "default"

	list, err := p.Client.JobsetV1alpha2().JobSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The first watch stops early, so that the resumed one has many
	// acknowledged writes to deliver from the store's history.
	events := newEventLog(list.ResourceVersion)
	events.stopAfterAdds = minAcknowledged / 4
	w, err := p.Client.JobsetV1alpha2().JobSets(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	watched := make(chan struct{})
	go func() { defer close(watched); events.drain(w, "") }()

	a := &acked{created: map[string]types.UID{}, patched: map[string]bool{}, deleting: map[string]bool{}, deleted: map[string]bool{}}
	var killed atomic.Bool
	failed := func(op, name string, err error) {
		if killed.Load() {
			return // the server is gone
		}
		a.mu.Lock()
		a.errs = append(a.errs, fmt.Errorf("%s %s before the kill: %w", op, name, err))
		a.mu.Unlock()
	}
	var writers sync.WaitGroup
	for wr := 0; wr < 4; wr++ {
		writers.Add(1)
		go func(wr int) {
			defer writers.Done()
			jobsets := p.Client.JobsetV1alpha2().JobSets(ns)
			for i := 0; !killed.Load(); i++ {
				name := fmt.Sprintf("w%d-%d", wr, i)
				js, err := jobsets.Create(ctx, newJobSet(ns, name), metav1.CreateOptions{})
				if err != nil {
					failed("create", name, err)
					return
				}
				a.mu.Lock()
				a.created[name] = js.UID
				a.mu.Unlock()
				switch i % 3 {
				case 1:
					if _, err := jobsets.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"patched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
						failed("patch", name, err)
						return
					}
					a.mu.Lock()
					a.patched[name] = true
					a.mu.Unlock()
				case 2:
					a.mu.Lock()
					a.deleting[name] = true
					a.mu.Unlock()
					if err := jobsets.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
						failed("delete", name, err)
						return
					}
					a.mu.Lock()
					a.deleted[name] = true
					a.mu.Unlock()
				}
			}
		}(wr)
	}

	// Kill once enough writes were acknowledged, writers still going.
	deadline := time.Now().Add(2 * time.Minute)
	for a.count() < minAcknowledged && time.Now().Before(deadline) {
		select {
		case <-p.Exited():
			t.Fatal("the server exited by itself")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if n := a.count(); n < minAcknowledged {
		t.Fatalf("only %d writes acknowledged in 2 minutes, want at least %d before the kill", n, minAcknowledged)
	}
	killed.Store(true)
	p.Signal(t, syscall.SIGKILL)
	<-p.Exited()
	writers.Wait()
	<-watched
	for _, err := range a.errs {
		t.Errorf("writer: %v", err)
	}
	t.Logf("acknowledged before the kill: %d creates, %d patches, %d deletes; the first watch saw %d creates up to resourceVersion %s",
		len(a.created), len(a.patched), len(a.deleted), len(events.added), events.lastRV)
	if len(events.added) >= len(a.created) {
		t.Fatalf("the first watch saw every create; the resumed watch would have nothing to prove")
	}

	// Every acknowledged write is in the store. The watch cache is off here
	// so that the resumed watch below reads etcd's history, not a cache that
	// starts at the restart.
	p = framework.StartProcess(t, dir, "--watch-cache=false")
	jobsets := p.Client.JobsetV1alpha2().JobSets(ns)
	for name, uid := range a.created {
		js, err := jobsets.Get(ctx, name, metav1.GetOptions{})
		switch {
		case a.deleted[name]:
			if !apierrors.IsNotFound(err) {
				t.Errorf("%s: acknowledged delete, but after the restart: %v", name, err)
			}
		case a.deleting[name] && apierrors.IsNotFound(err):
			// Its delete was in flight at the kill and was applied.
		case err != nil:
			t.Errorf("%s: acknowledged create lost: %v", name, err)
		case js.UID != uid:
			t.Errorf("%s: uid %s, acknowledged %s", name, js.UID, uid)
		case a.patched[name] && js.Labels["patched"] != "yes":
			t.Errorf("%s: acknowledged patch lost", name)
		}
	}

	// Resume the watch; a sentinel created now marks the end.
	resumeAt := events.lastRV
	events.stopAfterAdds = 0
	seenBefore := len(events.added)
	w, err = jobsets.Watch(ctx, metav1.ListOptions{ResourceVersion: resumeAt})
	if err != nil {
		t.Fatalf("resuming the watch at %s: %v", resumeAt, err)
	}
	if _, err := jobsets.Create(ctx, newJobSet(ns, "sentinel"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	events.drainWithin(w, "sentinel", waitTimeout)
	if !events.added["sentinel"] {
		t.Fatalf("the watch resumed at %s did not deliver the sentinel; it ended with %v", resumeAt, events.status)
	}
	for _, err := range events.errs {
		t.Error(err)
	}
	t.Logf("the watch resumed at %s delivered %d creates, the sentinel included", resumeAt, len(events.added)-seenBefore)
	for name := range a.created {
		if !events.added[name] {
			t.Errorf("%s: acknowledged create never delivered by the watch (resumed at %s)", name, resumeAt)
		}
		if a.patched[name] && !events.patched[name] {
			t.Errorf("%s: acknowledged patch never delivered by the watch (resumed at %s)", name, resumeAt)
		}
		if a.deleted[name] && !events.deleted[name] {
			t.Errorf("%s: acknowledged delete never delivered by the watch (resumed at %s)", name, resumeAt)
		}
	}

	// With the default watch cache, a watch from before the restart is
	// refused with 410 Gone, not left silently short.
	p.Signal(t, syscall.SIGTERM)
	<-p.Exited()
	p = framework.StartProcess(t, dir)
	w, err = p.Client.JobsetV1alpha2().JobSets(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: resumeAt})
	if err != nil {
		if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Fatalf("watch at %s with the watch cache: %v, want 410 Gone", resumeAt, err)
		}
		return
	}
	cached := newEventLog(resumeAt)
	cached.drainWithin(w, "", waitTimeout)
	if cached.status == nil || cached.status.Code != 410 {
		t.Errorf("watch at %s with the watch cache ended with %v after %d creates, want 410 Gone", resumeAt, cached.status, len(cached.added))
	}
}

// eventLog records what a watch delivered, checking that resourceVersions
// only grow.
type eventLog struct {
	// stopAfterAdds, when not 0, ends the watch after that many ADDED.
	stopAfterAdds int
	lastRV        string
	added         map[string]bool
	patched       map[string]bool
	deleted       map[string]bool
	// status is the error a watch ended with, if any.
	status *metav1.Status
	errs   []error
}

func newEventLog(rv string) *eventLog {
	return &eventLog{lastRV: rv, added: map[string]bool{}, patched: map[string]bool{}, deleted: map[string]bool{}}
}

// drain records events until the watch ends or until (when given) the named
// object is added.
func (l *eventLog) drain(w watch.Interface, until string) {
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			if s, ok := ev.Object.(*metav1.Status); ok {
				l.status = s
			}
			continue
		}
		js, ok := ev.Object.(*v1alpha2.JobSet)
		if !ok {
			l.errs = append(l.errs, fmt.Errorf("%s event with a %T", ev.Type, ev.Object))
			continue
		}
		if before, now := parseRV(l.lastRV), parseRV(js.ResourceVersion); now <= before {
			l.errs = append(l.errs, fmt.Errorf("%s %s at resourceVersion %d after %d: out of order", ev.Type, js.Name, now, before))
		}
		l.lastRV = js.ResourceVersion
		switch ev.Type {
		case watch.Added:
			l.added[js.Name] = true
		case watch.Modified:
			if js.Labels["patched"] == "yes" {
				l.patched[js.Name] = true
			}
		case watch.Deleted:
			l.deleted[js.Name] = true
		}
		if ev.Type == watch.Added && (js.Name == until || len(l.added) == l.stopAfterAdds) {
			return
		}
	}
}

// drainWithin drains as drain does, stopping the watch after timeout.
func (l *eventLog) drainWithin(w watch.Interface, until string, timeout time.Duration) {
	done := make(chan struct{})
	go func() { defer close(done); l.drain(w, until) }()
	select {
	case <-done:
	case <-time.After(timeout):
		w.Stop()
		<-done
	}
}

func parseRV(rv string) uint64 {
	n, _ := strconv.ParseUint(rv, 10, 64)
	return n
}
