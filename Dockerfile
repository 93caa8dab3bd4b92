# Driver image for registries. The local cluster tooling (hack/cluster)
# assembles the same image without docker; this file is for CI systems that
# have one. The plugin needs glibc: go-nvml uses cgo to load libnvidia-ml.
# The image also ships nvidia-cdi-hook, built from the nvidia-container-toolkit
# version go.mod pins; the plugin copies it to a host directory (chart value
# cdiHook.installDir) and names it in CDI specs, so every hook subcommand the
# specs use is one the hook knows. It runs on the host and needs glibc 2.34+
# there (this stage is Debian 12). The admission webhook (gpu-dra-webhook)
# ships in the same image; the chart runs it with its own command.
#
# Base images: pin each by digest (image:tag@sha256:<index digest>, e.g. from
# `crane digest golang:1.27-bookworm` or `docker buildx imagetools inspect`)
# where the image is built for release. They are named by tag here because
# the digests could not be looked up where this file was last changed (no
# registry reachable); a tag can be moved to other content, a digest cannot
# (docs/security.md). The local cluster's image (hack/cluster/images.sh)
# uses no base image.
#
# Both platforms, from one machine of either (docs/install.md, "arm64"):
#   docker buildx build --platform linux/amd64,linux/arm64 -t REGISTRY/gpu-dra-driver:TAG --push .
# The build stage runs on the builder's own platform and cross-compiles
# (cgo, for go-nvml) with Debian's cross gcc for the other one, as
# hack/build-arch.sh does outside Docker; no emulation is needed. The final
# stage is distroless's image for the target platform.
FROM --platform=$BUILDPLATFORM golang:1.27-bookworm AS build
ARG TARGETARCH
ARG BUILDARCH
# The version the binaries report (pkg/version, through hack/version.sh in
# hack/build-arch.sh); make release's image-push.txt passes it.
ARG VERSION
RUN if [ "$TARGETARCH" != "$BUILDARCH" ]; then \
      case "$TARGETARCH" in \
        arm64) pkgs="gcc-aarch64-linux-gnu libc6-dev-arm64-cross" ;; \
        amd64) pkgs="gcc-x86-64-linux-gnu libc6-dev-amd64-cross" ;; \
        *) echo "no cross compiler for $TARGETARCH" >&2; exit 1 ;; \
      esac; \
      apt-get update && apt-get install -y --no-install-recommends $pkgs && rm -rf /var/lib/apt/lists/*; \
    fi
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations"
# The plugin, the webhook, the operator CLI (gpudra, kubectl-gpu), the static
# nvidia-smi stand-in and nvidia-cdi-hook (go.mod's nvidia-container-toolkit
# version), all -trimpath -ldflags "-s -w".
RUN BIN_DIR=/tmp/bin hack/build-arch.sh "$TARGETARCH" && mkdir -p /out && cp -a "/tmp/bin/linux-$TARGETARCH/." /out/
# The hook's SHA-256, which the plugin checks it against before it installs
# it on the host and after (pkg/cdi InstallHook).
RUN cd /out && sha256sum nvidia-cdi-hook > nvidia-cdi-hook.sha256

FROM gcr.io/distroless/base-debian12
COPY --from=build /out/ /usr/bin/
ENTRYPOINT ["/usr/bin/gpu-kubelet-plugin"]
