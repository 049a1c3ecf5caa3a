package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRestConfigPrefersProtobuf: every client the controller builds from
// its configuration sends protobuf and accepts protobuf, then JSON.
func TestRestConfigPrefersProtobuf(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	o := defaultOptions()
	o.kubeconfig = kubeconfig
	cfg, err := restConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ContentType != "application/vnd.kubernetes.protobuf" {
		t.Errorf("ContentType = %q, want protobuf", cfg.ContentType)
	}
	if cfg.AcceptContentTypes != "application/vnd.kubernetes.protobuf,application/json" {
		t.Errorf("AcceptContentTypes = %q, want protobuf then JSON", cfg.AcceptContentTypes)
	}
}
