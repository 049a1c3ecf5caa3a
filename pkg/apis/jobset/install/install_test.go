package install

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/apis/jobset/schemadefaults"
	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	Install(scheme)
	return scheme
}

func TestInstallRegistersTypes(t *testing.T) {
	scheme := newScheme()
	for _, gvk := range []string{"JobSet", "JobSetList"} {
		if !scheme.Recognizes(v1alpha2.SchemeGroupVersion.WithKind(gvk)) {
			t.Errorf("v1alpha2 %s not registered", gvk)
		}
		if !scheme.Recognizes(jobset.SchemeGroupVersion.WithKind(gvk)) {
			t.Errorf("internal %s not registered", gvk)
		}
	}
	if got := scheme.PrioritizedVersionsForGroup(jobset.GroupName); len(got) != 1 || got[0] != v1alpha2.SchemeGroupVersion {
		t.Errorf("version priority = %v", got)
	}
}

// fullTemplate has every parent of every declared schema default, and none
// of the defaulted fields set.
func fullTemplate() batchv1.JobTemplateSpec {
	probe := func() *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000}}}
	}
	container := func(name string) corev1.Container {
		return corev1.Container{
			Name:  name,
			Image: "i",
			Ports: []corev1.ContainerPort{{ContainerPort: 80}},
			Env: []corev1.EnvVar{{Name: "F", ValueFrom: &corev1.EnvVarSource{
				FileKeyRef: &corev1.FileKeySelector{VolumeName: "v", Path: "p", Key: "k"},
			}}},
			LivenessProbe:  probe(),
			ReadinessProbe: probe(),
			StartupProbe:   probe(),
		}
	}
	return batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		InitContainers:      []corev1.Container{container("init")},
		Containers:          []corev1.Container{container("main")},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon(container("debug"))}},
		Volumes: []corev1.Volume{
			{Name: "az", VolumeSource: corev1.VolumeSource{AzureDisk: &corev1.AzureDiskVolumeSource{DiskName: "d", DataDiskURI: "u"}}},
			{Name: "iscsi", VolumeSource: corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "t", IQN: "q"}}},
			{Name: "rbd", VolumeSource: corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{CephMonitors: []string{"m"}, RBDImage: "i"}}},
			{Name: "sio", VolumeSource: corev1.VolumeSource{ScaleIO: &corev1.ScaleIOVolumeSource{Gateway: "g", System: "s"}}},
		},
	}}}}
}

// lookup follows a DeclaredDefaults path ("a.b[].c") in an unstructured
// value and returns every value found at it; an array item or object without
// the next parent gives nothing, a missing leaf gives an error value.
func lookup(v interface{}, path string) []interface{} {
	if path == "" {
		return []interface{}{v}
	}
	head, rest, _ := strings.Cut(path, ".")
	name, isArray := strings.CutSuffix(head, "[]")
	m, ok := v.(map[string]interface{})
	if !ok {
		return nil
	}
	child, ok := m[name]
	if !ok && rest == "" {
		return []interface{}{fmt.Errorf("%s absent", name)}
	}
	if !ok {
		return nil
	}
	if !isArray {
		return lookup(child, rest)
	}
	var out []interface{}
	items, _ := child.([]interface{})
	for _, item := range items {
		out = append(out, lookup(item, rest)...)
	}
	return out
}

// TestEveryDeclaredDefaultApplied defaults a JobSet through the scheme and
// checks, for each default that the OpenAPI schema declares under a
// JobTemplateSpec, that the template holds it.
func TestEveryDeclaredDefaultApplied(t *testing.T) {
	js := &v1alpha2.JobSet{Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{
		{Name: "a", Template: fullTemplate()},
		{Name: "b", Template: fullTemplate()},
	}}}
	newScheme().Default(js)

	declared := schemadefaults.DeclaredDefaults(schemadefaults.JobTemplateSpecDefinition)
	if len(declared) == 0 {
		t.Fatal("no declared defaults")
	}
	for i := range js.Spec.ReplicatedJobs {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&js.Spec.ReplicatedJobs[i].Template)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range declared {
			path, value, _ := strings.Cut(d, "=")
			var want interface{}
			if err := json.Unmarshal([]byte(value), &want); err != nil {
				t.Fatalf("%s: %v", d, err)
			}
			found := lookup(u, path)
			if len(found) == 0 {
				t.Errorf("replicatedJobs[%d]: %s: the test template lacks the parent", i, path)
			}
			for _, got := range found {
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("replicatedJobs[%d]: %s = %v, want %v", i, path, got, want)
				}
			}
		}
	}
}

