// Package controller reconciles JobSets into child Jobs, a headless Service
// and shared claims, and keeps the JobSet status.
//
// The layout follows kube-controller-manager's Job controller: shared
// informers (JobSets; Jobs, Services, claims and template revisions selected
// by the jobset-name label and trimmed by a transform) feed a rate-limited
// work queue of JobSet keys drained by several workers. One sync reads the
// cached JobSet and its Jobs, sorts the Jobs by attempt (classifyJobs),
// records the template revision (revisions.go), applies the policies in
// upstream's order (finished → delete superseded attempts → failure policy →
// success policy → suspension → claims, Service, Jobs, elastic changes,
// suspend/resume, conditions) and writes the status at most once, with the
// cached resourceVersion, only when it changed. Events are emitted after
// that write succeeded.
//
// Two guards keep a lagging cache from misleading a sync: expectations
// (Job creations and deletions not yet visible in the cache) and status
// floors (attempt counters of the last status written, which the cached
// JobSet must have reached), both kept in one generic store (package
// expectations, expectations.go). A sync that finds either unmet waits.
// Topology placement of exclusive Jobs' pods runs beside the syncs
// (package placement, placement.go).
//
// Reading order, from an informer event to a Job create: New (event
// handlers enqueue the JobSet key), processNext, sync (expectations) in
// this file; reconcile, reconcileRunning and createJobs in sync.go;
// constructJob in jobs.go.
package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller/jobcache"
	"github.com/nativejobset/jobset/pkg/controller/jobsetcache"
	"github.com/nativejobset/jobset/pkg/controller/placement"
	versioned "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
)

// ControllerName is the managedBy value this controller handles.
const ControllerName = jobset.JobSetControllerName

// Upstream's events.k8s.io fields, so that event queries and dashboards
// written for upstream find ours: reportingController and action.
const (
	EventReportingController = "jobset"
	EventAction              = "Reconciling"
)

// defaultParallelism bounds concurrent child writes of one sync.
const defaultParallelism = 50

// Options tune a Controller.
type Options struct {
	// Recorder records events; nil discards them.
	Recorder events.EventRecorder
	// Metrics receives notable events; nil means NoopMetrics.
	Metrics Metrics
	// Clock; nil means the real clock.
	Clock clock.WithTicker
	// Parallelism bounds concurrent child Job writes per sync.
	Parallelism int
	// WorkqueueMetrics, when set, receives the work queue's metrics
	// instead of client-go's global provider (workqueue.SetProvider).
	WorkqueueMetrics workqueue.MetricsProvider
	// PlacementTimeout is how long the first pod of an exclusive Job may
	// stay unscheduled before its JobSet reports it; 0 means two minutes.
	PlacementTimeout time.Duration
	// PlacementClient writes the pods (and domains) of exclusive-topology
	// Jobs, with a rate limit of its own; nil uses the controller's client.
	PlacementClient kubernetes.Interface
	// Metadata lists pods as metadata (podmeta.go); nil lists full pods
	// through the kube client.
	Metadata metadata.Interface
	// StatusCountersInterval spaces out the status writes of a JobSet that
	// only change its replicatedJobsStatus counters (statusPacer); 0
	// writes every change at once.
	StatusCountersInterval time.Duration
}

// Controller reconciles JobSets.
type Controller struct {
	kube     kubernetes.Interface
	jsClient versioned.Interface
	listPods podLister

	jobSets jobsetcache.Lister
	// jobs and revs index the child Jobs and ControllerRevisions by their
	// JobSet (byJobSet), so that a sync does not scan its namespace.
	jobs, revs cache.Indexer
	// svcs holds the Services as metadata (cachedmeta.Object).
	svcs      cache.Indexer
	pvcLister corelisters.PersistentVolumeClaimLister
	pcLister  schedulinglisters.PriorityClassLister
	synced    []cache.InformerSynced
	// revData holds the data of the revisions read from the API server
	// (revisionData), by UID.
	revData sync.Map

	queue       workqueue.TypedRateLimitingInterface[string]
	recorder    events.EventRecorder
	exp         *writeExpectations
	clock       clock.WithTicker
	metrics     Metrics
	parallelism int
	placer      placer
	inplace     *inPlaceTracker
	failedPods  *failedPodTracker
	pacer       *statusPacer
	built       *builtJobs
	waits       *predecessorWaits
}

