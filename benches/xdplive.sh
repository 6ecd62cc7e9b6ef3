#!/usr/bin/env bash
# The in-kernel generator (issue 11): `pfild gen --engine xdp-live` against
# the AF_XDP engine, each into a `pfild sink --hook count` on the veth peer.
#
#   sudo benches/xdplive.sh compare [RUNS] [SECONDS]   engines interleaved (default 5 x 3 s)
#   sudo benches/xdplive.sh sweep   [RUNS] [SECONDS]   --repeat / --batch-size of xdp-live
#   sudo benches/xdplive.sh ports   [RUNS] [SECONDS]   xdp-live with 1 port vs 4 rotated per frame
#
# Topology (namespaces this script creates and deletes on exit):
#   ns G: g0 <-veth-> ns S: s0
# Generator pinned to CPU 0 (taskset), sink pinned to CPU 1.
# Per run: gen_pps = frames generated / generator active time; sink_pps =
# frames the sink received / generator active time; the kernel's drop
# counters (veth xdp_xmit_errors: peer ring full; the sink's AF_XDP
# rx_ring_full + rx_dropped) say where the rest went. The CPU split per core
# over the generator's run (from /proc/stat) is in the raw lines: usr, nice
# (other people's builds run niced: that column is the noise), sys, softirq
# (+ irq), idle (+ iowait), in % of each CPU.
# Env: PFILD (binary; default target/release/pfild), OUT (raw results file).
set -euo pipefail

WHAT=${1:-compare}
RUNS=${2:-5}
SECS=${3:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PFILD=${PFILD:-$ROOT/target/release/pfild}
OUT=${OUT:-$(mktemp /tmp/pfild-xdplive-bench.XXXXXX)}

[ "$(id -u)" = 0 ] || { echo "xdplive.sh: run as root (namespaces, XDP)" >&2; exit 1; }
[ -x "$PFILD" ] || { echo "xdplive.sh: no $PFILD: cargo build --release -p pfild (or PFILD=...)" >&2; exit 1; }

TMPD=$(mktemp -d /tmp/pfild-xdplive.XXXXXX) # the runs' scratch output
P=xlb$$
G=${P}g S=${P}s
PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -KILL "$p" 2>/dev/null || true; done
    for n in $G $S; do ip netns del "$n" 2>/dev/null || true; done
    rm -rf "$TMPD"
}
trap cleanup EXIT INT TERM

for n in $G $S; do
    ip netns add "$n"
    ip -n "$n" link set lo up
    ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip -n $G link add g0 type veth peer name s0 netns $S
ip -n $G addr add 198.18.0.1/24 dev g0
ip -n $S addr add 198.18.0.2/24 dev s0
ip -n $G link set g0 up; ip -n $S link set s0 up

wait_ready() { # pid stderr-file
    for _ in $(seq 250); do
        grep -q "stop with Ctrl-C" "$2" 2>/dev/null && return 0
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.02
    done
    return 1
}
field() { sed -n "s/.*[ :]$2=\([0-9.]*\).*/\1/p" "$1" | tail -1; }
cpustat() { grep -E '^cpu[0-9]+ ' /proc/stat; }
# before-file after-file -> "cpu0=usr/nice/sys/softirq/idle cpu1=..." (% of each CPU)
cpusplit() {
    paste -d' ' "$1" "$2" | awk '{
        n = (NF / 2); tot = 0
        for (i = 2; i <= n; i++) { d[i] = $(i + n) - $i; tot += d[i] }
        if (tot <= 0) tot = 1
        printf "%s=%.0f/%.0f/%.0f/%.0f/%.0f ", $1, 100 * d[2] / tot, 100 * d[3] / tot, 100 * d[4] / tot,
            100 * (d[7] + d[8]) / tot, 100 * (d[5] + d[6]) / tot }'
}

