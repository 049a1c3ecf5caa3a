package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// BenchmarkSyncLargeJobSet measures one sync of a running JobSet of 2,000
// one-pod Jobs with nothing to do: the cost every Job event paid before
// count changes were batched, and what each batched sync still pays.
func BenchmarkSyncLargeJobSet(b *testing.B) {
	const replicas = 2000
	js := newJobSet("big", func(js *jobset.JobSet) {
		w := rjob("workers", replicas)
		w.Template.Spec.Parallelism = ptr.To[int32](1)
		w.Template.Spec.Completions = ptr.To[int32](1)
		js.Spec.ReplicatedJobs = []jobset.ReplicatedJob{w}
	})
	fx := newFixture(b, js)
	fx.sync("big")
	jl, err := fx.kube.BatchV1().Jobs(ns).List(fx.ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if len(jl.Items) != replicas {
		b.Fatalf("%d Jobs after the first sync, want %d", len(jl.Items), replicas)
	}
	for i := range jl.Items {
		j := &jl.Items[i]
		j.Status.Active, j.Status.Ready = 1, ptr.To[int32](1)
		if _, err := fx.kube.BatchV1().Jobs(ns).UpdateStatus(fx.ctx, j, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	// Two syncs: the first writes the status the counts call for, the
	// second finds nothing to do.
	fx.sync("big")
	fx.sync("big")
	if got := fx.jobSet("big").Status.ReplicatedJobsStatus; len(got) != 1 || got[0].Active != replicas {
		b.Fatalf("status %+v, want %d active", got, replicas)
	}
	// The fixture holds the built Jobs strongly for its checks; the
	// controller holds them weakly, so a collection between two syncs
	// makes the next one build them again. Measure that.
	fx.c.built.pinned = nil
	before := len(fx.kube.Actions()) + len(fx.jsc.Actions())
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := fx.c.sync(fx.ctx, ns+"/big"); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if after := len(fx.kube.Actions()) + len(fx.jsc.Actions()); after != before {
		b.Fatalf("a sync with nothing to do made %d requests", after-before)
	}
}
