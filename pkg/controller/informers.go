package controller

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller/cachedmeta"
	"github.com/nativejobset/jobset/pkg/controller/jobcache"
	"github.com/nativejobset/jobset/pkg/controller/jobsetcache"
	"github.com/nativejobset/jobset/pkg/controller/placement"
	versioned "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
	jsinformers "github.com/nativejobset/jobset/pkg/generated/informers/externalversions"
)

// childSelector selects the objects that carry the jobset-name label: the
// only Jobs, Services and claims the controller caches.
func childSelector() string {
	req, err := labels.NewRequirement(jobset.JobSetNameKey, selection.Exists, nil)
	if err != nil {
		panic(err) // constant input; cannot fail
	}
	return labels.NewSelector().Add(*req).String()
}

// jobLabelsRead and jobAnnotationsRead are the only labels and
// annotations of a Job that the controller and the placer read; the
// cache keeps no others (upstream's labels are repeated as annotations,
// and they made up half of a cached Job).
var (
	jobLabelsRead = map[string]bool{
		jobset.JobSetNameKey: true, jobset.ReplicatedJobNameKey: true, jobset.JobIndexKey: true,
		jobset.RestartsKey: true, jobset.JobRestartsKey: true,
	}
	jobAnnotationsRead = map[string]bool{
		jobset.ExecutionAttemptKey: true, jobset.TemplateRevisionKey: true,
		jobset.ExclusiveKey: true, jobset.NodeSelectorStrategyKey: true, jobset.TopologyDomainKey: true,
	}
)

// jobSetAnnotationsRead are the annotations of a JobSet that are read:
// the availability state, migration and exclusive placement.
var jobSetAnnotationsRead = func() map[string]bool {
	m := map[string]bool{jobset.MigratingKey: true, jobset.ExclusiveKey: true, jobset.NodeSelectorStrategyKey: true}
	for _, k := range availabilityKeys {
		m[k] = true
	}
	return m
}()

// keepOnly returns the entries of m whose keys are in keep (nil when
// none), with the keys of keep (a decoded key is an allocation of its own)
// and the values interned.
func keepOnly(m map[string]string, keep map[string]bool, in *interner) map[string]string {
	var out map[string]string
	for k := range keep {
		if v, ok := m[k]; ok {
			if out == nil {
				out = make(map[string]string, min(len(m), len(keep)))
			}
			out[k] = in.get(v)
		}
	}
	return out
}

// trimObject is the informer transform: it drops managed fields everywhere,
// interns the strings that objects repeat, and caches a Job in its compact
// form (jobcache.Job), with only the labels and annotations that are read,
// and a JobSet with its spec encoded (jobsetcache.JobSet).
// A Job that is edited is read from the API server first (resumeJob).
func trimObject(obj interface{}) (interface{}, error) {
	return cacheStrings.trim(obj)
}

// cacheStrings interns the strings of every cached object.
var cacheStrings = newInterner(internerSize)

func (in *interner) trim(obj interface{}) (interface{}, error) {
	if acc, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if m := acc.GetObjectMeta(); m != nil {
			m.SetManagedFields(nil)
		}
	}
	switch o := obj.(type) {
	case *batchv1.Job:
		in.meta(&o.ObjectMeta)
		o.Labels = keepOnly(o.Labels, jobLabelsRead, in)
		o.Annotations = keepOnly(o.Annotations, jobAnnotationsRead, in)
		in.jobConditions(o.Status.Conditions)
		return jobcache.Compact(o), nil
	case *corev1.Service:
		// Only its existence and owner are read, and its JobSet label
		// when it has no controller (keyForChild): it is cached as its
		// metadata, without annotations.
		in.meta(&o.ObjectMeta)
		if metav1.GetControllerOf(o) != nil {
			o.Labels = nil
		}
		o.Annotations = nil
		return cachedmeta.NewObject(&o.ObjectMeta), nil
	case *jobset.JobSet:
		// The controller builds its Jobs from the whole spec: it is
		// cached encoded (jobsetcache.JobSet). Its labels are never read,
		// and of its annotations only those of jobSetAnnotationsRead
		// (kubectl apply's last-applied configuration alone would double
		// a cached JobSet).
		in.meta(&o.ObjectMeta)
		o.Labels = nil
		o.Annotations = keepOnly(o.Annotations, jobSetAnnotationsRead, in)
		in.jobSet(o)
		return jobsetcache.Compact(o)
	case *appsv1.ControllerRevision:
		// The data (the templates) is read only while an update is
		// pending, from the API server (revisionData): it is cached as
		// its metadata and number. Like a Service's, its labels are read
		// only when it has no controller, its annotations never.
		in.meta(&o.ObjectMeta)
		if metav1.GetControllerOf(o) != nil {
			o.Labels = nil
		}
		o.Annotations = nil
		return cachedmeta.NewRevision(o), nil
	}
	return obj, nil
}

// meta interns the namespace and the owner references, and shares one list
// of a single owner among the owner's children (the labels kept are
// interned by keepOnly).
func (in *interner) meta(m *metav1.ObjectMeta) {
	m.Namespace = in.get(m.Namespace)
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind, r.Name = in.get(r.APIVersion), in.get(r.Kind), in.get(r.Name)
		r.UID = types.UID(in.get(string(r.UID)))
		r.Controller, r.BlockOwnerDeletion = sharedBool(r.Controller), sharedBool(r.BlockOwnerDeletion)
	}
	m.OwnerReferences = in.ownerRefs(m.OwnerReferences)
}

