#!/usr/bin/env bash
# What seeing inside the datapath costs it (issue 10): the criterion bench
# `observe` (benches/observe.rs) RUNS times pinned to CPU 1, each
# criterion point estimate one sample; medians, min-max and the ratio of
# each case to its baseline in the same run (sampling: `off`; tap: `none`).
#
#   benches/observe.sh [RUNS]
set -euo pipefail
RUNS=${1:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BIN=$(cargo bench -p pfil-benches --bench observe --no-run 2>&1 | sed -n 's/.*(\(.*observe-[0-9a-f]*\)).*/\1/p' | tail -1)
OUT=$(mktemp -d /tmp/observe.XXXXXX)
PIN=()
command -v taskset >/dev/null && PIN=(taskset -c 1)
echo "# observe: $RUNS runs, $(date -u +%FT%TZ), $(git rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$RUNS"); do
    "${PIN[@]}" "$BIN" --bench --noplot 2>/dev/null | awk -v out="$OUT" '
        /^(sampling|tap|bpf)\// { id = $1 }
        /^bpf\/(pfil|libpcap)\/udp port/ { id = $1 "_" $2 "_" $3 "_" $4 }
        /time:/ && $4 !~ /%/ { v = $(NF-3); u = $(NF-2); if (u == "us" || u == "µs") v *= 1000; gsub("/", "_", id); print v >> (out "/" id) }'
    echo "run $r done" >&2
done
printf '| case | median ns | min-max | ratio to baseline |\n|---|---:|---:|---:|\n'
med() { sort -n "$1" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
for f in "$OUT"/*; do
    id=$(basename "$f")
    base=""
    case $id in
        sampling_*_32) base="$OUT/sampling_off_32" ;;
        sampling_*_64) base="$OUT/sampling_off_64" ;;
        tap_*) base="$OUT/tap_none_32" ;;
    esac
    m=$(med "$f")
    r="-"
    [ -n "$base" ] && [ -f "$base" ] && r=$(awk -v a="$m" -v b="$(med "$base")" 'BEGIN { printf "%.3f", a / b }')
    printf '| %s | %s | %s-%s | %s |\n' "$id" "$m" "$(sort -n "$f" | head -1)" "$(sort -n "$f" | tail -1)" "$r"
done
echo
echo "raw samples: $OUT"
