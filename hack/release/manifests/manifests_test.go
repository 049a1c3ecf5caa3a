package manifests_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nativejobset/jobset/hack/release/manifests"
)

const (
	deployDir = "../../../artifacts/deploy"
	digest    = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// images returns kind/name → image of the first container of every
// workload in a rendered file.
func images(t *testing.T, out []byte) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var obj struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     struct {
				Template struct {
					Spec struct {
						Containers []struct{ Image string }
					}
				}
			}
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		if c := obj.Spec.Template.Spec.Containers; len(c) > 0 {
			got[obj.Kind+"/"+obj.Metadata.Name] = c[0].Image
		}
	}
	return got
}

func TestRenderSetsImages(t *testing.T) {
	apiserver := "ghcr.io/nativejobset/jobset-apiserver:v1.2.3@" + digest
	// A registry with a port: the port is not a tag.
	controller := "localhost:5000/jobset/jobset-controller:v1.2.3"
	for overlay, workload := range map[string]string{
		"overlays/embedded-etcd": "StatefulSet/jobset-apiserver",
		"overlays/external-etcd": "Deployment/jobset-apiserver",
	} {
		t.Run(overlay, func(t *testing.T) {
			out, err := manifests.Render(deployDir+"/"+overlay, map[string]string{
				"jobset-apiserver":  apiserver,
				"jobset-controller": controller,
			})
			if err != nil {
				t.Fatal(err)
			}
			got := images(t, out)
			want := map[string]string{workload: apiserver, "Deployment/jobset-controller": controller}
			if len(got) != len(want) {
				t.Errorf("workloads %v, want %v", got, want)
			}
			for w, img := range want {
				if got[w] != img {
					t.Errorf("%s image = %q, want %q", w, got[w], img)
				}
			}
			if strings.Contains(string(out), "registry.example.com") {
				t.Error("the overlay's placeholder images are still in the output")
			}
			if !strings.Contains(string(out), "kind: APIService") || !strings.Contains(string(out), "kind: Namespace") {
				t.Error("the output lacks objects of the base")
			}
		})
	}
}

// Without overrides, the overlay's own images stay.
func TestRenderKeepsOverlayImages(t *testing.T) {
	out, err := manifests.Render(deployDir+"/overlays/embedded-etcd", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := images(t, out)["Deployment/jobset-controller"]; got != "registry.example.com/jobset/jobset-controller:dev" {
		t.Errorf("controller image = %q, want the overlay's", got)
	}
}

// The base declares no images: the override is added to the top
// kustomization, and a digest-only reference replaces the name's tag.
func TestRenderAddsMissingImageEntry(t *testing.T) {
	ref := "ghcr.io/nativejobset/jobset-controller@" + digest
	out, err := manifests.Render(deployDir+"/base", map[string]string{"jobset-controller": ref})
	if err != nil {
		t.Fatal(err)
	}
	if got := images(t, out)["Deployment/jobset-controller"]; got != ref {
		t.Errorf("controller image = %q, want %q", got, ref)
	}
}

func TestRenderErrors(t *testing.T) {
	overlay := deployDir + "/overlays/embedded-etcd"
	for name, tc := range map[string]struct {
		images map[string]string
		want   []string
	}{
		"upper case":       {map[string]string{"jobset-apiserver": "ghcr.io/NativeJobSet/jobset-apiserver:v1"}, []string{"jobset-apiserver", "NativeJobSet"}},
		"no tag or digest": {map[string]string{"jobset-apiserver": "ghcr.io/nativejobset/jobset-apiserver"}, []string{"neither a tag nor a digest"}},
		"short digest":     {map[string]string{"jobset-apiserver": "ghcr.io/nativejobset/jobset-apiserver@sha256:abc"}, []string{"sha256:abc"}},
		"unused name":      {map[string]string{"jobset-nothing": "ghcr.io/nativejobset/jobset-nothing:v1"}, []string{"no container uses the image jobset-nothing"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := manifests.Render(overlay, tc.images)
			if err == nil {
				t.Fatalf("Render succeeded, want an error containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}

	_, err := manifests.Render(deployDir+"/overlays/nope", nil)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "overlays/nope") {
		t.Errorf("Render(missing dir) = %v, want a not-exist error naming the directory", err)
	}
}
