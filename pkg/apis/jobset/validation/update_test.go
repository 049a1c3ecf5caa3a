package validation

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

// Field paths and messages the update tests expect.
const (
	updRJ0     = "spec.replicatedJobs[0]"
	updRJ1     = "spec.replicatedJobs[1]"
	updPod1    = updRJ1 + ".template.spec.template"
	immut      = "field is immutable"
	valueImmut = "Value is immutable"
	terminal   = "Cannot mutate a JobSet in a terminal state"
)

func TestValidateJobSetUpdate(t *testing.T) {
	const rj0, rj1, pod1 = updRJ0, updRJ1, updPod1
	suspend := func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(true) }
	kueueEdit := func(js *jobset.JobSet) {
		pod := &js.Spec.ReplicatedJobs[1].Template.Spec.Template
		pod.Labels = map[string]string{"kueue.x-k8s.io/podset": "workers"}
		pod.Annotations = map[string]string{"kueue.x-k8s.io/workload": "wl"}
		pod.Spec.NodeSelector = map[string]string{"cloud.google.com/gke-nodepool": "pool-a"}
		pod.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
		pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/gate"}}
	}
	setWorkers := func(parallelism, completions *int32) func(*jobset.JobSet) {
		return func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = parallelism
			js.Spec.ReplicatedJobs[1].Template.Spec.Completions = completions
		}
	}
	nonIndexedWorkers := func(js *jobset.JobSet) {
		js.Spec.ReplicatedJobs[1].Template.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	}

	cases := []struct {
		name string
		// old turns the base JobSet into the stored object; new then turns
		// a copy of the stored object into the updated one.
		old, new func(js *jobset.JobSet)
		want     []wantErr
	}{
		{name: "no change", new: func(*jobset.JobSet) {}},
		{
			name: "metadata change",
			new:  func(js *jobset.JobSet) { js.Labels = map[string]string{"team": "ml"} },
		},
		{
			name: "name change",
			new:  func(js *jobset.JobSet) { js.Name = "other" },
			want: []wantErr{{errInvalid, "metadata.name", immut}},
		},
		{
			name: "invalid metadata label",
			new:  func(js *jobset.JobSet) { js.Labels = map[string]string{"team": "m l"} },
			want: []wantErr{{errInvalid, "metadata.labels", ""}},
		},

		// suspend and Kueue
		{name: "suspend", new: suspend},
		{name: "resume", old: suspend, new: func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(false) }},
		{
			name: "Kueue edits a suspended JobSet",
			old:  suspend,
			new:  kueueEdit,
		},
		{
			name: "Kueue suspends and edits in one request",
			new:  func(js *jobset.JobSet) { suspend(js); kueueEdit(js) },
		},
		{
			name: "Kueue resumes with a new node selector",
			old:  suspend,
			new:  func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(false); kueueEdit(js) },
		},
		{
			name: "Kueue suspends and restores the node selector",
			old: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "a"}
			},
			new: func(js *jobset.JobSet) {
				js.Spec.Suspend = ptr.To(true)
				js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.NodeSelector = nil
			},
		},
		{
			name: "node selector change while running",
			new: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "b"}
			},
			want: []wantErr{{errInvalid, pod1 + ".spec.nodeSelector", immut}},
		},
		{
			name: "pod labels and tolerations change while running",
			new: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].Template.Spec.Template.Labels = map[string]string{"a": "b"}
				js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "k"}}
			},
			want: []wantErr{
				{errInvalid, pod1 + ".metadata.labels", immut},
				{errInvalid, pod1 + ".spec.tolerations", immut},
			},
		},
		{
			name: "container resources change while suspended (KEP-1150)",
			old:  suspend,
			new: func(js *jobset.JobSet) {
				c := &js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0]
				c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
				c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
			},
		},
		{
			name: "container resources change while running",
			new: func(js *jobset.JobSet) {
				c := &js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0]
				c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
			},
			want: []wantErr{{errInvalid, pod1 + ".spec.containers", immut}},
		},
		{
			name: "container resource claims change while suspended",
			old:  suspend,
			new: func(js *jobset.JobSet) {
				c := &js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0]
				c.Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
			},
			want: []wantErr{{errInvalid, pod1 + ".spec.containers", immut}},
		},
		{
			name: "container change while suspended",
			old:  suspend,
			new: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0].Image = "busybox:2"
			},
			want: []wantErr{{errInvalid, pod1 + ".spec.containers", immut}},
		},
		{
			name: "Job template labels change while suspended",
			old:  suspend,
			new: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[0].Template.Labels = map[string]string{"a": "b"}
			},
			want: []wantErr{{errInvalid, rj0 + ".template.metadata.labels", immut}},
		},
		{
			name: "invalid pod label while suspended",
			old:  suspend,
			new: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].Template.Spec.Template.Labels = map[string]string{"a": "b c"}
			},
			want: []wantErr{{errInvalid, pod1 + ".metadata.labels", "valid label"}},
		},

		// terminal JobSets
		{
			name: "ttlSecondsAfterFinished of a completed JobSet may change",
			old:  func(js *jobset.JobSet) { js.Status.Conditions = []metav1.Condition{completed()} },
			new:  func(js *jobset.JobSet) { js.Spec.TTLSecondsAfterFinished = ptr.To[int32](0) },
		},
		{
			name: "ttlSecondsAfterFinished of a failed JobSet must stay non-negative",
			old:  func(js *jobset.JobSet) { js.Status.TerminalState = string(jobset.JobSetFailed) },
			new:  func(js *jobset.JobSet) { js.Spec.TTLSecondsAfterFinished = ptr.To[int32](-1) },
			want: []wantErr{{errInvalid, "spec.ttlSecondsAfterFinished", "must be greater than or equal to 0"}},
		},
		{
			name: "another spec change of a completed JobSet",
			old:  func(js *jobset.JobSet) { js.Status.Conditions = []metav1.Condition{completed()} },
			new: func(js *jobset.JobSet) {
				js.Spec.TTLSecondsAfterFinished = ptr.To[int32](60)
				suspend(js)
			},
			want: []wantErr{{errForbidden, "spec", terminal}},
		},
		{
			name: "several spec changes of a failed JobSet give one error",
			old:  func(js *jobset.JobSet) { js.Status.TerminalState = string(jobset.JobSetFailed) },
			new: func(js *jobset.JobSet) {
				suspend(js)
				js.Spec.ReplicatedJobs[0].Name = "boss"
				js.Spec.ManagedBy = ptr.To("example.com/other")
			},
			want: []wantErr{{errForbidden, "spec", terminal}},
		},
		{
			name: "label change of a completed JobSet",
			old:  func(js *jobset.JobSet) { js.Status.Conditions = []metav1.Condition{completed()} },
			new:  func(js *jobset.JobSet) { js.Labels = map[string]string{"archived": "true"} },
		},

		// parallelism, completions and replicas
		{
			name: "elastic scale up of an Indexed template",
			new:  setWorkers(ptr.To[int32](6), ptr.To[int32](6)),
		},
		{
			name: "elastic scale down of an Indexed template",
			new:  setWorkers(ptr.To[int32](1), ptr.To[int32](1)),
		},
		{
			name: "parallelism change without completions",
			new:  setWorkers(ptr.To[int32](6), ptr.To[int32](4)),
			want: []wantErr{{errInvalid, rj1 + ".template.spec.completions", "must equal parallelism"}},
		},
		{
			name: "completions change without parallelism",
			new:  setWorkers(ptr.To[int32](4), ptr.To[int32](5)),
			want: []wantErr{{errInvalid, rj1 + ".template.spec.completions", "must equal parallelism"}},
		},
		{
			name: "elastic scale to zero",
			new:  setWorkers(ptr.To[int32](0), ptr.To[int32](0)),
			want: []wantErr{
				{errInvalid, rj1 + ".template.spec.parallelism", "at least 1"},
				{errInvalid, rj1 + ".template.spec.completions", "at least 1"},
			},
		},
		{
			name: "unchanged unequal parallelism and completions",
			old:  setWorkers(ptr.To[int32](2), ptr.To[int32](4)),
			new:  suspend,
		},
		{
			name: "elastic scale up makes pod names too long",
			old:  func(js *jobset.JobSet) { js.Name = strings.Repeat("a", 45) },
			new:  setWorkers(ptr.To[int32](11), ptr.To[int32](11)),
			want: []wantErr{{errInvalid, "metadata.name", podNameTooLongMsg}},
		},
		{
			name: "parallelism change of a NonIndexed template",
			old:  nonIndexedWorkers,
			new:  setWorkers(ptr.To[int32](6), ptr.To[int32](4)),
			want: []wantErr{{errInvalid, rj1 + ".template.spec.parallelism", immut}},
		},
		{
			name: "completionMode change",
			new:  nonIndexedWorkers,
			want: []wantErr{{errInvalid, rj1 + ".template.spec.completionMode", immut}},
		},
		{
			name: "completionMode and parallelism change",
			new: func(js *jobset.JobSet) {
				nonIndexedWorkers(js)
				js.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = ptr.To[int32](8)
			},
			want: []wantErr{
				{errInvalid, rj1 + ".template.spec.completionMode", immut},
				{errInvalid, rj1 + ".template.spec.parallelism", immut},
			},
		},
		{
			name: "backoffLimit change",
			new:  func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[0].Template.Spec.BackoffLimit = ptr.To[int32](9) },
			want: []wantErr{{errInvalid, rj0 + ".template.spec.backoffLimit", immut}},
		},
		{
			name: "replicas change",
			new:  func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].Replicas = 5 },
		},
		{
			name: "replicas to zero",
			new:  func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].Replicas = 0 },
		},
		{
			name: "negative replicas",
			new:  func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].Replicas = -1 },
			want: []wantErr{{errInvalid, rj1 + ".replicas", ""}},
		},
		{
			name: "replicas times parallelism too large",
			new:  func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].Replicas = 1 << 30 },
			want: []wantErr{{errInvalid, rj1 + ".replicas", "must not exceed"}},
		},
		{
			name: "replicas above the RestartJob limit",
			old: func(js *jobset.JobSet) {
				withFailurePolicy(js, jobset.FailurePolicyRule{Name: "a", Action: jobset.RestartJob})
			},
			new:  func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].Replicas = 2000 },
			want: []wantErr{{errInvalid, rj1 + ".replicas", "replicas > 1024"}},
		},

		// other mutable fields
		{
			name: "ttlSecondsAfterFinished change",
			new:  func(js *jobset.JobSet) { js.Spec.TTLSecondsAfterFinished = ptr.To[int32](10) },
		},
		{
			name: "negative ttlSecondsAfterFinished",
			new:  func(js *jobset.JobSet) { js.Spec.TTLSecondsAfterFinished = ptr.To[int32](-1) },
			want: []wantErr{{errInvalid, "spec.ttlSecondsAfterFinished", ""}},
		},
		{
			name: "coordinator change",
			new: func(js *jobset.JobSet) {
				js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "workers", JobIndex: 1, PodIndex: 2}
			},
		},
		{
			name: "replicas drop below the coordinator's job index",
			old: func(js *jobset.JobSet) {
				js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "workers", JobIndex: 1}
			},
			new:  func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].Replicas = 1 },
			want: []wantErr{{errInvalid, "spec.coordinator.jobIndex", ""}},
		},
		{
			name: "coordinator names an unknown replicatedJob",
			new: func(js *jobset.JobSet) {
				js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "driver"}
			},
			want: []wantErr{{errNotSupported, "spec.coordinator.replicatedJob", ""}},
		},

		// the set of replicatedJobs
		{
			name: "rename",
			new:  func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].Name = "trainers" },
			want: []wantErr{{errInvalid, rj1 + ".name", immut}},
		},
		{
			name: "reorder",
			new: func(js *jobset.JobSet) {
				rjs := js.Spec.ReplicatedJobs
				rjs[0], rjs[1] = rjs[1], rjs[0]
			},
			// The templates differ only in parallelism, completions and
			// replicas, which may all change: the names give reordering away.
			want: []wantErr{
				{errInvalid, rj0 + ".name", immut},
				{errInvalid, rj1 + ".name", immut},
			},
		},
		{
			name: "add",
			new: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, testRJ("evaluator", 1, 1))
			},
			want: []wantErr{{errForbidden, "spec.replicatedJobs", "cannot be added or removed"}},
		},
		{
			name: "remove",
			new:  func(js *jobset.JobSet) { js.Spec.ReplicatedJobs = js.Spec.ReplicatedJobs[:1] },
			want: []wantErr{{errForbidden, "spec.replicatedJobs", "cannot be added or removed"}},
		},

		// immutable fields
		{
			name: "network",
			new:  func(js *jobset.JobSet) { js.Spec.Network.Subdomain = "svc" },
			want: []wantErr{{errInvalid, "spec.network", valueImmut}},
		},
		{
			name: "successPolicy",
			new:  func(js *jobset.JobSet) { js.Spec.SuccessPolicy.Operator = jobset.OperatorAny },
			want: []wantErr{{errInvalid, "spec.successPolicy", valueImmut}},
		},
		{
			name: "failurePolicy",
			new:  func(js *jobset.JobSet) { withFailurePolicy(js) },
			want: []wantErr{{errInvalid, "spec.failurePolicy", valueImmut}},
		},
		{
			name: "startupPolicy",
			new:  func(js *jobset.JobSet) { js.Spec.StartupPolicy.StartupPolicyOrder = jobset.InOrder },
			want: []wantErr{{errInvalid, "spec.startupPolicy", valueImmut}},
		},
		{
			name: "volumeClaimPolicies",
			old:  func(js *jobset.JobSet) { withClaims(js, "data") },
			new: func(js *jobset.JobSet) {
				js.Spec.VolumeClaimPolicies[0].RetentionPolicy.WhenDeleted = ptr.To(jobset.RetentionPolicyRetain)
			},
			want: []wantErr{{errInvalid, "spec.volumeClaimPolicies", valueImmut}},
		},
		{
			name: "managedBy",
			new:  func(js *jobset.JobSet) { js.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue") },
			want: []wantErr{{errInvalid, "spec.managedBy", immut}},
		},
		{
			name: "dependsOn",
			new: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].DependsOn = []jobset.DependsOn{{Name: "leader", Status: jobset.DependencyReady}}
			},
			want: []wantErr{{errInvalid, rj1 + ".dependsOn", valueImmut}},
		},
		{
			name: "groupName",
			new:  func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].GroupName = "workers" },
			want: []wantErr{{errInvalid, rj1 + ".groupName", immut}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			oldJS := testJobSet()
			if tc.old != nil {
				tc.old(oldJS)
			}
			if errs := ValidateJobSet(oldJS); len(errs) != 0 {
				t.Fatalf("the old object is invalid: %v", errs)
			}
			newJS := oldJS.DeepCopy()
			tc.new(newJS)
			checkErrors(t, ValidateJobSetUpdate(newJS, oldJS), tc.want)
		})
	}
}

