#!/usr/bin/env bash
# Where a discovery's time goes under ibsim, on generated 3-level fat trees (OpenSM up):
#   1. the simulator's cost per directed-route hop: NodeInfo MADs/s to the nodes at each
#      depth 1..6 (mad/examples/nodeinfo_rate.rs --by-depth), 128 in flight, no cap per
#      destination;
#   2. discovery itself (ibscope discover, defaults) with its MAD trace (IBSCOPE_MAD_TRACE):
#      its MAD rate against the NodeInfo rate at the same mix of depths (the time the same
#      MADs would take at the measured per-depth rates), and MADs in flight over time as a
#      sparkline (window and queue too);
#   3. process start and exit: launch to the engine's first MAD, last reply to exit.
#
#   bench/discovery_gap.sh                   # 2048 hosts, 5 discoveries, 3 rate runs
#   SIZES="2048 8192" REPS=5 bench/discovery_gap.sh
#
# Needs: ibsim-utils, libumad2sim0, opensm, /usr/bin/time.
set -euo pipefail

SIZES=${SIZES:-2048}
REPS=${REPS:-5}
RATE_REPS=${RATE_REPS:-3}
RATE_COUNT=${RATE_COUNT:-20000}

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/lib.sh"
bench_setup gap
cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p ibscope-mad --example nodeinfo_rate
rate="$root/target/release/examples/nodeinfo_rate"

now_us() { date +%s%6N; }

echo "# $(date -u +%Y-%m-%d) on $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for hosts in $SIZES; do
    topo="$work/ft3-$hosts.topo"
    radix=$((hosts > 11664 ? 48 : 36))
    "$ibscope" sim gen fat-tree --levels 3 --radix "$radix" --hosts "$hosts" -o "$topo" >/dev/null
    name="bench-gap-$hosts-$$"
    eval "$("$ibscope" sim up "$topo" --name "$name" 2>"$work/up.err")"
    settle "$IBSCOPE_SIM_DIR/$name"
    echo
    echo "## $hosts hosts, $(grep -c '^Switch' "$topo") switches"

    # 1. NodeInfo rate per depth, median of RATE_REPS runs.
    : >"$work/rates"
    for ((i = 0; i < RATE_REPS; i++)); do
        "$rate" --by-depth --count "$RATE_COUNT" --windows 128 2>/dev/null |
            awk 'NF == 3 && $1 ~ /^[0-9]+$/ { print $1, $2, $3 }' >>"$work/rates"
    done
    echo "NodeInfo MADs/s by directed-route depth (128 in flight, median of $RATE_REPS):"
    for d in $(cut -d' ' -f1 "$work/rates" | sort -nu); do
        r=$(awk -v d="$d" '$1 == d { print $3 }' "$work/rates" | median)
        n=$(awk -v d="$d" '$1 == d { print $2; exit }' "$work/rates")
        echo "$d $r" >>"$work/rate.$hosts"
        printf '  depth %s: %7s MADs/s (%s nodes)\n' "$d" "$r" "$n"
    done

    # 2 and 3. Discoveries with a trace; keep the median one.
    : >"$work/runs"
    for ((i = 0; i < REPS; i++)); do
        t0=$(now_us)
        IBSCOPE_MAD_TRACE="$work/trace.$i" "$ibscope" discover -o /dev/null 2>/dev/null || true
        t1=$(now_us)
        opened=$(sed -n 's/^# opened_unix_us //p' "$work/trace.$i")
        first=$(awk '!/^#/ && NR > 1 && $1 ~ /^[0-9]+$/ { print $1; exit }' "$work/trace.$i")
        last=$(awk '$1 ~ /^[0-9]+$/ { t = $1 } END { print t }' "$work/trace.$i")
        echo "$(((t1 - t0) / 1000)) $i $(((opened - t0) / 1000)) $(((last - first) / 1000)) $(((t1 - opened - last) / 1000))" >>"$work/runs"
    done
    read -r wall i start engine tail < <(sort -n "$work/runs" | awk -v m=$(((REPS + 1) / 2)) 'NR == m')
    trace="$work/trace.$i"
    sent=$(sed -n 's/^# engine sent \([0-9]*\).*/\1/p' "$trace")
    echo "discovery (median of $REPS by wall time): ${wall} ms wall = ${start} ms start (launch to engine open)" \
        "+ ${engine} ms of MADs + ${tail} ms after the last reply (bookkeeping, output, exit)"
    echo "  $(sed -n 's/^# engine //p' "$trace")"
    # Its MADs by depth, and the time they would take at the NodeInfo rate of each depth.
    sed -n 's/^# dr_hops //p' "$trace" | tr ' ' '\n' | tr ':' ' ' >"$work/mix"
    expected_ms=$(awk 'NR == FNR { r[$1] = $2; next } { if (r[$1] > 0) t += $2 / r[$1] } END { printf "%.1f", t * 1000 }' \
        "$work/rate.$hosts" "$work/mix")
    printf '  MAD rate %s/s; the same MADs at the NodeInfo rate of their depths: %s ms -> %s%% of it\n' \
        "$(awk -v n="$sent" -v ms="$engine" 'BEGIN { printf "%.0f", (ms > 0 ? n / ms * 1000 : 0) }')" \
        "$expected_ms" \
        "$(awk -v e="$expected_ms" -v ms="$engine" 'BEGIN { printf "%.0f", (ms > 0 ? e / ms * 100 : 0) }')"
    printf '  MADs by depth: %s\n' "$(sed -n 's/^# dr_hops //p' "$trace")"
    # Sparklines: 60 columns over the run; the mean per column (samples are taken when the
    # engine has sent what it could and waits for replies).
    awk -v cols=60 '
        BEGIN { split("▁ ▂ ▃ ▄ ▅ ▆ ▇ █", bar, " ") }
        /^#/ || $1 !~ /^[0-9]+$/ { next }
        { t[++n] = $1; f[n] = $2; w[n] = $3; q[n] = $4 }
        END {
            if (n == 0) exit
            span = t[n] - t[1] + 1
            for (i = 1; i <= n; i++) {
                c = int((t[i] - t[1]) * cols / span) + 1
                sf[c] += f[i]; sw[c] += w[i]; sq[c] += q[i]; k[c]++
                if (w[i] > top) top = w[i]
            }
            for (c = 1; c <= cols; c++) if (k[c] && sq[c] / k[c] > qtop) qtop = sq[c] / k[c]
            for (c = 1; c <= cols; c++) {
                if (!k[c]) { lf = lf " "; lw = lw " "; lq = lq " "; continue }
                lf = lf bar[int(sf[c] / k[c] * 7 / top) + 1]
                lw = lw bar[int(sw[c] / k[c] * 7 / top) + 1]
                lq = lq bar[(qtop > 0 ? int(sq[c] / k[c] * 7 / qtop) : 0) + 1]
            }
            printf "  in flight  %s  (0..%d, %.0f ms)\n", lf, top, span / 1000
            printf "  window     %s\n", lw
            printf "  queued     %s  (0..%.0f)\n", lq, qtop
        }' "$trace"
    # A process that sends one MAD: what starting and ending costs under the shim.
    t0=$(now_us)
    "$ibscope" sm >/dev/null 2>&1 || true
    t1=$(now_us)
    t2=$(now_us)
    "$ibscope" --version >/dev/null
    t3=$(now_us)
    echo "process: 'ibscope sm' (one SMInfo under the shim) $(((t1 - t0) / 1000)) ms; 'ibscope --version' $(((t3 - t2) / 1000)) ms"

    "$ibscope" sim down --name "$name" >/dev/null 2>&1
    name=""
done
