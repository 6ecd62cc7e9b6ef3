#!/usr/bin/env bash
# Instructions per received frame of `pfild sink`'s worker loop on a real
# AF_XDP socket (veth in namespaces this script creates and deletes), for
# one or more pfild builds. Callgrind collects only inside `sink_loop`
# (`--toggle-collect`: the worker's receive, heads, recycle and idle
# polls; not the setup, the main thread or the kernel), and the total is
# divided by the frames the sink received. Under callgrind (with its cache
# and branch simulation) the sink is far slower than the generator, so it
# reads full batches; the kernel drops the rest, which is not counted.
#
#   sudo benches/callgrind_afxdp.sh PFILD... (env N=frames, default 100000)
#
# Needs root, iproute2, valgrind. The generator is the first PFILD.
set -euo pipefail
N=${N:-100000}
[ "$(id -u)" = 0 ] || { echo "callgrind_afxdp.sh: run as root (namespaces, XDP)" >&2; exit 1; }
P=pfc$$ GEN=$1
G=${P}g S=${P}s
PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -KILL "$p" 2>/dev/null || true; done
    for n in $G $S; do ip netns del "$n" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM
for n in $G $S; do
    ip netns add "$n"
    ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip -n $G link add g0 type veth peer name s0 netns $S
ip -n $G addr add 198.18.0.1/24 dev g0
ip -n $S addr add 198.18.0.2/24 dev s0
ip -n $G link set g0 up; ip -n $S link set s0 up
cases=("" "--hook count" "--hook null --hook count --hook drop-udp:53 --hook count")
ir() { # pfild frames hooks...: instructions per frame of a sink run to `frames`
    local bin=$1 n=$2 f gp o
    shift 2
    f=$(mktemp /tmp/cga.XXXXXX)
    # Bounded: the generator stops after 120 s, the sink after 300 s.
    "$GEN" gen g0 --netns $G --seconds 120 --quiet >/dev/null 2>&1 &
    gp=$!; PIDS+=($gp)
    o=$(mktemp /tmp/cga.XXXXXX)
    timeout 300 valgrind --tool=callgrind --cache-sim=yes --branch-sim=yes --collect-atstart=no \
        --toggle-collect='*sink_loop*' --callgrind-out-file="$f" \
        "$bin" sink s0 --netns $S --queues 1 --spin-us 0 --count "$n" --quiet "$@" >"$o" 2>/dev/null || true
    kill -INT $gp 2>/dev/null || true; wait $gp 2>/dev/null || true
    awk -v ir="$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$f")" \
        '/^totals:/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); t[kv[1]] = kv[2] }
                      if (t["rx"] > 0) printf "%.1f", ir / t["rx"] }' "$o"
    rm -f "$f" "$o"
}
printf '| hooks |'; for b in "$@"; do printf ' %s |' "$b"; done; echo
printf '|---|'; for _ in "$@"; do printf -- '---:|'; done; echo
for c in "${cases[@]}"; do
    printf '| %s |' "${c:-none}"
    for b in "$@"; do
        # shellcheck disable=SC2086
        v=$(ir "$b" "$N" $c)
        # A sink that did not start (the previous socket still closing) is
        # measured again once.
        [ -n "$v" ] || { sleep 1; v=$(ir "$b" "$N" $c); }
        printf ' %s |' "${v:-n/a}"
    done
    echo
done
