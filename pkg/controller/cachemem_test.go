package controller

import (
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	jsfake "github.com/nativejobset/jobset/pkg/generated/clientset/versioned/fake"
)

// The memory the controller's caches hold per object. BenchmarkCachedBytes
// fills the informers the controller really builds (indexes included)
// with the objects of the memory benchmark (test/bench/controller,
// BenchmarkMemory): running JobSets of one replicatedJob of four one-pod
// Jobs, with the Jobs, Service and revision the controller's own code
// builds, shaped as the API server returns them and decoded from protobuf
// (every string an allocation of its own, as in an informer), then
// transformed as the informers do. It reports the live heap each object
// adds, after a garbage collection:
//
//	go test -tags fieldsv1string -run '^$' -bench CachedBytes -benchtime 1x ./pkg/controller/

// cachedObjects is how many objects of each kind are measured.
const cachedObjects = 10000

// memJobSet is the memory benchmark's JobSet, defaulted.
func memJobSet(name string) *jobset.JobSet {
	js := &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Generation: 1},
		Spec: jobset.JobSetSpec{ReplicatedJobs: []jobset.ReplicatedJob{{
			Name: "w", Replicas: ptr.To[int32](4),
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
			}}}},
		}}},
	}
	jobset.SetObjectDefaults_JobSet(js)
	return js
}

// serverMeta sets the metadata the API server gives object i.
func serverMeta(m *metav1.ObjectMeta, i int) {
	m.UID = types.UID(fmt.Sprintf("%08x-1c2d-4e5f-8a9b-%012x", i, i))
	m.ResourceVersion = strconv.Itoa(4000000 + i)
	m.Generation = 1
	m.CreationTimestamp = metav1.NewTime(t0)
}

// runningJob gives a Job what the API server's defaults and
// kube-controller-manager put on a Job of one running, ready pod.
func runningJob(j *batchv1.Job) {
	uid := string(j.UID)
	j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": uid}}
	for k, v := range map[string]string{
		"batch.kubernetes.io/controller-uid": uid, "controller-uid": uid,
		"batch.kubernetes.io/job-name": j.Name, "job-name": j.Name,
	} {
		j.Spec.Template.Labels[k] = v
	}
	j.Spec.Parallelism, j.Spec.Completions, j.Spec.BackoffLimit = ptr.To[int32](1), ptr.To[int32](1), ptr.To[int32](6)
	if j.Spec.CompletionMode == nil {
		j.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	}
	j.Spec.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed)
	j.Spec.ManualSelector = ptr.To(false)
	start := metav1.NewTime(t0)
	j.Status = batchv1.JobStatus{
		Active: 1, Ready: ptr.To[int32](1), Terminating: ptr.To[int32](0), StartTime: &start,
		UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{},
	}
}

// headlessServiceAsStored adds the fields the API server sets on a
// headless Service.
func headlessServiceAsStored(s *corev1.Service) {
	s.Spec.ClusterIPs = []string{corev1.ClusterIPNone}
	s.Spec.Type = corev1.ServiceTypeClusterIP
	s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
	s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
}

// runningMemJobSet runs one memJobSet through the controller, on fake
// clients, until its Jobs are ready, and returns it as then stored: its
// status and annotations are the controller's.
func runningMemJobSet(tb testing.TB) *jobset.JobSet {
	fx := newFixture(tb, memJobSet("js"))
	fx.sync("js")
	for _, name := range fx.jobNames() {
		fx.setJob(name, runningJob)
	}
	fx.sync("js")
	fx.sync("js")
	js := fx.jobSet("js")
	if st := js.Status.ReplicatedJobsStatus; len(st) != 1 || st[0].Ready != 4 {
		tb.Fatalf("sample JobSet not ready: %+v", js.Status)
	}
	// The Jobs built below must be the ones the sync created.
	want := childrenOf(js.DeepCopy(), 0)
	got := fx.job(want.jobs[0].Name)
	if !reflect.DeepEqual(got.Labels, want.jobs[0].Labels) || !reflect.DeepEqual(got.Annotations, want.jobs[0].Annotations) {
		tb.Fatalf("sync's Job metadata %v %v; built %v %v", got.Labels, got.Annotations, want.jobs[0].Labels, want.jobs[0].Annotations)
	}
	return js
}

