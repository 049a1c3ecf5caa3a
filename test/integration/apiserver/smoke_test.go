package apiserver

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/integration/framework"
)

func TestCreateGetDefaults(t *testing.T) {
	s := framework.StartServer(t)
	ctx := context.Background()
	js := &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"},
		Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{{
			Name: "workers",
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "c", Image: "busybox",
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				}}},
			}}},
		}}},
	}
	created, err := s.Client.JobsetV1alpha2().JobSets("default").Create(ctx, js, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	got, err := s.Client.JobsetV1alpha2().JobSets("default").Get(ctx, "smoke", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.ResourceVersion != created.ResourceVersion || got.Generation != 1 {
		t.Errorf("got rv %s generation %d, want rv %s generation 1", got.ResourceVersion, got.Generation, created.ResourceVersion)
	}
	rj := got.Spec.ReplicatedJobs[0]
	if rj.Replicas == nil || *rj.Replicas != 1 || rj.GroupName != "default" {
		t.Errorf("replicatedJob defaults not applied: replicas %v groupName %q", rj.Replicas, rj.GroupName)
	}
	if got.Spec.SuccessPolicy == nil || got.Spec.SuccessPolicy.Operator != v1alpha2.OperatorAll {
		t.Errorf("successPolicy = %+v, want operator All", got.Spec.SuccessPolicy)
	}
	if p := rj.Template.Spec.Template.Spec.Containers[0].Ports[0].Protocol; p != corev1.ProtocolTCP {
		t.Errorf("container port protocol = %q, want TCP from the schema defaults", p)
	}
}
