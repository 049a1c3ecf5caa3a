package controller

import (
	"context"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
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

// byJobName indexes the watched pods by their batch.kubernetes.io/job-name.
const byJobName = "jobName"

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
	pods   cache.Indexer
	cancel context.CancelFunc
	// used: asked for since the last endSync.
	used bool
}

func newOldPodWatches(source podSource, notify func(string)) *oldPodWatches {
	return &oldPodWatches{source: source, notify: notify, byKey: map[string]*oldPodWatch{}}
}

// unfinishedPods selects the pods that have not finished.
var unfinishedPods = "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)

// pods returns the unfinished pods of the JobSet's Jobs of the given names,
// indexed byJobName: those of the JobSet's watch when it covers every
// name, else those of a new one, which lists them first.
func (w *oldPodWatches) pods(ctx context.Context, key string, js *jobset.JobSet, want map[string]jobAttempt) (cache.Indexer, error) {
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
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{byJobName: indexByJobName})
	if err := pods.Replace(trimmedOldPods(list), list.ResourceVersion); err != nil {
		return nil, err
	}
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
			err = pw.pods.Replace(trimmedOldPods(list), list.ResourceVersion)
		}
		if err == nil {
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
func (w *oldPodWatches) apply(ctx context.Context, key string, pods cache.Indexer, wi watch.Interface, rv string) (string, error) {
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
				_ = pods.Update(trimOldPod(p))
			case watch.Deleted:
				_ = pods.Delete(p)
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

func indexByJobName(obj interface{}) ([]string, error) {
	if m, ok := obj.(metav1.Object); ok {
		if n := m.GetLabels()[batchv1.JobNameLabel]; n != "" {
			return []string{n}, nil
		}
	}
	return nil, nil
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

func trimmedOldPods(list *metav1.PartialObjectMetadataList) []interface{} {
	out := make([]interface{}, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, trimOldPod(&list.Items[i]))
	}
	return out
}
