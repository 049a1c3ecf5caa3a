package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A restart's wait for old pods (runningPredecessors) lists the pods of
// the Jobs it still has to create. Syncs of a waiting JobSet come often:
// every old pod that fails wakes one, and a list on each of them mostly
// repeated the last answer (at 250 Jobs × 32 pods on 50 nodes, 77 lists
// and 32 MB from kube-apiserver in one wait; 19 and 13 MB with this,
// test/bench/README.md). The last list's running pods are therefore
// remembered, and the failed-pod events strike them off: a sync lists
// again only once some name has no running pod left by those events (the
// list then confirms it and finds any pod created since), when asked for
// a name the list did not cover, or after predecessorRelist (a pod that
// ended Succeeded or went away unseen). A Job is still created only after
// a list that shows its name clear.

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

// blocked tells whether the last list's answer still holds every name
// back: the same attempt, within predecessorRelist, every name covered and
// each still with a running pod. When it does not, a list is due.
func (w *predecessorWaits) blocked(key string, attempt statusFloor, now time.Time, names map[string]bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	wait := w.byKey[key]
	if wait == nil || wait.attempt != attempt || !now.Before(wait.listed.Add(predecessorRelist)) {
		return false
	}
	held := make(map[string]bool, len(names))
	for _, name := range wait.running {
		held[name] = true
	}
	for n := range names {
		if !wait.names[n] || !held[n] {
			return false
		}
	}
	return true
}

// forget drops a JobSet's wait.
func (w *predecessorWaits) forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.byKey, key)
}
