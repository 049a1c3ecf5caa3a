// Package image builds the OCI images of JobSet's binaries without a
// container daemon: the binaries with 'go build', the filesystem as two
// layers written here (a base with passwd, group and CA certificates, and
// the binary), the images and indexes with go-containerregistry. Every
// byte depends only on the commit, the options and the Go toolchain, so
// that two builds of a commit give the same digests.
package image

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Names are the images, one per command under cmd/.
var Names = []string{"jobset-apiserver", "jobset-controller", "jobset-inplace-agent", "jobset-migrate"}

// DefaultPlatforms are the platforms of a release.
var DefaultPlatforms = []string{"linux/amd64", "linux/arm64"}

// Source is the repository the images' labels point at.
const Source = "https://github.com/nativejobset/jobset"

// versionPkg is the package whose variables the linker stamps.
const versionPkg = "github.com/nativejobset/jobset/pkg/version"

// Options say what to build.
type Options struct {
	// Root is the repository root (the product's go.mod).
	Root string
	// Out receives the layouts, archives, binaries and images.json.
	Out string
	// Version is the images' tag and the binaries' version, e.g. v0.1.0.
	Version string
	// Commit is the full revision, stamped into the binaries and labels.
	Commit string
	// Created is the time of every file and of the images: the commit
	// time, so that rebuilding a commit gives the same digests.
	Created time.Time
	// Repository prefixes the references, e.g. ghcr.io/nativejobset.
	Repository string
	// Platforms, "os/arch"; empty means DefaultPlatforms.
	Platforms []string
	// Tags are Go build tags, comma-separated.
	Tags string
	// Names are the images to build; empty means Names.
	Names []string
	// Go is the go command; empty means "go" on PATH.
	Go string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

func (o *Options) complete() error {
	if len(o.Platforms) == 0 {
		o.Platforms = DefaultPlatforms
	}
	if len(o.Names) == 0 {
		o.Names = Names
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	var problems []string
	if o.Root == "" {
		problems = append(problems, "no repository root")
	}
	if o.Out == "" {
		problems = append(problems, "no output directory")
	}
	if o.Commit == "" {
		problems = append(problems, "no commit")
	}
	if o.Created.IsZero() {
		problems = append(problems, "no creation time (the commit time)")
	}
	if _, err := name.NewTag("example.com/x:" + o.Version); err != nil || o.Version == "" {
		problems = append(problems, fmt.Sprintf("version %q is not a valid image tag", o.Version))
	}
	if _, err := name.NewRepository(o.Repository + "/x"); err != nil || o.Repository == "" {
		problems = append(problems, fmt.Sprintf("repository %q is not a valid image repository", o.Repository))
	}
	for _, p := range o.Platforms {
		if goos, arch, ok := strings.Cut(p, "/"); !ok || goos != "linux" || arch == "" || strings.Contains(arch, "/") {
			problems = append(problems, fmt.Sprintf("platform %q is not linux/<arch>", p))
		}
	}
	for _, n := range o.Names {
		if !slices.Contains(Names, n) {
			problems = append(problems, fmt.Sprintf("unknown image %q (known: %s)", n, strings.Join(Names, ", ")))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("image options: %s", strings.Join(problems, "; "))
	}
	return nil
}

// Build builds the binaries and the images of o and writes them with
// images.json into o.Out. Output of earlier runs for the same images is
// replaced.
func Build(ctx context.Context, o Options) (*Manifest, error) {
	if err := o.complete(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	for _, p := range o.Platforms {
		if err := buildBinaries(ctx, o, p); err != nil {
			return nil, err
		}
	}
	baseFiles, err := baseEntries()
	if err != nil {
		return nil, err
	}
	base, err := newLayer(baseFiles, o.Created)
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	m := &Manifest{Version: o.Version, Commit: o.Commit, Created: o.Created.UTC(), Repository: o.Repository}
	for _, n := range o.Names {
		img, err := buildImage(o, n, base)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", n, err)
		}
		m.Images = append(m.Images, *img)
	}
	if err := m.write(o.Out); err != nil {
		return nil, err
	}
	return m, nil
}

// binDir is where the binaries of a platform go, relative to Out.
func binDir(platform string) string {
	return filepath.Join("bin", strings.ReplaceAll(platform, "/", "_"))
}

// buildBinaries runs one 'go build' for all images of a platform, so that
// the toolchain shares the work between them.
func buildBinaries(ctx context.Context, o Options, platform string) error {
	goos, goarch, _ := strings.Cut(platform, "/")
	dir, err := filepath.Abs(filepath.Join(o.Out, binDir(platform)))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// -trimpath and -buildvcs=false keep the checkout's path and state out
	// of the binaries; the version comes from -X alone.
	args := []string{"build", "-trimpath", "-buildvcs=false",
		"-tags", o.Tags,
		"-ldflags", fmt.Sprintf("-s -w -X %s.version=%s -X %s.commit=%s", versionPkg, o.Version, versionPkg, o.Commit),
		"-o", dir + string(filepath.Separator)}
	for _, n := range o.Names {
		args = append(args, "./cmd/"+n)
	}
	cmd := exec.CommandContext(ctx, o.Go, args...)
	cmd.Dir = o.Root
	// The baseline instruction sets, whatever the environment says, so
	// that the images run on every CPU of the architecture.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOAMD64=v1", "GOARM64=v8.0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	fmt.Fprintf(o.Log, "go build %s: %s\n", platform, strings.Join(o.Names, " "))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s in %s: %w\n%s", platform, o.Root, err, out.String())
	}
	return nil
}

// metadata is both the labels of the image configurations and the
// annotations of the manifests and indexes.
func metadata(o Options, imageName string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.revision": o.Commit,
		"org.opencontainers.image.title":    imageName,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  o.Created.UTC().Format(time.RFC3339),
	}
}

// buildImage assembles the platform images of one binary (in parallel:
// compressing the binary is most of the work), then writes the index as
// an OCI layout and each platform image as an archive.
func buildImage(o Options, imageName string, base v1.Layer) (*Image, error) {
	ref, err := name.NewTag(o.Repository + "/" + imageName + ":" + o.Version)
	if err != nil {
		return nil, err
	}
	imgs := make([]v1.Image, len(o.Platforms))
	errs := make([]error, len(o.Platforms))
	var wg sync.WaitGroup
	for i, p := range o.Platforms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			imgs[i], errs[i] = platformImage(o, imageName, p, base)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.Platforms[i], err)
		}
	}

	meta := metadata(o, imageName)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	res := &Image{Name: imageName, Reference: ref.String(), Layout: imageName}
	for i, p := range o.Platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        imgs[i],
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: goos, Architecture: goarch}},
		})
		archive := imageName + "_" + goos + "_" + goarch + ".tar"
		if err := writeArchive(filepath.Join(o.Out, archive), ref, imgs[i]); err != nil {
			return nil, err
		}
		digest, err := imgs[i].Digest()
		if err != nil {
			return nil, err
		}
		config, err := imgs[i].ConfigName()
		if err != nil {
			return nil, err
		}
		res.Platforms = append(res.Platforms, Platform{
			OS: goos, Architecture: goarch,
			ManifestDigest: digest.String(),
			ConfigDigest:   config.String(),
			Archive:        archive,
			Binary:         filepath.ToSlash(filepath.Join(binDir(p), imageName)),
		})
	}
	index := mutate.Annotations(idx, meta).(v1.ImageIndex)
	digest, err := index.Digest()
	if err != nil {
		return nil, err
	}
	res.IndexDigest = digest.String()

	dir := filepath.Join(o.Out, res.Layout)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, err
	}
	if err := lp.AppendIndex(index, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.Version,
	})); err != nil {
		return nil, fmt.Errorf("writing the OCI layout %s: %w", dir, err)
	}
	return res, nil
}

