#!/usr/bin/env bash
# A real Kubernetes cluster on this host, from the binaries that build.sh
# cached: etcd, kube-apiserver, kube-scheduler, kube-controller-manager,
# containerd (CDI on) and kubelet; NODES=2 (or more) adds GPU nodes with
# their own containerd and kubelet (nodes.sh).
#   cluster.sh up      start (a no-op when already running)
#   cluster.sh down    stop everything it started and clean the host paths
#   cluster.sh status  say what runs
# The kubeconfig is $CLUSTER/kubeconfig. Host quirks handled (see
# ../shared/reference/LOCAL-CLUSTER.md): cgroup v1, no CAP_SYS_RESOURCE,
# loopback-only apiserver, kubelet reached by its hostname, no kube-proxy
# (webhooks are called at their Service's endpoints).
set -uo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nodes.sh"
case $NODES in [1-9]) ;; *) die "NODES=$NODES: the local cluster's node count, 1 to 9" ;; esac
# The daemons started here outlive this script: they must not inherit the
# cluster lock that demo/e2e/chaos hold, or it would never be released. That
# is fd 9 for lock_cluster, but any descriptor for `flock LOCKFILE cmd`
# (flock(1) opens the file on a free one): close every one open on it.
lock_file=$(readlink -f "${TMPDIR:-/tmp}/gdra-cluster.lock" 2>/dev/null)
for fd in /proc/$$/fd/*; do
  fd=${fd##*/}
  [ "$fd" -gt 2 ] && [ -n "$lock_file" ] && [ "$(readlink "/proc/$$/fd/$fd" 2>/dev/null)" = "$lock_file" ] && eval "exec $fd>&-"
done
unset lock_file fd
export KUBECONFIG=$KUBECONFIG_PATH CONTAINERD_ADDRESS=$CTRD_SOCK
# Feature gates: Kubernetes' own defaults (DRA_GATES empty), as a production
# cluster of 1.38 runs: every DRA feature this driver uses is GA or beta and
# on by default there (DRAPartitionableDevices, DRADeviceTaints and
# DRADeviceBindingConditions locked on; DRAConsumableCapacity and
# DRAFractionalCapacityRange GA), and no e2e test needs an alpha gate.
# DRA_GATES=<list> turns gates on for a run of one's own; never name
# DynamicResourceAllocation, which 1.38 removed (a start-up error).
DRA_GATES=${DRA_GATES-}
# API versions: only what Kubernetes serves by default, resource.k8s.io/v1
# (1.38 deleted v1beta1; v1beta2 is off by default from 1.36 on:
# pkg/controlplane/instance.go betaAPIGroupVersionsDisabledByDefault).
# GPU_DRA_OLD_RESOURCE_APIS=1 turns v1beta2 on (and v1beta1 before 1.38)
# for clients that still read them: dcgm-exporter's releases whose DRA mode
# lists ResourceSlices as v1beta1 (docs/monitoring.md).
RUNTIME_CONFIG=${RUNTIME_CONFIG-}
if [ "${GPU_DRA_OLD_RESOURCE_APIS:-}" = 1 ]; then
  old=resource.k8s.io/v1beta2=true
  case $K8S_VERSION in 1.36.*|1.37.*) old=resource.k8s.io/v1beta1=true,$old ;; esac
  RUNTIME_CONFIG=${RUNTIME_CONFIG:+$RUNTIME_CONFIG,}$old
fi
# What a running cluster was started with: `up` restarts a cluster that
# runs another version, other gates or other API versions, so a script
# never runs its tests on a cluster started for another one (e2e-oldest's
# 1.36, or the old APIs on).
# nodes: NODES, so that `NODES=2 cluster.sh up` adds a node and a later
# plain `up` takes it away again.
WANT="k8s=v$K8S_VERSION gates=$DRA_GATES runtime-config=$RUNTIME_CONFIG nodes=$NODES"
COMPONENTS="etcd kube-apiserver kube-scheduler kube-controller-manager containerd kubelet"
for i in $(seq 2 "$NODES"); do COMPONENTS="$COMPONENTS $(node_name "$i")-containerd $(node_name "$i")-kubelet"; done

