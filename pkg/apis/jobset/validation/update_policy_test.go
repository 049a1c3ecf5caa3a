package validation

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

func withStrategy(s jobset.UpdateStrategy) func(*jobset.JobSet) {
	return func(js *jobset.JobSet) {
		js.Spec.UpdatePolicy = &jobset.UpdatePolicy{UpdateStrategy: s, RevisionHistoryLimit: ptr.To[int32](10)}
	}
}

func both(fns ...func(*jobset.JobSet)) func(*jobset.JobSet) {
	return func(js *jobset.JobSet) {
		for _, fn := range fns {
			fn(js)
		}
	}
}

func TestValidateJobSetUpdateWithUpdateStrategy(t *testing.T) {
	const rj0, rj1, pod1 = updRJ0, updRJ1, updPod1
	opportunistic := withStrategy(jobset.UpdateOpportunistic)
	immediate := withStrategy(jobset.UpdateImmediate)
	never := withStrategy(jobset.UpdateNever)
	newImage := func(js *jobset.JobSet) {
		js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0].Image = "busybox:2"
	}
	newEnvAndBackoff := func(js *jobset.JobSet) {
		js.Spec.ReplicatedJobs[0].Template.Spec.BackoffLimit = ptr.To[int32](7)
		js.Spec.ReplicatedJobs[0].Template.Labels = map[string]string{"team": "ml"}
		c := &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0]
		c.Env = []corev1.EnvVar{{Name: "FIX", Value: "1"}}
		js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "scratch"}}
	}

	cases := []struct {
		name     string
		old, new func(js *jobset.JobSet)
		want     []wantErr
	}{
		{name: "Opportunistic: image change", old: opportunistic, new: newImage},
		{name: "Immediate: image change", old: immediate, new: newImage},
		{name: "Opportunistic: any template field", old: opportunistic, new: newEnvAndBackoff},
		{name: "Opportunistic while suspended: image change", old: both(opportunistic, func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(true) }), new: newImage},
		{
			name: "Never: image change",
			old:  never,
			new:  newImage,
			want: []wantErr{{errInvalid, pod1 + ".spec.containers", immut}},
		},
		{
			name: "absent policy: image change",
			new:  newImage,
			want: []wantErr{{errInvalid, pod1 + ".spec.containers", immut}},
		},
		{name: "switch to Opportunistic and edit in one write", new: both(opportunistic, newImage)},
		{
			name: "switch to Never and edit in one write",
			old:  opportunistic,
			new:  both(never, newImage),
			want: []wantErr{{errInvalid, pod1 + ".spec.containers", immut}},
		},
		{name: "strategy change alone", old: opportunistic, new: immediate},
		{name: "policy removed", old: immediate, new: func(js *jobset.JobSet) { js.Spec.UpdatePolicy = nil }},
		{
			name: "Opportunistic: completionMode change",
			old:  opportunistic,
			new: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].Template.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
				newImage(js)
			},
			want: []wantErr{{errInvalid, rj1 + ".template.spec.completionMode", immut}},
		},
		{
			name: "Opportunistic: rename",
			old:  opportunistic,
			new:  func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].Name = "trainers" },
			want: []wantErr{{errInvalid, rj1 + ".name", immut}},
		},
		{
			name: "Opportunistic: add a replicatedJob",
			old:  opportunistic,
			new: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, testRJ("evaluator", 1, 1))
			},
			want: []wantErr{{errForbidden, "spec.replicatedJobs", "cannot be added or removed"}},
		},
		{
			name: "Opportunistic: reorder",
			old:  opportunistic,
			new: func(js *jobset.JobSet) {
				rjs := js.Spec.ReplicatedJobs
				rjs[0], rjs[1] = rjs[1], rjs[0]
			},
			want: []wantErr{{errInvalid, rj0 + ".name", immut}, {errInvalid, rj1 + ".name", immut}},
		},
		{
			name: "Opportunistic: parallelism keeps the elastic rules",
			old:  opportunistic,
			new: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = ptr.To[int32](6)
			},
			want: []wantErr{{errInvalid, rj1 + ".template.spec.completions", "must equal parallelism"}},
		},
		{
			name: "Opportunistic: other spec fields stay immutable",
			old:  opportunistic,
			new:  func(js *jobset.JobSet) { js.Spec.Network.Subdomain = "svc"; newImage(js) },
			want: []wantErr{{errInvalid, "spec.network", valueImmut}},
		},
		{
			name: "Opportunistic: a claim no longer mounted",
			old:  both(opportunistic, func(js *jobset.JobSet) { withClaims(js, "data") }),
			new: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0].VolumeMounts = nil
			},
			want: []wantErr{{errInvalid, "spec.volumeClaimPolicies[0].templates[0].metadata.name", "must be mounted"}},
		},
		{
			name: "Opportunistic: a pod volume clashes with a claim",
			old:  both(opportunistic, func(js *jobset.JobSet) { withClaims(js, "data") }),
			new: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "data"}}
			},
			want: []wantErr{{errInvalid, rj0 + ".template.spec.template.spec.volumes[0].name", "must not have the name"}},
		},
		{
			name: "Opportunistic: invalid pod label",
			old:  opportunistic,
			new: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].Template.Spec.Template.Labels = map[string]string{"a": "b c"}
			},
			want: []wantErr{{errInvalid, pod1 + ".metadata.labels", "valid label"}},
		},
		{
			name: "Opportunistic: terminal JobSet stays immutable",
			old: both(opportunistic, func(js *jobset.JobSet) {
				js.Status.Conditions = []metav1.Condition{completed()}
			}),
			new:  newImage,
			want: []wantErr{{errForbidden, "spec", terminal}},
		},
		{
			name: "strategy change of a terminal JobSet",
			old: both(opportunistic, func(js *jobset.JobSet) {
				js.Status.TerminalState = string(jobset.JobSetFailed)
			}),
			new:  never,
			want: []wantErr{{errForbidden, "spec", terminal}},
		},
		{
			name: "unknown strategy",
			new:  withStrategy("Rolling"),
			want: []wantErr{{errNotSupported, "spec.updatePolicy.updateStrategy", `"Opportunistic"`}},
		},
		{
			name: "negative revisionHistoryLimit",
			old:  opportunistic,
			new:  func(js *jobset.JobSet) { js.Spec.UpdatePolicy.RevisionHistoryLimit = ptr.To[int32](-1) },
			want: []wantErr{{errInvalid, "spec.updatePolicy.revisionHistoryLimit", ""}},
		},
		{
			name: "revisionHistoryLimit change",
			old:  opportunistic,
			new:  func(js *jobset.JobSet) { js.Spec.UpdatePolicy.RevisionHistoryLimit = ptr.To[int32](2) },
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

func TestValidateUpdatePolicyOnCreate(t *testing.T) {
	cases := []struct {
		name   string
		policy *jobset.UpdatePolicy
		want   []wantErr
	}{
		{name: "absent"},
		{name: "Opportunistic", policy: &jobset.UpdatePolicy{UpdateStrategy: jobset.UpdateOpportunistic, RevisionHistoryLimit: ptr.To[int32](3)}},
		{name: "zero history", policy: &jobset.UpdatePolicy{UpdateStrategy: jobset.UpdateImmediate, RevisionHistoryLimit: ptr.To[int32](0)}},
		{
			name:   "empty strategy",
			policy: &jobset.UpdatePolicy{},
			want:   []wantErr{{errNotSupported, "spec.updatePolicy.updateStrategy", ""}},
		},
		{
			name:   "negative history",
			policy: &jobset.UpdatePolicy{UpdateStrategy: jobset.UpdateNever, RevisionHistoryLimit: ptr.To[int32](-3)},
			want:   []wantErr{{errInvalid, "spec.updatePolicy.revisionHistoryLimit", ""}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			js := testJobSet()
			js.Spec.UpdatePolicy = tc.policy
			checkErrors(t, ValidateJobSet(js), tc.want)
		})
	}
}

func TestTemplateMutabilityMaskUpdatable(t *testing.T) {
	oldT := testRJ("w", 1, 2).Template
	newT := *oldT.DeepCopy()
	newT.Spec.Template.Spec.Containers[0].Image = "changed"
	newT.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	newT.Spec.Parallelism = ptr.To[int32](5)

	got := templateMutability{updatable: true}.mask(&newT, &oldT)
	if got.Spec.Template.Spec.Containers[0].Image != "busybox" {
		t.Errorf("the image must be masked under an update strategy")
	}
	if *got.Spec.CompletionMode != batchv1.NonIndexedCompletion {
		t.Errorf("completionMode must never be masked")
	}
	if *got.Spec.Parallelism != 5 {
		t.Errorf("parallelism must keep its own rules (not elastic: immutable)")
	}
	got = templateMutability{updatable: true, elastic: true}.mask(&newT, &oldT)
	if *got.Spec.Parallelism != 2 {
		t.Errorf("elastic parallelism must be masked, got %d", *got.Spec.Parallelism)
	}
}
