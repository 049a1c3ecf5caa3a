package schemadefaults

import (
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// wantJobTemplateDefaults is every effective default that the generated
// OpenAPI definitions declare under a JobTemplateSpec. A change of
// k8s.io/api that adds or removes one shows up here first.
var wantJobTemplateDefaults = []string{
	`spec.template.spec.containers[].env[].valueFrom.fileKeyRef.optional=false`,
	`spec.template.spec.containers[].livenessProbe.grpc.service=""`,
	`spec.template.spec.containers[].ports[].protocol="TCP"`,
	`spec.template.spec.containers[].readinessProbe.grpc.service=""`,
	`spec.template.spec.containers[].startupProbe.grpc.service=""`,
	`spec.template.spec.ephemeralContainers[].env[].valueFrom.fileKeyRef.optional=false`,
	`spec.template.spec.ephemeralContainers[].livenessProbe.grpc.service=""`,
	`spec.template.spec.ephemeralContainers[].ports[].protocol="TCP"`,
	`spec.template.spec.ephemeralContainers[].readinessProbe.grpc.service=""`,
	`spec.template.spec.ephemeralContainers[].startupProbe.grpc.service=""`,
	`spec.template.spec.initContainers[].env[].valueFrom.fileKeyRef.optional=false`,
	`spec.template.spec.initContainers[].livenessProbe.grpc.service=""`,
	`spec.template.spec.initContainers[].ports[].protocol="TCP"`,
	`spec.template.spec.initContainers[].readinessProbe.grpc.service=""`,
	`spec.template.spec.initContainers[].startupProbe.grpc.service=""`,
	`spec.template.spec.volumes[].azureDisk.cachingMode="ReadWrite"`,
	`spec.template.spec.volumes[].azureDisk.fsType="ext4"`,
	`spec.template.spec.volumes[].azureDisk.kind="Shared"`,
	`spec.template.spec.volumes[].azureDisk.readOnly=false`,
	`spec.template.spec.volumes[].iscsi.iscsiInterface="default"`,
	`spec.template.spec.volumes[].rbd.keyring="/etc/ceph/keyring"`,
	`spec.template.spec.volumes[].rbd.pool="rbd"`,
	`spec.template.spec.volumes[].rbd.user="admin"`,
	`spec.template.spec.volumes[].scaleIO.fsType="xfs"`,
	`spec.template.spec.volumes[].scaleIO.storageMode="ThinProvisioned"`,
}

func TestDefinitionNames(t *testing.T) {
	if JobTemplateSpecDefinition != "io.k8s.api.batch.v1.JobTemplateSpec" {
		t.Errorf("JobTemplateSpecDefinition = %q", JobTemplateSpecDefinition)
	}
	if PersistentVolumeClaimDefinition != "io.k8s.api.core.v1.PersistentVolumeClaim" {
		t.Errorf("PersistentVolumeClaimDefinition = %q", PersistentVolumeClaimDefinition)
	}
	for _, root := range []string{JobTemplateSpecDefinition, PersistentVolumeClaimDefinition} {
		if get().nodes[root] == nil {
			t.Errorf("no definition %q in the generated OpenAPI", root)
		}
	}
}

func TestDeclaredDefaultsJobTemplateSpec(t *testing.T) {
	got := DeclaredDefaults("io.k8s.api.batch.v1.JobTemplateSpec")
	if !slices.Equal(got, wantJobTemplateDefaults) {
		t.Errorf("DeclaredDefaults(JobTemplateSpec):\n got %s\nwant %s",
			strings.Join(got, "\n     "), strings.Join(wantJobTemplateDefaults, "\n     "))
	}
	for _, c := range []string{"containers", "initContainers", "ephemeralContainers"} {
		want := `spec.template.spec.` + c + `[].ports[].protocol="TCP"`
		if !slices.Contains(got, want) {
			t.Errorf("missing %s", want)
		}
	}
	// The pointer defaults whose value is a zero: they matter because the
	// field tells absent from zero.
	for _, want := range []string{
		`spec.template.spec.containers[].readinessProbe.grpc.service=""`,
		`spec.template.spec.containers[].env[].valueFrom.fileKeyRef.optional=false`,
		`spec.template.spec.volumes[].azureDisk.readOnly=false`,
	} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %s", want)
		}
	}
	// openapi-gen's own zero defaults on non-pointer fields are not listed.
	for _, d := range got {
		if strings.HasSuffix(d, "=0") || strings.HasSuffix(d, "={}") ||
			(strings.HasSuffix(d, `=""`) && !strings.HasSuffix(d, `grpc.service=""`)) {
			t.Errorf("zero default of a non-pointer field listed: %s", d)
		}
	}
}

