package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Every test shares one build of all four images for both platforms
// (TestReproducible makes a second one).
var testOptions = Options{
	Root:       "../../..",
	Version:    "v0.0.0-test.1",
	Commit:     "0123456789abcdef0123456789abcdef01234567",
	Created:    time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC),
	Repository: "example.test/nativejobset",
	Platforms:  []string{"linux/amd64", "linux/arm64"},
	Tags:       "fieldsv1string",
	// The toolchain running the tests, so that the binaries report its
	// version.
	Go: goTool(),
}

var (
	sharedOnce sync.Once
	sharedDir  string
	shared     *Manifest
	sharedErr  error
	tmpRoot    string
)

func TestMain(m *testing.M) {
	// RELEASE_TEST_PLATFORMS=linux/amd64 builds one platform only, for a
	// quick run on a cold build cache; TestContents then fails on purpose,
	// since a release has both.
	if p := os.Getenv("RELEASE_TEST_PLATFORMS"); p != "" {
		testOptions.Platforms = strings.Split(p, ",")
	}
	var err error
	if tmpRoot, err = os.MkdirTemp("", "image-test-"); err != nil {
		log.Fatal(err)
	}
	code := m.Run()
	os.RemoveAll(tmpRoot)
	os.Exit(code)
}

// built returns the shared build, building it on first use.
func built(t *testing.T) (string, *Manifest) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds four binaries for two platforms")
	}
	sharedOnce.Do(func() {
		o := testOptions
		o.Out = filepath.Join(tmpRoot, "a")
		sharedDir = o.Out
		start := time.Now()
		shared, sharedErr = Build(context.Background(), o)
		log.Printf("first build: %v", time.Since(start).Round(time.Second))
	})
	if sharedErr != nil {
		t.Fatalf("build: %v", sharedErr)
	}
	return sharedDir, shared
}

