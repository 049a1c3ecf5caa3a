#!/usr/bin/env bash
# Regenerates everything under pkg/generated and the zz_generated files of
# pkg/apis. Generators are built into _output/codegen-bin; inputs from the
# Go module cache are passed as read-only so nothing is written there.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"
MODULE="github.com/nativejobset/jobset"
BOILERPLATE="${ROOT}/hack/boilerplate.go.txt"
REPORT="${ROOT}/hack/api-rules/violation_exceptions.list"

# `go list -m` prints an empty Dir until the module is in the module cache,
# so fetch it first: on a fresh machine the cache starts empty.
CODEGEN_PKG="$(go mod download -json k8s.io/code-generator | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [[ -z "${CODEGEN_PKG}" || ! -f "${CODEGEN_PKG}/kube_codegen.sh" ]]; then
    echo "cannot find k8s.io/code-generator in the module cache (go mod download failed?)" >&2
    exit 1
fi
# CODEGEN_BIN: where the generators are installed (hack/verify-codegen.sh
# shares the checkout's while it generates into a scratch copy).
export GOBIN="${CODEGEN_BIN:-${ROOT}/_output/codegen-bin}"
mkdir -p "${GOBIN}"

# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

# Types of k8s.io/api that our API embeds live in the read-only module cache.
KUBE_CODEGEN_READONLY_PKGS+=(
    k8s.io/api/core/v1
    k8s.io/api/batch/v1
    k8s.io/api/autoscaling/v1
    k8s.io/api/scheduling/v1alpha3
)

kube::codegen::gen_helpers \
    --boilerplate "${BOILERPLATE}" \
    "${ROOT}/pkg/apis"

report_args=(--report-filename "${REPORT}")
if [[ "${UPDATE_API_KNOWN_VIOLATIONS:-}" == "true" ]]; then
    report_args+=(--update-report)
fi

kube::codegen::gen_openapi \
    --output-dir "${ROOT}/pkg/generated/openapi" \
    --output-pkg "${MODULE}/pkg/generated/openapi" \
    --output-model-name-file "zz_generated.model_name.go" \
    --extra-pkgs k8s.io/api/core/v1 \
    --extra-pkgs k8s.io/api/batch/v1 \
    --extra-pkgs k8s.io/api/autoscaling/v1 \
    --extra-pkgs k8s.io/api/scheduling/v1alpha3 \
    --extra-pkgs k8s.io/apimachinery/pkg/util/intstr \
    "${report_args[@]}" \
    --boilerplate "${BOILERPLATE}" \
    "${ROOT}/pkg/apis"

# --prefers-protobuf: the typed clients send and accept protobuf (with JSON
# accepted too) unless their rest.Config names a content type, as
# client-go's own clientset does for the built-in types.
kube::codegen::gen_client \
    --with-watch \
    --prefers-protobuf \
    --with-applyconfig \
    --applyconfig-openapi-schema <(go run ./hack/cmd/models-schema) \
    --output-dir "${ROOT}/pkg/generated" \
    --output-pkg "${MODULE}/pkg/generated" \
    --boilerplate "${BOILERPLATE}" \
    "${ROOT}/pkg/apis"

# Protobuf marshalling of the served types (generated.proto, generated.pb.go).
# go-to-protobuf expects a GOPATH-like tree holding every package whose
# .proto it imports; a tree of symlinks under _output stands in for one.
# protoc comes from Debian's protobuf-compiler package.
if ! command -v protoc >/dev/null; then
    if command -v apt-get >/dev/null && [[ "$(id -u)" == 0 ]]; then
        echo "Installing protoc (protobuf-compiler)..." >&2
        apt-get update -qq && apt-get install -y -qq protobuf-compiler >/dev/null
    else
        echo "protoc is missing: install protobuf-compiler (apt-get install protobuf-compiler)." >&2
        exit 1
    fi
fi
go install \
    k8s.io/code-generator/cmd/go-to-protobuf \
    k8s.io/code-generator/cmd/go-to-protobuf/protoc-gen-gogo \
    golang.org/x/tools/cmd/goimports
PROTO_SRC="${ROOT}/_output/protobuf-src"
rm -rf "${PROTO_SRC}"
for m in k8s.io/api k8s.io/apimachinery github.com/gogo/protobuf; do
    mkdir -p "$(dirname "${PROTO_SRC}/${m}")"
    ln -s "$(go list -m -f '{{.Dir}}' "${m}")" "${PROTO_SRC}/${m}"
done
mkdir -p "$(dirname "${PROTO_SRC}/${MODULE}")"
ln -s "${ROOT}" "${PROTO_SRC}/${MODULE}"
# A leading '-' marks packages whose .proto is only read, never written.
PATH="${GOBIN}:${PATH}" go-to-protobuf \
    --go-header-file "${BOILERPLATE}" \
    --output-dir "${PROTO_SRC}" \
    --proto-import "$(dirname "$(dirname "$(command -v protoc)")")/include" \
    --apimachinery-packages=-k8s.io/apimachinery/pkg/util/intstr,-k8s.io/apimachinery/pkg/api/resource,-k8s.io/apimachinery/pkg/runtime/schema,-k8s.io/apimachinery/pkg/runtime,-k8s.io/apimachinery/pkg/apis/meta/v1 \
    --packages=-k8s.io/api/core/v1,-k8s.io/api/batch/v1,"${MODULE}/pkg/apis/jobset/v1alpha2"
rm -rf "${PROTO_SRC}"
