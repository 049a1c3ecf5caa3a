package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--extra-child-resources=workloads"}, "is not <resource>.<version>.<group>"},
		{[]string{"--backup-dir=x", "stray"}, "unexpected arguments"},
		{[]string{"--ca-bundle-file=/nonexistent/ca.crt"}, "no such file"},
		{[]string{"--no-such-flag"}, "unknown flag"},
		{[]string{"--qps=0"}, "--qps must be above 0"},
		{[]string{"--burst=0"}, "--burst at least 1"},
	} {
		err := run(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
}

// The client's rate limits default far above client-go's 5 requests per
// second, and the flags set them.
func TestRateLimits(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		qps   float32
		burst int
	}{
		{nil, 50, 100},
		{[]string{"--qps=200", "--burst=400"}, 200, 400},
	} {
		s, err := parse(append([]string{"--kubeconfig=" + kubeconfig, "--backup-dir=b"}, tc.args...))
		if err != nil {
			t.Fatal(err)
		}
		rc, err := s.restConfig()
		if err != nil {
			t.Fatal(err)
		}
		if rc.QPS != tc.qps || rc.Burst != tc.burst {
			t.Errorf("%v: QPS %v, burst %d; want %v, %d", tc.args, rc.QPS, rc.Burst, tc.qps, tc.burst)
		}
	}
}

func TestUpstreamFlags(t *testing.T) {
	s, err := parse([]string{"--backup-dir=b"})
	if err != nil {
		t.Fatal(err)
	}
	if o := s.o; o.NoUpstreamController || o.UpstreamController != "jobset-system/jobset-controller-manager" || o.UpstreamLease != "jobset-system/6d4f6a47.x-k8s.io" {
		t.Fatalf("defaults: %+v", o)
	}
	s, err = parse([]string{"--backup-dir=b", "--no-upstream-controller", "--upstream-controller=", "--upstream-lease=jobs/lock"})
	if err != nil {
		t.Fatal(err)
	}
	if o := s.o; !o.NoUpstreamController || o.UpstreamController != "" || o.UpstreamLease != "jobs/lock" {
		t.Fatalf("set: %+v", o)
	}
}
