#!/usr/bin/env bash
# Starts a local development cluster made of real control plane processes on
# 127.0.0.1, with kwok playing the kubelets of a few fake nodes:
#
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok,
#   metrics-server, and (when this checkout has them) jobset-apiserver,
#   registered as APIService v1alpha2.jobset.x-k8s.io, and jobset-controller;
#   with WITH_KEDA=1 also KEDA's operator and metrics API server (keda-adapter,
#   registered as APIService v1beta1.external.metrics.k8s.io).
#
# Everything lives under LOCAL_DIR (default _output/local): pki/, kubeconfigs/,
# logs/<component>.log, pids/<component>.pid, data/. The admin kubeconfig is
# LOCAL_DIR/kubeconfig. Stop the stack with hack/local-down.sh (or Ctrl-C in the
# default foreground mode).
#
# Usage: hack/local-up.sh [--detach] [--demo] [--help]
#   --detach   return once everything is ready (also DETACH=1); default: stay in
#              the foreground and stop everything on Ctrl-C
#   --demo     apply artifacts/examples/simple.yaml when it exists (also DEMO=1)
#
# Environment (defaults in brackets):
#   LOCAL_DIR [_output/local]   state directory; one per stack
#   PORT_BASE [26400]           ports: etcd +0 (peer +1), kwok +10, kube-apiserver +43,
#                               metrics-server +44, jobset-apiserver +45,
#                               jobset-controller health +47, metrics +48 (plain HTTP)
#                               and +49 (HTTPS, delegated authentication and authorization),
#                               kube-controller-manager +57, kube-scheduler +59
#                               (each can be set directly: ETCD_PORT, ETCD_PEER_PORT,
#                               KWOK_PORT, APISERVER_PORT, METRICS_SERVER_PORT,
#                               JOBSET_APISERVER_PORT, JOBSET_CONTROLLER_HEALTH_PORT,
#                               JOBSET_CONTROLLER_METRICS_PORT, JOBSET_CONTROLLER_SECURE_METRICS_PORT,
#                               KCM_PORT, SCHEDULER_PORT)
#                               With WITH_KEDA=1: keda-operator metrics service (gRPC) +84,
#                               metrics +85, health +86; keda-adapter +87 (HTTPS) and its
#                               plain HTTP /metrics +88 (KEDA_OPERATOR_GRPC_PORT,
#                               KEDA_OPERATOR_METRICS_PORT, KEDA_OPERATOR_HEALTH_PORT,
#                               KEDA_ADAPTER_PORT, KEDA_ADAPTER_METRICS_PORT)
#   NODES [4]                   number of fake nodes kwok-node-0..N-1
#   NODES_PER_RACK [2]          nodes sharing a rack label (topology.jobset.x-k8s.io/rack)
#   NODES_PER_POOL [2]          nodes sharing a node pool (cloud.google.com/gke-nodepool)
#   ZONES [2]                   racks are spread over zones zone-a, zone-b, ...
#   NODE_CPU [32] NODE_MEMORY [128Gi] NODE_PODS [110]   allocatable of each node
#   SERVICE_CIDR [10.96.0.0/16] POD_CIDR [10.244.0.0/16] (pod IPs are fake; nothing connects to them)
#   JOBSET [auto]               auto: build and start jobset-apiserver/-controller
#                               when cmd/jobset-apiserver exists; 0: never; 1: required
#   JOBSET_APISERVERS [1]       1: one jobset-apiserver on its embedded etcd. 2..4: that many
#                               replicas on the cluster's etcd (their own key prefix), on ports
#                               +61.., behind a round-robin loopback TCP load balancer
#                               (jobset-apiserver-lb, "localtool lb") on the jobset-apiserver
#                               port, which the APIService's Service points at
#   JOBSET_CONTROLLERS [1]      1..4 jobset-controller processes with leader election; the
#                               further ones (jobset-controller-<i>) use ports +70+3(i-1)..
#   JOBSET_APISERVER_ARGS, JOBSET_CONTROLLER_ARGS   extra flags (word-split, every replica)
#   WITH_KEDA [0]               1: also start KEDA (keda-operator, keda-adapter; built by
#                               hack/build-tools.sh keda-operator keda-adapter) and install
#                               its CRDs from the module pinned as KEDA_VERSION
#   KEDA_OPERATOR_ARGS, KEDA_ADAPTER_ARGS   extra flags (word-split)
#   KUBE_CONTROLLER_MANAGER_ARGS, KUBE_SCHEDULER_ARGS  extra flags (word-split)
#   LOG_VERBOSITY [1]           --v of the kube components
#   WAIT_TIMEOUT [120]          seconds to wait for each component
#   WITH_TRAINER [0]            1: also build and run Kubeflow Trainer's controller manager
#                               (TRAINER_VERSION in hack/versions.env) with its CRDs, webhooks
#                               and ClusterTrainingRuntime torch-distributed; ports: webhook +80,
#                               health +81, metrics +82 (TRAINER_WEBHOOK_PORT, TRAINER_HEALTH_PORT,
#                               TRAINER_METRICS_PORT); needs the JobSet components.
#                               TRAINER_ARGS: extra flags (word-split)
#   REAL_NODE [0]               1: also run one real node (needs root): containerd + Debian's runc,
#                               the CNI bridge, a kubelet, kube-proxy and CoreDNS, built by
#                               hack/build-tools.sh; the node jobset-node-0 carries the label and
#                               NoSchedule taint jobset.local/real-node=true; pods get addresses on
#                               the bridge jobset0 (NODE_BRIDGE_ADDRESS [10.88.0.1/24], the host's
#                               address and the pod subnet) with no route off the machine; images
#                               imported: _output/node-images (the sandbox image, busybox, busybox
#                               with the in-place agent: make node-images) and this checkout's
#                               images (make images). Ports +90..+96.
#                               See "localtool node" (hack/tools/localtool/node).
#   SKIP_BUILD [0]              1: do not run hack/build-tools.sh / go build
#   KEEP_ON_FAILURE [0]         1: leave the processes running when startup fails
#   CLEAN [0]                   1: wipe the cluster data (not the certificates) first
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/lib/local.sh
source "${ROOT}/hack/lib/local.sh"
# shellcheck source=hack/versions.env
source "${ROOT}/hack/versions.env"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

DETACH="${DETACH:-0}"
DEMO="${DEMO:-0}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --detach|-d) DETACH=1 ;;
    --demo) DEMO=1 ;;
    --help|-h) usage; exit 0 ;;
    *) usage >&2; local::die "unknown argument: $1" ;;
  esac
  shift
done

PORT_BASE="${PORT_BASE:-26400}"
ETCD_PORT="${ETCD_PORT:-$((PORT_BASE + 0))}"
ETCD_PEER_PORT="${ETCD_PEER_PORT:-$((PORT_BASE + 1))}"
KWOK_PORT="${KWOK_PORT:-$((PORT_BASE + 10))}"
APISERVER_PORT="${APISERVER_PORT:-$((PORT_BASE + 43))}"
METRICS_SERVER_PORT="${METRICS_SERVER_PORT:-$((PORT_BASE + 44))}"
JOBSET_APISERVER_PORT="${JOBSET_APISERVER_PORT:-$((PORT_BASE + 45))}"
JOBSET_CONTROLLER_HEALTH_PORT="${JOBSET_CONTROLLER_HEALTH_PORT:-$((PORT_BASE + 47))}"
JOBSET_CONTROLLER_METRICS_PORT="${JOBSET_CONTROLLER_METRICS_PORT:-$((PORT_BASE + 48))}"
JOBSET_CONTROLLER_SECURE_METRICS_PORT="${JOBSET_CONTROLLER_SECURE_METRICS_PORT:-$((PORT_BASE + 49))}"
KCM_PORT="${KCM_PORT:-$((PORT_BASE + 57))}"
SCHEDULER_PORT="${SCHEDULER_PORT:-$((PORT_BASE + 59))}"
TRAINER_WEBHOOK_PORT="${TRAINER_WEBHOOK_PORT:-$((PORT_BASE + 80))}"
TRAINER_HEALTH_PORT="${TRAINER_HEALTH_PORT:-$((PORT_BASE + 81))}"
TRAINER_METRICS_PORT="${TRAINER_METRICS_PORT:-$((PORT_BASE + 82))}"
KEDA_OPERATOR_GRPC_PORT="${KEDA_OPERATOR_GRPC_PORT:-$((PORT_BASE + 84))}"
KEDA_OPERATOR_METRICS_PORT="${KEDA_OPERATOR_METRICS_PORT:-$((PORT_BASE + 85))}"
KEDA_OPERATOR_HEALTH_PORT="${KEDA_OPERATOR_HEALTH_PORT:-$((PORT_BASE + 86))}"
KEDA_ADAPTER_PORT="${KEDA_ADAPTER_PORT:-$((PORT_BASE + 87))}"
KEDA_ADAPTER_METRICS_PORT="${KEDA_ADAPTER_METRICS_PORT:-$((PORT_BASE + 88))}"

