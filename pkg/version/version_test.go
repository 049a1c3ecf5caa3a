package version

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	withVCS := &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Path: "github.com/nativejobset/jobset", Version: "v0.3.0"},
		Settings:  []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "feedface"}},
	}
	devel := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
	for _, tc := range []struct {
		name              string
		version, commit   string
		bi                *debug.BuildInfo
		wantV, wantC, goV string
	}{
		{"stamped wins", "v1.2.3", "abc", withVCS, "v1.2.3", "abc", "go1.99.1"},
		{"build info", "", "", withVCS, "v0.3.0", "feedface", "go1.99.1"},
		{"devel checkout", "", "", devel, DevVersion, UnknownCommit, runtime.Version()},
		{"no build info", "", "", nil, DevVersion, UnknownCommit, runtime.Version()},
		{"only version stamped", "v2.0.0", "", devel, "v2.0.0", UnknownCommit, runtime.Version()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolve(tc.version, tc.commit, tc.bi)
			want := Info{Version: tc.wantV, Commit: tc.wantC, GoVersion: tc.goV, Platform: runtime.GOOS + "/" + runtime.GOARCH}
			if got != want {
				t.Fatalf("resolve = %+v, want %+v", got, want)
			}
		})
	}
}

func TestString(t *testing.T) {
	i := Info{Version: "v0.1.0", Commit: "abc123", GoVersion: "go1.26.8", Platform: "linux/amd64"}
	if got, want := i.String("jobset-controller"), "jobset-controller v0.1.0 (commit abc123, go1.26.8, linux/amd64)"; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
}

// TestLinkerStamp builds a small program with and without -X, as
// 'make build' does, and checks what it prints.
func TestLinkerStamp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	build := func(ldflags string) string {
		t.Helper()
		bin := filepath.Join(t.TempDir(), "printversion")
		args := []string{"build", "-buildvcs=false", "-o", bin}
		if ldflags != "" {
			args = append(args, "-ldflags", ldflags)
		}
		cmd := exec.Command(goTool(), append(args, "./testdata/printversion")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		out, err := exec.Command(bin).Output()
		if err != nil {
			t.Fatalf("%s: %v", bin, err)
		}
		return strings.TrimSpace(string(out))
	}
	const pkg = "github.com/nativejobset/jobset/pkg/version"
	platform := runtime.GOOS + "/" + runtime.GOARCH
	got := build("-X " + pkg + ".version=v9.8.7 -X " + pkg + ".commit=0123456789abcdef")
	if want := "printversion v9.8.7 (commit 0123456789abcdef, " + runtime.Version() + ", " + platform + ")"; got != want {
		t.Errorf("stamped: %q, want %q", got, want)
	}
	got = build("")
	if want := "printversion " + DevVersion + " (commit " + UnknownCommit + ", " + runtime.Version() + ", " + platform + ")"; got != want {
		t.Errorf("unstamped: %q, want %q", got, want)
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
