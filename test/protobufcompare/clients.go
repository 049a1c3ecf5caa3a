// Package protobufcompare drives every served resource with a client that
// speaks only protobuf and compares each answer with the JSON answer for
// the same object, field by field. The integration tests run it against an
// in-process server, the e2e tests through kube-apiserver.
package protobufcompare

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/client-go/rest"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	clientset "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
	"github.com/nativejobset/jobset/test/reporoot"
)

// contentTypes records the Content-Type of every response from the JobSet
// group, so a test can prove the server answered in protobuf rather than
// in some encoding the client happened to accept.
type ContentTypes struct {
	mu   sync.Mutex
	seen map[string]int
}

func (c *ContentTypes) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && strings.HasPrefix(req.URL.Path, "/apis/jobset.x-k8s.io/") {
			c.mu.Lock()
			c.seen[resp.Header.Get("Content-Type")]++
			c.mu.Unlock()
		}
		return resp, err
	})
}

// OnlyProtobuf fails unless every recorded response was protobuf, and at
// least one was.
func (c *ContentTypes) OnlyProtobuf(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	total := 0
	for ct, n := range c.seen {
		total += n
		if !strings.HasPrefix(ct, runtime.ContentTypeProtobuf) {
			t.Errorf("%d responses with Content-Type %q, want %s", n, ct, runtime.ContentTypeProtobuf)
		}
	}
	if total == 0 {
		t.Error("no response from the JobSet API was recorded")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Clients returns, for the server of cfg, a client that sends and accepts
// protobuf only, the recorder of its responses' content types, and a
// JSON-only client.
func Clients(t *testing.T, cfg *rest.Config) (pb clientset.Interface, seen *ContentTypes, js clientset.Interface) {
	t.Helper()
	seen = &ContentTypes{seen: map[string]int{}}
	pbCfg := rest.CopyConfig(cfg)
	pbCfg.ContentType = runtime.ContentTypeProtobuf
	pbCfg.AcceptContentTypes = runtime.ContentTypeProtobuf
	pbCfg.Wrap(seen.wrap)
	jsonCfg := rest.CopyConfig(cfg)
	jsonCfg.ContentType = runtime.ContentTypeJSON
	jsonCfg.AcceptContentTypes = runtime.ContentTypeJSON
	var err error
	if pb, err = clientset.NewForConfig(pbCfg); err != nil {
		t.Fatal(err)
	}
	if js, err = clientset.NewForConfig(jsonCfg); err != nil {
		t.Fatal(err)
	}
	return pb, seen, js
}

// fullJobSet is the fuzz seed that sets every JobSet field, status
// included. Its spec.managedBy names another controller, so that
// jobset-controller leaves it alone on a real cluster.
func fullJobSet(t *testing.T, ns, name string) *v1alpha2.JobSet {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(reporoot.MustDir(), "pkg", "apis", "jobset", "validation", "testdata", "seed", "full.json"))
	if err != nil {
		t.Fatal(err)
	}
	var js v1alpha2.JobSet
	if err := json.Unmarshal(data, &js); err != nil {
		t.Fatal(err)
	}
	js.Namespace, js.Name, js.ResourceVersion = ns, name, ""
	return &js
}

// same fails when two decodings of one object differ in any field.
func same(t *testing.T, what string, fromProtobuf, fromJSON any) {
	t.Helper()
	if !apiequality.Semantic.DeepEqual(fromJSON, fromProtobuf) {
		t.Errorf("%s: protobuf and JSON differ (-json +protobuf):\n%s", what, diff.Diff(fromJSON, fromProtobuf))
	}
}
