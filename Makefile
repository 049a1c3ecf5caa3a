# The two commands a newcomer needs:
#   make run    a local control plane with the JobSet API, and a demo
#   make test   every check and test that CI runs
SHELL := /usr/bin/env bash
GO ?= go
BIN := _output/bin
GO_TEST_FLAGS ?= -count=1
# fieldsv1string: managedFields are held interned (one copy per distinct
# document) by k8s.io/apimachinery, which keeps jobset-apiserver's watch
# cache about 5 KB per JobSet smaller (docs/api.md, "Protobuf").
GO_BUILD_TAGS ?= fieldsv1string
# Tests and benchmarks run the product's build, tags included.
GO_TEST = $(GO) test -tags '$(GO_BUILD_TAGS)'
# Every go command run from here, and those that tests run, compiles as
# 'make build' and the images do (no cgo, -trimpath): the compiled
# dependency tree is then shared, where each other set of flags would compile
# it again (on a fresh machine, many CPU minutes). Tests find the checkout
# from their working directory (test/reporoot), as -trimpath hides the
# source paths.
export CGO_ENABLED := 0
export GOFLAGS := $(strip $(filter-out -trimpath,$(GOFLAGS)) -trimpath)
# The version stamped into the binaries (--version, jobset_build_info) and
# the images' tag: the release tag on a tagged commit, else a semver-valid
# version of the commit. Neither depends on uncommitted changes, so that
# rebuilding a commit gives the same images, and both are read once, when
# make starts, so that one run stamps one version.
ifeq ($(origin VERSION),undefined)
VERSION := $(shell git describe --tags --match 'v*' --exact-match 2>/dev/null || echo v0.0.0-$$(git rev-parse --short=12 HEAD))
endif
ifeq ($(origin COMMIT),undefined)
COMMIT := $(shell git rev-parse HEAD)
endif
VERSION_PKG := github.com/nativejobset/jobset/pkg/version
# CGO_ENABLED=0 and -trimpath as in the images, so that 'make build' and
# 'make images' share the Go build cache.
GO_BUILD_FLAGS = -trimpath -tags '$(GO_BUILD_TAGS)' -ldflags '-X $(VERSION_PKG).version=$(VERSION) -X $(VERSION_PKG).commit=$(COMMIT)'
# Where 'make push' pushes, and the platforms of 'make images'.
REGISTRY ?= ghcr.io/nativejobset
PLATFORMS ?= linux/amd64,linux/arm64
IMAGES_DIR := _output/images
# Packages of the unit tests: everything but the integration, e2e, ecosystem, faults and bench suites.
# (The promtool rule tests run in test-monitoring-rules, with their tool.)
UNIT_PKGS = $(shell $(GO) list ./... | grep -v -e /test/integration -e /test/e2e -e /test/ecosystem -e /test/faults -e /test/bench -e /test/node -e /artifacts/monitoring/tests)
# The real node's optional tools (REAL_NODE=1, make test-node).
NODE_TOOLS := containerd ctr containerd-shim-runc-v2 bridge host-local loopback coredns
# Prometheus and promtool (hack/tools/prometheus): the alert rule tests and the real node's scrape test.
PROMETHEUS_TOOLS := prometheus promtool
# REAL_NODE=1 makes 'make run' and 'make up' add the real node (and build its tools and images).
REAL_NODE_DEPS = $(if $(filter 1,$(REAL_NODE)),node-tools node-images)
# WITH_KEDA=1 makes 'make run', 'make up' and 'make tools' include KEDA.
WITH_KEDA ?= 0
export WITH_KEDA

.PHONY: all build tools run up update-tools down generate api-docs verify verify-codegen verify-api-docs verify-fmt vet verify-vuln dashboard verify-dashboard \
	test test-tools test-static-unit test-cluster-suites test-node-suites test-tools-cluster test-tools-node test-tools-trainer test-unit test-monitoring-rules test-integration test-e2e test-node node-tools node-images prometheus-tools test-migration test-faults soak test-ecosystem test-trainer test-keda keda-tools \
	fuzz bench bench-node upstream-jobset images push release test-release clean help clear-skips

all: build

help: ## Show the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

build: ## Build the binaries of cmd/ into _output/bin, stamped with VERSION and COMMIT.
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build $(GO_BUILD_FLAGS) -o $(BIN)/ ./cmd/...

images: ## OCI images of the binaries for PLATFORMS into _output/images (layouts, docker/ctr archives, images.json), no container daemon.
	cd hack/release && $(GO) run . images --root ../.. --out ../../$(IMAGES_DIR) --version $(VERSION) --commit $(COMMIT) \
		--repository $(REGISTRY) --platforms $(PLATFORMS) --tags '$(GO_BUILD_TAGS)'

