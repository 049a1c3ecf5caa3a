package controller

import (
	"k8s.io/utils/ptr"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller/expectations"
)

// expectationsTimeout bounds how long a JobSet waits for the cache to show
// its own writes before the controller stops trusting the expectations.
const expectationsTimeout = 5 * time.Minute

// availabilityFloorTimeout bounds how long a sync waits for the cache to
// show the availability annotations this controller wrote. It is short:
// someone else editing them meanwhile must not stall the JobSet.
const availabilityFloorTimeout = 10 * time.Second

// writeExpectations are this controller's writes its caches do not show
// yet (package expectations), so that a lagging cache never leads to a Job
// being created twice, an attempt being counted from stale data or a
// Service or revision being created again. Job, status and availability
// expectations are kept by JobSet key and checked at the start of each
// sync, which the work queue serialises per key; Services and revisions
// by namespace and name.
type writeExpectations struct {
	// jobCreates and jobDeletes: JobSet key → Job name → UID ("" when the
	// API did not return one).
	jobCreates, jobDeletes *expectations.Store[types.UID]
	// status: JobSet key → the attempt counters of the last status
	// written; a cached JobSet below them is stale.
	status *expectations.Store[statusFloor]
	// availability: JobSet key → the availability annotations last
	// written (availability.go).
	availability *expectations.Store[annotationFloor]
	// services and revisions: namespace → name of objects created.
	services, revisions *expectations.Store[struct{}]

	// jobCreations holds the JobSets whose Job creation latency this
	// process observed (jobcreation.go); not an expectation, but kept and
	// forgotten with them.
	mu           sync.Mutex
	jobCreations map[string]types.UID
}

func newExpectations(c clock.PassiveClock) *writeExpectations {
	return &writeExpectations{
		jobCreates:   expectations.New[types.UID](c, expectationsTimeout),
		jobDeletes:   expectations.New[types.UID](c, expectationsTimeout),
		status:       expectations.New[statusFloor](c, expectationsTimeout),
		availability: expectations.New[annotationFloor](c, availabilityFloorTimeout),
		services:     expectations.New[struct{}](c, expectationsTimeout),
		revisions:    expectations.New[struct{}](c, expectationsTimeout),
		jobCreations: map[string]types.UID{},
	}
}

// expectCreate records that a Job with this name (and UID, when the API
// returned one) was created.
func (e *writeExpectations) expectCreate(key, name string, uid types.UID) {
	e.jobCreates.Expect(key, name, uid)
}

// expectDelete records that the Job with this name and UID was deleted.
func (e *writeExpectations) expectDelete(key, name string, uid types.UID) {
	e.jobDeletes.Expect(key, name, uid)
}

// sameJob tells whether an expectation of uid is met by a Job of that uid.
func sameJob(job *batchv1.Job) func(uid types.UID) bool {
	return func(uid types.UID) bool { return uid == "" || uid == job.UID }
}

// observe is called by the Job event handlers: an added Job satisfies a
// pending create of its name, a deleted (or terminating) one a pending
// delete. Objects that come and go between two syncs are thus still seen.
func (e *writeExpectations) observe(key string, job *batchv1.Job, gone bool) {
	e.jobCreates.Check(key, job.Name, sameJob(job))
	if gone {
		e.jobDeletes.Check(key, job.Name, sameJob(job))
	}
}

// deletePending reports whether a delete of this Job was issued and not
// yet observed.
func (e *writeExpectations) deletePending(key, name string, uid types.UID) bool {
	got, ok := e.jobDeletes.Pending(key, name)
	return ok && got == uid
}

// satisfied drops the Job expectations the cache now reflects and reports
// whether none remain. lookup returns the cached Job of that name or nil.
func (e *writeExpectations) satisfied(key string, lookup func(name string) *batchv1.Job) bool {
	created := e.jobCreates.Settle(key, func(name string, uid types.UID) bool {
		j := lookup(name)
		return j != nil && sameJob(j)(uid)
	})
	deleted := e.jobDeletes.Settle(key, func(name string, uid types.UID) bool {
		j := lookup(name)
		return j == nil || j.DeletionTimestamp != nil || (uid != "" && j.UID != uid)
	})
	return created && deleted
}

// statusFloor are counters that only grow.
type statusFloor struct {
	uid                                      types.UID
	restarts, executionAttempts, jobRestarts int64
}

func floorOf(st *jobset.JobSetStatus) statusFloor {
	f := statusFloor{restarts: int64(st.Restarts), executionAttempts: int64(ptr.Deref(st.ExecutionAttempts, 0))}
	for _, r := range st.ReplicatedJobsStatus {
		for _, n := range r.JobRestarts {
			f.jobRestarts += int64(n)
		}
	}
	return f
}

// wroteStatus remembers the counters of a status just written.
func (e *writeExpectations) wroteStatus(key string, uid types.UID, st *jobset.JobSetStatus) {
	f := floorOf(st)
	f.uid = uid
	e.status.Expect(key, "", f)
}

// statusCurrent reports whether a cached status has caught up with the
// last status written for the key.
func (e *writeExpectations) statusCurrent(key string, uid types.UID, st *jobset.JobSetStatus) bool {
	got := floorOf(st)
	_, pending := e.status.Check(key, "", func(want statusFloor) bool {
		return want.uid != uid ||
			got.restarts >= want.restarts && got.executionAttempts >= want.executionAttempts && got.jobRestarts >= want.jobRestarts
	})
	return !pending
}

// annotationFloor is an availability annotation write the JobSet cache
// has not shown yet.
type annotationFloor struct {
	uid    types.UID
	values map[string]string
}

// wroteAvailability remembers the availability annotations just written.
// Until the cache shows them, a sync would work from a copy older than the
// write and its own writes would conflict.
func (e *writeExpectations) wroteAvailability(key string, uid types.UID, values map[string]string) {
	e.availability.Expect(key, "", annotationFloor{uid: uid, values: values})
}

// availabilityCurrent reports whether cached annotations reflect the last
// availability write for the key.
func (e *writeExpectations) availabilityCurrent(key string, uid types.UID, annotations map[string]string) bool {
	_, pending := e.availability.Check(key, "", func(want annotationFloor) bool {
		return want.uid != uid || len(availabilityPatch(annotations, want.values)) == 0
	})
	return !pending
}

// observeCreated forgets a created Service or revision once its informer
// added or deleted it.
func observeCreated(s *expectations.Store[struct{}], obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if m, err := meta.Accessor(obj); err == nil {
		s.Drop(m.GetNamespace(), m.GetName())
	}
}

// firstJobCreation reports whether the Job creation latency of this JobSet
// was not observed yet in this process, and marks it observed.
func (e *writeExpectations) firstJobCreation(key string, uid types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.jobCreations[key] == uid {
		return false
	}
	e.jobCreations[key] = uid
	return true
}

// forget drops every expectation of a JobSet.
func (e *writeExpectations) forget(key string) {
	e.jobCreates.Forget(key)
	e.jobDeletes.Forget(key)
	e.status.Forget(key)
	e.availability.Forget(key)
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.jobCreations, key)
}
