#!/usr/bin/env bash
# Issue 9's end-to-end filter measurement: the rate of `pfild sink
# --synthetic` (64-byte UDP frames to port 9, one worker) with each of
# null, drop-udp:53, bpf "drop udp port 53", a 2-rule acl and the
# ClassBench acl1_1k set as an acl, the five cases interleaved round by
# round, and each case's rate over the null rate of the same round (a
# paired ratio: drift of the machine between rounds cancels out). Prints
# every round, then per case the median rate (min-max), the ratio of the
# medians, the median of the per-round ratios, and ns per packet at the
# median with what the hook adds over null. Target: acl1_1k >= 0.33x null.
#
#   benches/filters_synthetic.sh [PFILD] [RUNS] [FRAMES]
#
# PFILD defaults to target/release/pfild; RUNS 7; FRAMES 20 000 000.
# ACL_RULES: the 942-rule set (default data/classbench/acl1_1k).
# Pinned to CPU 1 when taskset exists: run it on an otherwise idle machine.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/target/release/pfild} RUNS=${2:-7} FRAMES=${3:-20000000}
ACL_RULES=${ACL_RULES:-$ROOT/data/classbench/acl1_1k}
[ -x "$BIN" ] || { echo "filters_synthetic.sh: $BIN is not an executable (cargo build --release -p pfild)" >&2; exit 2; }
[ -f "$ACL_RULES" ] || { echo "filters_synthetic.sh: $ACL_RULES missing (ACL_RULES=FILE)" >&2; exit 2; }
PIN=()
command -v taskset >/dev/null && PIN=(taskset -c 1)
TWO=$(mktemp /tmp/filters-synthetic-acl2.XXXXXX)
ROWS=$(mktemp /tmp/filters-synthetic-rows.XXXXXX)
trap 'rm -f "$TWO" "$ROWS"' EXIT
printf 'drop proto udp to any port 53\npass all\n' > "$TWO"
CASES=(null drop-udp bpf acl2 acl1_1k)
spec() {
    case $1 in
        null) echo "null" ;;
        drop-udp) echo "drop-udp:53" ;;
        bpf) echo "bpf:drop udp port 53" ;;
        acl2) echo "acl:@$TWO" ;;
        acl1_1k) echo "acl:@$ACL_RULES" ;;
    esac
}
rate() { # case: frames per second of one run
    "${PIN[@]}" "$BIN" sink syn0 --hook "$(spec "$1")" --synthetic --count "$FRAMES" --quiet 2>/dev/null |
        awk '/^totals:/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); t[kv[1]] = kv[2] }
                          printf "%.0f\n", t["rx"] / t["active_seconds"] }'
}
echo "# filters_synthetic: $BIN ($(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')), $RUNS rounds of $FRAMES frames, $(date -u +%FT%TZ), load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$RUNS"); do
    for c in "${CASES[@]}"; do
        v=$(rate "$c")
        [ -n "$v" ] || { echo "filters_synthetic.sh: no totals from pfild for $c" >&2; exit 1; }
        echo "$r $c $v" | tee -a "$ROWS"
    done
done
awk -v cases="${CASES[*]}" '
    function median(arr, n,    i, j, x, a) {
        for (i = 1; i <= n; i++) a[i] = arr[i]
        for (i = 2; i <= n; i++) { x = a[i]; j = i - 1; while (j > 0 && a[j] > x) { a[j + 1] = a[j]; j-- } a[j + 1] = x }
        lo = a[1]; hi = a[n]
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    { v[$2, $1] = $3; if ($1 > rounds) rounds = $1 }
    END {
        n = split(cases, c, " ")
        for (i = 1; i <= rounds; i++) nullr[i] = v["null", i]
        mn = median(nullr, rounds)
        printf "\n| hook | Mpps, median (min-max) | vs null (ratio of medians; median of per-round ratios) | ns per packet at the median | of which the hook |\n|---|---:|---:|---:|---:|\n"
        for (k = 1; k <= n; k++) {
            for (i = 1; i <= rounds; i++) { rr[i] = v[c[k], i]; q[i] = v[c[k], i] / nullr[i] }
            m = median(rr, rounds); l = lo; h = hi
            mq = median(q, rounds)
            hook = k == 1 ? "-" : sprintf("%.1f", 1e9 / m - 1e9 / mn)
            printf "| %s | %.1f (%.1f-%.1f) | %.2f; %.2f (%.2f-%.2f) | %.1f | %s |\n", c[k], m / 1e6, l / 1e6, h / 1e6, m / mn, mq, lo, hi, 1e9 / m, hook
        }
    }' "$ROWS"