NODES="${NODES:-4}"
NODES_PER_RACK="${NODES_PER_RACK:-2}"
NODES_PER_POOL="${NODES_PER_POOL:-2}"
ZONES="${ZONES:-2}"
NODE_CPU="${NODE_CPU:-32}"
NODE_MEMORY="${NODE_MEMORY:-128Gi}"
NODE_PODS="${NODE_PODS:-110}"
SERVICE_CIDR="${SERVICE_CIDR:-10.96.0.0/16}"
POD_CIDR="${POD_CIDR:-10.244.0.0/16}"
JOBSET="${JOBSET:-auto}"
WITH_TRAINER="${WITH_TRAINER:-0}"
JOBSET_APISERVERS="${JOBSET_APISERVERS:-1}"
JOBSET_CONTROLLERS="${JOBSET_CONTROLLERS:-1}"
LOG_VERBOSITY="${LOG_VERBOSITY:-1}"
WAIT_TIMEOUT="${WAIT_TIMEOUT:-120}"
SKIP_BUILD="${SKIP_BUILD:-0}"
KEEP_ON_FAILURE="${KEEP_ON_FAILURE:-0}"
CLEAN="${CLEAN:-0}"
WITH_KEDA="${WITH_KEDA:-0}"
REAL_NODE="${REAL_NODE:-0}"
NODE_BRIDGE_ADDRESS="${NODE_BRIDGE_ADDRESS:-10.88.0.1/24}"
NODE_BRIDGE_IP="${NODE_BRIDGE_ADDRESS%/*}"
NODE_TOOLS=(containerd ctr containerd-shim-runc-v2 bridge host-local loopback coredns kubelet kube-proxy)

DATA_DIR="${LOCAL_DIR}/data"
KWOK_CONFIG_DIR="${ROOT}/hack/local/kwok"
LOCALTOOL="${BIN_DIR}/localtool"
KUBECTL="${BIN_DIR}/kubectl"
API_URL="https://127.0.0.1:${APISERVER_PORT}"

for n in NODES NODES_PER_RACK NODES_PER_POOL ZONES PORT_BASE JOBSET_APISERVERS JOBSET_CONTROLLERS; do
  [[ "${!n}" =~ ^[0-9]+$ ]] || local::die "${n} must be a number, got '${!n}'"
done
[[ ${NODES_PER_RACK} -gt 0 && ${NODES_PER_POOL} -gt 0 && ${ZONES} -gt 0 && ${ZONES} -le 26 ]] ||
  local::die "NODES_PER_RACK and NODES_PER_POOL must be > 0, ZONES in 1..26"
[[ ${JOBSET_APISERVERS} -ge 1 && ${JOBSET_APISERVERS} -le 4 && ${JOBSET_CONTROLLERS} -ge 1 && ${JOBSET_CONTROLLERS} -le 4 ]] ||
  local::die "JOBSET_APISERVERS and JOBSET_CONTROLLERS must be in 1..4"

# apiserver_port <i>: the port of jobset-apiserver replica i (with a single
# replica, the jobset-apiserver port itself).
apiserver_port() {
  if [[ ${JOBSET_APISERVERS} == 1 ]]; then echo "${JOBSET_APISERVER_PORT}"; else echo $((PORT_BASE + 61 + $1)); fi
}
# replica_name <component> <i>: the component's name for replica i.
replica_name() { if [[ $2 == 0 ]]; then echo "$1"; else echo "$1-$2"; fi; }

kubectl() { "${KUBECTL}" --kubeconfig "${ADMIN_KUBECONFIG}" --cache-dir "${LOCAL_DIR}/cache/kubectl" "$@"; }

# ---------------------------------------------------------------------------
# Preflight

for c in "${LOCAL_COMPONENTS[@]}"; do
  if pid="$(local::pid "${c}")"; then
    local::die "${c} of the stack in ${LOCAL_DIR} is already running (pid ${pid}); run hack/local-down.sh first (with the same LOCAL_DIR)"
  fi
done

# port_free <port> <what>: fail when something already listens on 127.0.0.1:<port>.
port_free() {
  if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
    local::die "port $1 ($2) on 127.0.0.1 is in use; pick other ports with PORT_BASE=<n> (and a separate LOCAL_DIR)"
  fi
}

if [[ "${SKIP_BUILD}" != 1 ]]; then
  "${ROOT}/hack/build-tools.sh"
  if [[ "${WITH_TRAINER}" == 1 ]]; then
    "${ROOT}/hack/build-tools.sh" trainer-controller-manager
  fi
fi
if [[ "${WITH_TRAINER}" == 1 ]]; then
  [[ -x "${BIN_DIR}/trainer-controller-manager" ]] ||
    local::die "${BIN_DIR}/trainer-controller-manager is missing; run hack/build-tools.sh trainer-controller-manager"
fi
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok metrics-server localtool; do
  [[ -x "${BIN_DIR}/${b}" ]] || local::die "${BIN_DIR}/${b} is missing; run hack/build-tools.sh"
done
case "${REAL_NODE}" in
  0|false|no) REAL_NODE=0 ;;
  1|true|yes)
    REAL_NODE=1
    [[ $(id -u) == 0 ]] || local::die "REAL_NODE=1 needs root (namespaces, mounts, a bridge, iptables)"
    for b in runc iptables ip; do
      command -v "${b}" >/dev/null || local::die "REAL_NODE=1 needs ${b}: apt-get install runc iptables iproute2"
    done
    if [[ "${SKIP_BUILD}" != 1 ]]; then
      local::log "building the node's tools and images (make node-tools node-images PLATFORMS=linux/amd64)"
      make -C "${ROOT}" --no-print-directory node-tools node-images PLATFORMS=linux/amd64 >/dev/null
    fi
    for b in "${NODE_TOOLS[@]}"; do
      [[ -x "${BIN_DIR}/${b}" ]] || local::die "${BIN_DIR}/${b} is missing; run hack/build-tools.sh ${NODE_TOOLS[*]}"
    done
    ;;
  *) local::die "REAL_NODE must be 0 or 1" ;;
esac
case "${WITH_KEDA}" in
  0|false|no) WITH_KEDA=0 ;;
  1|true|yes)
    WITH_KEDA=1
    if [[ "${SKIP_BUILD}" != 1 ]]; then
      "${ROOT}/hack/build-tools.sh" keda-operator keda-adapter
    fi
    for b in keda-operator keda-adapter; do
      [[ -x "${BIN_DIR}/${b}" ]] || local::die "${BIN_DIR}/${b} is missing; run hack/build-tools.sh keda-operator keda-adapter"
    done
    ;;
  *) local::die "WITH_KEDA must be 0 or 1" ;;
esac

# Decide about the JobSet components.
WITH_JOBSET=0
case "${JOBSET}" in
  0|false|no) ;;
  auto|1|true|yes)
    if [[ -d "${ROOT}/cmd/jobset-apiserver" ]]; then
      if [[ "${SKIP_BUILD}" != 1 ]]; then
        local::log "building jobset-apiserver and jobset-controller (go build ./cmd/...)"
        (cd "${ROOT}" && GOWORK=off nice -n "${NICE:-10}" go build -tags fieldsv1string -o "${BIN_DIR}/" ./cmd/...) ||
          local::die "building ./cmd/... failed (JOBSET=0 starts the cluster without the JobSet components)"
      fi
      if [[ -x "${BIN_DIR}/jobset-apiserver" ]]; then
        WITH_JOBSET=1
      elif [[ "${JOBSET}" != auto ]]; then
        local::die "JOBSET=${JOBSET} but ${BIN_DIR}/jobset-apiserver does not exist"
      fi
    elif [[ "${JOBSET}" != auto ]]; then
      local::die "JOBSET=${JOBSET} but cmd/jobset-apiserver does not exist in this checkout"
    else
      local::log "cmd/jobset-apiserver does not exist yet: starting the cluster without jobset-apiserver/-controller"
    fi
    ;;
  *) local::die "JOBSET must be auto, 0 or 1" ;;
