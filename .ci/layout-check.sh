#!/usr/bin/env bash
# make lint's layout checks (docs/architecture.md, "Layout"):
#  1. the root module's packages import only packages of a lower layer (the table below), so no
#     import runs back up; a new package must be placed in the table;
#  2. no module imports another module's internal/ packages (Go allows it inside one repository
#     path, so it is checked here);
#  3. the root module is the library: every module its go.mod requires directly provides a
#     package its packages or their tests import, and none of the CCM application's modules
#     (the apiserver, controller-manager, etcd, grpc, cel, cobra, zap; the otel API comes
#     with component-base's metrics, which the library uses) is among the library's dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
CORE=github.com/cloudgate/cloudgate
fail=0

# 1. Layers of the root module, lowest first.
declare -A layer=(
  [cache]=0 [limiter]=0 [internal/batcher]=0 [provider/floor]=0 [dashboards]=0 [deploy]=0 [docs]=0
  [limiter/fleet]=1
  [limiter/fleet/fleettest]=2 [internal/recorder]=2
  [metrics]=3
  [provider]=4 [metrics/metricstest]=4
)
while read -r pkg imports; do
  p=${pkg#"$CORE"}; p=${p#/}
  [[ -n ${layer[$p]+x} ]] || { echo "layout: package $p is not in .ci/layout-check.sh's layer table: place it there"; fail=1; continue; }
  for i in $imports; do
    [[ $i == "$CORE"/* ]] || continue
    q=${i#"$CORE"/}
    if [[ -z ${layer[$q]+x} ]]; then
      echo "layout: $p imports $q, which is not in the layer table"; fail=1
    elif (( layer[$q] >= layer[$p] )); then
      echo "layout: $p (layer ${layer[$p]}) imports $q (layer ${layer[$q]}): imports run down only"; fail=1
    fi
  done
done < <($GO list -f '{{.ImportPath}} {{join .Imports " "}}' ./...)

# 2. Each module's packages, tests included, import no other module's internal/.
for gomod in $(git ls-files '*go.mod' | grep -v '^\.ci/'); do
  dir=$(dirname "$gomod")
  mod=$(cd "$dir" && $GO list -m)
  for imp in $(cd "$dir" && $GO list -test -f '{{join .Imports " "}}' ./... | tr ' ' '\n' | sort -u); do
    [[ $imp == "$CORE"/*internal* ]] || continue
    [[ $imp == "$mod"/* && $mod != "$CORE" ]] && continue
    m=$(cd "$dir" && $GO list -f '{{with .Module}}{{.Path}}{{end}}' "$imp")
    [[ $m == "$mod" ]] && continue
    echo "layout: module $mod imports $imp of module $m: import a public package instead"; fail=1
  done
done

# 3. The root module's graph is the library's.
used=$($GO list -deps -test -f '{{with .Module}}{{if not .Main}}{{.Path}}{{end}}{{end}}' ./... | sort -u)
direct=$(awk '/^require \(/{b=1;next} b&&/^\)/{b=0} b&&!/\/\/ indirect/{print $1} /^require [^(]/&&!/\/\/ indirect/{print $2}' go.mod)
for m in $direct; do
  grep -qxF "$m" <<<"$used" || { echo "layout: go.mod requires $m directly but no root package or test imports it"; fail=1; }
done
app=$($GO list -deps -test -f '{{with .Module}}{{.Path}}{{end}}' ./... | sort -u |
  grep -E '^(k8s\.io/apiserver|k8s\.io/controller-manager|go\.etcd\.io/|google\.golang\.org/grpc|cel\.dev/|github\.com/spf13/cobra|go\.uber\.org/zap)' || true)
[[ -z $app ]] || { echo "layout: the library depends on the CCM application's modules (they belong in cmd/):"; echo "$app"; fail=1; }

(( fail == 0 )) && echo "layout: OK (layers, internal/ imports, root module graph)"
exit $fail
