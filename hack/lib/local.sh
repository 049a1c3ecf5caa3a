#!/usr/bin/env bash
# Shared settings and process helpers of hack/local-up.sh and hack/local-down.sh.
# Source it; it only defines variables and functions.
# shellcheck disable=SC2034 # variables for the scripts that source this file

LOCAL_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# Where the stack keeps its state. Two stacks can run side by side with
# different LOCAL_DIR and PORT_BASE values.
LOCAL_DIR="${LOCAL_DIR:-${LOCAL_ROOT}/_output/local}"
if [[ -d "${LOCAL_DIR}" ]]; then
  LOCAL_DIR="$(cd "${LOCAL_DIR}" && pwd)"
elif [[ "${LOCAL_DIR}" != /* ]]; then
  LOCAL_DIR="${PWD}/${LOCAL_DIR}"
fi
BIN_DIR="${BIN_DIR:-${LOCAL_ROOT}/_output/bin}"
PKI_DIR="${LOCAL_DIR}/pki"
LOG_DIR="${LOCAL_DIR}/logs"
PID_DIR="${LOCAL_DIR}/pids"
KUBECONFIG_DIR="${LOCAL_DIR}/kubeconfigs"
ADMIN_KUBECONFIG="${LOCAL_DIR}/kubeconfig"

# Components in start order.
# With JOBSET_APISERVERS/JOBSET_CONTROLLERS above 1 the further replicas are
# jobset-apiserver-<i> and jobset-controller-<i> (i = 1..3), and
# jobset-apiserver-lb balances connections over the API server replicas.
LOCAL_COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok metrics-server
  jobset-apiserver jobset-apiserver-1 jobset-apiserver-2 jobset-apiserver-3 jobset-apiserver-lb
  jobset-controller jobset-controller-1 jobset-controller-2 jobset-controller-3 trainer-controller-manager
  keda-operator keda-adapter
  node-apiserver-forwarder containerd kubelet kube-proxy coredns)
# Stop order: the clients first, so that no watch (kube-controller-manager
# watches every resource, jobsets too, through the aggregator) keeps an
# aggregated API server from finishing its graceful shutdown.
LOCAL_STOP_ORDER=(keda-operator trainer-controller-manager jobset-controller-3 jobset-controller-2 jobset-controller-1 jobset-controller
  kube-controller-manager kube-scheduler kwok keda-adapter metrics-server
  jobset-apiserver-lb jobset-apiserver-3 jobset-apiserver-2 jobset-apiserver-1 jobset-apiserver
  kube-apiserver etcd)

local::log() { echo "$(date +%H:%M:%S) $*"; }
local::die() {
  echo "error: $*" >&2
  exit 1
}

# local::starttime <pid>: the kernel's start time of a process (clock ticks
# since boot). Together with the pid it identifies the process for good: a pid
# reused by another process has another start time.
local::starttime() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  # Field 2 (comm) may contain spaces; the fields after it start at ") ".
  stat="${stat##*) }"
  # shellcheck disable=SC2086
  set -- ${stat}
  # $1 is the state; a zombie has exited already.
  [[ "$1" != Z ]] || return 1
  echo "${20}"
}

local::pidfile() { echo "${PID_DIR}/$1.pid"; }

# local::pid <component>: print the pid of a running component started by
# these scripts, or fail. A stale pid file (process gone, or the pid now
# belongs to some other process) counts as not running.
local::pid() {
  local f pid start exe now
  f="$(local::pidfile "$1")"
  [[ -f "${f}" ]] || return 1
  read -r pid start exe <"${f}" || return 1
  [[ "${pid}" =~ ^[0-9]+$ ]] || return 1
  now="$(local::starttime "${pid}")" || return 1
  [[ "${now}" == "${start}" ]] || return 1
  # Also compare the executable, when the kernel still tells it. A binary
  # replaced by a rebuild while running reads as "<path> (deleted)".
  if [[ -n "${exe}" && -e "/proc/${pid}/exe" ]]; then
    now="$(readlink "/proc/${pid}/exe" 2>/dev/null)" || return 1
    [[ "${now% (deleted)}" == "${exe}" ]] || return 1
  fi
  echo "${pid}"
}

# local::stop <component> [timeout seconds]: SIGTERM, then SIGKILL after the
# timeout. Only ever signals the process recorded in the component's pid file,
# and only while it is still that process.
local::stop() {
  local name="$1" timeout="${2:-${STOP_TIMEOUT:-20}}" pid deadline
  if ! pid="$(local::pid "${name}")"; then
    rm -f "$(local::pidfile "${name}")"
    return 0
  fi
  local::log "stopping ${name} (pid ${pid})"
  kill -TERM "${pid}" 2>/dev/null || true
  deadline=$((SECONDS + timeout))
  while local::pid "${name}" >/dev/null && [[ ${SECONDS} -lt ${deadline} ]]; do
    sleep 0.1
  done
  if local::pid "${name}" >/dev/null; then
    local::log "${name} did not stop within ${timeout}s after SIGTERM; sending SIGKILL"
    kill -KILL "${pid}" 2>/dev/null || true
    deadline=$((SECONDS + 5))
    while local::pid "${name}" >/dev/null && [[ ${SECONDS} -lt ${deadline} ]]; do
      sleep 0.1
    done
  fi
  if local::pid "${name}" >/dev/null; then
    echo "warning: ${name} (pid ${pid}) is still running after SIGKILL; keeping its pid file" >&2
    return 1
  fi
  rm -f "$(local::pidfile "${name}")"
}

# local::node_down: stop the real node (REAL_NODE=1) and undo what it did on
# the host (containers, mounts, cgroups, bridge, iptables rules); nothing when
# this stack never had one.
local::node_down() {
  [[ -d "${LOCAL_DIR}/data/node" ]] || return 0
  [[ -x "${BIN_DIR}/localtool" ]] || { echo "warning: ${BIN_DIR}/localtool is missing; cannot stop the real node" >&2; return 1; }
  "${BIN_DIR}/localtool" node down -local-dir "${LOCAL_DIR}" -bin-dir "${BIN_DIR}" \
    -bridge-address "${NODE_BRIDGE_ADDRESS:-10.88.0.1/24}"
}

local::stop_all() {
  local c rc=0
  local::node_down || rc=1
  for c in "${LOCAL_STOP_ORDER[@]}"; do
    local::stop "${c}" || rc=1
  done
  return "${rc}"
}
