#!/usr/bin/env bash
# Control plane under load (issue 8): the datapath rate of
# `pfild sink syn0 --synthetic` with four hooks, with and without a
# control client doing link / set / unlink at RATE operations per second
# on its socket, cases interleaved RUNS times in one run (DIR=out, the
# default, cycles the hook on the `out` chain, which a sink's traffic does
# not walk: the cost of the operations, not of a fifth hook; DIR=in
# cycles it on the traffic's chain); then the round
# trip of the pfilctl command itself (`pfilctl link` and `unlink`, a
# process each, grace period included) while traffic flows.
#
#   benches/ab_control.sh [RUNS] [SECONDS] [RATE]
#
# Each run is one sample of frames per second (rx / active seconds from
# pfild's totals line). With taskset (and PIN=1, the default), pfild's
# datapath worker is pinned to CPU 1 and its other threads (status,
# control server and its connections) and the control client
# (`pfil-bench control`) to CPU 0: a dataplane core of its own, as in a
# deployment. PIN=0 leaves pfild to the scheduler (the client on CPU 0).
# Needs release builds of pfild, pfilctl and pfil-bench, and ministat.
set -euo pipefail
RUNS=${1:-7} SECS=${2:-6} RATE=${3:-1000} DIR=${DIR:-out}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release
cargo build --release -q -p pfild -p pfil-ctl -p pfil-bench
OUT=$(mktemp -d /tmp/ab-control.XXXXXX)
PIN0=()
command -v taskset >/dev/null && PIN0=(taskset -c 0)
PIN=${PIN:-1}
# Pin pfild's threads: the worker (pfil-synthetic-*) to CPU 1, the rest to 0.
pin_threads() {
    [ "$PIN" = 1 ] && command -v taskset >/dev/null || return 0
    local t
    for t in /proc/"$1"/task/*; do
        case "$(cat "$t/comm" 2>/dev/null)" in
            pfil-synthetic*) taskset -cp 1 "${t##*/}" >/dev/null ;;
            *) taskset -cp 0 "${t##*/}" >/dev/null ;;
        esac
    done
}
HOOKS=(--hook null --hook count --hook drop-udp:53 --hook count)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# One pfild run; with $2 = ctl, the control load runs alongside.
one() {
    local tag=$1 mode=$2 sock="$OUT/ctl-$1/s.sock"
    "$BIN/pfild" sink syn0 --synthetic "${HOOKS[@]}" --control "$sock" \
        --seconds "$SECS" --quiet >"$OUT/$tag.out" 2>"$OUT/$tag.err" &
    local pid=$!
    pids+=("$pid")
    for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.01; done
    pin_threads "$pid"
    if [ "$mode" = ctl ]; then
        # Runs for all but the first and last 0.3 s of pfild's run.
        "${PIN0[@]}" "$BIN/pfil-bench" control --socket "$sock" --rate "$RATE" --dir "$DIR" \
            --seconds "$(awk -v s="$SECS" 'BEGIN { print s - 0.6 }')" --json >>"$OUT/control.json"
    fi
    wait "$pid"
    awk '/^totals:/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); t[kv[1]] = kv[2] }
                      printf "%.0f\n", t["rx"] / t["active_seconds"] }' "$OUT/$tag.out" >>"$OUT/$mode"
}

echo "# ab_control: $RUNS runs of $SECS s, control at $RATE ops/s, $(date -u +%FT%TZ), $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
echo "# $(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), PIN=$PIN, DIR=$DIR"
for r in $(seq "$RUNS"); do
    one "r$r-none" none
    one "r$r-ctl" ctl
    echo "run $r done" >&2
done

median() { sort -n "$1" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo
echo "## datapath: pfild sink syn0 --synthetic ${HOOKS[*]} (frames/s; x = no control, + = $RATE ops/s)"
"$BIN/pfil-bench" ministat -c 95 "$OUT/none" "$OUT/ctl" | sed 's/^/    /' || true
n=$(median "$OUT/none") c=$(median "$OUT/ctl")
echo "    median none $n, with control $c: ratio $(awk -v n="$n" -v c="$c" 'BEGIN { printf "%.4f", c / n }')"
echo
echo "## control client round trips (pfil-bench control, one connection; per run)"
sed 's/^/    /' "$OUT/control.json"

# pfilctl itself: a process per command, while traffic flows.
sock="$OUT/ctl-pfilctl/s.sock"
"$BIN/pfild" sink syn0 --synthetic "${HOOKS[@]}" --control "$sock" --seconds 120 --quiet \
    >"$OUT/pfilctl.out" 2>"$OUT/pfilctl.err" &
pid=$!
pids+=("$pid")
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.01; done
pin_threads "$pid"
"$BIN/pfilctl" --socket "$sock" add count:lat >/dev/null
for i in $(seq 200); do
    for verb in link unlink; do
        # bash's clock, no process of its own: only pfilctl's is timed.
        t0=${EPOCHREALTIME/./}
        "${PIN0[@]}" "$BIN/pfilctl" --socket "$sock" "$verb" -i count:lat syn0 >/dev/null
        t1=${EPOCHREALTIME/./}
        echo $((t1 - t0)) >>"$OUT/pfilctl.$verb"
    done
done
kill -INT "$pid"
wait "$pid" || true
echo
echo "## pfilctl link / unlink round trips (a process each, grace period included; us)"
for verb in link unlink; do
    sort -n "$OUT/pfilctl.$verb" | awk -v v="$verb" '{ a[NR] = $1 }
        END { printf "    %-6s n=%d median %d p99 %d max %d\n", v, NR, a[int((NR + 1) / 2)], a[int(NR * 0.99 + 0.5)], a[NR] }'
done
echo
echo "raw samples: $OUT"
