package controller

import (
	"runtime"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// TestOwnedJobsBuildsOnlyChangedJobs: a second read of the same cache
// returns the Jobs built by the first; a Job updated in the cache is built
// anew, with its new status; a Job gone from the cache, or owned by
// another JobSet, is not returned.
func TestOwnedJobsBuildsOnlyChangedJobs(t *testing.T) {
	js := newJobSet("js")
	fx := newFixture(t, js)
	fx.sync("js") // creates js-leader-0, js-workers-0, js-workers-1
	fx.refresh()
	first, err := fx.c.ownedJobs(js)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 3 {
		t.Fatalf("%d Jobs, want 3", len(first))
	}
	second, err := fx.c.ownedJobs(js)
	if err != nil {
		t.Fatal(err)
	}
	for name, j := range first {
		if second[name] != j {
			t.Fatalf("Job %s built again with no change in the cache", name)
		}
	}

	store := fx.f.Kube.Batch().V1().Jobs().Informer().GetIndexer()
	updated := fx.job("js-workers-0")
	updated.ResourceVersion = "99"
	updated.Status.Active = 2
	if err := store.Update(fx.trimmed(updated)); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(fx.trimmed(fx.job("js-workers-1"))); err != nil {
		t.Fatal(err)
	}
	foreign := fx.job("js-leader-0").DeepCopy()
	foreign.Name, foreign.UID = "js-foreign", "uid-foreign"
	foreign.OwnerReferences = []metav1.OwnerReference{{APIVersion: jobset.SchemeGroupVersion.String(), Kind: "JobSet",
		Name: "js", UID: types.UID("another"), Controller: ptr.To(true)}}
	if err := store.Add(fx.trimmed(foreign)); err != nil {
		t.Fatal(err)
	}

	third, err := fx.c.ownedJobs(js)
	if err != nil {
		t.Fatal(err)
	}
	if len(third) != 2 || third["js-workers-1"] != nil || third["js-foreign"] != nil {
		t.Fatalf("Jobs %v, want js-leader-0 and js-workers-0", keysOf(third))
	}
	if third["js-leader-0"] != first["js-leader-0"] {
		t.Fatal("the unchanged Job was built again")
	}
	if w := third["js-workers-0"]; w == first["js-workers-0"] || w.Status.Active != 2 || w.ResourceVersion != "99" {
		t.Fatalf("the updated Job reads active %d at version %s, want 2 at 99", w.Status.Active, w.ResourceVersion)
	}
}

// TestBuiltJobsAreHeldWeakly: once nothing uses the Jobs a sync built, a
// garbage collection frees them.
func TestBuiltJobsAreHeldWeakly(t *testing.T) {
	b := newBuiltJobs()
	b.keep("ns/js", &jobsBuilt{byName: map[string]builtJob{"j": {job: &batchv1.Job{}}}})
	runtime.GC()
	if b.last("ns/js") != nil {
		t.Fatal("the built Jobs outlived a garbage collection with no sync using them")
	}
	kept := &jobsBuilt{byName: map[string]builtJob{"j": {job: &batchv1.Job{}}}}
	b.keep("ns/js", kept)
	runtime.GC()
	if b.last("ns/js") != kept {
		t.Fatal("the built Jobs were freed while in use")
	}
	runtime.KeepAlive(kept)
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestSmallJobSetsKeepNothing: a JobSet of fewer than minJobs Jobs builds
// them on every read and keeps none.
func TestSmallJobSetsKeepNothing(t *testing.T) {
	js := newJobSet("js")
	fx := newFixture(t, js)
	fx.sync("js")
	fx.refresh()
	fx.c.built.minJobs = 4 // the JobSet has 3
	delete(fx.c.built.pinned, ns+"/js")
	first, err := fx.c.ownedJobs(js)
	if err != nil {
		t.Fatal(err)
	}
	second, err := fx.c.ownedJobs(js)
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != 3 || second["js-leader-0"] == first["js-leader-0"] {
		t.Fatalf("%d Jobs, the leader's shared: %v", len(second), second["js-leader-0"] == first["js-leader-0"])
	}
	if fx.c.built.pinned[ns+"/js"] != nil || fx.c.built.last(ns+"/js") != nil {
		t.Fatal("a JobSet under minJobs kept its built Jobs")
	}
}
