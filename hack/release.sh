#!/usr/bin/env bash
# make release VERSION=vX.Y.Z: every artifact of a release, from this
# checkout, into dist/ (DIST=<dir> for another; never committed):
#   gpu-dra-driver_VERSION_image.oci.tar  the driver image, linux/amd64 + linux/arm64, one
#        OCI image index (hack/cluster/images.sh, no registry or docker), named
#        localhost/gpu-dra-driver:X.Y.Z, the chart's default repository and tag;
#        image-push.txt: the docker buildx command that pushes the same to a registry
#   gpu-dra-driver-X.Y.Z.tgz, index.yaml  the chart (helm package) and its repository index
#   kubectl-gpu_VERSION_OS_ARCH.tar.gz|.zip  the kubectl plugin for linux, darwin and
#        windows on amd64 and arm64; plugin.yaml: its krew manifest (URIs under
#        RELEASE_URL, default the project's release page; sha256 of each archive)
#   sbom/NAME_OS_ARCH.cdx.json  a CycloneDX SBOM of every shipped binary (cyclonedx-gomod)
#   RELEASE-NOTES.md  the version's CHANGELOG.md entry
#   SHA256SUMS        every file above (sha256sum -c SHA256SUMS)
# Archives, SBOMs and binaries are reproducible: the binaries are stamped
# with VERSION, the commit and its date (hack/version.sh), archives carry
# the commit's time.
#
# Why not goreleaser (v2.15.1 builds from the module proxy): it would do the
# archives, checksums and krew manifest, which are ~200 lines here
# (internal/release, tested by make test), but none of the rest: its
# image builders need docker or a registry (ko cannot link the plugin's cgo
# and glibc), the cgo cross build for arm64 is hack/build-arch.sh's, and the
# krew manifest it writes is meant for a pull request to krew-index. Adding
# it would mean a second, much larger toolchain (hundreds of modules, minutes
# to build on 2 cores) to configure around what the project already does.
# docs/releasing.md.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
source hack/cluster/lib.sh
VERSION=${VERSION:-}
[[ $VERSION =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "VERSION=\"$VERSION\": give the release's version, e.g. make release VERSION=v0.2.0"
export VERSION
v=${VERSION#v}
DIST=${DIST:-$REPO/dist}
RELEASE_URL=${RELEASE_URL:-} # empty: the project's release page (internal/release.DefaultBaseURL)
CYCLONEDX_VERSION=${CYCLONEDX_VERSION:-v1.10.0}
t0=$(now)
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT

go build -o "$w/releasetool" ./cmd/releasetool
app=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' deployments/helm/gpu-dra-driver/Chart.yaml)
[ "$app" = "$v" ] || die "Chart.yaml appVersion is \"$app\", not $v: set version and appVersion to $v and add CHANGELOG.md's [$v] entry first"
"$w/releasetool" check-chart deployments/helm/gpu-dra-driver/Chart.yaml CHANGELOG.md
"$w/releasetool" notes CHANGELOG.md "$VERSION" > "$w/RELEASE-NOTES.md"
head=$(git rev-parse HEAD)
cut=$(sed -n "/^## \[$v\]/,/^## \[/s/^Cut from commit \`\([0-9a-f]*\)\`.*/\1/p" CHANGELOG.md | head -1)
if [ -n "$cut" ] && [ "${head#"$cut"}" = "$head" ]; then
  say "note: CHANGELOG.md says $VERSION was cut from $cut; this is $head$(git diff --quiet HEAD || echo ' (modified)')"
fi
mtime=$(git log -1 --format=%ct HEAD)
rm -rf "$DIST"; mkdir -p "$DIST/sbom"
mv "$w/RELEASE-NOTES.md" "$DIST/"

# The arm64 half of the image needs Debian's cross gcc (hack/build-arch.sh).
if ! command -v aarch64-linux-gnu-gcc >/dev/null; then
  [ "$(id -u)" = 0 ] || die "aarch64-linux-gnu-gcc missing: apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
  say "installing Debian's arm64 cross compiler"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc-aarch64-linux-gnu libc6-dev-arm64-cross >/dev/null
fi

s=$(now)
make -s kubectl-gpu-dist BIN_DIR="$w/bin" VERSION="$VERSION" >/dev/null
"$w/releasetool" archives "$DIST" "$VERSION" "$w/bin" LICENSE "$mtime"
"$w/releasetool" krew "$DIST" "$VERSION" "$RELEASE_URL"
say "kubectl-gpu: 6 archives and plugin.yaml in $(since "$s")s"

s=$(now)
tarball=$(hack/cluster/images.sh driver "$REPO" "$v" linux/amd64,linux/arm64 | tail -1)
cp "$tarball" "$DIST/gpu-dra-driver_${VERSION}_image.oci.tar"
cat > "$DIST/image-push.txt" <<TXT
# The same image (linux/amd64 and linux/arm64, one index) pushed to a registry,
# from a checkout of commit $head, with docker buildx:
docker buildx build --platform linux/amd64,linux/arm64 --build-arg VERSION=$VERSION -t REGISTRY/gpu-dra-driver:$v --push .
# Without docker: import gpu-dra-driver_${VERSION}_image.oci.tar (ctr -n k8s.io images import
# --all-platforms FILE, or skopeo copy oci-archive:FILE docker://REGISTRY/gpu-dra-driver:$v), then
# helm install ... --set image.repository=REGISTRY/gpu-dra-driver (the tag defaults to $v).
TXT
say "image localhost/gpu-dra-driver:$v (amd64, arm64) in $(since "$s")s"

s=$(now)
hack/cluster/build.sh helm >/dev/null
helm package deployments/helm/gpu-dra-driver --version "$v" --app-version "$v" -d "$DIST" >/dev/null
# Relative chart URLs: the repository works wherever dist/ is served
# (the release page, a mirror, the e2e test's local server).
helm repo index "$DIST"
say "chart gpu-dra-driver-$v.tgz and index.yaml in $(since "$s")s"

s=$(now)
cdx=$CACHE/bin/cyclonedx-gomod-$CYCLONEDX_VERSION/cyclonedx-gomod
if [ ! -x "$cdx" ]; then
  GOBIN=$(dirname "$cdx") CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$CYCLONEDX_VERSION"
fi
sbom() { "$cdx" bin -json -noserial -notimestamp -version "$VERSION" -output "$DIST/sbom/$2.cdx.json" "$1" 2>/dev/null || die "SBOM of $1 failed"; }
for f in "$w"/bin/kubectl-gpu-*; do n=${f##*/}; n=${n%.exe}; sbom "$f" "kubectl-gpu_$(echo "${n#kubectl-gpu-}" | tr - _)"; done
# The image's binaries, where images.sh left its multi-platform rootfs.
for arch in amd64 arm64; do
  r=$CACHE/build/driver-rootfs-arm64; [ $arch = amd64 ] && r=$CACHE/build/driver-rootfs-multi-amd64
  for b in gpu-kubelet-plugin gpu-dra-webhook nvidia-smi-sim nvidia-cdi-hook; do sbom "$r/usr/bin/$b" "${b}_linux_$arch"; done
done
say "$(find "$DIST/sbom" -type f | wc -l) SBOMs (cyclonedx-gomod $CYCLONEDX_VERSION) in $(since "$s")s"

"$w/releasetool" sums "$DIST"
"$w/releasetool" verify "$DIST"
(cd "$DIST" && sha256sum --quiet -c SHA256SUMS)
say "release $VERSION of $head in $DIST ($(du -sh "$DIST" | cut -f1), $(since "$t0")s):"
(cd "$DIST" && find . -type f ! -path './sbom/*' | sort | sed 's|^\./|  |')