func TestReproducible(t *testing.T) {
	dirA, a := built(t)
	o := testOptions
	o.Out = t.TempDir()
	start := time.Now()
	b, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second build: %v", time.Since(start).Round(time.Second))
	if len(a.Images) != len(Names) || len(b.Images) != len(Names) {
		t.Fatalf("built %d and %d images, want %d each", len(a.Images), len(b.Images), len(Names))
	}
	for i := range a.Images {
		if a.Images[i].IndexDigest != b.Images[i].IndexDigest {
			t.Errorf("%s: index %s, then %s", a.Images[i].Name, a.Images[i].IndexDigest, b.Images[i].IndexDigest)
		}
	}
	// images.json holds only relative paths, so it is the same file.
	ja, err := os.ReadFile(filepath.Join(dirA, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	jb, err := os.ReadFile(filepath.Join(o.Out, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ja, jb) {
		t.Errorf("images.json differs:\n%s\n%s", ja, jb)
	}
	// So are the archives.
	for _, p := range a.Images[0].Platforms {
		xa, err := os.ReadFile(filepath.Join(dirA, p.Archive))
		if err != nil {
			t.Fatal(err)
		}
		xb, err := os.ReadFile(filepath.Join(o.Out, p.Archive))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(xa, xb) {
			t.Errorf("archive %s differs between the builds", p.Archive)
		}
	}
}

// layoutIndex reads the image index of img's OCI layout.
func layoutIndex(t *testing.T, dir string, img Image) v1.ImageIndex {
	t.Helper()
	top, err := layout.ImageIndexFromPath(filepath.Join(dir, img.Layout))
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("%s: layout has %d entries, want 1", img.Name, len(im.Manifests))
	}
	d := im.Manifests[0]
	if got := d.Annotations["org.opencontainers.image.ref.name"]; got != testOptions.Version {
		t.Errorf("%s: layout ref name %q, want %q", img.Name, got, testOptions.Version)
	}
	if d.Digest.String() != img.IndexDigest {
		t.Errorf("%s: layout holds %s, images.json says %s", img.Name, d.Digest, img.IndexDigest)
	}
	idx, err := top.ImageIndex(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// files reads the flattened filesystem of img: name to header and, for
// regular files under 1 MiB, content.
func files(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	headers, small := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		headers[h.Name] = h
		if h.Typeflag == tar.TypeReg && h.Size < 1<<20 {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			small[h.Name] = b
		}
	}
	return headers, small
}

func TestContents(t *testing.T) {
	dir, m := built(t)
	for _, img := range m.Images {
		idx := layoutIndex(t, dir, img)
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if got := im.Annotations["org.opencontainers.image.revision"]; got != testOptions.Commit {
			t.Errorf("%s: index revision annotation %q", img.Name, got)
		}
		var platforms []string
		for _, d := range im.Manifests {
			platforms = append(platforms, d.Platform.String())
			pimg, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			checkImage(t, img.Name, d.Platform, pimg)
		}
		if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
			t.Errorf("%s: platforms %v, want %v", img.Name, platforms, want)
		}
	}
}

func checkImage(t *testing.T, imageName string, p *v1.Platform, img v1.Image) {
	t.Helper()
	what := imageName + " " + p.String()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != p.OS || cfg.Architecture != p.Architecture {
		t.Errorf("%s: config platform %s/%s", what, cfg.OS, cfg.Architecture)
	}
	c := cfg.Config
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/" + imageName}) || c.WorkingDir != "/" {
		t.Errorf("%s: user %q entrypoint %q workdir %q", what, c.User, c.Entrypoint, c.WorkingDir)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  testOptions.Version,
		"org.opencontainers.image.revision": testOptions.Commit,
		"org.opencontainers.image.title":    imageName,
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.created":  "2026-03-04T05:06:07Z",
	} {
		if c.Labels[k] != want {
			t.Errorf("%s: label %s = %q, want %q", what, k, c.Labels[k], want)
		}
	}
	if !cfg.Created.Time.Equal(testOptions.Created) {
		t.Errorf("%s: created %v", what, cfg.Created)
	}

	headers, content := files(t, img)
	var names []string
	for n, h := range headers {
		names = append(names, n)
		if !h.ModTime.Equal(testOptions.Created) {
			t.Errorf("%s: %s has mtime %v", what, n, h.ModTime)
		}
		if h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: %s has owner names %q:%q", what, n, h.Uname, h.Gname)
		}
	}
	slices.Sort(names)
	// The complete filesystem: in particular no shell, nor anything else
	// one could run.
	// (mutate.Extract drops the directories' trailing slashes.)
	want := []string{"etc", "etc/group", "etc/passwd", "etc/ssl", "etc/ssl/certs", CABundlePath,
		"home", "home/nonroot", imageName, "root", "tmp"}
	if !slices.Equal(names, want) {
		t.Errorf("%s: files %q, want %q", what, names, want)
	}
	if h := headers[imageName]; h == nil || h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 {
		t.Errorf("%s: binary header %+v", what, h)
	}
	if h := headers["home/nonroot"]; h == nil || h.Uid != NonrootUID || h.Gid != NonrootUID {
		t.Errorf("%s: /home/nonroot header %+v", what, h)
	}
	if h := headers["tmp"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("%s: /tmp header %+v", what, h)
	}
	if !strings.Contains(string(content["etc/passwd"]), "\nnonroot:x:65532:65532:nonroot:/home/nonroot:") {
		t.Errorf("%s: /etc/passwd has no nonroot:\n%s", what, content["etc/passwd"])
	}
	if !strings.Contains(string(content["etc/group"]), "\nnonroot:x:65532:") {
		t.Errorf("%s: /etc/group has no nonroot:\n%s", what, content["etc/group"])
	}
	n, err := countCerts(content[CABundlePath])
	if err != nil || n < 100 {
		t.Errorf("%s: CA bundle: %d certificates, %v", what, n, err)
	}
}

func countCerts(data []byte) (int, error) {
	n := 0
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return n, err
		}
		n++
	}
	if len(bytes.TrimSpace(data)) > 0 {
		return n, fmt.Errorf("%d bytes after the last certificate", len(data))
	}
	return n, nil
}

// TestBinaryVersion runs each linux/amd64 binary as found in its image.
func TestBinaryVersion(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("runs linux/amd64 binaries")
	}
	dir, m := built(t)
	names := map[string]bool{}
	for _, img := range m.Images {
		names[img.Name] = true
		idx := layoutIndex(t, dir, img)
		pimg, err := idx.Image(mustHash(t, img.Platforms[0].ManifestDigest))
		if err != nil {
			t.Fatal(err)
		}
		if img.Platforms[0].String() != "linux/amd64" {
			t.Fatalf("%s: first platform %s", img.Name, img.Platforms[0])
		}
		bin := filepath.Join(t.TempDir(), img.Name)
		extract(t, pimg, img.Name, bin)
		out, err := exec.Command(bin, "--version").Output()
		if err != nil {
			t.Errorf("%s --version: %v", img.Name, err)
			continue
		}
		want := fmt.Sprintf("%s %s (commit %s, %s, linux/amd64)\n", img.Name, testOptions.Version, testOptions.Commit, runtime.Version())
		if string(out) != want {
			t.Errorf("%s --version printed %q, want %q", img.Name, out, want)
		}
	}
	for _, n := range Names {
		if !names[n] {
			t.Errorf("no image %s", n)
		}
	}
}

