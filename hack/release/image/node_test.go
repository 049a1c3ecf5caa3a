package image

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/nativejobset/jobset/hack/release/nodeimage"
)

// buildNode builds the node images into a new directory, skipping the
// test when this machine has no busybox.
func buildNode(t *testing.T) string {
	t.Helper()
	bb, err := FindBusybox()
	if err != nil {
		t.Skipf("cannot build the busybox image: %v", err)
	}
	o := NodeOptions{Root: "../../..", Out: t.TempDir(), Busybox: bb, Go: goTool()}
	imgs, err := BuildNodeImages(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	want := []NodeImage{
		{nodeimage.Pause, filepath.Join(o.Out, nodeimage.PauseArchive)},
		{nodeimage.Busybox, filepath.Join(o.Out, nodeimage.BusyboxArchive)},
	}
	if !slices.Equal(imgs, want) {
		t.Fatalf("BuildNodeImages = %v, want %v", imgs, want)
	}
	return o.Out
}

// readArchive checks that the archive holds one image tagged ref, as
// 'ctr images import' and 'docker load' read it, and returns the image.
func readArchive(t *testing.T, path, ref string) v1.Image {
	t.Helper()
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || !slices.Equal(m[0].RepoTags, []string{ref}) {
		t.Fatalf("%s: manifest %+v, want one image tagged %s", path, m, ref)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("%s: platform %s/%s, want linux/amd64", path, cf.OS, cf.Architecture)
	}
	return img
}

func TestNodeImagesReproducible(t *testing.T) {
	a, b := buildNode(t), buildNode(t)
	for _, f := range []string{nodeimage.PauseArchive, nodeimage.BusyboxArchive} {
		xa, err := os.ReadFile(filepath.Join(a, f))
		if err != nil {
			t.Fatal(err)
		}
		xb, err := os.ReadFile(filepath.Join(b, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(xa, xb) {
			t.Errorf("%s differs between two builds", f)
		}
	}
}

func TestNodeImages(t *testing.T) {
	dir := buildNode(t)

	pause := readArchive(t, filepath.Join(dir, nodeimage.PauseArchive), nodeimage.Pause)
	cf, err := pause.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/pause"}) {
		t.Errorf("pause entrypoint %q, want /pause", cf.Config.Entrypoint)
	}
	headers, _ := files(t, pause)
	if h := headers["pause"]; h == nil || h.Typeflag != tar.TypeReg || h.Mode&0o111 == 0 {
		t.Errorf("pause image: /pause is %+v, want an executable file", h)
	}
	if len(headers) != 1 {
		t.Errorf("pause image holds %d files, want only /pause", len(headers))
	}
	bin := filepath.Join(t.TempDir(), "pause")
	extract(t, pause, "pause", bin)
	if err := checkStaticAMD64(bin); err != nil {
		t.Errorf("/pause: %v", err)
	}

	busybox := readArchive(t, filepath.Join(dir, nodeimage.BusyboxArchive), nodeimage.Busybox)
	cf, err = busybox.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Cmd, []string{"sh"}) || !slices.Equal(cf.Config.Env, []string{"PATH=/bin"}) {
		t.Errorf("busybox config: cmd %q, env %q; want sh and PATH=/bin", cf.Config.Cmd, cf.Config.Env)
	}
	headers, small := files(t, busybox)
	if h := headers["bin/busybox"]; h == nil || h.Typeflag != tar.TypeReg || h.Mode&0o111 == 0 {
		t.Fatalf("/bin/busybox is %+v, want an executable file", h)
	}
	for _, applet := range []string{"sh", "sleep", "nslookup", "nc", "wget", "hostname", "cat", "echo"} {
		if h := headers["bin/"+applet]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
			t.Errorf("/bin/%s is %+v, want a symlink to busybox", applet, h)
		}
	}
	if h := headers["tmp"]; h == nil || h.Typeflag != tar.TypeDir || h.Mode != 0o1777 {
		t.Errorf("/tmp is %+v, want a directory of mode 1777", h)
	}
	if !strings.HasPrefix(string(small["etc/passwd"]), "root:x:0:0:") || !strings.HasPrefix(string(small["etc/group"]), "root:x:0:") {
		t.Errorf("/etc/passwd %q, /etc/group %q: want root first", small["etc/passwd"], small["etc/group"])
	}

	// The symlink works as in a container: busybox runs the applet named
	// by argv[0].
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	extract(t, busybox, "bin/busybox", filepath.Join(root, "bin", "busybox"))
	if err := os.Symlink("busybox", filepath.Join(root, "bin", "sh")); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "bin", "sh"), "-c", "echo hello").CombinedOutput()
	if err != nil || string(out) != "hello\n" {
		t.Errorf("/bin/sh -c echo: %q, %v", out, err)
	}
}

func TestBusyboxRejectsDynamic(t *testing.T) {
	// The system's shell is usually a dynamic binary.
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	f, err := elf.Open(sh)
	if err != nil {
		t.Skipf("%s is not ELF: %v", sh, err)
	}
	dynamic := slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
	f.Close()
	if !dynamic || f.Machine != elf.EM_X86_64 {
		t.Skipf("%s is not a dynamic x86-64 binary", sh)
	}
	if _, err := busyboxEntries(context.Background(), sh); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("busyboxEntries(%s) = %v, want a dynamic-linking error", sh, err)
	}
}

// The agent for the wrapper-mode image is the linux/amd64 binary that
// images.json names; without one the error says what is missing.
func TestAgentBinary(t *testing.T) {
	dir := t.TempDir()
	if _, err := agentBinary(dir); err == nil || !strings.Contains(err.Error(), "make images") {
		t.Errorf("no images.json: got %v, want an error that says to run make images", err)
	}
	m := Manifest{Images: []Image{{Name: "jobset-inplace-agent", Platforms: []Platform{
		{OS: "linux", Architecture: "arm64", Binary: "bin/linux_arm64/jobset-inplace-agent"},
		{OS: "linux", Architecture: "amd64", Binary: "bin/linux_amd64/jobset-inplace-agent"},
	}}}}
	if err := m.write(dir); err != nil {
		t.Fatal(err)
	}
	got, err := agentBinary(dir)
	if want := filepath.Join(dir, "bin", "linux_amd64", "jobset-inplace-agent"); err != nil || got != want {
		t.Errorf("agentBinary = %q, %v; want %q", got, err, want)
	}
	m.Images[0].Name = "jobset-controller"
	if err := m.write(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := agentBinary(dir); err == nil {
		t.Error("a manifest without the agent gave no error")
	}
}
