#!/usr/bin/env bash
# Kueue (sigs.k8s.io/kueue, $KUEUE_VERSION) on the local cluster, for the
# Kueue e2e (test/e2e/kueue_test.go) or a quota tried by hand. Its manager
# runs as a host process like the control plane (cluster.sh), with Kueue's
# own certificate management, webhooks and CRD conversion as a release
# installs them, trimmed to what batch/v1 Jobs need:
#   kueue.sh up [CONFIG]  build (cached), install the CRDs and webhooks,
#                         start (or restart) the manager, wait until ready
#   kueue.sh down         stop it and remove all it installed: webhook
#                         configurations, CRDs (every Kueue object with
#                         them), namespace kueue-system
# CONFIG is a Kueue Configuration (docs/examples/kueue-config.yaml, see
# docs/claims.md "Quotas with Kueue"); only its
# top-level resources: block (deviceClassMappings) is taken, the rest
# (ports, certificates, leader election, gates) is this script's.
# The cluster must be up (cluster.sh up); Kueue is not part of it: only the
# Kueue e2e starts it, and stops it after.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export KUBECONFIG=$KUBECONFIG_PATH
NS=kueue-system
# Kueue's defaults (apis/config/v1beta2/defaults.go): the service and the
# secret its cert rotator fills, and the webhook configurations it injects
# the CA into (pkg/util/cert/cert.go buildCertRotatorConfig).
SVC=kueue-webhook-service
SECRET=kueue-webhook-server-cert
HOOKS=(kueue-mutating-webhook-configuration kueue-validating-webhook-configuration)
# The CRDs Kueue serves v1beta1 of through its conversion webhook: the
# rotator waits until it has injected its CA into each (same function).
CONVERTED="localqueues clusterqueues cohorts workloads multikueueclusters"
# The driver's webhook holds 9443 on this host and its pending explainer's
# health endpoint 9445 (deploy.sh: hostNetwork; values.yaml
# webhook.explainerHealthPort).
PORT=${KUEUE_WEBHOOK_PORT:-9447}
HEALTH=127.0.0.1:${KUEUE_HEALTH_PORT:-8481}
DIR=$CLUSTER/kueue

running() { local p; p=$(cat "$PIDS/kueue" 2>/dev/null) && kill -0 "$p" 2>/dev/null; }

stop_manager() {
  local p; p=$(cat "$PIDS/kueue" 2>/dev/null) || return 0
  kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null
  for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$p" 2>/dev/null && kill -KILL -- "-$p" 2>/dev/null
  rm -f "$PIDS/kueue"
}

# webhooks prints Kueue's webhook configurations with the webhooks of
# batch/v1 Jobs and of Kueue's own kinds only (no Pod, Deployment or
# StatefulSet webhooks: the rest of the e2e must not depend on Kueue),
# named and routed as a release names them. The Job webhooks see only Jobs
# labelled with a queue: with failurePolicy Fail, a manager that is down
# must not refuse other tests' Jobs.
webhooks() {
  kubectl create --dry-run=client -o json -f "$BIN_KUEUE/webhook/manifests.yaml" | jq -s --arg ns "$NS" --arg svc "$SVC" '
    {apiVersion: "v1", kind: "List", items: [.[]
      | .metadata.name = "kueue-" + .metadata.name
      | .webhooks |= map(select(.name | test("^[mv](job|clusterqueue|localqueue|cohort|resourceflavor|workload)\\.kb\\.io$"))
        | .clientConfig.service += {name: $svc, namespace: $ns, port: 443}
        | if (.name | test("^[mv]job\\.")) then .objectSelector = {matchExpressions: [{key: "kueue.x-k8s.io/queue-name", operator: "Exists"}]} else . end)]}'
}

# config writes the manager's Configuration, with CONFIG's resources: block.
config() {
  mkdir -p "$DIR/certs"
  cat > "$DIR/config.yaml" <<CFG
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: $NS
health: {healthProbeBindAddress: "$HEALTH"}
metrics: {bindAddress: "0"}
webhook: {port: $PORT, certDir: "$DIR/certs"}
leaderElection: {leaderElect: false}
internalCertManagement: {enable: true}
manageJobsWithoutQueueName: false
integrations: {frameworks: [batch/job]}
# VisibilityOnDemand would serve an aggregated API on port 8082; unused here.
# DynamicResourceAllocation is Kueue's own gate (v0.17.0
# pkg/features/kube_features.go: alpha, off by default; DRA quota needs it),
# not the Kubernetes gate of that name, which 1.38 removes and which
# nothing here sets.
featureGates: {DynamicResourceAllocation: true, VisibilityOnDemand: false}
CFG
  if [ -n "${1:-}" ]; then
    [ -f "$1" ] || die "Kueue configuration $1 not found"
    awk '/^resources:/{on=1; print; next} on && /^[^ #]/{on=0} on' "$1" >> "$DIR/config.yaml"
    grep -q '^resources:' "$DIR/config.yaml" || die "$1 has no top-level resources: block (deviceClassMappings)"
  fi
}

