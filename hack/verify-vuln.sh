#!/usr/bin/env bash
# Fails when the product (./cmd/...) can call a symbol with a known
# vulnerability that hack/vuln-allowlist.txt does not accept, or when an
# allowlist entry no longer matches anything.
#
# Offline: govulncheck reads a database built from the Go module
# golang.org/x/vulndb@VULNDB_VERSION (hack/versions.env), fetched like any
# module, so it sees the vulnerabilities published up to that version only.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
# shellcheck source=hack/versions.env
source "${ROOT}/hack/versions.env"
GO="${GO:-go}"
# Scan with the tags of the product build: they select the files compiled.
GO_BUILD_TAGS="${GO_BUILD_TAGS:-fieldsv1string}"
OUT="${ROOT}/_output/vulndb"

cd "${ROOT}/hack/release"
db="$("${GO}" run ./cmd/vulndb build -version "${VULNDB_VERSION}" -out "${OUT}")"
report="${OUT}/govulncheck.json"
# -format json exits 0 whatever it finds; the verdict is vulndb check's.
"${GO}" tool govulncheck -C "${ROOT}" -tags "${GO_BUILD_TAGS}" -db "file://${db}" -format json ./cmd/... >"${report}"
"${GO}" run ./cmd/vulndb check -allowlist "${ROOT}/hack/vuln-allowlist.txt" "${report}"
