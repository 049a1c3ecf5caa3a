package controller

import (
	"runtime"
	"sync"
	"weak"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/nativejobset/jobset/pkg/controller/jobcache"
)

// builtJobs keeps, for each JobSet, the batchv1.Jobs that its last sync
// built from the compact cache (jobcache), held weakly. A sync reads every
// Job of its JobSet, and few of them change between two syncs: at 2,000
// Jobs, building each anew on every sync was most of the controller's CPU
// while the pods started (test/bench/README.md). Held weakly, they cost no
// memory once the garbage collector finds no sync using them; the next
// sync then builds them again.
//
// Only JobSets of at least minJobs Jobs keep them: building a few Jobs
// costs little, and garbage not yet collected counts in the controller's
// memory at rest, 10,000 small JobSets' worth of it too.
//
// Only the JobSet's own sync reads and replaces its entry, and the
// workqueue never syncs a JobSet on two workers at once.
type builtJobs struct {
	minJobs int
	mu      sync.Mutex
	byKey   map[string]weak.Pointer[jobsBuilt]
	// pinned, when set (by tests), also holds the last of each JobSet
	// strongly, so that a test reads what the sync built.
	pinned map[string]*jobsBuilt
}

// jobsBuilt holds one JobSet's built Jobs by name, each with the cached
// Job it was built from: a Job updated since has a new cached object.
type jobsBuilt struct {
	byName map[string]builtJob
}

type builtJob struct {
	from *jobcache.Job
	job  *batchv1.Job
}

// keepBuiltFrom is builtJobs.minJobs.
const keepBuiltFrom = 64

func newBuiltJobs() *builtJobs {
	return &builtJobs{minJobs: keepBuiltFrom, byKey: map[string]weak.Pointer[jobsBuilt]{}}
}

// last returns what the last sync of the JobSet built, nil when it is
// gone.
func (b *builtJobs) last(key string) *jobsBuilt {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byKey[key].Value()
}

// keep records what a sync of the JobSet built. The entry goes when the
// garbage collector frees them.
func (b *builtJobs) keep(key string, jb *jobsBuilt) {
	b.mu.Lock()
	b.byKey[key] = weak.Make(jb)
	if b.pinned != nil {
		b.pinned[key] = jb
	}
	b.mu.Unlock()
	runtime.AddCleanup(jb, b.dropIfFreed, key)
}

func (b *builtJobs) dropIfFreed(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w, ok := b.byKey[key]; ok && w.Value() == nil {
		delete(b.byKey, key)
	}
}

// job returns the batchv1.Job of the cached j, the one in last (which may
// be nil) when j has not changed since, and records it in next (when not
// nil).
func (next *jobsBuilt) job(last *jobsBuilt, j *jobcache.Job) *batchv1.Job {
	if next == nil {
		return j.Job()
	}
	name := j.GetName()
	if last != nil {
		if prev, ok := last.byName[name]; ok && prev.from == j {
			next.byName[name] = prev
			return prev.job
		}
	}
	job := j.Job()
	next.byName[name] = builtJob{from: j, job: job}
	return job
}
