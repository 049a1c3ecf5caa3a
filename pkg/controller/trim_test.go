package controller

import (
	"github.com/google/go-cmp/cmp"
	"reflect"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	jobsetapi "github.com/nativejobset/jobset/pkg/apis/jobset"
	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller/cachedmeta"
	"github.com/nativejobset/jobset/pkg/controller/jobcache"
	"github.com/nativejobset/jobset/pkg/controller/jobsetcache"
)

// fullMeta is metadata with every field set: labels and annotations read
// (those of a Job) and others.
func fullMeta(now metav1.Time, owner metav1.OwnerReference) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: "x", GenerateName: "x-", Namespace: ns, UID: "x-uid", ResourceVersion: "7", Generation: 3,
		CreationTimestamp: now, DeletionTimestamp: &now, DeletionGracePeriodSeconds: ptr.To[int64](30),
		Labels: map[string]string{
			jobset.JobSetNameKey: "js", jobset.ReplicatedJobNameKey: "w", jobset.JobIndexKey: "1",
			jobset.RestartsKey: "2", jobset.JobRestartsKey: "3", jobset.JobKey: "hash", "user": "label",
		},
		Annotations: map[string]string{
			jobset.ExecutionAttemptKey: "4", jobset.TemplateRevisionKey: "js-abc", jobset.ExclusiveKey: "rack",
			jobset.NodeSelectorStrategyKey: "", jobset.TopologyDomainKey: "rack-1", jobset.JobKey: "hash", "user": "annotation",
		},
		OwnerReferences: []metav1.OwnerReference{owner},
		Finalizers:      []string{"example.com/f"},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate}},
	}
}

// TestTrimKeepsWhatIsRead: the informer transform keeps every field the
// controller and placement read, and drops the others. A new reader of a
// dropped field must move it to the kept ones here (and in the transform).
func TestTrimKeepsWhatIsRead(t *testing.T) {
	// Decoded times are local (metav1.Time's decoders), and the cache
	// gives them back so.
	now := metav1.NewTime(t0.Local())
	owner := metav1.OwnerReference{APIVersion: jobset.SchemeGroupVersion.String(), Kind: jobSetKind, Name: "js", UID: "js-uid",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	conditions := []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded",
		Message: "failed", LastProbeTime: now, LastTransitionTime: now}}

	fullJob := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: fullMeta(now, owner),
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](3), ActiveDeadlineSeconds: ptr.To[int64](60),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionIgnore}}},
			SuccessPolicy:    &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr.To[int32](1)}}},
			BackoffLimit:     ptr.To[int32](5), BackoffLimitPerIndex: ptr.To[int32](1), MaxFailedIndexes: ptr.To[int32](2),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			ManualSelector: ptr.To(false),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}},
			TTLSecondsAfterFinished: ptr.To[int32](10),
			CompletionMode:          ptr.To(batchv1.IndexedCompletion),
			Suspend:                 ptr.To(true),
			PodReplacementPolicy:    ptr.To(batchv1.Failed),
			ManagedBy:               ptr.To("example.com/other"),
		},
		Status: batchv1.JobStatus{
			Conditions: conditions, StartTime: &now, CompletionTime: &now,
			Active: 1, Succeeded: 2, Failed: 3, Terminating: ptr.To[int32](4), Ready: ptr.To[int32](5),
			CompletedIndexes: "0-1", FailedIndexes: ptr.To("2"),
			UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"p"}},
		},
	}
	// Read: identity, creation and deletion times, the owner, the labels
	// and annotations of jobLabelsRead and jobAnnotationsRead; of the spec
	// the sizes, backoff limits, suspend, managedBy and whether there is a
	// pod failure policy; of the status the conditions and pod counts.
	wantJob := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: "x", Namespace: ns, UID: "x-uid", ResourceVersion: "7", CreationTimestamp: now, DeletionTimestamp: &now,
			Labels: map[string]string{
				jobset.JobSetNameKey: "js", jobset.ReplicatedJobNameKey: "w", jobset.JobIndexKey: "1",
				jobset.RestartsKey: "2", jobset.JobRestartsKey: "3",
			},
			Annotations: map[string]string{
				jobset.ExecutionAttemptKey: "4", jobset.TemplateRevisionKey: "js-abc", jobset.ExclusiveKey: "rack",
				jobset.NodeSelectorStrategyKey: "", jobset.TopologyDomainKey: "rack-1",
			},
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](3), PodFailurePolicy: hasPodFailurePolicy,
			BackoffLimit: ptr.To[int32](5), BackoffLimitPerIndex: ptr.To[int32](1),
			Suspend: ptr.To(true), ManagedBy: ptr.To("example.com/other"),
		},
		Status: batchv1.JobStatus{Conditions: conditions, Active: 1, Succeeded: 2, Failed: 3, Ready: ptr.To[int32](5)},
	}

	// What a Service and a revision keep of their metadata: identity,
	// creation and deletion times, owners, and the labels only without a
	// controller.
	keptMeta := func(m metav1.ObjectMeta) metav1.ObjectMeta {
		out := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
			CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp, OwnerReferences: m.OwnerReferences}
		if len(m.OwnerReferences) == 0 {
			out.Labels = m.Labels
		}
		return out
	}
	svc := func(controlled bool) (full *corev1.Service, want metav1.ObjectMeta) {
		m := fullMeta(now, owner)
		if !controlled {
			m.OwnerReferences = nil
		}
		full = &corev1.Service{ObjectMeta: m,
			Spec:   corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"a": "b"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}},
			Status: corev1.ServiceStatus{Conditions: []metav1.Condition{{Type: "t"}}}}
		// Read: its existence, its owner, and its JobSet label when it has
		// no controller (keyForChild).
		return full, keptMeta(*m.DeepCopy())
	}
	fullSvc, wantSvc := svc(true)
	fullForeignSvc, wantForeignSvc := svc(false)
	readSvc := func(o interface{}) interface{} {
		c, ok := o.(*cachedmeta.Object)
		if !ok {
			t.Fatalf("cached Service is a %T", o)
		}
		return c.ObjectMeta()
	}

	fullRev := &appsv1.ControllerRevision{ObjectMeta: fullMeta(now, owner), Data: runtime.RawExtension{Raw: []byte(`{"replicatedJobs":[]}`)}, Revision: 3}
	// Read: metadata but the labels (it has a controller), the revision
	// number; the data only while an update is pending, from the API
	// server.
	wantRev := &appsv1.ControllerRevision{ObjectMeta: keptMeta(*fullRev.ObjectMeta.DeepCopy()), Revision: 3}

	// A JobSet is kept whole but for its managed fields, labels and the
	// annotations not read: the controller builds its Jobs from the spec,
	// which is cached encoded and read back whole.
	fullJS := newJobSet("js", func(js *jobset.JobSet) { js.ObjectMeta = fullMeta(now, owner) })
	fullJS.Annotations[jobsetapi.AvailableSinceAnnotation] = "2026-01-02T03:04:05.000Z"
	fullJS.Annotations[jobsetapi.UptimeSecondsAnnotation] = "1.000"
	fullJS.Annotations[jobset.MigratingKey] = "old"
	fullJS.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
	fullJS.Status.Restarts = 2
	wantJS := fullJS.DeepCopy()
	wantJS.ManagedFields, wantJS.Labels = nil, nil
	wantJS.Annotations = map[string]string{
		jobsetapi.AvailableSinceAnnotation: "2026-01-02T03:04:05.000Z", jobsetapi.UptimeSecondsAnnotation: "1.000",
		jobset.MigratingKey: "old", jobset.ExclusiveKey: "rack", jobset.NodeSelectorStrategyKey: "",
	}

	cases := []struct {
		name       string
		full, want interface{}
		read       func(interface{}) interface{}
	}{
		{"Job", fullJob, wantJob, func(o interface{}) interface{} {
			j, ok := jobcache.Of(o)
			if !ok {
				t.Fatalf("cached Job is a %T", o)
			}
			return j
		}},
		{"Service", fullSvc, wantSvc, readSvc},
		{"Service without a controller", fullForeignSvc, wantForeignSvc, readSvc},
		{"ControllerRevision", fullRev, wantRev, func(o interface{}) interface{} {
			if _, ok := o.(*cachedmeta.Revision); !ok {
				t.Fatalf("cached revision is a %T", o)
			}
			cr, _ := cachedmeta.RevisionOf(o)
			return cr
		}},
		{"JobSet", fullJS, wantJS, func(o interface{}) interface{} {
			c, ok := o.(*jobsetcache.JobSet)
			if !ok {
				t.Fatalf("cached JobSet is a %T", o)
			}
			js, err := c.JobSet()
			if err != nil {
				t.Fatal(err)
			}
			return js
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := trimObject(tc.full.(runtime.Object).DeepCopyObject())
			if err != nil {
				t.Fatal(err)
			}
			if tc.read != nil {
				got = tc.read(got)
			}
			equal := reflect.DeepEqual
			if _, ok := tc.want.(*jobset.JobSet); ok {
				// The spec comes back from protobuf: empty lists and
				// maps read as nil.
				equal = apiequality.Semantic.DeepEqual
			}
			if !equal(got, tc.want) {
				t.Errorf("cached form differs:\n%s", cmp.Diff(tc.want, got))
			}
		})
	}
}

