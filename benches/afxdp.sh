#!/usr/bin/env bash
# AF_XDP dataplane benchmark: pfild sink / pfild forward with 0, 1 counting,
# 4 hooks and a 1k-rule acl, against DPDK testpmd (af_xdp vdev) rxonly /
# macswap / io, with busy_budget=0 and with its defaults, on the same veth
# pairs in the same run, cases interleaved run by run.
#
#   sudo benches/afxdp.sh [RUNS] [SECONDS]      (defaults: 5 runs, 3 s each)
#
# Topology (all in namespaces this script creates and deletes on exit):
#   ns G: g0 <-veth-> ns F: f0        f1 <-veth-> ns S: s0
# Traffic: `pfild gen g0 --engine $GEN_ENGINE` at max rate for SECONDS,
# pinned to CPU 0 (taskset; the in-kernel generator pins its thread to the
# first CPU of that mask). veth receives on the sending CPU, so the
# generator, f0's NAPI and the XDP redirect into the AF_XDP socket all run
# on CPU 0; the app under test, pinned to CPU 1, only drains the rings.
# Forwarders send f0 -> f1 (s0 has no XDP program: the kernel drops the
# frames at L2, counted as the cost of TX).
# Per measurement: pps = frames received (sink) or sent (forward) /
# generator active time; the CPU split of both cores over the generator's
# run (/proc/stat: usr, sys, softirq, idle); the veth driver's XDP counters
# on f0 (ethtool -S: xdp_redirect; the generator's xdp_xmit minus it = the
# frames lost before the app, no fill buffer or RX ring full, measured the
# same way for pfild and testpmd); for pfild, the socket's own
# rx_ring_full and fill_ring_empty (XDP_STATISTICS, from its report).
# Frames per app-CPU-second = frames / busy seconds of CPU 1: the efficiency
# figure when the kernel side (CPU 0) is the bottleneck.
# Cases (SINK_CASES, FWD_CASES): 0 count 4 acl null countnospin count2k
# count4k count8k (count with --ring 2048/4096/8192) for pfild
# (acl: ACL_RULES, default the ClassBench acl1_1k set); testpmd =
# busy_budget=0 (rxonly / macswap), testpmddef = testpmd's defaults,
# testpmdio = io forwarding with busy_budget=0.
# Needs: root, iproute2, ethtool, ministat, dpdk-dev (dpdk-testpmd) +
# librte-net-af-xdp23 (scripts/setup.sh installs them).
# Env: PFILD (binary; default target/release/pfild, built if missing),
#      SKIP_TESTPMD=1 to measure pfild only, OUT=file for the raw results,
#      PFILD_BASE=binary to add cases run by a baseline build ("base0",
#      "basecount", ...: A/B against a previous commit in the same run; the
#      generator is always $PFILD), GEN_ENGINE=xdp-live|afxdp (default
#      xdp-live: the in-kernel generator, so the app and not the generator
#      is the bottleneck; afxdp: the AF_XDP TX generator of the earlier
#      tables), GEN_ARGS="..." extra generator options, APP_ARGS="..."
#      extra pfild options (e.g. "--ring 4096"), KINDS="sink" (or
#      "forward") to run one mode only.
# Run it on a quiet machine: a busy-polling app that shares its CPU with
# any other runnable task (even at nice 19) loses the CPU for a scheduler
# slice (about a millisecond), and at 2 Mpps that overflows a 2048-entry
# fill ring: the drops then measure the other task, not the app.
set -euo pipefail

