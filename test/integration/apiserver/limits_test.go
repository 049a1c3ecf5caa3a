package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/apiserver"
	"github.com/nativejobset/jobset/test/integration/framework"
)

// Small limits keep the objects small; the logic is the same at the
// defaults (1.5 MiB stored, 3 MiB bodies).
const (
	testEtcdLimit = 64 * 1024
	testBodyLimit = 128 * 1024
)

// A JobSet whose stored form is just under etcd's request limit is stored;
// one just over it, created or updated into it, gets 413 naming the limit
// and nothing changes; a body over the server's body limit gets 413 naming
// that limit. Never a 500.
func TestSizeLimitsBothSidesOfTheEdge(t *testing.T) {
	s := framework.StartServerWithOptions(t, func(o *apiserver.Options) {
		o.EmbeddedEtcdMaxRequestBytes = testEtcdLimit
		o.ServerRun.MaxRequestBodyBytes = testBodyLimit
	})
	ns := "default"
	etcd := etcdClient(t, s)
	ctx := context.Background()
	jobsets := s.Client.JobsetV1alpha2().JobSets(ns)

	// The stored size grows byte for byte with an annotation's value:
	// calibrate on one object, then aim at either side of the limit. In
	// protobuf every length is a varint, one byte longer from 16384 on, so
	// the calibration object is already past that: every length then has
	// the size it has at the limit.
	const base = 20000
	mustCreate(t, s, padded(ns, "calib", base))
	stored0 := storedSize(t, etcd, ns, "calib")
	padFor := func(size int) int { return base + size - stored0 }

	below := padded(ns, "below", padFor(testEtcdLimit-2048))
	mustCreate(t, s, below)
	if got := storedSize(t, etcd, ns, "below"); got != testEtcdLimit-2048 {
		t.Fatalf("stored size of the JobSet below the limit = %d, calibrated %d", got, testEtcdLimit-2048)
	}

	_, err := jobsets.Create(ctx, padded(ns, "above", padFor(testEtcdLimit+1)), metav1.CreateOptions{})
	wantTooLarge(t, "create above the limit", err, fmt.Sprint(testEtcdLimit))
	assertAbsent(t, s, ns, "above")

	before := mustGet(t, s, ns, "below")
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		"pad": strings.Repeat("y", padFor(testEtcdLimit+1)),
	}}})
	_, err = jobsets.Patch(ctx, "below", types.MergePatchType, patch, metav1.PatchOptions{})
	wantTooLarge(t, "update above the limit", err, fmt.Sprint(testEtcdLimit))
	if after := mustGet(t, s, ns, "below"); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the refused update changed the JobSet: resourceVersion %s -> %s", before.ResourceVersion, after.ResourceVersion)
	}

	body, _ := json.Marshal(padded(ns, "huge", testBodyLimit+1))
	resp := newRawClient(t, s.Config).do(t, http.MethodPost, jobsetsPath(ns), "application/json", body)
	if resp.code != http.StatusRequestEntityTooLarge || !strings.Contains(string(resp.body), fmt.Sprint(testBodyLimit)) {
		t.Errorf("a body over the body limit: %v; want 413 naming %d", resp, testBodyLimit)
	}
	assertAbsent(t, s, ns, "huge")
}

func wantTooLarge(t *testing.T, what string, err error, limit string) {
	t.Helper()
	if !apierrors.IsRequestEntityTooLargeError(err) {
		t.Errorf("%s: %v (code %d); want 413", what, err, codeOf(err))
		return
	}
	if !strings.Contains(err.Error(), limit) {
		t.Errorf("%s: %q does not name the limit %s", what, err, limit)
	}
}

func codeOf(err error) int32 {
	if st, ok := err.(apierrors.APIStatus); ok {
		return st.Status().Code
	}
	return 0
}

func padded(ns, name string, n int) *v1alpha2.JobSet {
	return newJobSet(ns, name, func(js *v1alpha2.JobSet) {
		js.Annotations = map[string]string{"pad": strings.Repeat("x", n)}
	})
}

// etcdClient reaches the server's embedded etcd through its socket.
func etcdClient(t *testing.T, s *framework.Server) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"unix://" + filepath.Join(s.EtcdDir, "etcd.sock")},
		DialTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// storedSize is the length of the value etcd holds for a JobSet.
func storedSize(t *testing.T, etcd *clientv3.Client, ns, name string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	resp, err := etcd.Get(ctx, "/registry/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if strings.HasSuffix(string(kv.Key), "/jobsets/"+ns+"/"+name) {
			v, err := etcd.Get(ctx, string(kv.Key))
			if err != nil || len(v.Kvs) != 1 {
				t.Fatalf("reading %s: %v", kv.Key, err)
			}
			return len(v.Kvs[0].Value)
		}
	}
	t.Fatalf("no etcd key for jobset %s/%s", ns, name)
	return 0
}
