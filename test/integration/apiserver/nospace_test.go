package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nativejobset/jobset/pkg/apiserver"
	"github.com/nativejobset/jobset/test/integration/framework"
)

// When the embedded etcd's database reaches its quota, writes get 507 (not
// 500) and the metric says so, while /readyz stays ready and gets, lists
// and deletes work (with one replica, a failing /readyz would make
// kube-apiserver refuse the very deletes that free the space); after the
// JobSets are deleted the server compacts, defragments and disarms the
// alarm by itself, and writes work again.
func TestNospaceThroughTheAPI(t *testing.T) {
	// bbolt grows the file in 16 MiB steps past 16 MiB, so with 40 MiB
	// the alarm comes with about 32 MiB of data: well above the half of
	// the quota under which the server disarms it.
	const quota = 40 * 1024 * 1024
	s := framework.StartServerWithOptions(t, func(o *apiserver.Options) {
		o.EmbeddedEtcdQuotaBackendBytes = quota
		o.EmbeddedEtcdMaintenanceInterval = 200 * time.Millisecond
		o.Recommended.Etcd.StorageConfig.CompactionInterval = 500 * time.Millisecond
	})
	ns := "default"
	ctx := context.Background()
	jobsets := s.Client.JobsetV1alpha2().JobSets(ns)
	raw := newRawClient(t, s.Config)

	// Annotations may hold 256 KiB in all.
	const pad = 50 * 1024
	var refused error
	for i := 0; i < 3*quota/pad && refused == nil; i++ {
		_, err := jobsets.Create(ctx, padded(ns, fmt.Sprintf("fill-%d", i), pad), metav1.CreateOptions{})
		if err != nil {
			refused = err
		}
	}
	if refused == nil {
		t.Fatal("three times the quota was stored without a refusal")
	}
	if code := codeOf(refused); code != http.StatusInsufficientStorage || !strings.Contains(refused.Error(), "NOSPACE") {
		t.Fatalf("write over the quota: %v (code %d); want 507 naming NOSPACE", refused, code)
	}
	if resp := raw.get(t, "/readyz?verbose"); resp.code != http.StatusOK {
		t.Errorf("/readyz with the alarm raised: %v; want ready", resp)
	}
	if _, err := jobsets.Get(ctx, "fill-0", metav1.GetOptions{}); err != nil {
		t.Errorf("get under the alarm: %v", err)
	}
	if list, err := jobsets.List(ctx, metav1.ListOptions{Limit: 5}); err != nil || len(list.Items) == 0 {
		t.Errorf("list under the alarm: %v", err)
	}
	// The refused write asked for a maintenance pass, which raises the metric.
	var m rawResponse
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		m = raw.get(t, "/metrics")
		return strings.Contains(string(m.body), "jobset_apiserver_embedded_etcd_nospace_alarm 1"), nil
	})
	if err != nil {
		t.Errorf("the nospace metric does not show the alarm")
	}
	for _, line := range strings.Split(string(m.body), "\n") {
		if strings.HasPrefix(line, "jobset_apiserver_embedded_etcd_db_size") {
			t.Log(line)
		}
	}
	if _, err := jobsets.Create(ctx, newJobSet(ns, "still-refused"), metav1.CreateOptions{}); codeOf(err) != http.StatusInsufficientStorage {
		t.Errorf("a write after the alarm, before anything was deleted: %v; want 507", err)
	}
	t.Log("deleting")

	if err := jobsets.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatalf("deleting under the alarm: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return strings.Contains(string(raw.get(t, "/metrics").body), "jobset_apiserver_embedded_etcd_nospace_alarm 0"), nil
	})
	if err != nil {
		t.Fatalf("the NOSPACE alarm did not clear after the JobSets were deleted")
	}
	if _, err := jobsets.Create(ctx, newJobSet(ns, "after"), metav1.CreateOptions{}); err != nil {
		t.Errorf("create after the alarm cleared: %v", err)
	}
	if _, err := jobsets.Get(ctx, "fill-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a deleted JobSet is back: %v", err)
	}
}
