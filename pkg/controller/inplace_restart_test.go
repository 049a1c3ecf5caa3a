package controller

import (
	"math"
	"strconv"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// inPlace makes a JobSet restart in place with the given budget.
func inPlace(maxRestarts int32) func(*jobset.JobSet) {
	return func(js *jobset.JobSet) {
		js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: maxRestarts, RestartStrategy: jobset.InPlaceRestart}
		for i := range js.Spec.ReplicatedJobs {
			spec := &js.Spec.ReplicatedJobs[i].Template.Spec
			spec.BackoffLimit = ptr.To[int32](math.MaxInt32)
			spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
		}
	}
}

// ipPod is a pod of js's current attempt; attempt < 0 means no annotation.
func ipPod(js *jobset.JobSet, name string, attempt int, restarts int32) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: js.Namespace, UID: types.UID("uid-" + name), ResourceVersion: "1",
			Labels: map[string]string{
				jobset.JobSetNameKey: js.Name, jobset.JobSetUIDKey: string(js.UID),
				jobset.RestartsKey: strconv.Itoa(int(js.Status.Restarts)), InPlaceRestartLabel: "true",
			},
		},
		Status: corev1.PodStatus{
			Phase:             corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", RestartCount: restarts}},
		},
	}
	if attempt >= 0 {
		p.Annotations = map[string]string{jobset.InPlaceRestartAttemptKey: strconv.Itoa(attempt)}
	}
	return p
}

// pods returns one pod per expected pod (6 for newJobSet) with the attempts
// given, padded with the last one.
func ipPods(js *jobset.JobSet, attempts ...int) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; i < expectedInPlacePods(js); i++ {
		a := attempts[min(i, len(attempts)-1)]
		out = append(out, ipPod(js, "p"+strconv.Itoa(i), a, 0))
	}
	return out
}

