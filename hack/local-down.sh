#!/usr/bin/env bash
# Stops the local development cluster started by hack/local-up.sh: the real
# node first (with everything it left on the host), then every process
# through its pid file in LOCAL_DIR/pids (SIGTERM, then SIGKILL after
# STOP_TIMEOUT seconds, default 20), the controllers first and etcd last. It
# never signals a process it did not start (a pid file whose pid now belongs
# to another process is removed without a signal). See "localtool down"
# (hack/tools/localtool/cluster).
#
# Usage: hack/local-down.sh [--clean | --purge]
#   --clean   also delete the cluster data (etcd, jobset-apiserver's embedded
#             etcd); certificates and kubeconfigs are kept
#   --purge   delete LOCAL_DIR altogether
# Environment: LOCAL_DIR [_output/local], STOP_TIMEOUT [20]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="${BIN_DIR:-${ROOT}/_output/bin}"
export LOCAL_ROOT="${ROOT}" BIN_DIR

for a in "$@"; do
  if [[ "${a}" == --help || "${a}" == -h ]]; then
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
    exit 0
  fi
done
if [[ ! -x "${BIN_DIR}/localtool" ]]; then
  if [[ ! -d "${LOCAL_DIR:-${ROOT}/_output/local}/pids" ]]; then
    echo "no local cluster to stop in ${LOCAL_DIR:-${ROOT}/_output/local}"
    exit 0
  fi
  "${ROOT}/hack/build-tools.sh" localtool
fi
exec "${BIN_DIR}/localtool" down "$@"