// New wires a Controller to the informers of f. Informers must be started
// by the caller (Factories.Start) before Run.
func New(kube kubernetes.Interface, js versioned.Interface, f Factories, opts Options) (*Controller, error) {
	c := &Controller{
		kube:        kube,
		jsClient:    js,
		recorder:    opts.Recorder,
		metrics:     opts.Metrics,
		clock:       opts.Clock,
		parallelism: opts.Parallelism,
	}
	c.listPods = typedPodLister(kube)
	if opts.Metadata != nil {
		c.listPods = metadataPodLister(opts.Metadata)
	}
	if c.recorder == nil {
		c.recorder = &events.FakeRecorder{}
	}
	if c.metrics == nil {
		c.metrics = NoopMetrics{}
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	// The queue's delays (requeues, batched Job counts) follow the same clock.
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "jobset", MetricsProvider: opts.WorkqueueMetrics, Clock: c.clock})
	if c.parallelism <= 0 {
		c.parallelism = defaultParallelism
	}
	c.exp = newExpectations(c.clock)
	c.pacer = newStatusPacer(c.clock, opts.StatusCountersInterval)
	c.built = newBuiltJobs()
	c.waits = newPredecessorWaits()

	jsInf := f.JobSet.Jobset().V1alpha2().JobSets()
	jobInf := f.Kube.Batch().V1().Jobs()
	svcInf := f.Kube.Core().V1().Services()
	pvcInf := f.Kube.Core().V1().PersistentVolumeClaims()
	revInf := f.Kube.Apps().V1().ControllerRevisions()
	c.jobSets = jobsetcache.Lister{Indexer: jsInf.Informer().GetIndexer()}
	c.svcs = svcInf.Informer().GetIndexer()
	c.pvcLister = pvcInf.Lister()
	for _, inf := range []cache.SharedIndexInformer{jobInf.Informer(), revInf.Informer()} {
		if err := inf.AddIndexers(cache.Indexers{byJobSet: indexByJobSet}); err != nil {
			return nil, err
		}
	}
	c.jobs, c.revs = jobInf.Informer().GetIndexer(), revInf.Informer().GetIndexer()

	if _, err := jsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueJobSet,
		UpdateFunc: func(_, n interface{}) { c.enqueueJobSet(n) },
		DeleteFunc: c.jobSetDeleted,
	}); err != nil {
		return nil, err
	}
	child := cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueOwner,
		UpdateFunc: func(o, n interface{}) {
			if !isResync(o, n) {
				c.enqueueOwner(n)
			}
		},
		DeleteFunc: c.enqueueOwner,
	}
	// Jobs: feed the expectations, then enqueue, in one handler so the
	// sync always sees the observation.
	if _, err := jobInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o interface{}) { c.observeJob(o, false); c.enqueueOwner(o) },
		UpdateFunc: c.jobUpdated,
		DeleteFunc: func(o interface{}) { c.observeJob(o, true); c.enqueueOwner(o) },
	}); err != nil {
		return nil, err
	}
	if _, err := svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o interface{}) { observeCreated(c.exp.services, o); c.enqueueOwner(o) },
		UpdateFunc: child.UpdateFunc,
		DeleteFunc: func(o interface{}) { observeCreated(c.exp.services, o); c.enqueueOwner(o) },
	}); err != nil {
		return nil, err
	}
	if _, err := pvcInf.Informer().AddEventHandler(child); err != nil {
		return nil, err
	}
	if _, err := revInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o interface{}) { observeCreated(c.exp.revisions, o); c.enqueueOwner(o) },
		UpdateFunc: child.UpdateFunc,
		DeleteFunc: func(o interface{}) { c.forgetRevisionData(o); observeCreated(c.exp.revisions, o); c.enqueueOwner(o) },
	}); err != nil {
		return nil, err
	}
	// PriorityClasses carry no JobSet label: they come from the unfiltered
	// factory of cluster-scoped objects.
	pcInf := f.Nodes.Scheduling().V1().PriorityClasses()
	c.pcLister = pcInf.Lister()
	c.synced = []cache.InformerSynced{
		jsInf.Informer().HasSynced, jobInf.Informer().HasSynced,
		svcInf.Informer().HasSynced, pvcInf.Informer().HasSynced,
		revInf.Informer().HasSynced, pcInf.Informer().HasSynced,
	}
	placementClient := opts.PlacementClient
	if placementClient == nil {
		placementClient = kube
	}
	p, synced, err := placement.New(placement.Config{
		Client:   placementClient,
		Pods:     f.PlacedPods.Core().V1().Pods(),
		Nodes:    f.Nodes.Core().V1().Nodes(),
		Jobs:     jobInf,
		Clock:    c.clock,
		Recorder: c.recorder,
		Timeout:  opts.PlacementTimeout,
		Notify:   c.queue.Add,
	})
	if err != nil {
		return nil, err
	}
	c.placer = p
	c.synced = append(c.synced, synced...)
	if f.InPlacePods != nil {
		t, tSynced, err := newInPlaceTracker(f.InPlacePods, c.queue.Add)
		if err != nil {
			return nil, err
		}
		c.inplace = t
		c.synced = append(c.synced, tSynced)
	}
	if f.FailedPods != nil {
		t, tSynced, err := newFailedPodTracker(f.FailedPods, func(key string, uid types.UID) {
			c.waits.podFailed(key, uid)
			c.queue.Add(key)
		})
		if err != nil {
			return nil, err
		}
		c.failedPods = t
		c.synced = append(c.synced, tSynced)
	}
	return c, nil
}

