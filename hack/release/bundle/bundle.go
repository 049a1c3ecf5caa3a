// Package bundle writes a release: the install manifests with every image
// pinned by digest, the Helm chart package, the image archives, an SBOM per
// image and platform, and SHA256SUMS over all of it. It reads what
// 'make images' recorded (images.json) instead of rebuilding anything, so
// the bundle describes exactly the images that were built.
package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nativejobset/jobset/hack/release/chart"
	"github.com/nativejobset/jobset/hack/release/image"
	"github.com/nativejobset/jobset/hack/release/manifests"
	"github.com/nativejobset/jobset/hack/release/sbom"
)

// Options say where the inputs are and where the bundle goes.
type Options struct {
	// Root is the repository's top directory (artifacts/deploy and
	// charts/jobset are read from it).
	Root string
	// Images is the output directory of 'make images' (images.json).
	Images string
	// Out is the bundle's directory; it is emptied first.
	Out string
	// Version must equal the version the images were built for.
	Version string
}

// installs are the install manifests of a release: the file name and the
// kustomize overlay it is rendered from.
var installs = []struct{ file, overlay string }{
	{"jobset.yaml", "artifacts/deploy/overlays/embedded-etcd"},
	{"jobset-external-etcd.yaml", "artifacts/deploy/overlays/external-etcd"},
}

// installed are the images the install manifests run; the others (the
// in-place agent, the migration tool) are shipped as archives only.
var installed = []string{"jobset-apiserver", "jobset-controller"}

// SumsFile is the checksum list, in the format 'sha256sum -c' reads.
const SumsFile = "SHA256SUMS"

// Write builds the bundle and returns the files it wrote, relative to Out.
func Write(o Options) ([]string, error) {
	m, err := image.ReadManifest(o.Images)
	if err != nil {
		return nil, err
	}
	if m.Version != o.Version {
		return nil, fmt.Errorf("the images in %s were built for version %s, not %s: run 'make images VERSION=%s' first", o.Images, m.Version, o.Version, o.Version)
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}

	pinned := map[string]string{}
	for _, img := range m.Images {
		if slices.Contains(installed, img.Name) {
			pinned[img.Name] = img.Reference + "@" + img.IndexDigest
		}
	}
	if len(pinned) != len(installed) {
		return nil, fmt.Errorf("%s lacks some of the images the install manifests run (%s)", filepath.Join(o.Images, image.ManifestFile), strings.Join(installed, ", "))
	}
	for _, in := range installs {
		yaml, err := manifests.Render(filepath.Join(o.Root, in.overlay), pinned)
		if err != nil {
			return nil, fmt.Errorf("rendering %s: %w", in.overlay, err)
		}
		if err := os.WriteFile(filepath.Join(o.Out, in.file), yaml, 0o644); err != nil {
			return nil, err
		}
	}

	// Helm wants SemVer 2 without the "v" that our tags carry.
	if _, err := chart.Package(filepath.Join(o.Root, "charts", "jobset"), strings.TrimPrefix(o.Version, "v"), o.Version, o.Out); err != nil {
		return nil, fmt.Errorf("packaging the Helm chart: %w", err)
	}

	for _, dir := range []string{"images", "sbom"} {
		if err := os.MkdirAll(filepath.Join(o.Out, dir), 0o755); err != nil {
			return nil, err
		}
	}
	for _, img := range m.Images {
		for _, p := range img.Platforms {
			if err := copyFile(filepath.Join(o.Images, p.Archive), filepath.Join(o.Out, "images", filepath.Base(p.Archive))); err != nil {
				return nil, fmt.Errorf("image archive of %s %s: %w", img.Name, p, err)
			}
			doc, err := sbom.FromBinary(filepath.Join(o.Images, p.Binary), img.Name, m.Version, m.Created)
			if err != nil {
				return nil, fmt.Errorf("SBOM of %s %s: %w", img.Name, p, err)
			}
			name := fmt.Sprintf("%s_%s_%s.cdx.json", img.Name, p.OS, p.Architecture)
			if err := os.WriteFile(filepath.Join(o.Out, "sbom", name), doc, 0o644); err != nil {
				return nil, err
			}
		}
	}
	return writeSums(o.Out)
}

// writeSums hashes every file below dir into dir/SHA256SUMS, sorted by
// path, and returns the paths.
func writeSums(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err == nil && rel != SumsFile {
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var b strings.Builder
	for _, f := range files {
		sum, err := fileSHA256(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, f)
	}
	if err := os.WriteFile(filepath.Join(dir, SumsFile), []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	return append(files, SumsFile), nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