func TestDeclaredDefaultsOtherRoots(t *testing.T) {
	if got := DeclaredDefaults(PersistentVolumeClaimDefinition); len(got) != 0 {
		t.Errorf("PersistentVolumeClaim declares no effective default in k8s.io/api v0.37, got %q", got)
	}
	if got := DeclaredDefaults("no.such.Definition"); got != nil {
		t.Errorf("unknown definition: got %q, want nil", got)
	}
	// A root inside the template gives the same defaults with shorter paths.
	got := DeclaredDefaults(corev1.Container{}.OpenAPIModelName())
	if !slices.Contains(got, `ports[].protocol="TCP"`) || !slices.Contains(got, `livenessProbe.grpc.service=""`) {
		t.Errorf("DeclaredDefaults(Container) = %q", got)
	}
	// Defaults outside the templates are found too (not reachable from a
	// JobSet): ReplicationControllerSpec.replicas is a +default=1 on *int32.
	got = DeclaredDefaults(corev1.ReplicationControllerSpec{}.OpenAPIModelName())
	if !slices.Contains(got, `replicas=1`) {
		t.Errorf("DeclaredDefaults(ReplicationControllerSpec) = %q", got)
	}
}

// Every reference reachable from the roots must resolve: a dangling one
// means openapi-gen was not given a package that k8s.io/api refers to.
func TestBuildProblems(t *testing.T) {
	if got := problemsFrom(get(), JobTemplateSpecDefinition); len(got) != 0 {
		t.Errorf("problems under JobTemplateSpec: %q", got)
	}
	if got := problemsFrom(get(), PersistentVolumeClaimDefinition); len(got) != 0 {
		t.Errorf("problems under PersistentVolumeClaim: %q", got)
	}
}

func podTemplate(spec corev1.PodSpec) *batchv1.JobTemplateSpec {
	return &batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: spec}}}
}

func mustApply(t *testing.T, tmpl *batchv1.JobTemplateSpec) {
	t.Helper()
	if err := ApplyToJobTemplate(tmpl); err != nil {
		t.Fatalf("ApplyToJobTemplate: %v", err)
	}
}

func TestPortsGetTCP(t *testing.T) {
	ports := func() []corev1.ContainerPort {
		return []corev1.ContainerPort{
			{Name: "a", ContainerPort: 80},
			{Name: "b", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
			{Name: "c", ContainerPort: 9000},
		}
	}
	tmpl := podTemplate(corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Ports: ports()}},
		Containers:     []corev1.Container{{Name: "main", Ports: ports()}, {Name: "side", Ports: ports()}},
		EphemeralContainers: []corev1.EphemeralContainer{{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Ports: ports()},
		}},
	})
	mustApply(t, tmpl)
	spec := tmpl.Spec.Template.Spec
	check := func(where string, got []corev1.ContainerPort) {
		want := []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolTCP}
		for i, p := range got {
			if p.Protocol != want[i] {
				t.Errorf("%s port %d: protocol %q, want %q", where, i, p.Protocol, want[i])
			}
		}
	}
	check("initContainers[0]", spec.InitContainers[0].Ports)
	check("containers[0]", spec.Containers[0].Ports)
	check("containers[1]", spec.Containers[1].Ports)
	check("ephemeralContainers[0]", spec.EphemeralContainers[0].Ports)
}

