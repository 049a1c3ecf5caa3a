package volumeclaims

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

func claimTemplate(size string) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

func jobSetWith(when jobset.RetentionPolicyType, size string) *jobset.JobSet {
	return &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns"},
		Spec: jobset.JobSetSpec{VolumeClaimPolicies: []jobset.VolumeClaimPolicy{{
			Templates:       []corev1.PersistentVolumeClaim{claimTemplate(size)},
			RetentionPolicy: &jobset.VolumeRetentionPolicy{WhenDeleted: ptr.To(when)},
		}}},
	}
}

func existingClaim(size string) *corev1.PersistentVolumeClaim {
	c := claimTemplate(size)
	c.Name, c.Namespace = "data-train", "ns"
	// What the cluster adds once the claim is bound.
	c.Spec.VolumeName = "pv-1"
	c.Spec.StorageClassName = ptr.To("standard")
	c.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
	return &c
}

func validate(t *testing.T, js *jobset.JobSet, objects ...*corev1.PersistentVolumeClaim) error {
	t.Helper()
	client := fake.NewSimpleClientset()
	for _, o := range objects {
		if err := client.Tracker().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	p := New()
	p.SetExternalKubeClientSet(client)
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	attrs := admission.NewAttributesRecord(js, nil, jobset.Kind("JobSet").WithVersion("v1alpha2"), js.Namespace, js.Name,
		jobset.Resource("jobsets").WithVersion("v1alpha2"), "", admission.Create, &metav1.CreateOptions{}, false, nil)
	return p.Validate(context.Background(), attrs, nil)
}

func TestVolumeClaims(t *testing.T) {
	for _, tc := range []struct {
		name     string
		js       *jobset.JobSet
		existing []*corev1.PersistentVolumeClaim
		want     []string // substrings of the error; none: accepted
	}{
		{name: "no claim yet", js: jobSetWith(jobset.RetentionPolicyDelete, "1Gi")},
		{name: "a retained claim that matches, bound", js: jobSetWith(jobset.RetentionPolicyRetain, "1Gi"), existing: []*corev1.PersistentVolumeClaim{existingClaim("1Gi")}},
		{
			name: "an existing claim the JobSet would delete", js: jobSetWith(jobset.RetentionPolicyDelete, "1Gi"),
			existing: []*corev1.PersistentVolumeClaim{existingClaim("1Gi")},
			want:     []string{"spec.volumeClaimPolicies[0].retentionPolicy.whenDeleted", "retentionPolicy must be retain when PVC exists", "claim data-train already exists"},
		},
		{
			name: "a claim being deleted does not count", js: jobSetWith(jobset.RetentionPolicyDelete, "2Gi"),
			existing: []*corev1.PersistentVolumeClaim{func() *corev1.PersistentVolumeClaim {
				c := existingClaim("1Gi")
				c.DeletionTimestamp = &metav1.Time{}
				c.Finalizers = []string{"kubernetes.io/pvc-protection"}
				return c
			}()},
		},
		{
			name: "an existing claim of another size", js: jobSetWith(jobset.RetentionPolicyRetain, "2Gi"),
			existing: []*corev1.PersistentVolumeClaim{existingClaim("1Gi")},
			want:     []string{"spec.volumeClaimPolicies[0].templates[0].spec", "spec does not match existing PVC data-train in namespace ns"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validate(t, tc.js, tc.existing...)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
		})
	}
}

func TestOnlyJobSetCreates(t *testing.T) {
	p := New()
	if p.Handles(admission.Update) || !p.Handles(admission.Create) {
		t.Fatal("the plugin must handle creates only: a JobSet's own claims exist once it runs")
	}
	if err := New().ValidateInitialization(); err == nil {
		t.Fatal("no client, no error")
	}
}
