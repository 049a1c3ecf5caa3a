package chart_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"sigs.k8s.io/yaml"

	"github.com/nativejobset/jobset/hack/release/chart"
	"github.com/nativejobset/jobset/hack/release/manifests"
)

const (
	chartDir  = "../../../charts/jobset"
	deployDir = "../../../artifacts/deploy"
	namespace = "jobset-system"
)

// overlayImages are the chart values giving the images the kustomize
// overlays set (registry.example.com/jobset/<name>:dev).
func overlayImages() map[string]any {
	return map[string]any{
		"image":      map[string]any{"registry": "registry.example.com/jobset"},
		"apiserver":  map[string]any{"image": map[string]any{"tag": "dev"}},
		"controller": map[string]any{"image": map[string]any{"tag": "dev"}},
	}
}

// with deep-merges extra values into v.
func with(v map[string]any, extra map[string]any) map[string]any {
	for k, e := range extra {
		if em, ok := e.(map[string]any); ok {
			if vm, ok := v[k].(map[string]any); ok {
				v[k] = with(vm, em)
				continue
			}
		}
		v[k] = e
	}
	return v
}

func renderChart(t *testing.T, values map[string]any) map[objKey]map[string]any {
	t.Helper()
	out, err := chart.Render(chartDir, "jobset", namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	return parseObjects(t, "chart", out)
}

func renderKustomize(t *testing.T, dir string) map[objKey]map[string]any {
	t.Helper()
	out, err := manifests.Render(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return parseObjects(t, "kustomize "+dir, out)
}

var namespaceKey = objKey{"v1", "Namespace", "", namespace}

// Default values render the objects of overlays/embedded-etcd. The one
// exception is the Namespace: Helm needs the release namespace before it
// applies the chart, so the chart renders it only with namespace.create
// (see the chart's README); with it, the sets are equal.
func TestDefaultsMatchEmbeddedEtcdOverlay(t *testing.T) {
	want := renderKustomize(t, filepath.Join(deployDir, "overlays/embedded-etcd"))
	if _, ok := want[namespaceKey]; !ok {
		t.Fatalf("the overlay has no %s; the exception below is stale", namespaceKey)
	}

	t.Run("namespace.create=false (default)", func(t *testing.T) {
		w := map[objKey]map[string]any{}
		for k, v := range want {
			if k != namespaceKey {
				w[k] = v
			}
		}
		compareObjects(t, w, renderChart(t, overlayImages()))
	})
	t.Run("namespace.create=true", func(t *testing.T) {
		compareObjects(t, want, renderChart(t, with(overlayImages(), map[string]any{
			"namespace": map[string]any{"create": true},
		})))
	})
}

func TestExternalEtcdMatchesOverlay(t *testing.T) {
	want := renderKustomize(t, filepath.Join(deployDir, "overlays/external-etcd"))
	got := renderChart(t, with(overlayImages(), map[string]any{
		"namespace": map[string]any{"create": true},
		"apiserver": map[string]any{"etcd": map[string]any{
			"mode": "external",
			// The overlay's example members.
			"servers": []any{"https://etcd-0.etcd:2379", "https://etcd-1.etcd:2379", "https://etcd-2.etcd:2379"},
		}},
	}))
	compareObjects(t, want, got)
}

func TestCertManagerMatchesComponent(t *testing.T) {
	want := renderKustomize(t, "testdata/embedded-etcd-cert-manager")
	got := renderChart(t, with(overlayImages(), map[string]any{
		"namespace":   map[string]any{"create": true},
		"certManager": map[string]any{"enabled": true},
	}))
	compareObjects(t, want, got)
}

func TestScheduledBackupMatchesComponent(t *testing.T) {
	want := renderKustomize(t, "testdata/embedded-etcd-scheduled-backup")
	got := renderChart(t, with(overlayImages(), map[string]any{
		"namespace": map[string]any{"create": true},
		"backup":    map[string]any{"enabled": true},
	}))
	compareObjects(t, want, got)
}

// metrics.serviceMonitor.enabled adds the objects of
// artifacts/monitoring/servicemonitor.yaml and rbac.yaml, but for the
// discovery Role and its binding: those are for the plain scrape config,
// while the Prometheus Operator grants its Prometheus discovery itself.
func TestServiceMonitorMatchesMonitoringArtifacts(t *testing.T) {
	want := map[objKey]map[string]any{}
	for _, f := range []string{"servicemonitor.yaml", "rbac.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../../artifacts/monitoring", f))
		if err != nil {
			t.Fatal(err)
		}
		for k, obj := range parseObjects(t, f, data) {
			want[k] = obj
		}
	}
	for _, kind := range []string{"Role", "RoleBinding"} {
		k := objKey{"rbac.authorization.k8s.io/v1", kind, namespace, "jobset-metrics-discovery"}
		if _, ok := want[k]; !ok {
			t.Fatalf("rbac.yaml has no %s; the exception above is stale", k)
		}
		delete(want, k)
	}
	base := renderChart(t, overlayImages())
	all := renderChart(t, with(overlayImages(), map[string]any{
		"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
	}))
	got := map[objKey]map[string]any{}
	for k, v := range all {
		if _, ok := base[k]; !ok {
			got[k] = v
		}
	}
	compareObjects(t, want, got)
}

