package apiserver

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nativejobset/jobset/test/integration/framework"
)

// A standalone server has no garbage collector to remove the
// foregroundDeletion and orphan finalizers. Every propagation policy must
// still delete the JobSet, single or by collection, instead of leaving it
// Terminating forever.
func TestStandaloneDeletionWithEveryPropagationPolicy(t *testing.T) {
	s := framework.StartServer(t)
	ns := "default"
	ctx := context.Background()
	jobsets := s.Client.JobsetV1alpha2().JobSets(ns)
	orphan := true
	for name, opts := range map[string]metav1.DeleteOptions{
		"foreground": {PropagationPolicy: ptrTo(metav1.DeletePropagationForeground)},
		"orphan":     {PropagationPolicy: ptrTo(metav1.DeletePropagationOrphan)},
		"background": {PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)},
		"orphan-dep": {OrphanDependents: &orphan},
	} {
		mustCreate(t, s, newJobSet(ns, name))
		if err := jobsets.Delete(ctx, name, opts); err != nil {
			t.Errorf("delete %s: %v", name, err)
		}
		assertAbsent(t, s, ns, name)
	}

	for _, name := range []string{"c1", "c2"} {
		mustCreate(t, s, newJobSet(ns, name, withLabels(map[string]string{"set": "c"})))
	}
	err := jobsets.DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationForeground)},
		metav1.ListOptions{LabelSelector: "set=c"})
	if err != nil {
		t.Fatalf("delete collection: %v", err)
	}
	assertAbsent(t, s, ns, "c1")
	assertAbsent(t, s, ns, "c2")
}

func ptrTo[T any](v T) *T { return &v }
