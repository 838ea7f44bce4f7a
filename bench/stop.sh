#!/usr/bin/env bash
# How fast `ibscope demo` and `ibscope tui` stop: q, Ctrl-C (both keys in the terminal) and
# SIGHUP (the terminal closing), each RUNS times (default 5) in a tmux terminal; prints the
# median from the stop to the shell's prompt, and whether a state directory was left behind.
# Targets: within 1 s of q or Ctrl-C, within 2 s of SIGHUP.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/lib.sh"
runs=${RUNS:-5}
command -v tmux >/dev/null || { echo "tmux is needed" >&2; exit 2; }
bench_setup stop
session="ibscope-stop-$$"
trap 'tmux kill-session -t "$session" 2>/dev/null || true; bench_cleanup' EXIT

name=stopbench
mkdir -p "$work/demo-state"
eval "$("$ibscope" sim up --name "$name" "$root/examples/fabrics/demo.topo" 2>/dev/null)"
sim_env="LD_PRELOAD=$LD_PRELOAD IBSIM_SOCKNAME=$IBSIM_SOCKNAME IBSCOPE_SIM=$IBSCOPE_SIM"
unset LD_PRELOAD

# one COMMAND HOW: one stop of COMMAND ("demo" or "tui"), HOW = q, C-c or HUP; prints the
# seconds from the stop to the command's end.
one() {
    local command=$1 how=$2 done="$work/done" line t0 t1 i
    rm -f "$done"
    case $command in
        demo) line="TMPDIR=$work/demo-state $ibscope demo" ;;
        tui) line="env $sim_env $ibscope tui --interval 1" ;;
    esac
    tmux new-session -d -s "$session" -x 120 -y 40 "$line; date +%s.%N > $done; sleep 60"
    for ((i = 0; i < 300; i++)); do
        tmux capture-pane -p -t "$session" | grep -q "Overview" && break
        sleep 0.1
    done
    sleep 1
    t0=$(date +%s.%N)
    if [ "$how" = HUP ]; then
        pkill -HUP -f "^$ibscope $command" || true
    else
        tmux send-keys -t "$session" "$how"
    fi
    for ((i = 0; i < 400; i++)); do
        [ -s "$done" ] && break
        sleep 0.025
    done
    t1=$(cat "$done" 2>/dev/null || echo "$t0")
    tmux kill-session -t "$session" 2>/dev/null || true
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
}

printf '| command | stop | median (s) | target (s) | state left behind |\n|---|---|---|---|---|\n'
for command in demo tui; do
    for how in q C-c HUP; do
        for ((r = 0; r < runs; r++)); do one "$command" "$how"; done >"$work/stop.$command.$how"
        left=none
        if [ -d "$work/demo-state" ] && [ -n "$(ls -A "$work/demo-state" 2>/dev/null)" ]; then
            left=$(ls "$work/demo-state" | tr '\n' ' ')
        fi
        target=1
        [ "$how" = HUP ] && target=2
        printf '| %s | %s | %s | %s | %s |\n' "$command" "$how" \
            "$(median <"$work/stop.$command.$how")" "$target" "$left"
    done
done
