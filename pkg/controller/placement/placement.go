// Package placement places the pods of exclusive-topology Jobs without
// admission webhooks.
//
// The pods of a Job whose JobSet (or replicatedJob template) carries the
// exclusive-topology annotation are created with the scheduling gate
// TopologyGate and the label ExclusivePlacementLabel. The placer watches
// only those pods. Per topology label key it works in passes (one sync of
// the key at a time, so decisions never race each other):
//
//  1. A Job without a domain gets its leader (its live pod of lowest
//     completion index) released: the gate is removed and a required node
//     affinity term restricts it to a set of candidate domains, i.e. values
//     of the label that no other Job of the same priority holds and
//     that no other leader in flight may go to. Leaders released in the
//     same pass get disjoint candidate sets, so two leaders can never meet
//     in one domain, while the scheduler still picks the node (and, within
//     the set, the domain) by its own filters and scoring.
//  2. Once the leader is bound, the node's label value is the Job's domain;
//     it is recorded on the Job (TopologyDomainKey) and every other gated
//     pod of the Job gets nodeSelector {key: domain} and loses its gate.
//  3. Pods bound outside their Job's domain (a node relabelled, two Jobs of
//     the same priority in one domain) are deleted with a DisruptionTarget
//     condition; their replacements are placed again.
//
// Kubernetes allows adding nodeSelector entries and node affinity
// requirements to a pod only while it is gated, which is exactly when the
// placer writes them.
package placement

import (
	"context"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller/expectations"
	"github.com/nativejobset/jobset/pkg/controller/jobcache"
)

// topologyIndex indexes placed pods by the value of their exclusive
// topology annotation (the node label key).
const topologyIndex = "topology"

// DefaultTimeout is how long a released leader may stay unbound before
// its JobSet reports it.
const DefaultTimeout = 2 * time.Minute

// overlayTTL bounds how long a write is remembered when its object never
// shows up in the cache (it was deleted meanwhile).
const overlayTTL = 2 * time.Minute

// Placer drives the placement of exclusive Jobs' pods.
type Placer struct {
	kube       kubernetes.Interface
	pods       cache.Indexer
	nodeLister corelisters.NodeLister
	jobs       cache.Indexer // Jobs (jobcache.Job), also indexed by topology key
	queue      workqueue.TypedRateLimitingInterface[string]
	clock      clock.PassiveClock
	recorder   events.EventRecorder
	timeout    time.Duration
	// notify asks the JobSet controller to look at a JobSet again (its
	// placement condition changed).
	notify func(jsKey string)

	// sem bounds the writes in flight; inflight counts them.
	sem      chan struct{}
	inflight sync.WaitGroup
	// failures counts, per key, writes that failed since the last pass
	// without failures; such a key is retried with backoff.
	failures map[string]int

	// Writes the caches do not show yet (by UID), so that a pass never
	// acts on a state older than its own previous pass: the pod as written,
	// and the domain recorded on a Job ("" when cleared).
	podWrites *expectations.Store[podWrite]
	jobWrites *expectations.Store[string]

	mu sync.Mutex
	// releasedAt is when each in-flight leader was released.
	releasedAt map[types.UID]time.Time
	// waiting holds, per topology key and JobSet key, why some of the
	// JobSet's Jobs have no domain.
	waiting map[string]map[string]Wait
}

// writesGroup is the one group of the placer's expectations: pods and Jobs
// are remembered by UID alone.
const writesGroup = ""

type podWrite struct {
	pod *corev1.Pod
	// caughtUp tells when the cached pod shows the write.
	caughtUp func(cached *corev1.Pod) bool
}

// Wait is why some Jobs of a JobSet have no domain yet: the reason and
// message of the JobSet's ConditionPending.
type Wait struct {
	Reason  string
	Message string
}