func TestDecideInPlace(t *testing.T) {
	base := newJobSet("js", inPlace(3))
	if got := expectedInPlacePods(base); got != 6 {
		t.Fatalf("expected pods = %d, want 6", got)
	}
	withStatus := func(prev, cur *int32, restarts, counted int32) *jobset.JobSet {
		js := base.DeepCopy()
		js.Status.PreviousInPlaceRestartAttempt, js.Status.CurrentInPlaceRestartAttempt = prev, cur
		js.Status.Restarts, js.Status.RestartsCountTowardsMax = restarts, counted
		return js
	}
	cases := []struct {
		name string
		js   *jobset.JobSet
		pods func(js *jobset.JobSet) []*corev1.Pod
		want inPlaceDecision
	}{
		{
			name: "first start, agents still reporting",
			js:   withStatus(nil, nil, 0, 0),
			pods: func(js *jobset.JobSet) []*corev1.Pod {
				p := ipPods(js, 0)
				delete(p[5].Annotations, jobset.InPlaceRestartAttemptKey)
				return p
			},
		},
		{
			name: "first start, every pod at attempt 0 lifts the barrier",
			js:   withStatus(nil, nil, 0, 0),
			pods: func(js *jobset.JobSet) []*corev1.Pod { return ipPods(js, 0) },
			want: inPlaceDecision{current: ptr.To[int32](0)},
		},
		{
			name: "barrier already lifted: nothing to write",
			js:   withStatus(nil, ptr.To[int32](0), 0, 0),
			pods: func(js *jobset.JobSet) []*corev1.Pod { return ipPods(js, 0) },
		},
		{
			name: "a pod failed and came back one attempt ahead: the others restart",
			js:   withStatus(nil, ptr.To[int32](0), 0, 0),
			pods: func(js *jobset.JobSet) []*corev1.Pod { return ipPods(js, 1, 0) },
			want: inPlaceDecision{previous: ptr.To[int32](0)},
		},
		{
			name: "restart under way: previous already written",
			js:   withStatus(ptr.To[int32](0), ptr.To[int32](0), 0, 0),
			pods: func(js *jobset.JobSet) []*corev1.Pod { return ipPods(js, 1, 1, 1, 0) },
		},
		{
			name: "restart under way, a pod not reporting: the barrier holds",
			js:   withStatus(ptr.To[int32](0), ptr.To[int32](0), 0, 0),
			pods: func(js *jobset.JobSet) []*corev1.Pod { return ipPods(js, 1)[:5] },
		},
		{
			name: "every pod at the new attempt: the barrier lifts",
			js:   withStatus(ptr.To[int32](0), ptr.To[int32](0), 0, 0),
			pods: func(js *jobset.JobSet) []*corev1.Pod { return ipPods(js, 1) },
			want: inPlaceDecision{current: ptr.To[int32](1)},
		},
		{
			name: "previous never goes back",
			js:   withStatus(ptr.To[int32](2), ptr.To[int32](2), 0, 0),
			pods: func(js *jobset.JobSet) []*corev1.Pod { return ipPods(js, 2, 1) },
		},
		{
			name: "an attempt beyond maxRestarts fails the JobSet",
			js:   withStatus(ptr.To[int32](2), ptr.To[int32](3), 0, 0),
			pods: func(js *jobset.JobSet) []*corev1.Pod { return ipPods(js, 4, 3) },
			want: inPlaceDecision{fail: true},
		},
		{
			name: "Job recreations that count add to the attempt",
			js:   withStatus(ptr.To[int32](1), ptr.To[int32](2), 2, 1),
			pods: func(js *jobset.JobSet) []*corev1.Pod { return ipPods(js, 3, 2) },
			want: inPlaceDecision{fail: true},
		},
		{
			name: "Job recreations that do not count do not",
			js:   withStatus(ptr.To[int32](1), ptr.To[int32](2), 2, 0),
			pods: func(js *jobset.JobSet) []*corev1.Pod { return ipPods(js, 3, 2) },
			want: inPlaceDecision{previous: ptr.To[int32](2)},
		},
		{
			name: "a container restarted more than maxRestarts fails the JobSet",
			js:   withStatus(nil, ptr.To[int32](0), 0, 0),
			pods: func(js *jobset.JobSet) []*corev1.Pod {
				p := ipPods(js, 0)
				p[2].Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "agent", RestartCount: 4}}
				return p
			},
			want: inPlaceDecision{fail: true},
		},
		{
			name: "a pod being deleted only leaves",
			js:   withStatus(nil, ptr.To[int32](0), 0, 0),
			pods: func(js *jobset.JobSet) []*corev1.Pod {
				p := ipPods(js, 0)
				p[3].DeletionTimestamp = &metav1.Time{Time: t0}
				return p
			},
		},
		{
			name: "a pod being deleted that ends failed is not lost",
			js:   withStatus(nil, ptr.To[int32](0), 0, 0),
			pods: func(js *jobset.JobSet) []*corev1.Pod {
				p := ipPods(js, 0)
				p[3].DeletionTimestamp = &metav1.Time{Time: t0}
				p[3].Status.Phase = corev1.PodFailed
				return p
			},
		},
		{
			name: "pods of scaled-down Jobs do not hold the barrier",
			js:   withStatus(ptr.To[int32](0), ptr.To[int32](0), 0, 0),
			pods: func(js *jobset.JobSet) []*corev1.Pod {
				p := ipPods(js, 1)
				for _, name := range []string{"gone-0", "gone-1"} {
					leaving := ipPod(js, name, 0, 0)
					leaving.DeletionTimestamp = &metav1.Time{Time: t0}
					p = append(p, leaving)
				}
				return p
			},
			want: inPlaceDecision{current: ptr.To[int32](1)},
		},
		{
			name: "a failed pod falls back to recreating the Jobs",
			js:   withStatus(nil, ptr.To[int32](1), 0, 0),
			pods: func(js *jobset.JobSet) []*corev1.Pod {
				p := ipPods(js, 1)
				p[0].Status.Phase = corev1.PodFailed
				return p
			},
			want: inPlaceDecision{recreate: true, lostPod: "p0"},
		},
		{
			name: "a lost pod with the budget used up fails the JobSet",
			js:   withStatus(nil, ptr.To[int32](3), 0, 0),
			pods: func(js *jobset.JobSet) []*corev1.Pod {
				p := ipPods(js, 3)
				p[0].Status.Phase = corev1.PodFailed
				return p
			},
			want: inPlaceDecision{fail: true},
		},
		{
			name: "a failed pod with maxRestarts used up by Job recreations fails the JobSet",
			js:   withStatus(nil, ptr.To[int32](1), 2, 2),
			pods: func(js *jobset.JobSet) []*corev1.Pod {
				p := ipPods(js, 1)
				p[0].Status.Phase = corev1.PodFailed
				return p
			},
			want: inPlaceDecision{fail: true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := decideInPlace(tc.js, tc.pods(tc.js))
			if got.fail != tc.want.fail || got.recreate != tc.want.recreate || got.lostPod != tc.want.lostPod ||
				!ptrEq(got.current, tc.want.current) || !ptrEq(got.previous, tc.want.previous) || got.badAttempt != nil {
				t.Fatalf("got %+v (current %v, previous %v), want %+v", got, deref(got.current), deref(got.previous), tc.want)
			}
		})
	}
}

