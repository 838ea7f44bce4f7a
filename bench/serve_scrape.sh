#!/usr/bin/env bash
# `ibscope serve` benchmark: scrape latency (p50/p99 over SCRAPES scrapes of /metrics, taken
# while sweeps run), exposition size, and the exporter's own sweep, render and compression
# times, on a generated 3-level fat tree under ibsim (OpenSM up). With OLD=BINARY it runs
# that binary first and then this tree's, one after the other on the same simulated fabric,
# and prints both.
#
#   bench/serve_scrape.sh                    # 2048 hosts, 300 scrapes, --interval 2
#   HOSTS=8192 SCRAPES=100 INTERVAL=5 bench/serve_scrape.sh
#   OLD=/tmp/ibscope-before bench/serve_scrape.sh    # before and after a change
#   SERVE_ARGS="--counters errors --active-only" bench/serve_scrape.sh
#   IBSCOPE=/path/to/ibscope bench/serve_scrape.sh   # that binary, not a fresh build
#
# Each scrape is one curl process on a new connection (no keep-alive: the worst case) that
# sends what Prometheus sends, `Accept-Encoding: gzip`, and discards the body as it comes.
# The exporter logs at debug level its own time per request (until the response is ready)
# and, per sweep, the sweep and the render with its compression (one thread: its wall
# time bounds its CPU time). The machine has 2 cores: ibsim, the sweeper and curl share
# them, so `uptime` is printed before and after.
#
# Needs: ibsim-utils, libumad2sim0, opensm, curl.
set -euo pipefail

HOSTS=${HOSTS:-2048}
RADIX=${RADIX:-36}
SCRAPES=${SCRAPES:-300}
INTERVAL=${INTERVAL:-2}
OUTSTANDING=${OUTSTANDING:-64}
PORT=${PORT:-19315}
SERVE_ARGS=${SERVE_ARGS:-}

root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${IBSCOPE:-}" ]; then
    ibscope=$(realpath "$IBSCOPE")
else
    cargo build --release --quiet --manifest-path "$root/Cargo.toml" --bin ibscope
    ibscope="$root/target/release/ibscope"
fi

