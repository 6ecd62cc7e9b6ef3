#!/usr/bin/env bash
# Instructions per header look-up (benches/parse_ir.rs) under callgrind:
# each case's loop runs N times, its inclusive count over N is the count
# per look-up, exact whatever else the machine runs.
#
#   benches/callgrind_parse.sh [PARSE_IR_BINARY]   (env N, default 200000)
#
# Without an argument it builds the bench (cargo bench --no-run) and uses
# the newest parse_ir binary under $CARGO_TARGET_DIR (default target/).
# Needs valgrind (scripts/setup.sh installs it).
set -euo pipefail
N=${N:-200000}
BIN=${1:-}
if [ -z "$BIN" ]; then
    cargo bench -p pfil-benches --bench parse_ir --no-run >/dev/null 2>&1
    BIN=$(ls -t "${CARGO_TARGET_DIR:-target}"/release/deps/parse_ir-* | grep -v '\.d$' | head -1)
fi
out=$(mktemp /tmp/cg-parse.XXXXXX)
PARSE_IR_N=$N valgrind --tool=callgrind --callgrind-out-file="$out" "$BIN" >/dev/null 2>&1
echo "| case | instructions per look-up |"
echo "|---|---:|"
callgrind_annotate --inclusive=yes "$out" 2>/dev/null |
    grep -E '=> .*parse_ir::ir_' |
    awk -v n="$N" '{ gsub(",", "", $1); f = $(NF - 1); sub(/.*::ir_/, "", f); printf "| %s | %.1f |\n", f, $1 / n }'
rm -f "$out"
