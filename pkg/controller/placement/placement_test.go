package placement

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	kfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller/jobcache"
)

const poolKey = "cloud.google.com/gke-nodepool"

// poolNodes returns two nodes per pool: node-<pool>-a and node-<pool>-b.
func poolNodes(pools ...string) []runtime.Object {
	var out []runtime.Object
	for _, p := range pools {
		for _, s := range []string{"a", "b"} {
			out = append(out, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name: "node-" + p + "-" + s, Labels: map[string]string{poolKey: p},
			}})
		}
	}
	return out
}

// exclusiveJob is an active child Job of JobSet "js" asking for a pool.
func exclusiveJob(name string, created int, domain string) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: ns, UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(created) * time.Second)),
		Labels:            map[string]string{jobset.JobSetNameKey: "js"},
		Annotations:       map[string]string{jobset.ExclusiveKey: poolKey},
	}}
	if domain != "" {
		j.Annotations[jobset.TopologyDomainKey] = domain
	}
	return j
}

// placedPod is pod <index> of the Job; gated unless node is set.
func placedPod(job *batchv1.Job, index int, node string, priority int32) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", job.Name, index), Namespace: ns,
			UID:             types.UID(fmt.Sprintf("pod-%s-%d", job.Name, index)),
			ResourceVersion: "1",
			Labels:          map[string]string{jobset.JobSetNameKey: "js", jobset.ExclusivePlacementLabel: "true"},
			Annotations: map[string]string{
				jobset.ExclusiveKey:                  poolKey,
				batchv1.JobCompletionIndexAnnotation: fmt.Sprint(index),
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}},
		},
		Spec:   corev1.PodSpec{NodeName: node, Priority: ptr.To(priority)},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if node == "" {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "other"}, {Name: jobset.TopologyGate}}
	} else {
		p.Status.Phase = corev1.PodRunning
	}
	return p
}

const ns = "default"

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fixture is a Placer on a fake API whose caches are loaded by hand.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	kube  *kfake.Clientset
	jobs  informers.SharedInformerFactory
	pods  informers.SharedInformerFactory
	nodes informers.SharedInformerFactory
	p     *Placer
	clock *clocktesting.FakeClock
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	fx := &fixture{
		t:     t,
		ctx:   context.Background(),
		kube:  kfake.NewSimpleClientset(objs...),
		clock: clocktesting.NewFakeClock(t0),
	}
	fx.jobs = informers.NewSharedInformerFactory(fx.kube, 0)
	fx.pods, fx.nodes = Factories(fx.kube, 0)
	p, _, err := New(Config{
		Client:   fx.kube,
		Pods:     fx.pods.Core().V1().Pods(),
		Nodes:    fx.nodes.Core().V1().Nodes(),
		Jobs:     fx.jobs.Batch().V1().Jobs(),
		Clock:    fx.clock,
		Recorder: events.NewFakeRecorder(100),
	})
	if err != nil {
		t.Fatal(err)
	}
	fx.p = p
	return fx
}

// refresh loads Jobs, pods and nodes of the fake API into the placer's
// caches (Jobs in their cached form, pods and nodes trimmed as the
// informers' transforms do), like informers that caught up.
func (fx *fixture) refresh() {
	fx.t.Helper()
	replace := func(inf cache.SharedIndexInformer, items []interface{}) {
		if err := inf.GetIndexer().Replace(items, ""); err != nil {
			fx.t.Fatal(err)
		}
	}
	jobs, _ := fx.kube.BatchV1().Jobs("").List(fx.ctx, metav1.ListOptions{})
	var items []interface{}
	for i := range jobs.Items {
		items = append(items, jobcache.Compact(&jobs.Items[i]))
	}
	replace(fx.jobs.Batch().V1().Jobs().Informer(), items)
	pods, _ := fx.kube.CoreV1().Pods("").List(fx.ctx, metav1.ListOptions{})
	items = nil
	for i := range pods.Items {
		p, _ := trimPlacedPod(pods.Items[i].DeepCopy())
		items = append(items, p)
	}
	replace(fx.pods.Core().V1().Pods().Informer(), items)
	nodes, _ := fx.kube.CoreV1().Nodes().List(fx.ctx, metav1.ListOptions{})
	items = nil
	for i := range nodes.Items {
		n, _ := trimNode(nodes.Items[i].DeepCopy())
		items = append(items, n)
	}
	replace(fx.nodes.Core().V1().Nodes().Informer(), items)
}

