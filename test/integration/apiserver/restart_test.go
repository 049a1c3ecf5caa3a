package apiserver

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/test/integration/framework"
)

// TestRestartKeepsObjects stops a server and starts another on the same
// embedded etcd directory: the JobSets written before are still there,
// unchanged, and can be written again.
func TestRestartKeepsObjects(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ns := "restart"

	first := framework.StartServerInDir(t, dir, nil)
	created := mustCreate(t, first, newJobSet(ns, "survivor", suspended))
	created.Status.Restarts = 3
	withStatus, err := first.Client.JobsetV1alpha2().JobSets(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, first, newJobSet(ns, "doomed"))
	if err := first.Client.JobsetV1alpha2().JobSets(ns).Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	first.Stop()

	second := framework.StartServerInDir(t, dir, nil)
	if second.EtcdDir != first.EtcdDir {
		t.Fatalf("etcd dir %s, want %s", second.EtcdDir, first.EtcdDir)
	}
	got := mustGet(t, second, ns, "survivor")
	if got.UID != withStatus.UID || got.ResourceVersion != withStatus.ResourceVersion || got.Generation != 1 {
		t.Errorf("after restart: uid %s rv %s generation %d, want %s %s 1", got.UID, got.ResourceVersion, got.Generation, withStatus.UID, withStatus.ResourceVersion)
	}
	if got.Status.Restarts != 3 || !ptr.Deref(got.Spec.Suspend, false) || len(got.Spec.ReplicatedJobs) != 2 {
		t.Errorf("after restart: status %+v suspend %v replicatedJobs %d", got.Status, got.Spec.Suspend, len(got.Spec.ReplicatedJobs))
	}
	assertAbsent(t, second, ns, "doomed")

	list, err := second.Client.JobsetV1alpha2().JobSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("list after restart has %d items, want 1", len(list.Items))
	}

	got.Spec.Suspend = ptr.To(false)
	updated, err := second.Client.JobsetV1alpha2().JobSets(ns).Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update after restart: %v", err)
	}
	if updated.Generation != 2 {
		t.Errorf("generation after update = %d, want 2", updated.Generation)
	}
}
