package controller

import (
	"context"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// A restart's wait for old pods (runningPredecessors) asks, on every sync
// of the waiting JobSet, which Jobs still to create have a pod of that
// name running. The JobSet's pods are not cached (they would cost every
// managed pod its bytes), and listing them on every check was costly: at
// 250 Jobs × 32 pods on 5,000 nodes a list of the unfinished pods' metadata
// (managed fields included) was about 20 MB to encode, compress and decode,
// and the wait made one every 10 s for a quarter of an hour
// (test/bench/README.md). A waiting JobSet's unfinished pods are therefore
// listed once, as metadata, and a watch from that list keeps them: a pod
// that finishes or goes away leaves the watch's selection (a Deleted
// event), which wakes the JobSet. The watch ends with the wait: when no
// name is held back any more, or when a sync no longer asks.

// How soon a failed list of old pods is tried again: doubling from the
// first to the second.
const (
	minOldPodWatchRetry = 100 * time.Millisecond
	maxOldPodWatchRetry = 10 * time.Second
)

// oldPodWatches holds the watches of waiting JobSets by key.
type oldPodWatches struct {
	source podSource
	// notify wakes a JobSet (namespace/name) whose pods left the watch.
	notify func(key string)

	mu    sync.Mutex
	byKey map[string]*oldPodWatch
}

type oldPodWatch struct {
	opts metav1.ListOptions
	// names the selector covers; nil: all the JobSet's pods.
	names  map[string]bool
	pods   *oldPodSet
	cancel context.CancelFunc
	// used: asked for since the last endSync.
	used bool
}

func newOldPodWatches(source podSource, notify func(string)) *oldPodWatches {
	return &oldPodWatches{source: source, notify: notify, byKey: map[string]*oldPodWatch{}}
}

// unfinishedPods selects the pods that have not finished.
var unfinishedPods = "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)

// pods returns the unfinished pods of the JobSet's Jobs of the given names:
// those of the JobSet's watch when it covers every name, else those of a
// new one, which lists them first.
func (w *oldPodWatches) pods(ctx context.Context, key string, js *jobset.JobSet, want map[string]jobAttempt) (*oldPodSet, error) {
	w.mu.Lock()
	if pw := w.byKey[key]; pw != nil && pw.covers(want) {
		pw.used = true
		w.mu.Unlock()
		return pw.pods, nil
	}
	w.mu.Unlock()
	w.stop(key)
	sel, names := predecessorSelector(js, want)
	opts := metav1.ListOptions{LabelSelector: sel, FieldSelector: unfinishedPods}
	list, err := w.source.list(ctx, js.Namespace, opts)
	if err != nil {
		return nil, err
	}
	pods := &oldPodSet{}
	pods.replace(list)
	// The watch outlives this sync, not the controller.
	wctx, cancel := context.WithCancel(ctx)
	pw := &oldPodWatch{opts: opts, names: names, pods: pods, cancel: cancel, used: true}
	w.mu.Lock()
	w.byKey[key] = pw
	w.mu.Unlock()
	go w.follow(wctx, key, js.Namespace, pw, list.ResourceVersion)
	return pods, nil
}

func (pw *oldPodWatch) covers(want map[string]jobAttempt) bool {
	if pw.names == nil {
		return true
	}
	for n := range want {
		if !pw.names[n] {
			return false
		}
	}
	return true
}

// follow keeps pw's pods from the watch, from resourceVersion rv on; when
// the watch fails (its version expired, say), it lists them again.
func (w *oldPodWatches) follow(ctx context.Context, key, namespace string, pw *oldPodWatch, rv string) {
	logger := klog.FromContext(ctx)
	retry := minOldPodWatchRetry
	for ctx.Err() == nil {
		opts := pw.opts
		opts.ResourceVersion, opts.AllowWatchBookmarks = rv, true
		wi, err := w.source.watch(ctx, namespace, opts)
		if err == nil {
			rv, err = w.apply(ctx, key, pw.pods, wi, rv)
			if err == nil {
				retry = minOldPodWatchRetry
				continue // the server closed it: watch on from rv
			}
		}
		if ctx.Err() != nil {
			return
		}
		logger.V(2).Info("Watching old pods failed; listing them again", "jobset", key, "err", err)
		list, err := w.source.list(ctx, namespace, pw.opts)
		if err == nil {
			pw.pods.replace(list)
			rv = list.ResourceVersion
			w.notify(key)
			continue
		}
		logger.V(2).Info("Listing old pods failed", "jobset", key, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
		retry = min(2*retry, maxOldPodWatchRetry)
	}
}

// apply applies the watch's events to pods until it ends, and returns the
// last resourceVersion seen; an error event ends it with that error.
func (w *oldPodWatches) apply(ctx context.Context, key string, pods *oldPodSet, wi watch.Interface, rv string) (string, error) {
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return rv, ctx.Err()
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return rv, nil
			}
			if ev.Type == watch.Error {
				return rv, apierrors.FromObject(ev.Object)
			}
			p, ok := ev.Object.(*metav1.PartialObjectMetadata)
			if !ok {
				continue
			}
			rv = p.ResourceVersion
			switch ev.Type {
			case watch.Added, watch.Modified:
				pods.put(p)
			case watch.Deleted:
				pods.remove(p.UID)
				w.notify(key)
			}
		}
	}
}

