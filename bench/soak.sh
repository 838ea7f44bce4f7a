#!/usr/bin/env bash
# `ibscope serve` soak: the exporter runs for SOAK_SECONDS (default 600) on a simulated
# fabric while a client scrapes /metrics every SCRAPE_EVERY seconds and a fault script
# hits the fabric every FAULT_EVERY seconds, in turn:
#
#   unlink   a link goes down (ibsim Unlink, OpenSM resweep)
#   relink   it comes back (ReLink, resweep)
#   jump     a port's SymbolErrorCounter jumps to a new value (PerformanceSet)
#   freeze   ibsim stops answering for FREEZE seconds (SIGSTOP, then SIGCONT)
#   restart  ibsim and OpenSM are killed and started again on the same socket
#
# It reports scrapes served and failed (a failed scrape: no answer or not 200), scrape
# latency p50/p99, the RSS of serve and of its port's agent process after a WARMUP (10 s) and at
# the end (serve's growth must stay under 10%), and for each fault whether the metrics showed
# it: unlink/relink by ibscope_port_link_up of that port, jump by the counter's new value,
# freeze by more ibscope_node_scrape_timeouts_total (or ibscope_up 0), restart by
# ibscope_up going 0 then 1 with ibscope_port_reopens_total counting it. Exit 0 when no
# scrape failed, every fault was seen and RSS stayed within bounds; else 1.
#
#   bench/soak.sh                         # 10 minutes on examples/fabrics/demo.topo
#   SOAK_SECONDS=60 bench/soak.sh         # a short run
#   IBSCOPE=/path/to/ibscope bench/soak.sh   # that binary, not a fresh build
#
# Loopback only. The machine's load (uptime) is printed before and after: ibsim, OpenSM,
# the exporter and the scraper share its cores.
#
# Needs: ibsim-utils, libumad2sim0, opensm, curl.
set -euo pipefail

SOAK_SECONDS=${SOAK_SECONDS:-600}
SCRAPE_EVERY=${SCRAPE_EVERY:-0.2}
FAULT_EVERY=${FAULT_EVERY:-4}
FREEZE=${FREEZE:-3}
INTERVAL=${INTERVAL:-1}
WARMUP=${WARMUP:-10}
PORT=${PORT:-19316}
# The demo fabric: leaf-0003 port 7 is an uplink, leaf-0002 port 3 a host port.
FLAP_NODE=${FLAP_NODE:-L0003}
FLAP_PORT=${FLAP_PORT:-7}
FLAP_LABEL=${FLAP_LABEL:-leaf-0003}
JUMP_NODE=${JUMP_NODE:-L0002}
JUMP_PORT=${JUMP_PORT:-3}
JUMP_LABEL=${JUMP_LABEL:-leaf-0002}

root=$(cd "$(dirname "$0")/.." && pwd)
TOPOLOGY=${TOPOLOGY:-$root/examples/fabrics/demo.topo}
if [ -n "${IBSCOPE:-}" ]; then
    ibscope=$(realpath "$IBSCOPE")
else
    cargo build --quiet --manifest-path "$root/Cargo.toml" --bin ibscope
    ibscope="$root/target/debug/ibscope"
fi

