#!/usr/bin/env bash
# Fails when the committed generated code differs from a fresh generation.
#
# The generators delete and rewrite whole packages (the clientset, the
# listers, ...), so they run on a scratch copy of the checkout, never on the
# checkout itself: a build running beside this check (make test builds the
# binaries and images meanwhile) must never see a package half written.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"
SCRATCH="${ROOT}/_output/verify-codegen"
rm -rf "${SCRATCH}"
mkdir -p "${SCRATCH}"
# The checkout as it is now: tracked files (less those deleted) and new ones
# that are not ignored.
git ls-files -z --cached --others --exclude-standard --deduplicate \
    | while IFS= read -r -d '' f; do [[ -e "${f}" ]] && printf '%s\0' "${f}"; done \
    | tar -C "${ROOT}" --null -T - -cf - | tar -C "${SCRATCH}" -xf -

# A repository of the copy's own, so that what the generators change shows
# as a diff against it.
git -C "${SCRATCH}" init -q
git -C "${SCRATCH}" add -A
git -C "${SCRATCH}" -c user.name=verify-codegen -c user.email=verify-codegen@localhost commit -q -m checkout

CODEGEN_BIN="${ROOT}/_output/codegen-bin" "${SCRATCH}/hack/update-codegen.sh" >/dev/null

status=0
if ! git -C "${SCRATCH}" diff --exit-code --stat -- pkg hack/api-rules; then
    echo "Generated code is out of date: run hack/update-codegen.sh and commit the result." >&2
    git -C "${SCRATCH}" diff -- pkg hack/api-rules | head -100 >&2
    status=1
fi
new="$(git -C "${SCRATCH}" ls-files --others --exclude-standard -- pkg hack/api-rules)"
if [[ -n "${new}" ]]; then
    echo "The generators write files that the checkout lacks: run hack/update-codegen.sh and commit the result." >&2
    echo "${new}" >&2
    status=1
fi
untracked="$(git ls-files --others --exclude-standard -- pkg hack/api-rules)"
if [[ -n "${untracked}" ]]; then
    echo "Generated files are not committed:" >&2
    echo "${untracked}" >&2
    status=1
fi
rm -rf "${SCRATCH}"
[[ ${status} == 0 ]] || exit 1
echo "Generated code is up to date."
