# gpu-dra-driver: build, test and lint. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
# go.mod says Go 1.27 (Kubernetes 1.38's modules need it); a fresh machine has
# Go 1.26, and the go command fetches this approved toolchain from the module
# proxy (about 76 MB, once). hack/cluster/lib.sh sets the same for scripts.
export GOTOOLCHAIN ?= go1.27.3
BIN_DIR ?= bin
# go-nvml's headers mark some NVML calls deprecated; the warnings are noise.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
export CGO_ENABLED ?= 1
# grpcnotrace keeps golang.org/x/net/trace (and with it html/template's
# reflect-driven method calls) out of the binaries. With it in, the linker must
# keep every exported method of every type: +22 MB binary, +11 MiB idle RSS.
GO_TAGS ?= grpcnotrace
# The version every binary reports (--version, pkg/version): VERSION if
# given, else hack/version.sh's (git describe, or v<appVersion>-dev).
VERSION ?= $(shell hack/version.sh version)
VERSION_LDFLAGS = $(shell hack/version.sh ldflags $(VERSION))

.PHONY: help build release kubectl-gpu-dist build-arm64 arm64-check gpu-smoke test fuzz chaos-local test-race lint bench bench-packing test-k8s137 allocator-tests allocator-patches bench-webhook bench-startup bench-api bench-scale bench-explain demo demo-offline print-slices e2e chaos cluster-up cluster-down image chart-lint clean

help: ## Show targets
	@grep -E '^[a-z0-9-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

# nvidia-cdi-hook from the nvidia-container-toolkit version go.mod pins: the
# plugin installs it on the host and names it in CDI specs.
NVIDIA_CDI_HOOK := github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook

build: ## Build the plugin, the admission webhook, the kubectl plugin kubectl-gpu, the gpudra development CLI, the static nvidia-smi stand-in and nvidia-cdi-hook into bin/
	$(GO) build -tags $(GO_TAGS) -ldflags "$(VERSION_LDFLAGS)" -o $(BIN_DIR)/gpu-kubelet-plugin ./cmd/gpu-kubelet-plugin
	$(GO) build -tags $(GO_TAGS) -ldflags "$(VERSION_LDFLAGS)" -o $(BIN_DIR)/gpudra ./cmd/gpudra
	# The kubectl plugin `kubectl gpu` for operators (usage, capacity, diagnose),
	# without the node side or cgo (cmd/kubectl-gpu/deps_test.go): static, like
	# kubectl; rm: once a link to gpudra.
	rm -f $(BIN_DIR)/kubectl-gpu
	CGO_ENABLED=0 $(GO) build -tags $(GO_TAGS) -ldflags "$(VERSION_LDFLAGS)" -o $(BIN_DIR)/kubectl-gpu ./cmd/kubectl-gpu
	$(GO) build -tags $(GO_TAGS) -ldflags "$(VERSION_LDFLAGS)" -o $(BIN_DIR)/gpu-dra-webhook ./cmd/gpu-dra-webhook
	CGO_ENABLED=0 $(GO) build -tags $(GO_TAGS) -o $(BIN_DIR)/nvidia-smi-sim ./cmd/nvidia-smi-sim
	GOBIN=$(abspath $(BIN_DIR)) $(GO) install -trimpath -ldflags "-s -w" $(NVIDIA_CDI_HOOK)@$$($(GO) list -m -f '{{.Version}}' github.com/NVIDIA/nvidia-container-toolkit)

# kubectl-gpu for the laptops operators run kubectl on, without cgo (no C
# cross compiler needed): bin/kubectl-gpu-OS-ARCH[.exe], stripped as the image's.
KUBECTL_GPU_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
kubectl-gpu-dist: ## Cross-build the kubectl plugin kubectl-gpu (CGO_ENABLED=0) for KUBECTL_GPU_PLATFORMS into bin/
	for p in $(KUBECTL_GPU_PLATFORMS); do os=$${p%/*} arch=$${p#*/} ext=; [ $$os != windows ] || ext=.exe; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -tags $(GO_TAGS) -trimpath -ldflags "-s -w $(VERSION_LDFLAGS)" \
			-o $(BIN_DIR)/kubectl-gpu-$$os-$$arch$$ext ./cmd/kubectl-gpu || exit 1; done

