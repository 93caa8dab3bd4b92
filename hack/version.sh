#!/usr/bin/env bash
# The version a build of this checkout is stamped with (pkg/version), one
# place for make build, make release, hack/cluster/images.sh and
# hack/build-arch.sh.
#   version.sh version [REPO]            the version: $VERSION if set; else
#       `git describe --tags --dirty` when a tag is reachable; else
#       v<chart appVersion>-dev (-dirty with uncommitted changes): a build
#       between releases, or of a clone without tags.
#   version.sh ldflags [VERSION] [REPO]  the -X flags for -ldflags: version,
#       commit (git rev-parse HEAD) and date (the commit's, in UTC, so two
#       builds of one commit are byte for byte the same binary).
# REPO defaults to this script's checkout; outside git the commit and date
# are left to the binary's build info (pkg/version).
set -euo pipefail
cmd=${1:-version}
repo_of() { if [ -n "${1:-}" ]; then echo "$1"; else cd "$(dirname "$0")/.." && pwd; fi; }

version() {
  local repo=$1 v app dirty=
  if [ -n "${VERSION:-}" ]; then echo "$VERSION"; return; fi
  if v=$(git -C "$repo" describe --tags --dirty 2>/dev/null); then echo "$v"; return; fi
  app=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$repo/deployments/helm/gpu-dra-driver/Chart.yaml")
  git -C "$repo" diff --quiet HEAD 2>/dev/null || dirty=-dirty
  git -C "$repo" rev-parse HEAD >/dev/null 2>&1 || dirty=
  echo "v${app:-0.0.0}-dev$dirty"
}

case $cmd in
  version) version "$(repo_of "${2:-}")" ;;
  ldflags)
    repo=$(repo_of "${3:-}")
    v=${2:-}; [ -n "$v" ] || v=$(version "$repo")
    p=github.com/gpu-dra-driver/gpu-dra-driver/pkg/version
    flags="-X $p.version=$v"
    if c=$(git -C "$repo" rev-parse HEAD 2>/dev/null); then
      d=$(TZ=UTC git -C "$repo" log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ HEAD)
      flags="$flags -X $p.commit=$c -X $p.date=$d"
    fi
    echo "$flags" ;;
  *) echo "usage: $0 version [REPO] | ldflags [VERSION] [REPO]" >&2; exit 2 ;;
esac
