#!/usr/bin/env bash
# Hosts and rails on a generated rail-optimised GPU fabric (default 1,024 servers x 8 rails:
# 8,192 HCAs, radix-128 leaves and spines: 16 leaves a rail) under ibsim with OpenSM, all in one run.
#
#   bench/hosts.sh
#   HOSTS=256 REPS=5 bench/hosts.sh
#
# One rail of one server runs at 1x (the rate comment on both ends of its link), so `check`
# has host findings to report (rail-slow, and the degraded link itself).
#
# (1) What grouping servers and checking rails adds to `ibscope check`: check runs with
#     and without it (--no-hosts), taking turns, REPS times each, both logging at -vv; the median walls and their
#     ratio. check also logs (at -vv) the time it spent grouping hosts, checking rails and
#     annotating findings: its median against check's median wall is the share of check's
#     time, measured in the same process. The issue's target: under 5%.
# (2) `ibscope hosts` and `hosts --json`: discovery plus grouping, the whole command.
#
# ibscope runs with its defaults (an adaptive window up to 128, at most 4 in flight per
# destination), or with --max-outstanding OUTSTANDING when that is set. There is no
# reference tool for hosts and rails: the comparison is check against itself.
# Needs: ibsim-utils, libumad2sim0, opensm.
set -euo pipefail

HOSTS=${HOSTS:-1024}
RAILS=${RAILS:-8}
RADIX=${RADIX:-128}
REPS=${REPS:-5}
OUTSTANDING=${OUTSTANDING:-}
flags=()
if [ -n "$OUTSTANDING" ]; then flags=(--max-outstanding "$OUTSTANDING"); fi

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/lib.sh"
bench_setup hosts

topo="$work/rails-$HOSTS.topo"
"$ibscope" sim gen rails --hosts "$HOSTS" --rails "$RAILS" --radix "$RADIX" \
    --degrade G0042R3:1:1xHDR -o "$topo" >/dev/null
name="bench-hosts-$$"
eval "$("$ibscope" sim up "$topo" --name "$name" 2>"$work/up.err")"
settle "$IBSCOPE_SIM_DIR/$name"
switches=$(grep -c '^Switch' "$topo")
hcas=$(grep -c '^Hca' "$topo")

# (1) taking turns, so both see the same machine.
for ((i = 0; i < REPS; i++)); do
    timed check "$ibscope" -vv check --json "${flags[@]}"
    # The log line (colours stripped): ... hosts grouped and rails checked hosts=N ms="X"
    sed 's/\x1b\[[0-9;]*m//g' "$work/err.check" | grep -o 'rails checked.*' |
        grep -o 'ms="\?[0-9.]*' | grep -o '[0-9.]*$' >>"$work/hosts_ms"
    timed nohosts "$ibscope" -vv check --json --no-hosts "${flags[@]}"
done
check=$(median_of check)
nohosts=$(median_of nohosts)
hosts_ms=$(median <"$work/hosts_ms")
kinds=$(grep -o '"kind": "[a-z-]*"' "$work/out.check" | grep -v '"switch"\|"ca"\|"router"\|"aggregation-node"' |
    sort | uniq -c | awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $3 }' | tr -d '"')
servers=$(grep -o '"hosts": *[0-9]*' "$work/out.check" | head -1 | grep -o '[0-9]*$')

# (2)
for ((i = 0; i < REPS; i++)); do
    timed hosts "$ibscope" hosts "${flags[@]}"
    timed hostsjson "$ibscope" hosts --json "${flags[@]}"
done
hosts=$(median_of hosts)
hostsjson=$(median_of hostsjson)
hosts_bytes=$(wc -c <"$work/out.hostsjson")

"$ibscope" sim down --name "$name" >/dev/null
name=""

echo "# $(date -u +%Y-%m-%d) on $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'fabric: %s servers x %s rails, %s HCAs, %s switches (radix %s); median of %s runs, %s MADs in flight\n' \
    "$HOSTS" "$RAILS" "$hcas" "$switches" "$RADIX" "$REPS" "${OUTSTANDING:-default (adaptive, up to 128)}"
printf '\n(1) ibscope check with and without hosts and rails (taking turns)\n'
printf '  check --json:                  %8.3f s   (%s servers; findings: %s)\n' "$check" "$servers" "$kinds"
printf '  check --json --no-hosts:       %8.3f s\n' "$nohosts"
printf '  ratio (check / --no-hosts):    %8sx\n' "$(ratio "$check" "$nohosts" 3)"
printf '  grouping + rail checks, in check (-vv log): %.1f ms = %s%% of check'"'"'s wall\n' \
    "$hosts_ms" "$(awk -v ms="$hosts_ms" -v s="$check" 'BEGIN { printf "%.2f", ms / 10 / s }')"
printf '\n(2) ibscope hosts (discovery included)\n'
printf '  hosts:                         %8.3f s\n' "$hosts"
printf '  hosts --json:                  %8.3f s   (%s bytes)\n' "$hostsjson" "$hosts_bytes"