# The same binaries for linux/arm64 (Grace: GH200, GB200), cgo through Debian's
# cross compiler; nothing is cached in the repository. docs/install.md, "arm64".
build-arm64: ## Cross-build every shipped binary for linux/arm64 into bin/linux-arm64/ (apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
	BIN_DIR=$(BIN_DIR) GO=$(GO) GO_TAGS=$(GO_TAGS) hack/build-arch.sh arm64

# About 25 s with a warm build cache, 3 min cold on 2 cores; .ci/run runs it.
arm64-check: ## arm64 binaries under qemu-user-static as amd64: slices (gh200x1, h100x8), offline demo, nvidia-cdi-hook, NVML wait on arm64 R535
	BIN_DIR=$(BIN_DIR) GO=$(GO) GO_TAGS=$(GO_TAGS) hack/arm64-check.sh

# GDRA_NVIDIA_HOST_ROOT: the pinned R535 userspace (host layout) that
# hack/nvidia-userspace.sh unpacks into the cache; test/nvidia checks every
# NVML entry point the binaries call against its libnvidia-ml.so.
# hack/prometheus.sh unpacks Debian's prometheus (promtool) into the cache;
# test/prometheus checks and tests the chart's alert rules with it.
# hack/gpu-operator-chart.sh fetches NVIDIA's GPU Operator (Go module proxy);
# test/chart renders its chart next to ours.
test: ## Run all unit and plugin tests under the race detector (no GPU, no cluster needed)
	hack/cluster/build.sh helm
	root=$$(hack/nvidia-userspace.sh --print-root host) && prom=$$(hack/prometheus.sh) && op=$$(hack/gpu-operator-chart.sh) && \
		GDRA_NVIDIA_HOST_ROOT=$$root GDRA_PROMETHEUS_BIN=$$prom GDRA_GPU_OPERATOR_DIR=$$op $(GO) test -race -count=1 -timeout 30m ./...

# Fuzz targets as package:FuzzName pairs; add yours on a line of its own.
# Their seed corpora (testdata/fuzz/<FuzzName>) also run as plain tests in `make test`.
FUZZ_TARGETS += \
	./api/resource/v1beta1:FuzzDecodeConfig \
	./pkg/checkpoint:FuzzOpen \
	./pkg/cdi:FuzzClaimSpec \
	./pkg/checkpoint:FuzzSpecAnnotations \
	./pkg/driver:FuzzRecover
FUZZTIME ?= 20s

fuzz: ## Run each fuzz target in FUZZ_TARGETS for FUZZTIME (default 20s)
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t#*:} in $${t%%:*} for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) "$${t%%:*}"; \
	done

CHAOS_LOCAL_ROUNDS ?= 100

chaos-local: ## SIGKILL a plugin process at random points of prepare and unprepare, CHAOS_LOCAL_ROUNDS rounds (2 kills each), no cluster
	set -o pipefail; GDRA_CHAOS_ROUNDS=$(CHAOS_LOCAL_ROUNDS) $(GO) test -count=1 -timeout 60m -run '^TestChaosKillsDuringPrepareAndUnprepare$$' -v ./pkg/driver/ 2>&1 | grep -E '^(=== RUN|--- |\s+chaos_test|PASS|FAIL|ok)'

test-race: test ## Kept for old habits: make test runs under the race detector

STATICCHECK_VERSION ?= v0.8.2
# errcheck v1.9.0 and v1.20.0 fail on Go 1.27's export data ("package without types");
# v1.30.0 reads it, and also flags discarded receives of error values.
ERRCHECK_VERSION ?= v1.30.0

