#!/usr/bin/env bash
# Cross-builds the shipped binaries for one Linux architecture into
# bin/linux-ARCH/ (or $BIN_DIR/linux-ARCH/): the plugin, the admission
# webhook, the operator CLI (and its kubectl plugin name), the static
# nvidia-smi stand-in and nvidia-cdi-hook from the nvidia-container-toolkit
# version go.mod pins. The plugin and the webhook need cgo (go-nvml dlopens
# libnvidia-ml), so a cross build needs Debian's cross compiler:
#   arm64: apt-get install -y gcc-aarch64-linux-gnu libc6-dev-arm64-cross
#   amd64 (from an arm64 host): apt-get install -y gcc-x86-64-linux-gnu libc6-dev-amd64-cross
# Nothing is cached in the repository: Go's build cache and module cache are
# where `go env GOCACHE GOMODCACHE` say.
# Usage: hack/build-arch.sh ARCH [plugin|webhook|cli|smi|hook|gpudra ...]   (all but gpudra when none;
#        cli is gpudra and kubectl-gpu)
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:?usage: $0 amd64|arm64 [plugin webhook cli smi hook gpudra]}; shift
[ $# -gt 0 ] || set -- plugin webhook cli smi hook
GO=${GO:-go}
TAGS=${GO_TAGS:-grpcnotrace}
out=${BIN_DIR:-bin}/linux-$arch
mkdir -p "$out"

host=$($GO env GOHOSTARCH)
cc=
if [ "$arch" != "$host" ]; then
  case $arch in
    arm64) cc=aarch64-linux-gnu-gcc; pkgs="gcc-aarch64-linux-gnu libc6-dev-arm64-cross" ;;
    amd64) cc=x86_64-linux-gnu-gcc; pkgs="gcc-x86-64-linux-gnu libc6-dev-amd64-cross" ;;
    *) echo "$0: no cross compiler known for $arch" >&2; exit 2 ;;
  esac
  command -v "$cc" >/dev/null || { echo "$0: $cc not found: apt-get install -y $pkgs" >&2; exit 1; }
fi
export GOOS=linux GOARCH=$arch
export CGO_CFLAGS=${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}
# Same flags as the image's binaries (hack/cluster/images.sh, Dockerfile),
# with the version they report (hack/version.sh; $VERSION from make release).
flags=(-trimpath -ldflags "-s -w $(hack/version.sh ldflags "${VERSION:-}")")

[ -z "$cc" ] || export CC=$cc

cgo() { CGO_ENABLED=1 $GO build "${flags[@]}" -tags "$TAGS" "$@"; }

for what; do
  case $what in
    plugin) cgo -o "$out/gpu-kubelet-plugin" ./cmd/gpu-kubelet-plugin ;;
    webhook) cgo -o "$out/gpu-dra-webhook" ./cmd/gpu-dra-webhook ;;
    cli)
      # The operator CLI; kubectl finds it as kubectl-gpu.
      if [ -d cmd/gpudra ]; then
        cgo -o "$out/gpudra" ./cmd/gpudra
        [ -d cmd/kubectl-gpu ] || ln -sf gpudra "$out/kubectl-gpu"
      fi
      # kubectl-gpu links no cgo (cmd/kubectl-gpu/deps_test.go): static.
      if [ -d cmd/kubectl-gpu ]; then CGO_ENABLED=0 $GO build "${flags[@]}" -tags "$TAGS" -o "$out/kubectl-gpu" ./cmd/kubectl-gpu; fi
      ;;
    gpudra) cgo -o "$out/gpudra" ./cmd/gpudra ;;
    smi) CGO_ENABLED=0 $GO build "${flags[@]}" -tags "$TAGS" -o "$out/nvidia-smi-sim" ./cmd/nvidia-smi-sim ;;
    hook)
      # As `make build` does it (go install of the pinned version, with that
      # module's own dependencies). go install refuses GOBIN for a cross
      # build; it then writes GOPATH/bin/linux_ARCH/.
      v=$($GO list -m -f '{{.Version}}' github.com/NVIDIA/nvidia-container-toolkit)
      if [ "$arch" = "$host" ]; then
        GOBIN=$(cd "$out" && pwd) CGO_ENABLED=1 $GO install "${flags[@]}" "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook@$v"
      else
        env -u GOBIN CGO_ENABLED=1 $GO install "${flags[@]}" "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook@$v"
        cp "$($GO env GOPATH | cut -d: -f1)/bin/linux_$arch/nvidia-cdi-hook" "$out/nvidia-cdi-hook"
      fi
      ;;
    *) echo "$0: unknown binary $what" >&2; exit 2 ;;
  esac
done
ls -l "$out"
