package replicatedjobs

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/integration/framework"
)

const (
	apiPrefix   = "/apis/jobset.x-k8s.io/v1alpha2"
	waitTimeout = 30 * time.Second
)

func scalePath(ns, name string) string {
	return apiPrefix + "/namespaces/" + ns + "/replicatedjobs/" + name + "/scale"
}

func i32(v int32) *int32 { return &v }

// template is an Indexed Job template; completions is left unset when 0.
func template(parallelism, completions int32) batchv1.JobTemplateSpec {
	spec := batchv1.JobSpec{
		Parallelism: i32(parallelism),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Image: "busybox"}},
		}},
	}
	if completions > 0 {
		spec.Completions = i32(completions)
	}
	return batchv1.JobTemplateSpec{Spec: spec}
}

// newJobSet has a "leader" (1 Job, 1 pod) and "workers" (2 Jobs of 2
// pods, completions equal to parallelism).
func newJobSet(ns, name string, mutate ...func(*v1alpha2.JobSet)) *v1alpha2.JobSet {
	js := &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"team": "ml"}},
		Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{
			{Name: "leader", Template: template(1, 1)},
			{Name: "workers", GroupName: "pool", Replicas: i32(2), Template: template(2, 2)},
		}},
	}
	for _, m := range mutate {
		m(js)
	}
	return js
}

func create(t *testing.T, s *framework.Server, js *v1alpha2.JobSet) *v1alpha2.JobSet {
	t.Helper()
	return s.MustCreate(t, js, "creator")
}

func getJobSet(t *testing.T, s *framework.Server, ns, name string) *v1alpha2.JobSet {
	t.Helper()
	return s.MustGet(t, ns, name)
}

func rjSpec(js *v1alpha2.JobSet, rj string) *batchv1.JobSpec {
	for i := range js.Spec.ReplicatedJobs {
		if js.Spec.ReplicatedJobs[i].Name == rj {
			return &js.Spec.ReplicatedJobs[i].Template.Spec
		}
	}
	return nil
}

func deref(p *int32) int32 {
	if p == nil {
		return -1
	}
	return *p
}

// raw sends one request through the typed client's REST client and returns
// the status code, the body and the error.
func raw(s *framework.Server, method, path, contentType string, body []byte, accept string, params ...string) (int, []byte, error) {
	rc := s.Client.JobsetV1alpha2().RESTClient()
	req := rc.Verb(method).AbsPath(path)
	for i := 0; i+1 < len(params); i += 2 {
		req = req.Param(params[i], params[i+1])
	}
	if contentType != "" {
		req = req.SetHeader("Content-Type", contentType)
	}
	if accept != "" {
		req = req.SetHeader("Accept", accept)
	}
	if body != nil {
		req = req.Body(body)
	}
	var code int
	res := req.Do(context.Background()).StatusCode(&code)
	data, err := res.Raw()
	return code, data, err
}

// bodyError is the API error a raw request answered with, nil on success.
func bodyError(code int, body []byte) error {
	if code >= 200 && code < 300 {
		return nil
	}
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" {
		return apierrors.NewGenericServerResponse(code, "", schema.GroupResource{}, "", string(body), 0, false)
	}
	return &apierrors.StatusError{ErrStatus: st}
}

// statusCode is the HTTP code of an API error, 0 if there is none.
func statusCode(err error) int32 {
	if err == nil {
		return 0
	}
	if st, ok := err.(apierrors.APIStatus); ok {
		return st.Status().Code
	}
	return -1
}

// ownsParallelism tells whether a managedFields entry owns the parallelism
// of the named replicatedJob.
func ownsParallelism(t *testing.T, e metav1.ManagedFieldsEntry, rj string) bool {
	t.Helper()
	if e.FieldsV1 == nil {
		return false
	}
	var m map[string]interface{}
	if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &m); err != nil {
		t.Fatalf("decoding managed fields of %s: %v", e.Manager, err)
	}
	key, _ := json.Marshal(map[string]string{"name": rj})
	for _, step := range []string{"f:spec", "f:replicatedJobs", "k:" + string(key), "f:template", "f:spec"} {
		next, ok := m[step].(map[string]interface{})
		if !ok {
			return false
		}
		m = next
	}
	_, ok := m["f:parallelism"]
	return ok
}
