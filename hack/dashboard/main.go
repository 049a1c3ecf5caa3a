// Command dashboard writes the Grafana dashboard for JobSet
// (artifacts/monitoring/dashboard.json) from the panels defined in
// panels.go. The JSON is generated, never edited by hand: change the Go
// code and run 'make dashboard' (or 'go run .' here).
//
//	go run . --out ../../artifacts/monitoring/dashboard.json
//	go run . --out -     # to stdout, as 'make verify-dashboard' does
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("out", "-", "file to write the dashboard JSON to; - for stdout")
	flag.Parse()
	data, err := render()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
	if *out == "-" {
		_, err = os.Stdout.Write(data)
	} else {
		err = os.WriteFile(*out, data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}

// render returns the dashboard as indented JSON with a final newline, the
// exact bytes of the committed file.
func render() ([]byte, error) {
	d, err := build()
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}
