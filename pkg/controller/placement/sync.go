package placement

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller/jobcache"
)

// The JobSet condition that reports placement, and its reasons.
const (
	ConditionPending       = "TopologyPlacementPending"
	ReasonWaitingForDomain = "WaitingForTopologyDomain"
	ReasonTimeout          = "TopologyPlacementTimeout"
	ReasonPlaced           = "TopologyPlaced"
	MessagePlaced          = "every Job has a topology domain"
	// reasonMisplacedPodsDisrupted is upstream's reason on the
	// DisruptionTarget condition of a pod deleted for its placement.
	reasonMisplacedPodsDisrupted = "ExclusivePlacementViolation"
)

// placedJob is what one pass knows about an exclusive child Job.
type placedJob struct {
	uid      types.UID
	ns, name string
	jsKey    string
	job      *batchv1.Job // nil when the Job is not (or no longer) cached
	created  time.Time
	priority int32
	live     []*corev1.Pod // neither terminal nor being deleted, by index
	recorded string        // the domain written on the Job
	domain   string        // the domain its pods are (to be) in
}

func (j *placedJob) active() bool {
	if j.job == nil {
		return len(j.live) > 0
	}
	return j.job.DeletionTimestamp == nil && !finished(j.job) && !suspended(j.job)
}

// leader is the live pod of lowest completion index.
func (j *placedJob) leader() *corev1.Pod {
	if len(j.live) == 0 {
		return nil
	}
	return j.live[0]
}

func gated(p *corev1.Pod) bool {
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == jobset.TopologyGate {
			return true
		}
	}
	return false
}

func podLive(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func completionIndex(p *corev1.Pod) int {
	v, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		v = p.Labels[batchv1.JobCompletionIndexAnnotation]
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 1 << 30
	}
	return n
}

// topologyView is the state of one topology key.
type topologyView struct {
	key        string
	domains    sets.Set[string]
	nodeDomain map[string]string // node name → label value ("" without the label)
	jobs       []*placedJob      // by creation time, then name
}

// view reads the caches (and the writes they do not show yet) for one key.
func (p *Placer) view(key string) (*topologyView, error) {
	v := &topologyView{key: key, domains: sets.New[string](), nodeDomain: map[string]string{}}
	nodes, err := p.nodeLister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		d := n.Labels[key]
		v.nodeDomain[n.Name] = d
		if d != "" {
			v.domains.Insert(d)
		}
	}
	objs, err := p.pods.ByIndex(topologyIndex, key)
	if err != nil {
		return nil, err
	}
	byUID := map[types.UID]*placedJob{}
	for _, o := range objs {
		pod, ok := o.(*corev1.Pod)
		if !ok {
			continue
		}
		if w, pending := p.podWrites.Check(writesGroup, string(pod.UID), func(w podWrite) bool { return w.caughtUp(pod) }); pending {
			pod = w.pod
		}
		ref := metav1.GetControllerOf(pod)
		if ref == nil || ref.Kind != "Job" {
			continue
		}
		j := byUID[ref.UID]
		if j == nil {
			j = &placedJob{uid: ref.UID, ns: pod.Namespace, name: ref.Name,
				jsKey: pod.Namespace + "/" + pod.Labels[jobset.JobSetNameKey]}
			if job, ok := p.cachedJob(pod.Namespace, ref.Name); ok && job.UID == ref.UID {
				j.job = job
				j.created = job.CreationTimestamp.Time
				j.recorded = job.Annotations[jobset.TopologyDomainKey]
				recorded := j.recorded
				if d, pending := p.jobWrites.Check(writesGroup, string(job.UID), func(d string) bool { return d == recorded }); pending {
					j.recorded = d
				}
			}
			byUID[ref.UID] = j
		}
		if pr := pod.Spec.Priority; pr != nil && *pr > j.priority {
			j.priority = *pr
		}
		if podLive(pod) {
			j.live = append(j.live, pod)
		}
	}
	for _, j := range byUID {
		sort.Slice(j.live, func(a, b int) bool { return completionIndex(j.live[a]) < completionIndex(j.live[b]) })
		j.domain = j.recorded
		if j.domain == "" {
			// The leader is bound but not recorded yet.
			for _, pod := range j.live {
				if pod.Spec.NodeName != "" && v.nodeDomain[pod.Spec.NodeName] != "" {
					j.domain = v.nodeDomain[pod.Spec.NodeName]
					break
				}
			}
		}
		v.jobs = append(v.jobs, j)
	}
	sort.Slice(v.jobs, func(a, b int) bool {
		ja, jb := v.jobs[a], v.jobs[b]
		if !ja.created.Equal(jb.created) {
			return ja.created.Before(jb.created)
		}
		return ja.ns+"/"+ja.name < jb.ns+"/"+jb.name
	})
	// Writes older than the TTL, of objects gone from the cache.
	p.podWrites.Sweep()
	return v, nil
}

// holder is a Job that holds a domain.
type holder struct {
	domain   string
	priority int32
}

