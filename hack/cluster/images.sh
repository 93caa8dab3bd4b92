#!/usr/bin/env bash
# Assembles single-layer OCI image tarballs without any registry or docker:
#   pause   registry.k8s.io/pause:3.10.2 (containerd's sandbox image), a static Go binary
#   busybox localhost/busybox:latest, Debian's busybox-static with a shell
#   driver  localhost/gpu-dra-driver:<tag>, the plugin (with the glibc it links), the nvidia-smi stand-in
#           and nvidia-cdi-hook built from the nvidia-container-toolkit version go.mod pins,
#           and the admission webhook gpu-dra-webhook (built like the plugin, so they share the build cache).
#           PLATFORMS (default linux/amd64, what the local cluster imports) may name linux/arm64 too,
#           e.g. linux/amd64,linux/arm64 (make image): the tarball's index.json then names one image
#           index with a manifest per platform, as `docker buildx --platform ...` would push. arm64 is
#           cross-compiled (hack/build-arch.sh: gcc-aarch64-linux-gnu) with arm64's glibc from Debian
#           (hack/debs-arch.sh).
#   cudaprobe localhost/cudaprobe:e2e, the devices node mode's workload: Debian's glibc (libc6,
#           libc-bin: loader, ld.so.conf) and test/e2e/probe/cudaprobe.c (which includes
#           test/probe/nvprobe.h) built here with gcc, no NVIDIA file (CDI brings the driver's);
#           busybox for a shell
# Usage: images.sh base | driver REPO_ROOT TAG [PLATFORMS] | cudaprobe REPO_ROOT
set -euo pipefail
source "$(dirname "$0")/lib.sh"
IMAGES=$CACHE/images
mkdir -p "$IMAGES"

# blob W FILE: moves FILE into W's blobs, prints "DIGEST SIZE".
blob() {
  local d n
  d=$(sha256sum "$2" | cut -d' ' -f1); n=$(stat -c %s "$2"); mv "$2" "$1/blobs/sha256/$d"
  echo "$d $n"
}

# manifest W ROOTFS ENTRYPOINT_JSON ARCH: one layer, its config and its
# manifest into W's blobs; prints the manifest's "DIGEST SIZE".
manifest() {
  local w=$1 rootfs=$2 ep=$3 arch=$4 ld ls cd cs variant=
  [ "$arch" = arm64 ] && variant=',"variant":"v8"'
  tar --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 -C "$rootfs" -cf "$w/layer.tar" .
  read -r ld ls < <(blob "$w" "$w/layer.tar")
  printf '{"architecture":"%s","os":"linux"%s,"config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Entrypoint":%s,"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$arch" "$variant" "$ep" "$ld" > "$w/c.json"
  read -r cd cs < <(blob "$w" "$w/c.json")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' "$cd" "$cs" "$ld" "$ls" > "$w/m.json"
  blob "$w" "$w/m.json"
}

# mkimage REF ROOTFS OUT ENTRYPOINT_JSON: a linux/amd64 image.
mkimage() {
  local ref=$1 rootfs=$2 out=$3 ep=$4 w md ms
  w=$(mktemp -d); mkdir -p "$w/blobs/sha256"
  read -r md ms < <(manifest "$w" "$rootfs" "$ep" amd64)
  printf '{"imageLayoutVersion":"1.0.0"}' > "$w/oci-layout"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s"}}]}' "$md" "$ms" "$ref" > "$w/index.json"
  tar -C "$w" -cf "$out" oci-layout index.json blobs; rm -rf "$w"
}

# mkindex REF OUT ENTRYPOINT_JSON ARCH=ROOTFS...: a multi-platform image:
# index.json names (io.containerd.image.name, org.opencontainers.image.ref.name)
# one image index whose manifests carry each platform. `ctr images import
# --platform linux/amd64` unpacks the amd64 one; the others' blobs come along.
mkindex() {
  local ref=$1 out=$2 ep=$3 w a arch rootfs md ms list= id is variant
  shift 3
  w=$(mktemp -d); mkdir -p "$w/blobs/sha256"
  for a; do
    arch=${a%%=*} rootfs=${a#*=} variant=
    [ "$arch" = arm64 ] && variant=',"variant":"v8"'
    read -r md ms < <(manifest "$w" "$rootfs" "$ep" "$arch")
    list="$list${list:+,}$(printf '{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"%s}}' "$md" "$ms" "$arch" "$variant")"
  done
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[%s]}' "$list" > "$w/i.json"
  read -r id is < <(blob "$w" "$w/i.json")
  printf '{"imageLayoutVersion":"1.0.0"}' > "$w/oci-layout"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' "$id" "$is" "$ref" "${ref##*:}" > "$w/index.json"
  tar -C "$w" -cf "$out" oci-layout index.json blobs; rm -rf "$w"
}

