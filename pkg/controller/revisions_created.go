package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// createdObjects remembers the objects of one kind (ControllerRevisions,
// Services) this controller created until its informer shows them, so that
// the syncs in between (the new Jobs' events trigger several) do not create
// them again: under load each such attempt is a wasted write.
type createdObjects struct {
	mu    sync.Mutex
	clock clock.PassiveClock
	at    map[string]time.Time // namespace/name → when created
}

func newCreatedObjects(c clock.PassiveClock) *createdObjects {
	return &createdObjects{clock: c, at: map[string]time.Time{}}
}

func (r *createdObjects) add(namespace, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at[namespace+"/"+name] = r.clock.Now()
}

// recent reports whether the object was created lately; after
// expectationsTimeout the cache is no longer trusted to be merely late.
func (r *createdObjects) recent(namespace, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.at[namespace+"/"+name]
	return ok && r.clock.Since(t) < expectationsTimeout
}

// observe forgets an object once the informer added or deleted it.
func (r *createdObjects) observe(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if m, err := meta.Accessor(obj); err == nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.at, m.GetNamespace()+"/"+m.GetName())
	}
}
