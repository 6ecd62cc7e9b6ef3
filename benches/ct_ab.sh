#!/usr/bin/env bash
# A/B of connection-tracking builds on the synthetic port, one worker
# pinned to CPU 1: ns a frame of established flows (CPU time of
# 2N + 10 000 000 frames minus that of 2N, over 10 000 000), rounds
# interleaved build by build, every sample printed (compare medians;
# this machine's noise is a few ns).
#
#   benches/ct_ab.sh ROUNDS FLOWS CASES PFILD...
#
# CASES, comma-separated: none (no hook: the port's own cost), ct (the
# `ct` hook alone), ctacl (`ct` and the
# acl of `ct state` rules of benches/ct_flows.sh), keep (`ct` and an acl
# with `keep state`), acl1k (the stateless ClassBench acl1_1k).
# Example: benches/ct_ab.sh 3 1000 ct,ctacl,acl1k /tmp/a/pfild /tmp/b/pfild
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=$1 FLOWS=$2 CASES=$3
shift 3
M=10000000
OUT=$(mktemp -d /tmp/ct-ab.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
printf 'pass ct state established,related\npass from 198.18.0.0/18 to 198.18.0.2 ct state new\ndefault drop\n' > "$OUT/ct.rules"
printf 'pass from 198.18.0.0/18 to 198.18.0.2 keep state\ndefault drop\n' > "$OUT/keep.rules"
PIN=()
command -v taskset >/dev/null && PIN=(taskset -c 1)
cpu() { # pfild count hooks...
    local p=$1 c=$2
    shift 2
    /usr/bin/time -f '%U %S' -o "$OUT/time" "${PIN[@]}" "$p" sink syn0 --synthetic \
        --flows "$FLOWS" --count "$c" "$@" --no-control --quiet >/dev/null 2>&1
    awk '{ printf "%.3f\n", $1 + $2 }' "$OUT/time"
}
for r in $(seq "$ROUNDS"); do
    for p in "$@"; do
        for c in ${CASES//,/ }; do
            case $c in
                none) H=() ;;
                ct) H=(--hook 'ct:max 2M') ;;
                ctacl) H=(--hook 'ct:max 2M' --hook "acl:@$OUT/ct.rules") ;;
                keep) H=(--hook 'ct:max 2M' --hook "acl:@$OUT/keep.rules") ;;
                acl1k) H=(--hook "acl:@$ROOT/data/classbench/acl1_1k") ;;
                *) echo "unknown case $c" >&2; exit 2 ;;
            esac
            a=$(cpu "$p" $((2 * FLOWS)) "${H[@]}")
            b=$(cpu "$p" $((2 * FLOWS + M)) "${H[@]}")
            echo "$p $c $(awk -v a="$a" -v b="$b" -v m="$M" 'BEGIN { printf "%.1f", (b - a) * 1e9 / m }')"
        done
    done
done | awk '{ k = $1 " " $2; v[k] = v[k] " " $3 } END { for (k in v) print k ":" v[k] }' | sort
