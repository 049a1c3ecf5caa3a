// Package reporoot finds the checkout's root for tests and tools that read
// its files. Tests run in their package's directory, and 'make test' builds
// them with -trimpath (to share compiled packages with 'make build'), so
// source file paths from runtime.Caller are not absolute: the root is found
// by walking up from the working directory to the go.mod of the module
// github.com/nativejobset/jobset.
package reporoot

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

const module = "github.com/nativejobset/jobset"

// Dir is the root of the checkout that holds the working directory.
func Dir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isRoot(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("the working directory is not inside the checkout of " + module)
		}
		dir = parent
	}
}

// MustDir is Dir for test helpers that cannot return an error; outside the
// checkout it returns the working directory, so that the files read from it
// are reported missing by name.
func MustDir() string {
	if d, err := Dir(); err == nil {
		return d
	}
	wd, _ := os.Getwd()
	return wd
}

// isRoot reports whether the go.mod at path declares the project's module
// (test/migration and the tool modules have go.mod files of their own).
func isRoot(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`) == module
		}
	}
	return false
}

// GoCommand is the go command of the toolchain that built the running test.
// A test binary built with -trimpath has no GOROOT, so then it is the go
// command on PATH ('make test' runs with the same toolchain on PATH).
func GoCommand() string {
	if r := runtime.GOROOT(); r != "" {
		return filepath.Join(r, "bin", "go")
	}
	return "go"
}
