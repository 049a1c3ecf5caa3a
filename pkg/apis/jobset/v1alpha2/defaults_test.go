package v1alpha2_test

import (
	"encoding/json"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/apis/jobset/install"
	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	return scheme
}

// template is a Job template with nothing that the k8s.io/api schema
// defaults, so that only the JobSet defaults show.
func template(mutate ...func(*batchv1.JobTemplateSpec)) batchv1.JobTemplateSpec {
	t := batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "main", Image: "busybox"}},
	}}}}
	for _, m := range mutate {
		m(&t)
	}
	return t
}

// defaultedSpec is a spec with the JobSet-level defaults set.
func defaultedSpec() v1alpha2.JobSetSpec {
	return v1alpha2.JobSetSpec{
		SuccessPolicy: &v1alpha2.SuccessPolicy{Operator: v1alpha2.OperatorAll},
		StartupPolicy: &v1alpha2.StartupPolicy{StartupPolicyOrder: v1alpha2.AnyOrder},
		Network:       &v1alpha2.Network{EnableDNSHostnames: ptr.To(true), PublishNotReadyAddresses: ptr.To(true)},
	}
}

// defaultedReplicatedJob is what an unset replicatedJob named name becomes.
func defaultedReplicatedJob(name string) v1alpha2.ReplicatedJob {
	return v1alpha2.ReplicatedJob{
		Name:      name,
		GroupName: v1alpha2.DefaultGroupName,
		Replicas:  ptr.To[int32](1),
		Template: template(func(t *batchv1.JobTemplateSpec) {
			t.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
			t.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		}),
	}
}

func TestDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   v1alpha2.JobSetSpec
		want func() v1alpha2.JobSetSpec
	}{{
		name: "empty spec",
		in:   v1alpha2.JobSetSpec{},
		want: defaultedSpec,
	}, {
		name: "explicit policies kept",
		in: v1alpha2.JobSetSpec{
			SuccessPolicy: &v1alpha2.SuccessPolicy{Operator: v1alpha2.OperatorAny, TargetReplicatedJobs: []string{"w"}},
			StartupPolicy: &v1alpha2.StartupPolicy{StartupPolicyOrder: v1alpha2.InOrder},
			Network:       &v1alpha2.Network{EnableDNSHostnames: ptr.To(false), PublishNotReadyAddresses: ptr.To(false), Subdomain: "sub"},
		},
		want: func() v1alpha2.JobSetSpec {
			s := defaultedSpec()
			s.SuccessPolicy = &v1alpha2.SuccessPolicy{Operator: v1alpha2.OperatorAny, TargetReplicatedJobs: []string{"w"}}
			s.StartupPolicy = &v1alpha2.StartupPolicy{StartupPolicyOrder: v1alpha2.InOrder}
			s.Network = &v1alpha2.Network{EnableDNSHostnames: ptr.To(false), PublishNotReadyAddresses: ptr.To(false), Subdomain: "sub"}
			return s
		},
	}, {
		name: "network with only a subdomain",
		in:   v1alpha2.JobSetSpec{Network: &v1alpha2.Network{Subdomain: "sub"}},
		want: func() v1alpha2.JobSetSpec {
			s := defaultedSpec()
			s.Network.Subdomain = "sub"
			return s
		},
	}, {
		name: "network with enableDNSHostnames false",
		in:   v1alpha2.JobSetSpec{Network: &v1alpha2.Network{EnableDNSHostnames: ptr.To(false)}},
		want: func() v1alpha2.JobSetSpec {
			s := defaultedSpec()
			s.Network.EnableDNSHostnames = ptr.To(false)
			return s
		},
	}, {
		name: "network with publishNotReadyAddresses false",
		in:   v1alpha2.JobSetSpec{Network: &v1alpha2.Network{PublishNotReadyAddresses: ptr.To(false)}},
		want: func() v1alpha2.JobSetSpec {
			s := defaultedSpec()
			s.Network.PublishNotReadyAddresses = ptr.To(false)
			return s
		},
	}, {
		name: "success policy with an empty operator is kept",
		in:   v1alpha2.JobSetSpec{SuccessPolicy: &v1alpha2.SuccessPolicy{TargetReplicatedJobs: []string{"w"}}},
		want: func() v1alpha2.JobSetSpec {
			s := defaultedSpec()
			s.SuccessPolicy = &v1alpha2.SuccessPolicy{TargetReplicatedJobs: []string{"w"}}
			return s
		},
	}, {
		name: "replicatedJob defaults",
		in:   v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{{Name: "w", Template: template()}}},
		want: func() v1alpha2.JobSetSpec {
			s := defaultedSpec()
			s.ReplicatedJobs = []v1alpha2.ReplicatedJob{defaultedReplicatedJob("w")}
			return s
		},
	}, {
		name: "replicatedJob explicit values kept",
		in: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{{
			Name:      "w",
			GroupName: "g",
			Replicas:  ptr.To[int32](0),
			Template: template(func(t *batchv1.JobTemplateSpec) {
				t.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
				t.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
			}),
		}}},
		want: func() v1alpha2.JobSetSpec {
			s := defaultedSpec()
			rj := defaultedReplicatedJob("w")
			rj.GroupName = "g"
			rj.Replicas = ptr.To[int32](0)
			rj.Template.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
			rj.Template.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
			s.ReplicatedJobs = []v1alpha2.ReplicatedJob{rj}
			return s
		},
	}, {
		name: "every replicatedJob is defaulted",
		in: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{
			{Name: "a", Template: template()},
			{Name: "b", Replicas: ptr.To[int32](4), Template: template()},
		}},
		want: func() v1alpha2.JobSetSpec {
			s := defaultedSpec()
			b := defaultedReplicatedJob("b")
			b.Replicas = ptr.To[int32](4)
			s.ReplicatedJobs = []v1alpha2.ReplicatedJob{defaultedReplicatedJob("a"), b}
			return s
		},
	}, {
		name: "failure policy: restart strategy and unnamed rules",
		in: v1alpha2.JobSetSpec{FailurePolicy: &v1alpha2.FailurePolicy{
			MaxRestarts: 3,
			Rules: []v1alpha2.FailurePolicyRule{
				{Action: v1alpha2.FailJobSet},
				{Name: "named", Action: v1alpha2.RestartJobSet},
				{Action: v1alpha2.RestartJob},
			},
		}},
		want: func() v1alpha2.JobSetSpec {
			s := defaultedSpec()
			s.FailurePolicy = &v1alpha2.FailurePolicy{
				MaxRestarts:     3,
				RestartStrategy: v1alpha2.Recreate,
				Rules: []v1alpha2.FailurePolicyRule{
					{Name: "failurePolicyRule0", Action: v1alpha2.FailJobSet},
					{Name: "named", Action: v1alpha2.RestartJobSet},
					{Name: "failurePolicyRule2", Action: v1alpha2.RestartJob},
				},
			}
			return s
		},
	}, {
		name: "failure policy: explicit restart strategy kept",
		in:   v1alpha2.JobSetSpec{FailurePolicy: &v1alpha2.FailurePolicy{RestartStrategy: v1alpha2.BlockingRecreate}},
		want: func() v1alpha2.JobSetSpec {
			s := defaultedSpec()
			s.FailurePolicy = &v1alpha2.FailurePolicy{RestartStrategy: v1alpha2.BlockingRecreate}
			return s
		},
	}, {
		name: "volume claim policies: retention",
		in: v1alpha2.JobSetSpec{VolumeClaimPolicies: []v1alpha2.VolumeClaimPolicy{
			{},
			{RetentionPolicy: &v1alpha2.VolumeRetentionPolicy{}},
			{RetentionPolicy: &v1alpha2.VolumeRetentionPolicy{WhenDeleted: ptr.To(v1alpha2.RetentionPolicyRetain)}},
		}},
		want: func() v1alpha2.JobSetSpec {
			s := defaultedSpec()
			deleted := &v1alpha2.VolumeRetentionPolicy{WhenDeleted: ptr.To(v1alpha2.RetentionPolicyDelete)}
			// An absent retentionPolicy becomes {whenDeleted: Delete}, as upstream.
			s.VolumeClaimPolicies = []v1alpha2.VolumeClaimPolicy{
				{RetentionPolicy: deleted},
				{RetentionPolicy: deleted},
				{RetentionPolicy: &v1alpha2.VolumeRetentionPolicy{WhenDeleted: ptr.To(v1alpha2.RetentionPolicyRetain)}},
			}
			return s
		},
	}, {
		name: "absent updatePolicy stays absent",
		in:   v1alpha2.JobSetSpec{},
		want: defaultedSpec,
	}, {
		name: "empty updatePolicy gets Never and a history of 10",
		in:   v1alpha2.JobSetSpec{UpdatePolicy: &v1alpha2.UpdatePolicy{}},
		want: func() v1alpha2.JobSetSpec {
			s := defaultedSpec()
			s.UpdatePolicy = &v1alpha2.UpdatePolicy{UpdateStrategy: v1alpha2.UpdateNever, RevisionHistoryLimit: ptr.To[int32](10)}
			return s
		},
	}, {
		name: "explicit updatePolicy kept",
		in:   v1alpha2.JobSetSpec{UpdatePolicy: &v1alpha2.UpdatePolicy{UpdateStrategy: v1alpha2.UpdateImmediate, RevisionHistoryLimit: ptr.To[int32](0)}},
		want: func() v1alpha2.JobSetSpec {
			s := defaultedSpec()
			s.UpdatePolicy = &v1alpha2.UpdatePolicy{UpdateStrategy: v1alpha2.UpdateImmediate, RevisionHistoryLimit: ptr.To[int32](0)}
			return s
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			want := &v1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js"}, Spec: tc.want()}

			// The generated defaulter alone.
			generated := &v1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js"}, Spec: *tc.in.DeepCopy()}
			v1alpha2.SetObjectDefaults_JobSet(generated)
			if !apiequality.Semantic.DeepEqual(generated, want) {
				t.Errorf("SetObjectDefaults_JobSet:\n%s", diff.Diff(want, generated))
			}

			// The scheme, as the API server defaults.
			scheme := newScheme()
			viaScheme := &v1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js"}, Spec: *tc.in.DeepCopy()}
			scheme.Default(viaScheme)
			if !apiequality.Semantic.DeepEqual(viaScheme, want) {
				t.Errorf("scheme.Default:\n%s", diff.Diff(want, viaScheme))
			}

			// Defaulting again changes nothing.
			again := viaScheme.DeepCopy()
			scheme.Default(again)
			if !apiequality.Semantic.DeepEqual(again, viaScheme) {
				t.Errorf("not idempotent:\n%s", diff.Diff(viaScheme, again))
			}
		})
	}
}

