#!/usr/bin/env bash
# Builds cosign (github.com/sigstore/cosign/v3/cmd/cosign, the version .ci/cosign-tools/go.mod
# requires) from the separate tools module .ci/cosign-tools, so no project module depends on
# cosign's dependency tree. make test-chart's TestE2EReleaseFromRegistry verifies the
# release's signatures and SBOM attestations with it, as a user would (cosign verify --key).
#
# The binary is cached under $CLOUDGATE_CACHE_DIR/bin/<key>/cosign, <key> the sha256 of the
# tools module's go.sum and go.mod and `go version`: a second run (or a second clone) skips the
# cold build. Concurrent runs wait for each other on a lock file.
#
# Progress goes to stderr; stdout gets exactly one line, for `env $(cat ...)`:
#   CLOUDGATE_COSIGN=/abs/path
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tools=$root/.ci/cosign-tools
cache=${CLOUDGATE_CACHE_DIR:-$HOME/.cache/cloudgate}
GO=${GO:-go}
export GOWORK=off
log() { printf 'cosign: %s\n' "$*" >&2; }

version=$(awk '$1 == "github.com/sigstore/cosign/v3" {print $2; exit} $1 == "require" && $2 == "github.com/sigstore/cosign/v3" {print $3; exit}' "$tools/go.mod")
[ -n "$version" ] || { echo "cosign: no github.com/sigstore/cosign/v3 version in $tools/go.mod" >&2; exit 1; }
key=$({ cat "$tools/go.sum" "$tools/go.mod"; "$GO" version; } | sha256sum | cut -c1-16)
mkdir -p "$cache/bin/$key"
bin=$(cd "$cache/bin/$key" && pwd)

if command -v flock >/dev/null 2>&1; then
  exec 9>"$bin/.lock"
  if ! flock -n 9; then
    log "another build holds $bin/.lock; waiting (at most 30 min)"
    flock -w 1800 9 || { log "timed out waiting for $bin/.lock"; exit 1; }
  fi
fi

if [ -x "$bin/cosign" ]; then
  log "cached at $bin/cosign"
else
  start=$SECONDS
  log "downloading the tools module's dependencies (go mod download)"
  (cd "$tools" && "$GO" mod download)
  log "building cosign $version (cold: ~9 min of CPU, ~5 min on 2 idle cores)"
  (cd "$tools" && "$GO" build -trimpath -ldflags "-s -w" -o "$bin/cosign.tmp" github.com/sigstore/cosign/v3/cmd/cosign)
  mv "$bin/cosign.tmp" "$bin/cosign"
  log "built in $((SECONDS - start)) s -> $bin/cosign"
fi
log "$("$bin/cosign" version 2>&1 | awk '/^GitVersion/ {print $0}')"
echo "CLOUDGATE_COSIGN=$bin/cosign"