esac
case "${WITH_TRAINER}" in
  0) ;;
  1) [[ ${WITH_JOBSET} == 1 ]] || local::die "WITH_TRAINER=1 needs the JobSet components (Trainer creates JobSets)" ;;
  *) local::die "WITH_TRAINER must be 0 or 1" ;;
esac

port_free "${ETCD_PORT}" etcd
port_free "${ETCD_PEER_PORT}" "etcd peer"
port_free "${APISERVER_PORT}" kube-apiserver
port_free "${KCM_PORT}" kube-controller-manager
port_free "${SCHEDULER_PORT}" kube-scheduler
port_free "${KWOK_PORT}" kwok
port_free "${METRICS_SERVER_PORT}" metrics-server
if [[ ${WITH_JOBSET} == 1 ]]; then
  port_free "${JOBSET_APISERVER_PORT}" jobset-apiserver
  port_free "${JOBSET_CONTROLLER_HEALTH_PORT}" "jobset-controller health"
  port_free "${JOBSET_CONTROLLER_METRICS_PORT}" "jobset-controller metrics"
  port_free "${JOBSET_CONTROLLER_SECURE_METRICS_PORT}" "jobset-controller secure metrics"
  if [[ ${JOBSET_APISERVERS} -gt 1 ]]; then
    for ((i = 0; i < JOBSET_APISERVERS; i++)); do port_free "$(apiserver_port "${i}")" "jobset-apiserver replica ${i}"; done
  fi
  for ((i = 1; i < JOBSET_CONTROLLERS; i++)); do
    for ((j = 0; j < 3; j++)); do port_free $((PORT_BASE + 70 + 3 * (i - 1) + j)) "jobset-controller-${i}"; done
  done
fi
if [[ ${WITH_TRAINER} == 1 ]]; then
  port_free "${TRAINER_WEBHOOK_PORT}" "trainer-controller-manager webhooks"
  port_free "${TRAINER_HEALTH_PORT}" "trainer-controller-manager health"
  port_free "${TRAINER_METRICS_PORT}" "trainer-controller-manager metrics"
fi
if [[ ${WITH_KEDA} == 1 ]]; then
  port_free "${KEDA_OPERATOR_GRPC_PORT}" "keda-operator metrics service"
  port_free "${KEDA_OPERATOR_METRICS_PORT}" "keda-operator metrics"
  port_free "${KEDA_OPERATOR_HEALTH_PORT}" "keda-operator health"
  port_free "${KEDA_ADAPTER_PORT}" keda-adapter
  port_free "${KEDA_ADAPTER_METRICS_PORT}" "keda-adapter metrics"
fi

mkdir -p "${PKI_DIR}" "${LOG_DIR}" "${PID_DIR}" "${KUBECONFIG_DIR}" "${DATA_DIR}"
if [[ "${CLEAN}" == 1 ]]; then
  local::log "CLEAN=1: removing ${DATA_DIR}"
  rm -rf "${DATA_DIR}"
  mkdir -p "${DATA_DIR}"
fi

# Traps may fire while a command with redirected output runs (many below send
# theirs to /dev/null), so they write to saved copies of stdout and stderr.
exec 3>&1 4>&2