func TestTemplateMutabilityMask(t *testing.T) {
	oldT := testRJ("w", 1, 2).Template
	newT := *oldT.DeepCopy()
	newT.Spec.Parallelism = ptr.To[int32](3)
	newT.Spec.Template.Spec.NodeSelector = map[string]string{"a": "b"}
	newT.Spec.Template.Spec.Containers[0].Image = "changed"

	cases := []struct {
		name        string
		m           templateMutability
		parallelism int32
		selector    bool
	}{
		{name: "nothing mutable", parallelism: 3, selector: true},
		{name: "suspended", m: templateMutability{suspended: true}, parallelism: 3},
		{name: "elastic", m: templateMutability{elastic: true}, parallelism: 2, selector: true},
		{name: "both", m: templateMutability{suspended: true, elastic: true}, parallelism: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.m.mask(&newT, &oldT)
			if *got.Spec.Parallelism != tc.parallelism {
				t.Errorf("parallelism = %d, want %d", *got.Spec.Parallelism, tc.parallelism)
			}
			if hasSelector := got.Spec.Template.Spec.NodeSelector != nil; hasSelector != tc.selector {
				t.Errorf("nodeSelector kept = %v, want %v", hasSelector, tc.selector)
			}
			if got.Spec.Template.Spec.Containers[0].Image != "changed" {
				t.Errorf("the image must never be masked")
			}
			if newT.Spec.Parallelism == nil || *newT.Spec.Parallelism != 3 {
				t.Errorf("mask modified its input")
			}
		})
	}
}
