#!/usr/bin/env bash
# Counter benchmark on a generated 3-level fat tree (default 2,048 hosts) under ibsim with
# OpenSM, all on the same fabric in one run. Wall times are medians of REPS runs, the tools
# taking turns (ibqueryerrors, check, counters, then again).
#
#   bench/counters_sweep.sh
#   HOSTS=4096 REPS=5 bench/counters_sweep.sh
#
# (1) ibqueryerrors vs `ibscope check`: the same question, which ports have errors. Both
#     discover the fabric, read ClassPortInfo per node and, for a switch whose PMA has
#     AllPortSelect, first the all-ports sum (PortSelect 0xFF; ibqueryerrors also the
#     PortCountersExtended sum, check only when a threshold names an extended counter); its
#     ports are read one by one only when the sum shows errors. CA ports are read one by
#     one. `check` also checks links, port states and the SM (one SMInfo).
# (2) ibqueryerrors vs `ibscope counters --format json`: ibscope reads every port's
#     PortCounters and PortCountersExtended; ibqueryerrors reads per-port counters only for
#     switches whose sum shows errors. Not the same work: shown for scale.
# (3) The steady-state sweep of `ibscope counters --interval 1 --count 4 --format json`
#     (and the same with --interval 3, see below):
#     sweeps after the first reuse the discovered fabric (no discovery), against one whole
#     ibqueryerrors run (which includes discovery). Each printed line is one such sweep.
#     If the lines carry "duration_ms" (the Sample's own measure) its median is shown.
#     Otherwise it is derived: a line's time_ms is its sweep's start, and the next sweep
#     starts one interval after the previous one ended, or after the line is printed if
#     that takes longer (a line is tens of MB at 2,048 hosts). So
#     next time_ms - time_ms - interval is an UPPER BOUND of one sweep, exact only when
#     computing and printing a line takes less than the interval: hence a second run with
#     --interval 3. The median of the 3 measurable sweeps is shown.
#
# ibscope runs with its defaults (an adaptive window up to 128, at most 4 in flight per
# destination), or with --max-outstanding OUTSTANDING when that is set;
# ibqueryerrors with its defaults (it has no outstanding-MADs option) plus --skip-sl: its SL
# lookup reads a PathRecord table that arrives incomplete under the shim and now and then
# segfaults on a bogus DLID (see tests/check.rs); it costs one SA query. The fabric is clean:
# nothing is injected. Needs: ibsim-utils, libumad2sim0, opensm, infiniband-diags.
#
# The simulator's CPU time during each run (ibsim's, from the scheduler) is what answering
# that run's MADs cost it; no tool sending the same MADs through it can finish sooner on
# this machine. Hence the ceiling printed under (1): ibqueryerrors' wall over the
# simulator CPU of check's MADs, the best ratio those MADs allow here.
set -euo pipefail

HOSTS=${HOSTS:-2048}
REPS=${REPS:-3}
RADIX=${RADIX:-36}
OUTSTANDING=${OUTSTANDING:-}
flags=()
if [ -n "$OUTSTANDING" ]; then flags=(--max-outstanding "$OUTSTANDING"); fi

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/lib.sh"
bench_setup counters

# json_number KEY FILE: the first "KEY": number in a JSON file.
json_number() { grep -o "\"$1\": *[0-9]*" "$2" | head -1 | grep -o '[0-9]*$'; }

topo="$work/ft3-$HOSTS.topo"
"$ibscope" sim gen fat-tree --levels 3 --radix "$RADIX" --hosts "$HOSTS" -o "$topo" >/dev/null
name="bench-counters-$$"
eval "$("$ibscope" sim up "$topo" --name "$name" 2>"$work/up.err")"
settle "$IBSCOPE_SIM_DIR/$name"
SIM_PID=$(sim_process_pid "$IBSCOPE_SIM_DIR/$name" ibsim)
switches=$(grep -c '^Switch' "$topo")

# The tools take turns, so that a slow stretch of the machine hits them alike.
for ((i = 0; i < REPS; i++)); do
    timed ibqueryerrors ibqueryerrors --skip-sl
    timed check "$ibscope" check --json "${flags[@]}"
    timed counters "$ibscope" counters --format json "${flags[@]}"
done
ibqe=$(median_of ibqueryerrors)
check=$(median_of check)
counters=$(median_of counters)
sim_ibqe=$(sim_cpu_of ibqueryerrors)
sim_check=$(sim_cpu_of check)
sim_counters=$(sim_cpu_of counters)
ibqe_summary=$(grep -E 'ports checked' "$work/out.ibqueryerrors" | sed 's/^## *//')
check_ports=$(json_number ports_sampled "$work/out.check")
check_screened=$(json_number switches_screened "$work/out.check")
check_mads=$(json_number counter_mads "$work/out.check")
check_findings=$(grep -c '"kind"' "$work/out.check" || true)
counters_ports=$(grep -c '"capability_mask"' "$work/out.counters" || true)
counters_mads=$(json_number mads_sent "$work/out.counters")