running() { local p; p=$(cat "$PIDS/$1" 2>/dev/null) && kill -0 "$p" 2>/dev/null; }
start_bg() { local n=$1; shift; setsid "$@" >"$LOGS/$n.log" 2>&1 </dev/null & echo $! >"$PIDS/$n"; }
wait_for() { # what timeout cmd...
  local what=$1 t=$2 s; s=$(now); shift 2
  for _ in $(seq 1 $((t * 5))); do
    "$@" >/dev/null 2>&1 && { say "$what ready in $(since "$s")s"; return 0; }
    sleep 0.2
  done
  return 1
}
fail() { # component: say which one failed and where its log is
  echo "[$(date +%T)] ERROR: $1 did not become ready; log: $LOGS/$1.log" >&2
  tail -5 "$LOGS/$1.log" >&2 2>/dev/null
  exit 1
}

gen_pki() {
  [ -f "$PKI/ca.crt" ] && return; mkdir -p "$PKI"; (
  cd "$PKI"
  openssl genrsa -out ca.key 2048 2>/dev/null
  openssl req -x509 -new -key ca.key -days 3650 -subj "/CN=gpu-dra-local-ca" -out ca.crt
  sign() { # name CN O SANs EKU
    openssl genrsa -out "$1.key" 2048 2>/dev/null
    local subj="/CN=$2"; [ -n "$3" ] && subj="/O=$3/CN=$2"
    openssl req -new -key "$1.key" -subj "$subj" -out "$1.csr"
    { echo "basicConstraints=CA:FALSE"; echo "keyUsage=critical,digitalSignature,keyEncipherment"; echo "extendedKeyUsage=$5"; [ -n "$4" ] && echo "subjectAltName=$4"; } > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
  }
  sign apiserver kube-apiserver "" "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.0.0.1" serverAuth
  sign apiserver-kubelet-client kube-apiserver-kubelet-client system:masters "" clientAuth
  sign admin admin system:masters "" clientAuth
  sign scheduler system:kube-scheduler "" "" clientAuth
  sign controller-manager system:kube-controller-manager "" "" clientAuth
  sign kubelet-client "system:node:$NODE" system:nodes "" clientAuth
  sign kubelet-serving "$NODE" "" "DNS:$NODE,DNS:localhost,IP:127.0.0.1" serverAuth
  openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  local n c
  for n in admin:admin scheduler:scheduler controller-manager:controller-manager kubelet:kubelet-client; do
    c=${n#*:}; n=${n%%:*}
    cat > "$n.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:6443", certificate-authority: $PKI/ca.crt}}]
users: [{name: $n, user: {client-certificate: $PKI/$c.crt, client-key: $PKI/$c.key}}]
contexts: [{name: local, context: {cluster: local, user: $n}}]
current-context: local
KC
  done
  cp admin.kubeconfig "$KUBECONFIG_PATH" )
}

write_configs() {
  mkdir -p "$CLUSTER/etc/apiserver"
  # Pod Security admission as production clusters run it: every namespace
  # without a label of its own enforces and warns baseline (and audits
  # restricted); kube-system is exempt. The driver's namespace is labeled
  # privileged, as docs/install.md tells users to (deploy.sh does it).
  cat > "$CLUSTER/etc/apiserver/admission.yaml" <<YAML
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults: {enforce: baseline, enforce-version: latest, warn: baseline, warn-version: latest, audit: restricted, audit-version: latest}
    exemptions: {usernames: [], runtimeClasses: [], namespaces: [kube-system]}
YAML
  mkdir -p "$CLUSTER/etc/containerd" "$CLUSTER/etc/cni/net.d" "$CLUSTER/etc/kubelet/manifests" "$KUBELET_DIR" "$(dirname "$CTRD_SOCK")"
  cat > "$CLUSTER/etc/containerd/config.toml" <<TOML
version = 4
root = "$CLUSTER/var/containerd"
state = "$CLUSTER/run/containerd"
[plugins.'io.containerd.server.v1.grpc']
  address = "$CTRD_SOCK"
[plugins.'io.containerd.server.v1.ttrpc']
  address = "$CTRD_SOCK.ttrpc"
[plugins.'io.containerd.cri.v1.runtime']
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  # root here lacks CAP_SYS_RESOURCE: a negative oom_score_adj kills runc init.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$CLUSTER/etc/cni/net.d"
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "registry.k8s.io/pause:3.10.2"
TOML
  cat > "$CLUSTER/etc/cni/net.d/10-bridge.conflist" <<'CNI'
{"cniVersion": "1.0.0", "name": "gpudrapods", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "loopback"}]}
CNI
  { cat <<KUBELET
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$CTRD_SOCK
staticPodPath: $CLUSTER/etc/kubelet/manifests
address: 127.0.0.1
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: $PKI/ca.crt}}
authorization: {mode: Webhook}
clusterDomain: cluster.local
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
featureGates:
KUBELET
    echo "$DRA_GATES" | tr ',' '\n' | sed 's/^\(.*\)=\(.*\)$/  \1: \2/'; } > "$CLUSTER/etc/kubelet/config.yaml"
}

