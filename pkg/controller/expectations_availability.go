package controller

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// availabilityFloorTimeout bounds how long a sync waits for the cache to
// show the availability annotations this controller wrote. It is short:
// someone else editing them meanwhile must not stall the JobSet.
const availabilityFloorTimeout = 10 * time.Second

// annotationFloor is an availability annotation write the JobSet cache
// has not shown yet.
type annotationFloor struct {
	uid    types.UID
	at     time.Time
	values map[string]string
}

// wroteAvailability remembers the availability annotations just written.
// Until the cache shows them, a sync would work from a copy older than the
// write and its own writes would conflict.
func (e *expectations) wroteAvailability(key string, uid types.UID, values map[string]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.availability[key] = annotationFloor{uid: uid, at: e.clock.Now(), values: values}
}

// availabilityCurrent reports whether cached annotations reflect the last
// availability write for the key.
func (e *expectations) availabilityCurrent(key string, uid types.UID, annotations map[string]string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	want, ok := e.availability[key]
	if !ok {
		return true
	}
	if want.uid != uid || e.clock.Since(want.at) > availabilityFloorTimeout || len(availabilityPatch(annotations, want.values)) == 0 {
		delete(e.availability, key)
		return true
	}
	return false
}

// firstJobCreation reports whether the Job creation latency of this JobSet
// was not observed yet in this process, and marks it observed.
func (e *expectations) firstJobCreation(key string, uid types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.jobCreations[key] == uid {
		return false
	}
	e.jobCreations[key] = uid
	return true
}
