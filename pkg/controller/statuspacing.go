package controller

import (
	"sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/clock"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// statusPacer spaces out the status writes of a JobSet whose only change is
// in its replicatedJobsStatus counters. A large JobSet's Jobs change one at
// a time: without it, every Job event would cost a status write (and a
// watch event to every client of the JobSet). The first change after a
// quiet interval is written at once; changes within the interval are
// written together at its end. Anything else (conditions, restarts, the
// observed parallelism that /scale reports) is written at once.
type statusPacer struct {
	interval time.Duration
	clock    clock.PassiveClock

	mu   sync.Mutex
	last map[string]time.Time // JobSet key → when its status was last written
}

func newStatusPacer(c clock.PassiveClock, interval time.Duration) *statusPacer {
	return &statusPacer{interval: interval, clock: c, last: map[string]time.Time{}}
}

// hold returns how long a counters-only write of the key must wait, 0 when
// it may be written now.
func (p *statusPacer) hold(key string) time.Duration {
	if p.interval <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.last[key]
	if !ok {
		return 0
	}
	if wait := last.Add(p.interval).Sub(p.clock.Now()); wait > 0 {
		return wait
	}
	return 0
}

// wrote records a status write of the key.
func (p *statusPacer) wrote(key string) {
	if p.interval <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last[key] = p.clock.Now()
}

// prune forgets the JobSets whose interval has passed (hold is 0 for them
// either way), so that a burst of writes does not stay in memory once the
// JobSets rest. An emptied map is replaced: Go keeps a map's buckets after
// its entries are deleted.
func (p *statusPacer) prune() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	for key, last := range p.last {
		if !now.Before(last.Add(p.interval)) {
			delete(p.last, key)
		}
	}
	if len(p.last) == 0 {
		p.last = map[string]time.Time{}
	}
}

// forget drops a deleted JobSet.
func (p *statusPacer) forget(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, key)
}

// countersOnly reports whether two statuses differ only in the Ready,
// Succeeded, Failed, Active and Suspended counters of replicatedJobs they
// both list, in the same order.
func countersOnly(old, cur *jobset.JobSetStatus) bool {
	if len(old.ReplicatedJobsStatus) != len(cur.ReplicatedJobsStatus) {
		return false
	}
	a, b := *old, *cur
	a.ReplicatedJobsStatus = withoutCounters(old.ReplicatedJobsStatus)
	b.ReplicatedJobsStatus = withoutCounters(cur.ReplicatedJobsStatus)
	return apiequality.Semantic.DeepEqual(a, b)
}

func withoutCounters(in []jobset.ReplicatedJobStatus) []jobset.ReplicatedJobStatus {
	out := make([]jobset.ReplicatedJobStatus, len(in))
	for i, s := range in {
		s.Ready, s.Succeeded, s.Failed, s.Active, s.Suspended = 0, 0, 0, 0, 0
		out[i] = s
	}
	return out
}
