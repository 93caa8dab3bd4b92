#!/usr/bin/env bash
# Prepare/unprepare against a real kube-apiserver, over the kubelet's gRPC
# API: BenchmarkPrepareAPI (cmd/gpu-kubelet-plugin) runs the plugin with its
# shipped defaults on simulated GPUs, at concurrency 1 and 8, N cycles each.
# Cluster, first that answers: $KUBECONFIG_BENCH; the local cluster
# (make cluster-up); else etcd + kube-apiserver started here from the
# cluster cache (hack/cluster/build.sh builds them) and stopped afterwards;
# BENCH_OWN_APISERVER=1 skips the local cluster.
# Usage: hack/bench-api.sh [go test flags...]   Env: N (300), COUNT (1),
# BENCH_PLUGIN_FLAGS (extra plugin flags, e.g. "--kube-api-qps=1000").
set -euo pipefail
source "$(dirname "$0")/cluster/lib.sh"
REPO=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-300} COUNT=${COUNT:-1}
export CGO_CFLAGS=${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}

if [ -z "${KUBECONFIG_BENCH:-}" ] && [ -z "${BENCH_OWN_APISERVER:-}" ] && kubectl --kubeconfig "$KUBECONFIG_PATH" get --raw /readyz >/dev/null 2>&1; then
  KUBECONFIG_BENCH=$KUBECONFIG_PATH
fi
if [ -z "${KUBECONFIG_BENCH:-}" ]; then
  for c in etcd kube-apiserver; do
    command -v "$c" >/dev/null || die "$c is not built and no cluster answers; run hack/cluster/build.sh all (or make cluster-up)"
  done
  work=$(mktemp -d /tmp/gdra-bench-api.XXXX)
  pids=()
  trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
  # Ports apart from the local cluster's (2379/2380/6443).
  etcd_port=${BENCH_ETCD_PORT:-22379} api_port=${BENCH_API_PORT:-16443}
  openssl genrsa -out "$work/sa.key" 2048 2>/dev/null
  openssl rsa -in "$work/sa.key" -pubout -out "$work/sa.pub" 2>/dev/null
  token=$(openssl rand -hex 16)
  echo "$token,bench-admin,bench-admin,system:masters" >"$work/tokens.csv"
  say "starting etcd and kube-apiserver in $work"
  # Like the plugin's node, etcd does not fsync: its disk writes would land
  # on the plugin's own fsyncs (the apiserver's work is what is measured).
  etcd --data-dir "$work/etcd" --listen-client-urls "http://127.0.0.1:$etcd_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_port" --listen-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
    --initial-cluster "default=http://127.0.0.1:$((etcd_port + 1))" \
    --unsafe-no-fsync --log-level warn >"$work/etcd.log" 2>&1 &
  pids+=($!)
  kube-apiserver --etcd-servers "http://127.0.0.1:$etcd_port" --bind-address 127.0.0.1 \
    --secure-port "$api_port" --cert-dir "$work/certs" --token-auth-file "$work/tokens.csv" \
    --authorization-mode RBAC --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$work/sa.pub" --service-account-signing-key-file "$work/sa.key" \
    --service-cluster-ip-range 10.0.0.0/24 --endpoint-reconciler-type none >"$work/apiserver.log" 2>&1 &
  pids+=($!)
  KUBECONFIG_BENCH=$work/kubeconfig
  kubectl config --kubeconfig "$KUBECONFIG_BENCH" set-cluster bench --server "https://127.0.0.1:$api_port" --insecure-skip-tls-verify >/dev/null
  kubectl config --kubeconfig "$KUBECONFIG_BENCH" set-credentials admin --token "$token" >/dev/null
  kubectl config --kubeconfig "$KUBECONFIG_BENCH" set-context bench --cluster bench --user admin >/dev/null
  kubectl config --kubeconfig "$KUBECONFIG_BENCH" use-context bench >/dev/null
  for _ in $(seq 1 120); do
    kubectl --kubeconfig "$KUBECONFIG_BENCH" get --raw /readyz >/dev/null 2>&1 && break
    sleep 0.5
  done
  kubectl --kubeconfig "$KUBECONFIG_BENCH" get --raw /readyz >/dev/null || { tail -20 "$work/apiserver.log"; die "kube-apiserver did not become ready"; }
  # The default namespace appears shortly after readiness.
  for _ in $(seq 1 60); do kubectl --kubeconfig "$KUBECONFIG_BENCH" get ns default >/dev/null 2>&1 && break; sleep 0.5; done
fi
say "cluster: $KUBECONFIG_BENCH; $N cycles per concurrency, $COUNT run(s)"
cd "$REPO"
KUBECONFIG_BENCH=$KUBECONFIG_BENCH go test -tags grpcnotrace -run '^$' -bench '^BenchmarkPrepareAPI$' \
  -benchtime "${N}x" -count "$COUNT" "$@" ./cmd/gpu-kubelet-plugin/
