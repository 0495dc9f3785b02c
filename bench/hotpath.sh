#!/usr/bin/env bash
# The hot-path benchmarks, all from one run: admission (a token bucket with
# a token available), the cache-layer and provider cached hits, and the
# parallel cached reads at -cpu 1,2 next to a control benchmark that shares
# nothing (what the machine allows in the same run). The only bound is a
# sanity bound: a cache hit through the provider under 2 us (-race off; a
# CCM makes at most a few hundred lookups a second, so upstream calls, not
# nanoseconds, are what the benchmark in bench/ measures).
#
# It holds the measurement lock (/tmp/cloudgate-measure.lock) for the whole
# run and prints the load average at start and end: figures taken while the
# machine is busy elsewhere are not comparable. Run from the repository
# root: bash bench/hotpath.sh (make bench-hotpath). COUNT (default 5) sets
# -count; the summary gives min and median ns/op over the runs.
set -euo pipefail
GO=${GO:-go}
COUNT=${COUNT:-5}
LOCK=${LOCK:-/tmp/cloudgate-measure.lock}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

exec 9>"$LOCK"
echo "waiting for $LOCK ..." >&2
flock 9

start_load=$(cut -d' ' -f1-3 /proc/loadavg)
run() { # packages... ; benchmark regexp and -cpu in $re and $cpu
	local cmd="$GO test -run '^\$' -bench '$re' -benchmem -cpu $cpu -count $COUNT $*"
	echo "running: $cmd" >&2
	eval "$cmd" | tee -a "$tmp/bench.txt" >&2
}
re='^(BenchmarkBucketWaitUncontended)$' cpu=1 run ./limiter/
re='^(BenchmarkCacheHit|BenchmarkCacheHitParallel|BenchmarkControlParallel)$' cpu=1,2 run ./cache/
re='^(BenchmarkProviderCacheHit|BenchmarkProviderCacheHitParallel|BenchmarkControlParallel)$' cpu=1,2 run ./provider/
end_load=$(cut -d' ' -f1-3 /proc/loadavg)

# One line per (package, benchmark, GOMAXPROCS): min and median ns/op.
awk '
	/^pkg: / { pkg = $2; sub(/.*\//, "", pkg) }
	/^Benchmark/ {
		name = $1; cpu = 1
		if (match(name, /-[0-9]+$/)) { cpu = substr(name, RSTART + 1); name = substr(name, 1, RSTART - 1) }
		for (i = 2; i <= NF; i++) if ($(i+1) == "ns/op") v = $i
		k = pkg " " name " " cpu; n[k]++; val[k, n[k]] = v
	}
	END {
		for (k in n) {
			m = n[k]
			for (i = 1; i <= m; i++) s[i] = val[k, i] + 0
			for (i = 2; i <= m; i++) { x = s[i]; for (j = i - 1; j >= 1 && s[j] > x; j--) s[j+1] = s[j]; s[j+1] = x }
			med = (m % 2) ? s[(m+1)/2] : (s[m/2] + s[m/2+1]) / 2
			printf "%s %.2f %.2f %d\n", k, s[1], med, m
		}
	}' "$tmp/bench.txt" | sort > "$tmp/summary.txt"

med() { awk -v k="$1 $2 $3" '$1" "$2" "$3 == k {print $5}' "$tmp/summary.txt"; }

echo
echo "# hot path, $(date -u '+%Y-%m-%d %H:%M UTC'), $($GO version | cut -d' ' -f3-), $(nproc) CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo))"
echo "# load average at start: $start_load; at end: $end_load"
echo
printf '%-10s %-42s %4s %10s %10s %5s\n' package benchmark cpu min median runs
awk '{printf "%-10s %-42s %4s %10s %10s %5s\n", $1, $2, $3, $4, $5, $6}' "$tmp/summary.txt"
echo
ph=$(med provider BenchmarkProviderCacheHit 1)
echo "provider cache hit (BenchmarkProviderCacheHit, median, cpu 1): $ph ns/op (sanity bound: 2000 ns/op)"