// TestSchemeDefaultsJobSet checks the registered function: the JobSet
// defaults of the generated defaulter plus the schema defaults, for a JobSet
// and for each item of a JobSetList.
func TestSchemeDefaultsJobSet(t *testing.T) {
	in := &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "ns"},
		Spec: v1alpha2.JobSetSpec{
			ReplicatedJobs: []v1alpha2.ReplicatedJob{{Name: "a", Template: fullTemplate()}},
			VolumeClaimPolicies: []v1alpha2.VolumeClaimPolicy{{Templates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec:       corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
			}}}},
		},
	}

	// The expectation, built from the two parts.
	want := in.DeepCopy()
	v1alpha2.SetObjectDefaults_JobSet(want)
	for i := range want.Spec.ReplicatedJobs {
		if err := schemadefaults.ApplyToJobTemplate(&want.Spec.ReplicatedJobs[i].Template); err != nil {
			t.Fatal(err)
		}
	}
	if want.Spec.SuccessPolicy == nil || want.Spec.ReplicatedJobs[0].Replicas == nil {
		t.Fatalf("generated defaults not applied: %+v", want.Spec)
	}
	c := want.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0]
	if c.Ports[0].Protocol != corev1.ProtocolTCP || c.LivenessProbe.GRPC.Service == nil {
		t.Fatalf("schema defaults not applied: %+v", c)
	}

	scheme := newScheme()
	got := in.DeepCopy()
	scheme.Default(got)
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("scheme.Default(JobSet):\n%s", diff.Diff(want, got))
	}

	direct := in.DeepCopy()
	SetJobSetDefaults(direct)
	if !apiequality.Semantic.DeepEqual(direct, want) {
		t.Errorf("SetJobSetDefaults:\n%s", diff.Diff(want, direct))
	}

	list := &v1alpha2.JobSetList{Items: []v1alpha2.JobSet{*in.DeepCopy(), *in.DeepCopy()}}
	scheme.Default(list)
	for i := range list.Items {
		if !apiequality.Semantic.DeepEqual(&list.Items[i], want) {
			t.Errorf("scheme.Default(JobSetList).items[%d]:\n%s", i, diff.Diff(want, &list.Items[i]))
		}
	}

	again := got.DeepCopy()
	scheme.Default(again)
	if !apiequality.Semantic.DeepEqual(again, got) {
		t.Errorf("defaulting twice differs:\n%s", diff.Diff(got, again))
	}
}

// TestDecodeAppliesSchemaDefaults goes through the codecs, as a create
// does: the schema defaults of the pod template are on the decoded object.
func TestDecodeAppliesSchemaDefaults(t *testing.T) {
	const body = `{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet","metadata":{"name":"js"},
"spec":{"replicatedJobs":[{"name":"a","template":{"spec":{"template":{"spec":{
  "initContainers":[{"name":"i","image":"x","ports":[{"containerPort":1}]}],
  "containers":[{"name":"c","image":"x","ports":[{"containerPort":80},{"containerPort":53,"protocol":"UDP"}],
    "livenessProbe":{"grpc":{"port":9000}},
    "readinessProbe":{"grpc":{"port":9000,"service":null}},
    "startupProbe":{"grpc":{"port":9000,"service":"explicit"}}}],
  "volumes":[{"name":"az","azureDisk":{"diskName":"d","diskURI":"u","readOnly":true}}]}}}}}]}}`
	codecs := serializer.NewCodecFactory(newScheme())
	obj, err := runtime.Decode(codecs.UniversalDecoder(jobset.SchemeGroupVersion), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	spec := obj.(*jobset.JobSet).Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	if got := spec.InitContainers[0].Ports[0].Protocol; got != corev1.ProtocolTCP {
		t.Errorf("initContainers[0].ports[0].protocol = %q", got)
	}
	c := spec.Containers[0]
	if c.Ports[0].Protocol != corev1.ProtocolTCP || c.Ports[1].Protocol != corev1.ProtocolUDP {
		t.Errorf("ports = %+v", c.Ports)
	}
	// Absent and null both get "" (a CRD prunes the null, then defaults).
	if s := c.LivenessProbe.GRPC.Service; s == nil || *s != "" {
		t.Errorf("livenessProbe.grpc.service = %v", s)
	}
	if s := c.ReadinessProbe.GRPC.Service; s == nil || *s != "" {
		t.Errorf("readinessProbe.grpc.service = %v", s)
	}
	if s := c.StartupProbe.GRPC.Service; s == nil || *s != "explicit" {
		t.Errorf("startupProbe.grpc.service = %v", s)
	}
	az := spec.Volumes[0].AzureDisk
	if !ptr.Deref(az.ReadOnly, false) || ptr.Deref(az.FSType, "") != "ext4" ||
		ptr.Deref(az.CachingMode, "") != corev1.AzureDataDiskCachingReadWrite || ptr.Deref(az.Kind, "") != corev1.AzureSharedBlobDisk {
		t.Errorf("azureDisk = %+v", az)
	}
}

// BenchmarkSetJobSetDefaults measures the registered defaulting of a JobSet
// with three replicatedJobs whose templates need schema defaults, the cost
// of every create. The copies are made outside the timer.
func BenchmarkSetJobSetDefaults(b *testing.B) {
	src := &v1alpha2.JobSet{Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{
		{Name: "a", Template: fullTemplate()},
		{Name: "b", Template: fullTemplate()},
		{Name: "c", Template: fullTemplate()},
	}}}
	SetJobSetDefaults(src.DeepCopy()) // build the schema view outside the measurement
	const batch = 256
	copies := make([]*v1alpha2.JobSet, batch)
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
		SetJobSetDefaults(copies[i%batch])
	}
}