# From here on, a failed or interrupted startup stops whatever it started.
STARTED=0
on_exit() {
  local rc=$?
  # Finish the clean-up even if the terminal goes away or Ctrl-C is pressed
  # again, and even if writing to a closed terminal fails.
  trap '' INT TERM HUP
  set +e
  if [[ ${STARTED} == 0 && ${rc} != 0 ]]; then
    if [[ "${KEEP_ON_FAILURE}" == 1 ]]; then
      echo "startup failed; KEEP_ON_FAILURE=1 leaves the processes running (hack/local-down.sh stops them)" >&4
    else
      echo "startup failed or interrupted; stopping what was started (KEEP_ON_FAILURE=1 keeps it)" >&4
      local::stop_all >&3 2>&4
    fi
  fi
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# ---------------------------------------------------------------------------
# Certificates and kubeconfigs (kept across restarts)

local::log "certificates and kubeconfigs in ${LOCAL_DIR}"
lt() { "${LOCALTOOL}" "$@"; }
P="${PKI_DIR}"
FIRST_SERVICE_IP="$(awk -F'[./]' '{printf "%d.%d.%d.%d", $1, $2, $3, $4 + 1}' <<<"${SERVICE_CIDR}")"

lt ca -out "${P}/ca" -cn "jobset-local-ca"
lt ca -out "${P}/front-proxy-ca" -cn "jobset-local-front-proxy-ca"
lt key -out "${P}/sa"
lt cert -ca "${P}/ca" -out "${P}/etcd-server" -cn etcd -server -san "localhost,127.0.0.1"
lt cert -ca "${P}/ca" -out "${P}/etcd-client" -cn kube-apiserver-etcd-client -client
lt cert -ca "${P}/ca" -out "${P}/kube-apiserver" -cn kube-apiserver -server \
  -san "localhost,127.0.0.1,${NODE_BRIDGE_IP},${FIRST_SERVICE_IP},kubernetes,kubernetes.default,kubernetes.default.svc,kubernetes.default.svc.cluster.local"
lt cert -ca "${P}/ca" -out "${P}/kube-apiserver-kubelet-client" -cn kube-apiserver-kubelet-client -o system:masters -client
lt cert -ca "${P}/front-proxy-ca" -out "${P}/front-proxy-client" -cn front-proxy-client -client
lt cert -ca "${P}/ca" -out "${P}/admin" -cn admin -o system:masters -client
lt cert -ca "${P}/ca" -out "${P}/kube-controller-manager" -cn system:kube-controller-manager -client
lt cert -ca "${P}/ca" -out "${P}/kube-controller-manager-serving" -cn kube-controller-manager -server -san "localhost,127.0.0.1"
lt cert -ca "${P}/ca" -out "${P}/kube-scheduler" -cn system:kube-scheduler -client
lt cert -ca "${P}/ca" -out "${P}/kube-scheduler-serving" -cn kube-scheduler -server -san "localhost,127.0.0.1"
# kwok acts for every fake node's kubelet; it gets the rights of the cluster admin.
lt cert -ca "${P}/ca" -out "${P}/kwok" -cn system:kwok -o system:masters -client
lt cert -ca "${P}/ca" -out "${P}/kwok-serving" -cn kwok -server -san "localhost,127.0.0.1"
lt cert -ca "${P}/ca" -out "${P}/metrics-server" -cn system:metrics-server -client
lt cert -ca "${P}/ca" -out "${P}/metrics-server-serving" -cn metrics-server -server \
  -san "localhost,127.0.0.1,metrics-server,metrics-server.kube-system,metrics-server.kube-system.svc,metrics-server.kube-system.svc.cluster.local"
lt cert -ca "${P}/ca" -out "${P}/jobset-apiserver" -cn system:jobset-apiserver -client
lt cert -ca "${P}/ca" -out "${P}/jobset-apiserver-serving" -cn jobset-apiserver -server \
  -san "localhost,127.0.0.1,jobset-apiserver,jobset-apiserver.jobset-system,jobset-apiserver.jobset-system.svc,jobset-apiserver.jobset-system.svc.cluster.local"
lt cert -ca "${P}/ca" -out "${P}/jobset-controller" -cn system:jobset-controller -client
# Also the Service name: the real node's in-cluster install serves it there.
lt cert -ca "${P}/ca" -out "${P}/jobset-controller-metrics-serving" -cn jobset-controller-metrics -server \
  -san "localhost,127.0.0.1,jobset-controller-metrics.jobset-system.svc,jobset-controller-metrics.jobset-system.svc.cluster.local"
lt cert -ca "${P}/ca" -out "${P}/trainer-controller-manager" -cn system:kubeflow-trainer -client
lt cert -ca "${P}/ca" -out "${P}/trainer-webhook-serving" -cn kubeflow-trainer-controller-manager -server \
  -san "localhost,127.0.0.1,kubeflow-trainer-controller-manager.kubeflow-system.svc,kubeflow-trainer-controller-manager.kubeflow-system.svc.cluster.local"
if [[ ${WITH_KEDA} == 1 ]]; then
  lt cert -ca "${P}/ca" -out "${P}/keda-operator" -cn system:keda-operator -client
  lt cert -ca "${P}/ca" -out "${P}/keda-adapter" -cn system:keda-adapter -client
  # KEDA reads ca.crt, tls.crt and tls.key from a directory (--cert-dir). The
  # adapter's certificate serves the aggregator and is also its client
  # certificate for the operator's metrics service (mutual TLS).
  mkdir -p "${P}/keda-operator-certs" "${P}/keda-adapter-certs"
  cp "${P}/ca.crt" "${P}/keda-operator-certs/ca.crt"
  cp "${P}/ca.crt" "${P}/keda-adapter-certs/ca.crt"
  lt cert -ca "${P}/ca" -out "${P}/keda-operator-certs/tls" -cn keda-operator -server \
    -san "localhost,127.0.0.1,keda-operator,keda-operator.keda,keda-operator.keda.svc,keda-operator.keda.svc.cluster.local"
  lt cert -ca "${P}/ca" -out "${P}/keda-adapter-certs/tls" -cn keda-metrics-apiserver -server -client \
    -san "localhost,127.0.0.1,keda-metrics-apiserver,keda-metrics-apiserver.keda,keda-metrics-apiserver.keda.svc,keda-metrics-apiserver.keda.svc.cluster.local"
fi

# write_kubeconfig <file> <client cert/key path without extension> <user name>
write_kubeconfig() {
  local tmp="$1.tmp"
  cat >"${tmp}" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: jobset-local
  cluster:
    server: ${API_URL}
    certificate-authority: ${P}/ca.crt
users:
- name: $3
  user:
    client-certificate: $2.crt
    client-key: $2.key
contexts:
- name: jobset-local
  context:
    cluster: jobset-local
    user: $3
current-context: jobset-local
EOF
  mv -f "${tmp}" "$1"
}
write_kubeconfig "${ADMIN_KUBECONFIG}" "${P}/admin" admin
for c in kube-controller-manager kube-scheduler kwok metrics-server jobset-apiserver jobset-controller trainer-controller-manager; do
  write_kubeconfig "${KUBECONFIG_DIR}/${c}.kubeconfig" "${P}/${c}" "${c}"
done
if [[ ${WITH_KEDA} == 1 ]]; then
  for c in keda-operator keda-adapter; do
    write_kubeconfig "${KUBECONFIG_DIR}/${c}.kubeconfig" "${P}/${c}" "${c}"
  done
fi
CA_BUNDLE="$(base64 -w0 <"${P}/ca.crt")"

# ---------------------------------------------------------------------------
# Process helpers

# start <component> <binary> [args...]: run it in its own session (so a
# Ctrl-C in this terminal reaches only this script, which then stops the stack
# in order), log to logs/<component>.log, record pids/<component>.pid.
start() {
  local name="$1" bin="$2" log pid start exe i
  shift 2
  log="${LOG_DIR}/${name}.log"
  {
    echo "==== $(date -u +%Y-%m-%dT%H:%M:%SZ) starting ${name}"
    printf '%q ' "${bin}" "$@"
    echo
  } >>"${log}"
  setsid "${bin}" "$@" </dev/null >>"${log}" 2>&1 &
  pid=$!
  # Not a job of this shell: no "Killed" notices when hack/local-down.sh stops it.
  disown "${pid}"
  # Record the process at once, so that an interrupted start-up still leaves a
  # pid file behind: the start time is fixed at fork, before the exec.
  start="$(local::starttime "${pid}")" || {
    tail -n 20 "${log}" >&2
    local::die "${name} exited right after start; see ${log}"
  }
  echo "${pid} ${start}" >"$(local::pidfile "${name}")"
  # setsid execs the binary in place (this shell has no job control, so the
  # child is no process group leader). Once the exec has happened, add the
  # executable to the record.
  exe="$(readlink -f "${bin}")"
  for ((i = 0; i < 50; i++)); do
    [[ "$(readlink "/proc/${pid}/exe" 2>/dev/null)" == "${exe}" ]] && break
    kill -0 "${pid}" 2>/dev/null || break
    sleep 0.1
  done
  if [[ "$(readlink "/proc/${pid}/exe" 2>/dev/null)" != "${exe}" ]]; then
    tail -n 20 "${log}" >&2
    local::die "${name} did not start (pid ${pid}); see ${log}"
  fi
  echo "${pid} ${start} ${exe}" >"$(local::pidfile "${name}")"
  local::log "started ${name} (pid ${pid}, log ${log})"
}

# wait_for <component> <what> <command...>: poll the command every half
# second until it succeeds, the component exits, or WAIT_TIMEOUT passes.
wait_for() {
  local name="$1" what="$2" deadline log
  shift 2
  log="${LOG_DIR}/${name}.log"
  deadline=$((SECONDS + WAIT_TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    if ! local::pid "${name}" >/dev/null; then
      echo "---- last lines of ${log}:" >&2
      tail -n 30 "${log}" >&2
      local::die "${name} exited while waiting for ${what}; read ${log}"
    fi
    if [[ ${SECONDS} -ge ${deadline} ]]; then
      echo "---- last lines of ${log}:" >&2
      tail -n 30 "${log}" >&2
      echo "---- last attempt:" >&2
      "$@" >&2 || true
      local::die "timed out after ${WAIT_TIMEOUT}s waiting for ${what}; read ${log}"
    fi
    sleep 0.5
  done
  local::log "${what}: ok"
}

probe() { lt probe -cacert "${P}/ca.crt" "$@"; }

# render <file>: a manifest from artifacts/local with its @@NAME@@ words filled in.
render() {
  sed -e "s|@@CA_BUNDLE@@|${CA_BUNDLE}|g" \
    -e "s|@@JOBSET_APISERVER_PORT@@|${JOBSET_APISERVER_PORT}|g" \
    -e "s|@@METRICS_SERVER_PORT@@|${METRICS_SERVER_PORT}|g" \
    -e "s|@@TRAINER_WEBHOOK_PORT@@|${TRAINER_WEBHOOK_PORT}|g" \
    -e "s|@@TRAINER_HEALTH_PORT@@|${TRAINER_HEALTH_PORT}|g" \
    -e "s|@@TRAINER_METRICS_PORT@@|${TRAINER_METRICS_PORT}|g" \
    -e "s|@@KEDA_ADAPTER_PORT@@|${KEDA_ADAPTER_PORT}|g" \
    "${ROOT}/artifacts/local/$1"
}

# ---------------------------------------------------------------------------
# etcd

start etcd "${BIN_DIR}/etcd" \
  --name local \
  --data-dir "${DATA_DIR}/etcd" \
  --listen-client-urls "https://127.0.0.1:${ETCD_PORT}" \
  --advertise-client-urls "https://127.0.0.1:${ETCD_PORT}" \
  --listen-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" \
  --initial-advertise-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" \
  --initial-cluster "local=http://127.0.0.1:${ETCD_PEER_PORT}" \
  --cert-file "${P}/etcd-server.crt" --key-file "${P}/etcd-server.key" \
  --client-cert-auth --trusted-ca-file "${P}/ca.crt" \
  --unsafe-no-fsync \
  --log-level warn
wait_for etcd "etcd health" probe -cert "${P}/etcd-client.crt" -key "${P}/etcd-client.key" "https://127.0.0.1:${ETCD_PORT}/health"

# ---------------------------------------------------------------------------
# kube-apiserver

# Without a real node nothing uses the "kubernetes" Service. With one, pods
# reach kube-apiserver through it at the bridge address, where "localtool
# node" forwards to 127.0.0.1.
if [[ ${REAL_NODE} == 1 ]]; then
  advertise=(--advertise-address="${NODE_BRIDGE_IP}" --endpoint-reconciler-type=lease)
else
  advertise=(--advertise-address=127.0.0.1 --endpoint-reconciler-type=none)
fi
start kube-apiserver "${BIN_DIR}/kube-apiserver" \
  --v="${LOG_VERBOSITY}" \
  --bind-address=127.0.0.1 \
  "${advertise[@]}" \
  --secure-port="${APISERVER_PORT}" \
  --tls-cert-file="${P}/kube-apiserver.crt" --tls-private-key-file="${P}/kube-apiserver.key" \
  --client-ca-file="${P}/ca.crt" \
  --etcd-servers="https://127.0.0.1:${ETCD_PORT}" \
  --etcd-cafile="${P}/ca.crt" --etcd-certfile="${P}/etcd-client.crt" --etcd-keyfile="${P}/etcd-client.key" \
  --authorization-mode=Node,RBAC \
  --allow-privileged=true \
  --service-cluster-ip-range="${SERVICE_CIDR}" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="${P}/sa.pub" \
  --service-account-signing-key-file="${P}/sa.key" \
  --api-audiences=https://kubernetes.default.svc.cluster.local \
  --kubelet-client-certificate="${P}/kube-apiserver-kubelet-client.crt" \
  --kubelet-client-key="${P}/kube-apiserver-kubelet-client.key" \
  --kubelet-certificate-authority="${P}/ca.crt" \
  --kubelet-preferred-address-types=InternalIP \
  --requestheader-client-ca-file="${P}/front-proxy-ca.crt" \
  --requestheader-allowed-names=front-proxy-client \
  --requestheader-extra-headers-prefix=X-Remote-Extra- \
  --requestheader-group-headers=X-Remote-Group \
  --requestheader-username-headers=X-Remote-User \
  --requestheader-uid-headers=X-Remote-Uid \
  --proxy-client-cert-file="${P}/front-proxy-client.crt" \
  --proxy-client-key-file="${P}/front-proxy-client.key" \
  --enable-aggregator-routing=false \
  --audit-policy-file="${ROOT}/hack/local/audit-policy.yaml" \
  --audit-log-path="${LOCAL_DIR}/logs/kube-apiserver-audit.log" \
  --audit-log-maxsize=100 --audit-log-maxbackup=1
wait_for kube-apiserver "kube-apiserver /readyz" probe -cert "${P}/admin.crt" -key "${P}/admin.key" "${API_URL}/readyz"

# ---------------------------------------------------------------------------
# kube-controller-manager and kube-scheduler

# shellcheck disable=SC2086
start kube-controller-manager "${BIN_DIR}/kube-controller-manager" \
  --v="${LOG_VERBOSITY}" \
  --kubeconfig="${KUBECONFIG_DIR}/kube-controller-manager.kubeconfig" \
  --authentication-kubeconfig="${KUBECONFIG_DIR}/kube-controller-manager.kubeconfig" \
  --authorization-kubeconfig="${KUBECONFIG_DIR}/kube-controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="${KCM_PORT}" \
  --tls-cert-file="${P}/kube-controller-manager-serving.crt" \
  --tls-private-key-file="${P}/kube-controller-manager-serving.key" \
  --controllers='*' \
  --use-service-account-credentials=true \
  --service-account-private-key-file="${P}/sa.key" \
  --root-ca-file="${P}/ca.crt" \
  --cluster-signing-cert-file="${P}/ca.crt" --cluster-signing-key-file="${P}/ca.key" \
  --service-cluster-ip-range="${SERVICE_CIDR}" \
  --flex-volume-plugin-dir="${DATA_DIR}/flexvolume" \
  --leader-elect=false \
  ${KUBE_CONTROLLER_MANAGER_ARGS:-}
# shellcheck disable=SC2086
start kube-scheduler "${BIN_DIR}/kube-scheduler" \
  --v="${LOG_VERBOSITY}" \
  --kubeconfig="${KUBECONFIG_DIR}/kube-scheduler.kubeconfig" \
  --authentication-kubeconfig="${KUBECONFIG_DIR}/kube-scheduler.kubeconfig" \
  --authorization-kubeconfig="${KUBECONFIG_DIR}/kube-scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="${SCHEDULER_PORT}" \
  --tls-cert-file="${P}/kube-scheduler-serving.crt" \
  --tls-private-key-file="${P}/kube-scheduler-serving.key" \
  --leader-elect=false \
  ${KUBE_SCHEDULER_ARGS:-}
wait_for kube-controller-manager "kube-controller-manager /healthz" probe "https://127.0.0.1:${KCM_PORT}/healthz"
wait_for kube-scheduler "kube-scheduler /readyz" probe "https://127.0.0.1:${SCHEDULER_PORT}/readyz"

# ---------------------------------------------------------------------------
# kwok and the fake nodes

# kwok also reads ~/.kwok/kwok.yaml when it exists; give it a HOME of its own
# so that only our stage files count.
mkdir -p "${DATA_DIR}/kwok-home"
HOME="${DATA_DIR}/kwok-home" start kwok "${BIN_DIR}/kwok" \
  --kubeconfig="${KUBECONFIG_DIR}/kwok.kubeconfig" \
  --config="${KWOK_CONFIG_DIR}/kwok.yaml" \
  --config="${KWOK_CONFIG_DIR}/stages.yaml" \
  --config="${KWOK_CONFIG_DIR}/metrics.yaml" \
  --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --node-ip=127.0.0.1 \
  --node-port="${KWOK_PORT}" \
  --server-address="127.0.0.1:${KWOK_PORT}" \
  --tls-cert-file="${P}/kwok-serving.crt" --tls-private-key-file="${P}/kwok-serving.key" \
  --node-lease-duration-seconds=40 \
  --cidr="${POD_CIDR}"
wait_for kwok "kwok /healthz" probe "https://127.0.0.1:${KWOK_PORT}/healthz"

nodes_manifest() {
  local i rack pool zone letters=abcdefghijklmnopqrstuvwxyz
  for ((i = 0; i < NODES; i++)); do
    rack=$((i / NODES_PER_RACK))
    pool=$((i / NODES_PER_POOL))
    zone="zone-${letters:$((rack % ZONES)):1}"
    cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-${i}
  annotations:
    kwok.x-k8s.io/node: fake
    metrics.k8s.io/resource-metrics-path: /metrics/nodes/kwok-node-${i}/metrics/resource
  labels:
    type: kwok
    kubernetes.io/hostname: kwok-node-${i}
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    node.kubernetes.io/instance-type: kwok
    topology.kubernetes.io/region: local
    topology.kubernetes.io/zone: ${zone}
    topology.jobset.x-k8s.io/rack: rack-${rack}
    cloud.google.com/gke-nodepool: pool-${pool}
spec: {}
status:
  allocatable:
    cpu: "${NODE_CPU}"
    memory: ${NODE_MEMORY}
    pods: "${NODE_PODS}"
  capacity:
    cpu: "${NODE_CPU}"
    memory: ${NODE_MEMORY}
    pods: "${NODE_PODS}"
EOF
  done
}
local::log "creating ${NODES} fake nodes"
nodes_manifest | kubectl apply -f - >/dev/null
# Nodes of an earlier run with a larger NODES go away.
for n in $(kubectl get nodes -l type=kwok -o name); do
  idx="${n#node/kwok-node-}"
  if [[ ! "${idx}" =~ ^[0-9]+$ ]] || [[ ${idx} -ge ${NODES} ]]; then
    kubectl delete "${n}" --wait=false >/dev/null
  fi
done
nodes_ready() {
  local ready
  ready="$(kubectl get nodes -l type=kwok -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c '^True$')"
  [[ "${ready}" -ge "${NODES}" ]] || return 1
  # The node lifecycle controller lifts the not-ready taint once it saw the node Ready.
  ! kubectl get nodes -l type=kwok -o jsonpath='{.items[*].spec.taints[*].key}' | grep -q 'node.kubernetes.io/not-ready'
}
wait_for kwok "${NODES} kwok nodes Ready and untainted" nodes_ready

# ---------------------------------------------------------------------------
# metrics-server

kubectl apply -f "${ROOT}/artifacts/local/metrics-server-rbac.yaml" >/dev/null
start metrics-server "${BIN_DIR}/metrics-server" \
  --kubeconfig="${KUBECONFIG_DIR}/metrics-server.kubeconfig" \
  --authentication-kubeconfig="${KUBECONFIG_DIR}/metrics-server.kubeconfig" \
  --authorization-kubeconfig="${KUBECONFIG_DIR}/metrics-server.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="${METRICS_SERVER_PORT}" \
  --tls-cert-file="${P}/metrics-server-serving.crt" \
  --tls-private-key-file="${P}/metrics-server-serving.key" \
  --kubelet-use-node-status-port \
  --kubelet-preferred-address-types=InternalIP \
  --kubelet-certificate-authority="${P}/ca.crt" \
  --metric-resolution=15s
apiservice_available() {
  [[ "$(kubectl get apiservice "$1" -o jsonpath='{.status.conditions[?(@.type=="Available")].status}')" == True ]]
}
wait_for metrics-server "metrics-server /livez" probe "https://127.0.0.1:${METRICS_SERVER_PORT}/livez"
render metrics-apiservice.yaml | kubectl apply -f - >/dev/null

# ---------------------------------------------------------------------------
# jobset-apiserver and jobset-controller

if [[ ${WITH_JOBSET} == 1 ]]; then
  kubectl apply -f "${ROOT}/artifacts/local/jobset-apiserver-rbac.yaml" >/dev/null
  kubectl apply -f "${ROOT}/artifacts/local/jobset-controller-rbac.yaml" >/dev/null
  # One replica keeps its data in an embedded etcd; several share the
  # cluster's etcd, under the server's own key prefix.
  storage_args=(--embedded-etcd-dir="${DATA_DIR}/jobset-etcd")
  if [[ ${JOBSET_APISERVERS} -gt 1 ]]; then
    storage_args=(
      --etcd-servers="https://127.0.0.1:${ETCD_PORT}"
      --etcd-cafile="${P}/ca.crt" --etcd-certfile="${P}/etcd-client.crt" --etcd-keyfile="${P}/etcd-client.key"
    )
  fi
  backends=()
  for ((i = 0; i < JOBSET_APISERVERS; i++)); do
    name="$(replica_name jobset-apiserver "${i}")"
    port="$(apiserver_port "${i}")"
    backends+=("127.0.0.1:${port}")
    apiserver_audit=()
    if [[ ${WITH_TRAINER} == 1 ]]; then
      # Trainer's JobSet applies, with their bodies (hack/local/trainer-audit-policy.yaml).
      apiserver_audit=(
        --audit-policy-file="${ROOT}/hack/local/trainer-audit-policy.yaml"
        --audit-log-path="${LOG_DIR}/${name}-audit.log"
        --audit-log-maxsize=100 --audit-log-maxbackup=1
      )
    fi
    # shellcheck disable=SC2086
    start "${name}" "${BIN_DIR}/jobset-apiserver" \
      --secure-port="${port}" \
      --bind-address=127.0.0.1 \
      --tls-cert-file="${P}/jobset-apiserver-serving.crt" \
      --tls-private-key-file="${P}/jobset-apiserver-serving.key" \
      --kubeconfig="${KUBECONFIG_DIR}/jobset-apiserver.kubeconfig" \
      --authentication-kubeconfig="${KUBECONFIG_DIR}/jobset-apiserver.kubeconfig" \
      --authorization-kubeconfig="${KUBECONFIG_DIR}/jobset-apiserver.kubeconfig" \
      "${storage_args[@]}" \
      "${apiserver_audit[@]}" ${JOBSET_APISERVER_ARGS:-}
  done
  for ((i = 0; i < JOBSET_APISERVERS; i++)); do
    name="$(replica_name jobset-apiserver "${i}")"
    wait_for "${name}" "${name} /readyz" probe "https://127.0.0.1:$(apiserver_port "${i}")/readyz"
  done
  if [[ ${JOBSET_APISERVERS} -gt 1 ]]; then
    # No kube-proxy here: this balancer is the Service's endpoints.
    start jobset-apiserver-lb "${LOCALTOOL}" lb -listen "127.0.0.1:${JOBSET_APISERVER_PORT}" \
      -backends "$(IFS=,; echo "${backends[*]}")"
    wait_for jobset-apiserver-lb "jobset-apiserver /readyz through the balancer" probe "https://127.0.0.1:${JOBSET_APISERVER_PORT}/readyz"
  fi
  render jobset-apiservice.yaml | kubectl apply -f - >/dev/null
  wait_for jobset-apiserver "APIService v1alpha2.jobset.x-k8s.io Available" apiservice_available v1alpha2.jobset.x-k8s.io
  if [[ -x "${BIN_DIR}/jobset-controller" ]]; then
    controller_args=(--kubeconfig="${KUBECONFIG_DIR}/jobset-controller.kubeconfig")
    # Its health endpoint has a fixed default port; move it with PORT_BASE so
    # that two stacks can run side by side.
    health=0
    if "${BIN_DIR}/jobset-controller" --help 2>&1 | grep -q -- '--health-addr'; then
      controller_args+=(--health-addr="127.0.0.1:${JOBSET_CONTROLLER_HEALTH_PORT}")
      health=1
    fi
    if "${BIN_DIR}/jobset-controller" --help 2>&1 | grep -q -- '--metrics-bind-address'; then
      controller_args+=(--metrics-bind-address="127.0.0.1:${JOBSET_CONTROLLER_METRICS_PORT}")
    fi
    if "${BIN_DIR}/jobset-controller" --help 2>&1 | grep -q -- '--secure-metrics-bind-address'; then
      controller_args+=(
        --secure-metrics-bind-address="127.0.0.1:${JOBSET_CONTROLLER_SECURE_METRICS_PORT}"
        --tls-cert-file="${P}/jobset-controller-metrics-serving.crt"
        --tls-private-key-file="${P}/jobset-controller-metrics-serving.key"
      )
    fi
    # shellcheck disable=SC2086
    start jobset-controller "${BIN_DIR}/jobset-controller" "${controller_args[@]}" ${JOBSET_CONTROLLER_ARGS:-}
    if [[ ${health} == 1 ]]; then
      wait_for jobset-controller "jobset-controller /healthz" lt probe "http://127.0.0.1:${JOBSET_CONTROLLER_HEALTH_PORT}/healthz"
    fi
    # Standbys: the same flags on ports of their own; leader election picks one.
    for ((i = 1; i < JOBSET_CONTROLLERS; i++)); do
      off=$((PORT_BASE + 70 + 3 * (i - 1)))
      standby_args=()
      for a in "${controller_args[@]}"; do
        case "${a}" in
          --health-addr=*) a="--health-addr=127.0.0.1:${off}" ;;
          --metrics-bind-address=*) a="--metrics-bind-address=127.0.0.1:$((off + 1))" ;;
          --secure-metrics-bind-address=*) a="--secure-metrics-bind-address=127.0.0.1:$((off + 2))" ;;
        esac
        standby_args+=("${a}")
      done
      # shellcheck disable=SC2086
      start "jobset-controller-${i}" "${BIN_DIR}/jobset-controller" "${standby_args[@]}" ${JOBSET_CONTROLLER_ARGS:-}
      if [[ ${health} == 1 ]]; then
        wait_for "jobset-controller-${i}" "jobset-controller-${i} /healthz" lt probe "http://127.0.0.1:${off}/healthz"
      fi
    done
  else
    local::log "no ${BIN_DIR}/jobset-controller: not starting the controller"
  fi