work=$(mktemp -d /tmp/ibscope-bench.XXXXXX)
export IBSCOPE_SIM_DIR="$work/sims"
# Clients keep their fake sysfs in the current directory.
cd "$work"
name="serve-$HOSTS-$$"
serve_pid=""
sim_up=""
cleanup() {
    if [ -n "$serve_pid" ]; then kill "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; fi
    if [ -n "$sim_up" ]; then "$ibscope" sim down --name "$name" >/dev/null 2>&1 || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

echo "before: $(uptime)"
topo="$work/ft3-$HOSTS.topo"
"$ibscope" sim gen fat-tree --levels 3 --radix "$RADIX" --hosts "$HOSTS" -o "$topo" >/dev/null
eval "$("$ibscope" sim up --name "$name" "$topo" 2>"$work/up.err")"
sim_up=1

# one LABEL BINARY: start BINARY's serve on the fabric, scrape it, stop it, print figures.
one() {
local label=$1 bin=$2
# shellcheck disable=SC2086 # SERVE_ARGS is a list of words
IBSCOPE_LOG=ibscope=debug NO_COLOR=1 "$bin" serve --listen "127.0.0.1:$PORT" \
    --interval "$INTERVAL" --max-outstanding "$OUTSTANDING" $SERVE_ARGS \
    >"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!

url="http://127.0.0.1:$PORT"
# Wait for the first sweep (discovery + one sweep).
started=$(date +%s.%N)
until curl -sf "$url/healthz" >/dev/null 2>&1; do
    kill -0 "$serve_pid" 2>/dev/null || { cat "$work/serve.err" >&2; exit 1; }
    sleep 0.2
done
first=$(echo "$(date +%s.%N) - $started" | bc)

# Scrape while sweeps keep running in the background thread.
: >"$work/lat"
for ((i = 0; i < SCRAPES; i++)); do
    curl -s -H 'Accept-Encoding: gzip' -o /dev/null \
        -w '%{time_total} %{size_download} %{time_starttransfer}\n' "$url/metrics" >>"$work/lat"
done
curl -s -o "$work/metrics" "$url/metrics"
kill -TERM "$serve_pid"
wait "$serve_pid" || true
serve_pid=""

# pct P [COLUMN] [FILE]: the P-th percentile of a column, in ms.
pct() {
    awk -v c="${2:-1}" '{print $c}' "${3:-$work/lat}" | sort -n |
        awk -v p="$1" '{ v[NR] = $1 } END { i = int(NR * p / 100 + 0.999); if (i < 1) i = 1; printf "%.1f", v[i] * 1000 }'
}
# A family's one sample, with or without labels (summed when there are several).
metric() { awk -v m="$1" '$1 == m || index($1, m "{") == 1 { s += $2; n++ } END { if (n) print s }' "$work/metrics"; }
# The exporter's own time per /metrics request (debug log), in seconds.
# (Older binaries do not log it: then the line says n/a.)
{ sed 's/\x1b\[[0-9;]*m//g' "$work/serve.err" | grep ' served path="/metrics"' | grep 'gzip=true' |
    sed -n 's/.* us=\([0-9]*\).*/\1/p' | awk '{ print $1 / 1e6 }'; } >"$work/server" || true
# Sweeper phases, averaged (seconds): the sweep, then the render, which compresses each
# family as it is written.
phases=$({ sed 's/\x1b\[[0-9;]*m//g' "$work/serve.err" | grep ' swept' || true; } |
    sed -n 's/.*sweep_us=\([0-9]*\) render_us=\([0-9]*\).*/\1 \2/p' |
    awk '{ s += $1; r += $2; n++ } END { if (n) printf "sweep %.3f s, render and compression %.3f s (mean of %d)", s/n/1e6, r/n/1e6, n }')

nodes=$(metric ibscope_fabric_nodes)
ports=$(metric ibscope_sweep_ports)
bytes=$(awk 'END { print $2 }' "$work/lat")
series=$(grep -vc '^#' "$work/metrics")
echo "== $label: $bin"
printf 'fabric: %s hosts, %s nodes, %s ports swept; exposition %s series, %.1f MiB text, %.1f MiB gzip\n' \
    "$HOSTS" "$nodes" "$ports" "$series" "$(echo "$(stat -c %s "$work/metrics") / 1048576" | bc -l)" \
    "$(echo "$bytes / 1048576" | bc -l)"
printf 'first /healthz ok after %.2f s (discovery %.3f s)\n' "$first" "$(metric ibscope_discovery_duration_seconds)"
printf 'sweep: %.3f s, %s MADs (last), %s sweeps during the run\n' \
    "$(metric ibscope_sweep_duration_seconds)" "$(metric ibscope_sweep_mads)" "$(metric ibscope_sweeps_total)"
printf 'sweeper phases: %s\n' "$phases"
printf 'scrape latency over %s scrapes: p50 %s ms, p99 %s ms, max %s ms (first byte: p50 %s ms, p99 %s ms)\n' \
    "$SCRAPES" "$(pct 50)" "$(pct 99)" "$(pct 100)" "$(pct 50 3)" "$(pct 99 3)"
if [ -s "$work/server" ]; then
    printf 'exporter side (request received to response ready): p50 %s ms, p99 %s ms, max %s ms\n' \
        "$(pct 50 1 "$work/server")" "$(pct 99 1 "$work/server")" "$(pct 100 1 "$work/server")"
else
    echo 'exporter side: n/a (no debug timing in the log)'
fi
}

if [ -n "${OLD:-}" ]; then one old "$(realpath "$OLD")"; fi
one new "$ibscope"
echo "after: $(uptime)"
if [ -n "${KEEP:-}" ]; then cp "$work/lat" "$work/server" "$work/serve.err" "$KEEP/"; fi
