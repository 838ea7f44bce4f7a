#!/usr/bin/env bash
# `ibscope nccl log` on a generated NCCL_DEBUG=INFO log of a 4,096-rank job (512 servers x
# 8 GPUs, 96 channels: about 100 MB) placed on a rail-optimised fabric of the same size
# (4,096 HCAs, min-hop LFTs, from a JSON snapshot): read, checked, every inter-server
# connection traced to the links it crosses. RUNS runs (default 5), the median wall time.
# Target: at most 2 s. No reference tool reads NCCL logs; the floor printed beside it is
# `grep -c "NCCL INFO"` over the same file (reading it once).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/lib.sh"
runs=${RUNS:-5}
servers=${SERVERS:-512}
channels=${CHANNELS:-96}
bench_setup nccl-log
cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p ibscope-nccl --example nccl_log_bench
"$root/target/release/examples/nccl_log_bench" "$servers" 8 "$channels" fabric.json job.log
for ((r = 0; r < runs; r++)); do
    timed floor grep -c "NCCL INFO" job.log
    timed log "$ibscope" --topology fabric.json nccl log job.log --json
done
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); p=r['placement']; print('ranks', r['ranks'], 'network connections', r['net_connections'], 'placed', p['placed'], 'links crossed', len(p['links']))" "$work/out.log"
log_s=$(median_of log)
floor_s=$(median_of floor)
echo "nccl log: median ${log_s} s over $runs runs (target 2 s); grep floor ${floor_s} s; ratio $(ratio "$log_s" "$floor_s" 1)x"
