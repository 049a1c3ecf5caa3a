//go:build tools

// This file pins the libraries the packages below use (and the vulnerability
// tooling run by 'make verify'), so that 'go mod tidy' keeps them while the
// packages are being written. govulncheck is a tool directive in go.mod.
package main

import (
	_ "github.com/CycloneDX/cyclonedx-go"
	_ "github.com/google/go-containerregistry/pkg/v1/mutate"
	_ "golang.org/x/crypto/x509roots/fallback/bundle"
	_ "helm.sh/helm/v4/pkg/action"
	_ "sigs.k8s.io/kustomize/api/krusty"
)