up() {
  for c in etcd kube-apiserver kubelet; do [ -x "$(command -v $c)" ] || die "$c is not built; run hack/cluster/build.sh"; done
  if running kubelet && kubectl get --raw /readyz >/dev/null 2>&1; then
    local have i; have=$(cat "$CLUSTER/started-with" 2>/dev/null)
    # An extra node whose kubelet died makes it another cluster.
    for i in $(seq 2 "$NODES"); do running "$(node_name "$i")-kubelet" || have="$have (node $(node_name "$i") down)"; done
    if [ "$have" = "$WANT" ]; then
      say "cluster already running ($WANT); kubeconfig: $KUBECONFIG_PATH"; return 0
    fi
    say "cluster runs with ${have:-unrecorded settings}; restarting it with $WANT"
  fi
  if running kubelet || running kube-apiserver || [ -d "$CLUSTER/etcd-data" ] || [ -d "$KUBELET_DIR" ] || [ -n "$(extra_nodes)" ]; then
    # Left over from a cluster that was not taken down (a killed session,
    # a reboot): clean it so this start is a fresh one.
    say "cleaning up after a cluster that was not taken down"
    down >/dev/null
  fi
  mkdir -p "$LOGS" "$PIDS"; local t0; t0=$(now)
  gen_pki; write_configs
  running etcd || start_bg etcd etcd --name local --data-dir "$CLUSTER/etcd-data" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster local=http://127.0.0.1:2380 --log-level warn
  wait_for etcd 30 curl -sf http://127.0.0.1:2379/health || fail etcd
  running kube-apiserver || start_bg kube-apiserver kube-apiserver --etcd-servers=http://127.0.0.1:2379 \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --endpoint-reconciler-type=none --secure-port=6443 \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" --client-ca-file="$PKI/ca.crt" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$PKI/ca.crt" --kubelet-preferred-address-types=Hostname,InternalIP \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local --service-cluster-ip-range=10.0.0.0/24 \
    --authorization-mode=Node,RBAC --allow-privileged=true \
    --enable-admission-plugins=NodeRestriction,PodSecurity,Priority,ResourceQuota,LimitRanger \
    --admission-control-config-file="$CLUSTER/etc/apiserver/admission.yaml" \
    --runtime-config="$RUNTIME_CONFIG" \
    --feature-gates="$DRA_GATES" \
    --enable-aggregator-routing=true
  # No kube-proxy here, so no Service's ClusterIP answers. With aggregator
  # routing the apiserver calls admission webhooks (and aggregated APIs) at
  # a ready endpoint of their Service instead, with the same TLS name.
  wait_for kube-apiserver 90 kubectl get --raw /readyz || fail kube-apiserver
  # A default PriorityClass, as many production clusters have: Priority
  # admission then fills spec.priorityClassName and spec.priority of every
  # pod that names no class, before any validating policy sees it (the MPS
  # daemon pod names its own class; issue 55).
  kubectl apply -f - >/dev/null <<'YAML' || fail kube-apiserver
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: tenant-default}
value: 1000
globalDefault: true
description: the local cluster's default, as production clusters set one
YAML
  running kube-scheduler || start_bg kube-scheduler kube-scheduler --kubeconfig="$PKI/scheduler.kubeconfig" \
    --authentication-kubeconfig="$PKI/scheduler.kubeconfig" --authorization-kubeconfig="$PKI/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --feature-gates="$DRA_GATES"
  running kube-controller-manager || start_bg kube-controller-manager kube-controller-manager --kubeconfig="$PKI/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$PKI/controller-manager.kubeconfig" --authorization-kubeconfig="$PKI/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --service-cluster-ip-range=10.0.0.0/24 --controllers='*,-node-ipam-controller' --feature-gates="$DRA_GATES"
  wait_for kube-scheduler 30 curl -skf https://127.0.0.1:10259/healthz || fail kube-scheduler
  wait_for kube-controller-manager 30 curl -skf https://127.0.0.1:10257/healthz || fail kube-controller-manager
  running containerd || start_bg containerd containerd --config "$CLUSTER/etc/containerd/config.toml"
  wait_for containerd 30 ctr version || fail containerd
  "$(dirname "$0")/images.sh" base
  local i; for i in pause busybox; do
    ctr -n k8s.io images import --platform linux/amd64 "$CACHE/images/$i.oci.tar" >/dev/null 2>&1 || fail containerd
  done
  running kubelet || start_bg kubelet kubelet --config="$CLUSTER/etc/kubelet/config.yaml" \
    --kubeconfig="$PKI/kubelet.kubeconfig" --root-dir="$KUBELET_DIR"
  wait_for "node $NODE Ready" 120 sh -c "kubectl get node $NODE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -q True" || fail kubelet
  wait_for "ServiceAccount default" 60 kubectl get sa default || fail kube-controller-manager
  for i in $(seq 2 "$NODES"); do node_up "$i"; done
  echo "$WANT" > "$CLUSTER/started-with"
  say "cluster up in $(since "$t0")s ($WANT); kubeconfig: $KUBECONFIG_PATH"
}