push: ## Push the images of 'make images' to $(REGISTRY)/<name>:$(VERSION) (credentials from docker's config).
	cd hack/release && $(GO) run . push --images ../../$(IMAGES_DIR) --registry $(REGISTRY) --version $(VERSION)

release: images ## The release bundle for VERSION into _output/release: manifests with REGISTRY's images pinned by digest, Helm chart, image archives, SBOMs, SHA256SUMS.
	cd hack/release && $(GO) run . bundle --root ../.. --images ../../$(IMAGES_DIR) --out ../../_output/release --version $(VERSION)

test-release: release ## 'make release' of this checkout, and its SHA256SUMS checked.
	cd _output/release && sha256sum --check --quiet SHA256SUMS

tools: ## Build the local control plane (kube-*, etcd, kwok, metrics-server) into _output/bin (and Kubeflow Trainer with WITH_TRAINER=1, KEDA with WITH_KEDA=1).
	hack/build-tools.sh
	$(if $(filter 1,$(WITH_TRAINER)),hack/build-tools.sh trainer-controller-manager)
	$(if $(filter 1,$(WITH_KEDA)),hack/build-tools.sh keda-operator keda-adapter)
node-tools: ## Build the real node's tools (containerd, ctr, the runc shim, CNI plugins, CoreDNS) into _output/bin; kubelet and kube-proxy come with 'make tools'.
	hack/build-tools.sh $(NODE_TOOLS)

node-images: images ## The real node's images: the sandbox image, busybox, busybox with the in-place agent (_output/node-images).
	cd hack/release && $(GO) run . node-images --out ../../_output/node-images --images ../../$(IMAGES_DIR)

prometheus-tools: ## Build prometheus and promtool (kubernetes and static service discovery only) into _output/bin.
	hack/build-tools.sh $(PROMETHEUS_TOOLS)

keda-tools: ## Build KEDA's operator and metrics API server (keda-operator, keda-adapter) into _output/bin.
	hack/build-tools.sh keda-operator keda-adapter

run: build tools $(REAL_NODE_DEPS) ## Start the local cluster with the JobSet API and run a demo (Ctrl-C stops it; REAL_NODE=1 adds a real node, as root).
	SKIP_BUILD=1 DEMO=1 hack/local-up.sh

up: build tools $(REAL_NODE_DEPS) ## Start the local cluster in the background (then: source _output/local/env; REAL_NODE=1 adds a real node, as root).
	SKIP_BUILD=1 hack/local-up.sh --detach

update-tools: ## Rewrite hack/tools/*/go.mod after editing hack/versions.env.
	hack/tools/update-modules.sh

down: ## Stop a local cluster started with 'make run' or hack/local-up.sh --detach.
	hack/local-down.sh

generate: ## Regenerate deepcopy, defaults, conversion, OpenAPI, clientset, listers, informers, apply configurations, the API reference.
	hack/update-codegen.sh
	$(MAKE) api-docs

api-docs: ## Write docs/reference/api.md from the Go types of pkg/apis/jobset/v1alpha2.
	$(GO) run -tags '$(GO_BUILD_TAGS)' ./hack/apidocs -out docs/reference/api.md

verify: verify-codegen verify-api-docs verify-fmt vet verify-vuln verify-dashboard ## Generated code and API reference up to date, gofmt clean, go vet clean, no known vulnerable symbol reachable, dashboard JSON up to date.

verify-codegen:
	hack/verify-codegen.sh

verify-api-docs:
	$(GO) run -tags '$(GO_BUILD_TAGS)' ./hack/apidocs -check docs/reference/api.md

verify-fmt:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

DASHBOARD_FILES = --out ../../artifacts/monitoring/dashboard.json --docs ../../docs/operations/dashboard.md
dashboard: ## Regenerate the Grafana dashboard artifacts/monitoring/dashboard.json and its panel reference (docs/operations/dashboard.md) from hack/dashboard.
	cd hack/dashboard && $(GO) run . $(DASHBOARD_FILES)

verify-dashboard: ## The committed dashboard JSON and panel reference are what hack/dashboard generates.
	cd hack/dashboard && $(GO) run . --check $(DASHBOARD_FILES)

verify-vuln: ## govulncheck on ./cmd/... against an offline database (VULNDB_VERSION in hack/versions.env); exceptions in hack/vuln-allowlist.txt.
	GO=$(GO) GO_BUILD_TAGS='$(GO_BUILD_TAGS)' hack/verify-vuln.sh

vet:
	$(GO) vet -tags '$(GO_BUILD_TAGS)' ./...
	cd test/migration && $(GO) vet ./...
	cd hack/release && $(GO) vet ./...
	cd hack/dashboard && $(GO) vet -tags '$(GO_BUILD_TAGS)' ./...

