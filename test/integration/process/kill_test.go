package process

import (
	"context"
	"fmt"
	"sync"
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

// acked records the writes the server acknowledged, and the deletes sent,
// acknowledged or not: a delete in flight at the kill may have been applied.
type acked struct {
	mu       sync.Mutex
	created  map[string]types.UID
	patched  map[string]bool
	deleting map[string]bool
	deleted  map[string]bool
}

func (a *acked) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.created) + len(a.patched) + len(a.deleted)
}

// kill -9 of jobset-apiserver, and with it the embedded etcd, while four
// clients write: after a restart on the same directory every acknowledged
// create, patch and delete is there, and a watch resumed from the last
// resourceVersion it saw delivers every create it had not seen, in order,
// with no gap.
func TestKill9DuringWritesLosesNoAcknowledgedWrite(t *testing.T) {
	dir := t.TempDir()
	p := framework.StartProcess(t, dir)
	ctx := context.Background()
	ns := "default"

	list, err := p.Client.JobsetV1alpha2().JobSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	lastRV := list.ResourceVersion
	w, err := p.Client.JobsetV1alpha2().JobSets(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: lastRV})
	if err != nil {
		t.Fatal(err)
	}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		lastRV = drain(w, seen, lastRV, "")
	}()

	a := &acked{created: map[string]types.UID{}, patched: map[string]bool{}, deleting: map[string]bool{}, deleted: map[string]bool{}}
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for wr := 0; wr < 4; wr++ {
		writers.Add(1)
		go func(wr int) {
			defer writers.Done()
			jobsets := p.Client.JobsetV1alpha2().JobSets(ns)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%d", wr, i)
				js, err := jobsets.Create(ctx, newJobSet(ns, name), metav1.CreateOptions{})
				if err != nil {
					return // the server is gone
				}
				a.mu.Lock()
				a.created[name] = js.UID
				a.mu.Unlock()
				switch i % 3 {
				case 1:
					if _, err := jobsets.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"patched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
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
						return
					}
					a.mu.Lock()
					a.deleted[name] = true
					a.mu.Unlock()
				}
			}
		}(wr)
	}

	// Kill once a good number of writes were acknowledged, writers still going.
	deadline := time.Now().Add(2 * time.Minute)
	for a.count() < 150 && time.Now().Before(deadline) {
		select {
		case <-p.Exited():
			t.Fatal("the server exited by itself")
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.Signal(t, syscall.SIGKILL)
	<-p.Exited()
	close(stop)
	writers.Wait()
	<-watched
	t.Logf("acknowledged before the kill: %d creates, %d patches, %d deletes; watch saw %d creates",
		len(a.created), len(a.patched), len(a.deleted), len(seen))

	p = framework.StartProcess(t, dir)
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
	w, err = jobsets.Watch(ctx, metav1.ListOptions{ResourceVersion: lastRV})
	if err != nil {
		t.Fatalf("resuming the watch at %s: %v", lastRV, err)
	}
	if _, err := jobsets.Create(ctx, newJobSet(ns, "sentinel"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); drain(w, seen, lastRV, "sentinel") }()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		w.Stop()
		<-done
		t.Fatal("the resumed watch did not deliver the sentinel")
	}
	for name := range a.created {
		if !seen[name] {
			t.Errorf("%s: acknowledged create never delivered by the watch (resumed at %s)", name, lastRV)
		}
	}
}

// drain records ADDED names until the watch ends or until (when given)
// the named object is added, and returns the last resourceVersion seen.
func drain(w watch.Interface, seen map[string]bool, rv, until string) string {
	defer w.Stop()
	for ev := range w.ResultChan() {
		js, ok := ev.Object.(*v1alpha2.JobSet)
		if !ok {
			continue
		}
		rv = js.ResourceVersion
		if ev.Type == watch.Added {
			seen[js.Name] = true
			if js.Name == until {
				return rv
			}
		}
	}
	return rv
}
