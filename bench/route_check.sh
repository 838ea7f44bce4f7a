#!/usr/bin/env bash
# `ibscope route check` from a file on a 3-level fat tree of 8,000+ hosts: wall time and
# peak RSS (target: under 10 s and 1 GB on 2 cores). The fabric is generated and routed
# with min-hop LFTs in memory, saved as a JSON snapshot, then checked by the CLI.
# Needs /usr/bin/time (Debian package `time`).
set -euo pipefail
cd "$(dirname "$0")/.."
hosts=${HOSTS:-8100}
command -v /usr/bin/time >/dev/null || apt-get install -y -q time >/dev/null
cargo build --release --quiet -p ibscope-topo --example route_check_bench
cargo build --release --quiet --bin ibscope
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
./target/release/examples/route_check_bench "$hosts" 36 "$work/fabric.json" > "$work/gen.log"
head -3 "$work/gen.log"
ls -lh "$work/fabric.json" | awk '{print "snapshot:", $5}'
/usr/bin/time -f "route check from file: %e s wall, %M KiB peak RSS" \
    ./target/release/ibscope --topology "$work/fabric.json" route check --json > "$work/report.json" || true
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('pairs', r['pairs'], 'ok', r['pairs_ok'], 'credit loops', r['credit_loops_found'])" "$work/report.json"
