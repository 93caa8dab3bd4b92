#!/usr/bin/env bash
# Prints the driver root of the local cluster's "devices" node mode
# (simulate.nodeMode=devices): NVIDIA's R535 userspace in the host layout
# (hack/nvidia-userspace.sh) plus Debian's glibc (libc6, libc-bin), so that
# NVIDIA's tools run chrooted into it as they do in a host's "/" (MPS daemon
# pods run its nvidia-cuda-mps-control). Its own etc/ld.so.cache covers
# both. Built once into the cache; it holds no device nodes (the simulator
# makes those under the plugin's state directory, which cluster-down
# removes) and nothing of the host's is changed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
PATH=$PATH:/usr/sbin:/sbin
nv=$("$(dirname "$0")/../nvidia-userspace.sh" --print-root host)
root=$(dirname "$nv")/node
if [ ! -f "$root/.gdra-complete" ]; then
  rm -rf "$root" "$root.tmp"
  cp -a "$nv" "$root.tmp"
  rm -f "$root.tmp/.gdra-complete"
  for deb in $(debs libc6 libc-bin); do dpkg -x "$deb" "$root.tmp"; done
  # Mount points of MPS daemon pods (their pipe, log and /dev/shm), so
  # the runtime creates nothing in the root.
  mkdir -p "$root.tmp/tmp/nvidia-mps" "$root.tmp/var/log/nvidia-mps" "$root.tmp/dev/shm" "$root.tmp/proc" "$root.tmp/sys"
  ldconfig -X -r "$root.tmp"
  chroot "$root.tmp" /usr/bin/nvidia-cuda-mps-control -h >/dev/null 2>&1 || [ $? -le 1 ] || die "nvidia-cuda-mps-control does not run chrooted into $root.tmp"
  touch "$root.tmp/.gdra-complete"
  mv "$root.tmp" "$root"
fi
echo "$root"
