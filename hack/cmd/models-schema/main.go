// Command models-schema prints the OpenAPI v2 definitions of every type the
// server knows. applyconfiguration-gen reads it to learn the list and map
// semantics of each field.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/nativejobset/jobset/pkg/generated/openapi"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "models-schema: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	ref := func(name string) spec.Ref { return spec.MustCreateRef("#/definitions/" + name) }
	defs := openapi.GetOpenAPIDefinitions(ref)
	schemas := make(map[string]spec.Schema, len(defs))
	for name, def := range defs {
		schemas[name] = def.Schema
		// Prefer an embedded v2 form where the generator provides one.
		if v2, ok := def.Schema.Extensions[common.ExtensionV2Schema].(spec.Schema); ok {
			schemas[name] = v2
		}
	}
	swagger := spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: "JobSet", Version: "unversioned"}},
		Definitions: schemas,
	}}
	return json.NewEncoder(os.Stdout).Encode(&swagger)
}
