#!/usr/bin/env bash
# Regenerates bench/RESULTS.aws.md (the "cloudgate on AWS" section that
# bench/results.sh appends to bench/RESULTS.md) from providers/aws/awsbench/cmd/aws-bench:
# the steady table at two ec2sim latencies, each measured over whole status
# cycles with the columns side by side, and the scale-up at the same
# latencies. Every table below it is the command's own output; the commit it
# ran on is in each table's conditions line. Run from the repository root:
# make bench-results-aws. Takes ~30-40 min of wall time (real time; the runs
# go side by side under one measurement lock).
#
# With HOUR set (the default, 1h) every steady size of a latency runs in one
# process, sizes and columns side by side (-sizes-parallel: 6 worlds, each
# its own ec2sim), measured over HOUR of real time after HOUR_WARMUP and
# over CYCLES_HOUR whole status cycles of the same run (the derivation it is
# compared with); those runs take HOUR_WARMUP + HOUR (~70 min) and do NOT
# hold the measurement lock (their figures are real-time whatever else runs;
# each section prints the load average at start and end and sampled every
# minute). The scale-ups run under the lock. HOUR= (empty) instead runs the
# steady sizes as separate cycle-only runs under the lock, as before.
#
# Knobs (environment): SIZES_SMALL (cycles 2) and SIZES_LARGE (cycles 1)
# steady node counts, LATENCIES ("base:jitter" pairs), PER_ITEM, SCALEUP
# nodes, SEEDS, WINDOW (the cap of every cycle-only steady run), HOUR,
# HOUR_WARMUP, CYCLES_HOUR; for a quick check of the whole script e.g.
# HOUR=2m HOUR_WARMUP=30s SIZES_SMALL=50 SIZES_LARGE=100 SCALEUP=20 (its
# cycles stay open: "—"; HOUR_WARMUP must be >= the 20 s derivation
# window). STOP_AT (a date, e.g. 10:40) stops the runs still going then, and
# bounds the wait for the measurement lock: their sections say so. OUT
# (default bench/RESULTS.aws.md), TITLE (its section's title). REUSE=DIR takes a run's output from
# DIR/NAME.md (stdout of an earlier run of this script that was interrupted
# before writing the file) instead of running it; its section says so.
set -euo pipefail
GO=${GO:-go}
out=${OUT:-bench/RESULTS.aws.md}
SIZES_SMALL=${SIZES_SMALL-1000}
SIZES_LARGE=${SIZES_LARGE-5000}
CYCLES_SMALL=${CYCLES_SMALL:-2}
CYCLES_LARGE=${CYCLES_LARGE:-1}
LATENCIES=${LATENCIES:-"40ms:20ms 120ms:60ms"}
PER_ITEM=${PER_ITEM:-500us}
SCALEUP=${SCALEUP:-1000}
SEEDS=${SEEDS:-1}
WINDOW=${WINDOW:-90m}
HOUR=${HOUR-1h}
HOUR_WARMUP=${HOUR_WARMUP:-10m}
CYCLES_HOUR=${CYCLES_HOUR:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LOGS=${LOGS:-$tmp} # each run's progress (stderr)

bin="$tmp/aws-bench"
(cd providers/aws/awsbench && $GO build -o "$bin" ./cmd/aws-bench) # its own module
commit=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain)" ]; then commit="$commit+dirty"; fi
# The binary prints it in its conditions line (a build may carry no VCS stamp).
export CLOUDGATE_COMMIT=$commit

