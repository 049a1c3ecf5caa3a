#!/usr/bin/env bash
# Builds the local control plane binaries pinned in hack/versions.env into
# _output/bin/: kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, etcd, kwok and metrics-server (plus the small localtool helper);
# on request, the optional tools: keda-operator and keda-adapter, the real
# node's, and prometheus and promtool.
#
# A binary is rebuilt only when it is missing or when the pins changed. The
# pins are summarised by one hash (versions.env, the tool modules' go.mod and
# go.sum, the link flags and the Go version); each binary gets a stamp file
# _output/bin/.stamps/<name> holding the hash it was built for.
#
# Finished builds are also kept in ${JOBSET_TOOLS_CACHE}/<hash>/ (default
# ~/.cache/nativejobset/tools) and taken from there when present, so a fresh
# clone on a machine that built them before needs no compile. Set
# JOBSET_TOOLS_CACHE=off to skip the cache.
#
# Tools of the optional modules (OPTIONAL_TOOL_MODULES in hack/lib/tools.sh:
# trainer-controller-manager of hack/tools/trainer) are built only when named; each such module is hashed and cached on its own
# (${JOBSET_TOOLS_CACHE}/<module>-<hash>/), so it never invalidates the others.
#
# Usage: hack/build-tools.sh [--available] [name ...]   (default: the control plane)
# Env:   OUTPUT_BIN (default _output/bin), JOBSET_TOOLS_CACHE,
#        JOBSET_TOOLS_CACHE_KEEP (default 2), NICE (default 10)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/lib/tools.sh
source "${ROOT}/hack/lib/tools.sh"

export GOWORK=off GOFLAGS="-mod=readonly" CGO_ENABLED=0
OUT="${OUTPUT_BIN:-${ROOT}/_output/bin}"
NICE="${NICE:-10}"
CACHE_ROOT="${JOBSET_TOOLS_CACHE:-${HOME}/.cache/nativejobset/tools}"

tools::check_modules

HASH="$(tools::hash)"
CACHE=""
if [[ "${CACHE_ROOT}" != "off" ]]; then
  CACHE="${CACHE_ROOT}/${HASH}"
fi
mkdir -p "${OUT}/.stamps"

# --available: build nothing; exit 0 when every named tool is built or cached
# (so that taking it costs no compile), 1 otherwise.
available_only=0
if [[ "${1:-}" == --available ]]; then
  available_only=1
  shift
fi
wanted=("$@")
[[ ${#wanted[@]} -gt 0 ]] || wanted=("${ALL_TOOLS[@]}" localtool)

# module_of <tool>: the hack/tools/<module> that builds it, and its package.
module_of() {
  case "$1" in
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kubelet|kube-proxy) echo "kube k8s.io/kubernetes/cmd/$1" ;;
    etcd) echo "etcd go.etcd.io/etcd/server/v3" ;;
    kwok) echo "kube sigs.k8s.io/kwok/cmd/kwok" ;; # on kube's k8s.io modules: shared packages compile once
    metrics-server) echo "metrics-server sigs.k8s.io/metrics-server/cmd/metrics-server" ;;
    keda-operator) echo "keda github.com/kedacore/keda/v2/cmd/operator" ;;
    keda-adapter) echo "keda github.com/kedacore/keda/v2/cmd/adapter" ;;
    trainer-controller-manager) echo "trainer github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager" ;;
    containerd|ctr|containerd-shim-runc-v2) echo "containerd github.com/containerd/containerd/v2/cmd/$1" ;;
    bridge|loopback) echo "cni github.com/containernetworking/plugins/plugins/main/$1" ;;
    host-local) echo "cni github.com/containernetworking/plugins/plugins/ipam/host-local" ;;
    coredns) echo "coredns ." ;; # main.go: CoreDNS with the plugins the node uses
    prometheus|promtool) echo "prometheus github.com/prometheus/prometheus/cmd/$1" ;;
    localtool) echo "localtool ." ;;
    *) tools::die "unknown tool: $1 (known: ${ALL_TOOLS[*]} ${KEDA_TOOLS[*]} trainer-controller-manager ${NODE_TOOLS[*]} ${PROMETHEUS_TOOLS[*]} localtool)" ;;
  esac
}