lint: ## gofmt, license headers, go vet, staticcheck, errcheck (e2e code included), go mod tidy and host reads through pkg/capfile
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@out=$$(git ls-files '*.go' | xargs grep -L 'SPDX-License-Identifier: Apache-2.0'); if [ -n "$$out" ]; then echo "license header missing (see any .go file):"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./test/e2e/
	$(GO) vet -tags e2e,chaos ./test/e2e/
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	$(GO) run github.com/kisielk/errcheck@$(ERRCHECK_VERSION) -ignoretests -exclude hack/errcheck-excludes.txt ./...
	# -e: modules that only dependencies' tests import have been refused by the
	# proxy before (k8s.io/ktesting until December 2026); -diff still fails on a drift.
	$(GO) mod tidy -e -diff
	$(GO) test -count=1 ./hack/hostreads/

bench: ## Prepare/unprepare benchmarks over the kubelet socket, then the MIG packing benchmark
	$(GO) test -run '^$$' -bench PrepareUnprepare -benchtime 2s -count 5 ./pkg/driver/
	$(MAKE) bench-packing

# Which Kubernetes minor's scheduler allocator the allocator-level targets build
# with: 1.38 (what go.mod links) or 1.37 (internal/allocator/k8s137.go, against
# the module file hack/allocator/k8s137.sh derives from go.mod; module proxy only).
K8S_ALLOCATOR ?= 1.38
ALLOCATOR_GOFLAGS = $(if $(filter 1.37,$(K8S_ALLOCATOR)),-modfile=$$(hack/allocator/k8s137.sh) -tags k8s137$(comma)$(GO_TAGS),$(if $(filter 1.38,$(K8S_ALLOCATOR)),-tags $(GO_TAGS),$(error K8S_ALLOCATOR=$(K8S_ALLOCATOR): want 1.37 or 1.38)))
comma := ,

# make test holds every layout of every model to 1.37's count, published order
# (internal/migpacking); this prints both orders and the worst layouts.
bench-packing: ## MIG packing: arrival orders of every MIG layout allocated pod by pod through the scheduler's allocator (K8S_ALLOCATOR=1.38|1.37), NVML's ascending order vs the published one
	$(GO) run $(ALLOCATOR_GOFLAGS) ./cmd/gpudra mig-packing --order both

# The allocator-level tests (the MIG packing floors, the packages whose tests
# run claims through internal/schedtest or pkg/clusterview) on 1.37's allocator,
# the same tests make test runs on 1.38's. About 2 min on 2 shared cores, warm.
ALLOCATOR_TEST_PKGS ?= ./internal/allocator/ ./internal/migpacking/ ./internal/schedtest/ ./pkg/resourceslices/ ./pkg/clusterview/ \
	./pkg/fleetview/ ./pkg/pendingexplainer/ ./pkg/diagnose/ ./test/scale/
test-k8s137: ## The allocator-level tests (MIG packing floors, schedtest and clusterview users) on Kubernetes 1.37's allocator (module proxy only)
	$(MAKE) --no-print-directory K8S_ALLOCATOR=1.37 allocator-tests

allocator-tests: ## The allocator-level tests on K8S_ALLOCATOR (1.38: go.mod's, 1.37)
	$(GO) test $(ALLOCATOR_GOFLAGS) -count=1 -timeout 20m $(ALLOCATOR_TEST_PKGS)

bench-webhook: ## Admission webhook handler: one review of a template with four configs (ns/op)
	$(GO) test -run '^$$' -bench HandlerFourConfigs -benchtime 2s -count 5 ./pkg/webhook/

bench-startup: ## Time to published slices and idle RSS against the local cluster (make cluster-up first)
	hack/bench-startup.sh h100x8

bench-api: ## Prepare/unprepare p50/p99 and cycles/s against a real kube-apiserver (local cluster, or etcd + apiserver from the cluster cache)
	hack/bench-api.sh

# Not in .ci/run: needs NVIDIA's plugin and NVML mock built under PEER (/tmp/peer) as
# ../shared/tools/peer-nvd/README.md says. Env: PAIRS (5), CYCLES (300), CONC (1), QPS (1000), REV, OURS.
.PHONY: bench-peer
bench-peer: ## Prepare p50/p99 and cycles/s of this plugin and NVIDIA's reference plugin under prepbench (real etcd + kube-apiserver) in interleaved pairs, ratios per pair, medians, load average, commits
	hack/bench-peer.sh

