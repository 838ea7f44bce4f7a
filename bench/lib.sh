# Shared by the bench scripts (sourced).

# settle SIM_STATE_DIR: wait (at most 120 s) until the simulator's OpenSM has used no CPU for
# 2 s in a row. After SUBNET UP it keeps working for a while on large fabrics, and runs timed
# in that window were up to 30% slower, for ibscope and the reference tools alike.
settle() {
    local pid ticks last="" quiet=0 i
    pid=$(grep -A1 '"opensm"' "$1/state.json" | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p')
    [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || { sleep 5; return; }
    for ((i = 0; i < 240 && quiet < 4; i++)); do
        ticks=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
        if [ "$ticks" = "$last" ]; then quiet=$((quiet + 1)); else quiet=0; fi
        last=$ticks
        sleep 0.5
    done
}