fi

# ---------------------------------------------------------------------------
# Kubeflow Trainer (WITH_TRAINER=1)

# trainer_webhooks <dir>: Trainer's webhook configurations, from its own
# manifests, pointed at the ExternalName Service (namespace, port) and the
# local CA. The manifests are a kustomize base; it is copied next to an
# overlay because kustomize takes no absolute paths.
trainer_webhooks() {
  local dir="$1" kind n i
  rm -rf "${dir}"
  mkdir -p "${dir}"
  cp -r "${TRAINER_MANIFESTS}/base/webhook" "${dir}/base"
  chmod -R u+w "${dir}/base"
  {
    echo "apiVersion: kustomize.config.k8s.io/v1beta1"
    echo "kind: Kustomization"
    echo "namespace: kubeflow-system"
    echo "resources: [base]"
    echo "patches:"
    for kind in MutatingWebhookConfiguration ValidatingWebhookConfiguration; do
      # Webhooks of that kind: the top-level list items of its document.
      n="$(kubectl kustomize "${dir}/base" | awk -v k="${kind}" '
        /^kind: / { in_kind = ($2 == k) } in_kind && /^- / { n++ } END { print n + 0 }')"
      [[ ${n} -gt 0 ]] || local::die "no ${kind} in ${TRAINER_MANIFESTS}/base/webhook"
      echo "- target: {kind: ${kind}}"
      echo "  patch: |-"
      for ((i = 0; i < n; i++)); do
        echo "    - {op: add, path: /webhooks/${i}/clientConfig/service/port, value: ${TRAINER_WEBHOOK_PORT}}"
        echo "    - {op: add, path: /webhooks/${i}/clientConfig/caBundle, value: ${CA_BUNDLE}}"
      done
    done
  } >"${dir}/kustomization.yaml"
  kubectl kustomize "${dir}"
}