work=$(mktemp -d /tmp/ibscope-soak.XXXXXX)
export IBSCOPE_SIM_DIR="$work/sims"
# serve's state directory (and its agent's fake sysfs) go here: checked at the end.
export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
cd "$work"
name="soak-$$"
serve_pid=""
scraper_pid=""
sim_up=""
cleanup() {
    if [ -n "$scraper_pid" ]; then kill "$scraper_pid" 2>/dev/null || true; fi
    if [ -n "$serve_pid" ]; then kill "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; fi
    if [ -n "$sim_up" ]; then
        ibsim_pid=$(sim_pid ibsim) && kill -CONT "$ibsim_pid" 2>/dev/null || true
        "$ibscope" sim down --name "$name" >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# sim_pid PROGRAM: the PID of the simulator's ibsim or opensm (from its state file).
sim_pid() {
    grep -A1 "\"$1\"" "$IBSCOPE_SIM_DIR/$name/state.json" | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p'
}
now() { date +%s.%N; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
agent_of() { pgrep -P "$1" | head -1; }

echo "before: $(uptime)"
eval "$("$ibscope" sim up --name "$name" "$TOPOLOGY" 2>"$work/up.err")"
sim_up=1

NO_COLOR=1 "$ibscope" serve --listen "127.0.0.1:$PORT" --interval "$INTERVAL" \
    >"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!
url="http://127.0.0.1:$PORT"
until curl -sf "$url/healthz" >/dev/null 2>&1; do
    kill -0 "$serve_pid" 2>/dev/null || { cat "$work/serve.err" >&2; exit 1; }
    sleep 0.2
done

# The scraper: one line per scrape: time, HTTP code, seconds, ibscope_up,
# ibscope_sample_stale, ibscope_port_reopens_total, the jump port's SymbolErrorCounter,
# the flap port's link_up, the sum of ibscope_node_scrape_timeouts_total.
scrape() {
    local t out
    while :; do
        t=$(now)
        rm -f "$work/page"
        out=$(curl -s -m 10 -o "$work/page" -w '%{http_code} %{time_total}' "$url/metrics") || out="000 0"
        printf '%s %s %s\n' "$t" "$out" "$(awk -v fl="$FLAP_LABEL" -v fp=",port=\"$FLAP_PORT\"," \
            -v jl="$JUMP_LABEL" -v jp=",port=\"$JUMP_PORT\"," '
            BEGIN { fn = "node_name=\"[^\"]*" fl "[^\"]*\""; jn = "node_name=\"[^\"]*" jl "[^\"]*\"" }
            $1 ~ /^ibscope_up(\{.*\})?$/ { up = $2 }
            $1 ~ /^ibscope_sample_stale(\{.*\})?$/ { stale = $2 }
            $1 ~ /^ibscope_port_reopens_total(\{.*\})?$/ { reopens = $2 }
            /^ibscope_port_symbol_error_total\{/ && $0 ~ jn && index($0, jp) { sym = $NF }
            /^ibscope_port_link_up\{/ && $0 ~ fn && index($0, fp) { link = $NF }
            /^ibscope_node_scrape_timeouts_total\{/ { timeouts += $NF }
            END { printf "%s %s %s %s %s %d", up == "" ? "-" : up, stale == "" ? "-" : stale,
                  reopens == "" ? "-" : reopens, sym == "" ? "-" : sym, link == "" ? "-" : link,
                  timeouts }' "$work/page" 2>/dev/null)" >>"$work/scrapes"
        sleep "$SCRAPE_EVERY"
    done
}
: >"$work/scrapes"
scrape &
scraper_pid=$!

started=$(now)
end=$(echo "$started + $SOAK_SECONDS" | bc)
# RSS near the start: after WARMUP seconds of sweeps and scrapes (every HTTP thread has
# served pages by then: the allocator's per-thread arenas are in use), before any fault.
sleep "$WARMUP"
serve_rss_start=$(rss_kib "$serve_pid")
agent_rss_start=$(rss_kib "$(agent_of "$serve_pid")")

# The faults, in turn, one every FAULT_EVERY seconds; each logged as "time kind [value]".
: >"$work/faults"
: >"$work/rss"
fault() { echo "$(now) $*" >>"$work/faults"; }
step=0
while [ "$(echo "$(now) + $FAULT_EVERY + 5 < $end" | bc)" = 1 ]; do
    case $((step % 5)) in
    0)
        fault unlink
        "$ibscope" sim fault --name "$name" --resweep unlink "$FLAP_NODE" "$FLAP_PORT" >/dev/null 2>>"$work/faults.err" || fault error unlink
        ;;
    1)
        fault relink
        "$ibscope" sim fault --name "$name" --resweep relink "$FLAP_NODE" "$FLAP_PORT" >/dev/null 2>>"$work/faults.err" || fault error relink
        ;;
    2)
        value=$((1000 + step))
        fault jump "$value"
        "$ibscope" sim fault --name "$name" set-counter "$JUMP_NODE" "$JUMP_PORT" SymbolErrorCounter "$value" \
            >/dev/null 2>>"$work/faults.err" || fault error jump
        ;;
    3)
        fault freeze
        ibsim_pid=$(sim_pid ibsim)
        kill -STOP "$ibsim_pid"
        sleep "$FREEZE"
        kill -CONT "$ibsim_pid"
        ;;
    4)
        fault restart
        "$ibscope" sim restart --name "$name" 2>>"$work/faults.err" || fault error restart
        ;;
    esac
    step=$((step + 1))
    echo "$(now) $(rss_kib "$serve_pid")" >>"$work/rss"
    sleep "$FAULT_EVERY"
done
# Let the last fault show, then stop.
while [ "$(echo "$(now) < $end" | bc)" = 1 ]; do sleep 0.5; done
serve_rss_end=$(rss_kib "$serve_pid")
agent_rss_end=$(rss_kib "$(agent_of "$serve_pid")")
kill "$scraper_pid" 2>/dev/null || true
wait "$scraper_pid" 2>/dev/null || true
scraper_pid=""
kill -TERM "$serve_pid"
serve_code=0
wait "$serve_pid" || serve_code=$?
serve_pid=""