# runs[i] is "name|arguments" (in the file's order); hours[] are the names
# of the measured-hour runs (outside the lock), the others run under it.
runs=() hours=()
for lat in $LATENCIES; do
	base=${lat%%:*} jit=${lat##*:}
	common="-mode table -parallel -seeds $SEEDS -large-seeds $SEEDS -latency $base -jitter $jit -latency-per-item $PER_ITEM"
	sizes=$(echo $SIZES_SMALL $SIZES_LARGE | tr ' ' ,)
	if [ -n "$HOUR" ] && [ -n "$sizes" ]; then
		runs+=("steady-hour-$base|$common -sizes $sizes -sizes-parallel -cycles $CYCLES_HOUR -hour $HOUR -hour-warmup $HOUR_WARMUP -scaleup-nodes 0")
		hours+=("steady-hour-$base")
	else
		[ -n "$SIZES_SMALL" ] && runs+=("steady-small-$base|$common -sizes $SIZES_SMALL -cycles $CYCLES_SMALL -scaleup-nodes 0 -table-window $WINDOW")
		[ -n "$SIZES_LARGE" ] && runs+=("steady-large-$base|$common -sizes $SIZES_LARGE -cycles $CYCLES_LARGE -scaleup-nodes 0 -table-window $WINDOW")
	fi
	[ "$SCALEUP" != 0 ] && runs+=("scaleup-$base|$common -sizes '' -scaleup-nodes $SCALEUP")
done
is_hour() { local h; for h in "${hours[@]}"; do [ "$h" = "$1" ] && return 0; done; return 1; }

# start NAME ARGS: one run in the background (stopped at STOP_AT); pid in pid[NAME].
declare -A pid reused
start() {
	local limit=""
	if [ -n "${STOP_AT:-}" ]; then
		local stop=$(( $(date -d "$STOP_AT" +%s) - $(date +%s) ))
		limit="timeout $(( stop > 1 ? stop : 1 ))"
	fi
	if [ -n "${REUSE:-}" ] && [ -s "$REUSE/$1.md" ]; then
		echo "$(date -u '+%H:%M:%S UTC') $1: reusing $REUSE/$1.md" >&2
		cp "$REUSE/$1.md" "$tmp/$1.md"
		reused[$1]=1 pid[$1]=""
		return
	fi
	echo "$(date -u '+%H:%M:%S UTC') running: aws-bench $2 (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
	eval "$limit \"$bin\" $2" > "$tmp/$1.md" 2> "$LOGS/$1.log" &
	pid[$1]=$!
}
finish() {
	if [ -z "${pid[$1]}" ]; then
		echo ok > "$tmp/$1.rc" # reused
	elif wait "${pid[$1]}"; then echo ok > "$tmp/$1.rc"; else echo "exit $?" > "$tmp/$1.rc"; fi
	echo "$(date -u '+%H:%M:%S UTC') $1: $(cat "$tmp/$1.rc") (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
}
# The measured hours first, outside the lock: they last HOUR_WARMUP + HOUR.
for r in "${runs[@]}"; do
	if is_hour "${r%%|*}"; then start "${r%%|*}" "${r#*|}"; fi
done
if [ "${#runs[@]}" -gt "${#hours[@]}" ]; then
	echo "waiting for /tmp/cloudgate-measure.lock" >&2
	exec 9>/tmp/cloudgate-measure.lock
	# With STOP_AT, wait for the lock until then at most: a lock another
	# measurement holds past it leaves these runs not run (their sections
	# say so) instead of the measured hours unwritten.
	wait_lock=()
	if [ -n "${STOP_AT:-}" ]; then
		left=$(( $(date -d "$STOP_AT" +%s) - $(date +%s) ))
		wait_lock=(-w "$(( left > 1 ? left : 1 ))")
	fi
	if flock "${wait_lock[@]}" 9; then
		echo "lock held from $(date -u '+%H:%M:%S UTC')" >&2
		for r in "${runs[@]}"; do
			if ! is_hour "${r%%|*}"; then start "${r%%|*}" "${r#*|}"; fi
		done
		for r in "${runs[@]}"; do
			if ! is_hour "${r%%|*}"; then finish "${r%%|*}"; fi
		done
		flock -u 9
		echo "lock released at $(date -u '+%H:%M:%S UTC')" >&2
	else
		echo "$(date -u '+%H:%M:%S UTC'): the measurement lock stayed busy until STOP_AT; the runs under it did not run" >&2
		for r in "${runs[@]}"; do
			if ! is_hour "${r%%|*}"; then echo "not run: the measurement lock stayed busy until $STOP_AT" > "$tmp/${r%%|*}.rc"; fi
		done
	fi
fi
for r in "${hours[@]}"; do finish "$r"; done

{
	echo "## ${TITLE:-cloudgate on AWS (issues 14, 20)}"
	echo
	echo "Generated by \`make bench-results-aws\` (bench/aws-results.sh) on $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit."
	echo "The **unmodified** AWS cloud provider (\`k8s.io/cloud-provider-aws\` v1.37.1) three ways on the"
	echo "simulated EC2 (\`providers/aws/ec2sim\`: EC2's documented DescribeInstances bucket, 100 tokens"
	echo "refilled at 20/s, HTTP 503 RequestLimitExceeded), driven by bench's cluster (the real cloud-node,"
	echo "cloud-node-lifecycle and service controllers of k8s.io/cloud-provider v0.37.2 on a fake API"
	echo "server, kube clients 20 QPS / burst 30); scale-up bound \`bench.InitBound\`."
	echo
	echo "| column | what |"
	echo "|---|---|"
	echo "| \`aws\` | the AWS provider alone: its describe-instance batcher (100 ms idle, 1 s max, 500 IDs), the SDK's standard retryer, CCM defaults |"
	echo "| \`aws+cloudgate\` | cloudgate's \`DefaultConfig()\` in front (cache, limiter at EC2's bucket; the provider has no batch interface) |"
	echo "| \`aws+cloudgate+adapter\` | **the default install**: cloudgate in front of \`awsbatch\` (\`upstream.name: aws-batch\`, the chart's default): batching on, \`batch.listPrefetch\` (on by default) |"
	echo
	echo "Each steady section has a **per status round** table (equal work: one round is every Node's InstanceMetadata once,"
	echo "whatever pace a column sweeps at), with what the user must configure for each column and the staleness it accepts."
	echo "The scale-up bound counts the 3 node-controller requests per Node the simulator counts (Node update, status patch,"
	echo "\"Synced\" Event), as the load benchmark's does."
	echo
	echo "**Time.** Real time, no compression, and not virtual time: the provider's HTTP client is an"
	echo "unexported package variable of cloud-provider-aws (\`defaultHTTPClient\`, a real \`net.Dialer\`),"
	echo "so its transport cannot be made in-memory from outside, and its batcher and the SDK's retryer keep"
	if [ -n "$HOUR" ]; then
		echo "real-time timers. **The steady hour is measured**: at $SIZES_SMALL and $SIZES_LARGE nodes every column runs"
		echo "side by side (each size and column its own simulated account: own ec2sim, own cluster) and is"
		echo "counted over $HOUR of real time starting $HOUR_WARMUP after its controllers' start. Next to it, the"
		echo "derivation from the same run: its first $CYCLES_HOUR **whole status cycles** (a round of N lookups plus"
		echo "the 5 min period until the next round starts) scaled to 3600 s, the paper status loop fed with"
		echo "the measured first round, and the derivation from the first 20 s the table printed before."
		echo "The measured-hour runs went without the measurement lock (other work ran on this shared 2-core"
		echo "machine meanwhile); the scale-ups went under it. Each conditions line has the load average at"
		echo "start and end, and the hour section the load average sampled every minute."
	else
		echo "real-time timers. Each steady column is measured over **whole status cycles** (a round of N"
		echo "lookups plus the 5 min period until the next round starts; $CYCLES_SMALL cycle(s) at $SIZES_SMALL nodes,"
		echo "$CYCLES_LARGE at $SIZES_LARGE), the columns side by side on separate simulated accounts, and the"
		echo "hour is the measured count scaled to 3600 s; the derivation the table printed before (from the"
		echo "first 20 s) stands next to it. All runs below went side by side under one measurement lock on a"
		echo "shared 2-core machine; its load average is in each conditions line."
	fi
	echo
	echo "**Latency (an assumption).** AWS publishes no latency figures for the EC2 API. Two settings"
	echo "bracket what operators see for small DescribeInstances calls: mean 50 ms and mean 150 ms"
	echo "(base + uniform jitter, below), plus $PER_ITEM per instance returned (so a 1,000-instance page"
	echo "costs ~0.5 s more). The jitter's random source is seeded with the run's seed."
	for r in "${runs[@]}"; do
		name=${r%%|*} args=${r#*|}
		echo
		echo "### $name"
		echo
		echo "Command: \`cd providers/aws/awsbench && go run ./cmd/aws-bench $args\`"
		echo
		if [ -n "${reused[$name]:-}" ]; then
			echo "*Reused*: this run's output was taken from an earlier, interrupted run of this script (REUSE=$REUSE), not re-run; its conditions line names the commit and time it ran on."
			echo
		fi
		if [ "$(cat "$tmp/$name.rc")" = ok ]; then
			cat "$tmp/$name.md"
		else
			echo "**Not finished** ($(cat "$tmp/$name.rc"); STOP_AT ${STOP_AT:-unset})."
			if [ -s "$LOGS/$name.log" ]; then
				echo "Its last progress lines:"
				echo
				echo '```'
				grep -v '^[IWE][0-9]' "$LOGS/$name.log" | tail -4 || true
				echo '```'
			fi
		fi
	done
} > "$out"
echo "wrote $out" >&2