# One run: prints "gen_pps sink_pps" and appends the raw line to $OUT.
run() { # label gen-args...
    local label=$1 pid try; shift
    for try in 1 2 3; do
        taskset -c 1 "$PFILD" sink s0 --netns $S --hook count --no-control --quiet >"$TMPD/rx" 2>"$TMPD/err" &
        pid=$!; PIDS+=($pid)
        if wait_ready $pid "$TMPD/err"; then break; fi
        echo "xdplive.sh: sink did not start (try $try): $(grep -i error "$TMPD/err" | tail -1)" >&2
        kill -KILL $pid 2>/dev/null || true; wait $pid 2>/dev/null || true
        sleep 1
    done
    sleep 0.2
    cpustat >"$TMPD/cpu0"
    taskset -c 0 "$PFILD" gen g0 --netns $G --seconds "$SECS" --no-control --quiet "$@" >"$TMPD/gen" 2>"$TMPD/generr" || {
        echo "xdplive.sh: gen failed: $(tail -2 "$TMPD/generr")" >&2; }
    cpustat >"$TMPD/cpu1"
    sleep 0.3
    kill -INT $pid; wait $pid || true
    local gen secs rx kdrop xmit xerr
    gen=$(field "$TMPD/gen" generated); secs=$(field "$TMPD/gen" active_seconds)
    xmit=$(field "$TMPD/gen" xdp_xmit); xerr=$(field "$TMPD/gen" xdp_xmit_errors)
    rx=$(field "$TMPD/rx" rx); kdrop=$(field "$TMPD/rx" kernel_rx_dropped)
    echo "$label gen=${gen:-0} secs=${secs:-0} xdp_xmit=${xmit:--} xdp_xmit_errors=${xerr:--} sink_rx=${rx:-0} sink_kernel_dropped=${kdrop:-0} cpu(usr/nice/sys/softirq/idle%) $(cpusplit "$TMPD/cpu0" "$TMPD/cpu1")load=$(cut -d" " -f1 /proc/loadavg)" >>"$OUT"
    awk -v g="${gen:-0}" -v r="${rx:-0}" -v s="${secs:-0}" 'BEGIN { if (s > 0) printf "%.0f %.0f\n", g / s, r / s; else print "0 0" }'
}

stats() { # values... -> "median min max" (Mpps)
    printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END {
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.3f %.3f %.3f\n", m / 1e6, v[1] / 1e6, v[NR] / 1e6 }'
}

declare -A GEN RX
case "$WHAT" in
compare)
    CASES=(afxdp xdp-live)
    ;;
sweep)
    CASES=(r64 r1024 r16384 r262144 b16 b256)
    ;;
ports)
    CASES=(p1 p4)
    ;;
*) echo "usage: xdplive.sh compare|sweep|ports [RUNS] [SECONDS]" >&2; exit 2 ;;
esac
args_of() {
    case $1 in
    afxdp) echo "--engine afxdp" ;;
    xdp-live) echo "--engine xdp-live" ;;
    r*) echo "--engine xdp-live --repeat ${1#r} --batch-size 64" ;;
    b*) echo "--engine xdp-live --repeat 16384 --batch-size ${1#b}" ;;
    p1) echo "--engine xdp-live --dst-port 9" ;;
    p4) echo "--engine xdp-live --dst-port 53,80,443,8080" ;;
    esac
}
echo "# xdplive.sh $WHAT: $RUNS runs x $SECS s, $(date -u +%FT%TZ), kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT"
for r in $(seq "$RUNS"); do
    for c in "${CASES[@]}"; do
        # shellcheck disable=SC2046
        read -r g x < <(run "$c" $(args_of "$c"))
        GEN[$c]="${GEN[$c]:-} $g"; RX[$c]="${RX[$c]:-} $x"
        printf 'run %d %-9s gen %10s pps  sink %10s pps\n' "$r" "$c" "$g" "$x" >&2
    done
done
echo
echo "| case | gen median Mpps | gen min-max | sink median Mpps | sink min-max |"
echo "|---|---:|---:|---:|---:|"
for c in "${CASES[@]}"; do
    # shellcheck disable=SC2086
    read -r gm gl gh < <(stats ${GEN[$c]})
    # shellcheck disable=SC2086
    read -r sm sl sh < <(stats ${RX[$c]})
    echo "| $c ($(args_of "$c")) | $gm | $gl-$gh | $sm | $sl-$sh |"
done
echo
echo "raw results: $OUT"
