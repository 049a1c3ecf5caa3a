package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nativejobset/jobset/pkg/version"
)

func TestVersionFlag(t *testing.T) {
	var out bytes.Buffer
	// --version returns before the kubeconfig is read.
	if err := run([]string{"--kubeconfig=/nonexistent", "--version"}, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), version.String("jobset-migrate")+"\n"; got != want {
		t.Fatalf("printed %q, want %q", got, want)
	}
}

// TestStampedBinary builds jobset-migrate as 'make build' does (same flags,
// so the build cache is shared) and runs its --version.
func TestStampedBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds jobset-migrate")
	}
	const pkg = "github.com/nativejobset/jobset/pkg/version"
	bin := filepath.Join(t.TempDir(), "jobset-migrate")
	build := exec.Command(goTool(), "build", "-trimpath", "-tags", "fieldsv1string",
		"-ldflags", "-X "+pkg+".version=v1.2.3-test -X "+pkg+".commit=cafe0123", "-o", bin, ".")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("jobset-migrate --version: %v", err)
	}
	want := "jobset-migrate v1.2.3-test (commit cafe0123, " + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	if got := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("printed %q, want %q", got, want)
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