// stop ends the JobSet's watch, if any.
func (w *oldPodWatches) stop(key string) {
	w.mu.Lock()
	pw := w.byKey[key]
	delete(w.byKey, key)
	w.mu.Unlock()
	if pw != nil {
		pw.cancel()
	}
}

// endSync ends the JobSet's watch if the sync that ends did not ask for it:
// the JobSet no longer waits (it finished, was suspended, or another sync
// created its Jobs).
func (w *oldPodWatches) endSync(key string) {
	w.mu.Lock()
	pw := w.byKey[key]
	keep := pw != nil && pw.used
	if pw != nil {
		pw.used = false
	}
	w.mu.Unlock()
	if pw != nil && !keep {
		w.stop(key)
	}
}

// oldPodLabelsRead are the labels of a watched pod that the wait reads.
var oldPodLabelsRead = map[string]bool{batchv1.JobNameLabel: true, jobset.RestartsKey: true, jobset.JobRestartsKey: true}

// trimOldPod keeps what the wait reads of a pod: its identity, the labels
// above and its deletion timestamp.
func trimOldPod(p *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name:              p.Name,
		Namespace:         p.Namespace,
		UID:               p.UID,
		ResourceVersion:   p.ResourceVersion,
		DeletionTimestamp: p.DeletionTimestamp,
		Labels:            keepOnly(p.Labels, oldPodLabelsRead, cacheStrings),
	}}
}

// oldPodSet holds a watch's pods by UID, counted by Job name; the pods
// without a deletion timestamp (strays, or pods of this attempt) are kept
// by Job name too. A sync asks about a few hundred names for every pod
// that leaves: a count answers it, where going through the pods would
// make a wait of n pods cost n² steps.
type oldPodSet struct {
	mu        sync.Mutex
	byUID     map[types.UID]*metav1.PartialObjectMetadata
	count     map[string]int
	undeleted map[string]map[types.UID]*metav1.PartialObjectMetadata
}

func (s *oldPodSet) replace(list *metav1.PartialObjectMetadataList) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byUID = make(map[types.UID]*metav1.PartialObjectMetadata, len(list.Items))
	s.count = map[string]int{}
	s.undeleted = map[string]map[types.UID]*metav1.PartialObjectMetadata{}
	for i := range list.Items {
		s.putLocked(&list.Items[i])
	}
}

func (s *oldPodSet) put(p *metav1.PartialObjectMetadata) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putLocked(p)
}

func (s *oldPodSet) putLocked(p *metav1.PartialObjectMetadata) {
	s.removeLocked(p.UID)
	t := trimOldPod(p)
	name := t.Labels[batchv1.JobNameLabel]
	s.byUID[t.UID] = t
	s.count[name]++
	if t.DeletionTimestamp == nil {
		if s.undeleted[name] == nil {
			s.undeleted[name] = map[types.UID]*metav1.PartialObjectMetadata{}
		}
		s.undeleted[name][t.UID] = t
	}
}

func (s *oldPodSet) remove(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(uid)
}

func (s *oldPodSet) removeLocked(uid types.UID) {
	old, ok := s.byUID[uid]
	if !ok {
		return
	}
	name := old.Labels[batchv1.JobNameLabel]
	delete(s.byUID, uid)
	if s.count[name]--; s.count[name] <= 0 {
		delete(s.count, name)
	}
	if u := s.undeleted[name]; u != nil {
		delete(u, uid)
		if len(u) == 0 {
			delete(s.undeleted, name)
		}
	}
}

// running returns how many unfinished pods the Job name has, and those of
// them without a deletion timestamp.
func (s *oldPodSet) running(name string) (int, []*metav1.PartialObjectMetadata) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.count[name]
	if n == 0 || len(s.undeleted[name]) == 0 {
		return n, nil
	}
	out := make([]*metav1.PartialObjectMetadata, 0, len(s.undeleted[name]))
	for _, p := range s.undeleted[name] {
		out = append(out, p)
	}
	return n, out
}
