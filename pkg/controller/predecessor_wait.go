package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A restart's wait for old pods (runningPredecessors) lists the pods of
// the Jobs it still has to create. Syncs of a waiting JobSet come often:
// every old pod that fails wakes one. Listing on each of them cost, at 250
// Jobs × 32 pods on 5,000 nodes, more CPU in jobset-controller and
// kube-apiserver than anything else it did (test/bench/README.md). The last
// list's running pods are therefore remembered, and the failed-pod events
// strike them off: a sync lists again only once some name has no running
// pod left by those events (the list then confirms it and finds any pod
// created since), when asked for a name the list did not cover, or after
// predecessorRelist (a pod that ended Succeeded or went away unseen).
// A Job is still created only after a list that shows its name clear.

// predecessorRelist bounds how long a wait trusts its last list.
const predecessorRelist = 10 * time.Second

// predecessorWaits holds the waits of JobSets by key.
type predecessorWaits struct {
	mu    sync.Mutex
	byKey map[string]*predecessorWait
}

type predecessorWait struct {
	attempt statusFloor
	listed  time.Time
	// names the list covered; running: each running pod it found, by UID,
	// with its Job name, until its failure is seen.
	names   map[string]bool
	running map[types.UID]string
}

func newPredecessorWaits() *predecessorWaits {
	return &predecessorWaits{byKey: map[string]*predecessorWait{}}
}

// record remembers a list made for attempt at the given time.
func (w *predecessorWaits) record(key string, attempt statusFloor, at time.Time, names map[string]bool, running map[types.UID]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.byKey[key] = &predecessorWait{attempt: attempt, listed: at, names: names, running: running}
}

// podFailed strikes a pod off its JobSet's wait.
func (w *predecessorWaits) podFailed(key string, uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wait := w.byKey[key]; wait != nil {
		delete(wait.running, uid)
	}
}

// blocked answers for the names from the last list when that can stand:
// the same attempt, within predecessorRelist, every name covered and each
// still with a running pod. ok is false when a list is due; otherwise
// every name is blocked and next is when the list will be due.
func (w *predecessorWaits) blocked(key string, attempt statusFloor, now time.Time, names map[string]bool) (next time.Duration, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wait := w.byKey[key]
	if wait == nil || wait.attempt != attempt {
		return 0, false
	}
	next = wait.listed.Add(predecessorRelist).Sub(now)
	if next <= 0 {
		return 0, false
	}
	held := make(map[string]bool, len(names))
	for _, name := range wait.running {
		held[name] = true
	}
	for n := range names {
		if !wait.names[n] || !held[n] {
			return 0, false
		}
	}
	return next, true
}

// forget drops a JobSet's wait.
func (w *predecessorWaits) forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.byKey, key)
}
