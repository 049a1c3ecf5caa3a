package bundle

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nativejobset/jobset/hack/release/image"
)

const (
	testVersion = "v1.2.3"
	apiDigest   = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	ctrlDigest  = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	agentDigest = "sha256:3333333333333333333333333333333333333333333333333333333333333333"
)

// fakeImages writes an images.json like 'make images' does, for three images
// and one platform, whose binaries are copies of this test binary (a Go binary with
// build information) and whose archives are small files.
func fakeImages(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m := image.Manifest{Version: testVersion, Commit: strings.Repeat("a", 40), Created: time.Unix(1700000000, 0).UTC(), Repository: "registry.test/js"}
	images := map[string]string{"jobset-apiserver": apiDigest, "jobset-controller": ctrlDigest, "jobset-inplace-agent": agentDigest}
	for name, digest := range images {
		archive := name + "_linux_amd64.tar"
		binary := "bin/linux_amd64/" + name
		if err := os.MkdirAll(filepath.Join(dir, "bin/linux_amd64"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := copyFile(self, filepath.Join(dir, binary)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, archive), []byte("archive of "+name), 0o644); err != nil {
			t.Fatal(err)
		}
		m.Images = append(m.Images, image.Image{
			Name: name, Reference: "registry.test/js/" + name + ":" + testVersion, IndexDigest: digest,
			Platforms: []image.Platform{{OS: "linux", Architecture: "amd64", Archive: archive, Binary: binary}},
		})
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, image.ManifestFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestWrite(t *testing.T) {
	out := filepath.Join(t.TempDir(), "release")
	files, err := Write(Options{Root: "../../..", Images: fakeImages(t), Out: out, Version: testVersion})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"jobset.yaml", "jobset-external-etcd.yaml", "jobset-1.2.3.tgz",
		"images/jobset-apiserver_linux_amd64.tar", "images/jobset-controller_linux_amd64.tar", "images/jobset-inplace-agent_linux_amd64.tar",
		"sbom/jobset-apiserver_linux_amd64.cdx.json", "sbom/jobset-controller_linux_amd64.cdx.json", "sbom/jobset-inplace-agent_linux_amd64.cdx.json",
		SumsFile,
	} {
		if _, err := os.Stat(filepath.Join(out, want)); err != nil {
			t.Errorf("the bundle lacks %s: %v", want, err)
		}
	}

	// Both install manifests run exactly the built images, by digest.
	for _, f := range []string{"jobset.yaml", "jobset-external-etcd.yaml"} {
		data, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		var images []string
		for _, line := range strings.Split(string(data), "\n") {
			if s := strings.TrimSpace(line); strings.HasPrefix(s, "image: ") {
				images = append(images, strings.TrimPrefix(s, "image: "))
			}
		}
		if len(images) == 0 {
			t.Errorf("%s names no image", f)
		}
		for _, img := range images {
			if img != "registry.test/js/jobset-apiserver:"+testVersion+"@"+apiDigest && img != "registry.test/js/jobset-controller:"+testVersion+"@"+ctrlDigest {
				t.Errorf("%s runs %q, not a built image pinned by digest", f, img)
			}
		}
	}

	// SHA256SUMS lists every other file once, with its current sum.
	sums := readSums(t, filepath.Join(out, SumsFile))
	if len(sums) != len(files)-1 {
		t.Errorf("%s lists %d files, the bundle has %d besides it", SumsFile, len(sums), len(files)-1)
	}
	for path, sum := range sums {
		got, err := fileSHA256(filepath.Join(out, path))
		if err != nil || got != sum {
			t.Errorf("%s: sum %s in %s, file has %s (%v)", path, sum, SumsFile, got, err)
		}
	}
}

func TestWriteRefusesImagesOfAnotherVersion(t *testing.T) {
	out := filepath.Join(t.TempDir(), "release")
	_, err := Write(Options{Root: "../../..", Images: fakeImages(t), Out: out, Version: "v9.9.9"})
	if err == nil || !strings.Contains(err.Error(), "make images VERSION=v9.9.9") {
		t.Fatalf("want an error that says to build the images for v9.9.9, got %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused bundle still wrote %s", out)
	}
}

func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("%s: malformed line %q", path, sc.Text())
		}
		sums[file] = sum
	}
	return sums
}