// Factories returns the informer factories of the placer: pods carrying
// ExclusivePlacementLabel, and nodes reduced to their metadata.
func Factories(kube kubernetes.Interface, resync time.Duration) (pods, nodes informers.SharedInformerFactory) {
	pods = informers.NewSharedInformerFactoryWithOptions(kube, resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = jobset.ExclusivePlacementLabel + "=true" }),
		informers.WithTransform(trimPlacedPod))
	nodes = informers.NewSharedInformerFactoryWithOptions(kube, resync, informers.WithTransform(trimNode))
	return pods, nodes
}

// trimPlacedPod keeps what placement reads: metadata, node name, gates,
// node selection, priority and phase.
func trimPlacedPod(obj interface{}) (interface{}, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	p.ManagedFields = nil
	spec := corev1.PodSpec{
		NodeName:        p.Spec.NodeName,
		SchedulingGates: p.Spec.SchedulingGates,
		NodeSelector:    p.Spec.NodeSelector,
		Priority:        p.Spec.Priority,
	}
	if p.Spec.Affinity != nil && p.Spec.Affinity.NodeAffinity != nil {
		spec.Affinity = &corev1.Affinity{NodeAffinity: p.Spec.Affinity.NodeAffinity}
	}
	p.Spec = spec
	p.Status = corev1.PodStatus{Phase: p.Status.Phase}
	return p, nil
}

// trimNode keeps a node's metadata: placement reads only its labels.
func trimNode(obj interface{}) (interface{}, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	n.ManagedFields = nil
	n.Annotations = nil
	n.Spec = corev1.NodeSpec{}
	n.Status = corev1.NodeStatus{}
	return n, nil
}

func indexByTopology(obj interface{}) ([]string, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	if k := m.GetAnnotations()[jobset.ExclusiveKey]; k != "" {
		return []string{k}, nil
	}
	return nil, nil
}

// Config wires a Placer.
type Config struct {
	// Client writes pods and Jobs.
	Client kubernetes.Interface
	// Pods come from the pods factory of Factories, Nodes from its nodes
	// factory; Jobs are the controller's (trimmed) child Jobs.
	Pods  coreinformers.PodInformer
	Nodes coreinformers.NodeInformer
	Jobs  batchinformers.JobInformer
	// Clock; nil means the real clock.
	Clock clock.PassiveClock
	// Recorder records events on Jobs; nil records none.
	Recorder events.EventRecorder
	// Timeout is how long a released leader may stay unbound before its
	// JobSet reports it; 0 means DefaultTimeout.
	Timeout time.Duration
	// Notify asks for a JobSet (namespace/name) to be looked at again:
	// what WaitFor reports for it changed.
	Notify func(jobSetKey string)
}

// New returns a Placer fed by the informers of cfg, and the informers it
// waits for besides the Jobs.
func New(cfg Config) (*Placer, []cache.InformerSynced, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	podInf := cfg.Pods.Informer()
	if err := podInf.AddIndexers(cache.Indexers{topologyIndex: indexByTopology}); err != nil {
		return nil, nil, err
	}
	nodeInf := cfg.Nodes
	jobInf := cfg.Jobs
	if err := jobInf.Informer().AddIndexers(cache.Indexers{topologyIndex: indexByTopology}); err != nil {
		return nil, nil, err
	}
	p := &Placer{
		kube:       cfg.Client,
		pods:       podInf.GetIndexer(),
		nodeLister: nodeInf.Lister(),
		jobs:       jobInf.Informer().GetIndexer(),
		clock:      cfg.Clock,
		recorder:   cfg.Recorder,
		timeout:    cfg.Timeout,
		notify:     cfg.Notify,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "jobset_placement"}),
		sem:        make(chan struct{}, placementParallelism),
		failures:   map[string]int{},
		podWrites:  expectations.New[podWrite](cfg.Clock, overlayTTL),
		jobWrites:  expectations.New[string](cfg.Clock, overlayTTL),
		releasedAt: map[types.UID]time.Time{},
		waiting:    map[string]map[string]Wait{},
	}
	byAnnotation := cache.ResourceEventHandlerFuncs{
		AddFunc: p.enqueueFor,
		UpdateFunc: func(o, n interface{}) {
			if sameVersion(o, n) {
				return
			}
			p.enqueueFor(n)
		},
		DeleteFunc: p.enqueueFor,
	}
	if _, err := podInf.AddEventHandler(byAnnotation); err != nil {
		return nil, nil, err
	}
	// A finished or deleted Job frees its domain; a suspended one loses it.
	if _, err := jobInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: p.jobChanged,
		UpdateFunc: func(o, n interface{}) {
			if sameVersion(o, n) {
				return
			}
			p.jobChanged(n)
		},
		DeleteFunc: p.enqueueFor,
	}); err != nil {
		return nil, nil, err
	}
	if _, err := nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(interface{}) { p.enqueueAll() },
		UpdateFunc: func(o, n interface{}) {
			on, ok1 := o.(*corev1.Node)
			nn, ok2 := n.(*corev1.Node)
			if ok1 && ok2 && labelsEqual(on.Labels, nn.Labels) {
				return
			}
			p.enqueueAll()
		},
		DeleteFunc: func(interface{}) { p.enqueueAll() },
	}); err != nil {
		return nil, nil, err
	}
	return p, []cache.InformerSynced{podInf.HasSynced, nodeInf.Informer().HasSynced}, nil
}

