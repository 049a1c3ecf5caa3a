package wire

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// benchJobSet has two replicatedJobs with a realistic pod template: a
// training container with command, environment, resources, mounts, ports
// and probes, and a sidecar. spec.managedBy names another controller so
// that jobset-controller creates no Jobs: these benchmarks measure the API.
func benchJobSet(ns, name string) *v1alpha2.JobSet {
	return &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels:      map[string]string{"team": "ml", "experiment": "bench", "bench": "wire"},
			Annotations: map[string]string{"example.com/owner": "bench@example.com"},
		},
		Spec: v1alpha2.JobSetSpec{
			ManagedBy:     ptr.To("example.com/bench"),
			Network:       &v1alpha2.Network{EnableDNSHostnames: ptr.To(true)},
			FailurePolicy: &v1alpha2.FailurePolicy{MaxRestarts: 3},
			ReplicatedJobs: []v1alpha2.ReplicatedJob{
				{Name: "driver", Replicas: ptr.To(int32(1)), Template: jobTemplate(1, "driver")},
				{Name: "workers", Replicas: ptr.To(int32(4)), Template: jobTemplate(8, "worker")},
			},
		},
	}
}

// workersOnly drops the driver: the JobSet's one replicatedJob then has
// the pod template of the suspended Job it is compared with.
func workersOnly(js *v1alpha2.JobSet) *v1alpha2.JobSet {
	js.Spec.ReplicatedJobs = js.Spec.ReplicatedJobs[1:]
	return js
}

func jobTemplate(pods int32, role string) batchv1.JobTemplateSpec {
	env := []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	for i := range 8 {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("TRAINING_SETTING_%d", i), Value: fmt.Sprintf("value-%d", i)})
	}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10}
	return batchv1.JobTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"role": role}},
		Spec: batchv1.JobSpec{
			Parallelism: &pods, Completions: &pods, CompletionMode: ptr.To(batchv1.IndexedCompletion), BackoffLimit: ptr.To(int32(0)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"role": role}, Annotations: map[string]string{"example.com/profile": "on"}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					NodeSelector:  map[string]string{"pool": "gpu"},
					Tolerations:   []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					Containers: []corev1.Container{{
						Name: "trainer", Image: "registry.example.com/ml/trainer:2026.11",
						Command: []string{"python", "-m", "trainer"}, Args: []string{"--epochs=10", "--batch-size=256", "--checkpoint=/ckpt"},
						Env:   env,
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "coord", ContainerPort: 29500}},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")},
							Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi")},
						},
						VolumeMounts:   []corev1.VolumeMount{{Name: "ckpt", MountPath: "/ckpt"}, {Name: "shm", MountPath: "/dev/shm"}},
						ReadinessProbe: probe, LivenessProbe: probe,
					}, {
						Name: "log-shipper", Image: "registry.example.com/obs/shipper:1.4",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
					}},
					Volumes: []corev1.Volume{
						{Name: "ckpt", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
					},
				},
			},
		},
	}
}

// byteCounter counts the response bytes of the requests it carries.
type byteCounter struct{ n atomic.Int64 }

func (c *byteCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body = &countingBody{ReadCloser: resp.Body, c: c}
		}
		return resp, err
	})
}

type countingBody struct {
	io.ReadCloser
	c *byteCounter
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.n.Add(int64(n))
	return n, err
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// latencies collects request durations from many goroutines.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, d)
	l.mu.Unlock()
}

// quantile of the collected durations, in milliseconds.
func (l *latencies) quantile(q float64) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.all) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), l.all...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[int(q*float64(len(s)-1))].Microseconds()) / 1000
}

// metricName makes a label usable in a benchmark metric unit.
func metricName(parts ...string) string {
	return strings.ReplaceAll(strings.Join(parts, "-"), " ", "-")
}
