#!/usr/bin/env bash
# `ibscope serve` benchmark: scrape latency (p50/p99 over SCRAPES scrapes of /metrics, taken
# while sweeps run), exposition size, and the exporter's own sweep and discovery times, on
# a generated 3-level fat tree under ibsim (OpenSM up).
#
#   bench/serve_scrape.sh                    # 2048 hosts, 300 scrapes, --interval 2
#   HOSTS=8192 SCRAPES=100 INTERVAL=5 bench/serve_scrape.sh
#
# Needs: ibsim-utils, libumad2sim0, opensm, curl.
set -euo pipefail

HOSTS=${HOSTS:-2048}
RADIX=${RADIX:-36}
SCRAPES=${SCRAPES:-300}
INTERVAL=${INTERVAL:-2}
OUTSTANDING=${OUTSTANDING:-64}
PORT=${PORT:-19315}

root=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release --quiet --manifest-path "$root/Cargo.toml" --bin ibscope
ibscope="$root/target/release/ibscope"

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

topo="$work/ft3-$HOSTS.topo"
"$ibscope" sim gen fat-tree --levels 3 --radix "$RADIX" --hosts "$HOSTS" -o "$topo" >/dev/null
eval "$("$ibscope" sim up --name "$name" "$topo" 2>"$work/up.err")"
sim_up=1

"$ibscope" serve --listen "127.0.0.1:$PORT" --interval "$INTERVAL" \
    --max-outstanding "$OUTSTANDING" >"$work/serve.out" 2>"$work/serve.err" &
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
    curl -s -H 'Accept-Encoding: gzip' -o "$work/metrics" -w '%{time_total} %{size_download}\n' "$url/metrics" >>"$work/lat"
done
curl -s -o "$work/metrics" "$url/metrics"

pct() { awk '{print $1}' "$work/lat" | sort -n | awk -v p="$1" '{ v[NR] = $1 } END { i = int(NR * p / 100 + 0.999); if (i < 1) i = 1; printf "%.1f", v[i] * 1000 }'; }
metric() { awk -v m="$1" '$1 == m { print $2 }' "$work/metrics"; }

nodes=$(metric ibscope_fabric_nodes)
ports=$(metric ibscope_sweep_ports)
bytes=$(awk 'END { print $2 }' "$work/lat")
series=$(grep -vc '^#' "$work/metrics")
printf 'fabric: %s hosts, %s nodes, %s ports swept; exposition %s series, %.1f MiB\n' \
    "$HOSTS" "$nodes" "$ports" "$series" "$(echo "$bytes / 1048576" | bc -l)"
printf 'first /healthz ok after %.2f s (discovery %.3f s)\n' "$first" "$(metric ibscope_discovery_duration_seconds)"
printf 'sweep: %.3f s, %s MADs (last), %s sweeps during the run\n' \
    "$(metric ibscope_sweep_duration_seconds)" "$(metric ibscope_sweep_mads)" "$(metric ibscope_sweeps_total)"
printf 'scrape latency over %s scrapes: p50 %s ms, p99 %s ms, max %s ms\n' \
    "$SCRAPES" "$(pct 50)" "$(pct 99)" "$(pct 100)"