// sync runs one placement pass over a topology key and returns when the
// key must be looked at again without an event (a leader's timeout).
func (p *Placer) sync(ctx context.Context, key string) (time.Duration, error) {
	v, err := p.view(key)
	if err != nil {
		return 0, err
	}
	logger := klog.FromContext(ctx).WithValues("topologyKey", key)
	ctx = klog.NewContext(ctx, logger)
	now := p.clock.Now()
	waits := map[string]Wait{}
	var acts actions
	var requeue time.Duration
	var holders []holder
	reserved := sets.New[string]()
	var pending []*placedJob

	dups := duplicateHolders(v.jobs)
	for _, j := range v.jobs {
		if !j.active() {
			continue
		}
		if dups[j.uid] {
			p.evictFromDomain(&acts, v, j)
			continue
		}
		if j.domain != "" {
			holders = append(holders, holder{j.domain, j.priority})
			p.settle(&acts, v, j)
			continue
		}
		if lead := j.leader(); lead != nil && !gated(lead) {
			// Released, not bound yet: its candidate domains stay reserved.
			allowed := allowedDomains(lead, key)
			reserved.Insert(allowed...)
			p.pinToSingleCandidate(&acts, key, j, sets.List(sets.New(allowed...)))
			p.mu.Lock()
			at, ok := p.releasedAt[lead.UID]
			if !ok {
				at = now
				p.releasedAt[lead.UID] = at
			}
			p.mu.Unlock()
			if left := p.timeout - now.Sub(at); left > 0 {
				requeue = minPositive(requeue, left)
			} else {
				addWait(waits, j.jsKey, ReasonTimeout,
					fmt.Sprintf("the first pod of a Job was not scheduled within %s in a free domain of node label %s", p.timeout, key))
			}
			continue
		}
		if j.leader() != nil {
			pending = append(pending, j)
		}
	}

	// Free domains are shared among all Jobs still without one, including
	// Jobs whose pods do not exist yet: when there are about as many Jobs
	// as domains, each leader gets a single candidate and its Job's other
	// pods can be pinned at once instead of after the leader is bound.
	unseen := p.jobsWithoutPods(key, v)
	sort.SliceStable(pending, func(a, b int) bool { return pending[a].priority > pending[b].priority })
	for i, j := range pending {
		cand := candidateDomains(v.domains, holders, reserved, j.priority)
		if len(cand) == 0 {
			addWait(waits, j.jsKey, ReasonWaitingForDomain,
				fmt.Sprintf("Jobs wait for a free domain of node label %s", key))
			continue
		}
		size := len(cand) / (len(pending) - i + unseen)
		if size < 1 {
			size = 1
		}
		chosen := cand[:size]
		p.planRelease(&acts, j.leader(), key, chosen)
		p.pinToSingleCandidate(&acts, key, j, chosen)
		reserved.Insert(chosen...)
	}
	if len(acts) > 0 {
		logger.V(3).Info("Placement pass", "jobs", len(v.jobs), "writes", len(acts))
	}
	p.dispatch(ctx, key, acts)
	p.forgetReleased(v)
	p.setWaiting(key, waits)
	return requeue, nil
}

// pinToSingleCandidate pins the gated pods of a Job whose leader may go to
// one domain only: the domain is known before the leader is bound.
func (p *Placer) pinToSingleCandidate(acts *actions, key string, j *placedJob, allowed []string) {
	if len(allowed) != 1 {
		return
	}
	for _, pod := range j.live[1:] {
		if gated(pod) {
			p.planPin(acts, pod, key, allowed[0])
		}
	}
}

// jobsWithoutPods counts the active exclusive Jobs of the key that have no
// domain and no pod in the cache yet: they will want a domain soon.
func (p *Placer) jobsWithoutPods(key string, v *topologyView) int {
	seen := map[types.UID]bool{}
	for _, j := range v.jobs {
		seen[j.uid] = true
	}
	objs, err := p.jobs.ByIndex(topologyIndex, key)
	if err != nil {
		return 0
	}
	n := 0
	for _, o := range objs {
		job, ok := jobcache.Of(o)
		if !ok || seen[job.UID] || job.Annotations[jobset.TopologyDomainKey] != "" {
			continue
		}
		if _, strategy := job.Annotations[jobset.NodeSelectorStrategyKey]; strategy {
			continue
		}
		if job.DeletionTimestamp == nil && !finished(job) && !suspended(job) {
			n++
		}
	}
	return n
}

// addWait records why a JobSet waits; a timeout outranks waiting for a
// domain. Messages name no Job, so that the condition (and its event)
// changes once per wait, not whenever another Job is the first to wait.
func addWait(waits map[string]Wait, jsKey, reason, message string) {
	if w, ok := waits[jsKey]; ok && (w.Reason == ReasonTimeout || reason != ReasonTimeout) {
		return
	}
	waits[jsKey] = Wait{Reason: reason, Message: message}
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || b < a {
		return b
	}
	return a
}