func (fx *fixture) job(name string) *batchv1.Job {
	fx.t.Helper()
	j, err := fx.kube.BatchV1().Jobs(ns).Get(fx.ctx, name, metav1.GetOptions{})
	if err != nil {
		fx.t.Fatal(err)
	}
	return j
}

// setJob mutates a Job in the fake API.
func (fx *fixture) setJob(name string, mod func(*batchv1.Job)) {
	fx.t.Helper()
	j := fx.job(name)
	mod(j)
	if _, err := fx.kube.BatchV1().Jobs(ns).Update(fx.ctx, j, metav1.UpdateOptions{}); err != nil {
		fx.t.Fatal(err)
	}
}

func completeJob(j *batchv1.Job) {
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{
		Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0),
	})
}

// place refreshes the caches (unless stale) and runs one placement pass.
func (fx *fixture) place(refresh bool) time.Duration {
	fx.t.Helper()
	if refresh {
		fx.refresh()
	}
	fx.kube.ClearActions()
	d, err := fx.p.sync(fx.ctx, poolKey)
	if err != nil {
		fx.t.Fatalf("placement pass: %v", err)
	}
	fx.p.inflight.Wait()
	return d
}

func (fx *fixture) pod(name string) *corev1.Pod {
	fx.t.Helper()
	p, err := fx.kube.CoreV1().Pods(ns).Get(fx.ctx, name, metav1.GetOptions{})
	if err != nil {
		fx.t.Fatal(err)
	}
	return p
}

// writes lists the verbs and names of the write actions of the last pass.
func (fx *fixture) writes() []string {
	var out []string
	for _, a := range fx.kube.Actions() {
		switch a := a.(type) {
		case k8stesting.PatchAction:
			out = append(out, fmt.Sprintf("patch %s%s %s", a.GetResource().Resource, sub(a.GetSubresource()), a.GetName()))
		case k8stesting.DeleteAction:
			out = append(out, fmt.Sprintf("delete %s %s", a.GetResource().Resource, a.GetName()))
		}
	}
	sort.Strings(out)
	return out
}

func sub(s string) string {
	if s == "" {
		return ""
	}
	return "/" + s
}

func gateNames(p *corev1.Pod) []string {
	var out []string
	for _, g := range p.Spec.SchedulingGates {
		out = append(out, g.Name)
	}
	return out
}