# 'make test' builds the product, then runs a pipeline of four steps, run
# by make with -j2 so that both cores stay busy on a fresh machine (where
# building the tools costs about 40 CPU minutes):
#   test-tools-cluster   the product and the local cluster's tools, niced, in
#                        the background (log: _output/test-tools.log)
#   test-static-unit     the static checks and unit tests, beside it
#   test-cluster-suites  the suites that need only the cluster's tools: they
#                        start as soon as both steps above are done
#   test-node-suites     the suites of the real node, the images and promtool,
#                        whose tools (test-tools-node, niced, log:
#                        _output/test-tools-node.log) build while the cluster
#                        suites run.
# Each suite still runs alone (-j1): they start clusters of their own.
CLUSTER_SUITES := test-integration test-e2e test-migration test-faults test-ecosystem
NODE_SUITES := test-monitoring-rules test-release test-node
TEST_SUITES := $(CLUSTER_SUITES) $(NODE_SUITES)

test: clear-skips ## Everything CI runs.
	@mkdir -p _output
	@# The product first, on both cores: the k8s.io packages it compiles
	@# (api, client-go, apiserver) are the ones the tools and the unit tests
	@# build on, and two go commands started together would each compile them.
	@$(MAKE) --no-print-directory build
	@echo "building the tools in the background (logs: _output/test-tools.log, _output/test-tools-node.log)"
	@$(MAKE) --no-print-directory -j2 test-node-suites

test-static-unit:
	@$(MAKE) --no-print-directory -j1 verify test-unit

test-cluster-suites: test-static-unit test-tools-cluster
	@echo "the cluster's tools are built"
	@$(MAKE) --no-print-directory -j1 $(CLUSTER_SUITES)

test-node-suites: test-cluster-suites test-tools-node
	@echo "the real node's tools are built"
	@$(MAKE) --no-print-directory -j1 $(NODE_SUITES)

# tools_step <target> <log>: a niced build step of 'make test', quiet unless it fails.
tools_step = nice -n 10 $(MAKE) --no-print-directory -j1 $(1) >$(2) 2>&1 || \
	{ echo "$(1) failed; the end of $(2):" >&2; tail -n 40 $(2) >&2; exit 1; }

test-tools-cluster:
	@$(call tools_step,build tools test-tools-trainer,_output/test-tools.log)

test-tools-node: test-tools-cluster
	@$(call tools_step,node-tools node-images prometheus-tools,_output/test-tools-node.log)

test-tools-trainer:
	hack/build-tools.sh trainer-controller-manager

# Everything the suites of 'make test' run, built or taken from the cache.
test-tools: build tools test-tools-trainer node-tools node-images prometheus-tools

clear-skips:
	@rm -f _output/skipped-suites

test-unit: ## Unit tests, including the fuzz targets' seed corpora.
	$(GO_TEST) $(GO_TEST_FLAGS) $(UNIT_PKGS)
	cd hack/tools/localtool && $(GO_TEST) $(GO_TEST_FLAGS) ./...
	# The image tests build four binaries for two platforms: long on a cold cache.
	cd hack/release && $(GO_TEST) $(GO_TEST_FLAGS) -timeout 30m ./...
	cd hack/dashboard && $(GO_TEST) $(GO_TEST_FLAGS) ./...

test-monitoring-rules: prometheus-tools ## promtool on artifacts/monitoring: check rules and config, and the rule unit tests (every alert firing and not).
	PROMTOOL=$(CURDIR)/$(BIN)/promtool $(GO_TEST) $(GO_TEST_FLAGS) -v ./artifacts/monitoring/tests/

test-integration: ## The real API server on a real (embedded) etcd, in process (and the pinned kubectl).
	hack/build-tools.sh kubectl
	KUBECTL=$(CURDIR)/$(BIN)/kubectl $(GO_TEST) $(GO_TEST_FLAGS) -timeout 20m ./test/integration/...

test-e2e: build tools ## The local cluster, driven with kubectl and client-go.
	$(GO_TEST) $(GO_TEST_FLAGS) -timeout 40m -parallel 4 -v ./test/e2e/... 2>&1 | tee _output/e2e.log | grep --line-buffered -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go'; exit $${PIPESTATUS[0]}

test-node: build tools node-tools node-images prometheus-tools ## A real node (containerd, runc, CNI, kubelet, kube-proxy, CoreDNS; needs root): the product installed in-cluster from its images, real pods, scraped by a real Prometheus.
	$(GO_TEST) $(GO_TEST_FLAGS) -timeout 30m -v ./test/node/... 2>&1 | tee _output/node.log | grep --line-buffered -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go'; exit $${PIPESTATUS[0]}

test-migration: build tools ## Migration from upstream's CRD with jobset-migrate, on a local cluster of its own (module test/migration).
	cd test/migration && $(GO_TEST) $(GO_TEST_FLAGS) -timeout 20m -v . 2>&1 | tee ../../_output/migration.log | grep --line-buffered -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go'; exit $${PIPESTATUS[0]}

