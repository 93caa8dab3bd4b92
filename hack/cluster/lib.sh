# Shared settings of the local-cluster tooling. Sourced, not run.
# Everything built is cached outside the repository, keyed by version, so a
# second run (or a later CI run on the same machine) reuses it.
# The default cluster: the newest Kubernetes minor (1.38, a pre-release until
# its GA on 2026-12-16; hack/e2e-subset.sh runs the 1.37 and 1.36 subsets).
K8S_VERSION=${K8S_VERSION:-1.38.0-beta.0}
# Kubernetes 1.38's modules need Go 1.27; a fresh machine has Go 1.26, and the
# go command fetches this approved toolchain from the module proxy.
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}
ETCD_VERSION=${ETCD_VERSION:-v3.7.3}
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
# Kueue, for the Kueue e2e only (hack/cluster/kueue.sh): its DRA quota
# (resources.deviceClassMappings, Kueue's own feature gate
# DynamicResourceAllocation, not the Kubernetes gate 1.38 removes)
# counts the devices of resource.k8s.io/v1 claim templates per class
# (v0.17.0, pkg/dra/claims.go countDevicesPerClass).
KUEUE_VERSION=${KUEUE_VERSION:-v0.17.0}

CACHE=${GPU_DRA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-dra-driver}
BIN_K8S=$CACHE/bin/kubernetes-v$K8S_VERSION
BIN_ETCD=$CACHE/bin/etcd-$ETCD_VERSION
BIN_CTRD=$CACHE/bin/containerd-$CONTAINERD_VERSION
BIN_HELM=$CACHE/bin/helm-$HELM_VERSION
BIN_KUEUE=$CACHE/bin/kueue-$KUEUE_VERSION
CLUSTER=${GPU_DRA_CLUSTER_DIR:-$CACHE/cluster}
KUBECONFIG_PATH=$CLUSTER/kubeconfig
PKI=$CLUSTER/pki
LOGS=$CLUSTER/logs
PIDS=$CLUSTER/pids
CTRD_SOCK=$CLUSTER/run/containerd/containerd.sock
# Unix socket paths are limited to 108 bytes; the plugin sockets live
# under the kubelet root, so it sits on a short host path.
KUBELET_DIR=${GPU_DRA_KUBELET_DIR:-/var/lib/gdra-kubelet}
NODE=$(hostname)
# NODES=2 (or more) adds GPU nodes gdra-node2, ... to the local cluster,
# each with its own kubelet and containerd on this host (nodes.sh); deploy.sh
# simulates EXTRA_NODE_PROFILE on them. Two is the default: production
# clusters have more than one GPU node, and per-node pools, daemon pods,
# node-bound tokens and fleet views are tested across real nodes; NODES=1
# gives the one-node cluster. (hack/bench-scale.sh's NODES, node counts of
# its own simulated control plane, never reaches cluster.sh.)
NODES=${NODES:-2}
node_name() { echo "gdra-node$1"; }
node_ip() { echo "10.89.0.$1"; }
node_dir() { echo "$CLUSTER/nodes/gdra-node$1"; }
node_ctrd_sock() { echo "$(node_dir "$1")/containerd.sock"; }

export PATH=$BIN_K8S:$BIN_ETCD:$BIN_CTRD:$BIN_HELM:/usr/local/go/bin:$PATH

say() { echo "[$(date +%T)] $*"; }
die() { echo "[$(date +%T)] ERROR: $*" >&2; exit 1; }

