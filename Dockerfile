# Driver image for registries. The local cluster tooling (hack/cluster)
# assembles the same image without docker; this file is for CI systems that
# have one. The plugin needs glibc: go-nvml uses cgo to load libnvidia-ml.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations"
RUN CGO_ENABLED=1 go build -trimpath -tags grpcnotrace -ldflags "-s -w" -o /out/gpu-kubelet-plugin ./cmd/gpu-kubelet-plugin && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/nvidia-smi-sim ./cmd/nvidia-smi-sim && \
    CGO_ENABLED=1 go build -trimpath -tags grpcnotrace -ldflags "-s -w" -o /out/gpudra ./cmd/gpudra

FROM gcr.io/distroless/base-debian12
COPY --from=build /out/ /usr/bin/
ENTRYPOINT ["/usr/bin/gpu-kubelet-plugin"]
