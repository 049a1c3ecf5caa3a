package controller

import (
	"context"
	"sort"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	jsfake "github.com/nativejobset/jobset/pkg/generated/clientset/versioned/fake"
)

const ns = "default"

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// rjob is a replicatedJob with an Indexed template of parallelism and
// completions 2.
func rjob(name string, replicas int32) jobset.ReplicatedJob {
	return jobset.ReplicatedJob{
		Name:     name,
		Replicas: ptr.To(replicas),
		Template: batchv1.JobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"tmpl": "label"}, Annotations: map[string]string{"tmpl": "annotation"}},
			Spec: batchv1.JobSpec{
				Parallelism: ptr.To[int32](2),
				Completions: ptr.To[int32](2),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"pod": "label"}},
					Spec: corev1.PodSpec{
						Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
					},
				},
			},
		},
	}
}

// newJobSet returns a defaulted JobSet with a leader (1 Job) and workers
// (2 Jobs).
func newJobSet(name string, mods ...func(*jobset.JobSet)) *jobset.JobSet {
	js := &jobset.JobSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: jobset.SchemeGroupVersion.String(), Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Generation: 1},
		Spec: jobset.JobSetSpec{
			ReplicatedJobs: []jobset.ReplicatedJob{rjob("leader", 1), rjob("workers", 2)},
		},
	}
	for _, m := range mods {
		m(js)
	}
	jobset.SetObjectDefaults_JobSet(js)
	return js
}

type fixture struct {
	t     testing.TB
	ctx   context.Context
	kube  *kfake.Clientset
	jsc   *jsfake.Clientset
	f     Factories
	c     *Controller
	clock *clocktesting.FakeClock
	rec   *events.FakeRecorder
}

func newFixture(t testing.TB, objs ...runtime.Object) *fixture {
	t.Helper()
	var kubeObjs, jsObjs []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*jobset.JobSet); ok {
			jsObjs = append(jsObjs, o)
		} else {
			kubeObjs = append(kubeObjs, o)
		}
	}
	fx := &fixture{
		t:     t,
		ctx:   context.Background(),
		kube:  kfake.NewSimpleClientset(kubeObjs...),
		jsc:   jsfake.NewSimpleClientset(jsObjs...),
		clock: clocktesting.NewFakeClock(t0),
		rec:   events.NewFakeRecorder(1000),
	}
	fx.f = NewFactories(fx.kube, fx.jsc, 0)
	c, err := New(fx.kube, fx.jsc, fx.f, Options{Recorder: fx.rec, Clock: fx.clock, Parallelism: 4})
	if err != nil {
		t.Fatal(err)
	}
	fx.c = c
	// Every JobSet's sync keeps what it built, and checkBuiltJobs checks it.
	c.built.minJobs, c.built.pinned = 0, map[string]*jobsBuilt{}
	return fx
}

// refresh loads the fake clients' objects into the informer caches, like
// informers that caught up.
func (fx *fixture) refresh() {
	fx.t.Helper()
	replace := func(inf cache.SharedIndexInformer, items []interface{}) {
		if err := inf.GetIndexer().Replace(items, ""); err != nil {
			fx.t.Fatal(err)
		}
	}
	jsl, err := fx.jsc.JobsetV1alpha2().JobSets("").List(fx.ctx, metav1.ListOptions{})
	if err != nil {
		fx.t.Fatal(err)
	}
	var items []interface{}
	for i := range jsl.Items {
		items = append(items, fx.trimmed(&jsl.Items[i]))
	}
	replace(fx.f.JobSet.Jobset().V1alpha2().JobSets().Informer(), items)

	jl, _ := fx.kube.BatchV1().Jobs("").List(fx.ctx, metav1.ListOptions{})
	items = nil
	for i := range jl.Items {
		items = append(items, fx.trimmed(&jl.Items[i]))
	}
	replace(fx.f.Kube.Batch().V1().Jobs().Informer(), items)

	sl, _ := fx.kube.CoreV1().Services("").List(fx.ctx, metav1.ListOptions{})
	items = nil
	for i := range sl.Items {
		items = append(items, fx.trimmed(&sl.Items[i]))
		observeCreated(fx.c.exp.services, &sl.Items[i]) // as the informer's handler does
	}
	replace(fx.f.Kube.Core().V1().Services().Informer(), items)

	pl, _ := fx.kube.CoreV1().PersistentVolumeClaims("").List(fx.ctx, metav1.ListOptions{})
	items = nil
	for i := range pl.Items {
		items = append(items, &pl.Items[i])
	}
	replace(fx.f.Kube.Core().V1().PersistentVolumeClaims().Informer(), items)

	rl, _ := fx.kube.AppsV1().ControllerRevisions("").List(fx.ctx, metav1.ListOptions{})
	items = nil
	for i := range rl.Items {
		items = append(items, fx.trimmed(&rl.Items[i]))
	}
	replace(fx.f.Kube.Apps().V1().ControllerRevisions().Informer(), items)

	// The failed-pod informer's field selector, which the fake clients do
	// not apply.
	podl, _ := fx.kube.CoreV1().Pods("").List(fx.ctx, metav1.ListOptions{})
	items = nil
	for i := range podl.Items {
		if podl.Items[i].Status.Phase == corev1.PodFailed && podl.Items[i].Labels[jobset.JobSetNameKey] != "" {
			trimmed, err := trimFailedPod(&podl.Items[i])
			if err != nil {
				fx.t.Fatal(err)
			}
			items = append(items, trimmed)
			p := &podl.Items[i] // as the informer's handler does
			fx.c.waits.podFailed(p.Namespace+"/"+p.Labels[jobset.JobSetNameKey], p.UID)
		}
	}
	replace(fx.f.FailedPods.Core().V1().Pods().Informer(), items)
}

