package protobufcompare

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	clientset "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
)

// waitTimeout bounds each case's watches and requests.
const waitTimeout = time.Minute

// Case is one comparison; it uses its own namespace, which must exist.
type Case struct {
	Name string
	Run  func(t *testing.T, pb, js clientset.Interface, ns string)
}

// Cases are every comparison, one per served resource and errors.
var Cases = []Case{
	{"JobSetWrites", testJobSetWrites},
	{"JobSetListAndWatch", testJobSetListAndWatch},
	{"ReplicatedJobs", testReplicatedJobs},
	{"Errors", testErrors},
}

// testJobSetWrites creates, updates, patches and writes the status of a
// JobSet that sets every field, in protobuf, and reads each result back
// in JSON.
func testJobSetWrites(t *testing.T, pb, js clientset.Interface, ns string) {
	ctx := context.Background()
	full := fullJobSet(t, ns, "full")
	pbJobSets, jsonJobSets := pb.JobsetV1alpha2().JobSets(ns), js.JobsetV1alpha2().JobSets(ns)

	created, err := pbJobSets.Create(ctx, full, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	check := func(step string, fromProtobuf *v1alpha2.JobSet) {
		t.Helper()
		fromJSON, err := jsonJobSets.Get(ctx, full.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: JSON get: %v", step, err)
		}
		same(t, step, fromProtobuf, fromJSON)
		got, err := pbJobSets.Get(ctx, full.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: protobuf get: %v", step, err)
		}
		same(t, step+" then get", got, fromJSON)
	}
	check("create", created)
	if len(created.Spec.ReplicatedJobs) != 2 || created.Spec.FailurePolicy == nil || len(created.Spec.VolumeClaimPolicies) != 1 {
		t.Fatalf("create lost fields of the spec: %+v", created.Spec)
	}

	created.Labels["step"] = "update"
	updated, err := pbJobSets.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	check("update", updated)

	patched, err := pbJobSets.Patch(ctx, full.Name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"step":"patch"}},"spec":{"ttlSecondsAfterFinished":3600}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	if patched.Annotations["step"] != "patch" || *patched.Spec.TTLSecondsAfterFinished != 3600 {
		t.Fatalf("merge patch not applied: annotations %v ttl %v", patched.Annotations, *patched.Spec.TTLSecondsAfterFinished)
	}
	check("merge patch", patched)

	// The fixture's status is terminal, so the spec is written first.
	patched.Status = full.Status
	withStatus, err := pbJobSets.UpdateStatus(ctx, patched, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if withStatus.Status.Restarts != 1 || len(withStatus.Status.Conditions) != 1 || withStatus.Status.TerminalState != "Completed" {
		t.Fatalf("status not written: %+v", withStatus.Status)
	}
	check("update status", withStatus)

	statusPatched, err := pbJobSets.Patch(ctx, full.Name, types.MergePatchType,
		[]byte(`{"status":{"restarts":2}}`), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatalf("status patch: %v", err)
	}
	if statusPatched.Status.Restarts != 2 {
		t.Fatalf("status patch not applied: restarts %d", statusPatched.Status.Restarts)
	}
	check("status patch", statusPatched)

	if err := pbJobSets.Delete(ctx, full.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := jsonJobSets.Get(ctx, full.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: %v, want NotFound", err)
	}
}

// testJobSetListAndWatch lists and watches in protobuf and compares every
// item and every event's object with the JSON list.
func testJobSetListAndWatch(t *testing.T, pb, js clientset.Interface, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	pbJobSets, jsonJobSets := pb.JobsetV1alpha2().JobSets(ns), js.JobsetV1alpha2().JobSets(ns)

	start, err := pbJobSets.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("protobuf list: %v", err)
	}
	w, err := pbJobSets.Watch(ctx, metav1.ListOptions{ResourceVersion: start.ResourceVersion})
	if err != nil {
		t.Fatalf("protobuf watch: %v", err)
	}
	defer w.Stop()

	names := []string{"a", "b", "c"}
	for _, n := range names {
		if _, err := jsonJobSets.Create(ctx, fullJobSet(t, ns, n), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", n, err)
		}
	}
	if _, err := jsonJobSets.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := jsonJobSets.Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	pbList, err := pbJobSets.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("protobuf list: %v", err)
	}
	jsonList, err := jsonJobSets.List(ctx, metav1.ListOptions{ResourceVersion: pbList.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if err != nil {
		t.Fatalf("JSON list: %v", err)
	}
	if len(pbList.Items) != 2 {
		t.Fatalf("protobuf list has %d items, want 2", len(pbList.Items))
	}
	same(t, "list", pbList.Items, jsonList.Items)
	same(t, "list metadata", pbList.ListMeta, jsonList.ListMeta)

	// Five events: three creations, one change, one deletion. Each
	// object is compared with the JSON read at its resourceVersion.
	want := []watch.EventType{watch.Added, watch.Added, watch.Added, watch.Modified, watch.Deleted}
	for i, typ := range want {
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		case <-ctx.Done():
			t.Fatalf("event %d: none before the timeout", i)
		}
		obj, ok := ev.Object.(*v1alpha2.JobSet)
		if ev.Type != typ || !ok {
			t.Fatalf("event %d: %s %T, want %s *JobSet", i, ev.Type, ev.Object, typ)
		}
		if typ == watch.Deleted {
			if obj.Name != "c" || len(obj.Spec.ReplicatedJobs) != 2 {
				t.Errorf("deleted event: %s with %d replicatedJobs", obj.Name, len(obj.Spec.ReplicatedJobs))
			}
			continue
		}
		atRV, err := jsonJobSets.List(ctx, metav1.ListOptions{
			FieldSelector:        "metadata.name=" + obj.Name,
			ResourceVersion:      obj.ResourceVersion,
			ResourceVersionMatch: metav1.ResourceVersionMatchExact,
		})
		if err != nil || len(atRV.Items) != 1 {
			t.Fatalf("event %d: JSON list of %s at %s: %v", i, obj.Name, obj.ResourceVersion, err)
		}
		same(t, "watch event "+string(typ)+" "+obj.Name, obj, &atRV.Items[0])
	}
}

// testReplicatedJobs gets, lists and watches the replicatedjobs projection
// and reads and writes its scale in protobuf.
func testReplicatedJobs(t *testing.T, pb, js clientset.Interface, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	full := fullJobSet(t, ns, "train")
	if _, err := js.JobsetV1alpha2().JobSets(ns).Create(ctx, full, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pbRJ, jsonRJ := pb.JobsetV1alpha2().ReplicatedJobResources(ns), js.JobsetV1alpha2().ReplicatedJobResources(ns)

	pbList, err := pbRJ.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("protobuf list: %v", err)
	}
	jsonList, err := jsonRJ.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pbList.Items) != 2 {
		t.Fatalf("protobuf list has %d replicatedJobs, want 2", len(pbList.Items))
	}
	same(t, "replicatedjobs list", pbList.Items, jsonList.Items)

	pbGet, err := pbRJ.Get(ctx, "train.workers", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("protobuf get: %v", err)
	}
	jsonGet, err := jsonRJ.Get(ctx, "train.workers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	same(t, "replicatedjob get", pbGet, jsonGet)
	if pbGet.Spec.Replicas != 4 || *pbGet.Spec.Parallelism != 8 {
		t.Fatalf("projection: %+v", pbGet.Spec)
	}

	w, err := pbRJ.Watch(ctx, metav1.ListOptions{ResourceVersion: pbList.ResourceVersion})
	if err != nil {
		t.Fatalf("protobuf watch: %v", err)
	}
	defer w.Stop()

	scale, err := pbRJ.GetScale(ctx, "train.workers", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("protobuf get scale: %v", err)
	}
	jsonScale, err := jsonRJ.GetScale(ctx, "train.workers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	same(t, "scale get", scale, jsonScale)
	if scale.Spec.Replicas != 8 {
		t.Fatalf("scale replicas %d, want the template's parallelism 8", scale.Spec.Replicas)
	}

	scale.Spec.Replicas = 3
	scaled, err := pbRJ.UpdateScale(ctx, "train.workers", scale, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("protobuf update scale: %v", err)
	}
	jsonScale, err = jsonRJ.GetScale(ctx, "train.workers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	same(t, "scale update", scaled, jsonScale)
	if scaled.Spec.Replicas != 3 {
		t.Fatalf("scale update: replicas %d, want 3", scaled.Spec.Replicas)
	}

	// The scale write changes the JobSet, so both of its replicatedJobs
	// get a MODIFIED event carrying the new resourceVersion.
	got := map[string]*v1alpha2.ReplicatedJobResource{}
	for len(got) < 2 {
		select {
		case ev := <-w.ResultChan():
			obj, ok := ev.Object.(*v1alpha2.ReplicatedJobResource)
			if ev.Type != watch.Modified || !ok {
				t.Fatalf("event %s %T, want MODIFIED *ReplicatedJobResource", ev.Type, ev.Object)
			}
			got[obj.Name] = obj
		case <-ctx.Done():
			t.Fatalf("watch: %d of 2 events before the timeout", len(got))
		}
	}
	jsonGet, err = jsonRJ.Get(ctx, "train.workers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	same(t, "replicatedjob watch event", got["train.workers"], jsonGet)
}

// testErrors checks that errors come back as protobuf Status objects with
// their reason and field causes intact.
func testErrors(t *testing.T, pb, _ clientset.Interface, ns string) {
	ctx := context.Background()
	_, err := pb.JobsetV1alpha2().JobSets(ns).Get(ctx, "absent", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("get of an absent JobSet: %v, want NotFound", err)
	}
	bad := fullJobSet(t, ns, "bad")
	bad.Spec.ReplicatedJobs[1].Name = bad.Spec.ReplicatedJobs[0].Name
	_, err = pb.JobsetV1alpha2().JobSets(ns).Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("create with duplicate replicatedJob names: %v, want Invalid", err)
	}
	st := err.(apierrors.APIStatus).Status()
	if st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Field == "" {
		t.Errorf("invalid create: status without field causes: %+v", st)
	}
}
