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
	// running: each running pod the list found, by UID, with its Job
	// name, until its failure is seen; left: how many of them each name
	// still has.
	running map[types.UID]string
	left    map[string]int
}

func newPredecessorWaits() *predecessorWaits {
	return &predecessorWaits{byKey: map[string]*predecessorWait{}}
}

// record remembers a list made for attempt at the given time and the
// running pods it found.
func (w *predecessorWaits) record(key string, attempt statusFloor, at time.Time, running map[types.UID]string) {
	left := map[string]int{}
	for _, name := range running {
		left[name]++
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.byKey[key] = &predecessorWait{attempt: attempt, listed: at, running: running, left: left}
}

// podFailed strikes a pod off its JobSet's wait.
func (w *predecessorWaits) podFailed(key string, uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wait := w.byKey[key]
	if wait == nil {
		return
	}
	if name, ok := wait.running[uid]; ok {
		delete(wait.running, uid)
		wait.left[name]--
	}
}

// blocked tells whether the last list's answer still holds every Job of
// want back: the same attempt, within predecessorRelist, and each name with
// a running pod the failed-pod events have not struck off (a name the list
// did not cover has none). When it does not, a list is due.
func (w *predecessorWaits) blocked(key string, attempt statusFloor, now time.Time, want map[string]jobAttempt) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	wait := w.byKey[key]
	if wait == nil || wait.attempt != attempt || !now.Before(wait.listed.Add(predecessorRelist)) {
		return false
	}
	for n := range want {
		if wait.left[n] == 0 {
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