# crds_established <crd ...>: whether every named CRD is Established. (kubectl
# wait fails at once on a CRD that has no conditions yet, so poll instead.)
crds_established() {
  local c
  for c in "$@"; do
    [[ "$(kubectl get crd "${c}" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}')" == True ]] || return 1
  done
}

if [[ ${WITH_TRAINER} == 1 ]]; then
  # The module's manifests/ (CRDs, RBAC, webhooks, runtimes) at the pinned version.
  TRAINER_MODULE_DIR="$(cd "${ROOT}/hack/tools/trainer" &&
    GOWORK=off go mod download -json github.com/kubeflow/trainer/v2 | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')"
  TRAINER_MANIFESTS="${TRAINER_MODULE_DIR}/manifests"
  [[ -d "${TRAINER_MANIFESTS}/base/crds" ]] ||
    local::die "no manifests/base/crds in the Trainer module (${TRAINER_MODULE_DIR:-not downloaded})"
  local::log "Kubeflow Trainer ${TRAINER_VERSION}: CRDs, RBAC and webhooks from ${TRAINER_MANIFESTS}"
  # The CRDs are too large for the last-applied annotation of client-side apply.
  kubectl apply --server-side --force-conflicts -k "${TRAINER_MANIFESTS}/base/crds" >/dev/null
  wait_for kube-apiserver "Trainer's CRDs Established" crds_established \
    trainjobs.trainer.kubeflow.org trainingruntimes.trainer.kubeflow.org clustertrainingruntimes.trainer.kubeflow.org
  kubectl apply -f "${TRAINER_MANIFESTS}/base/rbac/role.yaml" >/dev/null
  render trainer.yaml | kubectl apply -f - >/dev/null
  trainer_webhooks "${LOCAL_DIR}/trainer/webhook" | kubectl apply -f - >/dev/null
  render trainer-config.yaml >"${LOCAL_DIR}/trainer/config.yaml"
  # controller-runtime reads the webhook serving certificate from
  # $TMPDIR/k8s-webhook-server/serving-certs: the manager gets a TMPDIR of its own.
  TRAINER_TMP="${DATA_DIR}/trainer-tmp"
  mkdir -p "${TRAINER_TMP}/k8s-webhook-server/serving-certs"
  cp "${P}/trainer-webhook-serving.crt" "${TRAINER_TMP}/k8s-webhook-server/serving-certs/tls.crt"
  cp "${P}/trainer-webhook-serving.key" "${TRAINER_TMP}/k8s-webhook-server/serving-certs/tls.key"
  # shellcheck disable=SC2086
  TMPDIR="${TRAINER_TMP}" KUBECONFIG="${KUBECONFIG_DIR}/trainer-controller-manager.kubeconfig" \
    start trainer-controller-manager "${BIN_DIR}/trainer-controller-manager" \
    --config="${LOCAL_DIR}/trainer/config.yaml" ${TRAINER_ARGS:-}
  wait_for trainer-controller-manager "trainer-controller-manager /readyz" lt probe "http://127.0.0.1:${TRAINER_HEALTH_PORT}/readyz"
  # The runtime goes through Trainer's validating webhook: creating it also
  # proves that the API server reaches the webhooks.
  wait_for trainer-controller-manager "ClusterTrainingRuntime torch-distributed (through Trainer's webhook)" \
    kubectl apply -f "${TRAINER_MANIFESTS}/base/runtimes/torch_distributed.yaml"
