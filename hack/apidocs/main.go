// Command apidocs writes the API reference (docs/reference/api.md) from the
// Go types of pkg/apis/jobset/v1alpha2: one section per type, with a table
// of its fields (JSON name, type, required or optional, default, comment)
// or of its values. It reads the types' source with go/parser and go/doc,
// and the served kinds from the package's scheme registration.
//
//	go run ./hack/apidocs -out docs/reference/api.md     # write
//	go run ./hack/apidocs -check docs/reference/api.md   # fail if stale
//
// Run it from the repository root; 'make api-docs' and 'make
// verify-api-docs' do.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

const (
	typesDir        = "pkg/apis/jobset/v1alpha2"
	typesImportPath = "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

func main() {
	out := flag.String("out", "", "write the reference to this file")
	check := flag.String("check", "", "compare this file with the reference and fail if it differs")
	flag.Parse()
	if (*out == "") == (*check == "") {
		fmt.Fprintln(os.Stderr, "apidocs: give exactly one of -out and -check")
		os.Exit(2)
	}
	got, err := generate(typesDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apidocs:", err)
		os.Exit(1)
	}
	if *out != "" {
		if err := os.WriteFile(*out, got, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "apidocs:", err)
			os.Exit(1)
		}
		return
	}
	have, err := os.ReadFile(*check)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apidocs:", err)
		os.Exit(1)
	}
	if !bytes.Equal(have, got) {
		fmt.Fprintf(os.Stderr, "%s is out of date with %s: run 'make api-docs' and commit the result.\n", *check, typesDir)
		os.Exit(1)
	}
	fmt.Printf("%s is up to date.\n", *check)
}

// generate renders the reference of the types in dir (the v1alpha2 package).
func generate(dir string) ([]byte, error) {
	p, err := load(dir, typesImportPath, v1alpha2.SchemeGroupVersion, v1alpha2.AddToScheme)
	if err != nil {
		return nil, err
	}
	return p.render(), nil
}
