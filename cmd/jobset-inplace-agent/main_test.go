package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/nativejobset/jobset/pkg/httpserver"
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

// The startup probe server answers its path only, with every limit of
// httpserver: headers above 16 KiB are refused.
func TestProbeServer(t *testing.T) {
	srv := probeServer("/barrier-is-down")
	if srv.ReadHeaderTimeout != httpserver.ReadHeaderTimeout || srv.ReadTimeout != httpserver.ReadTimeout ||
		srv.WriteTimeout != httpserver.WriteTimeout || srv.IdleTimeout != httpserver.IdleTimeout || srv.MaxHeaderBytes != httpserver.MaxHeaderBytes {
		t.Errorf("limits: read header %v, read %v, write %v, idle %v, max header bytes %d",
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	httpserver.Serve(ctx, "probe", srv, ln)
	base := "http://" + ln.Addr().String()
	for _, tc := range []struct {
		path    string
		padding int
		want    int
	}{
		{"/barrier-is-down", 0, http.StatusOK},
		{"/other", 0, http.StatusNotFound},
		{"/barrier-is-down", 2 * httpserver.MaxHeaderBytes, http.StatusRequestHeaderFieldsTooLarge},
	} {
		req, err := http.NewRequest(http.MethodGet, base+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.padding > 0 {
			req.Header.Set("X-Padding", strings.Repeat("p", tc.padding))
		}
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s with %d bytes of padding: %d, want %d", tc.path, tc.padding, resp.StatusCode, tc.want)
		}
	}
}