func sameVersion(o, n interface{}) bool {
	om, ok1 := o.(metav1.Object)
	nm, ok2 := n.(metav1.Object)
	return ok1 && ok2 && om.GetResourceVersion() != "" && om.GetResourceVersion() == nm.GetResourceVersion()
}

func labelsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// enqueueFor queues the topology key an exclusive pod or Job names.
func (p *Placer) enqueueFor(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	if _, ok := jobcache.Of(obj); ok {
		if _, strategy := m.GetAnnotations()[jobset.NodeSelectorStrategyKey]; strategy {
			return
		}
	}
	if k := m.GetAnnotations()[jobset.ExclusiveKey]; k != "" {
		p.queue.Add(k)
	}
}

// suspendedPrefix marks queue keys of suspended Jobs whose recorded domain
// must go (a topology key, a label key, cannot contain "|").
const suspendedPrefix = "suspended|"

// jobChanged queues the Job's topology key, and the Job itself when it is
// suspended with a domain: its pods are gone, and the domain it recorded
// will be free for others by the time it resumes, so it must choose again.
func (p *Placer) jobChanged(obj interface{}) {
	p.enqueueFor(obj)
	job, ok := jobcache.Of(obj)
	if ok && job.DeletionTimestamp == nil && suspended(job) && job.Annotations[jobset.TopologyDomainKey] != "" {
		p.queue.Add(suspendedPrefix + job.Namespace + "/" + job.Name)
	}
}

// forgetSuspendedDomain removes the recorded domain of a suspended Job.
func (p *Placer) forgetSuspendedDomain(ctx context.Context, jobKey string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(jobKey)
	if err != nil {
		return nil
	}
	job, ok := p.cachedJob(ns, name)
	if !ok || !suspended(job) || job.Annotations[jobset.TopologyDomainKey] == "" {
		return nil
	}
	return p.recordDomain(ctx, &placedJob{uid: job.UID, ns: ns, name: name}, "")
}

// cachedJob returns the cached Job of that namespace and name.
func (p *Placer) cachedJob(ns, name string) (*batchv1.Job, bool) {
	obj, exists, err := p.jobs.GetByKey(ns + "/" + name)
	if err != nil || !exists {
		return nil, false
	}
	return jobcache.Of(obj)
}

// enqueueAll queues every topology key that has pods (a node changed).
func (p *Placer) enqueueAll() {
	for _, k := range p.pods.ListIndexFuncValues(topologyIndex) {
		p.queue.Add(k)
	}
}

// Run drains the queue until ctx ends. One worker suffices: a pass over a
// key costs a few cache reads and only the writes it decides.
func (p *Placer) Run(ctx context.Context, workers int) {
	defer p.queue.ShutDown()
	for i := 0; i < workers; i++ {
		go wait.UntilWithContext(ctx, p.worker, time.Second)
	}
	<-ctx.Done()
}