func TestGRPCProbeGetsService(t *testing.T) {
	grpc := func() *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}}
	}
	tmpl := podTemplate(corev1.PodSpec{Containers: []corev1.Container{{
		Name:           "main",
		LivenessProbe:  grpc(),
		ReadinessProbe: grpc(),
		StartupProbe:   &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(8080)}}},
	}}})
	mustApply(t, tmpl)
	c := tmpl.Spec.Template.Spec.Containers[0]
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p.GRPC.Service == nil || *p.GRPC.Service != "" {
			t.Errorf("%s probe: grpc.service = %v, want pointer to \"\"", name, p.GRPC.Service)
		}
		if p.GRPC.Port != 9090 {
			t.Errorf("%s probe: grpc.port changed to %d", name, p.GRPC.Port)
		}
	}
	if c.StartupProbe.GRPC != nil {
		t.Errorf("startup probe got a grpc handler: %+v", c.StartupProbe.GRPC)
	}
}

func TestPointerDefaults(t *testing.T) {
	tmpl := podTemplate(corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: "main",
			Env: []corev1.EnvVar{
				{Name: "PLAIN", Value: "x"},
				{Name: "FILE", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "v", Path: "p", Key: "k"}}},
			},
		}},
		Volumes: []corev1.Volume{
			{Name: "az", VolumeSource: corev1.VolumeSource{AzureDisk: &corev1.AzureDiskVolumeSource{DiskName: "d", DataDiskURI: "u"}}},
			{Name: "rbd", VolumeSource: corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{CephMonitors: []string{"m"}, RBDImage: "i"}}},
			{Name: "iscsi", VolumeSource: corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "t", IQN: "q", Lun: 1}}},
			{Name: "sio", VolumeSource: corev1.VolumeSource{ScaleIO: &corev1.ScaleIOVolumeSource{Gateway: "g", System: "s"}}},
			{Name: "empty", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
	})
	mustApply(t, tmpl)
	spec := tmpl.Spec.Template.Spec
	if got := spec.Containers[0].Env[1].ValueFrom.FileKeyRef.Optional; got == nil || *got {
		t.Errorf("fileKeyRef.optional = %v, want pointer to false", got)
	}
	if spec.Containers[0].Env[0].ValueFrom != nil {
		t.Errorf("valueFrom created for a plain env var")
	}
	az := spec.Volumes[0].AzureDisk
	if az.CachingMode == nil || *az.CachingMode != corev1.AzureDataDiskCachingReadWrite ||
		az.FSType == nil || *az.FSType != "ext4" ||
		az.ReadOnly == nil || *az.ReadOnly ||
		az.Kind == nil || *az.Kind != corev1.AzureSharedBlobDisk {
		t.Errorf("azureDisk not defaulted: %+v", az)
	}
	if r := spec.Volumes[1].RBD; r.RBDPool != "rbd" || r.RadosUser != "admin" || r.Keyring != "/etc/ceph/keyring" {
		t.Errorf("rbd not defaulted: %+v", r)
	}
	if i := spec.Volumes[2].ISCSI; i.ISCSIInterface != "default" {
		t.Errorf("iscsi not defaulted: %+v", i)
	}
	if s := spec.Volumes[3].ScaleIO; s.StorageMode != "ThinProvisioned" || s.FSType != "xfs" {
		t.Errorf("scaleIO not defaulted: %+v", s)
	}
	if v := spec.Volumes[4].VolumeSource; v.AzureDisk != nil || v.RBD != nil || v.ISCSI != nil || v.ScaleIO != nil {
		t.Errorf("a missing volume source was created: %+v", v)
	}
}

