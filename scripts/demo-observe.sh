#!/usr/bin/env bash
# The README's observability walkthrough, run for real (no root): pfild
# on its in-memory port with traffic to UDP ports 53, 80 and 443 through
# three hooks, then: which hook costs the most (pfilctl top), a capture
# after a given hook opened in tcpdump, and the counters as Prometheus
# scrapes them. Each command is printed before its output.
#
#   scripts/demo-observe.sh [DIR]     (DIR: where the socket and files go)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release
DIR=${1:-$(mktemp -d /tmp/pfil-observe.XXXXXX)}
cargo build --release -q -p pfild -p pfil-ctl
mkdir -p "$DIR"
SOCK=$DIR/ctl/pfild.sock
"$BIN/pfild" sink syn0 --synthetic --hook count --hook "bpf:drop udp port 53" --hook drop-udp:443 \
    --rate 500000 --dst-port 53,80,443 --seconds 60 --control "$SOCK" --metrics 127.0.0.1:9464 \
    >"$DIR/pfild.out" 2>"$DIR/pfild.err" &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
for _ in $(seq 500); do [ -S "$SOCK" ] && break; sleep 0.01; done
sleep 1
cd "$DIR"
pfilctl() { "$BIN/pfilctl" --socket "$SOCK" "$@"; }
step() { echo "\$ $*"; "$@"; }

step pfilctl heads
step pfilctl top -d 1 -n 2
echo "\$ pfilctl capture syn0 -i --after count:1 -c 4 -w - 'udp port 80' | tcpdump -nn -r -"
pfilctl capture syn0 -i --after count:1 -c 4 -w - udp port 80 | tcpdump -nn -r - 2>&1
echo "\$ pfilctl capture syn0 -i --after bpf:2 -c 1000 -w after-bpf.pcapng"
pfilctl capture syn0 -i --after bpf:2 -c 1000 -w after-bpf.pcapng
echo "\$ tcpdump -nn -r after-bpf.pcapng 'udp port 53' | wc -l"
tcpdump -nn -r after-bpf.pcapng 'udp port 53' 2>/dev/null | wc -l
echo "\$ curl -s http://127.0.0.1:9464/metrics | grep -E '^pfil_link_(packets|dropped|sampled_seconds)_total'"
curl -s http://127.0.0.1:9464/metrics | grep -E '^pfil_link_(packets|dropped|sampled_seconds)_total'
echo "\$ # pfild's status line (stderr)"
grep -m1 'costliest' "$DIR/pfild.err"
kill -INT $PID
wait $PID || true
trap - EXIT
