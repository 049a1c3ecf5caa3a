package replicatedjobs

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/nativejobset/jobset/pkg/generated/informers/externalversions"
	"github.com/nativejobset/jobset/test/integration/framework"
)

// TestInformer runs the generated informer of ReplicatedJobs: its list and
// watch (with bookmarks, and the streaming list when client-go uses it)
// keep the lister in step with the JobSets.
func TestInformer(t *testing.T) {
	s := framework.StartServer(t)
	ns := "rj-informer"
	create(t, s, newJobSet(ns, "inf"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := externalversions.NewSharedInformerFactoryWithOptions(s.Client, 0, externalversions.WithNamespace(ns))
	informer := factory.Jobset().V1alpha2().ReplicatedJobResources()
	lister := informer.Lister()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		t.Fatalf("informer did not sync")
	}
	items, err := lister.List(labels.Everything())
	if err != nil || len(items) != 2 {
		t.Fatalf("lister has %d items (%v), want 2", len(items), err)
	}

	if err := scaleTo(s, ns, "inf.workers", 7); err != nil {
		t.Fatalf("scale: %v", err)
	}
	create(t, s, newJobSet(ns, "inf2"))
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		w, err := lister.ReplicatedJobResources(ns).Get("inf.workers")
		if err != nil || w.Spec.Parallelism == nil || *w.Spec.Parallelism != 7 {
			return false, nil
		}
		all, _ := lister.List(labels.Everything())
		return len(all) == 4, nil
	})
	if err != nil {
		all, _ := lister.List(labels.Everything())
		t.Fatalf("lister did not follow: %d items", len(all))
	}

	if err := s.Client.JobsetV1alpha2().JobSets(ns).Delete(ctx, "inf", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		all, _ := lister.List(labels.Everything())
		return len(all) == 2, nil
	})
	if err != nil {
		t.Fatalf("lister kept the deleted JobSet's ReplicatedJobs")
	}
}