base_images() {
  if [ ! -f "$IMAGES/pause.oci.tar" ]; then
    local d=$CACHE/build/pause; mkdir -p "$d/rootfs"
    cat > "$d/main.go" <<'GO'
// pause is a pod sandbox's PID 1: it waits for a signal and reaps zombies.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
GO
    printf 'module pause\ngo 1.26\n' > "$d/go.mod"
    (cd "$d" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o rootfs/pause .)
    mkimage registry.k8s.io/pause:3.10.2 "$d/rootfs" "$IMAGES/pause.oci.tar" '["/pause"]'
  fi
  if [ ! -f "$IMAGES/busybox.oci.tar" ]; then
    local r=$CACHE/build/busybox-rootfs; rm -rf "$r"; mkdir -p "$r"/{bin,etc,proc,sys,dev,tmp,var/run}
    cp /bin/busybox "$r/bin/busybox"
    local a; for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$r/bin/$a"; done
    echo 'root:x:0:0:root:/root:/bin/sh' > "$r/etc/passwd"; echo 'root:x:0:' > "$r/etc/group"
    mkimage localhost/busybox:latest "$r" "$IMAGES/busybox.oci.tar" '["/bin/sh"]'
  fi
}

# driver_image REPO TAG [PLATFORMS]: the plugin links glibc (go-nvml uses
# cgo to dlopen libnvidia-ml), and the webhook is built the same way; the
# libraries ldd names go into the image with them (for arm64: the libraries
# readelf names, from Debian's arm64 libc6).
driver_image() {
  local repo=$1 tag=$2 platforms=${3:-linux/amd64} p parts=() out=$IMAGES/driver.oci.tar amd=$CACHE/build/driver-rootfs
  # A multi-platform build leaves the cluster's rootfs (and tarball) alone:
  # hack/cluster/deploy.sh may be building it at the same time.
  [ "$platforms" = linux/amd64 ] || amd=$CACHE/build/driver-rootfs-multi-amd64
  for p in ${platforms//,/ }; do
    case $p in
      linux/amd64) driver_rootfs_amd64 "$repo" "$amd"; parts+=("amd64=$amd") ;;
      linux/arm64) driver_rootfs_arm64 "$repo"; parts+=("arm64=$CACHE/build/driver-rootfs-arm64") ;;
      *) die "driver image: platform $p: want linux/amd64 and/or linux/arm64" ;;
    esac
  done
  [ ${#parts[@]} -gt 0 ] || die "driver image: no platform in '$platforms'"
  if [ "$platforms" = linux/amd64 ]; then
    # What the local cluster imports, as before.
    mkimage "localhost/gpu-dra-driver:$tag" "${parts[0]#*=}" "$out" '["/usr/bin/gpu-kubelet-plugin"]'
  else
    out=$IMAGES/driver-multiarch.oci.tar
    mkindex "localhost/gpu-dra-driver:$tag" "$out" '["/usr/bin/gpu-kubelet-plugin"]' "${parts[@]}"
  fi
  echo "$out"
}

# driver_rootfs_amd64 REPO DIR
driver_rootfs_amd64() {
  local repo=$1 r=$2 ldv
  # The version the binaries report (pkg/version): $VERSION (make release)
  # or the checkout's (hack/version.sh).
  ldv=$("$(dirname "$0")/../version.sh" ldflags "${VERSION:-}" "$repo")
  rm -rf "$r"; mkdir -p "$r/usr/bin" "$r/tmp"
  (cd "$repo" && CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" go build -trimpath -tags grpcnotrace -ldflags "-s -w $ldv" -o "$r/usr/bin/gpu-kubelet-plugin" ./cmd/gpu-kubelet-plugin)
  (cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$r/usr/bin/nvidia-smi-sim" ./cmd/nvidia-smi-sim)
  (cd "$repo" && CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" go build -trimpath -tags grpcnotrace -ldflags "-s -w $ldv" -o "$r/usr/bin/gpu-dra-webhook" ./cmd/gpu-dra-webhook)
  # The plugin installs the hook on the host and names it in CDI specs.
  local ctk
  ctk=$(cd "$repo" && go list -m -f '{{.Version}}' github.com/NVIDIA/nvidia-container-toolkit)
  (cd "$repo" && CGO_ENABLED=1 CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" GOBIN="$r/usr/bin" go install -trimpath -ldflags "-s -w" "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook@$ctk")
  # Its SHA-256, which the plugin checks the hook against before it installs
  # it on the host and after (pkg/cdi InstallHook).
  (cd "$r/usr/bin" && sha256sum nvidia-cdi-hook > nvidia-cdi-hook.sha256)
  local lib bin
  for bin in gpu-kubelet-plugin gpu-dra-webhook; do
    for lib in $(ldd "$r/usr/bin/$bin" | grep -oE '/[^ ]+'); do
      mkdir -p "$r$(dirname "$lib")"; cp -L "$lib" "$r$lib"
    done
  done
}

# driver_rootfs_arm64 REPO: the same binaries cross-compiled, and the glibc
# files they need from Debian's arm64 libc6 (the version apt's candidate is:
# the cross toolchain's libc6-arm64-cross lags security updates).
driver_rootfs_arm64() {
  local repo=$1 r=$CACHE/build/driver-rootfs-arm64 b=$CACHE/build/driver-bin-arm64 libc=$CACHE/build/libc6-arm64 bin f need
  rm -rf "$r" "$libc"; mkdir -p "$r/usr/bin" "$r/tmp" "$r/lib/aarch64-linux-gnu"
  BIN_DIR=$b "$repo/hack/build-arch.sh" arm64 plugin webhook smi hook >/dev/null
  for bin in gpu-kubelet-plugin gpu-dra-webhook nvidia-smi-sim nvidia-cdi-hook; do cp "$b/linux-arm64/$bin" "$r/usr/bin/$bin"; done
  (cd "$r/usr/bin" && sha256sum nvidia-cdi-hook > nvidia-cdi-hook.sha256)
  dpkg -x "$("$repo/hack/debs-arch.sh" arm64 libc6 | tail -1)" "$libc"
  # The interpreter at the path the binaries name, libc.so.6 where Debian's
  # arm64 ld.so looks (its multiarch directory).
  cp -a "$libc/lib/ld-linux-aarch64.so.1" "$r/lib/"
  cp -L "$libc/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1" "$r/lib/aarch64-linux-gnu/"
  for bin in gpu-kubelet-plugin gpu-dra-webhook nvidia-cdi-hook; do
    for need in $(readelf -d "$r/usr/bin/$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      f=$libc/lib/aarch64-linux-gnu/$need
      [ -e "$f" ] || die "arm64 $bin needs $need, which arm64 libc6 lacks"
      cp -L "$f" "$r/lib/aarch64-linux-gnu/$need"
    done
  done
  rm -rf "$libc"
}

# cudaprobe_image REPO: rebuilt when the probe's source changes (the .c or
# the header it shares with gpu-smoke's probe).
cudaprobe_image() {
  local src=$1/test/e2e/probe/cudaprobe.c hdr=$1/test/probe/nvprobe.h r=$CACHE/build/cudaprobe-rootfs out=$IMAGES/cudaprobe.oci.tar deb
  if [ ! -f "$out" ] || [ "$src" -nt "$out" ] || [ "$hdr" -nt "$out" ] || [ "$0" -nt "$out" ]; then
    rm -rf "$r"; mkdir -p "$r"/{bin,dev,proc,sys,tmp,etc}
    for deb in $(debs libc6 libc-bin); do dpkg -x "$deb" "$r"; done
    gcc -O2 -Wall -Werror -o "$r/bin/cudaprobe" "$src" -ldl
    cp /bin/busybox "$r/bin/busybox"; ln -sf busybox "$r/bin/sh"
    echo 'root:x:0:0:root:/root:/bin/sh' > "$r/etc/passwd"; echo 'root:x:0:' > "$r/etc/group"
    mkimage localhost/cudaprobe:e2e "$r" "$out" '["/bin/cudaprobe"]'
  fi
  echo "$out"
}

case "${1:-}" in
  base) base_images ;;
  driver) driver_image "$2" "$3" "${4:-}" ;;
  cudaprobe) cudaprobe_image "$2" ;;
  *) die "usage: $0 base | driver REPO_ROOT TAG [PLATFORMS] | cudaprobe REPO_ROOT" ;;
esac
