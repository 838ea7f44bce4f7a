#!/usr/bin/env bash
# The test command: installs what the tests need, then format check, lints, every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# As root (CI is): the Debian package, built now, on its own, rather than inside the
# test run beside the simulator tests; tests/it/package.rs then installs and runs the
# package IBSCOPE_DEB names. It packs the dev profile's binary, the one the tests build
# anyway (cargo-deb warns that it is meant for releases): a release build here took
# minutes of CI's ten. Packages for use come from `scripts/deb.sh` (release).
export IBSCOPE_DEB_PROFILE=dev
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
