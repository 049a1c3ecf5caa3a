#!/usr/bin/env bash
# Takes the pictures of docs/operations/prometheus.md: Prometheus' own query
# page (graph tab) for a few key queries, over the data that the real-node
# suite's TestPrometheusScrapesTheInstall leaves in _output/node/prometheus.
# Run that test first, e.g.
#   make test-node GO_TEST_FLAGS='-count=1 -run TestPrometheusScrapesTheInstall'
#
# The pinned Prometheus is built from its Go module, which carries no web UI
# (upstream embeds the assets of an npm build in its release binaries). The
# first run therefore builds the UI of the same module's web/ui with pnpm from
# the npm registry into _output/prometheus-ui (a few minutes); Prometheus
# serves it from disk when started in a directory named "prometheus" that
# holds web/ui/static. Then it starts prometheus on 127.0.0.1 over a copy of
# the test's data, with no scrape jobs, and has headless Chromium (Debian's
# chromium) screenshot the page into docs/images/.
#
# Usage: hack/prometheus-screenshots.sh [data dir]   (default _output/node/prometheus)
# Needs: _output/bin/prometheus (make prometheus-tools), node and npm, chromium.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/lib/tools.sh
source "${ROOT}/hack/lib/tools.sh"

SRC="${1:-${ROOT}/_output/node/prometheus}"
PROMETHEUS="${ROOT}/_output/bin/prometheus"
UI_HOME="${ROOT}/_output/prometheus-ui/prometheus"
OUT="${ROOT}/docs/images"
PNPM="pnpm@10.34.9"

[[ -d "${SRC}/data" ]] || tools::die "no Prometheus data in ${SRC}/data: run TestPrometheusScrapesTheInstall first"
[[ -x "${PROMETHEUS}" ]] || tools::die "no ${PROMETHEUS}: run 'make prometheus-tools'"
command -v chromium >/dev/null || tools::die "chromium is needed (apt-get install chromium)"

build_ui() {
  command -v npx >/dev/null || tools::die "node and npm are needed to build Prometheus' web UI"
  local mod
  mod="$(cd "${ROOT}/hack/tools/prometheus" && GOWORK=off go mod download -json "github.com/prometheus/prometheus@${PROMETHEUS_VERSION}" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')"
  [[ -d "${mod}/web/ui" ]] || tools::die "could not download github.com/prometheus/prometheus@${PROMETHEUS_VERSION}"
  rm -rf "${UI_HOME}"
  mkdir -p "${UI_HOME}/web"
  cp -r "${mod}/web/ui" "${UI_HOME}/web/"
  chmod -R u+w "${UI_HOME}"
  (
    cd "${UI_HOME}/web/ui"
    # Not every @mantine release the upstream lock names is on the registry;
    # 9.6.1 of all of them is. Without the lock, the release-age gate of the
    # workspace would refuse what the resolution picks, so it goes too.
    sed -i -E 's/"(@mantine\/[a-z-]+)": "\^9\.[0-9]+\.[0-9]+"/"\1": "9.6.1"/' mantine-ui/package.json
    sed -i '/^# Wait three days/,$d' pnpm-workspace.yaml
    rm -f pnpm-lock.yaml
    npx -y "${PNPM}" install --no-frozen-lockfile
    npx -y "${PNPM}" --filter @prometheus-io/lezer-promql run build
    npx -y "${PNPM}" --filter @prometheus-io/codemirror-promql run build
    # vite only: the type check (tsc) is upstream's business.
    (cd mantine-ui && npx vite build)
    mkdir -p static
    rm -rf static/mantine-ui
    mv mantine-ui/dist static/mantine-ui
  )
}

[[ -f "${UI_HOME}/web/ui/static/mantine-ui/index.html" ]] || build_ui

work="$(mktemp -d)"
pid=""
cleanup() {
  [[ -z "${pid}" ]] || { kill "${pid}" 2>/dev/null || true; wait "${pid}" 2>/dev/null || true; }
  rm -rf "${work}"
}
trap cleanup EXIT
# A copy, so the test's data stays as the test left it.
cp -r "${SRC}/data" "${work}/data"
cp "${SRC}/jobset.rules.yaml" "${work}/"
printf 'global: {evaluation_interval: 2s}\nrule_files: [%s/jobset.rules.yaml]\n' "${work}" >"${work}/prometheus.yml"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
(cd "${UI_HOME}" && exec "${PROMETHEUS}" --config.file="${work}/prometheus.yml" --storage.tsdb.path="${work}/data" \
  --web.listen-address="127.0.0.1:${port}" >"${work}/prometheus.log" 2>&1) &
pid=$!
base="http://127.0.0.1:${port}"
for _ in $(seq 1 120); do
  curl -fsS "${base}/-/ready" >/dev/null 2>&1 && break
  kill -0 "${pid}" 2>/dev/null || { cat "${work}/prometheus.log" >&2; tools::die "prometheus exited"; }
  sleep 0.5
done
curl -fsS "${base}/-/ready" >/dev/null || tools::die "prometheus not ready"

# The window of the test's data: its head block's last sample.
max_ms="$(curl -fsS "${base}/api/v1/status/tsdb" | sed -n 's/.*"maxTime":\([0-9]*\).*/\1/p')"
[[ -n "${max_ms}" ]] || tools::die "no data in ${SRC}"
end="$(date -u -d "@$(( max_ms / 1000 + 5 ))" '+%Y-%m-%d %H:%M:%S')"

urlencode() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }

# shot <name> <range> <expr> ...: one picture of the query page with a graph
# panel per expression.
shot() {
  local name="$1" range="$2" q="" i=0 e
  shift 2
  for e in "$@"; do
    q+="&g${i}.expr=$(urlencode "${e}")&g${i}.tab=graph&g${i}.range_input=${range}&g${i}.end_input=$(urlencode "${end}")&g${i}.show_tree=0&g${i}.display_mode=lines"
    i=$((i + 1))
  done
  mkdir -p "${OUT}"
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="${work}/chromium-${name}" --hide-scrollbars \
    --virtual-time-budget=15000 --window-size=1280,$((140 + 880 * i)) \
    --screenshot="${OUT}/${name}.png" "${base}/query?${q#&}" 2>"${work}/chromium-${name}.log" ||
    { cat "${work}/chromium-${name}.log" >&2; tools::die "chromium failed"; }
  echo "wrote ${OUT}/${name}.png"
}

shot prometheus-interruption 1m \
  'jobset_interruption_seconds{jobset="recovering"}' \
  'jobset_uptime_seconds{jobset="recovering"}'
shot prometheus-targets-and-restarts 1m \
  'up{job=~"jobset-.*"}' \
  'sum by (reason) (jobset_restarts_total)'