// trimmed is obj as the informers' transform caches it: a sync must not
// read what the cache does not hold.
func (fx *fixture) trimmed(obj interface{}) interface{} {
	fx.t.Helper()
	out, err := trimObject(obj)
	if err != nil {
		fx.t.Fatal(err)
	}
	return out
}

// sync refreshes the caches and syncs one JobSet.
func (fx *fixture) sync(name string) time.Duration {
	fx.t.Helper()
	fx.refresh()
	d, err := fx.c.sync(fx.ctx, ns+"/"+name)
	if err != nil {
		fx.t.Fatalf("sync %s: %v", name, err)
	}
	fx.checkBuiltJobs(name)
	return d
}

// checkBuiltJobs fails when the sync changed a Job it read: the Jobs
// built from the cache are shared with the syncs after it (builtJobs).
func (fx *fixture) checkBuiltJobs(name string) {
	fx.t.Helper()
	jb := fx.c.built.pinned[ns+"/"+name]
	if jb == nil {
		return
	}
	for n, b := range jb.byName {
		if want := b.from.Job(); !apiequality.Semantic.DeepEqual(b.job, want) {
			fx.t.Fatalf("the sync of %s changed the Job %s it read from the cache:\n%+v\nwas\n%+v", name, n, b.job, want)
		}
	}
}

func (fx *fixture) jobSet(name string) *jobset.JobSet {
	fx.t.Helper()
	js, err := fx.jsc.JobsetV1alpha2().JobSets(ns).Get(fx.ctx, name, metav1.GetOptions{})
	if err != nil {
		fx.t.Fatal(err)
	}
	return js
}

func (fx *fixture) updateJobSet(name string, mod func(*jobset.JobSet)) {
	fx.t.Helper()
	js := fx.jobSet(name)
	mod(js)
	if _, err := fx.jsc.JobsetV1alpha2().JobSets(ns).Update(fx.ctx, js, metav1.UpdateOptions{}); err != nil {
		fx.t.Fatal(err)
	}
}

func (fx *fixture) jobs() []batchv1.Job {
	fx.t.Helper()
	l, err := fx.kube.BatchV1().Jobs(ns).List(fx.ctx, metav1.ListOptions{})
	if err != nil {
		fx.t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

func (fx *fixture) job(name string) *batchv1.Job {
	fx.t.Helper()
	j, err := fx.kube.BatchV1().Jobs(ns).Get(fx.ctx, name, metav1.GetOptions{})
	if err != nil {
		fx.t.Fatal(err)
	}
	return j
}

func (fx *fixture) jobNames() []string {
	var out []string
	for _, j := range fx.jobs() {
		out = append(out, j.Name)
	}
	return out
}

// setJob mutates a Job in the fake API (spec and status together).
func (fx *fixture) setJob(name string, mod func(*batchv1.Job)) {
	fx.t.Helper()
	j := fx.job(name)
	mod(j)
	if _, err := fx.kube.BatchV1().Jobs(ns).Update(fx.ctx, j, metav1.UpdateOptions{}); err != nil {
		fx.t.Fatal(err)
	}
}

func failJob(reason, message string, at time.Time) func(*batchv1.Job) {
	return func(j *batchv1.Job) {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{
			Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason, Message: message,
			LastTransitionTime: metav1.NewTime(at),
		})
	}
}

func completeJob(j *batchv1.Job) {
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{
		Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0),
	})
	j.Status.Succeeded = 2
}

func readyJob(j *batchv1.Job) {
	j.Status.Ready = ptr.To[int32](2)
	j.Status.Active = 2
}

// events drains the recorded events.
func (fx *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-fx.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func cond(js *jobset.JobSet, t string) *metav1.Condition {
	return findCondition(js.Status.Conditions, t)
}

func wantCond(t *testing.T, js *jobset.JobSet, typ string, status metav1.ConditionStatus, reason, message string) {
	t.Helper()
	c := cond(js, typ)
	if c == nil {
		t.Fatalf("condition %s missing; conditions: %+v", typ, js.Status.Conditions)
	}
	if c.Status != status || c.Reason != reason || (message != "" && c.Message != message) {
		t.Fatalf("condition %s = %s/%s/%q, want %s/%s/%q", typ, c.Status, c.Reason, c.Message, status, reason, message)
	}
}
