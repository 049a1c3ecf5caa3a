package sbom

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// buildTiny builds a small program in a git checkout of its own, with one
// module replaced by another version and one by a local directory, and
// returns the binary and the commit it was built from. It uses only the
// module cache (GOPROXY=off).
func buildTiny(t *testing.T) (bin, commit string) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": `module example.com/tiny

go 1.22

require (
	example.com/local v1.0.0
	golang.org/x/mod v0.41.0
)

replace golang.org/x/mod => golang.org/x/mod v0.42.0

replace example.com/local => ./local
`,
		"main.go": `package main

import (
	"fmt"

	"example.com/local"
	"golang.org/x/mod/semver"
)

func main() { fmt.Println(local.Name, semver.IsValid("v1.0.0")) }
`,
		"local/go.mod":   "module example.com/local\n\ngo 1.22\n",
		"local/local.go": "package local\n\nconst Name = \"local\"\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	goEnv := []string{"GOPROXY=off", "GOSUMDB=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "CGO_ENABLED=0"}
	// go.sum first, so that the commit below is clean.
	run(goEnv, "go", "mod", "tidy")
	gitEnv := []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null"}
	run(gitEnv, "git", "init", "-q")
	run(gitEnv, "git", "add", ".")
	run(gitEnv, "git", "commit", "-qm", "tiny")
	commit = run(gitEnv, "git", "rev-parse", "HEAD")
	bin = filepath.Join(t.TempDir(), "tiny")
	run(goEnv, "go", "build", "-buildvcs=true", "-tags", "sbomtest", "-o", bin, ".")
	return bin, commit
}

func TestFromBinary(t *testing.T) {
	bin, commit := buildTiny(t)
	created := time.Date(2026, 11, 6, 12, 0, 0, 0, time.FixedZone("CET", 3600))

	out, err := FromBinary(bin, "tiny", "v1.2.3+build.4", created)
	if err != nil {
		t.Fatal(err)
	}
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(out), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	if bom.SpecVersion < cdx.SpecVersion1_5 {
		t.Errorf("spec version %v, want 1.5 or later", bom.SpecVersion)
	}
	if !strings.HasPrefix(bom.SerialNumber, "urn:uuid:") || len(bom.SerialNumber) != len("urn:uuid:")+36 {
		t.Errorf("serial number %q is not a urn:uuid", bom.SerialNumber)
	}
	if bom.Metadata == nil || bom.Metadata.Timestamp != "2026-11-06T11:00:00Z" {
		t.Fatalf("metadata %+v, want timestamp 2026-11-06T11:00:00Z", bom.Metadata)
	}

	main := bom.Metadata.Component
	if main == nil || main.Type != cdx.ComponentTypeApplication || main.Name != "tiny" || main.Version != "v1.2.3+build.4" ||
		main.PackageURL != "pkg:golang/example.com/tiny@v1.2.3%2Bbuild.4" {
		t.Fatalf("main component %+v", main)
	}
	props := map[string]string{}
	for _, p := range *main.Properties {
		props[p.Name] = p.Value
	}
	for k, want := range map[string]string{
		"go.version":            runtime.Version(),
		"go.build.GOOS":         runtime.GOOS,
		"go.build.GOARCH":       runtime.GOARCH,
		"go.build.tags":         "sbomtest",
		"go.build.vcs.revision": commit,
		"go.build.vcs.modified": "false",
		"go.build.CGO_ENABLED":  "0",
	} {
		if props[k] != want {
			t.Errorf("property %s = %q, want %q (have %v)", k, props[k], want, props)
		}
	}

	byPurl := map[string]cdx.Component{}
	for _, c := range *bom.Components {
		if c.Type != cdx.ComponentTypeLibrary {
			t.Errorf("component %s has type %s, want library", c.Name, c.Type)
		}
		byPurl[c.PackageURL] = c
	}
	goVer := strings.TrimPrefix(runtime.Version(), "go")
	for _, p := range []string{
		"pkg:golang/stdlib@" + goVer,
		// The replacement, not the version required.
		"pkg:golang/golang.org/x/mod@v0.42.0",
		// A directory replacement has no version.
		"pkg:golang/example.com/local",
	} {
		if _, ok := byPurl[p]; !ok {
			t.Errorf("no component %s; have %v", p, slices.Sorted(maps.Keys(byPurl)))
		}
	}
	if len(byPurl) != 3 {
		t.Errorf("%d components, want 3 (stdlib and two modules)", len(byPurl))
	}
	mod := byPurl["pkg:golang/golang.org/x/mod@v0.42.0"]
	if mod.Name != "golang.org/x/mod" || mod.Version != "v0.42.0" || !hasProp(mod, "go.module.replaces", "golang.org/x/mod@v0.41.0") || !hasProp(mod, "go.module.sum", "") {
		t.Errorf("replaced module component %+v", mod)
	}
	if local := byPurl["pkg:golang/example.com/local"]; !hasProp(local, "go.module.replaces", "example.com/local@v1.0.0") || !hasProp(local, "go.module.directory", "./local") || local.Name != "example.com/local" || local.Version != "" {
		t.Errorf("local module component %+v", local)
	}

	if bom.Dependencies == nil || len(*bom.Dependencies) != 1 {
		t.Fatalf("dependencies %+v, want one entry for the main component", bom.Dependencies)
	}
	dep := (*bom.Dependencies)[0]
	if dep.Ref != main.BOMRef || dep.Dependencies == nil || len(*dep.Dependencies) != 3 {
		t.Fatalf("main's dependencies %+v", dep)
	}
	for _, ref := range *dep.Dependencies {
		if _, ok := byPurl[ref]; !ok {
			t.Errorf("main depends on %s, which is not a component", ref)
		}
	}

	again, err := FromBinary(bin, "tiny", "v1.2.3+build.4", created)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, again) {
		t.Error("two SBOMs of one binary differ")
	}
	other, err := FromBinary(bin, "tiny", "v1.2.4", created)
	if err != nil {
		t.Fatal(err)
	}
	var otherBOM cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(other), cdx.BOMFileFormatJSON).Decode(&otherBOM); err != nil {
		t.Fatal(err)
	}
	if otherBOM.SerialNumber == bom.SerialNumber {
		t.Error("SBOMs of different versions share a serial number")
	}
}

func TestFromBinaryRejectsNonGoFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "script.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := FromBinary(p, "x", "v1", time.Unix(0, 0))
	if err == nil || !strings.Contains(err.Error(), "not a Go binary") || !strings.Contains(err.Error(), p) {
		t.Fatalf("err = %v, want one naming %s as not a Go binary", err, p)
	}
	if _, err := FromBinary(filepath.Join(t.TempDir(), "missing"), "x", "v1", time.Unix(0, 0)); err == nil {
		t.Fatal("a missing file gave no error")
	}
}

func TestPurl(t *testing.T) {
	for _, tc := range []struct{ path, version, want string }{
		{"github.com/Azure/go-ansiterm", "v0.0.0-20250102033503-faa5f7b0171c", "pkg:golang/github.com/Azure/go-ansiterm@v0.0.0-20250102033503-faa5f7b0171c"},
		{"github.com/peterbourgon/diskv", "v2.0.1+incompatible", "pkg:golang/github.com/peterbourgon/diskv@v2.0.1%2Bincompatible"},
		{"gopkg.in/inf.v0", "v0.9.1", "pkg:golang/gopkg.in/inf.v0@v0.9.1"},
		{"example.com/a b", "", "pkg:golang/example.com/a%20b"},
	} {
		if got := purl(tc.path, tc.version); got != tc.want {
			t.Errorf("purl(%q, %q) = %q, want %q", tc.path, tc.version, got, tc.want)
		}
	}
}

func hasProp(c cdx.Component, name, value string) bool {
	if c.Properties == nil {
		return false
	}
	for _, p := range *c.Properties {
		if p.Name == name && (value == "" || p.Value == value) {
			return true
		}
	}
	return false
}
