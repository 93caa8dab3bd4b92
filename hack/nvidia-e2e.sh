#!/usr/bin/env bash
# Runs NVIDIA's own Ginkgo e2e suite (test/e2e of
# kubernetes-sigs/dra-driver-nvidia-gpu: 8 specs, install, CEL by product,
# driver version and memory, sharing, negative, consumable shares unlimited
# and memory) against this driver on the local cluster, installed with
# docs/examples/consumable-shares.yaml over the chart's defaults: the
# configuration equivalent to the one NVIDIA's CI runs the suite in
# (hack/ci/gcp-nvkind/install-dra-driver.sh: featureGates.ConsumableShares=true,
# consumableShares=unlimited). docs/install.md, "NVIDIA's e2e suite".
#
# Not part of CI: the suite's source is NVIDIA's and is not vendored or
# copied here. Give a checkout of NVIDIA's repository as NVD_SRC (nothing in
# it is written), or let the script clone NVD_REPO at NVD_REF. The suite is
# built from a copy under $CACHE/nvidia-e2e, patched there as the comments
# below say; CI holds the same behaviours in this project's own tests
# (docs/install.md lists them).
#
#   NVD_SRC=~/src/dra-driver-nvidia-gpu hack/nvidia-e2e.sh
#
# KEEP_CLUSTER=1 leaves the cluster up, with the default deploy
# (hack/cluster/deploy.sh h100x8) restored unless KEEP_DEPLOY=1 (then the
# consumable-shares chart stays). GINKGO_FOCUS=<regexp> runs
# the matching specs only. The run passes only when every spec ran and
# passed: a skipped spec (e.g. consumable shares not published) fails it.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
source hack/cluster/lib.sh
VALUES=${VALUES:-$REPO/docs/examples/consumable-shares.yaml}
NVD_REPO=${NVD_REPO:-https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu}
# The commit the patches below were written against.
NVD_REF=${NVD_REF:-95932046}
WORK=$CACHE/nvidia-e2e
mkdir -p "$WORK"

# 1. NVIDIA's source: what the suite's package needs (go.mod, go.sum, the
# vendor tree where the checkout has one, test/e2e), copied so that the
# patches never touch the checkout.
if [ -z "${NVD_SRC:-}" ]; then
  NVD_SRC=$WORK/checkout
  if [ ! -d "$NVD_SRC/.git" ]; then
    git clone --quiet "$NVD_REPO" "$NVD_SRC" || die "cannot clone $NVD_REPO; give a checkout as NVD_SRC"
  fi
  git -C "$NVD_SRC" checkout --quiet "$NVD_REF"
fi
[ -f "$NVD_SRC/test/e2e/suite_test.go" ] || die "$NVD_SRC has no test/e2e/suite_test.go: not a checkout of $NVD_REPO"
src=$WORK/src
rm -rf "$src"; mkdir -p "$src/test"
cp "$NVD_SRC/go.mod" "$NVD_SRC/go.sum" "$src/"
cp -r "$NVD_SRC/test/e2e" "$src/test/"
[ -d "$NVD_SRC/vendor" ] && cp -r "$NVD_SRC/vendor" "$src/"

