#!/usr/bin/env bash
# Instructions per frame of a traced head (issue 27): the trace_cost
# example (count + drop-udp:53 over batches of 64 UDP frames) untraced,
# traced with an expression matching nothing, and one matching every
# frame (records read after each batch). Each mode runs twice (N and 2N
# frames); the difference divided by N is the per-frame count.
#
#   benches/callgrind_trace.sh [EXAMPLE_BINARY] (env N=frames, default 100000)
#
# Needs valgrind (scripts/setup.sh installs it).
set -euo pipefail
N=${N:-100000}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-}
if [ -z "$bin" ]; then
    (cd "$root" && cargo build --release -q -p pfil-examples --example trace_cost)
    bin=$root/target/release/examples/trace_cost
fi
ir() { # args...: total instructions of the run
    local f
    f=$(mktemp /tmp/cg.XXXXXX)
    valgrind --tool=callgrind --callgrind-out-file="$f" "$bin" "$@" >/dev/null 2>&1
    sed -n 's/^summary: \([0-9]*\).*/\1/p' "$f"
    rm -f "$f"
}
echo '| mode | instructions/frame |'
echo '|---|---:|'
for m in off none all; do
    a=$(ir "$m" "$N"); z=$(ir "$m" $((2 * N)))
    awk -v m="$m" -v a="$a" -v z="$z" -v n="$N" 'BEGIN { printf "| %s | %.1f |\n", m, (z - a) / n }'
done
