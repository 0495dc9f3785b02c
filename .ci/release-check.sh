#!/usr/bin/env bash
# make release-check VERSION=vX.Y.Z: checks that the tree, released as the tags vX.Y.Z (core
# module), cmd/, testkit/, providers/aws/, providers/gce/ and bench/vX.Y.Z (nested modules), builds for a user outside
# this repository. It builds a local module proxy (GOPROXY=file://...) holding those modules at
# VERSION from the working tree — each nested module's go.mod rewritten to require the core at
# VERSION, without the replace — then, in a scratch module with its own module cache, builds a
# program that imports the core and the AWS module, runs
# `go install .../providers/aws/cmd/cloud-controller-manager@VERSION` and the same for
# providers/gce, and builds the bench module's simcloud CCM and cloudgate-bench.
# (providers/aws/awsbench and providers/gce/gcebench are not released.)
# Other modules come from the shared module cache's download directory (no network needed;
# GOSUMDB=off because the checksum database is not reachable from here). -trimpath and
# CGO_ENABLED=0, as make image builds, so the build cache make image filled is reused.
# The release commit itself makes the same go.mod edit (printed at the end).
set -euo pipefail
VERSION=${VERSION:?set VERSION=vX.Y.Z}
[[ $VERSION =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || { echo "VERSION=$VERSION: want vX.Y.Z" >&2; exit 2; }
GO=${GO:-go}
ROOT=$(git rev-parse --show-toplevel)
CORE=github.com/cloudgate/cloudgate
AWS=$CORE/providers/aws
GCE=$CORE/providers/gce
BENCH=$CORE/bench
WORK=$(mktemp -d /tmp/cloudgate-release-check.XXXXXX)
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
PROXY=$WORK/proxy
# Module directories nested in the tree (their own go.mod) are not part of the core zip.
mapfile -t NESTED < <(cd "$ROOT" && git ls-files -co --exclude-standard '*/go.mod' | xargs -n1 dirname)

# stage MODULE DIR: copies DIR's files (tracked or new, not ignored) minus nested modules into
# a module zip MODULE@VERSION in the proxy; prints the staged directory.
stage() {
  local mod=$1 dir=$2 stage=$WORK/stage/$1@$VERSION
  mkdir -p "$stage"
  (cd "$ROOT/$dir" && git ls-files -co --exclude-standard .) | while read -r f; do
    local p=${dir:+$dir/}$f skip=
    for n in "${NESTED[@]}"; do
      [[ $n != "$dir" && $p == "$n/"* ]] && skip=1
    done
    [[ -n $skip || ! -f $ROOT/$p ]] && continue
    mkdir -p "$stage/$(dirname "$f")"; cp "$ROOT/$p" "$stage/$f"
  done
  echo "$stage"
}
publish() { # MODULE STAGEDIR
  local mod=$1 stage=$2 d=$PROXY/$1/@v
  mkdir -p "$d"
  (cd "$WORK/stage" && zip -qr -X "$d/$VERSION.zip" "$mod@$VERSION")
  cp "$stage/go.mod" "$d/$VERSION.mod"
  printf '{"Version":"%s","Time":"%s"}\n' "$VERSION" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$d/$VERSION.info"
  echo "$VERSION" > "$d/list"
}
# released DIR: DIR's staged go.mod as released: every replace of a module of this repository
# dropped, each such requirement at VERSION.
released() {
  (cd "$1" && for m in $($GO mod edit -json | grep -o '"Path": "'"$CORE"'[^"]*"' | cut -d'"' -f4 | sort -u); do
    [[ $m == "$CORE" || $m == "$CORE"/* ]] || continue
    $GO mod edit -dropreplace="$m"
    grep -q "^[[:space:]]*$m v\|^require $m v" go.mod && $GO mod edit -require="$m@$VERSION"
  done; true)
}
core=$(stage $CORE "")
publish $CORE "$core"
for d in cmd testkit providers/aws providers/gce bench; do
  st=$(stage $CORE/$d $d)
  released "$st"
  publish $CORE/$d "$st"
done
echo "release-check: proxy with $CORE, $CORE/cmd, $CORE/testkit, $AWS, $GCE and $BENCH at $VERSION in $PROXY"

export GOPROXY="file://$PROXY,file://$($GO env GOMODCACHE)/cache/download" GOMODCACHE=$WORK/modcache \
  GOSUMDB=off GOFLAGS='-mod=mod -trimpath' CGO_ENABLED=0 GOWORK=off GOTOOLCHAIN=local
mkdir -p "$WORK/user" && cd "$WORK/user"
$GO mod init example.com/user >/dev/null 2>&1
cat > main.go <<'GO'
// A user's CCM: cloudgate in front of the AWS provider with batching, from the released modules.
package main

import (
	"fmt"

	"github.com/cloudgate/cloudgate/provider"
	_ "github.com/cloudgate/cloudgate/providers/aws/awsbatch"
)

func main() { fmt.Println(provider.DefaultConfig().Cache) }
GO
$GO get $AWS@$VERSION $CORE@$VERSION
$GO build -o /dev/null .
echo "release-check: a scratch module builds against $AWS@$VERSION and $CORE@$VERSION without replace"
GOBIN=$WORK/bin $GO install $AWS/cmd/cloud-controller-manager@$VERSION
ver=$("$WORK/bin/cloud-controller-manager" --version)
echo "$ver"
# Unstamped (go install), --version falls back to the module version Go recorded.
grep -q "^cloudgate $VERSION " <<<"$ver" || { echo "release-check: --version does not name cloudgate $VERSION" >&2; exit 1; }
grep -q "^  k8s.io/cloud-provider-aws v" <<<"$ver" || { echo "release-check: --version does not name the AWS provider's version" >&2; exit 1; }
echo "release-check: go install $AWS/cmd/cloud-controller-manager@$VERSION works; --version names $VERSION"
# The GCE module: its CCM installs by its own version, as a user outside the repository gets it.
GOBIN=$WORK/bin-gce $GO install $GCE/cmd/cloud-controller-manager@$VERSION
ver=$("$WORK/bin-gce/cloud-controller-manager" --version)
echo "$ver"
grep -q "^cloudgate $VERSION " <<<"$ver" || { echo "release-check: the GCE CCM's --version does not name cloudgate $VERSION" >&2; exit 1; }
grep -q "^  k8s.io/cloud-provider-gcp/providers v" <<<"$ver" || { echo "release-check: the GCE CCM's --version does not name the GCE provider's version" >&2; exit 1; }
echo "release-check: go install $GCE/cmd/cloud-controller-manager@$VERSION works; --version names $VERSION"
# The benchmark module (its own go.mod, so gonum/plot and prometheus/prometheus stay out of the
# core's graph): the simcloud CCM and cloudgate-bench build from the released modules. A
# separate `go get`, after the user program above was built against the core alone.
$GO get $BENCH@$VERSION
$GO build -o /dev/null $BENCH/cmd/cloud-controller-manager $BENCH/cmd/cloudgate-bench
echo "release-check: $BENCH/cmd/cloud-controller-manager and $BENCH/cmd/cloudgate-bench build from $BENCH@$VERSION"
echo "release-check OK. Release: in cmd, testkit, providers/aws, providers/gce and bench drop the replace of each"
echo "  $CORE module and require it at $VERSION (as released() above does), go mod tidy,"
echo "commit, then tag $VERSION, cmd/$VERSION, testkit/$VERSION, providers/aws/$VERSION, providers/gce/$VERSION and bench/$VERSION on that commit."
