#!/usr/bin/env bash
# ibscope's own cost at 10k, 50k and 100k HCAs, without a simulator: every operation on
# generated fabrics answered in process (bench/scale.rs; topo's responder). Each
# (fabric, size, operation) runs in a fresh process; printed: ibscope's CPU seconds (the
# responder's own time taken out) and peak RSS, against the targets (2 s, 2 GB at 100k),
# and how each grows from 10k to 100k (10x the HCAs: linear is 10x).
#
#   bench/scale.sh                          # both fabrics, 10k 50k 100k, every operation
#   SIZES="10000 100000" OPS="discover check" FAMILIES=rails bench/scale.sh
#   LATENCY_ONLY=1 bench/scale.sh           # only the latency-and-loss discovery runs
#
# Then discovery under 20 us per MAD and 1% loss, against MADs x latency / window, at the
# default window (128) and at 16 (see bench/README.md: at 128 the latency bound is below ibscope's
# CPU time per MAD).
set -euo pipefail

FAMILIES=${FAMILIES:-"fat-tree rails"}
SIZES=${SIZES:-"10000 50000 100000"}
OPS=${OPS:-"discover check counters route-check tui serve serve-errors serve-render"}
LATENCY_HOSTS=${LATENCY_HOSTS:-100000}

root=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release --quiet --manifest-path "$root/Cargo.toml" --example scale
scale="$root/target/release/examples/scale"

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

echo "# $(date -u +%Y-%m-%d) on $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -z "${LATENCY_ONLY:-}" ]; then
    for family in $FAMILIES; do
        echo
        echo "## $family (CPU s / peak RSS MiB; the responder's model is in the RSS too: base)"
        printf '%-12s' operation
        for h in $SIZES; do printf ' | %-24s' "$h HCAs"; done
        printf ' | %s\n' "growth (first->last size)"
        for op in $OPS; do
            printf '%-12s' "$op"
            first="" last="" firstrss="" lastrss=""
            for h in $SIZES; do
                line=$("$scale" --family "$family" --hosts "$h" --op "$op")
                cpu=$(field cpu_s "$line") rss=$(field rss_mib "$line") base=$(field base_mib "$line")
                ok=$(field complete "$line")
                mark=""
                [ "$ok" = true ] || mark=" (incomplete)"
                printf ' | %-24s' "${cpu} s / ${rss} (base ${base})${mark}"
                [ -n "$first" ] || { first=$cpu; firstrss=$rss; }
                last=$cpu lastrss=$rss
            done
            printf ' | CPU %sx, RSS %sx\n' \
                "$(awk -v a="$first" -v b="$last" 'BEGIN { printf "%.1f", (a > 0 ? b / a : 0) }')" \
                "$(awk -v a="$firstrss" -v b="$lastrss" 'BEGIN { printf "%.1f", (a > 0 ? b / a : 0) }')"
        done
    done
fi

echo
echo "## discovery of $LATENCY_HOSTS HCAs (fat-tree planes), 20 us per MAD, 1% loss"
for window in 128 16; do
    base=$("$scale" --family fat-tree --hosts "$LATENCY_HOSTS" --op discover --window "$window")
    line=$("$scale" --family fat-tree --hosts "$LATENCY_HOSTS" --op discover --window "$window" \
        --latency-us 20 --loss 0.01)
    printf 'window %-4s: %s s (no latency, no loss: %s s), %s MADs, MADs x latency / window %s s, ratio %sx; %s resends, %s window cuts, complete %s\n' \
        "$window" "$(field wall_s "$line")" "$(field wall_s "$base")" "$(field mads "$line")" \
        "$(field ideal_s "$line")" "$(field ratio "$line")" "$(field retries "$line")" \
        "$(field window_cuts "$line")" "$(field complete "$line")"
done
