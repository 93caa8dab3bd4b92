# The local cluster's extra GPU nodes (NODES=2 or more), sourced by
# cluster.sh. Node i (2, 3, ...) is gdra-node<i>: its own containerd and
# kubelet on this host, as a second machine would run them.
#
# - Network: the host's namespace, as node 1's (in-cluster clients reach
#   the apiserver at 127.0.0.1:6443). The node has an address of its own,
#   10.89.0.<i> on lo, as its kubelet's --node-ip and listen address: a
#   hostNetwork pod's POD_IP is its node's InternalIP, so the plugins'
#   metrics ports (and the kubelets' ports) do not collide. The apiserver
#   reaches kubelets by Hostname first, so up adds an /etc/hosts line for
#   the name, which its serving certificate carries with the address.
# - Files: a mount namespace of its own, a slave of the host's (mounts the
#   host adds later, e.g. deploy.sh's driver root, reach it; nothing of it
#   reaches the host), where a directory of its own is bound over each path
#   in NODE_PRIVATE_PATHS. The chart's host paths (kubeletDir, /var/run/cdi,
#   /etc/cdi) are then that node's, and so are the runtimes' fixed paths
#   (runc state and shim sockets under /run/containerd, CNI's IPAM and
#   netns files) and the kubelet's pod log directories, which a kubelet
#   garbage-collects for pods it does not know.
# - Pods: a CNI network of its own (bridge cni<i-1>, 10.88.<i-1>.0/24) and
#   a cgroupRoot of its own (/gdra-node<i>): two cgroupfs kubelets would
#   otherwise manage each other's pod cgroups under /kubepods.
# - Identity: client certificate system:node:gdra-node<i> (NodeRestriction
#   and the chart's policies see a real second node).
# - Taint nvidia.com/gpu=present:NoSchedule, as the GPU Operator and cloud
#   GPU node pools set: pods that do not ask for it stay on node 1 (the
#   tests that read node 1's host paths), the driver's DaemonSet runs there.
# Tests find node i's own host paths under node_dir i's host/ directory.

NODE_PRIVATE_PATHS="$KUBELET_DIR /var/run/cdi /etc/cdi /run/containerd /var/lib/cni /run/netns /var/log/pods /var/log/containers"
NODE_TAINT=nvidia.com/gpu=present:NoSchedule

