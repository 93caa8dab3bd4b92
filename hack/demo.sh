#!/usr/bin/env bash
# The one-command demo: build (cached), start a real single-node cluster,
# install the chart with simulated H100s, run the demo specs and show which
# GPU each pod got. The cluster stays up to play with.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/cluster/lib.sh
lock_cluster
export KUBECONFIG=$KUBECONFIG_PATH CONTAINERD_ADDRESS=$CTRD_SOCK
step() { echo; echo "==> $*"; }

step "Building the cluster binaries (cached under $CACHE; the first run compiles Kubernetes $K8S_VERSION, ~20 min on 2 cores)"
hack/cluster/build.sh all
step "Building the kubectl plugin (bin/kubectl-gpu: kubectl gpu usage, capacity, diagnose)"
# What the text at the end tells the user to put on PATH; static, like
# make build's (no cgo).
CGO_ENABLED=0 go build -tags grpcnotrace -ldflags "$(hack/version.sh ldflags "$(hack/version.sh version)")" -o bin/kubectl-gpu ./cmd/kubectl-gpu
step "Starting the cluster"
hack/cluster/cluster.sh up
step "Installing the driver (Helm chart, simulated 8 x H100, dynamic MIG)"
kubectl delete namespace gpu-demo gpu-demo-2 --ignore-not-found --wait=true >/dev/null
hack/cluster/deploy.sh h100x8
step "Applying demo/specs"
kubectl apply -f demo/specs/ | sed 's/^/    /'
pods=$(kubectl get pods -A -l demo=gpu -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {end}')
for np in $pods; do
  printf '    waiting for %-28s' "$np"
  kubectl wait -n "${np%/*}" --for=jsonpath='{.status.phase}'=Running "pod/${np#*/}" --timeout=120s >/dev/null && echo " Running"
done

step "Which GPU each container got (read from the cluster: pod logs of nvidia-smi -L)"
{
  echo -e "NAMESPACE/POD\tCONTAINER\tMODEL\tGPU UUID\tMIG DEVICE / SHARE"
  for np in $pods; do
    n=${np%/*} p=${np#*/}
    for c in $(kubectl get pod -n "$n" "$p" -o jsonpath='{.spec.containers[*].name}'); do
      out=$(kubectl logs -n "$n" "$p" -c "$c")
      gpu=$(echo "$out" | sed -n 's/^GPU [0-9]*: \(.*\) (UUID: \(GPU-[^)]*\)).*/\1\t\2/p' | head -1)
      extra=$(echo "$out" | sed -n 's/^ *MIG \([^ ]*\) .*(UUID: \(MIG-[^)]*\)).*/\1 \2/p' | head -1)
      [ -n "$extra" ] || extra=$(echo "$out" | sed -n 's/^CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=\(.*\)/MPS memory limit \1/p')
      echo -e "$np\t$c\t$gpu\t${extra:--}"
    done
  done
} | column -t -s $'\t'

cat <<TXT

The cluster keeps running. Try:
  export KUBECONFIG=$KUBECONFIG_PATH
  export PATH=$PWD/bin:$BIN_K8S:\$PATH   # kubectl, and kubectl gpu (bin/kubectl-gpu)
  kubectl get resourceslices
  kubectl gpu usage
  kubectl get resourceclaims -n gpu-demo
  kubectl logs -n gpu-demo mig -c small-1
Tear it down with: make cluster-down
TXT