allocator-patches: ## Apply hack/allocator/series to the v1.37 allocator (a module-cache copy) and run its own tests (this project's allocation tests too when go.mod links that version)
	TESTS_ONLY=1 hack/bench-allocator-patch.sh

# Not in .ci/run: about 25 min on 2 shared cores (REPEATS=2). Env: NODES, LAYOUTS, MODES, REPEATS, PODS_PER_NODE, OUT, SCHEDULER.
bench-scale: ## Scheduler pods/s, CPU per pod and create-to-bind p50/p99 over 100 and 500 kubelet-less nodes with the plugin's slices at fill levels 0/50/90% (own etcd/apiserver/scheduler)
	hack/bench-scale.sh

bench-explain: ## Pending explainer (Event latency, webhook CPU/RSS) and gpudra diagnose over 100 and 500 dynamic-MIG nodes (own etcd/apiserver/scheduler)
	hack/bench-explain.sh

demo: ## Build, start a local Kubernetes 1.38 cluster, install the chart with simulated GPUs, run demo/specs
	hack/demo.sh

demo-offline: build ## Same story without a cluster: the plugin, the scheduler's allocator and CDI in one process
	$(BIN_DIR)/gpudra demo --simulate h100x8 --nvidia-smi-stub $(BIN_DIR)/nvidia-smi-sim

e2e: ## End-to-end tests on the local cluster (built and started as needed, stopped after)
	hack/e2e.sh

.PHONY: e2e-oldest e2e-1.37
e2e-oldest: ## The e2e subset on the oldest Kubernetes the chart admits (1.36.5, built and cached like 1.38), every gate at its default
	hack/e2e-subset.sh 1.36.5

e2e-1.37: ## The e2e subset on Kubernetes 1.37.2 (built and cached like 1.38), every gate at its default
	hack/e2e-subset.sh 1.37.2

# CHAOS_ROUNDS from the environment or the command line (make chaos CHAOS_ROUNDS=10); 3 when unset.
chaos: ## Churn-and-kill on the local cluster: claim mix, plugin SIGKILLed in prepare and unprepare, nothing left after
	hack/chaos.sh

cluster-up: ## Build (cached) and start the local cluster; prints the kubeconfig path
	hack/cluster/build.sh all
	hack/cluster/cluster.sh up

cluster-down: ## Stop the local cluster and clean the host paths it used
	hack/cluster/cluster.sh down

# IMAGE_PLATFORMS=linux/amd64 builds the single-platform tarball the local
# cluster imports (hack/cluster/deploy.sh does that itself); hack/image-check.sh
# checks the tarball.
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64

# RELEASE_URL: where the archives will be downloaded from (the krew
# manifest's URIs); DIST: another directory than dist/. docs/releasing.md.
release: ## Every artifact of release VERSION=vX.Y.Z into dist/: multi-arch image archive, chart + index.yaml, kubectl-gpu archives + krew plugin.yaml, SBOMs, SHA256SUMS, notes
	@case "$(origin VERSION)" in "command line"|environment) ;; *) echo "make release VERSION=vX.Y.Z (the version of CHANGELOG.md's entry and the chart's appVersion)" >&2; exit 2 ;; esac
	VERSION=$(VERSION) hack/release.sh

image: ## Build the driver image tarball (OCI layout: an index with linux/amd64 and linux/arm64) without a registry
	hack/cluster/images.sh driver $(CURDIR) dev $(IMAGE_PLATFORMS)

chart-lint: ## helm lint the chart (helm is built into the cache)
	hack/cluster/build.sh helm
	. hack/cluster/lib.sh && helm lint deployments/helm/gpu-dra-driver && helm lint deployments/helm/gpu-dra-driver --set simulate.profile=h100x8

gpu-smoke: build ## Read-only check of a real GPU host, no cluster: slices vs nvidia-smi, one GPU prepared via real nvcdi, a CUDA kernel in a runc container from its CDI spec
	hack/gpu-smoke.sh

print-slices: build ## Print the ResourceSlices a simulated 8x H100 node publishes
	$(BIN_DIR)/gpu-kubelet-plugin --simulate h100x8 --node-name demo-node --print-slices

clean: ## Remove build output
	rm -rf $(BIN_DIR)
