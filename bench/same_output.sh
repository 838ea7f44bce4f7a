#!/usr/bin/env bash
# Whether two `scale --out` files hold the same output but for the sweep's clock readings
# (counters' time_ms and duration_ms, the page's sweep timestamp and duration), which
# differ from run to run. Exit status 0 when they are the same.
#
#   target/release/examples/scale --family rails --hosts 10000 --op serve --out before
#   ... change, rebuild ...
#   target/release/examples/scale --family rails --hosts 10000 --op serve --out after
#   bench/same_output.sh before after
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 FILE FILE" >&2; exit 2; }
normal() {
    sed -E 's/"(time_ms|duration_ms)":[0-9]+/"\1":0/g
            s/^(ibscope_sweep_(timestamp|duration)_seconds\{[^}]*\}) .*/\1 0/' "$1"
}
if cmp <(normal "$1") <(normal "$2"); then echo "same output"; else exit 1; fi
