#!/usr/bin/env bash
# Builds the real control plane the e2e tests run against — kube-apiserver (from
# k8s.io/kubernetes@v1.37.2) and etcd (go.etcd.io/etcd/server/v3 v3.7.0) — from the
# separate tools module .ci/k8s-tools, so the main module never depends on k8s.io/kubernetes.
#
# CLOUDGATE_K8S_TOOLS=DIR builds from another tools module instead (make test-skew:
# .ci/k8s-tools-prev, the previous minor); the Kubernetes version stamped in is the
# k8s.io/kubernetes version that module requires. Each module has its own cache key.
#
# The binaries are cached under $CLOUDGATE_CACHE_DIR/bin/<key>/, where <key> is the sha256
# of the tools module's go.sum (+ go.mod) and `go version`: a second run (or a second clone)
# skips the ~5-7 min cold build. Concurrent runs wait for each other on a lock file.
#
# Progress goes to stderr; stdout gets exactly two lines, for `env $(cat ...)`:
#   CLOUDGATE_KUBE_APISERVER=/abs/path
#   CLOUDGATE_ETCD=/abs/path
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tools=$(cd "${CLOUDGATE_K8S_TOOLS:-$root/.ci/k8s-tools}" && pwd)
cache=${CLOUDGATE_CACHE_DIR:-$HOME/.cache/cloudgate}
GO=${GO:-go}
# The tools module stands alone, outside any workspace.
export GOWORK=off

k8s_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ {print $2; exit}' "$tools/go.mod")
[ -n "$k8s_version" ] || { echo "control-plane: no k8s.io/kubernetes version in $tools/go.mod" >&2; exit 1; }
k8s_minor=$(echo "$k8s_version" | cut -d. -f2)
log() { printf 'control-plane: %s\n' "$*" >&2; }

# What the binaries depend on: the tools module's go.sum (and its go.mod, whose replaces
# pick the staging versions), the Go version and the version stamped in.
key=$({ cat "$tools/go.sum" "$tools/go.mod"; "$GO" version; echo "$k8s_version"; } | sha256sum | cut -c1-16)
mkdir -p "$cache/bin/$key"
bin=$(cd "$cache/bin/$key" && pwd)

# One builder at a time per key (several checkouts may share the cache).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$bin/.lock"
  if ! flock -n 9; then
    log "another build holds $bin/.lock; waiting (at most 30 min)"
    flock -w 1800 9 || { log "timed out waiting for $bin/.lock"; exit 1; }
  fi
fi

# build NAME PACKAGE [go build flags...]: builds PACKAGE from the tools module into
# $bin/NAME unless it is already there; the move makes a half-written binary impossible.
build() {
  local name=$1 pkg=$2
  shift 2
  if [ -x "$bin/$name" ]; then
    log "$name: cached at $bin/$name"
    return
  fi
  if [ -z "${downloaded:-}" ]; then
    log "downloading the tools module's dependencies (go mod download)"
    (cd "$tools" && "$GO" mod download)
    downloaded=1
  fi
  log "$name: building $pkg (cold: kube-apiserver ~6 min, etcd ~1 min on 2 cores)"
  local start=$SECONDS
  (cd "$tools" && "$GO" build -o "$bin/$name.tmp" "$@" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"
  log "$name: built in $((SECONDS - start)) s -> $bin/$name"
}

vpkg=k8s.io/component-base/version
cpkg=k8s.io/client-go/pkg/version
ldflags=""
for p in $vpkg $cpkg; do
  ldflags+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$k8s_minor"
  ldflags+=" -X $p.gitTreeState=clean"
done

build etcd go.etcd.io/etcd/server/v3
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver -ldflags "$ldflags"

log "$("$bin/kube-apiserver" --version 2>&1), $("$bin/etcd" --version 2>&1 | sed -n 1p)"

echo "CLOUDGATE_KUBE_APISERVER=$bin/kube-apiserver"
echo "CLOUDGATE_ETCD=$bin/etcd"
