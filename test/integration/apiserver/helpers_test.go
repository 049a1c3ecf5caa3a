package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/integration/framework"
)

const (
	// apiPrefix is the path of the served group version.
	apiPrefix = "/apis/jobset.x-k8s.io/v1alpha2"
	// waitTimeout bounds every poll and every wait for a watch event.
	waitTimeout = 30 * time.Second
)

func jobsetsPath(ns string) string { return apiPrefix + "/namespaces/" + ns + "/jobsets" }

func jobsetPath(ns, name string) string { return jobsetsPath(ns) + "/" + name }

// podTemplate is a minimal Job template: one container, Indexed defaults
// left to the server.
func jobTemplate(parallelism int32) batchv1.JobTemplateSpec {
	return batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
		Parallelism: &parallelism,
		Completions: &parallelism,
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "test"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name:  "main",
				Image: "busybox",
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			}}},
		},
	}}
}

// newJobSet builds a valid JobSet with two replicatedJobs, "leader" and
// "workers"; mutate adjusts it before it is returned.
func newJobSet(ns, name string, mutate ...func(*v1alpha2.JobSet)) *v1alpha2.JobSet {
	two := int32(2)
	js := &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{
			{Name: "leader", Template: jobTemplate(1)},
			{Name: "workers", Replicas: &two, Template: jobTemplate(2)},
		}},
	}
	for _, m := range mutate {
		m(js)
	}
	return js
}

func suspended(js *v1alpha2.JobSet) {
	t := true
	js.Spec.Suspend = &t
}

func withLabels(l map[string]string) func(*v1alpha2.JobSet) {
	return func(js *v1alpha2.JobSet) { js.Labels = l }
}

// mustCreate creates js and fails the test on error.
func mustCreate(t *testing.T, s *framework.Server, js *v1alpha2.JobSet) *v1alpha2.JobSet {
	t.Helper()
	return s.MustCreate(t, js, "")
}

func mustGet(t *testing.T, s *framework.Server, ns, name string) *v1alpha2.JobSet {
	t.Helper()
	return s.MustGet(t, ns, name)
}

// assertAbsent fails unless ns/name does not exist.
func assertAbsent(t *testing.T, s *framework.Server, ns, name string) {
	t.Helper()
	_, err := s.Client.JobsetV1alpha2().JobSets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("get %s/%s after a rejected write: err = %v, want NotFound", ns, name, err)
	}
}

// rawResponse is the outcome of a raw HTTP request.
type rawResponse struct {
	code   int
	body   []byte
	header http.Header
}

func (r rawResponse) String() string {
	b := string(r.body)
	if len(b) > 600 {
		b = b[:600] + "..."
	}
	return fmt.Sprintf("HTTP %d: %s", r.code, b)
}

// status decodes the body as a metav1.Status; ok is false if it is not one.
func (r rawResponse) status() (metav1.Status, bool) {
	var st metav1.Status
	if err := json.Unmarshal(r.body, &st); err != nil || st.Kind != "Status" {
		return st, false
	}
	return st, true
}

// rawClient sends requests straight over the server's TLS transport, with
// the loopback credentials, to cfg.Host. Each call takes the (sub)test it
// runs in, so that a failure stops the right goroutine.
type rawClient struct {
	http *http.Client
	host string
}

func newRawClient(t *testing.T, cfg *rest.Config) *rawClient {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatalf("http client: %v", err)
	}
	return &rawClient{http: hc, host: strings.TrimSuffix(cfg.Host, "/")}
}

// do sends one request; headers alternate name, value.
func (c *rawClient) do(t *testing.T, method, path, contentType string, body []byte, headers ...string) rawResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.host+path, rd)
	if err != nil {
		t.Fatalf("building %s %s: %v", method, path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s %s: %v", method, path, err)
	}
	return rawResponse{code: resp.StatusCode, body: data, header: resp.Header}
}

func (c *rawClient) get(t *testing.T, path string, headers ...string) rawResponse {
	t.Helper()
	return c.do(t, http.MethodGet, path, "", nil, headers...)
}

// causeFields returns the field of every cause of an API error.
func causeFields(err error) []string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return nil
	}
	st := status.Status()
	if st.Details == nil {
		return nil
	}
	var fields []string
	for _, c := range st.Details.Causes {
		fields = append(fields, c.Field)
	}
	return fields
}

func hasCause(err error, field string) bool {
	for _, f := range causeFields(err) {
		if f == field {
			return true
		}
	}
	return false
}

// poll waits, bounded by waitTimeout, until cond holds.
func poll(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, waitTimeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}
