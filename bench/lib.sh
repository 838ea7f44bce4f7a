# Shared by the bench scripts (sourced).

# settle SIM_STATE_DIR: wait (at most 120 s) until the simulator's OpenSM has used no CPU for
# 2 s in a row. After SUBNET UP it keeps working for a while on large fabrics, and runs timed
# in that window were up to 30% slower, for ibscope and the reference tools alike.
settle() {
    local pid ticks last="" quiet=0 i
    pid=$(sim_process_pid "$1" opensm)
    [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || { sleep 5; return; }
    for ((i = 0; i < 240 && quiet < 4; i++)); do
        ticks=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
        if [ "$ticks" = "$last" ]; then quiet=$((quiet + 1)); else quiet=0; fi
        last=$ticks
        sleep 0.5
    done
}

# sim_process_pid SIM_STATE_DIR ibsim|opensm: the pid of that process of the simulator.
sim_process_pid() {
    grep -A1 "\"$2\"" "$1/state.json" | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p'
}

# cpu_ns PID: the CPU time (ns) the process has used so far, all its threads, as the
# scheduler counts it (exact; /proc/PID/stat's ticks are 10 ms). Empty without PID.
cpu_ns() {
    [ -n "${1:-}" ] && [ -d "/proc/$1" ] || return 0
    local f ns rest sum=0
    for f in /proc/"$1"/task/*/schedstat; do
        read -r ns rest <"$f" || continue
        sum=$((sum + ns))
    done
    echo "$sum"
}

# seconds_between NS0 NS1: the seconds from one cpu_ns reading to a later one.
seconds_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f\n", (b - a) / 1e9 }'; }

# bench_setup TAG: builds the release ibscope into $ibscope (or takes $IBSCOPE), makes the run's directory $work
# (removed on exit, with the simulator named $name stopped if one is up), points the
# simulator's state there and moves into it: clients under the shim keep their fake sysfs
# in the current directory.
bench_setup() {
    if [ -n "${IBSCOPE:-}" ]; then
        ibscope=$IBSCOPE # a build given by the caller (e.g. to compare two builds)
    else
        cargo build --release --quiet --manifest-path "$root/Cargo.toml" --bin ibscope
        ibscope="$root/target/release/ibscope"
    fi
    work=$(mktemp -d "/tmp/ibscope-bench-$1.XXXXXX")
    export IBSCOPE_SIM_DIR="$work/sims"
    cd "$work"
    name=""
    trap bench_cleanup EXIT
}
bench_cleanup() {
    if [ -n "$name" ]; then "$ibscope" sim down --name "$name" >/dev/null 2>&1 || true; fi
    rm -rf "$work"
}

# median: the median of the numbers on stdin, one a line.
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# ratio A B [DIGITS]: A / B (0 when B is 0), with DIGITS decimals (2).
ratio() { awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN { printf "%.*f", d, (b > 0 ? a / b : 0) }'; }

# timed LABEL CMD...: one run of CMD; appends its wall time (s) to $work/walls.LABEL and
# keeps its stdout in $work/out.LABEL, its stderr in $work/err.LABEL. Exit status 1 is
# accepted (the tools use it for "found something"); anything higher ends the benchmark.
# With SIM_PID set (the simulator's ibsim), the CPU time ibsim spent during the run (s)
# goes to $work/simcpu.LABEL: what answering the run's MADs cost the simulator.
timed() {
    local label=$1; shift
    local t0 t1 rc=0 c0 c1
    c0=$(cpu_ns "${SIM_PID:-}")
    t0=$(date +%s.%N)
    "$@" >"$work/out.$label" 2>"$work/err.$label" || rc=$?
    t1=$(date +%s.%N)
    c1=$(cpu_ns "${SIM_PID:-}")
    if [ -n "$c0" ] && [ -n "$c1" ]; then
        seconds_between "$c0" "$c1" >>"$work/simcpu.$label"
    fi
    if ((rc > 1)); then
        echo "$label failed (exit $rc):" >&2
        cat "$work/err.$label" >&2
        exit 2
    fi
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }' >>"$work/walls.$label"
}
# median_of LABEL: the median of LABEL's wall times so far.
median_of() { median <"$work/walls.$1"; }
# sim_cpu_of LABEL: the median of the simulator's CPU time (s) during LABEL's runs.
sim_cpu_of() { median <"$work/simcpu.$1"; }