# (3): one run per interval; 4 lines each. steady_sweep INTERVAL sets SWEEP_S, SWEEP_HOW.
steady_sweep() {
    local interval=$1 out="$work/out.interval$1" rc=0 ms
    "$ibscope" counters --interval "$interval" --count 4 --format json \
        "${flags[@]}" >"$out" 2>"$work/err.interval" || rc=$?
    if ((rc > 1)); then
        echo "counters --interval $interval failed (exit $rc):" >&2
        cat "$work/err.interval" >&2
        exit 2
    fi
    # One top-level key per line: the per-port objects carry neither key.
    per_line() { grep -o "\"$1\":[0-9]*" "$out" | grep -o '[0-9]*$'; }
    if grep -q '"duration_ms":' "$out"; then
        SWEEP_HOW="duration_ms, median of 4"
        ms=$(per_line duration_ms | median)
    else
        SWEEP_HOW="upper bound from time_ms gaps, median of 3"
        ms=$(per_line time_ms |
            awk -v iv="$interval" 'NR > 1 { print $1 - prev - iv * 1000 } { prev = $1 }' | median)
    fi
    SWEEP_S=$(awk -v ms="$ms" 'BEGIN { printf "%.3f", ms / 1000 }')
    rm -f "$out"
}
steady_sweep 1
sweep1=$SWEEP_S sweep1_how=$SWEEP_HOW
# With 3 s the gap method is exact unless computing and printing a line takes over 3 s.
steady_sweep 3
sweep3=$SWEEP_S sweep3_how=$SWEEP_HOW

"$ibscope" sim down --name "$name" >/dev/null
name=""

echo "# $(date -u +%Y-%m-%d) on $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'fabric: %s hosts, %s switches; median of %s runs, %s MADs in flight for ibscope\n' \
    "$HOSTS" "$switches" "$REPS" "${OUTSTANDING:-default (adaptive, up to 128)}"
printf 'every run (s, in turn): ibqueryerrors %s | check %s | counters %s\n' \
    "$(paste -sd" " "$work/walls.ibqueryerrors")" "$(paste -sd" " "$work/walls.check")" \
    "$(paste -sd" " "$work/walls.counters")"
printf '\n(1) which ports have errors (clean fabric)\n'
printf '  ibqueryerrors:                       %8.3f s   (%s)\n' "$ibqe" "$ibqe_summary"
printf '  ibscope check:                       %8.3f s   (%s ports, %s switches screened by AllPortSelect, %s counter MADs, %s findings)\n' \
    "$check" "$check_ports" "$check_screened" "$check_mads" "$check_findings"
printf '  ratio (ibqueryerrors / check):       %8sx\n' "$(ratio "$ibqe" "$check")"
printf '  simulator CPU per run:               %8.3f s   (ibqueryerrors), %.3f s (check)\n' "$sim_ibqe" "$sim_check"
printf '  check / its simulator CPU:           %8s    (1.00: check waits only for the simulator)\n' "$(ratio "$check" "$sim_check")"
printf '  ceiling (ibqueryerrors / that CPU):  %8sx   (the best ratio check'"'"'s MADs allow on this machine)\n' "$(ratio "$ibqe" "$sim_check")"
printf '\n(2) every port'"'"'s counters (ibqueryerrors reads per-port counters only for switches whose sum shows errors)\n'
printf '  ibqueryerrors:                       %8.3f s\n' "$ibqe"
printf '  ibscope counters --format json:      %8.3f s   (%s ports, PortCounters + PortCountersExtended each, %s MADs)\n' \
    "$counters" "$counters_ports" "$counters_mads"
printf '  ratio (ibqueryerrors / counters):    %8sx\n' "$(ratio "$ibqe" "$counters")"
printf '  simulator CPU per run:               %8.3f s   (counters; %.2f of its wall)\n' "$sim_counters" "$(ratio "$sim_counters" "$counters")"
printf '\n(3) steady-state sweep of counters --interval S --count 4 (fabric already discovered)\n'
printf '  one sweep, --interval 1:             %8.3f s   (%s)\n' "$sweep1" "$sweep1_how"
printf '  one sweep, --interval 3:             %8.3f s   (%s)\n' "$sweep3" "$sweep3_how"
printf '  one ibqueryerrors run:               %8.3f s\n' "$ibqe"
printf '  ratio (ibqueryerrors / sweep):       %8sx (--interval 1), %sx (--interval 3)\n' \
    "$(ratio "$ibqe" "$sweep1")" "$(ratio "$ibqe" "$sweep3")"
