#!/usr/bin/env bash
# Builds (once per version, cached) everything the local cluster runs:
# etcd, containerd, Kubernetes server binaries and kubectl, helm; and installs
# the Debian packages the node needs; `build.sh kueue` builds Kueue for its
# e2e; `build.sh kubernetes` only the Kubernetes binaries of $K8S_VERSION
# (K8S_VERSION=1.37.2 or 1.36.5 for the older minors, hack/e2e-subset.sh).
# Safe to re-run: cached parts are skipped.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

apt_deps() {
  local need=()
  for p in runc busybox-static containernetworking-plugins iptables conntrack openssl curl iproute2 bsdextrautils jq; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
  done
  [ ${#need[@]} -eq 0 ] && return
  say "installing Debian packages: ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

# wrapper_module DIR MODULE: a throwaway module to build third-party commands in.
wrapper_module() { mkdir -p "$1"; (cd "$1" && [ -f go.mod ] || printf 'module %s\ngo 1.26\n' "$2" > go.mod); }

build_etcd() {
  [ -x "$BIN_ETCD/etcd" ] && return
  local d=$CACHE/build/etcd-$ETCD_VERSION s; s=$(now)
  wrapper_module "$d" etcdwrap
  printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' > "$d/main.go"
  (cd "$d" && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" && go mod tidy && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN_ETCD/etcd" .) || die "etcd build failed"
  say "built etcd $ETCD_VERSION in $(since "$s")s"
}

build_containerd() {
  [ -x "$BIN_CTRD/containerd" ] && return
  local d=$CACHE/build/containerd-$CONTAINERD_VERSION s c; s=$(now)
  wrapper_module "$d" ctrdwrap
  printf '//go:build tools\npackage tools\n\nimport (\n\t_ "github.com/containerd/containerd/v2/cmd/containerd"\n\t_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"\n\t_ "github.com/containerd/containerd/v2/cmd/ctr"\n)\n' > "$d/tools.go"
  (cd "$d" && go get "github.com/containerd/containerd/v2@$CONTAINERD_VERSION" && go mod tidy) || die "containerd modules"
  for c in containerd-shim-runc-v2 ctr containerd; do
    (cd "$d" && CGO_ENABLED=0 go build -trimpath -tags "no_btrfs no_devmapper no_zfs" \
      -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
      -o "$BIN_CTRD/$c" "github.com/containerd/containerd/v2/cmd/$c") || die "containerd build ($c) failed"
  done
  say "built containerd $CONTAINERD_VERSION in $(since "$s")s"
}

# apiextensions_api DIR PREV: Kubernetes 1.38 moved the CustomResourceDefinition
# types and their generated clients out of k8s.io/apiextensions-apiserver into
# a new staging module, k8s.io/apiextensions-api, which the Go module proxy
# did not serve (every version refused, 2026-12-01; v0.38.0-beta.0 served
# since 2026-12-03, not used until a cold build with it has run). Its packages are the
# ones k8s.io/apiextensions-apiserver PREV (the previous minor, served)
# carried under the same names: the v1 and v1beta1 types without their
# conversions to the internal version (those stay in apiextensions-apiserver
# 1.38) and pkg/client. This assembles that module under DIR from the module
# cache, import paths moved, so kube-apiserver and kube-controller-manager
# build; docs/install.md says so. Remove once the proxy serves the module.
apiextensions_api() {
  local out=$1 prev=$2 src v f
  src=$(cd "$CACHE" && go mod download -json "k8s.io/apiextensions-apiserver@$prev" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
  [ -d "$src/pkg/apis/apiextensions/v1" ] || die "k8s.io/apiextensions-apiserver@$prev: no pkg/apis/apiextensions/v1"
  rm -rf "$out"; mkdir -p "$out/pkg/apis/apiextensions"
  for v in v1 v1beta1; do
    mkdir -p "$out/pkg/apis/apiextensions/$v"
    for f in "$src/pkg/apis/apiextensions/$v"/*.go; do
      case $(basename "$f") in *_test.go|conversion.go|zz_generated.conversion.go) continue ;; esac
      cp "$f" "$out/pkg/apis/apiextensions/$v/"
    done
    # marshal.go's one use of what conversion.go declared.
    printf 'package %s\n\nvar nullLiteral = []byte(`null`)\n' "$v" > "$out/pkg/apis/apiextensions/$v/null.go"
  done
  cp -r "$src/pkg/client" "$out/pkg/client"
  chmod -R u+w "$out"
  find "$out" -name '*_test.go' -delete
  find "$out" -name '*.go' -exec sed -i \
    -e 's#"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"#"k8s.io/apiextensions-api/pkg/apis/apiextensions/v1"#' \
    -e 's#"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"#"k8s.io/apiextensions-api/pkg/apis/apiextensions/v1beta1"#' \
    -e 's#"k8s.io/apiextensions-apiserver/pkg/client/#"k8s.io/apiextensions-api/pkg/client/#' \
    -e 's#"sigs.k8s.io/structured-merge-diff/v6/#"sigs.k8s.io/structured-merge-diff/v7/#' {} +
  printf 'module k8s.io/apiextensions-api\ngo 1.26\n' > "$out/go.mod"
}

# iptables_wrappers DIR: 1.38's kubelet imports sigs.k8s.io/iptables-wrappers
# (what was k8s.io/kubernetes/pkg/util/iptables), which the module proxy does
# not serve either. The kubelet uses it only to create the
# KUBE-IPTABLES-HINT and KUBE-FIREWALL chains "for the benefit of other
# components" (kube-proxy; pkg/kubelet/kubelet_network_linux.go), and does
# without them on hosts that have no iptables. This stand-in is such a host:
# NewBestEffort finds no iptables, so the kubelet logs "No iptables support"
# and goes on. The local cluster runs no kube-proxy, so nothing reads those
# chains; docs/install.md says so. Remove once the proxy serves the module.
iptables_wrappers() {
  local out=$1
  rm -rf "$out"; mkdir -p "$out/pkg/iptables"
  printf 'module sigs.k8s.io/iptables-wrappers\ngo 1.26\n' > "$out/go.mod"
  cat > "$out/pkg/iptables/iptables.go" <<'GO'
// Package iptables: a host without iptables, for the local cluster's kubelet
// (hack/cluster/build.sh iptables_wrappers says why).
package iptables

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
)

type (
	Chain        string
	Table        string
	RulePosition string
	Protocol     string
	Mode         int
)

const (
	TableNAT    Table        = "nat"
	TableFilter Table        = "filter"
	TableMangle Table        = "mangle"
	ChainInput  Chain        = "INPUT"
	ChainOutput Chain        = "OUTPUT"
	Prepend     RulePosition = "-I"
	Append      RulePosition = "-A"
	ProtocolIPv4 Protocol    = "IPv4"
	ProtocolIPv6 Protocol    = "IPv6"
	UseInstalledMode Mode    = 0
)

type Interface interface {
	EnsureChain(ctx context.Context, table Table, chain Chain) (bool, error)
	EnsureRule(ctx context.Context, position RulePosition, table Table, chain Chain, args ...string) (bool, error)
	IsIPv6() bool
	Protocol() Protocol
	Monitor(ctx context.Context, canary Chain, tables []Table, reloadFunc func(), interval time.Duration)
}

// NewBestEffort finds no iptables on this host.
func NewBestEffort(ctx context.Context, mode Mode) map[v1.IPFamily]Interface { return nil }
GO
}

build_kubernetes() {
  local cmds=(kubectl kube-scheduler kube-controller-manager kubelet kube-apiserver) c missing=0
  for c in "${cmds[@]}"; do [ -x "$BIN_K8S/$c" ] || missing=1; done
  [ $missing = 0 ] && return
  local d=$CACHE/build/kubernetes-v$K8S_VERSION s; s=$(now)
  mkdir -p "$d"
  (cd "$d" && go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" >/dev/null) || die "download k8s.io/kubernetes"
  local mod; mod=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v$K8S_VERSION.mod
  # k8s.io/kubernetes points its staging modules at ./staging; use the published ones.
  # The wrapper's go line is the one k8s.io/kubernetes asks for (1.26 for
  # 1.36/1.37, 1.27 for 1.38; GOTOOLCHAIN=go1.27.3 from lib.sh).
  local gover; gover=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$mod" | head -1)
  { printf 'module k8swrap\ngo %s\nrequire k8s.io/kubernetes v%s\n' "${gover:-1.26}" "$K8S_VERSION"
    # ktesting (1.38): only dependencies' tests import it, and the proxy
    # served no version of it until December 2026, so tidy -e below leaves
    # it out.
    grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging' "$mod" | grep -v -e 'k8s.io/ktesting ' -e 'k8s.io/apiextensions-api ' | awk -v v="v0.${K8S_VERSION#1.}" '{printf "replace %s => %s %s\n", $1, $1, v}'
    # 1.38 requires structured-merge-diff/v7 v7.0.1, which the module proxy
    # refused until December 2026 (go.mod now takes it); v7.0.0 builds every
    # command, and the local cluster's binaries are still built that way so
    # that a cold build is the one tested.
    ! grep -q 'sigs.k8s.io/structured-merge-diff/v7 v7.0.1' "$mod" || printf 'replace sigs.k8s.io/structured-merge-diff/v7 => sigs.k8s.io/structured-merge-diff/v7 v7.0.0\n'
    if grep -q 'k8s.io/apiextensions-api => ./staging' "$mod"; then
      local minor=${K8S_VERSION#1.}; minor=${minor%%.*}
      apiextensions_api "$d/apiextensions-api" "v0.$((minor - 1)).2"
      printf 'replace k8s.io/apiextensions-api => ./apiextensions-api\n'
    fi
    if grep -q 'sigs.k8s.io/iptables-wrappers ' "$mod"; then
      iptables_wrappers "$d/iptables-wrappers"
      printf 'replace sigs.k8s.io/iptables-wrappers => ./iptables-wrappers\n'
    fi
  } > "$d/go.mod"
  { printf '//go:build tools\npackage tools\n\nimport (\n'
    for c in "${cmds[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
    printf ')\n'; } > "$d/tools.go"
  (cd "$d" && go mod tidy -e) || die "kubernetes modules"
  local ldf; ldf=$(k8s_ldflags)
  for c in "${cmds[@]}"; do
    [ -x "$BIN_K8S/$c" ] && continue
    local cs; cs=$(now)
    (cd "$d" && go build -trimpath -ldflags "$ldf" -o "$BIN_K8S/$c" "k8s.io/kubernetes/cmd/$c") || die "build $c failed"
    say "built $c in $(since "$cs")s"
  done
  say "built Kubernetes v$K8S_VERSION in $(since "$s")s"
}

build_helm() {
  [ -x "$BIN_HELM/helm" ] && return
  local d=$CACHE/build/helm-$HELM_VERSION s; s=$(now)
  wrapper_module "$d" helmwrap
  printf '//go:build tools\npackage tools\n\nimport _ "helm.sh/helm/v3/cmd/helm"\n' > "$d/tools.go"
  (cd "$d" && go get "helm.sh/helm/v3@$HELM_VERSION" && go mod tidy && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
      -o "$BIN_HELM/helm" helm.sh/helm/v3/cmd/helm) || die "helm build failed"
  say "built helm $HELM_VERSION in $(since "$s")s"
}

# build_kueue: Kueue's manager from its own module (no replace directives,
# so go install pkg@version builds it with Kueue's go.sum, not this
# repository's go.mod), and the CRDs and webhook manifests of the same
# module zip, for hack/cluster/kueue.sh.
build_kueue() {
  [ -x "$BIN_KUEUE/kueue" ] && [ -d "$BIN_KUEUE/crd" ] && return
  local s dir; s=$(now)
  mkdir -p "$BIN_KUEUE"
  GOBIN=$BIN_KUEUE CGO_ENABLED=0 go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
    "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION" || die "kueue build failed"
  dir=$(cd "$BIN_KUEUE" && go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir/config/components/crd/bases" ] || die "sigs.k8s.io/kueue@$KUEUE_VERSION has no config/components/crd/bases"
  rm -rf "$BIN_KUEUE/crd" "$BIN_KUEUE/webhook"
  cp -r "$dir/config/components/crd/bases" "$BIN_KUEUE/crd"
  cp -r "$dir/config/components/webhook" "$BIN_KUEUE/webhook"
  chmod -R u+w "$BIN_KUEUE/crd" "$BIN_KUEUE/webhook"
  say "built kueue $KUEUE_VERSION in $(since "$s")s"
}

main() {
  local s; s=$(now)
  mkdir -p "$BIN_K8S" "$BIN_ETCD" "$BIN_CTRD" "$BIN_HELM"
  case "${1:-all}" in
    helm) build_helm ;;
    kueue) build_kueue ;;
    kubernetes) build_kubernetes ;;
    all) apt_deps; build_helm; build_etcd; build_containerd; build_kubernetes ;;
    *) die "usage: $0 [all|helm|kueue|kubernetes]" ;;
  esac
  say "cluster binaries ready in $CACHE/bin ($(since "$s")s)"
}
main "$@"