fi

# ---------------------------------------------------------------------------
# KEDA (WITH_KEDA=1): operator and metrics API server

if [[ ${WITH_KEDA} == 1 ]]; then
  # The CRDs come from the module the binaries were built from.
  keda_dir="$(cd "${ROOT}/hack/tools/keda" && GOWORK=off GOFLAGS=-mod=readonly go mod download -json "github.com/kedacore/keda/v2" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')"
  [[ -d "${keda_dir}/config/crd/bases" ]] || local::die "could not find KEDA's CRDs (github.com/kedacore/keda/v2@${KEDA_VERSION}) in the module cache"
  local::log "installing KEDA's CRDs from ${keda_dir}/config/crd/bases"
  # Server-side apply: the ScaledJob CRD is too large for the last-applied annotation.
  kubectl apply --server-side --force-conflicts -f "${keda_dir}/config/crd/bases" >/dev/null
  wait_for kube-apiserver "KEDA's CRDs Established" crds_established scaledobjects.keda.sh scaledjobs.keda.sh
  kubectl apply -f "${ROOT}/artifacts/local/keda-rbac.yaml" >/dev/null
  # KEDA reads its settings from the environment it would have in a pod
  # (all namespaces watched, its own namespace keda); controller-runtime takes
  # the kubeconfig from KUBECONFIG.
  # shellcheck disable=SC2086
  WATCH_NAMESPACE="" POD_NAMESPACE=keda KEDA_CLUSTER_OBJECT_NAMESPACE=keda \
    KUBECONFIG="${KUBECONFIG_DIR}/keda-operator.kubeconfig" start keda-operator "${BIN_DIR}/keda-operator" \
    --metrics-service-bind-address="127.0.0.1:${KEDA_OPERATOR_GRPC_PORT}" \
    --metrics-bind-address="127.0.0.1:${KEDA_OPERATOR_METRICS_PORT}" \
    --health-probe-bind-address="127.0.0.1:${KEDA_OPERATOR_HEALTH_PORT}" \
    --cert-dir="${P}/keda-operator-certs" \
    --ca-dir="${P}/keda-operator-certs" \
    --leader-elect=false \
    ${KEDA_OPERATOR_ARGS:-}
  wait_for keda-operator "keda-operator /readyz" lt probe "http://127.0.0.1:${KEDA_OPERATOR_HEALTH_PORT}/readyz"
  # keda-adapter's --port serves plain HTTP /metrics on every interface; it
  # takes no address.
  # shellcheck disable=SC2086
  WATCH_NAMESPACE="" POD_NAMESPACE=keda KEDA_CLUSTER_OBJECT_NAMESPACE=keda \
    KUBECONFIG="${KUBECONFIG_DIR}/keda-adapter.kubeconfig" start keda-adapter "${BIN_DIR}/keda-adapter" \
    --secure-port="${KEDA_ADAPTER_PORT}" \
    --bind-address=127.0.0.1 \
    --port="${KEDA_ADAPTER_METRICS_PORT}" \
    --cert-dir="${P}/keda-adapter-certs" \
    --tls-cert-file="${P}/keda-adapter-certs/tls.crt" \
    --tls-private-key-file="${P}/keda-adapter-certs/tls.key" \
    --lister-kubeconfig="${KUBECONFIG_DIR}/keda-adapter.kubeconfig" \
    --authentication-kubeconfig="${KUBECONFIG_DIR}/keda-adapter.kubeconfig" \
    --authorization-kubeconfig="${KUBECONFIG_DIR}/keda-adapter.kubeconfig" \
    --metrics-service-address="localhost:${KEDA_OPERATOR_GRPC_PORT}" \
    ${KEDA_ADAPTER_ARGS:-}
  wait_for keda-adapter "keda-adapter /readyz" probe "https://127.0.0.1:${KEDA_ADAPTER_PORT}/readyz"
  render keda-apiservice.yaml | kubectl apply -f - >/dev/null
  wait_for keda-adapter "APIService v1beta1.external.metrics.k8s.io Available" apiservice_available v1beta1.external.metrics.k8s.io
fi

wait_for metrics-server "APIService v1beta1.metrics.k8s.io Available" apiservice_available v1beta1.metrics.k8s.io

# ---------------------------------------------------------------------------
# The real node (REAL_NODE=1): hack/tools/localtool/node