func TestPresentValuesKept(t *testing.T) {
	tmpl := podTemplate(corev1.PodSpec{
		Containers: []corev1.Container{{
			Name:  "main",
			Ports: []corev1.ContainerPort{{ContainerPort: 1, Protocol: corev1.ProtocolSCTP}},
			Env: []corev1.EnvVar{{Name: "FILE", ValueFrom: &corev1.EnvVarSource{
				FileKeyRef: &corev1.FileKeySelector{VolumeName: "v", Path: "p", Key: "k", Optional: ptr.To(true)},
			}}},
			LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 1, Service: ptr.To("health")}}},
		}},
		Volumes: []corev1.Volume{{Name: "az", VolumeSource: corev1.VolumeSource{AzureDisk: &corev1.AzureDiskVolumeSource{
			DiskName:    "d",
			CachingMode: ptr.To(corev1.AzureDataDiskCachingNone),
			FSType:      ptr.To("xfs"),
			ReadOnly:    ptr.To(true),
			Kind:        ptr.To(corev1.AzureManagedDisk),
		}}}},
	})
	want := tmpl.DeepCopy()
	mustApply(t, tmpl)
	if !apiequality.Semantic.DeepEqual(tmpl, want) {
		t.Errorf("explicit values changed:\n got %+v\nwant %+v", tmpl, want)
	}
}

func TestNoParentCreated(t *testing.T) {
	tmpl := podTemplate(corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
	})
	want := tmpl.DeepCopy()
	mustApply(t, tmpl)
	if !reflect.DeepEqual(tmpl, want) {
		t.Errorf("a template without defaultable fields changed:\n got %+v\nwant %+v", tmpl, want)
	}
	empty := &batchv1.JobTemplateSpec{}
	mustApply(t, empty)
	if !reflect.DeepEqual(empty, &batchv1.JobTemplateSpec{}) {
		t.Errorf("an empty template changed: %+v", empty)
	}
}

// A template with nothing to default is not converted back at all, so even
// what the JSON form would lose (sub-second times) is kept.
func TestUntouchedWithoutDefaults(t *testing.T) {
	ts := metav1.NewTime(time.Date(2024, 1, 2, 3, 4, 5, 678, time.UTC))
	tmpl := podTemplate(corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}})
	tmpl.CreationTimestamp = ts
	mustApply(t, tmpl)
	if !tmpl.CreationTimestamp.Equal(&ts) || tmpl.CreationTimestamp.Nanosecond() != 678 {
		t.Errorf("creationTimestamp changed to %v", tmpl.CreationTimestamp)
	}
}

func TestIdempotent(t *testing.T) {
	tmpl := benchTemplate()
	mustApply(t, tmpl)
	once := tmpl.DeepCopy()
	mustApply(t, tmpl)
	if !reflect.DeepEqual(tmpl, once) {
		t.Errorf("second application changed the template")
	}
}

func TestPersistentVolumeClaimRoundTrip(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("1Gi"),
			}},
		},
	}
	want := pvc.DeepCopy()
	if err := ApplyToPersistentVolumeClaim(pvc); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(pvc, want) {
		t.Errorf("claim changed: %+v", pvc)
	}
	if err := ApplyToPersistentVolumeClaim(nil); err != nil {
		t.Errorf("nil claim: %v", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	done := make(chan *batchv1.JobTemplateSpec)
	for i := 0; i < 4; i++ {
		go func() {
			tmpl := benchTemplate()
			if err := ApplyToJobTemplate(tmpl); err != nil {
				t.Error(err)
			}
			done <- tmpl
		}()
	}
	first := <-done
	for i := 1; i < 4; i++ {
		if other := <-done; !reflect.DeepEqual(first, other) {
			t.Errorf("concurrent results differ")
		}
	}
}

// problemsFrom lists, sorted, the build problems of every node reachable from
// the definition root, whether or not it reaches a default.
func problemsFrom(view *structural, root string) []string {
	n := view.nodes[root]
	if n == nil {
		return []string{root + ": no such definition"}
	}
	var out []string
	seen := map[*node]bool{}
	var walk func(n *node)
	visit := func(s *slot) {
		if s != nil && s.schema != nil {
			walk(s.schema)
		}
	}
	walk = func(n *node) {
		if seen[n] {
			return
		}
		seen[n] = true
		out = append(out, n.problems...)
		for _, p := range n.props {
			visit(p)
		}
		visit(n.items)
		visit(n.additional)
	}
	walk(n)
	sort.Strings(out)
	return out
}