// memSet is a JobSet and the children the controller creates for it, as
// stored.
type memSet struct {
	js   *jobset.JobSet
	jobs []*batchv1.Job
	svc  *corev1.Service
	rev  *appsv1.ControllerRevision
}

// memChildren is JobSet k of the sample's shape, with its children.
func memChildren(sample *jobset.JobSet, k int) memSet {
	js := sample.DeepCopy()
	js.Name = fmt.Sprintf("js-%d", k)
	serverMeta(&js.ObjectMeta, 6*k)
	return childrenOf(js, 6*k+1)
}

// childrenOf builds the children of js, numbering their UIDs from first.
func childrenOf(js *jobset.JobSet, first int) memSet {
	raw, hash, err := templatesOf(js).encode()
	if err != nil {
		panic(err)
	}
	rev := revisionName(js, hash)
	js.Status.CurrentRevision, js.Status.UpdateRevision = rev, rev
	out := memSet{js: js}
	layout := newIndexLayout(js)
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		for idx := 0; idx < int(replicasOf(rj)); idx++ {
			job := constructJob(js, layout, rj, idx, jobParams{templateRevision: rev})
			serverMeta(&job.ObjectMeta, first+idx)
			runningJob(job)
			out.jobs = append(out.jobs, job)
		}
	}
	out.svc = constructHeadlessService(js)
	serverMeta(&out.svc.ObjectMeta, first+4)
	headlessServiceAsStored(out.svc)
	out.rev = constructRevision(js, rev, raw, 1)
	serverMeta(&out.rev.ObjectMeta, first+5)
	return out
}

// protoObject is an API object with its protobuf encoding.
type protoObject interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// decoded returns into a copy of obj decoded from its protobuf encoding.
func decoded[T any, P interface {
	*T
	protoObject
}](obj P) P {
	data, err := obj.Marshal()
	if err != nil {
		panic(err)
	}
	out := P(new(T))
	if err := out.Unmarshal(data); err != nil {
		panic(err)
	}
	return out
}

// retainedBytes adds n objects, transformed, to the store and returns the
// live heap they hold, per object.
func retainedBytes(store cache.Store, n int, object func(i int) interface{}) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		obj, err := trimObject(object(i))
		if err != nil {
			panic(err)
		}
		if err := store.Add(obj); err != nil {
			panic(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(store)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

func BenchmarkCachedBytes(b *testing.B) {
	sample := runningMemJobSet(b)
	perSet := len(memChildren(sample, 0).jobs)
	for i := 0; i < b.N; i++ {
		// The controller's informers, with its indexes and placement's.
		kube, jsc := kfake.NewSimpleClientset(), jsfake.NewSimpleClientset()
		f := NewFactories(kube, jsc, 0)
		if _, err := New(kube, jsc, f, Options{}); err != nil {
			b.Fatal(err)
		}
		jobStore := f.Kube.Batch().V1().Jobs().Informer().GetIndexer()
		perJob := retainedBytes(jobStore, cachedObjects, func(i int) interface{} {
			return decoded(memChildren(sample, i/perSet).jobs[i%perSet])
		})
		perJobSet := retainedBytes(f.JobSet.Jobset().V1alpha2().JobSets().Informer().GetIndexer(), cachedObjects, func(i int) interface{} {
			return decoded(memChildren(sample, i).js)
		})
		perRev := retainedBytes(f.Kube.Apps().V1().ControllerRevisions().Informer().GetIndexer(), cachedObjects, func(i int) interface{} {
			return decoded(memChildren(sample, i).rev)
		})
		perSvc := retainedBytes(f.Kube.Core().V1().Services().Informer().GetIndexer(), cachedObjects, func(i int) interface{} {
			return decoded(memChildren(sample, i).svc)
		})
		if n := len(jobStore.List()); n != cachedObjects {
			b.Fatalf("%d Jobs cached, want %d", n, cachedObjects)
		}
		b.ReportMetric(perJob, "B/Job")
		b.ReportMetric(perJobSet, "B/JobSet")
		b.ReportMetric(perRev, "B/revision")
		b.ReportMetric(perSvc, "B/Service")
		// A pod of the memory benchmark: its Job and a quarter of the rest.
		b.ReportMetric(perJob+(perJobSet+perRev+perSvc)/float64(perSet), "B/pod")
	}
}
