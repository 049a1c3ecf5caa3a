//go:build tools

// Package hack pins the code generators' module, so that
// hack/update-codegen.sh always runs the versions in go.mod.
package hack

import (
	_ "k8s.io/code-generator"
	_ "k8s.io/kube-openapi/cmd/openapi-gen"
)
