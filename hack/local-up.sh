#!/usr/bin/env bash
# Starts the local development cluster: real control-plane processes on
# 127.0.0.1 with kwok's fake nodes, jobset-apiserver and jobset-controller,
# and on request Kubeflow Trainer (WITH_TRAINER=1), KEDA (WITH_KEDA=1) and a
# real node (REAL_NODE=1, as root).
#
# This script builds what the cluster needs (unless SKIP_BUILD=1) and then
# runs "localtool up" (hack/tools/localtool/cluster), which starts every
# process and says how to reach the cluster. "hack/local-up.sh --help" lists
# its settings (environment variables) and ports.
#
# Usage: hack/local-up.sh [--detach] [--demo] [--help]
#   --detach   return once everything is ready (also DETACH=1); default: stay in
#              the foreground and stop everything on Ctrl-C
#   --demo     apply artifacts/examples/simple.yaml and wait for it (also DEMO=1)
# Stop it with hack/local-down.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="${BIN_DIR:-${ROOT}/_output/bin}"
export LOCAL_ROOT="${ROOT}" BIN_DIR

log() { echo "$(date +%H:%M:%S) $*"; }
die() {
  echo "error: $*" >&2
  exit 1
}
on() { [[ "${1:-0}" =~ ^(1|true|yes)$ ]]; }

help=0
for a in "$@"; do [[ "${a}" == --help || "${a}" == -h ]] && help=1; done

if [[ ${help} == 0 && "${SKIP_BUILD:-0}" != 1 ]]; then
  "${ROOT}/hack/build-tools.sh"
  if on "${WITH_TRAINER:-0}"; then
    "${ROOT}/hack/build-tools.sh" trainer-controller-manager
  fi
  if on "${WITH_KEDA:-0}"; then
    "${ROOT}/hack/build-tools.sh" keda-operator keda-adapter
  fi
  if on "${REAL_NODE:-0}"; then
    log "building the node's tools and images (make node-tools node-images PLATFORMS=linux/amd64)"
    make -C "${ROOT}" --no-print-directory node-tools node-images PLATFORMS=linux/amd64 >/dev/null
  fi
  if [[ "${JOBSET:-auto}" != 0 && -d "${ROOT}/cmd/jobset-apiserver" ]]; then
    log "building jobset-apiserver and jobset-controller (go build ./cmd/...)"
    (cd "${ROOT}" && GOWORK=off nice -n "${NICE:-10}" go build -tags fieldsv1string -o "${BIN_DIR}/" ./cmd/...) ||
      die "building ./cmd/... failed (JOBSET=0 starts the cluster without the JobSet components)"
  fi
elif [[ ! -x "${BIN_DIR}/localtool" ]]; then
  "${ROOT}/hack/build-tools.sh" localtool
fi
[[ -x "${BIN_DIR}/localtool" ]] || die "${BIN_DIR}/localtool is missing; run hack/build-tools.sh"
exec "${BIN_DIR}/localtool" up "$@"
