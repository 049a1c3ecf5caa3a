// Command vulndb runs the offline vulnerability check of 'make verify'.
//
//	vulndb build -version V -out DIR
//	    writes a Go vulnerability database for govulncheck from the OSV
//	    entries of golang.org/x/vulndb@V into DIR/V (kept when present) and
//	    prints that directory.
//	vulndb check -allowlist FILE [REPORT]
//	    reads govulncheck -format json output (REPORT, or standard input)
//	    and fails when a vulnerability is reachable and not allowlisted, or
//	    when an allowlist entry matches nothing.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/mod/module"

	"github.com/nativejobset/jobset/hack/release/vulndb"
)

const vulndbModule = "golang.org/x/vulndb"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(os.Args[2:])
	case "check":
		err = check(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulndb:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: vulndb build -version V -out DIR | vulndb check -allowlist FILE [REPORT]")
	os.Exit(2)
}

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	version := fs.String("version", "", "version of "+vulndbModule)
	out := fs.String("out", "", "directory holding one database per version")
	fs.Parse(args)
	if *version == "" || *out == "" || fs.NArg() != 0 {
		usage()
	}
	// The database's date is the commit time in the pseudo-version: the
	// OSV files in the repository carry no dates of their own.
	t, err := module.PseudoVersionTime(*version)
	if err != nil {
		return fmt.Errorf("%s: want a pseudo-version: %w", *version, err)
	}
	dst, err := filepath.Abs(filepath.Join(*out, *version))
	if err != nil {
		return err
	}
	if _, err := os.Stat(dst); err != nil {
		src, err := download(*version)
		if err != nil {
			return err
		}
		if _, err := vulndb.Write(filepath.Join(src, "data", "osv"), dst, t); err != nil {
			return err
		}
	}
	fmt.Println(dst)
	return nil
}

// download fetches the vulndb module through the module proxy (or finds it
// in the module cache) and returns its directory.
func download(version string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", vulndbModule+"@"+version)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	err := cmd.Run()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(stdout.Bytes(), &info); jerr == nil && info.Error != "" {
		return "", fmt.Errorf("go mod download: %s", info.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", vulndbModule, version, err)
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: no directory in its output", vulndbModule, version)
	}
	return info.Dir, nil
}

func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	allowPath := fs.String("allowlist", "", "allowlist file")
	fs.Parse(args)
	if *allowPath == "" || fs.NArg() > 1 {
		usage()
	}
	af, err := os.Open(*allowPath)
	if err != nil {
		return err
	}
	defer af.Close()
	al, err := vulndb.ParseAllowlist(af)
	if err != nil {
		return fmt.Errorf("%s: %w", *allowPath, err)
	}
	var in io.Reader = os.Stdin
	if fs.NArg() == 1 {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	rep, err := vulndb.ParseReport(in)
	if err != nil {
		return err
	}
	res := vulndb.Check(rep, al)
	vulndb.Describe(os.Stdout, rep, al, res)
	if !res.OK() {
		return fmt.Errorf("vulnerability check failed")
	}
	return nil
}