node_pid() { cat "$PIDS/$(node_name "$1")-$2" 2>/dev/null; }
node_ctr() { local i=$1; shift; ctr --address "$(node_ctrd_sock "$i")" -n k8s.io "$@"; }
node_cgroup_dirs() { local c; for c in /sys/fs/cgroup/*/; do [ -L "${c%/}" ] || echo "$c$(node_name "$1")"; done; }

node_pki() {
  local i=$1 n; n=$(node_name "$1")
  [ -f "$PKI/$n-serving.crt" ] && return
  ( cd "$PKI"
    sign() { # file CN O SAN EKU
      openssl genrsa -out "$1.key" 2048 2>/dev/null
      local subj="/CN=$2"; [ -n "$3" ] && subj="/O=$3/CN=$2"
      openssl req -new -key "$1.key" -subj "$subj" -out "$1.csr"
      { echo "basicConstraints=CA:FALSE"; echo "keyUsage=critical,digitalSignature,keyEncipherment"
        echo "extendedKeyUsage=$5"; [ -n "$4" ] && echo "subjectAltName=$4"; } > "$1.ext"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
      rm -f "$1.csr" "$1.ext"
    }
    sign "$n-client" "system:node:$n" system:nodes "" clientAuth
    sign "$n-serving" "$n" "" "DNS:$n,IP:$(node_ip "$i")" serverAuth
    cat > "$n.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:6443", certificate-authority: $PKI/ca.crt}}]
users: [{name: $n, user: {client-certificate: $PKI/$n-client.crt, client-key: $PKI/$n-client.key}}]
contexts: [{name: local, context: {cluster: local, user: $n}}]
current-context: local
KC
  )
}

node_configs() {
  local i=$1 n d p; n=$(node_name "$1"); d=$(node_dir "$1")
  mkdir -p "$d/etc/containerd" "$d/etc/cni/net.d" "$d/etc/kubelet/manifests"
  for p in $NODE_PRIVATE_PATHS; do mkdir -p "$d/host$p" "$p"; done
  # Node 1's file, with this node's root, state, socket and CNI directory.
  sed -e "s#\"$CLUSTER/var/containerd\"#\"$d/var/containerd\"#" -e "s#\"$CLUSTER/run/containerd\"#\"$d/run/containerd\"#" \
    -e "s#$CTRD_SOCK#$(node_ctrd_sock "$i")#" -e "s#$CLUSTER/etc/cni/net.d#$d/etc/cni/net.d#" \
    "$CLUSTER/etc/containerd/config.toml" > "$d/etc/containerd/config.toml"
  # NRI's socket is a fixed host path (/var/run/nri/nri.sock) that node 1's
  # containerd holds; nothing here uses NRI.
  printf "[plugins.'io.containerd.nri.v1.nri']\n  disable = true\n" >> "$d/etc/containerd/config.toml"
  cat > "$d/etc/cni/net.d/10-bridge.conflist" <<CNI
{"cniVersion": "1.0.0", "name": "gpudrapods-$n", "plugins": [
  {"type": "bridge", "bridge": "cni$((i - 1))", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.$((i - 1)).0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "loopback"}]}
CNI
  # Node 1's kubelet configuration with this node's runtime, addresses,
  # certificate, cgroup root and taint.
  sed -e "s#^containerRuntimeEndpoint: .*#containerRuntimeEndpoint: unix://$(node_ctrd_sock "$i")#" \
    -e "s#^staticPodPath: .*#staticPodPath: $d/etc/kubelet/manifests#" \
    -e "s#^address: .*#address: $(node_ip "$i")#" -e "s#^healthzBindAddress: .*#healthzBindAddress: $(node_ip "$i")#" \
    -e "s#^tlsCertFile: .*#tlsCertFile: $PKI/$n-serving.crt#" -e "s#^tlsPrivateKeyFile: .*#tlsPrivateKeyFile: $PKI/$n-serving.key#" \
    "$CLUSTER/etc/kubelet/config.yaml" > "$d/etc/kubelet/config.yaml"
  local key=${NODE_TAINT%%=*} rest=${NODE_TAINT#*=}
  printf 'cgroupRoot: /%s\nregisterWithTaints: [{key: %s, value: %s, effect: %s}]\n' "$n" "$key" "${rest%%:*}" "${rest#*:}" >> "$d/etc/kubelet/config.yaml"
}

# node_up i: starts node i's namespace, containerd and kubelet and waits
# for the node to be Ready (start_bg, wait_for, running and fail are
# cluster.sh's).
node_up() {
  local i=$1 n d ip c p; n=$(node_name "$1"); d=$(node_dir "$1"); ip=$(node_ip "$1")
  node_pki "$i"; node_configs "$i"
  ip addr show dev lo | grep -q " $ip/32" || ip addr add "$ip/32" dev lo || die "cannot add $ip to lo"
  grep -q "^$ip $n\$" /etc/hosts || echo "$ip $n" >> /etc/hosts
  for c in $(node_cgroup_dirs "$i"); do
    mkdir -p "$c"
    # cgroup v1 cpuset: a child starts empty and takes no task.
    for p in cpuset.cpus cpuset.mems; do [ -f "$c/$p" ] && cat "$(dirname "$c")/$p" > "$c/$p"; done
  done
  if ! running "$n-ns"; then
    # The namespace's first process binds the node's directories and then
    # only holds it; containerd and the kubelet join it (nsenter).
    local binds="" q
    for q in $NODE_PRIVATE_PATHS; do binds="$binds mount --bind '$d/host$q' '$q' &&"; done
    rm -f "$d/ns-ready"
    start_bg "$n-ns" unshare --mount --propagation slave -- sh -c \
      "$binds mount --make-rshared '$KUBELET_DIR' && touch '$d/ns-ready' && exec sleep infinity"
    wait_for "$n mount namespace" 10 test -f "$d/ns-ready" || fail "$n-ns"
  fi
  local ns; ns=$(node_pid "$i" ns)
  running "$n-containerd" || start_bg "$n-containerd" nsenter -t "$ns" -m -- containerd --config "$d/etc/containerd/config.toml"
  wait_for "$n containerd" 30 node_ctr "$i" version || fail "$n-containerd"
  for c in pause busybox; do
    node_ctr "$i" images import --platform linux/amd64 "$CACHE/images/$c.oci.tar" >/dev/null 2>&1 || fail "$n-containerd"
  done
  running "$n-kubelet" || start_bg "$n-kubelet" nsenter -t "$ns" -m -- kubelet --config="$d/etc/kubelet/config.yaml" \
    --kubeconfig="$PKI/$n.kubeconfig" --root-dir="$KUBELET_DIR" --hostname-override="$n" --node-ip="$ip"
  wait_for "node $n Ready" 120 sh -c "kubectl get node $n -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -q True" || fail "$n-kubelet"
}

# node_down i: stops what node_up started and removes everything it added
# to the host; safe on a node that never started.
node_down() {
  local i=$1 n d ip ns t f p c; n=$(node_name "$1"); d=$(node_dir "$1"); ip=$(node_ip "$1")
  stop "$n-kubelet"
  if running "$n-containerd"; then
    for t in $(node_ctr "$i" tasks ls -q 2>/dev/null); do node_ctr "$i" tasks kill -s KILL "$t" >/dev/null 2>&1; done
    sleep 1
    for t in $(node_ctr "$i" tasks ls -q 2>/dev/null); do node_ctr "$i" tasks delete -f "$t" >/dev/null 2>&1; done
  fi
  stop "$n-containerd"
  for f in "$d"/run/containerd/io.containerd.runtime.v2.task/k8s.io/*/shim.pid; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
  # Whatever still runs in the node's mount namespace (a shim, a container
  # process) is this node's: end it, so that the namespace and its mounts go.
  ns=$(node_pid "$i" ns)
  if [ -n "$ns" ] && f=$(readlink "/proc/$ns/ns/mnt"); then
    for p in /proc/[0-9]*; do
      [ "${p#/proc/}" != "$ns" ] && [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$f" ] && kill -KILL "${p#/proc/}" 2>/dev/null
    done
  fi
  stop "$n-ns"
  ip link del "cni$((i - 1))" 2>/dev/null
  ip addr del "$ip/32" dev lo 2>/dev/null
  # Rewritten in place, not replaced: /etc/hosts may be a bind mount.
  if grep -q "^$ip $n\$" /etc/hosts; then grep -v "^$ip $n\$" /etc/hosts > "$CLUSTER/hosts.tmp"; cat "$CLUSTER/hosts.tmp" > /etc/hosts; rm -f "$CLUSTER/hosts.tmp"; fi
  for c in $(node_cgroup_dirs "$i"); do [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null; done
  # Its certificates stay with node 1's (gen_pki): the CA outlives a down.
  rm -rf "$d"
}

# extra_nodes prints the numbers of the extra nodes this host has state
# of, whatever NODES says now (down cleans a cluster started with more).
extra_nodes() {
  local d; for d in "$CLUSTER"/nodes/gdra-node*; do [ -d "$d" ] && echo "${d##*gdra-node}"; done; return 0
}