// jobSet interns the strings of a JobSet's status and its replicated Jobs'
// names (the spec is cached encoded; the names are kept for the metrics).
func (in *interner) jobSet(js *jobset.JobSet) {
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		rj.Name = in.get(rj.Name)
	}
	st := &js.Status
	for i := range st.Conditions {
		c := &st.Conditions[i]
		c.Type, c.Reason, c.Message = in.get(c.Type), in.get(c.Reason), in.get(c.Message)
		c.Status = metav1.ConditionStatus(in.get(string(c.Status)))
	}
	st.CurrentRevision, st.UpdateRevision = in.get(st.CurrentRevision), in.get(st.UpdateRevision)
	st.TerminalState = in.get(st.TerminalState)
	for i := range st.ReplicatedJobsStatus {
		st.ReplicatedJobsStatus[i].Name = in.get(st.ReplicatedJobsStatus[i].Name)
	}
}

func (in *interner) jobConditions(conds []batchv1.JobCondition) {
	for i := range conds {
		c := &conds[i]
		c.Type = batchv1.JobConditionType(in.get(string(c.Type)))
		c.Status = corev1.ConditionStatus(in.get(string(c.Status)))
		c.Reason, c.Message = in.get(c.Reason), in.get(c.Message)
	}
}

// Factories holds the informer factories the controller needs.
type Factories struct {
	Kube   informers.SharedInformerFactory
	JobSet jsinformers.SharedInformerFactory
	// PlacedPods (pods of exclusive Jobs) and Nodes (metadata) feed the
	// topology placement.
	PlacedPods informers.SharedInformerFactory
	Nodes      informers.SharedInformerFactory
	// InPlacePods (pods of InPlaceRestart JobSets) feed in-place restarts.
	InPlacePods informers.SharedInformerFactory
	// FailedPods (failed pods of JobSets) feed early failure detection.
	FailedPods informers.SharedInformerFactory
}

// NewFactories builds label-filtered, trimmed informer factories.
func NewFactories(kube kubernetes.Interface, js versioned.Interface, resync time.Duration) Factories {
	sel := childSelector()
	tweak := func(o *metav1.ListOptions) { o.LabelSelector = sel }
	pods, nodes := placement.Factories(kube, resync)
	children := informers.NewSharedInformerFactoryWithOptions(kube, resync,
		informers.WithTweakListOptions(tweak), informers.WithTransform(trimObject))
	withoutNamespaceIndex(children, tweak)
	return Factories{
		PlacedPods:  pods,
		Nodes:       nodes,
		InPlacePods: inPlacePodsFactory(kube, resync),
		FailedPods:  failedPodsFactory(kube, resync),
		Kube:        children,
		JobSet: jsinformers.NewSharedInformerFactoryWithOptions(js, resync,
			jsinformers.WithTransform(trimObject)),
	}
}

// withoutNamespaceIndex makes the factory's Jobs, Services and revisions
// informers keep no namespace index (tens of bytes per object): they are
// read by key and through the byJobSet index, never listed by namespace.
func withoutNamespaceIndex(f informers.SharedInformerFactory, tweak internalinterfaces.TweakListOptionsFunc) {
	opts := func(resync time.Duration) internalinterfaces.InformerOptions {
		return internalinterfaces.InformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{}, InformerName: f.InformerName(), TweakListOptions: tweak}
	}
	f.InformerFor(&batchv1.Job{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return batchinformers.NewTypedJobInformerWithOptions(c, metav1.NamespaceAll, opts(resync))
	})
	f.InformerFor(&corev1.Service{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewTypedServiceInformerWithOptions(c, metav1.NamespaceAll, opts(resync))
	})
	f.InformerFor(&appsv1.ControllerRevision{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return appsinformers.NewTypedControllerRevisionInformerWithOptions(c, metav1.NamespaceAll, opts(resync))
	})
}

// Start starts the factories' informers.
func (f Factories) Start(stop <-chan struct{}) {
	f.Kube.Start(stop)
	f.JobSet.Start(stop)
	f.PlacedPods.Start(stop)
	f.Nodes.Start(stop)
	if f.InPlacePods != nil {
		f.InPlacePods.Start(stop)
	}
	if f.FailedPods != nil {
		f.FailedPods.Start(stop)
	}
}

// Shutdown waits for the informers to stop.
func (f Factories) Shutdown() {
	f.Kube.Shutdown()
	f.JobSet.Shutdown()
	f.PlacedPods.Shutdown()
	f.Nodes.Shutdown()
	if f.InPlacePods != nil {
		f.InPlacePods.Shutdown()
	}
	if f.FailedPods != nil {
		f.FailedPods.Shutdown()
	}
}

// keyForChild returns the JobSet key an owned object belongs to.
func keyForChild(obj interface{}) (string, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return "", false
	}
	if ref := metav1.GetControllerOf(m); ref != nil {
		if ref.Kind == jobSetKind && ref.APIVersion == jobset.SchemeGroupVersion.String() {
			return m.GetNamespace() + "/" + ref.Name, true
		}
		return "", false
	}
	if name := m.GetLabels()[jobset.JobSetNameKey]; name != "" {
		return m.GetNamespace() + "/" + name, true
	}
	return "", false
}
