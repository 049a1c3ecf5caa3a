package image

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nativejobset/jobset/hack/release/nodeimage"
)

// NodeOptions say how to build the local node's images (see package
// nodeimage).
type NodeOptions struct {
	// Root is the repository root; the pause binary is built from
	// hack/release/pause in it.
	Root string
	// Out receives nodeimage.PauseArchive and nodeimage.BusyboxArchive.
	Out string
	// Busybox is a static linux/amd64 busybox; empty means FindBusybox.
	Busybox string
	// Images is the output directory of 'make images'; when set, the
	// busybox image with the in-place agent is built too, with the agent
	// binary built for its linux/amd64 image.
	Images string
	// Go is the go command; empty means "go" on PATH.
	Go string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// NodeImage is one image written by BuildNodeImages.
type NodeImage struct {
	Reference string
	// Archive is the docker archive's path, for 'ctr images import'.
	Archive string
}

// nodeCreated is the time of the node images and their files. The images
// are built on the machine that uses them and never released, so a fixed
// time makes them depend on their inputs alone.
var nodeCreated = time.Unix(0, 0).UTC()

// FindBusybox returns the busybox on PATH, else Debian's busybox-static
// location, else an error saying how to get one.
func FindBusybox() (string, error) {
	if p, err := exec.LookPath("busybox"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no busybox binary found: install Debian's busybox-static or pass its path")
}

// BuildNodeImages writes the pause and busybox images as docker archives
// into o.Out. The node is the local machine, so they are linux/amd64 only.
func BuildNodeImages(ctx context.Context, o NodeOptions) ([]NodeImage, error) {
	if o.Root == "" || o.Out == "" {
		return nil, errors.New("node images: a repository root and an output directory are required")
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Busybox == "" {
		p, err := FindBusybox()
		if err != nil {
			return nil, err
		}
		o.Busybox = p
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	// The binary is only an input of the layer, so it lives in a
	// temporary directory.
	tmp, err := os.MkdirTemp("", "pause-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	pauseBin := filepath.Join(tmp, "pause")
	if err := buildPause(ctx, o, pauseBin); err != nil {
		return nil, err
	}
	pause, err := nodeImage([]entry{{name: "pause", mode: 0o755, path: pauseBin}}, v1.Config{
		Entrypoint: []string{"/pause"},
		// The sandbox needs no privilege; 65535 is the conventional
		// user of pause containers.
		User:       "65535:65535",
		WorkingDir: "/",
	})
	if err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}

	fmt.Fprintf(o.Log, "busybox image from %s\n", o.Busybox)
	files, err := busyboxEntries(ctx, o.Busybox)
	if err != nil {
		return nil, err
	}
	busybox, err := nodeImage(files, v1.Config{
		Cmd:        []string{"sh"},
		Env:        []string{"PATH=/bin"},
		WorkingDir: "/",
	})
	if err != nil {
		return nil, fmt.Errorf("busybox image: %w", err)
	}

	type nodeImageOut struct {
		ref, archive string
		img          v1.Image
	}
	images := []nodeImageOut{
		{nodeimage.Pause, nodeimage.PauseArchive, pause},
		{nodeimage.Busybox, nodeimage.BusyboxArchive, busybox},
	}
	if o.Images != "" {
		agent, err := agentBinary(o.Images)
		if err != nil {
			return nil, err
		}
		withAgent, err := nodeImage(append(append([]entry{}, files...), entry{name: "jobset-inplace-agent", mode: 0o755, path: agent}), v1.Config{
			Cmd:        []string{"sh"},
			Env:        []string{"PATH=/bin"},
			WorkingDir: "/",
		})
		if err != nil {
			return nil, fmt.Errorf("busybox image with the agent: %w", err)
		}
		images = append(images, nodeImageOut{nodeimage.BusyboxInPlaceAgent, nodeimage.BusyboxInPlaceAgentArchive, withAgent})
	}
	var out []NodeImage
	for _, n := range images {
		tag, err := name.NewTag(n.ref, name.StrictValidation)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(o.Out, n.archive)
		if err := writeArchive(path, tag, n.img); err != nil {
			return nil, err
		}
		out = append(out, NodeImage{Reference: n.ref, Archive: path})
	}
	return out, nil
}

// agentBinary finds the linux/amd64 jobset-inplace-agent binary that
// 'make images' built, through its images.json.
func agentBinary(imagesDir string) (string, error) {
	m, err := ReadManifest(imagesDir)
	if err != nil {
		return "", fmt.Errorf("%w (run 'make images' first)", err)
	}
	for _, img := range m.Images {
		if img.Name != "jobset-inplace-agent" {
			continue
		}
		for _, p := range img.Platforms {
			if p.OS == "linux" && p.Architecture == "amd64" {
				return filepath.Join(imagesDir, filepath.FromSlash(p.Binary)), nil
			}
		}
	}
	return "", fmt.Errorf("%s: no linux/amd64 jobset-inplace-agent image", filepath.Join(imagesDir, ManifestFile))
}

// buildPause builds hack/release/pause as a static linux/amd64 binary.
func buildPause(ctx context.Context, o NodeOptions, path string) error {
	cmd := exec.CommandContext(ctx, o.Go, "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", path, "./pause")
	cmd.Dir = filepath.Join(o.Root, "hack", "release")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOAMD64=v1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	fmt.Fprintln(o.Log, "go build linux/amd64: pause")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./pause in %s: %w\n%s", cmd.Dir, err, out.String())
	}
	return nil
}

// busyboxPasswd and busyboxGroup give root a shell that exists in the
// image, unlike the base image's, and the IDs of 'nobody'.
const (
	busyboxPasswd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
	busyboxGroup  = "root:x:0:\nnobody:x:65534:\n"
)

// busyboxEntries is the busybox image's filesystem: the binary at
// /bin/busybox, a symlink beside it for each applet it reports, and the
// few files a shell and its tools expect.
func busyboxEntries(ctx context.Context, path string) ([]entry, error) {
	if err := checkStaticAMD64(path); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	list, err := exec.CommandContext(ctx, path, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", path, err)
	}
	var links []entry
	for _, applet := range strings.Fields(string(list)) {
		if applet == "busybox" {
			continue
		}
		if strings.Contains(applet, "/") || applet == "." || applet == ".." {
			return nil, fmt.Errorf("%s --list printed %q, not an applet name", path, applet)
		}
		// Relative, so that it resolves inside the container's root.
		links = append(links, entry{name: "bin/" + applet, mode: 0o777, link: "busybox"})
	}
	if len(links) == 0 {
		return nil, fmt.Errorf("%s --list printed no applets", path)
	}
	return append(links,
		entry{name: "bin/", mode: 0o755},
		entry{name: "bin/busybox", mode: 0o755, path: path},
		entry{name: "etc/", mode: 0o755},
		entry{name: "etc/passwd", mode: 0o644, data: []byte(busyboxPasswd)},
		entry{name: "etc/group", mode: 0o644, data: []byte(busyboxGroup)},
		entry{name: "root/", mode: 0o700},
		entry{name: "tmp/", mode: 0o1777},
	), nil
}

// checkStaticAMD64 rejects a binary that would not run in the image: a
// dynamic one (Debian's plain busybox package) finds no libc there.
func checkStaticAMD64(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		return fmt.Errorf("built for %v, not x86-64", f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked; install busybox-static")
		}
	}
	return nil
}

// nodeImage is a linux/amd64 image of one layer holding files.
func nodeImage(files []entry, config v1.Config) (v1.Image, error) {
	layer, err := newLayer(files, nodeCreated)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: nodeCreated}
	img, err := mutate.ConfigFile(mutate.MediaType(empty.Image, types.OCIManifestSchema1), &v1.ConfigFile{
		OS:           "linux",
		Architecture: "amd64",
		Created:      created,
		Config:       config,
		RootFS:       v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	return mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{Created: created, Comment: "hack/release/image"}})
}