# seen KIND: "n_seen n_done" for the faults of KIND, judged on the scrapes from the fault
# to the next fault (plus GRACE seconds).
GRACE=2
seen() {
    awk -v kind="$1" -v grace="$GRACE" '
        FNR == NR { ft[NR] = $1; fk[NR] = $2; fv[NR] = $3; nf = NR; next }
        { st[++ns] = $1; code[ns] = $2; up[ns] = $4; reopen[ns] = $6; sym[ns] = $7; link[ns] = $8; to[ns] = $9 }
        END {
            done = 0; ok = 0
            for (i = 1; i <= nf; i++) {
                if (fk[i] != kind) continue
                done++
                from = ft[i]; until = (i < nf ? ft[i + 1] : st[ns]) + grace
                base_to = -1; base_re = -1; down = 0; hit = 0
                for (j = 1; j <= ns; j++) {
                    if (st[j] < from) { if (code[j] == 200) { base_to = to[j]; base_re = reopen[j] } continue }
                    if (st[j] > until) break
                    if (code[j] != 200) continue
                    if (kind == "unlink" && link[j] == "0") hit = 1
                    if (kind == "relink" && link[j] == "1") hit = 1
                    if (kind == "jump" && sym[j] == fv[i]) hit = 1
                    if (kind == "freeze" && (to[j] > base_to || up[j] == "0")) hit = 1
                    if (kind == "restart") {
                        if (up[j] == "0") down = 1
                        if (down && up[j] == "1" && reopen[j] > base_re) hit = 1
                    }
                }
                ok += hit
            }
            print ok, done
        }' "$work/faults" "$work/scrapes"
}

# pct P: the P-th percentile of the latency of the served scrapes, in ms.
pct() {
    awk '$2 == 200 { print $3 }' "$work/scrapes" | sort -n |
        awk -v p="$1" '{ v[NR] = $1 } END { i = int(NR * p / 100 + 0.999); if (i < 1) i = 1; printf "%.1f", v[i] * 1000 }'
}
served=$(awk '$2 == 200' "$work/scrapes" | wc -l)
failed=$(awk '$2 != 200' "$work/scrapes" | wc -l)
down_scrapes=$(awk '$2 == 200 && $4 == "0"' "$work/scrapes" | wc -l)
last_reopens=$(awk '$2 == 200 { r = $6 } END { print r }' "$work/scrapes")
growth=$(echo "scale=1; ($serve_rss_end - $serve_rss_start) * 100 / $serve_rss_start" | bc)
verdict=0

printf 'soak: %s s on %s, a fault every %s s, serve --interval %s, a scrape every %s s\n' \
    "$SOAK_SECONDS" "$(basename "$TOPOLOGY")" "$FAULT_EVERY" "$INTERVAL" "$SCRAPE_EVERY"
printf 'scrapes: %s served, %s failed; latency p50 %s ms, p99 %s ms, max %s ms\n' \
    "$served" "$failed" "$(pct 50)" "$(pct 99)" "$(pct 100)"
[ "$failed" -eq 0 ] || verdict=1
printf 'RSS: serve %s KiB -> %s KiB (%s%%; between faults: min %s, max %s KiB), agent process %s KiB -> %s KiB (the current one)\n' \
    "$serve_rss_start" "$serve_rss_end" "$growth" "$(awk 'NR == 1 || $2 < m { m = $2 } END { print m }' "$work/rss")" \
    "$(awk '$2 > m { m = $2 } END { print m }' "$work/rss")" "$agent_rss_start" "$agent_rss_end"
if [ "$(echo "$growth >= 10" | bc)" = 1 ]; then echo "RSS: serve grew 10% or more"; verdict=1; fi
for kind in unlink relink jump freeze restart; do
    read -r ok done < <(seen "$kind")
    printf 'fault %-8s %s of %s seen in the metrics\n' "$kind" "$ok" "$done"
    [ "$ok" -eq "$done" ] || verdict=1
done
errors=$(grep -c ' error ' "$work/faults" || true)
if [ "$errors" -gt 0 ]; then
    echo "fault script errors: $errors"; sed 's/^/  /' "$work/faults.err" | tail -5; verdict=1
fi
printf 'ibscope_up 0 in %s scrapes; ibscope_port_reopens_total %s at the end\n' "$down_scrapes" "$last_reopens"
stopped=$(grep -c 'SIGTERM received; stopped after' "$work/serve.err" || true)
printf 'serve: exit %s after SIGTERM (%s)\n' "$serve_code" \
    "$(if [ "$stopped" = 1 ]; then echo "stopped cleanly"; else echo "no stop line"; fi)"
[ "$serve_code" -eq 0 ] && [ "$stopped" = 1 ] || verdict=1
left=$(find "$TMPDIR" -mindepth 1 | wc -l)
if [ "$left" -ne 0 ]; then echo "left in TMPDIR: $(ls "$TMPDIR")"; verdict=1; fi
if grep -q panicked "$work/serve.err"; then echo "serve panicked:"; grep -A3 panicked "$work/serve.err"; verdict=1; fi
echo "after: $(uptime)"
if [ -n "${KEEP:-}" ]; then cp "$work/scrapes" "$work/faults" "$work/rss" "$work/serve.err" "$KEEP/"; fi
exit "$verdict"
