#!/usr/bin/env bash
# Counter sweep benchmark: ibqueryerrors vs `ibscope counters --format json` on a generated
# 3-level fat tree (default 2,048 hosts) under ibsim with OpenSM. Prints both wall times
# (median of REPS) and the ratio.
#
#   bench/counters_sweep.sh
#   HOSTS=4096 REPS=5 bench/counters_sweep.sh
#
# What each tool does: ibqueryerrors discovers the fabric (ibnetdiscover's library) and reads
# PortCounters of every port; ibscope discovers, then reads ClassPortInfo per node and
# PortCounters + PortCountersExtended per port, 64 MADs outstanding. ibqueryerrors runs with
# its defaults (it has no outstanding-MADs option). Needs: ibsim-utils, libumad2sim0, opensm,
# infiniband-diags.
set -euo pipefail

HOSTS=${HOSTS:-2048}
REPS=${REPS:-3}
RADIX=${RADIX:-36}
OUTSTANDING=${OUTSTANDING:-64}

root=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release --quiet --manifest-path "$root/Cargo.toml" --bin ibscope
ibscope="$root/target/release/ibscope"

work=$(mktemp -d /tmp/ibscope-bench-counters.XXXXXX)
export IBSCOPE_SIM_DIR="$work/sims"
cd "$work" # clients keep their fake sysfs in the current directory
name=""
cleanup() {
    if [ -n "$name" ]; then "$ibscope" sim down --name "$name" >/dev/null 2>&1 || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# timed LABEL CMD...: REPS runs, stdout discarded; sets WALL to the median in seconds.
# Exit status 1 is accepted (both tools use it for "found errors").
timed() {
    local label=$1; shift
    local walls=() i t0 t1 rc
    for ((i = 0; i < REPS; i++)); do
        t0=$(date +%s.%N)
        rc=0
        "$@" >/dev/null 2>"$work/err.$label" || rc=$?
        t1=$(date +%s.%N)
        if ((rc > 1)); then
            echo "$label failed (exit $rc):" >&2
            cat "$work/err.$label" >&2
            exit 2
        fi
        walls+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')")
    done
    WALL=$(printf '%s\n' "${walls[@]}" | median)
}

topo="$work/ft3-$HOSTS.topo"
"$ibscope" sim gen fat-tree --levels 3 --radix "$RADIX" --hosts "$HOSTS" -o "$topo" >/dev/null
name="bench-counters-$$"
eval "$("$ibscope" sim up "$topo" --name "$name" 2>"$work/up.err")"
switches=$(grep -c '^Switch' "$topo")

timed ibqueryerrors ibqueryerrors
ibqe=$WALL
timed ibscope "$ibscope" counters --format json --max-outstanding "$OUTSTANDING"
ours=$WALL
ports=$("$ibscope" counters --format json --max-outstanding "$OUTSTANDING" 2>/dev/null |
    grep -c '"capability_mask"' || true)

"$ibscope" sim down --name "$name" >/dev/null
name=""
printf 'fabric: %s hosts, %s switches, %s ports read by ibscope\n' "$HOSTS" "$switches" "$ports"
printf 'ibqueryerrors:                      %8.3f s\n' "$ibqe"
printf 'ibscope counters --format json:     %8.3f s\n' "$ours"
printf 'ratio (ibqueryerrors / ibscope):    %8.2fx\n' \
    "$(awk -v a="$ibqe" -v b="$ours" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')"