ldflags_for() {
  case "$1" in
    kube) tools::ldflags_kube ;;
    # metrics-server reports its version through client-go's version package.
    metrics-server) echo "-s -w -X k8s.io/client-go/pkg/version.gitVersion=${METRICS_SERVER_VERSION}" ;;
    keda) echo "-s -w -X github.com/kedacore/keda/v2/version.Version=${KEDA_VERSION}" ;;
    # containerd reports its version to the kubelet over CRI.
    containerd) echo "-s -w -X github.com/containerd/containerd/v2/version.Version=${CONTAINERD_VERSION}" ;;
    coredns) echo "-s -w" ;;
    # prometheus --version and prometheus_build_info: module v0.MMP.0 is
    # Prometheus 3.MM.P.
    prometheus) echo "-s -w -X github.com/prometheus/common/version.Version=$(prometheus_release)" ;;
    *) echo "-s -w" ;;
  esac
}

# prometheus_release: the Prometheus release of PROMETHEUS_VERSION
# (v0.316.0 -> 3.16.0).
prometheus_release() {
  local v="${PROMETHEUS_VERSION#v0.}"
  echo "3.$((10#${v%%.*} - 300)).${v#*.}"
}

# hash_of <module>: the hash a module's binaries are stamped and cached with.
hash_of() {
  if tools::is_optional "$1"; then tools::module_hash "$1"; else echo "${HASH}"; fi
}

# cache_of <module>: the cache directory of a module's binaries ("" when off).
cache_of() {
  [[ -n "${CACHE}" ]] || return 0
  if tools::is_optional "$1"; then echo "${CACHE_ROOT}/$1-$(tools::module_hash "$1")"; else echo "${CACHE}"; fi
}

up_to_date() { # <tool>
  [[ -x "${OUT}/$1" && -f "${OUT}/.stamps/$1" && "$(cat "${OUT}/.stamps/$1")" == "$2" ]]
}

install_bin() { # <src> <tool> <hash>
  # Hard-link from the cache when it is on the same file system, else copy.
  rm -f "${OUT}/$2"
  ln "$1" "${OUT}/$2" 2>/dev/null || cp "$1" "${OUT}/$2"
  echo "$3" >"${OUT}/.stamps/$2"
}

# localtool is part of this repository, not pinned by versions.env: it is keyed
# by the hash of its own sources and never cached outside the checkout.
localtool_hash() {
  local f
  # Its sources, sub-packages and embedded files included.
  for f in $(cd "${ROOT}" && find hack/tools/localtool -type f \( -name '*.go' -o -name '*.yaml' -o -name go.mod \) ! -name '*_test.go' | LC_ALL=C sort); do
    echo "== ${f}"
    cat "${ROOT}/${f}"
  done | sha256sum | cut -c1-16
}

if [[ ${available_only} == 1 ]]; then
  for t in "${wanted[@]}"; do
    read -r mod _ <<<"$(module_of "${t}")"
    h="$(hash_of "${mod}")"
    [[ "${t}" == localtool ]] && h="$(localtool_hash)"
    cache="$(cache_of "${mod}")"
    up_to_date "${t}" "${h}" || [[ "${t}" != localtool && -n "${cache}" && -x "${cache}/${t}" ]] || exit 1
  done
  exit 0
fi

declare -A todo=()   # module -> "tool tool ..."
for t in "${wanted[@]}"; do
  read -r mod pkg <<<"$(module_of "${t}")"
  h="$(hash_of "${mod}")"
  [[ "${t}" == localtool ]] && h="$(localtool_hash)"
  if up_to_date "${t}" "${h}"; then
    continue
  fi
  cache="$(cache_of "${mod}")"
  if [[ -n "${cache}" && "${t}" != localtool && -x "${cache}/${t}" ]]; then
    echo "==> ${t}: from cache ${cache}"
    install_bin "${cache}/${t}" "${t}" "${h}"
    continue
  fi
  todo[${mod}]+="${t} "
