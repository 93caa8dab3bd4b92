#!/usr/bin/env bash
# Assembles single-layer OCI image tarballs without any registry or docker:
#   pause   registry.k8s.io/pause:3.10.2 (containerd's sandbox image), a static Go binary
#   busybox localhost/busybox:latest, Debian's busybox-static with a shell
#   driver  localhost/gpu-dra-driver:<tag>, the plugin (with the glibc it links), the nvidia-smi stand-in
#           and nvidia-cdi-hook built from the nvidia-container-toolkit version go.mod pins,
#           and the admission webhook gpu-dra-webhook (built like the plugin, so they share the build cache)
#   cudaprobe localhost/cudaprobe:e2e, the devices node mode's workload: Debian's glibc (libc6,
#           libc-bin: loader, ld.so.conf) and test/e2e/probe/cudaprobe.c built here with gcc, no
#           NVIDIA file (CDI brings the driver's); busybox for a shell
# Usage: images.sh base | driver REPO_ROOT TAG | cudaprobe REPO_ROOT
set -euo pipefail
source "$(dirname "$0")/lib.sh"
IMAGES=$CACHE/images
mkdir -p "$IMAGES"

# mkimage REF ROOTFS OUT ENTRYPOINT_JSON
mkimage() {
  local ref=$1 rootfs=$2 out=$3 ep=$4 w ld ls cd cs md ms
  w=$(mktemp -d); mkdir -p "$w/blobs/sha256"
  tar --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 -C "$rootfs" -cf "$w/layer.tar" .
  ld=$(sha256sum "$w/layer.tar" | cut -d' ' -f1); ls=$(stat -c %s "$w/layer.tar"); mv "$w/layer.tar" "$w/blobs/sha256/$ld"
  printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Entrypoint":%s,"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$ep" "$ld" > "$w/c.json"
  cd=$(sha256sum "$w/c.json" | cut -d' ' -f1); cs=$(stat -c %s "$w/c.json"); mv "$w/c.json" "$w/blobs/sha256/$cd"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' "$cd" "$cs" "$ld" "$ls" > "$w/m.json"
  md=$(sha256sum "$w/m.json" | cut -d' ' -f1); ms=$(stat -c %s "$w/m.json"); mv "$w/m.json" "$w/blobs/sha256/$md"
  printf '{"imageLayoutVersion":"1.0.0"}' > "$w/oci-layout"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s"}}]}' "$md" "$ms" "$ref" > "$w/index.json"
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

# driver_image REPO TAG: the plugin links glibc (go-nvml uses cgo to dlopen
# libnvidia-ml), and the webhook is built the same way; the libraries ldd
# names go into the image with them.
driver_image() {
  local repo=$1 tag=$2 r=$CACHE/build/driver-rootfs
  rm -rf "$r"; mkdir -p "$r/usr/bin" "$r/tmp"
  (cd "$repo" && CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" go build -trimpath -tags grpcnotrace -ldflags "-s -w" -o "$r/usr/bin/gpu-kubelet-plugin" ./cmd/gpu-kubelet-plugin)
  (cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$r/usr/bin/nvidia-smi-sim" ./cmd/nvidia-smi-sim)
  (cd "$repo" && CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" go build -trimpath -tags grpcnotrace -ldflags "-s -w" -o "$r/usr/bin/gpu-dra-webhook" ./cmd/gpu-dra-webhook)
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
  mkimage "localhost/gpu-dra-driver:$tag" "$r" "$IMAGES/driver.oci.tar" '["/usr/bin/gpu-kubelet-plugin"]'
  echo "$IMAGES/driver.oci.tar"
}

# cudaprobe_image REPO: rebuilt when the probe's source changes.
cudaprobe_image() {
  local src=$1/test/e2e/probe/cudaprobe.c r=$CACHE/build/cudaprobe-rootfs out=$IMAGES/cudaprobe.oci.tar deb
  if [ ! -f "$out" ] || [ "$src" -nt "$out" ] || [ "$0" -nt "$out" ]; then
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
  driver) driver_image "$2" "$3" ;;
  cudaprobe) cudaprobe_image "$2" ;;
  *) die "usage: $0 base | driver REPO_ROOT TAG | cudaprobe REPO_ROOT" ;;
esac