func mustHash(t *testing.T, s string) v1.Hash {
	t.Helper()
	h, err := v1.NewHash(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// extract copies the file name of img's last layer to path, executable.
func extract(t *testing.T, img v1.Image, fileName, path string) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[len(layers)-1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the last layer: %v", fileName, err)
		}
		if h.Name != fileName {
			continue
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return
	}
}

func TestPushAndArchives(t *testing.T) {
	dir, m := built(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	reg := strings.TrimPrefix(srv.URL, "http://") + "/nativejobset"

	if _, err := PushAll(context.Background(), dir, reg, "v9.9.9"); err == nil || !strings.Contains(err.Error(), "built for version") {
		t.Fatalf("push of another version: %v", err)
	}
	pushed, err := PushAll(context.Background(), dir, reg, testOptions.Version)
	if err != nil {
		t.Fatal(err)
	}
	if len(pushed) != len(m.Images) {
		t.Fatalf("pushed %d images, want %d", len(pushed), len(m.Images))
	}
	for i, img := range m.Images {
		if want := reg + "/" + img.Name + "@" + img.IndexDigest; pushed[i].String() != want {
			t.Errorf("pushed %s, want %s", pushed[i], want)
		}
		// Pulled by tag, the index and its manifests are the built ones.
		ref, err := name.NewTag(reg + "/" + img.Name + ":" + testOptions.Version)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(ref)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := idx.Digest(); err != nil || d.String() != img.IndexDigest {
			t.Errorf("%s: pulled index %v (%v), want %s", img.Name, d, err, img.IndexDigest)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(im.Manifests) != len(img.Platforms) {
			t.Fatalf("%s: pulled %d manifests", img.Name, len(im.Manifests))
		}
		for j, p := range img.Platforms {
			if got := im.Manifests[j].Digest.String(); got != p.ManifestDigest {
				t.Errorf("%s %s: pulled manifest %s, want %s", img.Name, p, got, p.ManifestDigest)
			}
			checkArchive(t, dir, img, p)
		}
	}
}

// checkArchive reads p's archive back as 'docker load' would: the same
// configuration (image ID) and layer blobs as the layout's image, tagged
// with the reference. (Its manifest digest differs: the archive format
// has no manifest, and readers synthesize a Docker one.)
func checkArchive(t *testing.T, dir string, img Image, p Platform) {
	t.Helper()
	path := filepath.Join(dir, p.Archive)
	tm, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		t.Fatal(err)
	}
	if len(tm) != 1 || !slices.Equal(tm[0].RepoTags, []string{img.Reference}) {
		t.Errorf("%s: archive manifest %+v, want one image tagged %s", p.Archive, tm, img.Reference)
	}
	fromArchive, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	fromLayout, err := layoutIndex(t, dir, img).Image(mustHash(t, p.ManifestDigest))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := fromArchive.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if ca.String() != p.ConfigDigest {
		t.Errorf("%s: image ID %s, want %s", p.Archive, ca, p.ConfigDigest)
	}
	if cl, err := fromLayout.ConfigName(); err != nil || cl != ca {
		t.Errorf("%s: layout config %s (%v), archive %s", p.Archive, cl, err, ca)
	}
	la, err := fromArchive.Layers()
	if err != nil {
		t.Fatal(err)
	}
	ll, err := fromLayout.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(la) != len(ll) {
		t.Fatalf("%s: %d layers, layout %d", p.Archive, len(la), len(ll))
	}
	for i := range la {
		da, err := la[i].Digest()
		if err != nil {
			t.Fatal(err)
		}
		dl, err := ll[i].Digest()
		if err != nil {
			t.Fatal(err)
		}
		if da != dl {
			t.Errorf("%s: layer %d is %s, layout %s", p.Archive, i, da, dl)
		}
	}
}

func TestOptionsErrors(t *testing.T) {
	o := Options{Root: ".", Out: t.TempDir(), Version: "not a tag!", Commit: "c", Created: time.Now(),
		Repository: "Bad Repo", Platforms: []string{"windows/amd64"}, Names: []string{"kubectl"}}
	_, err := Build(context.Background(), o)
	if err == nil {
		t.Fatal("bad options accepted")
	}
	for _, want := range []string{`version "not a tag!"`, `repository "Bad Repo"`, `platform "windows/amd64"`, `unknown image "kubectl"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// goTool is the go command of the toolchain running the test (GOROOT is
// empty in a test binary built with -trimpath: then the one on PATH).
func goTool() string {
	if r := runtime.GOROOT(); r != "" {
		return filepath.Join(r, "bin", "go")
	}
	return "go"
}