stop() {
  local p; p=$(cat "$PIDS/$1" 2>/dev/null) || return 0
  kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null
  for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$p" 2>/dev/null && kill -KILL -- "-$p" 2>/dev/null
  rm -f "$PIDS/$1"
}

down() {
  local t0; t0=$(now)
  if running kubelet; then # let the kubelet unprepare claims and stop pods
    kubectl delete pods --all -A --wait=false >/dev/null 2>&1
    kubectl delete ds,deploy --all -A --wait=false >/dev/null 2>&1
    for _ in $(seq 1 20); do [ -z "$(kubectl get pods -A -o name 2>/dev/null)" ] && break; sleep 0.5; done
  fi
  for i in $(extra_nodes); do node_down "$i"; done
  stop kubelet
  if running containerd; then
    local t
    for t in $(ctr -n k8s.io tasks ls -q 2>/dev/null); do ctr -n k8s.io tasks kill -s KILL "$t" >/dev/null 2>&1; done
    sleep 1
    for t in $(ctr -n k8s.io tasks ls -q 2>/dev/null); do ctr -n k8s.io tasks delete -f "$t" >/dev/null 2>&1; done
    for t in $(ctr -n k8s.io containers ls -q 2>/dev/null); do ctr -n k8s.io containers delete "$t" >/dev/null 2>&1; done
  fi
  # kueue: the Kueue e2e's manager (kueue.sh), when a run left it.
  local c; for c in kueue containerd kube-controller-manager kube-scheduler kube-apiserver etcd; do stop "$c"; done
  local f; for f in "$CLUSTER"/run/containerd/io.containerd.runtime.v2.task/k8s.io/*/shim.pid; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
  grep -oE " ($CLUSTER|$KUBELET_DIR)(/[^ ]+)?( |$)" /proc/self/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
  rmdir "$CLUSTER/driver-root" 2>/dev/null # the devices node mode's driver root (deploy.sh)
  for m in $(grep -oE ' /run/netns/cni-[^ ]+' /proc/self/mounts); do umount "$m" 2>/dev/null; rm -f "$m"; done
  ip link del cni0 2>/dev/null
  rm -rf /var/lib/cni/networks/gpudrapods /var/run/cdi/k8s.gpu.nvidia.com-* /var/run/cdi/.k8s.gpu.nvidia.com-staging
  pgrep -x containerd >/dev/null || { rm -rf /run/containerd/runc/k8s.io /run/containerd/s /run/containerd/fifo; rmdir /run/containerd/runc /run/containerd 2>/dev/null; }
  # State goes too, so the next up starts clean; binaries and images stay cached.
  rm -rf "$CLUSTER/etcd-data" "$CLUSTER/var" "$CLUSTER/run" "$CLUSTER/etc" "$KUBELET_DIR" "$CLUSTER/started-with"
  say "cluster down in $(since "$t0")s"
}

status() {
  local c; for c in $COMPONENTS; do
    if running "$c"; then echo "$c: running (log $LOGS/$c.log)"; else echo "$c: stopped"; fi
  done
  echo "started with: $(cat "$CLUSTER/started-with" 2>/dev/null || echo unknown)"
  echo "kubeconfig: $KUBECONFIG_PATH"
}

case "${1:-}" in
  up) up ;; down) down ;; status) status ;;
  *) die "usage: $0 up|down|status" ;;
esac
