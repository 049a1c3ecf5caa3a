package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/apiserver"
	"github.com/nativejobset/jobset/test/integration/framework"
)

// protobufMagic starts every object kube stores as protobuf.
var protobufMagic = []byte("k8s\x00")

// storedServer is a server started with a given --storage-media-type, with
// a client of its etcd to look at the stored bytes.
type storedServer struct {
	*framework.Server
	etcd *clientv3.Client
}

// startWithMediaType starts a server on the etcd data in dir; an empty
// mediaType keeps the default.
func startWithMediaType(t *testing.T, dir, mediaType string) storedServer {
	t.Helper()
	var opts *apiserver.Options
	s := framework.StartServerInDir(t, dir, func(o *apiserver.Options) {
		opts = o
		if mediaType != "" {
			o.Recommended.Etcd.DefaultStorageMediaType = mediaType
		}
	})
	c, err := clientv3.New(clientv3.Config{Endpoints: opts.Recommended.Etcd.StorageConfig.Transport.ServerList, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return storedServer{Server: s, etcd: c}
}

// stop stops the server and its etcd client.
func (s storedServer) stop() {
	s.etcd.Close()
	s.Stop()
}

// assertStoredAs fails unless the JobSet's bytes in etcd are in mediaType.
func (s storedServer) assertStoredAs(t *testing.T, ns, name, mediaType string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	resp, err := s.etcd.Get(ctx, "/registry/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("etcd get: %v", err)
	}
	suffix := "/jobsets/" + ns + "/" + name
	for _, kv := range resp.Kvs {
		if !strings.HasSuffix(string(kv.Key), suffix) {
			continue
		}
		isProtobuf := bytes.HasPrefix(kv.Value, protobufMagic)
		isJSON := bytes.HasPrefix(kv.Value, []byte("{"))
		if (mediaType == runtime.ContentTypeProtobuf && !isProtobuf) || (mediaType == runtime.ContentTypeJSON && !isJSON) {
			t.Errorf("%s is stored as %q..., want %s", kv.Key, kv.Value[:min(len(kv.Value), 8)], mediaType)
		}
		return
	}
	t.Errorf("no key ending in %s in etcd", suffix)
}

// TestStorageMediaTypeSwitch writes JobSets with JSON storage, restarts on
// the same etcd with the default (protobuf), reads, updates and lists them
// all, then goes back to JSON and does it again.
func TestStorageMediaTypeSwitch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ns := "media"
	const json, protobuf = runtime.ContentTypeJSON, runtime.ContentTypeProtobuf

	first := startWithMediaType(t, dir, json)
	var want []*v1alpha2.JobSet
	for i := range 3 {
		js := mustCreate(t, first.Server, newJobSet(ns, fmt.Sprintf("js-%d", i), suspended))
		js.Status.Restarts = int32(i + 1)
		js, err := first.Client.JobsetV1alpha2().JobSets(ns).UpdateStatus(ctx, js, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		first.assertStoredAs(t, ns, js.Name, json)
		want = append(want, js)
	}
	first.stop()

	// Protobuf by default: the JSON objects read back unchanged, and are
	// rewritten as protobuf by their next write.
	second := startWithMediaType(t, dir, "")
	want = readAndRewrite(t, second, ns, want, json, protobuf)
	want = append(want, mustCreate(t, second.Server, newJobSet(ns, "js-new", suspended)))
	second.assertStoredAs(t, ns, "js-new", protobuf)
	second.stop()

	// And back: objects written as protobuf are read by a JSON server.
	third := startWithMediaType(t, dir, json)
	readAndRewrite(t, third, ns, want, protobuf, json)
}

// readAndRewrite checks that every JobSet of want reads back as it was and
// is still stored as before (a read does not rewrite), that a list returns
// them all, and that a spec update and a status update store each in
// after. It returns the updated JobSets.
func readAndRewrite(t *testing.T, s storedServer, ns string, want []*v1alpha2.JobSet, before, after string) []*v1alpha2.JobSet {
	t.Helper()
	ctx := context.Background()
	jobsets := s.Client.JobsetV1alpha2().JobSets(ns)
	for _, w := range want {
		got := mustGet(t, s.Server, ns, w.Name)
		if !apiequality.Semantic.DeepEqual(got, w) {
			t.Errorf("%s after restart:\n%s", w.Name, diff.Diff(w, got))
		}
		s.assertStoredAs(t, ns, w.Name, before)
	}
	list, err := jobsets.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(want) {
		t.Fatalf("list has %d JobSets, want %d", len(list.Items), len(want))
	}
	for i := range list.Items {
		if !apiequality.Semantic.DeepEqual(&list.Items[i], want[i]) {
			t.Errorf("list item %d:\n%s", i, diff.Diff(want[i], &list.Items[i]))
		}
	}

	var updated []*v1alpha2.JobSet
	for _, w := range want {
		js := w.DeepCopy()
		if js.Labels == nil {
			js.Labels = map[string]string{}
		}
		js.Labels["stored-as"] = strings.ReplaceAll(after, "/", ".")
		js, err := jobsets.Update(ctx, js, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update %s: %v", w.Name, err)
		}
		js.Status.Restarts += 10
		js, err = jobsets.UpdateStatus(ctx, js, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update status %s: %v", w.Name, err)
		}
		s.assertStoredAs(t, ns, w.Name, after)
		if got := mustGet(t, s.Server, ns, w.Name); !apiequality.Semantic.DeepEqual(got, js) {
			t.Errorf("%s after update:\n%s", w.Name, diff.Diff(js, got))
		}
		updated = append(updated, js)
	}
	return updated
}