// platformImage is the image of one binary for one platform: the base
// layer and a layer with the binary at /<name>.
func platformImage(o Options, imageName, platform string, base v1.Layer) (v1.Image, error) {
	goos, goarch, _ := strings.Cut(platform, "/")
	bin := filepath.Join(o.Out, binDir(platform), imageName)
	binLayer, err := newLayer([]entry{{name: imageName, mode: 0o755, path: bin}}, o.Created)
	if err != nil {
		return nil, fmt.Errorf("binary layer: %w", err)
	}
	meta := metadata(o, imageName)
	created := v1.Time{Time: o.Created.UTC()}
	img, err := mutate.ConfigFile(mutate.MediaType(empty.Image, types.OCIManifestSchema1), &v1.ConfigFile{
		OS:           goos,
		Architecture: goarch,
		Created:      created,
		Config: v1.Config{
			Entrypoint: []string{"/" + imageName},
			User:       fmt.Sprintf("%d:%d", NonrootUID, NonrootUID),
			WorkingDir: "/",
			// The binary is the only program, at /.
			Env:    []string{"PATH=/"},
			Labels: meta,
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: "base: passwd, group, CA certificates, /tmp, /home/nonroot", Comment: "hack/release/image"}},
		mutate.Addendum{Layer: binLayer, History: v1.History{Created: created, CreatedBy: "binary: /" + imageName, Comment: "hack/release/image"}},
	)
	if err != nil {
		return nil, err
	}
	img = mutate.Annotations(img, meta).(v1.Image)
	// Compute the digest now, so that errors surface here and the
	// parallel goroutines do the hashing.
	if _, err := img.Digest(); err != nil {
		return nil, err
	}
	return img, nil
}

// writeArchive writes img as a 'docker save' tarball tagged ref, which
// 'docker load' and 'ctr images import' read.
func writeArchive(path string, ref name.Tag, img v1.Image) error {
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}
