#!/usr/bin/env bash
# Discovery benchmark: ibscope discover vs ibnetdiscover on generated 3-level fat trees
# under ibsim (OpenSM up). Prints wall time (median of REPS runs each, the two tools taking
# turns), the ratio, MADs and peak RSS.
#
#   bench/discover.sh                 # 2048 and 8192 hosts, 5 repetitions
#   SIZES="2048 8192 16384" REPS=3 bench/discover.sh
#
# Needs: ibsim-utils, libumad2sim0, opensm, infiniband-diags, /usr/bin/time (package `time`).
# ibnetdiscover runs with -o 64 (it is CPU-bound: -o 128 or 256 measured no faster), ibscope
# with its defaults (an adaptive window up to 128, at most 4 in flight per destination), or
# --max-outstanding IBSCOPE_OUTSTANDING when that is set. Timing starts once OpenSM
# has gone quiet after SUBNET UP (at 8k hosts it keeps working for a while; runs in that
# window were up to 30% slower for both tools). MADs: ibscope
# prints its count on stderr; ibnetdiscover's is counted by ibsim itself (one
# `process_packet` line per request at `Verbose 1`, measured in one extra, untimed run).
#
# Under each row: the simulator's CPU time during each tool's runs (ibsim's, from the
# scheduler; median), what answering those MADs cost it. No tool sending ibscope's MADs
# through it finishes sooner on this machine, so ibnetdiscover's wall over that CPU time is
# the ceiling: the best ratio ibscope's MADs allow here. "ibscope / its simulator CPU"
# near 1 means ibscope waits for the simulator and little else.
set -euo pipefail

SIZES=${SIZES:-"2048 8192"}
REPS=${REPS:-5}
# Switch radix: 36 (a 3-level tree of radix 36 holds at most 11,664 hosts), 48 above that.
RADIX=${RADIX:-auto}
OUTSTANDING=${OUTSTANDING:-64}
IBSCOPE_OUTSTANDING=${IBSCOPE_OUTSTANDING:-}
ours_flags=()
if [ -n "$IBSCOPE_OUTSTANDING" ]; then ours_flags=(--max-outstanding "$IBSCOPE_OUTSTANDING"); fi

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/lib.sh"
bench_setup discover
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install -y time)" >&2; exit 2; }


# once LABEL CMD...: one timed run; appends its wall time to WALLS_<LABEL> and the
# simulator's CPU time during it to SIMCPU_<LABEL> (s), keeps the largest RSS in
# RSS_<LABEL> (KiB) and its stderr in $work/err.LABEL
once() {
    local label=$1; shift
    local c0 c1
    c0=$(cpu_ns "$SIM_PID")
    /usr/bin/time -f '%e %M' -o "$work/time.$label" "$@" >/dev/null 2>"$work/err.$label"
    c1=$(cpu_ns "$SIM_PID")
    read -r wall kib <"$work/time.$label"
    eval "WALLS_$label+=(\"$wall\")"
    eval "SIMCPU_$label+=($(seconds_between "$c0" "$c1"))"
    eval "((kib > RSS_$label)) && RSS_$label=$kib" || true
}

mads_seen_by_ibsim() {
    grep -c 'process_packet:' "$IBSCOPE_SIM_DIR/$name/ibsim.err" || true
}

echo "# $(date -u +%Y-%m-%d) on $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-7s %-6s %-6s | %-13s %-9s %-9s | %-13s %-9s %-9s | %s\n' \
    hosts sw nodes "ibnetdisc s" MADs "RSS MiB" "ibscope s" MADs "RSS MiB" speedup
for hosts in $SIZES; do
    topo="$work/ft3-$hosts.topo"
    radix=$RADIX
    if [ "$radix" = auto ]; then radix=$((hosts > 11664 ? 48 : 36)); fi
    "$ibscope" sim gen fat-tree --levels 3 --radix "$radix" --hosts "$hosts" -o "$topo" >/dev/null
    name="bench-$hosts-$$"
    eval "$("$ibscope" sim up "$topo" --name "$name" 2>"$work/up.err")"
    sw=$(grep -c '^Switch' "$topo")
    nodes=$((sw + hosts))
    settle "$IBSCOPE_SIM_DIR/$name"
    SIM_PID=$(sim_process_pid "$IBSCOPE_SIM_DIR/$name" ibsim)

    # The two tools take turns, so that a slow stretch of the machine hits both alike.
    WALLS_ibnd=() WALLS_ours=() RSS_ibnd=0 RSS_ours=0 SIMCPU_ibnd=() SIMCPU_ours=()
    for ((i = 0; i < REPS; i++)); do
        once ibnd ibnetdiscover -o "$OUTSTANDING"
        once ours "$ibscope" discover "${ours_flags[@]}" -o /dev/null
    done
    ibnd_wall=$(printf '%s\n' "${WALLS_ibnd[@]}" | median) ibnd_rss=$RSS_ibnd
    ours_wall=$(printf '%s\n' "${WALLS_ours[@]}" | median) ours_rss=$RSS_ours
    ibnd_sim=$(printf '%s\n' "${SIMCPU_ibnd[@]}" | median)
    ours_sim=$(printf '%s\n' "${SIMCPU_ours[@]}" | median)
    ours_mads=$(sed -n 's/.* with \([0-9]*\) MADs.*/\1/p' "$work/err.ours" | tail -1)

    "$ibscope" sim fault --name "$name" raw "Verbose 1" >/dev/null
    before=$(mads_seen_by_ibsim)
    ibnetdiscover -o "$OUTSTANDING" >/dev/null 2>&1
    ibnd_mads=$(($(mads_seen_by_ibsim) - before))
    "$ibscope" sim fault --name "$name" raw "Verbose 0" >/dev/null

    "$ibscope" sim down --name "$name" >/dev/null 2>&1
    name=""
    printf '%-7s %-6s %-6s | %-13s %-9s %-9s | %-13s %-9s %-9s | %sx\n' \
        "$hosts" "$sw" "$nodes" "$ibnd_wall" "$ibnd_mads" $((ibnd_rss / 1024)) \
        "$ours_wall" "$ours_mads" $((ours_rss / 1024)) \
        "$(awk -v a="$ibnd_wall" -v b="$ours_wall" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')"
    printf '        simulator CPU per run: %s s (ibnetdiscover), %s s (ibscope); ibscope / its simulator CPU %s; ceiling %sx\n' \
        "$ibnd_sim" "$ours_sim" "$(ratio "$ours_wall" "$ours_sim")" "$(ratio "$ibnd_wall" "$ours_sim")"
done