func TestLintWithoutWarnings(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"defaults": nil,
		"external etcd": {"apiserver": map[string]any{"etcd": map[string]any{
			"mode": "external", "servers": []any{"https://etcd:2379"},
		}}},
		"everything on": {
			"namespace":   map[string]any{"create": true},
			"certManager": map[string]any{"enabled": true},
			"metrics":     map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
			"backup":      map[string]any{"enabled": true},
		},
	} {
		t.Run(name, func(t *testing.T) {
			warnings, err := chart.Lint(chartDir, values)
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) > 0 {
				t.Errorf("lint warnings:\n%s", strings.Join(warnings, "\n"))
			}
		})
	}
}

func TestLintFailsOnBrokenChart(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "Chart.yaml"), "apiVersion: v2\nname: broken\nversion: 0.1.0\n")
	writeFile(t, filepath.Join(dir, "values.yaml"), "{}\n")
	writeFile(t, filepath.Join(dir, "templates/cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.missing.name }}\n")
	_, err := chart.Lint(dir, nil)
	if err == nil || !strings.Contains(err.Error(), "templates/cm.yaml") {
		t.Errorf("Lint(broken chart) = %v, want an error naming templates/cm.yaml", err)
	}

	if _, err := chart.Lint(filepath.Join(dir, "nope"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Lint(missing dir) = %v, want a not-exist error", err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// containerImage is the image of the first container of a workload.
func containerImage(t *testing.T, objs map[objKey]map[string]any, k objKey) string {
	t.Helper()
	obj, ok := objs[k]
	if !ok {
		t.Fatalf("no %s", k)
	}
	spec := obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	return spec["containers"].([]any)[0].(map[string]any)["image"].(string)
}

var (
	controllerKey = objKey{"apps/v1", "Deployment", namespace, "jobset-controller"}
	apiserverKey  = objKey{"apps/v1", "StatefulSet", namespace, "jobset-apiserver"}
)

func TestImages(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

	objs := renderChart(t, map[string]any{
		"controller": map[string]any{"image": map[string]any{"tag": "v9.9.9", "digest": digest}},
	})
	if got, want := containerImage(t, objs, controllerKey), "ghcr.io/nativejobset/jobset-controller@"+digest; got != want {
		t.Errorf("controller image with a digest = %s, want %s", got, want)
	}
	// No tag given: the appVersion.
	if got, want := containerImage(t, objs, apiserverKey), "ghcr.io/nativejobset/jobset-apiserver:0.0.0-dev"; got != want {
		t.Errorf("apiserver image = %s, want %s", got, want)
	}

	_, err := chart.Render(chartDir, "jobset", namespace, map[string]any{
		"apiserver": map[string]any{"image": map[string]any{"digest": "sha256:abc"}},
	})
	if err == nil || !strings.Contains(err.Error(), "/apiserver/image/digest") {
		t.Errorf("Render(short digest) = %v, want an error naming the value", err)
	}
}

func TestRenderErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"external without servers": {
			map[string]any{"apiserver": map[string]any{"etcd": map[string]any{"mode": "external"}}},
			"apiserver.etcd.servers is required",
		},
		"unknown mode": {
			map[string]any{"apiserver": map[string]any{"etcd": map[string]any{"mode": "sqlite"}}},
			"/apiserver/etcd/mode",
		},
		"misspelt value": {
			map[string]any{"controller": map[string]any{"replica": 3}},
			"replica",
		},
		"backup of an external etcd": {
			map[string]any{"backup": map[string]any{"enabled": true}, "apiserver": map[string]any{"etcd": map[string]any{
				"mode": "external", "servers": []any{"https://etcd:2379"}}}},
			"back up your etcd cluster itself",
		},
		"backup keeping none": {
			map[string]any{"backup": map[string]any{"enabled": true, "keep": 0}},
			"/backup/keep",
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := chart.Render(chartDir, "jobset", namespace, tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Render = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := chart.Render("testdata/nope", "jobset", namespace, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Render(missing dir) = %v, want a not-exist error", err)
	}
}

func TestPackage(t *testing.T) {
	dir1, dir2 := t.TempDir(), t.TempDir()
	p1, err := chart.Package(chartDir, "1.2.3", "v1.2.3", dir1)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir1, "jobset-1.2.3.tgz"); p1 != want {
		t.Errorf("Package wrote %s, want %s", p1, want)
	}
	ch, err := loader.Load(p1)
	if err != nil {
		t.Fatalf("helm cannot load the package: %v", err)
	}
	if ch.Metadata.Version != "1.2.3" || ch.Metadata.AppVersion != "v1.2.3" {
		t.Errorf("packaged version/appVersion = %s/%s, want 1.2.3/v1.2.3", ch.Metadata.Version, ch.Metadata.AppVersion)
	}
	src, err := loader.LoadDir(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Templates) != len(src.Templates) || len(ch.Templates) == 0 {
		t.Errorf("packaged %d templates, the chart has %d", len(ch.Templates), len(src.Templates))
	}
	if !bytes.Equal(valuesFile(t, ch.Raw), valuesFile(t, src.Raw)) {
		t.Error("packaged values.yaml differs from the chart's")
	}
	var meta map[string]any
	if err := yaml.Unmarshal(findRaw(t, ch.Raw, "Chart.yaml"), &meta); err != nil || meta["version"] != "1.2.3" {
		t.Errorf("packaged Chart.yaml: version %v (%v), want 1.2.3", meta["version"], err)
	}

	// The packaged chart renders, with the appVersion as the image tag.
	expanded := t.TempDir()
	if err := chartutil.ExpandFile(expanded, p1); err != nil {
		t.Fatal(err)
	}
	out, err := chart.Render(filepath.Join(expanded, "jobset"), "jobset", namespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := containerImage(t, parseObjects(t, "packaged chart", out), controllerKey), "ghcr.io/nativejobset/jobset-controller:v1.2.3"; got != want {
		t.Errorf("packaged chart's controller image = %s, want %s", got, want)
	}

	// Reproducible: the same inputs give the same bytes.
	p2, err := chart.Package(chartDir, "1.2.3", "v1.2.3", dir2)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(p1)
	b2, _ := os.ReadFile(p2)
	if !bytes.Equal(b1, b2) {
		t.Error("two packages of the same chart differ")
	}

	for _, v := range []string{"", "not-semver"} {
		if _, err := chart.Package(chartDir, v, "v1", t.TempDir()); err == nil {
			t.Errorf("Package(version %q) succeeded, want an error", v)
		}
	}
}

func valuesFile(t *testing.T, raw []*common.File) []byte {
	t.Helper()
	return findRaw(t, raw, "values.yaml")
}

func findRaw(t *testing.T, raw []*common.File, name string) []byte {
	t.Helper()
	for _, f := range raw {
		if f.Name == name {
			return f.Data
		}
	}
	t.Fatalf("no %s in the chart", name)
	return nil
}
