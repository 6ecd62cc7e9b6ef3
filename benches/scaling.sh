#!/usr/bin/env bash
# Per-queue scaling of the AF_XDP sink: for N = 1..MAXQ queues, a veth pair
# with N queues, the in-kernel generator with N threads (one per queue:
# veth puts a frame redirected on CPU c on the peer's queue c % N) and a
# `pfild sink --queues N` with worker i pinned to the i-th app CPU.
#
#   sudo benches/scaling.sh MAXQ [RUNS] [SECONDS]
#
# Needs 2 x MAXQ CPUs to mean anything: generator threads on GEN_CPUS, sink
# workers on APP_CPUS (defaults: the first MAXQ CPUs and the next MAXQ).
# A 2-core machine can run MAXQ=1 only (it prints the N=1 baseline); the
# per-queue accounting itself is tested by
# crates/pfild/tests/xdplive.rs::xl_two_queues_pinned_workers_account_per_queue.
# Prints per N: median Mpps (min-max) over RUNS and the efficiency
# pps(N) / (N x pps(1)). Env: PFILD (binary, default target/release/pfild),
# HOOKS (default "--hook count"), GEN_CPUS / APP_CPUS (comma lists; the
# generator's CPUs must be N consecutive ones, so that c % N sends each
# thread to its own queue).
set -euo pipefail

MAXQ=${1:?usage: scaling.sh MAXQ [RUNS] [SECONDS]}
RUNS=${2:-5}
SECS=${3:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PFILD=${PFILD:-$ROOT/target/release/pfild}
HOOKS=${HOOKS:---hook count}
NCPU=$(nproc)
GEN_CPUS=${GEN_CPUS:-$(seq -s, 0 $((MAXQ - 1)))}
APP_CPUS=${APP_CPUS:-$(seq -s, "$MAXQ" $((2 * MAXQ - 1)))}

[ "$(id -u)" = 0 ] || { echo "scaling.sh: run as root (namespaces, XDP)" >&2; exit 1; }
if [ $((2 * MAXQ)) -gt "$NCPU" ] && [ -z "${FORCE:-}" ]; then
    echo "scaling.sh: $MAXQ queues need $((2 * MAXQ)) CPUs (generator + sink), this machine has $NCPU (FORCE=1 to run anyway)" >&2
    exit 1
fi
[ -x "$PFILD" ] || (cd "$ROOT" && cargo build --release -p pfild)

P=pfs$$
G=${P}g S=${P}s
OUT=$(mktemp -d /tmp/pfild-scaling.XXXXXX)
SINK=""
cleanup() {
    [ -n "$SINK" ] && kill -KILL "$SINK" 2>/dev/null || true
    ip netns del $G 2>/dev/null || true
    ip netns del $S 2>/dev/null || true
}
trap cleanup EXIT INT TERM
ip netns add $G
ip netns add $S
field() { sed -n "s/.*[ :]$2=\([0-9.]*\).*/\1/p" "$1" | tail -1; }

one() { # queues -> pps received by the sink over the generator's active time
    local n=$1 i
    ip -n $G link del g0 2>/dev/null || true
    ip -n $G link add g0 numtxqueues "$n" numrxqueues "$n" type veth \
        peer name s0 netns $S numtxqueues "$n" numrxqueues "$n"
    ip -n $G link set g0 up
    ip -n $S link set s0 up
    # shellcheck disable=SC2086
    "$PFILD" sink s0 --netns $S --queues "$n" --cpus "$APP_CPUS" $HOOKS --no-control --quiet \
        >"$OUT/sink" 2>"$OUT/sinkerr" &
    SINK=$!
    for i in $(seq 250); do
        grep -q "stop with Ctrl-C" "$OUT/sinkerr" && break
        kill -0 $SINK || { cat "$OUT/sinkerr" >&2; exit 1; }
        sleep 0.02
    done
    taskset -c "$(echo "$GEN_CPUS" | cut -d, -f1-"$n")" "$PFILD" gen g0 --netns $G --engine xdp-live \
        --threads "$n" --seconds "$SECS" --no-control --quiet >"$OUT/gen" 2>&1
    sleep 0.3
    kill -INT $SINK; wait $SINK || true; SINK=""
    awk -v g="$(field "$OUT/sink" rx)" -v s="$(field "$OUT/gen" active_seconds)" \
        'BEGIN { printf "%.0f\n", (s > 0 ? g / s : 0) }'
}

declare -A R
for r in $(seq "$RUNS"); do
    for n in $(seq "$MAXQ"); do
        pps=$(one "$n")
        R[$n]="${R[$n]:-} $pps"
        echo "run $r queues $n: $pps pps" >&2
    done
done
echo "| queues | median Mpps | min-max | efficiency vs N x 1 queue |"
echo "|---:|---:|---:|---:|"
base=""
for n in $(seq "$MAXQ"); do
    # shellcheck disable=SC2086
    read -r med lo hi < <(printf '%s\n' ${R[$n]} | sort -n | awk '{ v[NR] = $1 } END {
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.3f %.3f %.3f\n", m / 1e6, v[1] / 1e6, v[NR] / 1e6 }')
    [ -z "$base" ] && base=$med
    eff=$(awk -v m="$med" -v b="$base" -v n="$n" 'BEGIN { printf "%.2f", (b > 0 ? m / (n * b) : 0) }')
    echo "| $n | $med | $lo-$hi | $eff |"
done
