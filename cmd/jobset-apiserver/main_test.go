package main

import (
	"bytes"
	"testing"

	"github.com/nativejobset/jobset/pkg/version"
)

// TestVersionFlag also checks that --version does not clash with a flag of
// k8s.io/apiserver's options (pflag panics on a redefinition).
func TestVersionFlag(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"--version"}, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), version.String("jobset-apiserver")+"\n"; got != want {
		t.Fatalf("printed %q, want %q", got, want)
	}
}
