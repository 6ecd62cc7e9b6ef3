#!/usr/bin/env bash
# AF_XDP dataplane benchmark: pfild sink / pfild forward with 0, 1 (null),
# 1 (count) and 4 hooks, against DPDK testpmd (af_xdp vdev) rxonly / macswap
# on the same veth pairs in the same run.
#
#   sudo benches/afxdp.sh [RUNS] [SECONDS]      (defaults: 5 runs, 3 s each)
#
# Topology (all in namespaces this script creates and deletes on exit):
#   ns G: g0 <-veth-> ns F: f0        f1 <-veth-> ns S: s0
# Traffic: `pfild gen g0 --engine $GEN_ENGINE` at max rate for SECONDS,
# pinned to CPU 0 (taskset; the in-kernel generator pins its thread to the
# first CPU of that mask).
# Cases: pfild with 0 hooks, null, count, 4 hooks, count with --spin-us 0
# (no busy-polling), and testpmd; the cases are interleaved run by run.
# Receiver/forwarder under test pinned to CPU 1, receiving on f0;
# forwarders send f0 -> f1 (s0 has no XDP program: the kernel drops the
# frames at L2, counted as the cost of TX).
# pps = frames received (sink) or sent (forward) / generator active time.
# Needs: root, iproute2, dpdk-dev (dpdk-testpmd) + librte-net-af-xdp23.
# Env: PFILD (binary; default target/release/pfild, built if missing),
#      SKIP_TESTPMD=1 to measure pfild only, OUT=file for the raw results,
#      PFILD_BASE=binary to add the same cases run by a baseline build
#      ("base0", "basecount", ...: A/B against a previous commit in the
#      same run; the generator is always $PFILD), CASES="0 count ..." to
#      pick the cases, GEN_ENGINE=xdp-live|afxdp (default xdp-live: the
#      in-kernel generator, BPF_PROG_RUN live frames, so the app and not the
#      generator is the bottleneck; afxdp: the AF_XDP TX generator of the
#      earlier tables), GEN_ARGS="..." extra generator options (e.g.
#      "--repeat 16384 --batch-size 64").
set -euo pipefail