func TestPlacementReleasesLeadersIntoDisjointDomains(t *testing.T) {
	a, b := exclusiveJob("a", 0, ""), exclusiveJob("b", 1, "")
	objs := append(poolNodes("p0", "p1", "p2", "p3"), a, b,
		placedPod(a, 0, "", 0), placedPod(a, 1, "", 0), placedPod(b, 0, "", 0), placedPod(b, 1, "", 0))
	fx := newFixture(t, objs...)
	fx.place(true)
	want := []string{"patch pods a-0", "patch pods b-0"}
	if got := fx.writes(); !reflect.DeepEqual(got, want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
	seen := sets.New[string]()
	for _, name := range []string{"a-0", "b-0"} {
		p := fx.pod(name)
		if !reflect.DeepEqual(gateNames(p), []string{"other"}) {
			t.Errorf("%s gates %v; only the topology gate goes", name, gateNames(p))
		}
		allowed := allowedDomains(p, poolKey)
		if len(allowed) != 2 {
			t.Errorf("%s may go to %v, want 2 of the 4 free pools", name, allowed)
		}
		for _, d := range allowed {
			if seen.Has(d) {
				t.Errorf("pool %s offered to two leaders", d)
			}
			seen.Insert(d)
		}
	}
	for _, name := range []string{"a-1", "b-1"} {
		if p := fx.pod(name); len(p.Spec.SchedulingGates) != 2 || p.Spec.Affinity != nil {
			t.Errorf("follower %s changed before its leader is placed: %+v", name, p.Spec)
		}
	}
	// The caches have not seen the writes yet: the next pass must not
	// release the leaders again.
	fx.place(false)
	if got := fx.writes(); len(got) != 0 {
		t.Fatalf("second pass wrote %v", got)
	}
}

func TestPlacementRecordsDomainAndPinsFollowers(t *testing.T) {
	a := exclusiveJob("a", 0, "")
	follower := placedPod(a, 1, "", 0)
	follower.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	objs := append(poolNodes("p0", "p1"), a, placedPod(a, 0, "node-p1-a", 0), follower, placedPod(a, 2, "", 0))
	fx := newFixture(t, objs...)
	fx.place(true)
	want := []string{"patch jobs a", "patch pods a-1", "patch pods a-2"}
	if got := fx.writes(); !reflect.DeepEqual(got, want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
	if d := fx.job("a").Annotations[jobset.TopologyDomainKey]; d != "p1" {
		t.Fatalf("recorded domain %q, want p1", d)
	}
	for name, sel := range map[string]map[string]string{
		"a-1": {"disk": "ssd", poolKey: "p1"},
		"a-2": {poolKey: "p1"},
	} {
		p := fx.pod(name)
		if !reflect.DeepEqual(p.Spec.NodeSelector, sel) || !reflect.DeepEqual(gateNames(p), []string{"other"}) {
			t.Errorf("%s: nodeSelector %v gates %v", name, p.Spec.NodeSelector, gateNames(p))
		}
	}
}

func TestPlacementWaitsForAFreeDomain(t *testing.T) {
	a, b, c := exclusiveJob("a", 0, "p0"), exclusiveJob("b", 1, ""), exclusiveJob("c", 2, "")
	objs := append(poolNodes("p0", "p1"), a, b, c,
		placedPod(a, 0, "node-p0-a", 0), placedPod(b, 0, "", 0), placedPod(c, 0, "", 0))
	fx := newFixture(t, objs...)
	fx.place(true)
	if got, want := fx.writes(), []string{"patch pods b-0"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
	if got := allowedDomains(fx.pod("b-0"), poolKey); !reflect.DeepEqual(got, []string{"p1"}) {
		t.Fatalf("b-0 may go to %v, want [p1]", got)
	}
	w, ok := fx.p.WaitFor(ns + "/js")
	if !ok || w.Reason != ReasonWaitingForDomain || !strings.Contains(w.Message, poolKey) {
		t.Fatalf("waiting state %+v %v", w, ok)
	}
	// Nothing changes while nothing frees a domain: no writes.
	fx.place(true)
	if got := fx.writes(); len(got) != 0 {
		t.Fatalf("idle pass wrote %v", got)
	}
	// a finishes: c gets p0.
	fx.setJob("a", completeJob)
	if err := fx.kube.CoreV1().Pods(ns).Delete(fx.ctx, "a-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fx.place(true)
	if got := allowedDomains(fx.pod("c-0"), poolKey); !reflect.DeepEqual(got, []string{"p0"}) {
		t.Fatalf("c-0 may go to %v, want [p0]", got)
	}
}

func TestPlacementTimeoutIsReported(t *testing.T) {
	a := exclusiveJob("a", 0, "")
	fx := newFixture(t, append(poolNodes("p0"), a, placedPod(a, 0, "", 0))...)
	fx.place(true)
	after := fx.place(true) // released, unbound
	if after <= 0 || after > DefaultTimeout {
		t.Fatalf("requeue after %v, want within the timeout", after)
	}
	if _, waiting := fx.p.WaitFor(ns + "/js"); waiting {
		t.Fatal("reported before the timeout")
	}
	fx.clock.Step(DefaultTimeout + time.Second)
	fx.place(true)
	w, ok := fx.p.WaitFor(ns + "/js")
	if !ok || w.Reason != ReasonTimeout {
		t.Fatalf("waiting state %+v %v", w, ok)
	}
	if got := fx.writes(); len(got) != 0 {
		t.Fatalf("a timed-out leader is not retried, but the pass wrote %v", got)
	}
}

func TestPlacementRepairsMisplacedPods(t *testing.T) {
	a := exclusiveJob("a", 0, "p0")
	objs := append(poolNodes("p0", "p1"), a, placedPod(a, 0, "node-p0-a", 0), placedPod(a, 1, "node-p1-b", 0))
	unlabelled := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}
	objs = append(objs, unlabelled, placedPod(a, 2, "bare", 0))
	fx := newFixture(t, objs...)
	fx.place(true)
	want := []string{"delete pods a-1", "patch pods/status a-1"}
	if got := fx.writes(); !reflect.DeepEqual(got, want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
	for _, act := range fx.kube.Actions() {
		if p, ok := act.(k8stesting.PatchAction); ok {
			var body struct {
				Status corev1.PodStatus `json:"status"`
			}
			if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
				t.Fatal(err)
			}
			c := body.Status.Conditions
			// Upstream's reason, spelled out: users match on it.
			if len(c) != 1 || c[0].Type != corev1.DisruptionTarget || c[0].Status != corev1.ConditionTrue || c[0].Reason != "ExclusivePlacementViolation" {
				t.Fatalf("status patch %s", p.GetPatch())
			}
		}
	}
}

func TestPlacementEvictsEqualPriorityDuplicate(t *testing.T) {
	// b took a's pool in a race: b leaves; a stays.
	a, b := exclusiveJob("a", 0, "p0"), exclusiveJob("b", 1, "")
	objs := append(poolNodes("p0", "p1"), a, b, placedPod(a, 0, "node-p0-a", 0), placedPod(b, 0, "node-p0-b", 0))
	fx := newFixture(t, objs...)
	fx.place(true)
	want := []string{"delete pods b-0", "patch pods/status b-0"}
	if got := fx.writes(); !reflect.DeepEqual(got, want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
}

func TestDuplicateHolders(t *testing.T) {
	job := func(name string, prio int32, recorded string) *placedJob {
		return &placedJob{uid: types.UID(name), name: name, priority: prio, recorded: recorded, domain: "d",
			live: []*corev1.Pod{{}}}
	}
	for _, tc := range []struct {
		name string
		jobs []*placedJob
		want []string
	}{
		{"alone", []*placedJob{job("a", 0, "d")}, nil},
		{"equal priority newcomer", []*placedJob{job("a", 0, "d"), job("b", 0, "")}, []string{"b"}},
		{"recorded one wins over an earlier unrecorded one", []*placedJob{job("a", 0, ""), job("b", 0, "d")}, []string{"a"}},
		{"higher priority newcomer may share", []*placedJob{job("a", 0, "d"), job("b", 5, "")}, nil},
		// As upstream's anti-affinity: only the same priority excludes.
		{"lower priority newcomer may share", []*placedJob{job("a", 5, "d"), job("b", 0, "")}, nil},
		{"same priority among others", []*placedJob{job("a", 5, "d"), job("b", 0, "d"), job("c", 5, "")}, []string{"c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for uid := range duplicateHolders(tc.jobs) {
				got = append(got, string(uid))
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("duplicates %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCandidateDomains(t *testing.T) {
	all := sets.New("p0", "p1", "p2", "p3")
	holders := []holder{{"p0", 10}, {"p1", 0}}
	reserved := sets.New("p3")
	for _, tc := range []struct {
		prio int32
		want []string
	}{
		{0, []string{"p2", "p0"}},        // a higher priority holder does not exclude (upstream)
		{5, []string{"p2", "p0", "p1"}},  // other priorities only, free ones first
		{10, []string{"p2", "p1"}},       // equal priority never shares
		{20, []string{"p2", "p0", "p1"}}, // higher than both
	} {
		if got := candidateDomains(all, holders, reserved, tc.prio); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("priority %d: candidates %v, want %v", tc.prio, got, tc.want)
		}
	}
}

func TestRestrictToDomainsKeepsExistingTerms(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpExists}}},
			{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n"}}}},
		}},
	}}}}
	aff := restrictToDomains(pod, poolKey, []string{"p1", "p2"})
	terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 2 {
		t.Fatalf("terms %+v", terms)
	}
	for i, term := range terms {
		last := term.MatchExpressions[len(term.MatchExpressions)-1]
		if last.Key != poolKey || last.Operator != corev1.NodeSelectorOpIn || !reflect.DeepEqual(last.Values, []string{"p1", "p2"}) {
			t.Errorf("term %d: %+v", i, term)
		}
	}
	if len(pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions) != 1 {
		t.Error("the pod's own affinity was modified")
	}
	if got := allowedDomains(&corev1.Pod{Spec: corev1.PodSpec{Affinity: aff}}, poolKey); !reflect.DeepEqual(got, []string{"p1", "p2", "p1", "p2"}) {
		t.Errorf("allowedDomains %v", got)
	}
}

