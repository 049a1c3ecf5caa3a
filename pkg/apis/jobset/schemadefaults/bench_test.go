package schemadefaults

import (
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/generated/openapi"
)

// benchTemplate is a realistic training-job template: three containers with
// ports (no protocol), env (plain, fieldRef, secretKeyRef), resources,
// mounts, and liveness/readiness/startup probes of every handler kind.
func benchTemplate() *batchv1.JobTemplateSpec {
	container := func(name string, port int32) corev1.Container {
		return corev1.Container{
			Name:    name,
			Image:   "registry.example/" + name + ":v1.2.3",
			Command: []string{"/bin/" + name},
			Args:    []string{"--port", fmt.Sprint(port), "--verbose"},
			Ports: []corev1.ContainerPort{
				{Name: "http", ContainerPort: port},
				{Name: "metrics", ContainerPort: port + 1},
			},
			Env: []corev1.EnvVar{
				{Name: "MODE", Value: "train"},
				{Name: "WORLD_SIZE", Value: "8"},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "RANK", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
				{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "token"}, Key: "value",
				}}},
			},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "config", MountPath: "/etc/config", ReadOnly: true}},
			LivenessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(port)}},
				PeriodSeconds: 10,
			},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:     corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: port + 2}},
				FailureThreshold: 3,
			},
			StartupProbe: &corev1.Probe{
				ProbeHandler:        corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/ready"}}},
				InitialDelaySeconds: 5,
			},
			ImagePullPolicy: corev1.PullIfNotPresent,
		}
	}
	return &batchv1.JobTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "trainer"}, Annotations: map[string]string{"team": "ml"}},
		Spec: batchv1.JobSpec{
			Parallelism:    ptr.To[int32](4),
			Completions:    ptr.To[int32](4),
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			BackoffLimit:   ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "trainer"}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyOnFailure,
					Containers:    []corev1.Container{container("trainer", 8080), container("sidecar", 9090), container("exporter", 9100)},
					Volumes: []corev1.Volume{
						{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: "trainer-config"},
						}}},
					},
					NodeSelector: map[string]string{"accelerator": "tpu"},
					Tolerations:  []corev1.Toleration{{Key: "google.com/tpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
				},
			},
		},
	}
}

func TestBenchTemplateNeedsDefaults(t *testing.T) {
	tmpl := benchTemplate()
	mustApply(t, tmpl)
	for _, c := range tmpl.Spec.Template.Spec.Containers {
		if c.Ports[0].Protocol != corev1.ProtocolTCP || c.ReadinessProbe.GRPC.Service == nil {
			t.Fatalf("container %s not defaulted", c.Name)
		}
	}
}

// BenchmarkApplyToJobTemplate defaults a fresh copy of the template every
// time: the case of a create whose template sets no protocol. The copies are
// made outside the timer.
func BenchmarkApplyToJobTemplate(b *testing.B) {
	get() // build outside the measurement
	const batch = 256
	src := benchTemplate()
	copies := make([]*batchv1.JobTemplateSpec, batch)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%batch == 0 {
			b.StopTimer()
			for j := range copies {
				copies[j] = src.DeepCopy()
			}
			b.StartTimer()
		}
		if err := ApplyToJobTemplate(copies[i%batch]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyToJobTemplateDefaulted runs on a template that already has
// every default, as it has after the generated defaulters: only the
// conversion to unstructured and the walk remain.
func BenchmarkApplyToJobTemplateDefaulted(b *testing.B) {
	get()
	tmpl := benchTemplate()
	if err := ApplyToJobTemplate(tmpl); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := ApplyToJobTemplate(tmpl); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuild measures the one-time construction of the view.
func BenchmarkBuild(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		build(openapi.GetOpenAPIDefinitions, seedTypes())
	}
}

// BenchmarkCheckJobTemplate: the required and enum check of a valid
// template (the typed fast path) against the exact check on its JSON form.
func BenchmarkCheckJobTemplate(b *testing.B) {
	tmpl := validTemplate()
	n := get().nodes[JobTemplateSpecDefinition]
	b.Run("typed", func(b *testing.B) {
		for range b.N {
			if errs := CheckJobTemplate(tmpl, nil); len(errs) != 0 {
				b.Fatal(errs)
			}
		}
	})
	b.Run("unstructured", func(b *testing.B) {
		for range b.N {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tmpl)
			if err != nil {
				b.Fatal(err)
			}
			var errs field.ErrorList
			n.check(u, nil, &errs)
		}
	})
}