RUNS=${1:-5}
SECS=${2:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PFILD=${PFILD:-$ROOT/target/release/pfild}
OUT=${OUT:-$(mktemp /tmp/pfild-afxdp-bench.XXXXXX)}
TESTPMD=$(command -v dpdk-testpmd || true)
GEN_ENGINE=${GEN_ENGINE:-xdp-live}
GEN_ARGS=${GEN_ARGS:-}

[ "$(id -u)" = 0 ] || { echo "afxdp.sh: run as root (namespaces, XDP)" >&2; exit 1; }
command -v ip >/dev/null || { echo "afxdp.sh: iproute2 (ip) missing" >&2; exit 1; }
if [ -z "${SKIP_TESTPMD:-}" ] && [ -z "$TESTPMD" ]; then
    echo "afxdp.sh: dpdk-testpmd missing: apt-get install dpdk-dev librte-net-af-xdp23 (or SKIP_TESTPMD=1)" >&2
    exit 1
fi
if [ ! -x "$PFILD" ]; then
    (cd "$ROOT" && cargo build --release -p pfild)
fi

P=pfb$$
G=${P}g F=${P}f S=${P}s
PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -KILL "$p" 2>/dev/null || true; done
    for n in $G $F $S; do ip netns del "$n" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

for n in $G $F $S; do
    ip netns add "$n"
    ip -n "$n" link set lo up
    ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip -n $G link add g0 type veth peer name f0 netns $F
ip -n $F link add f1 type veth peer name s0 netns $S
ip -n $G addr add 198.18.0.1/24 dev g0
ip -n $F addr add 198.18.0.2/24 dev f0
ip -n $F addr add 198.18.1.1/24 dev f1
ip -n $S addr add 198.18.1.2/24 dev s0
ip -n $G link set g0 up; ip -n $F link set f0 up; ip -n $F link set f1 up; ip -n $S link set s0 up

has_xdp() { ip -n "$1" -d link show dev "$2" | grep -q "prog/xdp"; }
wait_xdp() { # ns ifname want(1|0)
    for _ in $(seq 250); do
        if has_xdp "$1" "$2"; then [ "$3" = 1 ] && return 0; else [ "$3" = 0 ] && return 0; fi
        sleep 0.02
    done
    echo "afxdp.sh: timeout waiting for XDP=$3 on $2" >&2; return 1
}
wait_ready() { # pid stderr-file: pfild says "stop with Ctrl-C" once its workers run
    for _ in $(seq 250); do
        grep -q "stop with Ctrl-C" "$2" 2>/dev/null && return 0
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.02
    done
    return 1
}
field() { sed -n "s/.*[ :]$2=\([0-9.]*\).*/\1/p" "$1" | tail -1; }

# Generator: max rate for SECS on CPU 0; prints "frames active_seconds
# xdp_xmit xdp_xmit_errors" (the last two: the veth driver's counters,
# "-" for the AF_XDP engine). It starts after the app, whose XDP program
# on f0 is what lets g0 take the in-kernel generator's redirected frames.
gen() {
    # shellcheck disable=SC2086
    taskset -c 0 "$PFILD" gen g0 --netns $G --engine "$GEN_ENGINE" $GEN_ARGS --seconds "$SECS" \
        --no-control --quiet >"$OUT.gen" 2>"$OUT.generr" ||
        echo "afxdp.sh: gen failed: $(grep -i error "$OUT.generr" | tail -1)" >&2
    local x e
    x=$(field "$OUT.gen" xdp_xmit); e=$(field "$OUT.gen" xdp_xmit_errors)
    echo "$(field "$OUT.gen" tx) $(field "$OUT.gen" active_seconds) ${x:--} ${e:--}"
}

HOOKS_0=""
HOOKS_null="--hook null"
HOOKS_count="--hook count"
HOOKS_4="--hook count --hook drop-udp:53 --hook null --hook count"
HOOKS_countnospin="--hook count --spin-us 0" # A/B: sleep in poll(2) at once

# One measurement: prints pps.
measure() { # kind(sink|forward) case(0|null|count|4|testpmd)
    local kind=$1 case=$2 pid frames secs got
    if [ "$case" = testpmd ]; then
        local vdevs=(--vdev net_af_xdp0,iface=f0) mode=rxonly
        if [ "$kind" = forward ]; then vdevs+=(--vdev net_af_xdp1,iface=f1); mode=macswap; fi
        ip netns exec $F taskset -c 1 "$TESTPMD" --lcores "(0,1)@1" --no-huge -m 1024 --no-pci --no-shconf \
            --file-prefix "$P" "${vdevs[@]}" --log-level=lib.eal:error -- \
            --total-num-mbufs=16384 --forward-mode=$mode --nb-cores=1 --stats-period 3600 \
            >"$OUT.rx" 2>&1 </dev/null &
        pid=$!; PIDS+=($pid)
        wait_xdp $F f0 1; [ "$kind" = forward ] && wait_xdp $F f1 1
        sleep 1 # testpmd starts forwarding after the ports are up
    else
        local bin=$PFILD hk=$case try
        if [[ $case == base* ]]; then bin=$PFILD_BASE; hk=${case#base}; fi
        local hooks=HOOKS_$hk
        for try in 1 2 3; do
            if [ "$kind" = sink ]; then
                taskset -c 1 "$bin" sink f0 --netns $F ${!hooks} --quiet >"$OUT.rx" 2>"$OUT.err" &
            else
                taskset -c 1 "$bin" forward f0 f1 --netns $F ${!hooks} --quiet >"$OUT.rx" 2>"$OUT.err" &
            fi
            pid=$!; PIDS+=($pid)
            if wait_ready $pid "$OUT.err"; then break; fi
            # The previous socket may still be closing (EBUSY): log and retry.
            echo "afxdp.sh: pfild $kind did not start (try $try): $(grep -i error "$OUT.err" | tail -1)" >&2
            kill -KILL $pid 2>/dev/null || true; wait $pid 2>/dev/null || true
            sleep 1
        done
        sleep 0.2
    fi
    local xmit xerr
    read -r frames secs xmit xerr < <(gen)
    sleep 0.3
    kill -INT $pid; wait $pid || true
    wait_xdp $F f0 0
    if [ "$case" = testpmd ]; then
        # The accumulated totals: RX-packets (rxonly) or TX-packets (macswap).
        local key=RX-packets; [ "$kind" = forward ] && key=TX-packets
        got=$(grep -A3 "Accumulated forward statistics" "$OUT.rx" | sed -n "s/.*$key: *\([0-9]*\).*/\1/p" | head -1)
    else
        if [ "$kind" = sink ]; then got=$(field "$OUT.rx" rx); else got=$(field "$OUT.rx" tx); fi
    fi
    echo "$kind $case engine=$GEN_ENGINE gen_frames=$frames gen_secs=$secs xdp_xmit=$xmit xdp_xmit_errors=$xerr got=${got:-0} load=$(cut -d" " -f1 /proc/loadavg)" >>"$OUT"
    awk -v g="${got:-0}" -v s="$secs" 'BEGIN { printf "%.0f\n", (s > 0 ? g / s : 0) }'
}

if [ -z "${CASES:-}" ]; then
    CASES="0 null count 4 countnospin"
    [ -n "${PFILD_BASE:-}" ] && CASES="$CASES base0 basenull basecount base4"
    [ -z "${SKIP_TESTPMD:-}" ] && CASES="$CASES testpmd"
fi
declare -A R
echo "# afxdp.sh: $RUNS runs x $SECS s, generator --engine $GEN_ENGINE $GEN_ARGS, $(date -u +%FT%TZ), kernel $(uname -r)" | tee "$OUT"
for r in $(seq "$RUNS"); do
    for kind in sink forward; do
        for c in $CASES; do
            pps=$(measure $kind $c)
            R[$kind.$c]="${R[$kind.$c]:-} $pps"
            printf 'run %d %-7s %-7s %10s pps\n' "$r" "$kind" "$c" "$pps" >&2
        done
    done
done

stats() { # values... -> "median min max" (Mpps)
    printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END {
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.3f %.3f %.3f\n", m / 1e6, v[1] / 1e6, v[NR] / 1e6 }'
}
echo
echo "| mode | hooks | median Mpps | min-max Mpps | vs testpmd |"
echo "|---|---|---:|---:|---:|"
for kind in sink forward; do
    ref=""
    if [ -z "${SKIP_TESTPMD:-}" ]; then
        # shellcheck disable=SC2086
        read -r ref _ _ < <(stats ${R[$kind.testpmd]})
    fi
    for c in $CASES; do
        # shellcheck disable=SC2086
        read -r med lo hi < <(stats ${R[$kind.$c]})
        ratio="-"
        [ -n "$ref" ] && ratio=$(awk -v a="$med" -v b="$ref" 'BEGIN { printf "%.2fx", (b > 0 ? a / b : 0) }')
        name="pfild $kind"; label="$c"
        [ "$c" = testpmd ] && { name="testpmd $([ $kind = sink ] && echo rxonly || echo macswap)"; label="-"; }
        local_c=${c#base}
        [ "$local_c" = 4 ] && label="4 (count, drop-udp:53, null, count)"
        [ "$local_c" = countnospin ] && label="count, --spin-us 0"
        [ "$local_c" != "$c" ] && { [ "$local_c" = 4 ] || label=$local_c; label="$label (baseline build)"; }
        echo "| $name | $label | $med | $lo-$hi | $ratio |"
    done
done
echo
echo "raw results: $OUT"
