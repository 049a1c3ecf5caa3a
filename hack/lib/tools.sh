#!/usr/bin/env bash
# Shared helpers for hack/build-tools.sh and hack/tools/update-modules.sh.
# Source it; it defines variables and functions only.
# shellcheck disable=SC2034 # variables for the scripts that source this file

TOOLS_LIB_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# shellcheck source=hack/versions.env
source "${TOOLS_LIB_ROOT}/hack/versions.env"

# `go` directive written into the generated tool modules.
TOOLS_GO_DIRECTIVE="1.26.0"

# Binaries built from k8s.io/kubernetes/cmd/<name>.
KUBE_TOOLS=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy)
# Every binary hack/build-tools.sh produces.
ALL_TOOLS=("${KUBE_TOOLS[@]}" etcd kwok metrics-server)
# Tool modules (directories under hack/tools/) whose go.mod/go.sum pin the
# builds. kwok is built in kube's, on the same k8s.io modules.
TOOL_MODULES=(kube etcd metrics-server)
# Optional tool modules: built only when one of their tools is named on the
# command line. Each has a hash and a cache entry of its own, so adding or
# bumping one never rebuilds the control plane above.
OPTIONAL_TOOL_MODULES=(keda trainer containerd cni coredns prometheus)
# The pins of hack/versions.env that decide the control plane binaries; the
# optional modules' pins are left out of tools::hash.
CORE_PINS=(KUBERNETES_VERSION KUBE_STAGING_VERSION ETCD_VERSION KWOK_VERSION METRICS_SERVER_VERSION)
# Binaries of the KEDA module.
KEDA_TOOLS=(keda-operator keda-adapter)
# Binaries of the real node's modules (containerd, cni, coredns).
NODE_TOOLS=(containerd ctr containerd-shim-runc-v2 bridge host-local loopback coredns)
# Binaries of the Prometheus module.
PROMETHEUS_TOOLS=(prometheus promtool)

tools::die() {
  echo "error: $*" >&2
  exit 1
}

# tools::required_version <go.mod> <module>: the version <module> is required at
# (ignoring replace lines).
tools::required_version() {
  awk -v m="$2" '
    $0 ~ /=>/ { next }
    $1 == "require" && $2 == m { print $3; exit }
    $1 == m { print $2; exit }
  ' "$1"
}

# tools::check_modules: fail unless the committed tool modules pin exactly the
# versions in hack/versions.env.
tools::check_modules() {
  local dir="${TOOLS_LIB_ROOT}/hack/tools" bad=0 got m
  check() { # <module dir> <module> <want>
    got="$(tools::required_version "${dir}/$1/go.mod" "$2" 2>/dev/null || true)"
    if [[ "${got}" != "$3" ]]; then
      echo "hack/tools/$1/go.mod requires $2 ${got:-<nothing>}, hack/versions.env says $3" >&2
      bad=1
    fi
  }
  check kube k8s.io/kubernetes "${KUBERNETES_VERSION}"
  check etcd go.etcd.io/etcd/server/v3 "${ETCD_VERSION}"
  check kube sigs.k8s.io/kwok "${KWOK_VERSION}"
  check metrics-server sigs.k8s.io/metrics-server "${METRICS_SERVER_VERSION}"
  check keda github.com/kedacore/keda/v2 "${KEDA_VERSION}"
  check trainer github.com/kubeflow/trainer/v2 "${TRAINER_VERSION}"
  check containerd github.com/containerd/containerd/v2 "${CONTAINERD_VERSION}"
  check cni github.com/containernetworking/plugins "${CNI_PLUGINS_VERSION}"
  check coredns github.com/coredns/coredns "${COREDNS_VERSION}"
  check prometheus github.com/prometheus/prometheus "${PROMETHEUS_VERSION}"
  # Every staging replacement must point at KUBE_STAGING_VERSION.
  m="$(awk -v v="${KUBE_STAGING_VERSION}" '$2 == "=>" && $1 ~ /^k8s\.io\// && $4 != v {print $1 " " $4}' "${dir}/kube/go.mod")"
  if [[ -n "${m}" ]]; then
    echo "hack/tools/kube/go.mod replaces staging modules with versions other than ${KUBE_STAGING_VERSION}:" >&2
    echo "${m}" >&2
    bad=1
  fi
  # For the modules both require, the kube module needs at least the
  # product's versions (update-modules.sh aligns them): otherwise the k8s.io
  # packages both use compile twice on a fresh machine.
  m="$(tools::behind_product "${dir}/kube/go.mod")"
  if [[ -n "${m}" ]]; then
    echo "hack/tools/kube/go.mod requires older versions than the product's go.mod:" >&2
    echo "${m}" >&2
    bad=1
  fi
  if [[ ${bad} -ne 0 ]]; then
    tools::die "tool modules are out of date; run hack/tools/update-modules.sh"
  fi
}