# apt_private APTDIR CMD ARGS... runs an apt command against the sources
# list APTDIR/sources.list, with lists and cache under APTDIR: nothing of
# the host's apt configuration is read or written, and a fresh machine's
# stale package lists do not matter (hack/nvidia-userspace.sh,
# hack/prometheus.sh).
apt_private() {
  local dir=$1 cmd=$2; shift 2
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/preferences.d"
  [ -f "$dir/preferences" ] || : > "$dir/preferences"
  local opts=(
    -o "Dir::Etc::sourcelist=$dir/sources.list" -o Dir::Etc::sourceparts=-
    -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache"
    -o "Dir::Etc::preferencesparts=$dir/preferences.d" -o "Dir::Etc::preferences=$dir/preferences"
    -o APT::Get::List-Cleanup=0 -o Acquire::Languages=none
  )
  # Downloading into a root-owned directory as root: no _apt sandbox.
  [ "$(id -u)" = 0 ] && opts+=(-o APT::Sandbox::User=root)
  "$cmd" -qq "${opts[@]}" "$@"
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

# k8s_ldflags prints the -ldflags that stamp a Kubernetes binary built from
# the k8s.io/kubernetes module with $K8S_VERSION (what --version and the
# apiserver's /version report).
k8s_ldflags() {
  local ldf="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=${K8S_VERSION%%.*} -X $p.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2) -X $p.gitTreeState=clean"
  done
  echo "$ldf"
}

# allocator_series prints the names of hack/allocator's patches in the order
# they apply (hack/allocator/series, without its comments).
ALLOCATOR_SERIES=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/allocator/series
allocator_series() { grep -v -e '^#' -e '^$' "$ALLOCATOR_SERIES"; }

# need_built dies unless every named binary of the cluster cache is built.
need_built() {
  local c
  for c; do command -v "$c" >/dev/null || die "$c is not built; run hack/cluster/build.sh all"; done
}

# bench_gates prints the --feature-gates of a benchmark's own control plane
# for GATES: default (Kubernetes' own defaults, what a production cluster
# runs; every gate this driver needs is on in 1.37), cluster (the local
# cluster's DRA_GATES, every alpha DRA gate on too) or an explicit list.
bench_gates() {
  case ${GATES:-default} in
    default) echo "" ;;
    cluster) (source <(grep '^DRA_GATES=' "$(dirname "${BASH_SOURCE[0]}")/cluster.sh"); echo "$DRA_GATES") ;;
    *) echo "$GATES" ;;
  esac
}

# lock_cluster serializes scripts that use the one local cluster of this
# machine (demo, e2e, chaos): a second run waits until the first exits.
lock_cluster() {
  exec 9>"${TMPDIR:-/tmp}/gdra-cluster.lock"
  flock 9
}

# debs PKG... prints the paths of Debian packages in $CACHE/debs, fetched
# once with the host's apt (apt-get download: no install, no dependencies),
# or with package lists of its own where the host's are out of date.
debs() {
  local d=$CACHE/debs p f
  mkdir -p "$d"
  for p; do
    f=$(find "$d" -maxdepth 1 -name "${p}_*.deb" | sort | tail -1)
    if [ -z "$f" ]; then
      if ! (cd "$d" && apt-get download -qq -o APT::Sandbox::User=root "$p" >/dev/null 2>&1); then
        # A fresh machine's package lists can name a version the archive
        # no longer has: fetch with lists of our own (apt_private).
        if [ ! -f "$d/apt/sources.list" ]; then
          mkdir -p "$d/apt"
          printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
            "${GDRA_DEBIAN_URI:-http://deb.debian.org/debian}" bookworm \
            "${GDRA_DEBIAN_URI:-http://deb.debian.org/debian}" bookworm-updates \
            "${GDRA_DEBIAN_SECURITY_URI:-http://deb.debian.org/debian-security}" bookworm-security > "$d/apt/sources.list"
          apt_private "$d/apt" apt-get update || die "apt-get update (private configuration in $d/apt) failed"
        fi
        (cd "$d" && apt_private "$d/apt" apt-get download "$p" >/dev/null 2>&1) || die "apt-get download $p failed"
      fi
      f=$(find "$d" -maxdepth 1 -name "${p}_*.deb" | sort | tail -1)
    fi
    echo "$f"
  done
}
