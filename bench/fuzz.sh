#!/usr/bin/env bash
# Run every fuzz target in fuzz/ for a bounded time (default 20 s each).
#
#   bench/fuzz.sh [SECONDS] [TARGET...]
#
# Needs cargo-fuzz (installed from crates.io if missing) and a toolchain that accepts -Z
# flags: `+nightly` when rustup has it, else the stable toolchain with RUSTC_BOOTSTRAP=1.
# Seed corpora come from examples/fabrics and small hand-made inputs; crashes are kept by
# libFuzzer under fuzz/artifacts/<target>/. Exit status: 0 if no target found anything.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-20}"
shift || true
all_targets=(mad_attrs mad_view sa_records ibnd_parse namemap_parse thresholds_parse json_snapshot)
if [ "$#" -gt 0 ]; then targets=("$@"); else targets=("${all_targets[@]}"); fi

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz" >&2
    cargo install --locked cargo-fuzz
fi

toolchain=()
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    toolchain=(+nightly)
else
    # cargo-fuzz passes -Zsanitizer=...; stable rustc takes -Z only with this set.
    export RUSTC_BOOTSTRAP=1
fi

cd "$root/fuzz"

# Seeds: real inputs so the fuzzer starts from the accepted grammar, not from nothing.
seed() {
    local target="$1"
    local dir="corpus/$target"
    mkdir -p "$dir"
    case "$target" in
        ibnd_parse)
            cp "$root"/examples/fabrics/* "$dir/" 2>/dev/null || true ;;
        namemap_parse)
            printf '0x0002c90300000001 "spine-1"\n# comment\n0x2 "leaf \\"x\\""\n' >"$dir/seed.map" ;;
        thresholds_parse)
            printf 'SymbolErrorCounter=10\n# c\nPortXmitWait = 1000\n' >"$dir/seed.thr" ;;
        json_snapshot)
            if [ -x "$root/target/debug/ibscope" ]; then
                "$root/target/debug/ibscope" --topology "$root/examples/fabrics/net.2sw2path4hca" \
                    discover --format json >"$dir/seed.json" 2>/dev/null || rm -f "$dir/seed.json"
            fi ;;
        mad_attrs | mad_view | sa_records)
            head -c 257 /dev/urandom >"$dir/seed.bin" ;;
    esac
}

found=0
for t in "${targets[@]}"; do
    seed "$t"
    echo "== $t (${secs}s)" >&2
    log="$(mktemp)"
    if cargo "${toolchain[@]}" fuzz run "$t" "corpus/$t" -- \
        -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 >"$log" 2>&1; then
        tail -n 2 "$log" >&2
    else
        found=1
        echo "fuzz.sh: $t FAILED (crash or build error); log tail:" >&2
        tail -n 40 "$log" >&2
    fi
    rm -f "$log"
done
exit "$found"