func TestPinOpsEscapesTheKey(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7"}, Spec: corev1.PodSpec{
		NodeSelector:    map[string]string{"a": "b"},
		SchedulingGates: []corev1.PodSchedulingGate{{Name: jobset.TopologyGate}},
	}}
	data, err := json.Marshal(pinOps(pod, "x.io/rack~1", "r1"))
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"op":"replace","path":"/metadata/resourceVersion","value":"7"},{"op":"remove","path":"/spec/schedulingGates"},{"op":"add","path":"/spec/nodeSelector/x.io~1rack~01","value":"r1"}]`
	if string(data) != want {
		t.Fatalf("ops\n%s\nwant\n%s", data, want)
	}
}

func TestSuspendedJobForgetsItsDomain(t *testing.T) {
	a := exclusiveJob("a", 0, "p0")
	a.Spec.Suspend = ptr.To(true)
	b := exclusiveJob("b", 0, "p1") // running: keeps its domain
	fx := newFixture(t, a, b)
	fx.refresh()
	fx.p.jobChanged(a)
	fx.p.jobChanged(b)
	if n := fx.p.queue.Len(); n != 2 {
		t.Fatalf("queued %d keys, want the topology key and the suspended Job", n)
	}
	for fx.p.queue.Len() > 0 {
		fx.p.processNext(fx.ctx)
	}
	if _, has := fx.job("a").Annotations[jobset.TopologyDomainKey]; has {
		t.Fatalf("suspended Job keeps its domain: %v", fx.job("a").Annotations)
	}
	if d := fx.job("b").Annotations[jobset.TopologyDomainKey]; d != "p1" {
		t.Fatalf("running Job lost its domain: %q", d)
	}
}

func TestPlacementRetriesAFailedWrite(t *testing.T) {
	a := exclusiveJob("a", 0, "")
	fx := newFixture(t, append(poolNodes("p0"), a, placedPod(a, 0, "", 0))...)
	failures := 1
	fx.kube.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failures > 0 {
			failures--
			return true, nil, fmt.Errorf("injected failure")
		}
		return false, nil, nil
	})
	fx.place(true)
	if p := fx.pod("a-0"); !gated(p) {
		t.Fatal("the failed write changed the pod")
	}
	if n := fx.p.queue.NumRequeues(poolKey); n != 1 {
		t.Fatalf("key requeued %d times with backoff, want 1", n)
	}
	// The expectation of the failed write is gone: the next pass, on the
	// same cache, releases the leader again.
	fx.place(false)
	if got, want := fx.writes(), []string{"patch pods a-0"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("retry wrote %v, want %v", got, want)
	}
	if p := fx.pod("a-0"); gated(p) {
		t.Fatal("the retry did not release the leader")
	}
}

func TestPlacementPinsFollowersOfASingleCandidateAtOnce(t *testing.T) {
	// Four Jobs want a pool, four pools exist: two Jobs have pods, two do
	// not yet. Each leader gets one pool, and its followers go with it in
	// the same pass.
	a, b, c, d := exclusiveJob("a", 0, ""), exclusiveJob("b", 1, ""), exclusiveJob("c", 2, ""), exclusiveJob("d", 3, "")
	objs := append(poolNodes("p0", "p1", "p2", "p3"), a, b, c, d,
		placedPod(a, 0, "", 0), placedPod(a, 1, "", 0), placedPod(b, 0, "", 0), placedPod(b, 1, "", 0))
	fx := newFixture(t, objs...)
	fx.place(true)
	want := []string{"patch pods a-0", "patch pods a-1", "patch pods b-0", "patch pods b-1"}
	if got := fx.writes(); !reflect.DeepEqual(got, want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
	for _, job := range []string{"a", "b"} {
		allowed := allowedDomains(fx.pod(job+"-0"), poolKey)
		follower := fx.pod(job + "-1")
		if len(allowed) != 1 || follower.Spec.NodeSelector[poolKey] != allowed[0] || gated(follower) {
			t.Errorf("Job %s: leader may go to %v, follower nodeSelector %v gates %v", job, allowed, follower.Spec.NodeSelector, gateNames(follower))
		}
	}
	if allowedDomains(fx.pod("a-0"), poolKey)[0] == allowedDomains(fx.pod("b-0"), poolKey)[0] {
		t.Fatal("both leaders got the same pool")
	}
}