func (c *Controller) enqueueJobSet(obj interface{}) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

func (c *Controller) jobSetDeleted(obj interface{}) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.exp.forget(key)
	c.pacer.forget(key)
	c.waits.forget(key)
	c.queue.Forget(key)
}

func (c *Controller) enqueueOwner(obj interface{}) {
	if key, ok := keyForChild(obj); ok {
		c.queue.Add(key)
	}
}

// jobCountsBatch is how long a change of a Job's pod counts alone waits
// before it syncs its JobSet, so that the counts of many Jobs changing
// together cost one sync. A sync reads every Job of its JobSet: at 2,000
// Jobs whose pods start together, one sync per Job event kept
// jobset-controller at about half a core while the pods were scheduled
// (test/bench/README.md). The counts' only readers are the status (whose
// counter-only writes are paced at a second anyway), the startup policy
// and availability; every other change of a Job syncs at once.
const jobCountsBatch = 500 * time.Millisecond

// jobUpdated handles a Job update: a resync (same resource version) is
// ignored, a change of the pod counts alone (or of nothing cached) is
// batched (jobCountsBatch), anything else syncs the JobSet at once.
func (c *Controller) jobUpdated(o, n interface{}) {
	if isResync(o, n) {
		return
	}
	c.observeJob(n, false)
	key, ok := keyForChild(n)
	if !ok {
		return
	}
	oj, ok1 := o.(*jobcache.Job)
	nj, ok2 := n.(*jobcache.Job)
	if ok1 && ok2 && jobcache.SameButCounts(oj, nj) {
		c.queue.AddAfter(key, jobCountsBatch)
		return
	}
	c.queue.Add(key)
}

// isResync reports whether an update is an informer's periodic resync:
// the same resource version.
func isResync(o, n interface{}) bool {
	om, ok1 := o.(interface{ GetResourceVersion() string })
	nm, ok2 := n.(interface{ GetResourceVersion() string })
	return ok1 && ok2 && om.GetResourceVersion() != "" && om.GetResourceVersion() == nm.GetResourceVersion()
}

// observeJob feeds Job events to the expectations.
func (c *Controller) observeJob(obj interface{}, deleted bool) {
	job, ok := jobcache.Of(obj)
	if !ok {
		return
	}
	if key, ok := keyForChild(job); ok {
		c.exp.observe(key, job, deleted || job.DeletionTimestamp != nil)
	}
}

// pacerPruneEvery is how often the status pacer forgets JobSets whose
// interval has passed.
const pacerPruneEvery = 30 * time.Second

// Run waits for the caches and runs workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx)
	logger.Info("Starting JobSet controller", "workers", workers)
	if !cache.WaitForNamedCacheSync("jobset", ctx.Done(), c.synced...) {
		return errors.New("timed out waiting for caches to sync")
	}
	for i := 0; i < workers; i++ {
		go wait.UntilWithContext(ctx, c.worker, time.Second)
	}
	go c.placer.Run(ctx, 1)
	go wait.UntilWithContext(ctx, func(context.Context) { c.pacer.prune() }, pacerPruneEvery)
	<-ctx.Done()
	logger.Info("Stopping JobSet controller")
	return nil
}

// JobSetSummaries lists the JobSets of the controller's cache without
// their templates (for metrics read at scrape time).
func (c *Controller) JobSetSummaries() jobsetcache.Summaries {
	return jobsetcache.Summaries{Indexer: c.jobSets.Indexer}
}

