// Command dashboard writes the Grafana dashboard for JobSet
// (artifacts/monitoring/dashboard.json) from the panels defined in
// panels.go, and the panel reference of docs/operations/dashboard.md. Both
// are generated, never edited by hand: change the Go code and run
// 'make dashboard'.
//
//	go run . --out ../../artifacts/monitoring/dashboard.json --docs ../../docs/operations/dashboard.md
//	go run . --check --out ... --docs ...   # fail if either file is stale ('make verify-dashboard')
//	go run . --out -                        # the JSON to stdout
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("out", "-", "file to write the dashboard JSON to; - for stdout")
	docs := flag.String("docs", "", "Markdown file whose panel reference section to rewrite (between its markers)")
	check := flag.Bool("check", false, "write nothing; exit 1 if --out or --docs differs from what would be written")
	flag.Parse()
	if err := run(*out, *docs, *check); err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}

func run(out, docs string, check bool) error {
	data, err := render()
	if err != nil {
		return err
	}
	if out == "-" {
		if _, err := os.Stdout.Write(data); err != nil {
			return err
		}
	} else if err := update(out, data, check); err != nil {
		return err
	}
	if docs == "" {
		return nil
	}
	page, err := os.ReadFile(docs)
	if err != nil {
		return err
	}
	section, err := panelReference(data)
	if err != nil {
		return err
	}
	newPage, err := replaceSection(page, section)
	if err != nil {
		return fmt.Errorf("%s: %w", docs, err)
	}
	return update(docs, newPage, check)
}

// update writes data to path, or with check only compares them.
func update(path string, data []byte, check bool) error {
	if !check {
		return os.WriteFile(path, data, 0o644)
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !bytes.Equal(old, data) {
		return fmt.Errorf("%s is not what hack/dashboard generates: run 'make dashboard'", path)
	}
	return nil
}