# tools::requirements <go.mod>: its requirements, "module version" per
# line, sorted (replacements left out).
tools::requirements() {
  awk '$0 ~ /=>/ {next}
    $1 == "require" && NF >= 3 && $2 != "(" {print $2, $3; next}
    /^\t[^ ]+ v/ {print $1, $2}' "$1" | LC_ALL=C sort
}

# tools::differences_with_product <go.mod>: the modules that <go.mod> and
# the product's go.mod both require at different versions, one
# "module tool-version product-version" line each.
tools::differences_with_product() {
  LC_ALL=C join <(tools::requirements "$1") <(tools::requirements "${TOOLS_LIB_ROOT}/go.mod") | awk '$2 != $3'
}

# tools::behind_product <go.mod>: those of the differences where the
# product's version is the newer.
tools::behind_product() {
  local m v pv
  while read -r m v pv; do
    [[ "$(printf '%s\n%s\n' "${v}" "${pv}" | sort -V | tail -n1)" == "${pv}" ]] && echo "${m} ${v} ${pv}"
  done < <(tools::differences_with_product "$1")
  return 0
}

# tools::hash: hash of everything that decides what the tool binaries are: the
# pinned versions, the tool modules, the build script and the Go toolchain.
tools::hash() {
  local dir="${TOOLS_LIB_ROOT}/hack" m
  {
    # Only the core pins count, one NAME=value line each.
    for m in "${CORE_PINS[@]}"; do
      echo "${m}=${!m}"
    done
    for m in "${TOOL_MODULES[@]}"; do
      echo "== ${m}"
      cat "${dir}/tools/${m}/go.mod" "${dir}/tools/${m}/go.sum"
    done
    echo "== build"
    tools::ldflags_kube
    echo "tags: $(tools::build_tags kube)"
    go env GOVERSION GOOS GOARCH
  } | sha256sum | cut -c1-16
}

# tools::is_optional <module>: whether <module> is one of OPTIONAL_TOOL_MODULES.
tools::is_optional() {
  local m
  for m in "${OPTIONAL_TOOL_MODULES[@]}"; do
    [[ "${m}" != "$1" ]] || return 0
  done
  return 1
}

# tools::build_tags <module>: the Go build tags of a module's binaries.
tools::build_tags() {
  case "$1" in
    # Prometheus without the service discovery plugins that the shipped
    # scrape config does not use: only kubernetes_sd_configs and
    # static_configs (file and http SD are always in). netgo as upstream's
    # release builds.
    prometheus) echo "netgo remove_all_sd enable_kubernetes_sd" ;;
    # The kube binaries and kwok with the product's build tags (the
    # Makefile's GO_BUILD_TAGS): fieldsv1string changes k8s.io/apimachinery's
    # meta/v1, which every k8s.io package imports, so only with the same tags
    # do the k8s.io packages the product also uses (api, client-go,
    # apiserver) compile once for both.
    kube) sed -n 's/^GO_BUILD_TAGS ?= *//p' "${TOOLS_LIB_ROOT}/Makefile" ;;
    *) echo "" ;;
  esac
}

# tools::module_hash <module>: hash of what decides an optional module's
# binaries: its go.mod/go.sum, its own Go files (coredns has a main.go), its
# build tags and the Go toolchain.
tools::module_hash() {
  local dir="${TOOLS_LIB_ROOT}/hack/tools/$1" f tags
  tags="$(tools::build_tags "$1")"
  {
    cat "${dir}/go.mod" "${dir}/go.sum"
    for f in "${dir}"/*.go; do
      [[ -e "${f}" ]] && cat "${f}"
    done
    # Only a module with tags hashes them, so the others keep their hashes.
    [[ -z "${tags}" ]] || echo "tags: ${tags}"
    go env GOVERSION GOOS GOARCH
  } | sha256sum | cut -c1-16
}

# tools::ldflags_kube: version stamps for the kube binaries. Clients that parse
# the server version (kubectl, client-go discovery, kwok) reject the default
# "v0.0.0-master+$Format:%H$" placeholder.
tools::ldflags_kube() {
  local major minor pkg flags=""
  major="${KUBERNETES_VERSION#v}"; major="${major%%.*}"
  minor="${KUBERNETES_VERSION#v*.}"; minor="${minor%%.*}"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X ${pkg}.gitVersion=${KUBERNETES_VERSION}"
    flags+=" -X ${pkg}.gitMajor=${major}"
    flags+=" -X ${pkg}.gitMinor=${minor}"
    flags+=" -X ${pkg}.gitTreeState=clean"
  done
  echo "-s -w${flags}"
}