if [[ ${REAL_NODE} == 1 ]]; then
  node_images=()
  for f in "${ROOT}"/_output/node-images/*.tar "${ROOT}"/_output/images/*_linux_amd64.tar; do
    [[ -e "${f}" ]] && node_images+=("${f}")
  done
  lt node up -local-dir "${LOCAL_DIR}" -bin-dir "${BIN_DIR}" -port-base "${PORT_BASE}" \
    -apiserver-port "${APISERVER_PORT}" -bridge-address "${NODE_BRIDGE_ADDRESS}" \
    -service-cidr "${SERVICE_CIDR}" -wait "${WAIT_TIMEOUT}s" \
    -images "$(IFS=,; echo "${node_images[*]}")"
fi
if [[ ${WITH_JOBSET} == 1 && -x "${BIN_DIR}/jobset-controller" ]]; then
  # The controller has had the time the metrics APIService took; it must still run.
  local::pid jobset-controller >/dev/null ||
    local::die "jobset-controller exited; read ${LOG_DIR}/jobset-controller.log"
fi

STARTED=1
trap - EXIT INT TERM HUP

# Remember how this stack was started, for humans and scripts.
cat >"${LOCAL_DIR}/env" <<EOF
# Written by hack/local-up.sh; source it to talk to this stack.
export KUBECONFIG=${ADMIN_KUBECONFIG}
export PATH=${BIN_DIR}:\${PATH}
LOCAL_DIR=${LOCAL_DIR}
API_URL=${API_URL}
ETCD_PORT=${ETCD_PORT}
APISERVER_PORT=${APISERVER_PORT}
KCM_PORT=${KCM_PORT}
SCHEDULER_PORT=${SCHEDULER_PORT}
KWOK_PORT=${KWOK_PORT}
METRICS_SERVER_PORT=${METRICS_SERVER_PORT}
JOBSET_APISERVER_PORT=${JOBSET_APISERVER_PORT}
JOBSET_CONTROLLER_HEALTH_PORT=${JOBSET_CONTROLLER_HEALTH_PORT}
JOBSET_CONTROLLER_METRICS_PORT=${JOBSET_CONTROLLER_METRICS_PORT}
JOBSET_CONTROLLER_SECURE_METRICS_PORT=${JOBSET_CONTROLLER_SECURE_METRICS_PORT}
WITH_JOBSET=${WITH_JOBSET}
WITH_TRAINER=${WITH_TRAINER}
TRAINER_WEBHOOK_PORT=${TRAINER_WEBHOOK_PORT}
TRAINER_HEALTH_PORT=${TRAINER_HEALTH_PORT}
TRAINER_METRICS_PORT=${TRAINER_METRICS_PORT}
JOBSET_APISERVERS=${JOBSET_APISERVERS}
JOBSET_CONTROLLERS=${JOBSET_CONTROLLERS}
WITH_KEDA=${WITH_KEDA}
KEDA_OPERATOR_GRPC_PORT=${KEDA_OPERATOR_GRPC_PORT}
KEDA_OPERATOR_METRICS_PORT=${KEDA_OPERATOR_METRICS_PORT}
KEDA_OPERATOR_HEALTH_PORT=${KEDA_OPERATOR_HEALTH_PORT}
KEDA_ADAPTER_PORT=${KEDA_ADAPTER_PORT}
KEDA_ADAPTER_METRICS_PORT=${KEDA_ADAPTER_METRICS_PORT}
REAL_NODE=${REAL_NODE}
NODE_BRIDGE_ADDRESS=${NODE_BRIDGE_ADDRESS}
EOF

cat <<EOF

Local cluster is up ($(kubectl get nodes -l type=kwok --no-headers | wc -l) kwok nodes, API ${API_URL}).

  export KUBECONFIG=${ADMIN_KUBECONFIG}
  export PATH=${BIN_DIR}:\$PATH        # kubectl ${KUBERNETES_VERSION:-}
  (or: source ${LOCAL_DIR}/env)

Try:
  kubectl get nodes -L topology.kubernetes.io/zone,topology.jobset.x-k8s.io/rack,cloud.google.com/gke-nodepool
  kubectl create deployment demo --image=nginx --replicas=3      # pods go Running on kwok nodes
  kubectl top nodes
EOF
if [[ ${WITH_JOBSET} == 1 ]]; then
  cat <<EOF
  kubectl api-resources --api-group=jobset.x-k8s.io
  kubectl get jobsets -A
EOF
fi
if [[ ${WITH_TRAINER} == 1 ]]; then
  cat <<EOF
  kubectl get clustertrainingruntimes,trainjobs -A     # Kubeflow Trainer ${TRAINER_VERSION}
EOF
fi
if [[ ${WITH_KEDA} == 1 ]]; then
  cat <<EOF
  kubectl get scaledobjects -A          # KEDA; see artifacts/examples/autoscaling
EOF
fi
cat <<EOF

Pods on kwok nodes run until told otherwise (see hack/local/kwok/stages.yaml):
  annotation pod-complete.stage.kwok.x-k8s.io/delay: "10s"   -> Succeeded after 10s
  label      pod-fail.stage.kwok.x-k8s.io: "true"            -> Failed after 1s,
  annotation pod-fail.stage.kwok.x-k8s.io/exit-code: "42"       with exit code 42
  annotation kwok.x-k8s.io/usage-cpu: "250m"                 -> CPU usage per container
  annotation pod-terminate.stage.kwok.x-k8s.io/ignores-sigterm -> a deleted pod ends late (1s up to its grace period)

Logs: ${LOG_DIR}/<component>.log     Stop: hack/local-down.sh$( [[ "${LOCAL_DIR}" == "${ROOT}/_output/local" ]] || echo " (with LOCAL_DIR=${LOCAL_DIR})")
EOF

if [[ "${DEMO}" == 1 ]]; then
  example="${ROOT}/artifacts/examples/simple.yaml"
  if [[ ! -f "${example}" ]]; then
    local::log "DEMO: ${example} does not exist; nothing to apply"
  elif [[ ${WITH_JOBSET} != 1 ]]; then
    local::log "DEMO: jobset-apiserver is not running; not applying ${example}"
  else
    # The cluster keeps its state across runs: a finished JobSet from an
    # earlier demo cannot be changed, so start the demo afresh, once the
    # garbage collector has removed the old Jobs too.
    selector=jobset.sigs.k8s.io/jobset-name=simple
    local::log "DEMO: kubectl delete --ignore-not-found --cascade=foreground -f ${example}; kubectl apply -f ${example}"
    kubectl delete --ignore-not-found --cascade=foreground --wait=true --timeout=60s -f "${example}" || true
    kubectl wait --for=delete jobs -l "${selector}" --timeout=60s >/dev/null 2>&1 || true
    if kubectl apply -f "${example}"; then
      # Give the controller a bounded chance to create the Jobs before showing them.
      deadline=$((SECONDS + 30))
      until [[ -n "$(kubectl get jobs -l "${selector}" -o name 2>/dev/null)" || ${SECONDS} -ge ${deadline} ]]; do
        sleep 1
      done
      kubectl get jobsets,jobs,pods -o wide || true
      local::log "DEMO: waiting for JobSet simple to complete (its pods finish after 10 to 20 s)"
      kubectl wait --for=condition=Completed jobset/simple --timeout=120s && kubectl get jobset simple -o wide || true
    else
      local::log "DEMO: applying ${example} failed; the cluster stays up (see ${LOG_DIR})"
    fi
  fi
fi

if [[ "${DETACH}" == 1 ]]; then
  exit 0
fi

# Foreground: keep watching the processes until Ctrl-C (or SIGTERM/SIGHUP).
stop_and_exit() {
  trap '' INT TERM HUP
  set +e
  {
    echo
    local::log "stopping the local cluster"
    local::stop_all
  } >&3 2>&4
  exit 0
}
trap stop_and_exit INT TERM HUP
echo
echo "Running in the foreground; press Ctrl-C to stop everything."
declare -A reported=()
while true; do
  for c in "${LOCAL_COMPONENTS[@]}"; do
    [[ -f "$(local::pidfile "${c}")" ]] || continue
    if ! local::pid "${c}" >/dev/null && [[ -z "${reported[${c}]:-}" ]]; then
      reported[${c}]=1
      local::log "WARNING: ${c} exited; read ${LOG_DIR}/${c}.log"
    fi
  done
  # Sleep in the background so that the trap runs at once on Ctrl-C.
  sleep 2 &
  wait $! || true
done
