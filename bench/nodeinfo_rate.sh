#!/usr/bin/env bash
# NodeInfo SMP rate of the request engine with 1, 16 and 64 in flight, against smpquery,
# on a simulated fabric (default: examples/fabrics/fat-tree-2l-64.topo). Prints a table.
set -euo pipefail
cd "$(dirname "$0")/.."
topo=${1:-examples/fabrics/fat-tree-2l-64.topo}
cargo build --release --quiet -p ibscope-mad --example nodeinfo_rate
cargo build --release --quiet --bin ibscope
ib=$PWD/target/release/ibscope
export IBSCOPE_SIM_DIR=$(mktemp -d)
trap '"$ib" sim down --name bench-rate >/dev/null 2>&1 || true; rm -rf "$IBSCOPE_SIM_DIR"' EXIT
"$ib" sim up "$topo" --name bench-rate --no-sm >/dev/null
cd "$IBSCOPE_SIM_DIR"
"$ib" sim exec --name bench-rate -- "$OLDPWD/target/release/examples/nodeinfo_rate" --count 10000 --smpquery 200 2>&1 | grep -v '^ibwarn'
