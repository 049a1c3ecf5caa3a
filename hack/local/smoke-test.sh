#!/usr/bin/env bash
# Smoke test of a running local cluster (hack/local-up.sh --detach): the kwok
# nodes, the pod stages of hack/local/kwok/stages.yaml, metrics-server and,
# when it runs, the JobSet APIService. Uses the manifests in
# hack/local/examples in a scratch namespace, which it deletes afterwards
# (KEEP=1 keeps it).
#
# Usage: hack/local/smoke-test.sh        Env: LOCAL_DIR, TIMEOUT [90], KEEP [0]
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
LOCAL_DIR="$(cd "${LOCAL_DIR:-${ROOT}/_output/local}" 2>/dev/null && pwd)" || LOCAL_DIR="${LOCAL_DIR:-${ROOT}/_output/local}"
BIN_DIR="${BIN_DIR:-${ROOT}/_output/bin}"
ADMIN_KUBECONFIG="${LOCAL_DIR}/kubeconfig"
if [[ ! -f "${LOCAL_DIR}/env" ]]; then
  echo "error: no running cluster in ${LOCAL_DIR} (start it with hack/local-up.sh --detach)" >&2
  exit 1
fi
# shellcheck disable=SC1091
source "${LOCAL_DIR}/env"

TIMEOUT="${TIMEOUT:-90}"
NS=kwok-smoke
EX="${ROOT}/hack/local/examples"
k() { "${BIN_DIR}/kubectl" --kubeconfig "${ADMIN_KUBECONFIG}" --cache-dir "${LOCAL_DIR}/cache/kubectl" "$@"; }

passed=0
failed=0
check() { # <description> <command...>
  local what="$1"
  shift
  if "$@"; then
    echo "PASS: ${what}"
    passed=$((passed + 1))
  else
    echo "FAIL: ${what}"
    failed=$((failed + 1))
  fi
}

# eventually <command...>: retry every second until it succeeds or TIMEOUT passes.
eventually() {
  local deadline=$((SECONDS + TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    [[ ${SECONDS} -lt ${deadline} ]] || { "$@"; return 1; }
    sleep 1
  done
}

k delete namespace "${NS}" --ignore-not-found --wait=true --timeout=60s >/dev/null
k create namespace "${NS}" >/dev/null
eventually k -n "${NS}" get serviceaccount default

nodes_ready() {
  local want have
  want="$(k get nodes -l type=kwok --no-headers | wc -l)"
  have="$(k get nodes -l type=kwok -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)"
  [[ ${want} -gt 0 && ${want} == "${have}" ]]
}
check "kwok nodes are Ready" nodes_ready
k get nodes -L topology.kubernetes.io/zone,topology.jobset.x-k8s.io/rack,cloud.google.com/gke-nodepool

k -n "${NS}" apply -f "${EX}/deployment.yaml" -f "${EX}/job-complete.yaml" -f "${EX}/job-fail.yaml" \
  -f "${EX}/pod-fail.yaml" -f "${EX}/pod-usage.yaml" >/dev/null

check "Deployment rolls out on kwok nodes" k -n "${NS}" rollout status deployment/kwok-demo --timeout="${TIMEOUT}s"
on_kwok_nodes() {
  local nodes
  nodes="$(k -n "${NS}" get pods -l app=kwok-demo -o jsonpath='{range .items[*]}{.status.phase}/{.spec.nodeName}{"\n"}{end}')"
  echo "${nodes}"
  [[ -n "${nodes}" ]] && ! grep -qv '^Running/kwok-node-' <<<"${nodes}"
}
check "Deployment pods are Running on kwok-node-*" on_kwok_nodes

check "Job with pod-complete annotation completes" k -n "${NS}" wait --for=condition=Complete job/kwok-complete --timeout="${TIMEOUT}s"
check "Job with pod-fail label fails (podFailurePolicy on exit code 42)" \
  k -n "${NS}" wait --for=condition=Failed job/kwok-fail --timeout="${TIMEOUT}s"
job_exit_code() {
  [[ "$(k -n "${NS}" get pods -l job-name=kwok-fail -o jsonpath='{.items[0].status.containerStatuses[0].state.terminated.exitCode}')" == 42 ]]
}
check "failed Job pod reports exit code 42" job_exit_code

check "pod with pod-fail label goes Failed" \
  k -n "${NS}" wait --for=jsonpath='{.status.phase}'=Failed pod/kwok-fail --timeout="${TIMEOUT}s"
pod_exit_code() {
  local code reason
  code="$(k -n "${NS}" get pod kwok-fail -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}')"
  reason="$(k -n "${NS}" get pod kwok-fail -o jsonpath='{.status.containerStatuses[0].state.terminated.reason}')"
  echo "exit code ${code}, reason ${reason}"
  [[ "${code}" == 3 && "${reason}" == Crashed ]]
}
check "failed pod reports exit code 3 and reason Crashed" pod_exit_code

# Pods without the completion annotation must still be running.
still_running() {
  [[ "$(k -n "${NS}" get pod kwok-usage -o jsonpath='{.status.phase}')" == Running ]] &&
    [[ "$(k -n "${NS}" get pods -l app=kwok-demo --field-selector=status.phase=Running --no-headers | wc -l)" == 3 ]]
}
check "pods without the completion annotation keep running" still_running

top_pod() {
  local out cpu
  out="$(k -n "${NS}" top pod kwok-usage --no-headers 2>&1)" || return 1
  cpu="$(awk '{print $2}' <<<"${out}")"
  # Usage is 750m; allow for the rate computed over two scrapes.
  [[ "${cpu}" =~ ^([0-9]+)m$ ]] && [[ ${BASH_REMATCH[1]} -ge 700 && ${BASH_REMATCH[1]} -le 800 ]]
}
check "kubectl top pod reports the annotated CPU usage" eventually top_pod
k -n "${NS}" top pod kwok-usage || true
top_nodes() {
  local want have
  want="$(k get nodes -l type=kwok --no-headers | wc -l)"
  have="$(k top nodes -l type=kwok --no-headers 2>/dev/null | wc -l)"
  [[ ${want} -gt 0 && ${want} == "${have}" ]]
}
check "kubectl top nodes reports every kwok node" eventually top_nodes
k top nodes -l type=kwok || true

if [[ "${WITH_JOBSET:-0}" == 1 ]]; then
  jobset_available() {
    [[ "$(k get apiservice v1alpha2.jobset.x-k8s.io -o jsonpath='{.status.conditions[?(@.type=="Available")].status}')" == True ]]
  }
  check "APIService v1alpha2.jobset.x-k8s.io is Available" jobset_available
  k get apiservice v1alpha2.jobset.x-k8s.io
fi

if [[ "${KEEP:-0}" != 1 ]]; then
  k delete namespace "${NS}" --wait=false >/dev/null
fi
echo "${passed} passed, ${failed} failed"
[[ ${failed} == 0 ]]