// forgetReleased drops release times of leaders that are bound or gone.
func (p *Placer) forgetReleased(v *topologyView) {
	inFlight := map[types.UID]bool{}
	for _, j := range v.jobs {
		if lead := j.leader(); lead != nil && j.domain == "" && !gated(lead) {
			inFlight[lead.UID] = true
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for uid := range p.releasedAt {
		if !inFlight[uid] {
			delete(p.releasedAt, uid)
		}
	}
}

// candidateDomains are the domains a leader of priority prio may go to:
// none held by a Job of the same priority and none reserved for a leader in
// flight. As upstream's anti-affinity, only Jobs of the same priority
// exclude each other. Free domains come first, then domains held only by
// other priorities (where the scheduler may preempt), each sorted.
func candidateDomains(all sets.Set[string], holders []holder, reserved sets.Set[string], prio int32) []string {
	blocked := sets.New[string]()
	other := sets.New[string]()
	for _, h := range holders {
		if h.priority == prio {
			blocked.Insert(h.domain)
		} else {
			other.Insert(h.domain)
		}
	}
	var free, preempt []string
	for _, d := range sets.List(all) {
		switch {
		case blocked.Has(d) || reserved.Has(d):
		case other.Has(d):
			preempt = append(preempt, d)
		default:
			free = append(free, d)
		}
	}
	return append(free, preempt...)
}

// allowedDomains are the values of key a released leader's required node
// affinity allows (the set the placer gave it).
func allowedDomains(pod *corev1.Pod, key string) []string {
	na := pod.Spec.Affinity
	if na == nil || na.NodeAffinity == nil || na.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	var out []string
	for _, term := range na.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, r := range term.MatchExpressions {
			if r.Key == key && r.Operator == corev1.NodeSelectorOpIn {
				out = append(out, r.Values...)
			}
		}
	}
	return out
}

// duplicateHolders returns the active Jobs that share a domain with an
// earlier holder of the same priority: they were placed wrongly (a race or
// a relabelled node) and must leave the domain. Jobs of different
// priorities may share a domain, as upstream allows (the scheduler may
// preempt). Jobs that recorded their domain come before those that did not.
func duplicateHolders(jobs []*placedJob) map[types.UID]bool {
	type slot struct {
		domain   string
		priority int32
	}
	bySlot := map[slot][]*placedJob{}
	for _, j := range jobs {
		if j.active() && j.domain != "" {
			k := slot{j.domain, j.priority}
			bySlot[k] = append(bySlot[k], j)
		}
	}
	out := map[types.UID]bool{}
	for _, js := range bySlot {
		sort.SliceStable(js, func(a, b int) bool { return js[a].recorded != "" && js[b].recorded == "" })
		for _, j := range js[1:] {
			out[j.uid] = true
		}
	}
	return out
}

// settle brings a Job that has a domain in line: the domain is recorded,
// pods bound elsewhere are disrupted, gated pods are pinned and released.
func (p *Placer) settle(acts *actions, v *topologyView, j *placedJob) {
	if j.job != nil && j.recorded != j.domain {
		p.planRecord(acts, j, j.domain)
	}
	var misplaced []*corev1.Pod
	for _, pod := range j.live {
		switch {
		case gated(pod):
			p.planPin(acts, pod, v.key, j.domain)
		case pod.Spec.NodeName != "":
			// A node that lost the label says nothing about where it is;
			// only a node labelled with another domain is evidence.
			if d := v.nodeDomain[pod.Spec.NodeName]; d != "" && d != j.domain {
				misplaced = append(misplaced, pod)
			}
		}
	}
	p.disruptPods(acts, j, misplaced, fmt.Sprintf("pod runs outside the topology domain %s=%s of its Job", v.key, j.domain))
}

// evictFromDomain takes a Job that wrongly shares a domain out of it: its
// recorded domain is cleared and its bound pods are disrupted, so that its
// replacement pods are placed again.
func (p *Placer) evictFromDomain(acts *actions, v *topologyView, j *placedJob) {
	if j.job != nil && j.recorded != "" {
		p.planRecord(acts, j, "")
	}
	var bound []*corev1.Pod
	for _, pod := range j.live {
		if pod.Spec.NodeName != "" {
			bound = append(bound, pod)
		}
	}
	p.disruptPods(acts, j, bound, fmt.Sprintf("another Job of the same priority holds the topology domain %s=%s", v.key, j.domain))
}

// placementParallelism bounds the placement writes in flight.
const placementParallelism = 32

// actions are the writes one pass decided. Their expected outcome is
// already remembered (podWrites, jobWrites), so passes do not wait for
// them: the next pass can start while they are in flight.
type actions []func(context.Context) error

func (a *actions) add(fn func(context.Context) error) { *a = append(*a, fn) }

// dispatch starts the writes, at most placementParallelism at once. A
// failed write has forgotten its expectation; the key is retried with
// backoff.
func (p *Placer) dispatch(ctx context.Context, key string, acts actions) {
	for _, fn := range acts {
		p.sem <- struct{}{}
		p.inflight.Add(1)
		go func() {
			defer func() { <-p.sem; p.inflight.Done() }()
			if err := fn(ctx); err != nil {
				utilruntime.HandleErrorWithContext(ctx, err, "placing pods", "topologyKey", key)
				p.failed(key)
			}
		}()
	}
}