func TestDefaultRuleNameFormat(t *testing.T) {
	if v1alpha2.DefaultRuleNameFormat != "failurePolicyRule%d" {
		t.Errorf("DefaultRuleNameFormat = %q, upstream names rules failurePolicyRule<index>", v1alpha2.DefaultRuleNameFormat)
	}
	if v1alpha2.DefaultGroupName != "default" {
		t.Errorf("DefaultGroupName = %q, want %q", v1alpha2.DefaultGroupName, "default")
	}
}

const wireJobSet = `{
  "apiVersion": "jobset.x-k8s.io/v1alpha2",
  "kind": "JobSet",
  "metadata": {"name": "js", "namespace": "ns"},
  "spec": {
    "replicatedJobs": [
      {"name": "absent", "template": {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "i", "ports": [{"containerPort": 80}],
         "readinessProbe": {"grpc": {"port": 9000}}}]}}}}},
      {"name": "zero", "replicas": 0, "template": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}},
      {"name": "three", "replicas": 3, "template": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}}
    ]
  }
}`

// TestWireDefaults decodes a JobSet from JSON through the scheme's codecs,
// as the API server does, and encodes it back: an absent replicas becomes 1
// and an explicit 0 stays 0 on the wire.
func TestWireDefaults(t *testing.T) {
	codecs := serializer.NewCodecFactory(newScheme())

	obj, err := runtime.Decode(codecs.UniversalDecoder(jobset.SchemeGroupVersion), []byte(wireJobSet))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	internal, ok := obj.(*jobset.JobSet)
	if !ok {
		t.Fatalf("decoded a %T, want *jobset.JobSet", obj)
	}
	for i, want := range []int32{1, 0, 3} {
		if got := internal.Spec.ReplicatedJobs[i].Replicas; got != want {
			t.Errorf("internal replicatedJobs[%d].replicas = %d, want %d", i, got, want)
		}
	}

	data, err := runtime.Encode(codecs.LegacyCodec(v1alpha2.SchemeGroupVersion), internal)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	if !strings.Contains(string(data), `"replicas":0`) {
		t.Errorf("explicit replicas 0 not on the wire: %s", data)
	}
	var back v1alpha2.JobSet
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int32{1, 0, 3} {
		if got := back.Spec.ReplicatedJobs[i].Replicas; got == nil || *got != want {
			t.Errorf("wire replicatedJobs[%d].replicas = %v, want %d", i, got, want)
		}
	}
	if back.Spec.SuccessPolicy == nil || back.Spec.SuccessPolicy.Operator != v1alpha2.OperatorAll ||
		back.Spec.StartupPolicy == nil || back.Spec.StartupPolicy.StartupPolicyOrder != v1alpha2.AnyOrder ||
		back.Spec.Network == nil || !ptr.Deref(back.Spec.Network.EnableDNSHostnames, false) ||
		!ptr.Deref(back.Spec.Network.PublishNotReadyAddresses, false) {
		t.Errorf("JobSet defaults missing on the wire: %+v", back.Spec)
	}
	first := back.Spec.ReplicatedJobs[0]
	if first.GroupName != v1alpha2.DefaultGroupName ||
		ptr.Deref(first.Template.Spec.CompletionMode, "") != batchv1.IndexedCompletion ||
		first.Template.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		t.Errorf("replicatedJob defaults missing on the wire: %+v", first)
	}
	c := first.Template.Spec.Template.Spec.Containers[0]
	if c.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("ports[0].protocol = %q on the wire, want TCP", c.Ports[0].Protocol)
	}
	if s := c.ReadinessProbe.GRPC.Service; s == nil || *s != "" {
		t.Errorf("readinessProbe.grpc.service = %v on the wire, want \"\"", s)
	}

	// Decoding to v1alpha2 defaults as well, keeping the explicit 0.
	ext, err := runtime.Decode(codecs.UniversalDecoder(v1alpha2.SchemeGroupVersion), []byte(wireJobSet))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int32{1, 0, 3} {
		if got := ext.(*v1alpha2.JobSet).Spec.ReplicatedJobs[i].Replicas; got == nil || *got != want {
			t.Errorf("v1alpha2 replicatedJobs[%d].replicas = %v, want %d", i, got, want)
		}
	}
}