done

if [[ ${#todo[@]} -eq 0 ]]; then
  echo "tools up to date in ${OUT} (${HASH})"
  exit 0
fi

for mod in "${!todo[@]}"; do
  read -r -a tools <<<"${todo[${mod}]}"
  pkgs=()
  for t in "${tools[@]}"; do
    read -r _ pkg <<<"$(module_of "${t}")"
    pkgs+=("${pkg}")
  done
  # Build into a scratch directory and move into place only on success, so an
  # interrupted build never leaves a half-written binary behind.
  tmp="$(mktemp -d "${OUT}/.build.XXXXXX")"
  trap 'rm -rf "${tmp}"' EXIT
  echo "==> building ${tools[*]} (hack/tools/${mod})"
  start=${SECONDS}
  (
    cd "${ROOT}/hack/tools/${mod}"
    same=1
    for i in "${!tools[@]}"; do
      [[ "${tools[i]}" == "${pkgs[i]##*/}" ]] || same=0
    done
    if [[ ${#pkgs[@]} -gt 1 && ${same} -eq 1 ]]; then
      # One command builds them all, each named after its package.
      nice -n "${NICE}" go build -trimpath -tags "$(tools::build_tags "${mod}")" -ldflags "$(ldflags_for "${mod}")" -o "${tmp}/" "${pkgs[@]}"
    else
      # -o names the file; the second and later builds reuse the build cache.
      for i in "${!tools[@]}"; do
        nice -n "${NICE}" go build -trimpath -tags "$(tools::build_tags "${mod}")" -ldflags "$(ldflags_for "${mod}")" -o "${tmp}/${tools[i]}" "${pkgs[i]}"
      done
    fi
  )
  echo "    done in $((SECONDS - start))s"
  for t in "${tools[@]}"; do
    [[ -x "${tmp}/${t}" ]] || tools::die "build of ${t} produced no binary"
    h="$(hash_of "${mod}")"
    cache="$(cache_of "${mod}")"
    if [[ "${t}" == localtool ]]; then
      h="$(localtool_hash)"
    elif [[ -n "${cache}" ]]; then
      mkdir -p "${cache}"
      cp "${tmp}/${t}" "${cache}/.${t}.$$"
      mv -f "${cache}/.${t}.$$" "${cache}/${t}"
    fi
    mv -f "${tmp}/${t}" "${OUT}/${t}"
    echo "${h}" >"${OUT}/.stamps/${t}"
  done
  rm -rf "${tmp}"
  trap - EXIT
done
# Keep the cache from growing without bound: only the most recently built
# JOBSET_TOOLS_CACHE_KEEP (default 2) hashes stay.
if [[ -n "${CACHE}" && -d "${CACHE_ROOT}" ]]; then
  keep="${JOBSET_TOOLS_CACHE_KEEP:-2}"
  # shellcheck disable=SC2010,SC2012 # the names are our own hex hashes
  ls -1t "${CACHE_ROOT}" | { grep -E '^[0-9a-f]{16}$' || true; } | tail -n "+$((keep + 1))" | while read -r old; do
    [[ "${old}" != "${HASH}" ]] || continue
    echo "==> removing old cache entry ${CACHE_ROOT}/${old}"
    rm -rf "${CACHE_ROOT:?}/${old}"
  done
  for mod in "${OPTIONAL_TOOL_MODULES[@]}"; do
    current="${mod}-$(tools::module_hash "${mod}")"
    # shellcheck disable=SC2010,SC2012 # the names are our own
    ls -1t "${CACHE_ROOT}" | { grep -E "^${mod}-[0-9a-f]{16}\$" || true; } | tail -n "+$((keep + 1))" | while read -r old; do
      [[ "${old}" != "${current}" ]] || continue
      echo "==> removing old cache entry ${CACHE_ROOT}/${old}"
      rm -rf "${CACHE_ROOT:?}/${old}"
    done
  done
fi
echo "tools ready in ${OUT} (${HASH})"