// HasSynced reports whether all caches synced (for readiness probes).
func (c *Controller) HasSynced() bool {
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	start := c.clock.Now()
	after, err := c.sync(ctx, key)
	c.metrics.SyncDone(c.clock.Since(start), err)
	switch {
	case errors.Is(err, errConflict):
		// The cache was behind the stored JobSet: an expected race, retried
		// once the informer catches up.
		klog.FromContext(ctx).V(2).Info("Status write conflicted; retrying", "key", key)
		c.queue.AddRateLimited(key)
	case err != nil:
		utilruntime.HandleErrorWithContext(ctx, err, "syncing JobSet", "key", key)
		c.queue.AddRateLimited(key)
	case after > 0:
		c.queue.Forget(key)
		c.queue.AddAfter(key, after)
	default:
		c.queue.Forget(key)
	}
	return true
}

// expectationsRetry is a safety net: a JobSet waiting for its own writes to
// show in the cache is looked at again after this delay even without an
// event.
const expectationsRetry = 5 * time.Second

// errConflict asks for a rate-limited retry after a write conflict.
var errConflict = errors.New("conflict writing JobSet status; retrying")

// sync reconciles one JobSet key. It returns a delay after which the key
// must be looked at again, if any.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	js, err := c.jobSets.Get(ns, name)
	if apierrors.IsNotFound(err) {
		c.exp.forget(key)
		c.pacer.forget(key)
		c.waits.forget(key)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	logger := klog.FromContext(ctx).WithValues("jobset", klog.KObj(js))
	ctx = klog.NewContext(ctx, logger)
	if js.DeletionTimestamp != nil {
		return 0, nil
	}
	if m := js.Spec.ManagedBy; m != nil && *m != "" && *m != ControllerName {
		logger.V(5).Info("Skipping JobSet managed by another controller", "managedBy", *m)
		return 0, nil
	}
	if from, ok := js.Annotations[jobset.MigratingKey]; ok {
		// Its children still belong to the JobSet it was copied from.
		logger.V(2).Info("Skipping JobSet being migrated", "from", from)
		return 0, nil
	}
	owned, err := c.ownedJobs(js)
	if err != nil {
		return 0, err
	}
	if !c.exp.satisfied(key, func(n string) *batchv1.Job { return owned[n] }) {
		logger.V(4).Info("Waiting for the Job cache to catch up")
		return expectationsRetry, nil
	}
	return c.reconcile(ctx, key, js, c.withEarlyFailures(owned))
}

// byJobSet indexes children by the JobSet they belong to (keyForChild):
// their controlling JobSet, else their jobset-name label.
const byJobSet = "jobset"

func indexByJobSet(obj interface{}) ([]string, error) {
	if key, ok := keyForChild(obj); ok {
		return []string{key}, nil
	}
	return nil, nil
}

// ownedJobs lists the cached Jobs the JobSet controls, by name. Of the
// compact cache it builds, for a large JobSet, only the Jobs that changed
// since its last sync (builtJobs).
func (c *Controller) ownedJobs(js *jobset.JobSet) (map[string]*batchv1.Job, error) {
	key := js.Namespace + "/" + js.Name
	list, err := c.jobs.ByIndex(byJobSet, key)
	if err != nil {
		return nil, err
	}
	var last, next *jobsBuilt
	if len(list) >= c.built.minJobs {
		last = c.built.last(key)
		next = &jobsBuilt{byName: make(map[string]builtJob, len(list))}
	}
	out := make(map[string]*batchv1.Job, len(list))
	for _, o := range list {
		if j, ok := o.(*jobcache.Job); ok {
			if isOwnedBy(j.GetOwnerReferences(), js) {
				out[j.GetName()] = next.job(last, j)
			}
		} else if j, ok := jobcache.Of(o); ok && isOwnedBy(j.OwnerReferences, js) {
			out[j.Name] = j
		}
	}
	if next != nil && len(next.byName) > 0 {
		c.built.keep(key, next)
	}
	return out, nil
}

func (c *Controller) emit(js *jobset.JobSet, evs []event) {
	for _, e := range evs {
		c.recorder.Eventf(js, nil, e.eventType, e.reason, EventAction, "%s", e.message)
	}
}

// warn records a warning event right away (for failures of child writes).
func (c *Controller) warn(js *jobset.JobSet, reason string, err error) {
	msg := err.Error()
	// events.k8s.io notes are limited to 1 kB.
	if len(msg) > maxNoteLen {
		msg = msg[:maxNoteLen-3] + "..."
	}
	c.recorder.Eventf(js, nil, corev1.EventTypeWarning, reason, EventAction, "%s", msg)
}

const maxNoteLen = 1000

// namespaceTerminating reports whether a create was refused only because
// the namespace is being deleted. The namespace's deletion takes the
// JobSet with it, so there is nothing to retry or report (as in
// kube-controller-manager's controllers).
func namespaceTerminating(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

func wrapf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err)
}
