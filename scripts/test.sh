#!/usr/bin/env bash
# The test command: installs what the tests need, then format check, lints, every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# As root (CI is): the Debian package's release build now, on its own, rather than inside
# `cargo test` beside the simulator tests; tests/package.rs then packs, installs and runs it.
if [ "$(id -u)" -eq 0 ]; then
    bash scripts/deb.sh > /dev/null
fi
cargo test --workspace
