// Package manifests renders the kustomize install manifests of
// artifacts/deploy into the single YAML files a release ships, with the
// release's images.
package manifests

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/distribution/reference"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// image is a kustomize image override, from a full image reference.
type image struct {
	newName, newTag, digest string
}

// parseImage splits a reference such as
// ghcr.io/nativejobset/jobset-apiserver:v1.2.3@sha256:… into name, tag and
// digest, using the distribution reference grammar (so a registry port is
// not taken for a tag). It must have a tag or a digest: the manifests of a
// release never float.
func parseImage(ref string) (image, error) {
	r, err := reference.Parse(ref)
	if err != nil {
		return image{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	named, ok := r.(reference.Named)
	if !ok {
		return image{}, fmt.Errorf("image reference %q has no repository name", ref)
	}
	img := image{newName: named.Name()}
	if t, ok := r.(reference.Tagged); ok {
		img.newTag = t.Tag()
	}
	if d, ok := r.(reference.Digested); ok {
		img.digest = d.Digest().String()
	}
	if img.newTag == "" && img.digest == "" {
		return image{}, fmt.Errorf("image reference %q has neither a tag nor a digest", ref)
	}
	return img, nil
}

// Render builds the kustomization in overlayDir (on the real file system)
// and returns the objects as multi-document YAML. images maps the image
// names the manifests use (jobset-apiserver, jobset-controller) to full
// references; every kustomization the build reads gets its entries for
// those names replaced, and the top one gets entries it lacks, as
// 'kustomize edit set image' would do there.
func Render(overlayDir string, images map[string]string) ([]byte, error) {
	root, err := filepath.Abs(overlayDir)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", overlayDir, err)
	}
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", overlayDir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("rendering %s: not a directory", overlayDir)
	}
	overrides := make(map[string]image, len(images))
	for name, ref := range images {
		if name == "" {
			return nil, fmt.Errorf("rendering %s: empty image name for %q", overlayDir, ref)
		}
		img, err := parseImage(ref)
		if err != nil {
			return nil, fmt.Errorf("rendering %s: image %s: %w", overlayDir, name, err)
		}
		overrides[name] = img
	}

	// Kustomize reads through the resolved directory; compare with that.
	if resolved, err := filepath.EvalSymlinks(root); err == nil {
		root = resolved
	}
	fs := imageFS{FileSystem: filesys.MakeFsOnDisk(), root: root, images: overrides}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(fs, root)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", overlayDir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", overlayDir, err)
	}
	// An override that matched no container is a typo or a stale name;
	// the release would ship an image it did not mean to.
	used := map[string]bool{}
	for _, r := range m.Resources() {
		obj, err := r.Map()
		if err != nil {
			return nil, fmt.Errorf("rendering %s: %s: %w", overlayDir, r.CurId(), err)
		}
		collectImages(obj, false, used)
	}
	for name, ref := range images {
		if !used[ref] {
			return nil, fmt.Errorf("rendering %s: no container uses the image %s (set to %s)", overlayDir, name, ref)
		}
	}
	return out, nil
}

// collectImages records the image of every container and init container
// anywhere in obj (pod templates of any workload kind).
func collectImages(obj any, inContainers bool, used map[string]bool) {
	switch o := obj.(type) {
	case map[string]any:
		if img, ok := o["image"].(string); ok && inContainers {
			used[img] = true
		}
		for k, v := range o {
			collectImages(v, k == "containers" || k == "initContainers", used)
		}
	case []any:
		for _, e := range o {
			collectImages(e, inContainers, used)
		}
	}
}

// imageFS is the disk, except that kustomization files are read with their
// images entries rewritten.
type imageFS struct {
	filesys.FileSystem
	root   string
	images map[string]image
}

func (f imageFS) ReadFile(path string) ([]byte, error) {
	data, err := f.FileSystem.ReadFile(path)
	if err != nil || len(f.images) == 0 || !slices.Contains(konfig.RecognizedKustomizationFileNames(), filepath.Base(path)) {
		return data, err
	}
	top := filepath.Dir(path) == f.root
	rewritten, err := setImages(data, f.images, top)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rewritten, nil
}

// setImages replaces the images entries of a kustomization named in images,
// and with addMissing appends entries for the other names.
func setImages(kustomization []byte, images map[string]image, addMissing bool) ([]byte, error) {
	var k map[string]any
	if err := yaml.Unmarshal(kustomization, &k); err != nil {
		return nil, err
	}
	if k == nil {
		k = map[string]any{}
	}
	var entries []any
	if v, ok := k["images"]; ok && v != nil {
		if entries, ok = v.([]any); !ok {
			return nil, fmt.Errorf("images is a %T, not a list", v)
		}
	}
	seen := map[string]bool{}
	changed := false
	for i, e := range entries {
		entry, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("images[%d] is a %T, not a mapping", i, e)
		}
		name, _ := entry["name"].(string)
		img, ok := images[name]
		if !ok {
			continue
		}
		seen[name] = true
		entries[i] = img.entry(name)
		changed = true
	}
	if addMissing {
		names := make([]string, 0, len(images))
		for n := range images {
			if !seen[n] {
				names = append(names, n)
			}
		}
		sort.Strings(names) // a stable file for stable output
		for _, n := range names {
			entries = append(entries, images[n].entry(n))
			changed = true
		}
	}
	if !changed {
		return kustomization, nil
	}
	k["images"] = entries
	return yaml.Marshal(k)
}

// entry is the kustomization images entry; fields left empty are omitted
// so that kustomize replaces both tag and digest of the original.
func (img image) entry(name string) map[string]any {
	e := map[string]any{"name": name, "newName": img.newName}
	if img.newTag != "" {
		e["newTag"] = img.newTag
	}
	if img.digest != "" {
		e["digest"] = img.digest
	}
	return e
}