func TestDecideInPlaceBadAnnotation(t *testing.T) {
	js := newJobSet("js", inPlace(3))
	for _, v := range []string{"x", "-1", "99999999999"} {
		pods := ipPods(js, 0)
		pods[1].Annotations[jobset.InPlaceRestartAttemptKey] = v
		if d := decideInPlace(js, pods); d.badAttempt == nil {
			t.Errorf("annotation %q: want an error, got %+v", v, d)
		}
	}
}

func ptrEq(a, b *int32) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func deref(p *int32) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestTrimInPlacePod(t *testing.T) {
	js := newJobSet("js", inPlace(3))
	p := ipPod(js, "p", 2, 1)
	p.Annotations["other"] = "big"
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x"}}
	p.Spec.Containers = []corev1.Container{{Name: "c", Image: "i"}}
	p.Status.ContainerStatuses[0].Image = "i"
	obj, _ := trimInPlacePod(p)
	got := obj.(*corev1.Pod)
	if len(got.Annotations) != 1 || got.Annotations[jobset.InPlaceRestartAttemptKey] != "2" {
		t.Errorf("annotations = %v", got.Annotations)
	}
	if got.ManagedFields != nil || got.Spec.Containers != nil || got.Status.ContainerStatuses[0].Image != "" {
		t.Errorf("not trimmed: %+v", got)
	}
	if got.Status.ContainerStatuses[0].RestartCount != 1 || got.Status.Phase != corev1.PodRunning {
		t.Errorf("lost what it reads: %+v", got.Status)
	}
}

// refreshPods loads pods into the in-place pod cache.
func (fx *fixture) refreshPods(pods ...*corev1.Pod) {
	fx.t.Helper()
	var items []interface{}
	for _, p := range pods {
		items = append(items, p)
	}
	if err := fx.f.InPlacePods.Core().V1().Pods().Informer().GetIndexer().Replace(items, ""); err != nil {
		fx.t.Fatal(err)
	}
}

// syncWithPods refreshes every cache, puts pods in the pod cache and syncs.
func (fx *fixture) syncWithPods(name string, pods func(js *jobset.JobSet) []*corev1.Pod) *jobset.JobSet {
	fx.t.Helper()
	fx.refresh()
	fx.refreshPods(pods(fx.jobSet(name))...)
	if _, err := fx.c.sync(fx.ctx, ns+"/"+name); err != nil {
		fx.t.Fatalf("sync: %v", err)
	}
	return fx.jobSet(name)
}

func TestSyncInPlaceRestart(t *testing.T) {
	fx := newFixture(t, newJobSet("js", inPlace(2)))
	fx.sync("js") // creates the Jobs
	for _, j := range fx.jobs() {
		if j.Spec.Template.Labels[InPlaceRestartLabel] != "true" {
			t.Fatalf("Job %s: pod template lacks %s: %v", j.Name, InPlaceRestartLabel, j.Spec.Template.Labels)
		}
	}
	for _, j := range fx.jobs() {
		fx.setJob(j.Name, readyJob)
	}

	// Every agent reports attempt 0: the barrier lifts.
	js := fx.syncWithPods("js", func(js *jobset.JobSet) []*corev1.Pod { return ipPods(js, 0) })
	if deref(js.Status.CurrentInPlaceRestartAttempt) != int32(0) || js.Status.PreviousInPlaceRestartAttempt != nil {
		t.Fatalf("after start: current %v previous %v", deref(js.Status.CurrentInPlaceRestartAttempt), deref(js.Status.PreviousInPlaceRestartAttempt))
	}
	attempts := ptr.Deref(js.Status.ExecutionAttempts, 0)

	// One pod fails and comes back at attempt 1: everyone restarts, once.
	for i := 0; i < 2; i++ {
		js = fx.syncWithPods("js", func(js *jobset.JobSet) []*corev1.Pod { return ipPods(js, 1, 0) })
	}
	if deref(js.Status.PreviousInPlaceRestartAttempt) != int32(0) || deref(js.Status.CurrentInPlaceRestartAttempt) != int32(0) {
		t.Fatalf("during restart: current %v previous %v", deref(js.Status.CurrentInPlaceRestartAttempt), deref(js.Status.PreviousInPlaceRestartAttempt))
	}
	// An in-place restart is not an execution attempt: the pods, and the
	// execution-attempt annotation on them, stay.
	if js.Status.ExecutionAttempts == nil || *js.Status.ExecutionAttempts != attempts || js.Status.Restarts != 0 {
		t.Fatalf("executionAttempts %v (want %d), restarts %d (want 0)", deref(js.Status.ExecutionAttempts), attempts, js.Status.Restarts)
	}
	jobsBefore := fx.jobNames()

	// All at attempt 1: the barrier lifts; no Job was recreated.
	js = fx.syncWithPods("js", func(js *jobset.JobSet) []*corev1.Pod { return ipPods(js, 1) })
	if deref(js.Status.CurrentInPlaceRestartAttempt) != int32(1) {
		t.Fatalf("current = %v, want 1", deref(js.Status.CurrentInPlaceRestartAttempt))
	}
	for _, j := range fx.jobs() {
		if j.Labels[jobset.RestartsKey] != "0" {
			t.Fatalf("Job %s was recreated (restart-attempt %s)", j.Name, j.Labels[jobset.RestartsKey])
		}
	}
	if got := fx.jobNames(); len(got) != len(jobsBefore) {
		t.Fatalf("Jobs changed: %v -> %v", jobsBefore, got)
	}

	// Attempts 2 then 3: the third restart exceeds maxRestarts 2.
	js = fx.syncWithPods("js", func(js *jobset.JobSet) []*corev1.Pod { return ipPods(js, 2, 1) })
	js = fx.syncWithPods("js", func(js *jobset.JobSet) []*corev1.Pod { return ipPods(js, 2) })
	if finished(js) {
		t.Fatalf("failed too early: %+v", js.Status.Conditions)
	}
	js = fx.syncWithPods("js", func(js *jobset.JobSet) []*corev1.Pod { return ipPods(js, 3, 2) })
	wantCond(t, js, string(jobset.JobSetFailed), metav1.ConditionTrue, reasonReachedMaxRestarts, "")
}

