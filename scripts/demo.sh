#!/usr/bin/env bash
# The demo command: installs the simulator stack (apt, no questions), builds ibscope and
# runs it against a bundled simulated fabric with planted faults. Everything stops on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo build --release --quiet
exec ./target/release/ibscope demo "$@"