RUNS=${1:-5}
SECS=${2:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PFILD=${PFILD:-$ROOT/target/release/pfild}
OUT=${OUT:-$(mktemp /tmp/pfild-afxdp-bench.XXXXXX)}
TESTPMD=$(command -v dpdk-testpmd || true)
GEN_ENGINE=${GEN_ENGINE:-xdp-live}
GEN_ARGS=${GEN_ARGS:-}
APP_ARGS=${APP_ARGS:-}
APP_RUN=(taskset -c 1)
ACL_RULES=${ACL_RULES:-$ROOT/data/classbench/acl1_1k}

[ "$(id -u)" = 0 ] || { echo "afxdp.sh: run as root (namespaces, XDP)" >&2; exit 1; }
for t in ip ethtool ministat; do
    command -v $t >/dev/null || { echo "afxdp.sh: $t missing: run scripts/setup.sh" >&2; exit 1; }
done
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

# /proc/stat's cpu0 and cpu1 lines: "user nice system idle iowait irq softirq steal" each.
cpustat() { awk '$1 == "cpu0" || $1 == "cpu1" { print $2, $3, $4, $5, $6, $7, $8, $9 }' /proc/stat | tr '\n' ' '; }
# Per core, from two cpustat snapshots: usr/sys/si/idle percent, and CPU 1's busy seconds.
cpusplit() { # before... -- after...
    awk -v hz="$(getconf CLK_TCK)" '{
        for (c = 0; c < 2; c++) {
            t = 0; for (i = 1; i <= 8; i++) { d[i] = $(16 + 8 * c + i) - $(8 * c + i); t += d[i] }
            if (t <= 0) t = 1
            printf "cpu%d=%.0f/%.0f/%.0f/%.0f ", c, 100 * (d[1] + d[2]) / t, 100 * d[3] / t,
                100 * (d[6] + d[7]) / t, 100 * (d[4] + d[5]) / t
            if (c == 1) printf "app_busy_s=%.3f", (t - d[4] - d[5]) / hz
        }
    }' <<<"$1 $2"
}
# f0's veth XDP redirects into the app's socket, summed over queues.
vethxdp() {
    ip netns exec $F ethtool -S f0 | awk '/rx_queue_[0-9]+_xdp_redirect:/ { r += $2 } END { print r + 0 }'
}

HOOKS_0=""
HOOKS_null="--hook null"
HOOKS_count="--hook count"
HOOKS_4="--hook count --hook drop-udp:53 --hook null --hook count"
HOOKS_countnospin="--hook count --spin-us 0" # A/B: sleep in poll(2) at once
HOOKS_acl="--hook acl:@$ACL_RULES"
HOOKS_count2k="--hook count --ring 2048" # ring sizes, A/B
HOOKS_count4k="--hook count --ring 4096"
HOOKS_count8k="--hook count --ring 8192"

# One measurement: prints pps.
measure() { # kind(sink|forward) case(0|null|count|4|testpmd)
    local kind=$1 case=$2 pid frames secs got
    if [[ $case == testpmd* ]]; then
        local bb=",busy_budget=0" mode=rxonly
        [ "$case" = testpmddef ] && bb=""
        local vdevs=(--vdev "net_af_xdp0,iface=f0$bb")
        if [ "$kind" = forward ]; then
            vdevs+=(--vdev "net_af_xdp1,iface=f1$bb"); mode=macswap
            [ "$case" = testpmdio ] && mode=io
        fi
        ip netns exec $F "${APP_RUN[@]}" "$TESTPMD" --lcores "(0,1)@1" --no-huge -m 1024 --no-pci --no-shconf \
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
                "${APP_RUN[@]}" "$bin" sink f0 --netns $F ${!hooks} $APP_ARGS --quiet >"$OUT.rx" 2>"$OUT.err" &
            else
                "${APP_RUN[@]}" "$bin" forward f0 f1 --netns $F ${!hooks} $APP_ARGS --quiet >"$OUT.rx" 2>"$OUT.err" &
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
    local xmit xerr c0 c1 vr0 vr1
    local t0 t1
    c0=$(cpustat); vr0=$(vethxdp); t0=$(date +%s.%N)
    read -r frames secs xmit xerr < <(gen)
    c1=$(cpustat); vr1=$(vethxdp); t1=$(date +%s.%N)
    sleep 0.3
    kill -INT $pid; wait $pid || true
    wait_xdp $F f0 0
    local kstat="rx_ring_full=- fill_ring_empty=-"
    if [[ $case == testpmd* ]]; then
        # The accumulated totals: RX-packets (rxonly) or TX-packets (macswap).
        local key=RX-packets; [ "$kind" = forward ] && key=TX-packets
        got=$(grep -A3 "Accumulated forward statistics" "$OUT.rx" | sed -n "s/.*$key: *\([0-9]*\).*/\1/p" | head -1)
    else
        if [ "$kind" = sink ]; then got=$(field "$OUT.rx" rx); else got=$(field "$OUT.rx" tx); fi
        # f0's socket(s): "port f0/Q (...): rx_dropped A rx_ring_full B fill_ring_empty C ...", summed.
        kstat=$(awk '/port f0\// { for (i = 1; i < NF; i++) { if ($i == "rx_ring_full") r += $(i + 1)
            if ($i == "fill_ring_empty") e += $(i + 1) } } END { printf "rx_ring_full=%d fill_ring_empty=%d", r, e }' "$OUT.rx")
    fi
    local split lost=-
    split=$(cpusplit "$c0" "$c1")
    # Frames on f0's ring that XDP could not redirect into the socket (no
    # fill buffer, RX ring full), the same measure for every app.
    [[ $xmit =~ ^[0-9]+$ ]] && lost=$((xmit - (vr1 - vr0)))
    echo "$kind $case engine=$GEN_ENGINE window_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') gen_frames=$frames gen_secs=$secs xdp_xmit=$xmit xdp_xmit_errors=$xerr got=${got:-0} veth_xdp_redirect=$((vr1 - vr0)) lost=$lost $kstat $split load=$(cut -d" " -f1 /proc/loadavg)" >>"$OUT"
    awk -v g="${got:-0}" -v s="$secs" 'BEGIN { printf "%.0f\n", (s > 0 ? g / s : 0) }'
}

