package reporoot

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDirFindsTheProjectModule(t *testing.T) {
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "hack", "versions.env")); err != nil {
		t.Errorf("%s is not the checkout's root: %v", dir, err)
	}
	// A module of its own below the root is skipped.
	nested := filepath.Join(t.TempDir(), "x")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nested, "go.mod"), []byte("module github.com/nativejobset/jobset/test/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if isRoot(filepath.Join(nested, "go.mod")) {
		t.Error("another module's go.mod counts as the root")
	}
	if !isRoot(filepath.Join(dir, "go.mod")) {
		t.Error("the project's go.mod does not count as the root")
	}
}
