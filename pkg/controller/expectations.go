package controller

import (
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// expectationsTimeout bounds how long a JobSet waits for the cache to show
// its own writes before the controller stops trusting the expectations.
const expectationsTimeout = 5 * time.Minute

// expectations remember the Job creations and deletions a sync issued until
// the Job cache reflects them, so that a lagging cache never leads to a Job
// being created twice or an attempt being counted from stale data. Entries
// are kept per JobSet key and per Job name; they are checked lazily against
// the cache at the start of each sync, which the work queue serialises per
// key.
type expectations struct {
	mu    sync.Mutex
	clock clock.PassiveClock
	byKey map[string]*pending
	// floors holds, per JobSet, the attempt counters of the last status
	// this controller wrote; a cached JobSet below them is stale.
	floors map[string]statusFloor
	// availability holds, per JobSet, the availability annotations this
	// controller last wrote (expectations_availability.go).
	availability map[string]annotationFloor
	// jobCreations holds the JobSets whose Job creation latency this
	// process observed.
	jobCreations map[string]types.UID
}

// statusFloor are counters that only grow.
type statusFloor struct {
	uid                                      types.UID
	at                                       time.Time
	restarts, executionAttempts, jobRestarts int64
}

func floorOf(st *jobset.JobSetStatus) statusFloor {
	f := statusFloor{restarts: int64(st.Restarts), executionAttempts: int64(st.ExecutionAttempts)}
	for _, r := range st.ReplicatedJobsStatus {
		for _, n := range r.JobRestarts {
			f.jobRestarts += int64(n)
		}
	}
	return f
}

// wroteStatus remembers the counters of a status just written.
func (e *expectations) wroteStatus(key string, uid types.UID, st *jobset.JobSetStatus) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f := floorOf(st)
	f.uid, f.at = uid, e.clock.Now()
	e.floors[key] = f
}

// statusCurrent reports whether a cached status has caught up with the
// last status written for the key.
func (e *expectations) statusCurrent(key string, uid types.UID, st *jobset.JobSetStatus) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	want, ok := e.floors[key]
	if !ok {
		return true
	}
	got := floorOf(st)
	if want.uid != uid || e.clock.Since(want.at) > expectationsTimeout ||
		got.restarts >= want.restarts && got.executionAttempts >= want.executionAttempts && got.jobRestarts >= want.jobRestarts {
		delete(e.floors, key)
		return true
	}
	return false
}

type pending struct {
	creates map[string]types.UID
	deletes map[string]types.UID
	since   time.Time
}

func newExpectations(c clock.PassiveClock) *expectations {
	return &expectations{clock: c, byKey: map[string]*pending{}, floors: map[string]statusFloor{},
		availability: map[string]annotationFloor{}, jobCreations: map[string]types.UID{}}
}

func (e *expectations) entry(key string) *pending {
	p := e.byKey[key]
	if p == nil {
		p = &pending{creates: map[string]types.UID{}, deletes: map[string]types.UID{}}
		e.byKey[key] = p
	}
	p.since = e.clock.Now()
	return p
}

// expectCreate records that a Job with this name (and UID, when the API
// returned one) was created.
func (e *expectations) expectCreate(key, name string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entry(key).creates[name] = uid
}

// expectDelete records that the Job with this name and UID was deleted.
func (e *expectations) expectDelete(key, name string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entry(key).deletes[name] = uid
}

// observe is called by the Job event handlers: an added Job satisfies a
// pending create of its name, a deleted (or terminating) one a pending
// delete. Objects that come and go between two syncs are thus still seen.
func (e *expectations) observe(key string, job *batchv1.Job, gone bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.byKey[key]
	if p == nil {
		return
	}
	if uid, ok := p.creates[job.Name]; ok && (uid == "" || uid == job.UID) {
		delete(p.creates, job.Name)
	}
	if gone {
		if uid, ok := p.deletes[job.Name]; ok && (uid == "" || uid == job.UID) {
			delete(p.deletes, job.Name)
		}
	}
}

// deletePending reports whether a delete of this Job was issued and not
// yet observed.
func (e *expectations) deletePending(key, name string, uid types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.byKey[key]
	if p == nil {
		return false
	}
	got, ok := p.deletes[name]
	return ok && got == uid
}

// forget drops every expectation of a JobSet.
func (e *expectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byKey, key)
	delete(e.floors, key)
	delete(e.availability, key)
	delete(e.jobCreations, key)
}

// satisfied drops the expectations the cache now reflects and reports
// whether none remain. lookup returns the cached Job of that name or nil.
func (e *expectations) satisfied(key string, lookup func(name string) *batchv1.Job) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.byKey[key]
	if p == nil {
		return true
	}
	for name, uid := range p.creates {
		if j := lookup(name); j != nil && (uid == "" || j.UID == uid) {
			delete(p.creates, name)
		}
	}
	for name, uid := range p.deletes {
		j := lookup(name)
		if j == nil || j.DeletionTimestamp != nil || (uid != "" && j.UID != uid) {
			delete(p.deletes, name)
		}
	}
	if len(p.creates) == 0 && len(p.deletes) == 0 {
		delete(e.byKey, key)
		return true
	}
	if e.clock.Since(p.since) > expectationsTimeout {
		delete(e.byKey, key)
		return true
	}
	return false
}