SINK_CASES=${SINK_CASES:-0 count 4 acl}
FWD_CASES=${FWD_CASES:-0 count}
if [[ " $SINK_CASES " == *" acl "* ]] && [ ! -f "$ACL_RULES" ]; then
    echo "afxdp.sh: $ACL_RULES missing (ACL_RULES=FILE): the acl case is skipped" >&2
    SINK_CASES=${SINK_CASES/acl/}
fi
if [ -n "${PFILD_BASE:-}" ]; then SINK_CASES="$SINK_CASES base0 basecount"; FWD_CASES="$FWD_CASES base0 basecount"; fi
if [ -z "${SKIP_TESTPMD:-}" ]; then
    SINK_CASES="$SINK_CASES testpmd testpmddef"
    FWD_CASES="$FWD_CASES testpmd testpmdio testpmddef"
fi
declare -A R
D=$OUT.d
mkdir -p "$D"
echo "# afxdp.sh: $RUNS runs x $SECS s, generator --engine $GEN_ENGINE $GEN_ARGS, app ${APP_RUN[*]} $APP_ARGS, $(date -u +%FT%TZ), kernel $(uname -r)" | tee "$OUT"
KINDS=${KINDS:-sink forward}
for r in $(seq "$RUNS"); do
    for kind in $KINDS; do
        cases=$SINK_CASES; [ "$kind" = forward ] && cases=$FWD_CASES
        for c in $cases; do
            pps=$(measure $kind $c)
            R[$kind.$c]="${R[$kind.$c]:-} $pps"
            echo "$pps" >>"$D/$kind.$c"
            printf 'run %d %-7s %-10s %10s pps\n' "$r" "$kind" "$c" "$pps" >&2
        done
    done
done

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) exit
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[1], v[NR] }'; }
# The raw lines' KEY=value for one kind and case, one per run.
values() { awk -v k="$1" -v c="$2" -v key="$3" '$1 == k && $2 == c {
    for (i = 3; i <= NF; i++) if (index($i, key "=") == 1) print substr($i, length(key) + 2) }' "$OUT"; }