func TestSyncInPlaceLostPodRecreates(t *testing.T) {
	fx := newFixture(t, newJobSet("js", inPlace(2)))
	fx.sync("js")
	fx.syncWithPods("js", func(js *jobset.JobSet) []*corev1.Pod { return ipPods(js, 0) })
	js := fx.syncWithPods("js", func(js *jobset.JobSet) []*corev1.Pod {
		p := ipPods(js, 0)
		p[4].Status.Phase = corev1.PodFailed
		return p
	})
	if js.Status.Restarts != 1 || js.Status.RestartsCountTowardsMax != 1 {
		t.Fatalf("restarts %d/%d, want 1/1", js.Status.Restarts, js.Status.RestartsCountTowardsMax)
	}
	wantCond(t, js, conditionRestartingJobSet, metav1.ConditionTrue, reasonInPlacePodLost, "")
	// The Jobs of attempt 0 go; their successors carry attempt 1.
	fx.sync("js")
	fx.sync("js")
	for _, j := range fx.jobs() {
		if j.DeletionTimestamp == nil && j.Labels[jobset.RestartsKey] != "1" {
			t.Fatalf("Job %s still of attempt %s", j.Name, j.Labels[jobset.RestartsKey])
		}
	}
}

// The annotation takes the agents' barrier away, not the tracking: the
// attempts stay current and a crash-looping container still ends the JobSet.
func TestSyncInPlaceDisabled(t *testing.T) {
	disabled := func(js *jobset.JobSet) { js.Annotations = map[string]string{jobset.DisableInPlaceRestartKey: ""} }
	fx := newFixture(t, newJobSet("js", inPlace(2), disabled))
	fx.sync("js")
	for _, j := range fx.jobs() {
		if j.Spec.Template.Labels[InPlaceRestartLabel] != "true" {
			t.Fatalf("Job %s: pod template lacks %s", j.Name, InPlaceRestartLabel)
		}
	}
	js := fx.syncWithPods("js", func(js *jobset.JobSet) []*corev1.Pod { return ipPods(js, 0) })
	if deref(js.Status.CurrentInPlaceRestartAttempt) != int32(0) {
		t.Fatalf("current %v, want 0", deref(js.Status.CurrentInPlaceRestartAttempt))
	}
	js = fx.syncWithPods("js", func(js *jobset.JobSet) []*corev1.Pod {
		p := ipPods(js, 0)
		p[1].Status.ContainerStatuses[0].RestartCount = 3
		return p
	})
	wantCond(t, js, string(jobset.JobSetFailed), metav1.ConditionTrue, reasonReachedMaxRestarts, "")
	recreate := newJobSet("rc")
	if inPlaceEnabled(recreate) {
		t.Fatal("Recreate JobSet reported in place")
	}
}
