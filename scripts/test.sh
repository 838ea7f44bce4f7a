#!/usr/bin/env bash
# The test command: installs what the tests need, then format check, lints, every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# As root (CI is): the Debian package's build now, on its own, rather than inside the
# test run beside the simulator tests; tests/it/package.rs then installs and runs the
# package IBSCOPE_DEB names. The `deb-ci` profile: no whole-program LTO, so the build fits
# CI's time (Cargo.toml).
export IBSCOPE_DEB_PROFILE=deb-ci
if [ "$(id -u)" -eq 0 ]; then
    IBSCOPE_DEB=$(bash scripts/deb.sh)
    export IBSCOPE_DEB
fi
# cargo-nextest, where installed, runs each test in its own process, all binaries' tests
# in one pool; it does not run doctests, so `cargo test --doc` follows (and prints the
# closing `test result:` line). Without it, cargo test runs everything.
if cargo nextest --version > /dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast
    cargo test --workspace --doc
else
    cargo test --workspace
fi