up() {
  "$(dirname "$0")/build.sh" kueue >/dev/null
  kubectl get --raw /readyz >/dev/null 2>&1 || die "the local cluster is not up (hack/cluster/cluster.sh up)"
  local t0 node_ip c; t0=$(now)
  running && { say "restarting the Kueue manager"; stop_manager; }
  node_ip=$(kubectl get node "$NODE" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
  [ -n "$node_ip" ] || die "node $NODE has no InternalIP"
  # The CRDs are too large for client-side apply's annotation.
  kubectl apply --server-side --force-conflicts -f "$BIN_KUEUE/crd" >/dev/null
  for c in $CONVERTED; do
    kubectl patch crd "$c.kueue.x-k8s.io" --type merge -p "{\"spec\":{\"conversion\":{\"strategy\":\"Webhook\",\"webhook\":{\"conversionReviewVersions\":[\"v1\"],\"clientConfig\":{\"service\":{\"namespace\":\"$NS\",\"name\":\"$SVC\",\"path\":\"/convert\",\"port\":443}}}}}}" >/dev/null
  done
  # No kube-proxy here: with aggregator routing the API server calls a
  # webhook at a ready endpoint of its Service (cluster.sh), so a Service
  # without selector whose one endpoint is this host.
  kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: $NS}
---
apiVersion: v1
kind: Secret
metadata: {name: $SECRET, namespace: $NS}
---
apiVersion: v1
kind: Service
metadata: {name: $SVC, namespace: $NS}
spec:
  ports: [{name: https, port: 443, targetPort: $PORT, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: $SVC-host
  namespace: $NS
  labels: {kubernetes.io/service-name: $SVC}
addressType: IPv4
ports: [{name: https, port: $PORT, protocol: TCP}]
endpoints: [{addresses: ["$node_ip"], conditions: {ready: true}}]
YAML
  webhooks | kubectl apply -f - >/dev/null
  local crds=(); for c in $CONVERTED resourceflavors; do crds+=("crd/$c.kueue.x-k8s.io"); done
  kubectl wait --for condition=established --timeout=60s "${crds[@]}" >/dev/null
  config "${1:-}"
  mkdir -p "$LOGS" "$PIDS"
  # The manager outlives this script: it must hold none of its descriptors,
  # or a lock of its caller (hack/e2e.sh's fd 9 on the cluster lock, or
  # flock(1)'s) would be held as long as the manager runs.
  ( for fd in "/proc/$BASHPID/fd/"*; do fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null; done
    exec setsid "$BIN_KUEUE/kueue" --config "$DIR/config.yaml" --zap-log-level=info ) >"$LOGS/kueue.log" 2>&1 </dev/null &
  echo $! >"$PIDS/kueue"
  # Kueue's cert rotator writes its certificate into the Secret and waits
  # for the file in certDir, which in a pod the Secret's volume provides
  # (cert-controller pkg/rotator ensureCertsMounted): here this loop does.
  # /readyz answers once the certificates are there and injected and the
  # webhook server listens (cmd/kueue/main.go setupProbeEndpoints).
  local crt key
  for _ in $(seq 1 450); do
    if [ ! -s "$DIR/certs/tls.crt" ]; then
      crt=$(kubectl get secret -n "$NS" "$SECRET" -o jsonpath='{.data.tls\.crt}')
      key=$(kubectl get secret -n "$NS" "$SECRET" -o jsonpath='{.data.tls\.key}')
      if [ -n "$crt" ] && [ -n "$key" ]; then
        (umask 077; echo "$key" | base64 -d > "$DIR/certs/tls.key")
        echo "$crt" | base64 -d > "$DIR/certs/tls.crt.new" && mv "$DIR/certs/tls.crt.new" "$DIR/certs/tls.crt"
      fi
    fi
    curl -sf "http://$HEALTH/readyz" >/dev/null 2>&1 && { say "Kueue $KUEUE_VERSION up in $(since "$t0")s (log $LOGS/kueue.log)"; return 0; }
    running || break
    sleep 0.2
  done
  tail -20 "$LOGS/kueue.log" >&2
  die "the Kueue manager did not become ready; log: $LOGS/kueue.log"
}

down() {
  local t0 r; t0=$(now)
  stop_manager
  kubectl delete mutatingwebhookconfiguration,validatingwebhookconfiguration "${HOOKS[@]}" --ignore-not-found >/dev/null
  # With the manager gone nothing removes Kueue's finalizers (workloads,
  # queues and flavors in use), and a CRD is not deleted while one of its
  # objects waits for a finalizer.
  if kubectl get crd workloads.kueue.x-k8s.io >/dev/null 2>&1; then
    for r in workloads localqueues clusterqueues resourceflavors cohorts; do
      kubectl get "$r.kueue.x-k8s.io" -A -o json | jq -r '.items[] | select(.metadata.finalizers) | "\(.metadata.namespace // "") \(.metadata.name)"' |
        while read -r ns name; do
          [ -z "$name" ] && { name=$ns; ns=""; }
          kubectl patch "$r.kueue.x-k8s.io" "$name" ${ns:+-n "$ns"} --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null
        done
    done
  fi
  [ -d "$BIN_KUEUE/crd" ] && kubectl delete -f "$BIN_KUEUE/crd" --ignore-not-found --wait=true --timeout=60s >/dev/null
  kubectl delete namespace "$NS" --ignore-not-found --wait=false >/dev/null
  rm -rf "$DIR"
  say "Kueue down in $(since "$t0")s"
}

case "${1:-}" in
  up) up "${2:-}" ;; down) down ;;
  *) die "usage: $0 up [CONFIG]|down" ;;
esac
