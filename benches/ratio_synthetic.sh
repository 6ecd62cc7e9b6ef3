#!/usr/bin/env bash
# Rate of one pfild build on the synthetic sink with `null`, one and two
# `drop-udp:53` hooks, the three cases interleaved RUNS times, and each
# drop-udp rate over the null rate of the same round (a paired ratio, so
# drift of the machine's load between rounds cancels out); medians and
# ranges of rates and ratios. Issue 9's target: drop-udp >= 0.7x null.
#
#   benches/ratio_synthetic.sh PFILD [RUNS] [FRAMES]
#
# Pinned to CPU 1 when taskset exists.
set -euo pipefail
BIN=$1 RUNS=${2:-11} FRAMES=${3:-20000000}
PIN=()
command -v taskset >/dev/null && PIN=(taskset -c 1)
rate() { # hooks...: frames per second of one run
    local args=()
    for h in "$@"; do args+=(--hook "$h"); done
    "${PIN[@]}" "$BIN" sink syn0 "${args[@]}" --synthetic --count "$FRAMES" --quiet 2>/dev/null |
        awk '/^totals:/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); t[kv[1]] = kv[2] }
                          printf "%.0f\n", t["rx"] / t["active_seconds"] }'
}
echo "# ratio_synthetic: $BIN, $RUNS rounds of $FRAMES frames, $(date -u +%FT%TZ), load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "round null drop-udp two-drop-udp drop/null two/null"
rows=$(mktemp /tmp/ratio-synthetic.XXXXXX)
for r in $(seq "$RUNS"); do
    n=$(rate null) d=$(rate drop-udp:53) t=$(rate drop-udp:53 drop-udp:53)
    awk -v r="$r" -v n="$n" -v d="$d" -v t="$t" 'BEGIN { printf "%d %d %d %d %.3f %.3f\n", r, n, d, t, d / n, t / n }'
done > "$rows"
cat "$rows"
awk '
    { for (c = 2; c <= 6; c++) v[c, NR] = $c }
    END {
        split("null drop-udp two-drop-udp drop/null two/null", name, " ")
        for (c = 2; c <= 6; c++) {
            m = 0
            for (i = 1; i <= NR; i++) a[i] = v[c, i]
            # insertion sort
            for (i = 2; i <= NR; i++) { x = a[i]; j = i - 1; while (j > 0 && a[j] > x) { a[j + 1] = a[j]; j-- } a[j + 1] = x }
            printf "median %-13s %s (range %s .. %s)\n", name[c - 1], a[int((NR + 1) / 2)], a[1], a[NR]
        }
    }' "$rows"
rm -f "$rows"
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
