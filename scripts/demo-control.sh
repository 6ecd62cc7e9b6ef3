#!/usr/bin/env bash
# The README's pfilctl walkthrough, run for real: pfild on its in-memory
# port with traffic to UDP ports 53 and 80, then every step an operator
# takes with pfilctl while the traffic runs, each command printed before
# its output. No root needed.
#
#   scripts/demo-control.sh [DIR]     (DIR: where the socket and files go)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release
DIR=${1:-$(mktemp -d /tmp/pfil-demo.XXXXXX)}
cargo build --release -q -p pfild -p pfil-ctl
mkdir -p "$DIR"
SOCK=$DIR/ctl/pfild.sock
"$BIN/pfild" sink syn0 --synthetic --hook count --rate 1000000 --dst-port 53,80 \
    --seconds 60 --control "$SOCK" >"$DIR/pfild.out" 2>"$DIR/pfild.err" &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
for _ in $(seq 500); do [ -S "$SOCK" ] && break; sleep 0.01; done
cd "$DIR"
pfilctl() { "$BIN/pfilctl" --socket "$SOCK" "$@"; }
step() { echo "\$ $*"; "$@"; }

step pfilctl heads
step pfilctl hooks
step pfilctl add drop-udp:dns --set 53
step pfilctl link -i --before count:1 drop-udp:dns syn0
sleep 0.5
step pfilctl stats syn0 --watch 1 --count 2
step pfilctl set drop-udp:dns --set 5353
sleep 0.5
step pfilctl stats syn0
echo "\$ pfilctl show > running.toml"
pfilctl show >running.toml
step cat running.toml
cat >edge.toml <<'EOF'
# drop DNS again, and count what passes it
[hooks."count:1"]

[hooks."drop-udp:dns"]
config = "53"

[hooks."count:edge"]

[heads.syn0]
in = ["drop-udp:dns", "count:edge", "count:1"]
EOF
step cat edge.toml
step pfilctl apply --dry-run edge.toml
step pfilctl apply edge.toml
sleep 0.5
step pfilctl stats syn0
step pfilctl unlink -i drop-udp:dns syn0
step pfilctl unlink -i count:edge syn0
step pfilctl unlink -i count:1 syn0
step pfilctl heads
kill -INT $PID
wait $PID || true
trap - EXIT
echo "\$ # pfild's report at the end (stdout)"
grep -v '^totals' "$DIR/pfild.out" | head -8