label() { # kind case
    case $2 in
        testpmd) [ "$1" = sink ] && echo "testpmd rxonly, busy_budget=0" || echo "testpmd macswap, busy_budget=0" ;;
        testpmddef) [ "$1" = sink ] && echo "testpmd rxonly, defaults" || echo "testpmd macswap, defaults" ;;
        testpmdio) echo "testpmd io, busy_budget=0" ;;
        0) echo "pfild $1, no hook" ;;
        4) echo "pfild $1, 4 hooks (count, drop-udp:53, null, count)" ;;
        acl) echo "pfild $1, acl $(basename "$ACL_RULES")" ;;
        countnospin) echo "pfild $1, count, --spin-us 0" ;;
        count[0-9]k) echo "pfild $1, count, --ring $((${2:5:1} * 1024))" ;;
        base*) echo "pfild $1 (baseline build), ${2#base}" ;;
        *) echo "pfild $1, $2" ;;
    esac
}
echo
echo "| case | median Mpps | min-max | vs best testpmd | app CPU busy | Mpps per app-CPU-s | lost before the app | rx_ring_full | fill_ring_empty |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for kind in $KINDS; do
    cases=$SINK_CASES; [ "$kind" = forward ] && cases=$FWD_CASES
    best=0
    for c in $cases; do
        [[ $c == testpmd* ]] || continue
        read -r m _ _ < <(printf '%s\n' ${R[$kind.$c]} | median)
        awk -v m="$m" -v b="$best" 'BEGIN { exit !(m > b) }' && { best=$m; bestc=$c; }
    done
    for c in $cases; do
        read -r med lo hi < <(printf '%s\n' ${R[$kind.$c]} | median)
        ratio="-"
        [ "$best" != 0 ] && ratio=$(awk -v a="$med" -v b="$best" 'BEGIN { printf "%.2fx", a / b }')
        # Per run: CPU 1 busy share of the generator's time, frames per busy second.
        busy=$(paste <(values $kind $c app_busy_s) <(values $kind $c window_s) <(values $kind $c got) |
            awk '{ printf "%.4f %.0f\n", ($2 > 0 ? $1 / $2 : 0), ($1 > 0 ? $3 / $1 : 0) }')
        read -r bmed _ _ < <(echo "$busy" | cut -d" " -f1 | median)
        read -r emed _ _ < <(echo "$busy" | cut -d" " -f2 | median)
        read -r dmed _ _ < <(paste <(values $kind $c lost) <(values $kind $c xdp_xmit) |
            awk '$1 ~ /^[0-9]+$/ && $2 > 0 { printf "%.1f%%\n", 100 * $1 / $2 }' | tr -d % | median)
        [ -n "$dmed" ] && dmed="$dmed %"
        read -r rf _ _ < <(values $kind $c rx_ring_full | median)
        read -r fe _ _ < <(values $kind $c fill_ring_empty | median)
        printf '| %s | %.3f | %.3f-%.3f | %s | %.0f %% | %.3f | %s | %s | %s |\n' "$(label $kind $c)" \
            "$(awk -v v="$med" 'BEGIN { print v / 1e6 }')" "$(awk -v v="$lo" 'BEGIN { print v / 1e6 }')" \
            "$(awk -v v="$hi" 'BEGIN { print v / 1e6 }')" "$ratio" "$(awk -v v="$bmed" 'BEGIN { print 100 * v }')" \
            "$(awk -v v="$emed" 'BEGIN { print v / 1e6 }')" "${dmed:--}" "${rf:--}" "${fe:--}"
    done
    [ "$best" != 0 ] && echo "| ($kind: best testpmd = $(label $kind $bestc)) | | | | | | | | |"
    R[$kind.best]=${bestc:-}
    bestc=""
done
echo
echo "CPU split per case, medians over runs (usr/sys/softirq/idle %; CPU 0: generator + veth NAPI, CPU 1: app):"
for kind in $KINDS; do
    cases=$SINK_CASES; [ "$kind" = forward ] && cases=$FWD_CASES
    for c in $cases; do
        line="  $(label $kind $c):"
        for cpu in cpu0 cpu1; do
            split=""
            for i in 1 2 3 4; do
                read -r m _ _ < <(values $kind $c $cpu | cut -d/ -f$i | median)
                split="$split${split:+/}${m:--}"
            done
            line="$line $cpu $split"
        done
        echo "$line"
    done
done
echo
ms() { # label-a file-a label-b file-b
    [ -s "$2" ] && [ -s "$4" ] && [ "$(wc -l <"$2")" -ge 3 ] && [ "$(wc -l <"$4")" -ge 3 ] || return 0
    echo "x $1"; echo "+ $3"
    ministat -A -c 95 "$2" "$4" | sed 1,2d
    echo
}
[ -n "${R[sink.best]:-}" ] && ms "$(label sink ${R[sink.best]})" "$D/sink.${R[sink.best]}" "$(label sink count)" "$D/sink.count"
[ -n "${R[forward.best]:-}" ] && ms "$(label forward testpmd)" "$D/forward.testpmd" "$(label forward 0)" "$D/forward.0"
ms "$(label sink count)" "$D/sink.count" "$(label sink acl)" "$D/sink.acl"
echo "raw results: $OUT (per case values in $D)"
