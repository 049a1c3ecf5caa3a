package controller

import (
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// createdRevisions remembers the ControllerRevisions this controller created
// until its informer shows them, so that the syncs in between (the new Jobs'
// events trigger several) do not create them again: under load each such
// attempt costs two API round trips (create, then a get after AlreadyExists).
type createdRevisions struct {
	mu    sync.Mutex
	clock clock.PassiveClock
	at    map[string]time.Time // namespace/name → when created
}

func newCreatedRevisions(c clock.PassiveClock) *createdRevisions {
	return &createdRevisions{clock: c, at: map[string]time.Time{}}
}

func (r *createdRevisions) add(namespace, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at[namespace+"/"+name] = r.clock.Now()
}

// recent reports whether the revision was created lately; after
// expectationsTimeout the cache is no longer trusted to be merely late.
func (r *createdRevisions) recent(namespace, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.at[namespace+"/"+name]
	return ok && r.clock.Since(t) < expectationsTimeout
}

// observe forgets a revision once the informer added or deleted it.
func (r *createdRevisions) observe(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if cr, ok := obj.(*appsv1.ControllerRevision); ok {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.at, cr.Namespace+"/"+cr.Name)
	}
}
