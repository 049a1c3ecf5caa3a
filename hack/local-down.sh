#!/usr/bin/env bash
# Stops the local development cluster started by hack/local-up.sh.
#
# A real node (REAL_NODE=1) goes first, with everything it left on the host
# ("localtool node down"). Every component is stopped through its pid file in LOCAL_DIR/pids (SIGTERM,
# then SIGKILL after STOP_TIMEOUT seconds, default 20): first the controllers,
# then the API servers, etcd last. A pid file whose process is gone, or whose
# pid now belongs to a different process (checked by the process start time
# and executable), is removed without signalling anything: this script never
# touches a process it did not start.
#
# Usage: hack/local-down.sh [--clean | --purge]
#   --clean   also delete the cluster data (etcd, jobset-apiserver's embedded
#             etcd); certificates and kubeconfigs are kept
#   --purge   delete LOCAL_DIR altogether
# Environment: LOCAL_DIR [_output/local], STOP_TIMEOUT [20]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/lib/local.sh
source "${ROOT}/hack/lib/local.sh"

mode=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --clean) mode=clean ;;
    --purge) mode=purge ;;
    --help|-h) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) local::die "unknown argument: $1" ;;
  esac
  shift
done

rc=0
if [[ -d "${PID_DIR}" ]]; then
  local::stop_all || rc=1
  # Pid files of components this version of the scripts does not know.
  for f in "${PID_DIR}"/*.pid; do
    [[ -e "${f}" ]] || continue
    name="$(basename "${f}" .pid)"
    [[ " ${LOCAL_COMPONENTS[*]} " != *" ${name} "* ]] || continue
    local::stop "${name}" || rc=1
  done
fi
[[ ${rc} == 0 ]] || local::die "some processes of ${LOCAL_DIR} are still running (see above); nothing removed"

case "${mode}" in
  clean)
    local::log "removing ${LOCAL_DIR}/data"
    rm -rf "${LOCAL_DIR}/data"
    ;;
  purge)
    local::log "removing ${LOCAL_DIR}"
    rm -rf "${LOCAL_DIR}"
    ;;
esac
local::log "local cluster in ${LOCAL_DIR} stopped"
