package main

import (
	"strings"
	"testing"
)

func TestParseOptions(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "ns")
	t.Setenv("POD_NAME", "p")
	t.Setenv("JOBSET_NAME", "js")
	t.Setenv("IN_PLACE_RESTART_EXIT_CODE", "5")

	o, err := parseOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.namespace != "ns" || o.pod != "p" || o.jobSet != "js" || o.restartExitCode != 5 {
		t.Errorf("from the environment: %+v", o)
	}
	if o.probePath != "/barrier-is-down" || o.probePort != "8081" {
		t.Errorf("sidecar defaults: path %q port %q", o.probePath, o.probePort)
	}

	o, err = parseOptions([]string{"--worker-command=true", "--pod=q", "--restart-exit-code=7"})
	if err != nil {
		t.Fatal(err)
	}
	if o.pod != "q" || o.restartExitCode != 7 || o.probePath != "" || o.probePort != "" {
		t.Errorf("flags override, wrapper mode has no probe: %+v", o)
	}

	if _, err := parseOptions([]string{"--worker-command=true", "--probe-port=9000"}); err == nil {
		t.Error("wrapper mode with a probe port accepted")
	}

	t.Setenv("JOBSET_NAME", "")
	if _, err := parseOptions(nil); err == nil || !strings.Contains(err.Error(), "jobset (JOBSET_NAME)") {
		t.Errorf("missing JobSet: %v", err)
	}

	t.Setenv("IN_PLACE_RESTART_EXIT_CODE", "x")
	if _, err := parseOptions(nil); err == nil || !strings.Contains(err.Error(), "IN_PLACE_RESTART_EXIT_CODE") {
		t.Errorf("bad exit code: %v", err)
	}
}

func TestVersionFlag(t *testing.T) {
	// No pod environment: --version must not need one.
	for _, name := range []string{"POD_NAMESPACE", "NAMESPACE", "POD_NAME", "JOBSET_NAME"} {
		t.Setenv(name, "")
	}
	o, err := parseOptions([]string{"--version"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.version {
		t.Fatal("--version not recorded")
	}
	if o, err := parseOptions(nil); err == nil {
		t.Fatalf("without --version the missing environment was accepted: %+v", o)
	}
}
