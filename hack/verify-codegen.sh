#!/usr/bin/env bash
# Fails when the committed generated code differs from a fresh generation.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"
"${ROOT}/hack/update-codegen.sh" >/dev/null
if ! git diff --exit-code --stat -- pkg hack/api-rules; then
    echo "Generated code is out of date: run hack/update-codegen.sh and commit the result." >&2
    git diff -- pkg hack/api-rules | head -100 >&2
    exit 1
fi
untracked="$(git ls-files --others --exclude-standard -- pkg hack/api-rules)"
if [[ -n "${untracked}" ]]; then
    echo "Generated files are not committed:" >&2
    echo "${untracked}" >&2
    exit 1
fi
echo "Generated code is up to date."
