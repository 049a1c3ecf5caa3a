package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRestConfigPrefersProtobuf: every client the controller builds from
// its configuration sends protobuf and accepts protobuf, then JSON.
func TestRestConfigPrefersProtobuf(t *testing.T) {
	o := defaultOptions()
	o.kubeconfig = writeKubeconfig(t)
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

// TestRestConfigJSON: --kube-api-content-type=application/json makes every
// client send and accept JSON only; any other type is refused.
func TestRestConfigJSON(t *testing.T) {
	o := defaultOptions()
	o.kubeconfig = writeKubeconfig(t)
	o.contentType = "application/json"
	if err := o.validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	cfg, err := restConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ContentType != "application/json" || cfg.AcceptContentTypes != "application/json" {
		t.Errorf("ContentType %q, AcceptContentTypes %q; want JSON only", cfg.ContentType, cfg.AcceptContentTypes)
	}
	o.contentType = "application/yaml"
	if err := o.validate(); err == nil {
		t.Error("validate accepted --kube-api-content-type=application/yaml")
	}
}

// writeKubeconfig writes a kubeconfig naming a loopback server that is
// never dialled: restConfig only reads it.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
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
	return kubeconfig
}