# 2. Patches, on the copy's spec templates only (the Go code runs as
# NVIDIA wrote it). Each is checked: a template that no longer has what a
# patch changes stops the run, rather than running unpatched.
specs=$src/test/e2e/framework/specs
patch_specs() { # DESCRIPTION SED-EXPRESSION GREP-PATTERN-THAT-MUST-BE-GONE
  local f
  sed -i "$2" "$specs"/*.tmpl
  for f in "$specs"/*.tmpl; do
    ! grep -qE "$3" "$f" || die "patch '$1' left $(basename "$f") with: $(grep -E "$3" "$f" | head -1)"
  done
}
# 2a. Images. The specs run ubuntu:22.04 and nvcr.io/nvidia/cuda:12.2.0-base-ubuntu22.04;
# the local cluster reaches no registry, so they run the busybox image
# cluster.sh imports into containerd (IfNotPresent: the :latest tag would
# default to Always, a pull). Neither image brings anything the specs use
# but a shell: nvidia-smi comes from the claim's CDI spec, as on NVIDIA's
# CI (here the simulator's nvidia-smi, which prints the `-L` listing the
# specs ask for; the specs assert nothing about its output except, in
# [sharing], its exit status).
patch_specs "images" \
  's|^\( *\)image: .*$|\1image: localhost/busybox:latest\n\1imagePullPolicy: IfNotPresent|' \
  'image: (ubuntu|nvcr\.io)'
# 2b. Shell. The specs' commands run under bash; busybox has no bash. What
# they run (nvidia-smi, trap, a background sleep and wait, &&) is POSIX sh.
patch_specs "shell" 's|command: \["bash",|command: ["sh",|' '"bash"'
# 2c. Install: none to patch. The suite installs nothing: it expects a
# driver on the cluster (NVIDIA's CI installs its chart first). This script
# installs this chart with $VALUES instead (step 4).

# 3. Build the suite's test binary: with the checkout's vendor tree when it
# has one (NVIDIA's pins, no download), else through the Go module proxy.
mod=-mod=vendor; [ -f "$src/vendor/modules.txt" ] || mod=-mod=mod
s=$(now)
(cd "$src" && CGO_ENABLED=0 go test -c -tags e2e "$mod" -o "$WORK/nvidia-e2e.test" ./test/e2e)
say "NVIDIA's suite ($NVD_SRC, $(git -C "$NVD_SRC" rev-parse --short HEAD 2>/dev/null || echo "no git")) built in $(since "$s")s"

# 4. The cluster, and this chart with the consumable-shares values.
lock_cluster
export KUBECONFIG=$KUBECONFIG_PATH CONTAINERD_ADDRESS=$CTRD_SOCK
hack/cluster/build.sh all
hack/cluster/cluster.sh up
restore() {
  set +e
  # The suite deletes its namespaces without waiting; their claims are
  # released by this chart's plugin before the default deploy replaces the
  # shares (a share left allocated would sit on a GPU published whole).
  kubectl get namespaces -o name | grep '^namespace/gpu-e2e-' | xargs -r kubectl delete --wait=true --timeout=180s >/dev/null
  if [ "${KEEP_CLUSTER:-}" != 1 ]; then
    hack/cluster/cluster.sh down
  elif [ "${KEEP_DEPLOY:-}" != 1 ]; then
    hack/cluster/deploy.sh h100x8 >/dev/null && say "default deploy restored"
  fi
}
trap restore EXIT
VALUES=$VALUES hack/cluster/deploy.sh h100x8

# 5a. The GPU the suite will read: DetectGPU takes the first device of the
# first gpu.nvidia.com slice the API lists (by name, so on two nodes it
# depends on the node names; on a host named "vm", gdra-node2 comes first).
# Its [cel/productName] spec turns each '-' of that device's productName
# into ' ' but matches the attribute with its dashes, so it cannot pass on a
# GPU whose NVML name has one (A100-SXM4-80GB, gdra-node2's model), with any
# driver: TestNVIDIAE2ESuiteProductPatternOnDashedNames, docs/install.md.
detected=$(kubectl get resourceslices -o go-template='{{range .items}}{{if and (eq .spec.driver "gpu.nvidia.com") .spec.devices}}{{with index .spec.devices 0}}{{with .attributes.productName}}{{.string}}{{end}}{{end}}|{{.spec.nodeName}}{{"\n"}}{{end}}{{end}}' | head -1)
say "the suite will read ${detected%%|*} on ${detected##*|}"
case ${detected%%|*} in
  *-*) say "NOTE: '${detected%%|*}' has a '-': NVIDIA's [cel/productName] spec cannot match it (its pattern turns '-' into ' '); expect that spec to fail, whichever driver runs" ;;
esac

# 5. Run it. kubectl (on PATH from lib.sh) and KUBECONFIG are what it needs.
# ARTIFACTS gets the JUnit report.
ARTIFACTS=${ARTIFACTS:-$WORK/artifacts}; mkdir -p "$ARTIFACTS"
out=$ARTIFACTS/ginkgo.log
set +e
(cd "$src/test/e2e" && "$WORK/nvidia-e2e.test" -test.v -test.timeout 30m -ginkgo.v -ginkgo.no-color \
  -ginkgo.junit-report="$ARTIFACTS/junit_nvidia_e2e.xml" ${GINKGO_FOCUS:+-ginkgo.focus="$GINKGO_FOCUS"}) 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
set -e
summary=$(grep -E '^(SUCCESS|FAIL)! -- ' "$out" | tail -1)
say "Ginkgo: $(grep -E '^Ran [0-9]+ of [0-9]+ Specs' "$out" | tail -1); ${summary:-no summary}"
[ "$rc" = 0 ] || exit "$rc"
grep -qE ' 0 Skipped' <<<"$summary" || die "a spec was skipped: $summary"