test-faults: build tools ## Kills under load on a cluster of its own (2 API servers, 2 controllers), and the 60-second soak.
	$(GO_TEST) $(GO_TEST_FLAGS) -timeout 30m -v ./test/faults/... 2>&1 | tee _output/faults.log | grep --line-buffered -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go'; exit $${PIPESTATUS[0]}

SOAK_DURATION ?= 10m

soak: build tools ## The soak for SOAK_DURATION (default 10m); its figures go to _output/faults/soak-report.md.
	SOAK_DURATION=$(SOAK_DURATION) $(GO_TEST) $(GO_TEST_FLAGS) -run '^TestSoak$$' -timeout 60m -v ./test/faults/... 2>&1 | tee _output/soak.log | grep --line-buffered -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go|^ +[-|#]'; exit $${PIPESTATUS[0]}

test-ecosystem: test-trainer ## Tools of the ecosystem against the JobSet API, each on a local cluster of its own (KEDA's suite needs KEDA built or cached, or SKIP_KEDA=1).
	@if hack/build-tools.sh --available keda-operator keda-adapter; then \
		$(MAKE) test-keda; \
	elif [[ "$(SKIP_KEDA)" == 1 ]]; then \
		mkdir -p _output && echo "keda (SKIP_KEDA=1: KEDA is neither built nor cached; 'make test-keda' builds it and runs the suite)" >>_output/skipped-suites; \
		echo "test-ecosystem: SKIPPED the KEDA suite (SKIP_KEDA=1)"; \
	else \
		echo "test-ecosystem: KEDA is neither built nor cached. Run 'make keda-tools' first (a long build), or skip its suite explicitly with SKIP_KEDA=1." >&2; \
		exit 1; \
	fi

test-trainer: build tools ## Kubeflow Trainer (built from hack/tools/trainer) creating JobSets by server-side apply.
	hack/build-tools.sh trainer-controller-manager
	$(GO_TEST) $(GO_TEST_FLAGS) -timeout 20m -v ./test/ecosystem/trainer/... 2>&1 | tee _output/trainer.log | grep --line-buffered -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go'; exit $${PIPESTATUS[0]}

test-keda: build tools keda-tools ## KEDA scaling a replicatedJob (test/ecosystem/keda, WITH_KEDA=1 cluster on ports 21400+).
	$(GO_TEST) $(GO_TEST_FLAGS) -timeout 20m -v ./test/ecosystem/keda/... 2>&1 | tee _output/keda.log | grep --line-buffered -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go'; exit $${PIPESTATUS[0]}

# Every fuzz target and its package; 'make fuzz' runs each for FUZZTIME.
FUZZ_TARGETS = FuzzValidateJobSet:./pkg/apis/jobset/validation/ FuzzJobSetUpdate:./pkg/registry/jobset/ \
	FuzzScale:./pkg/registry/replicatedjob/ FuzzDecodeJobSet:./pkg/apiserver/
FUZZTIME ?= 60s

fuzz: ## Run every fuzz target for FUZZTIME each (default 60s); findings land in the package's testdata/fuzz.
	@for t in $(FUZZ_TARGETS); do \
		echo "== $${t%%:*} ($(FUZZTIME))"; \
		$(GO_TEST) -run '^$$' -fuzz "^$${t%%:*}$$" -fuzztime $(FUZZTIME) "$${t#*:}" || exit 1; \
	done

bench: upstream-jobset ## Benchmarks (not part of 'make test'); figures go to test/bench/README.md. The real node's are 'make bench-node'.
	$(GO_TEST) -run '^$$' -bench . -benchmem -timeout 60m $$($(GO) list ./test/bench/... | grep -v /test/bench/node)

# Upstream JobSet's controller manager, the anchor of test/bench/anchor,
# built from its module (test/bench/upstream, a module of its own).
upstream-jobset: ## Build upstream JobSet's controller manager (sigs.k8s.io/jobset, pinned in test/bench/upstream) into _output/bin/jobset-upstream-manager.
	@mkdir -p $(BIN)
	cd test/bench/upstream && GOWORK=off CGO_ENABLED=0 $(GO) build -trimpath -o ../../../$(BIN)/jobset-upstream-manager sigs.k8s.io/jobset

bench-node: build tools node-tools node-images ## Restarts on the real node (root): in place against Recreate, and Recreate with workloads that ignore SIGTERM.
	$(GO_TEST) -run '^$$' -bench . -benchtime 3x -timeout 60m -v ./test/bench/node/ 2>&1 | tee _output/bench-node.log | grep -E '^(Benchmark|---|PASS|FAIL|ok)|round|_test.go'

clean: ## Remove build output (binaries, local cluster state).
	rm -rf _output
