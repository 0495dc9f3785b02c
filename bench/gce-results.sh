#!/usr/bin/env bash
# Regenerates providers/gce/RESULTS.gce.md from providers/gce/gcebench/cmd/gce-bench: the
# unmodified GCE provider alone and behind cloudgate's default install (gce-batch) on
# gcesim — steady Compute API calls per hour at each size, nodes joining each size's
# cluster, and a scale-up with routes. Run from the repository root: make bench-results-gce.
# Real time, ~15 min on 2 cores (the scale-ups' seconds are real; the load average is in the
# file's header).
#
# Knobs (environment): SIZES (steady node counts, comma-separated), JOIN (nodes joining each),
# ROUTE_NODES (nodes joining with routes), SEED, TIMEOUT (per run), OUT (the results file).
# A quick check of the whole script: SIZES=50 JOIN=20 ROUTE_NODES=30 OUT=/tmp/gce.md.
set -euo pipefail
GO=${GO:-go}
out=${OUT:-providers/gce/RESULTS.gce.md}
SIZES=${SIZES:-1000,5000}
JOIN=${JOIN:-500}
ROUTE_NODES=${ROUTE_NODES:-1000}
SEED=${SEED:-1}
TIMEOUT=${TIMEOUT:-15m}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin="$tmp/gce-bench"
(cd providers/gce/gcebench && $GO build -o "$bin" ./cmd/gce-bench) # its own module
commit=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain)" ]; then commit="$commit+dirty"; fi
export CLOUDGATE_COMMIT=$commit
"$bin" -sizes "$SIZES" -join "$JOIN" -route-nodes "$ROUTE_NODES" -seed "$SEED" -timeout "$TIMEOUT" \
  > "$tmp/out.md" 2> "${LOGS:-$tmp}/gce-bench.log" || { tail -50 "${LOGS:-$tmp}/gce-bench.log" >&2; exit 1; }
mv "$tmp/out.md" "$out"
echo "wrote $out" >&2
