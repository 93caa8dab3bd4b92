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
# `crane digest golang:1.26-bookworm` or `docker buildx imagetools inspect`)
# where the image is built for release. They are named by tag here because
# the digests could not be looked up where this file was last changed (no
# registry reachable); a tag can be moved to other content, a digest cannot
# (docs/security.md). The local cluster's image (hack/cluster/images.sh)
# uses no base image.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations"
RUN CGO_ENABLED=1 go build -trimpath -tags grpcnotrace -ldflags "-s -w" -o /out/gpu-kubelet-plugin ./cmd/gpu-kubelet-plugin && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/nvidia-smi-sim ./cmd/nvidia-smi-sim && \
    CGO_ENABLED=1 go build -trimpath -tags grpcnotrace -ldflags "-s -w" -o /out/gpu-dra-webhook ./cmd/gpu-dra-webhook && \
    CGO_ENABLED=1 go build -trimpath -tags grpcnotrace -ldflags "-s -w" -o /out/gpudra ./cmd/gpudra && \
    CGO_ENABLED=1 GOBIN=/out go install -trimpath -ldflags "-s -w" \
      "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook@$(go list -m -f '{{.Version}}' github.com/NVIDIA/nvidia-container-toolkit)"
# The hook's SHA-256, which the plugin checks it against before it installs
# it on the host and after (pkg/cdi InstallHook).
RUN cd /out && sha256sum nvidia-cdi-hook > nvidia-cdi-hook.sha256

FROM gcr.io/distroless/base-debian12
COPY --from=build /out/ /usr/bin/
ENTRYPOINT ["/usr/bin/gpu-kubelet-plugin"]