func (p *Placer) worker(ctx context.Context) {
	for p.processNext(ctx) {
	}
}

func (p *Placer) processNext(ctx context.Context) bool {
	key, quit := p.queue.Get()
	if quit {
		return false
	}
	defer p.queue.Done(key)
	var after time.Duration
	var err error
	if jobKey, ok := strings.CutPrefix(key, suspendedPrefix); ok {
		err = p.forgetSuspendedDomain(ctx, jobKey)
	} else {
		after, err = p.sync(ctx, key)
	}
	switch {
	case err != nil:
		utilruntime.HandleErrorWithContext(ctx, err, "placing pods", "topologyKey", key)
		p.queue.AddRateLimited(key)
		return true
	case after > 0:
		p.queue.AddAfter(key, after)
	}
	// The backoff of a key ends with a pass that follows no failed write.
	p.mu.Lock()
	failed := p.failures[key] > 0
	delete(p.failures, key)
	p.mu.Unlock()
	if !failed {
		p.queue.Forget(key)
	}
	return true
}

// failed retries a key whose write failed, with backoff.
func (p *Placer) failed(key string) {
	p.mu.Lock()
	p.failures[key]++
	p.mu.Unlock()
	p.queue.AddRateLimited(key)
}

// WaitFor returns why some Jobs of a JobSet (namespace/name) have no
// domain yet, if any.
func (p *Placer) WaitFor(jsKey string) (Wait, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, byJobSet := range p.waiting {
		if w, ok := byJobSet[jsKey]; ok {
			return w, true
		}
	}
	return Wait{}, false
}

// setWaiting replaces the waiting state of the JobSets of one topology
// key and notifies the JobSets whose state changed.
func (p *Placer) setWaiting(topologyKey string, now map[string]Wait) {
	var changed []string
	p.mu.Lock()
	old := p.waiting[topologyKey]
	for jsKey, w := range now {
		if o, had := old[jsKey]; !had || o != w {
			changed = append(changed, jsKey)
		}
	}
	for jsKey := range old {
		if _, has := now[jsKey]; !has {
			changed = append(changed, jsKey)
		}
	}
	if len(now) == 0 {
		delete(p.waiting, topologyKey)
	} else {
		p.waiting[topologyKey] = now
	}
	p.mu.Unlock()
	for _, k := range changed {
		klog.V(2).Info("Placement state changed", "jobset", k, "topologyKey", topologyKey)
		if p.notify != nil {
			p.notify(k)
		}
	}
}

// GateJob makes the pods of an exclusive Indexed Job wait for the placer:
// a scheduling gate, and a label to watch them by. Jobs of the
// node-selector strategy are placed by their nodeSelector instead.
func GateJob(job *batchv1.Job) {
	if job.Annotations[jobset.ExclusiveKey] == "" {
		return
	}
	if _, strategy := job.Annotations[jobset.NodeSelectorStrategyKey]; strategy {
		return
	}
	if job.Spec.CompletionMode == nil || *job.Spec.CompletionMode != batchv1.IndexedCompletion {
		return
	}
	tmpl := &job.Spec.Template
	tmpl.Labels = withEntry(tmpl.Labels, jobset.ExclusivePlacementLabel, "true")
	for _, g := range tmpl.Spec.SchedulingGates {
		if g.Name == jobset.TopologyGate {
			return
		}
	}
	tmpl.Spec.SchedulingGates = append(tmpl.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: jobset.TopologyGate})
}

// withEntry sets key in m, making m when it is nil.
func withEntry(m map[string]string, key, value string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[key] = value
	return m
}

// suspended reports whether a Job is suspended (its pods are gone).
func suspended(job *batchv1.Job) bool {
	return job.Spec.Suspend != nil && *job.Spec.Suspend
}

// finished reports whether a Job completed or failed.
func finished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