func TestInternerIsBounded(t *testing.T) {
	in := newInterner(2)
	a := in.get(string([]byte("namespace")))
	if b := in.get(string([]byte("namespace"))); unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatal("an equal string is not shared")
	}
	in.get("x")
	in.get("y") // full: forgets everything
	if len(in.m) != 1 {
		t.Fatalf("interner holds %d strings, size 2", len(in.m))
	}
	if in.get("") != "" || len(in.m) != 1 {
		t.Fatal("the empty string is interned")
	}
}

// TestOwnerReferencesShared: children of one owner share one list; another
// owner, or the same UID with other fields, does not get it.
func TestOwnerReferencesShared(t *testing.T) {
	in := newInterner(2)
	ref := func(name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "v", Kind: "JobSet", Name: name, UID: types.UID(uid), Controller: sharedBool(ptr.To(true))}}
	}
	a := in.ownerRefs(ref("a", "1"))
	if b := in.ownerRefs(ref("a", "1")); &b[0] != &a[0] {
		t.Fatal("equal owner references are not shared")
	}
	if c := in.ownerRefs(ref("renamed", "1")); &c[0] == &a[0] || c[0].Name != "renamed" {
		t.Fatal("a different reference with the same UID got the shared list")
	}
	two := append(ref("a", "1"), ref("b", "2")...)
	if got := in.ownerRefs(two); &got[0] != &two[0] {
		t.Fatal("a list of two owners is not kept as is")
	}
	in.ownerRefs(ref("x", "3"))
	in.ownerRefs(ref("y", "4")) // full: forgets everything
	if len(in.owners) > 2 {
		t.Fatalf("interner holds %d owner lists, size 2", len(in.owners))
	}
}
