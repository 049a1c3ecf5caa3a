// Package expectations remembers what a controller's own writes should
// make its informer caches show, until they show it or a timeout passes.
//
// Informers lag behind the API server. A sync that reads a cache older than
// its own last write may write again (a second create, a second delete) or
// decide from stale data (count a restart twice). Each write therefore
// leaves an expectation: the value the cache should show for one item of a
// group (a Job name of a JobSet, a pod UID, ...). Syncs check the cache
// against it and wait, or overlay the expected value, until the cache
// catches up; the timeout is a safety net for objects that never show up
// (deleted meanwhile, or changed by someone else).
package expectations

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Store holds expectations of type V by group and item.
type Store[V any] struct {
	clock clock.PassiveClock
	ttl   time.Duration

	mu     sync.Mutex
	groups map[string]map[string]entry[V]
}

type entry[V any] struct {
	want V
	at   time.Time
}

// New returns a Store whose expectations lapse ttl after they were made.
func New[V any](clk clock.PassiveClock, ttl time.Duration) *Store[V] {
	return &Store[V]{clock: clk, ttl: ttl, groups: map[string]map[string]entry[V]{}}
}

// Expect remembers want for an item, replacing what was remembered.
func (s *Store[V]) Expect(group, item string, want V) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[group]
	if g == nil {
		g = map[string]entry[V]{}
		s.groups[group] = g
	}
	g[item] = entry[V]{want: want, at: s.clock.Now()}
}

// Update changes the remembered value of a pending item in place (its
// timeout runs on); it does nothing when the item is not remembered.
func (s *Store[V]) Update(group, item string, fn func(want V) V) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.groups[group][item]; ok {
		e.want = fn(e.want)
		s.groups[group][item] = e
	}
}

// Drop forgets one item (its write failed, or the cache showed it).
func (s *Store[V]) Drop(group, item string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked(group, item)
}

func (s *Store[V]) dropLocked(group, item string) {
	g := s.groups[group]
	delete(g, item)
	if len(g) == 0 {
		s.forgetLocked(group)
	}
}

// Forget drops every expectation of a group.
func (s *Store[V]) Forget(group string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetLocked(group)
}

// forgetLocked drops a group; once none is left the map is replaced, since
// Go keeps a map's buckets after its entries are deleted and a burst of
// creates (a group per JobSet) would otherwise stay in memory.
func (s *Store[V]) forgetLocked(group string) {
	delete(s.groups, group)
	if len(s.groups) == 0 {
		s.groups = map[string]map[string]entry[V]{}
	}
}

// Pending returns the remembered value of an item that has not timed out.
func (s *Store[V]) Pending(group, item string) (V, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.groups[group][item]
	if !ok || s.expired(e) {
		var zero V
		return zero, false
	}
	return e.want, true
}

// Has reports whether an item is pending (remembered, not timed out).
func (s *Store[V]) Has(group, item string) bool {
	_, ok := s.Pending(group, item)
	return ok
}

// Check compares an item with what the cache shows: when shows(want)
// holds, or the expectation timed out, the item is forgotten and Check
// reports false; otherwise it returns the expected value and true.
func (s *Store[V]) Check(group, item string, shows func(want V) bool) (V, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.groups[group][item]
	if ok && !s.expired(e) && !shows(e.want) {
		return e.want, true
	}
	if ok {
		s.dropLocked(group, item)
	}
	var zero V
	return zero, false
}

// Settle checks every item of a group as Check does and reports whether
// none is pending any more.
func (s *Store[V]) Settle(group string, shows func(item string, want V) bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for item, e := range s.groups[group] {
		if s.expired(e) || shows(item, e.want) {
			s.dropLocked(group, item)
		}
	}
	return len(s.groups[group]) == 0
}

// Sweep forgets every expectation that timed out (of objects the cache
// will never show, so that no Check would come for them).
func (s *Store[V]) Sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for group, g := range s.groups {
		for item, e := range g {
			if s.expired(e) {
				s.dropLocked(group, item)
			}
		}
	}
}

// Len counts the items remembered (timed out or not).
func (s *Store[V]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, g := range s.groups {
		n += len(g)
	}
	return n
}

func (s *Store[V]) expired(e entry[V]) bool {
	return s.clock.Since(e.at) >= s.ttl
}
