#!/usr/bin/env bash
# A/B of the loops on the synthetic port between two pfild builds in one
# run: no kernel, no NIC, so what is measured is the loop + heads per
# frame. The two binaries alternate RUNS times per case; each run is one
# sample of frames per second (rx / active seconds from pfild's totals
# line); medians, spread and ministat's comparison per case.
#
#   benches/ab_synthetic.sh BASE_PFILD NEW_PFILD [RUNS] [FRAMES]
#
# Cases: sink with no hook, with `count`, with four hooks; forward
# (in head, out head) with `count`; with CASES=parse, sink with `null`,
# one and two `drop-udp:53` hooks; with CASES=filters, sink with each of
# null, count, drop-udp:53, bpf "drop udp port 53" and the ClassBench
# acl1_1k set as an acl (ACL_RULES, default data/classbench/acl1_1k;
# BASE_ACL_PREFIX= for a base from before 0.2, which read `acl:PATH`
# where 0.2 reads `acl:@PATH`). Pinned to CPU 1 when taskset exists.
# Needs ministat (scripts/setup.sh).
set -euo pipefail
BASE=$1 NEW=$2 RUNS=${3:-7} FRAMES=${4:-20000000}
OUT=$(mktemp -d /tmp/ab-synthetic.XXXXXX)
PIN=()
command -v taskset >/dev/null && PIN=(taskset -c 1)
declare -A CASE=(
    [sink-0]="sink syn0"
    [sink-count]="sink syn0 --hook count"
    [sink-4]="sink syn0 --hook null --hook count --hook drop-udp:53 --hook count"
    [forward-count]="forward syn0 syn1 --hook count"
)
# CASES=parse: the header-parsing cases of issue 9 instead.
if [ "${CASES:-}" = parse ]; then
    CASE=(
        [sink-null]="sink syn0 --hook null"
        [sink-drop-udp]="sink syn0 --hook drop-udp:53"
        [sink-2drop-udp]="sink syn0 --hook drop-udp:53 --hook drop-udp:53"
    )
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ACL_RULES=${ACL_RULES:-$ROOT/data/classbench/acl1_1k}
if [ "${CASES:-}" = filters ]; then
    CASE=(
        [f1-null]="sink syn0 --hook null"
        [f2-count]="sink syn0 --hook count"
        [f3-drop-udp]="sink syn0 --hook drop-udp:53"
        [f4-bpf]="sink syn0 --hook bpf"
        [f5-acl1_1k]="sink syn0 --hook ACLSPEC"
    )
fi
echo "# ab_synthetic: $RUNS runs of $FRAMES frames, $(date -u +%FT%TZ), $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null)"
for r in $(seq "$RUNS"); do
    for c in "${!CASE[@]}"; do
        for side in base new; do
            bin=$BASE; prefix=${BASE_ACL_PREFIX-@}
            [ $side = new ] && bin=$NEW && prefix=@
            args=()
            for w in ${CASE[$c]}; do
                case $w in
                    ACLSPEC) args+=("acl:$prefix$ACL_RULES") ;;
                    bpf) args+=("bpf:drop udp port 53") ;;
                    *) args+=("$w") ;;
                esac
            done
            "${PIN[@]}" "$bin" "${args[@]}" --synthetic --count "$FRAMES" --quiet 2>/dev/null |
                awk '/^totals:/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); t[kv[1]] = kv[2] }
                                  printf "%.0f\n", t["rx"] / t["active_seconds"] }' >> "$OUT/$c.$side"
        done
    done
    echo "run $r done" >&2
done
for c in $(printf '%s\n' "${!CASE[@]}" | sort); do
    echo
    echo "## $c: pfild ${CASE[$c]} --synthetic (frames/s; x = base, + = new)"
    ministat -A -c 95 "$OUT/$c.base" "$OUT/$c.new" | sed 's/^/    /'
    for side in base new; do
        printf '    %s median %s\n' $side "$(sort -n "$OUT/$c.$side" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')"
    done
done
echo
echo "raw samples: $OUT"
