#!/usr/bin/env bash
# Shared table vs per-worker tables under contention (issue 26): two
# workers, each sending both directions of the same N flows (the worst
# case of a shared table: every entry and shard lock is touched by both
# workers, as when RSS is not symmetric and it is the only right
# choice; per-worker tables are right only with symmetric RSS, where
# each flow stays on one worker).
#
#   shared:     one pfild, --queues 2: one ct table for both workers
#   per-worker: two pfild processes at once, one worker each: a table
#               each (what per-worker tables cost: no sharing at all)
#
# Each sample: CPU time (user + sys) of runs of 2N + M frames a worker
# minus that of 2N frames a worker, over the 2M frames: ns a frame,
# summed over both workers. Interleaved, RUNS rounds, medians (min-max).
#
#   benches/ct_workers.sh [PFILD] [RUNS] [M] [FLOWS...]  (defaults: target/release/pfild 3 4000000 1000 1000000)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PFILD=${1:-$ROOT/target/release/pfild}
RUNS=${2:-3}
M=${3:-4000000}
shift $(($# < 3 ? $# : 3))
FLOWS=("${@:-1000 1000000}")
read -r -a FLOWS <<< "${FLOWS[*]}"
OUT=$(mktemp -d /tmp/ct-workers.XXXXXX)
cat > "$OUT/ct.rules" <<'R'
pass ct state established,related
pass from 198.18.0.0/18 to 198.18.0.2 ct state new
default drop
R
HOOKS=(--hook 'ct:max 2M' --hook "acl:@$OUT/ct.rules")
shared() { # flows frames-per-worker: CPU seconds
    /usr/bin/time -f '%U %S' -o "$OUT/t" "$PFILD" sink syn0 --synthetic --queues 2 \
        --flows "$1" --count $((2 * $2)) "${HOOKS[@]}" --no-control --quiet >/dev/null 2>&1
    awk '{ printf "%.3f\n", $1 + $2 }' "$OUT/t"
}
separate() {
    for i in 1 2; do
        /usr/bin/time -f '%U %S' -o "$OUT/t$i" "$PFILD" sink syn0 --synthetic \
            --flows "$1" --count "$2" "${HOOKS[@]}" --no-control --quiet >/dev/null 2>&1 &
    done
    wait
    cat "$OUT/t1" "$OUT/t2" | awk '{ s += $1 + $2 } END { printf "%.3f\n", s }'
}
echo "# ct_workers: $RUNS rounds, M=$M, $(date -u +%FT%TZ), $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null), $(nproc) CPUs"
for r in $(seq "$RUNS"); do
    for n in "${FLOWS[@]}"; do
        for how in shared separate; do
            a=$($how "$n" $((2 * n)))
            b=$($how "$n" $((2 * n + M)))
            awk -v a="$a" -v b="$b" -v m="$M" 'BEGIN { printf "%.1f\n", (b - a) * 1e9 / (2 * m) }' >> "$OUT/$how.$n"
        done
    done
    echo "round $r done" >&2
done
echo "| flows | shared table, ns a frame | per-worker tables, ns a frame | shared / per-worker |"
echo "|---:|---:|---:|---:|"
for n in "${FLOWS[@]}"; do
    s=$(sort -n "$OUT/shared.$n" | awk '{ v[NR] = $1 } END { printf "%s (%s-%s)", v[int((NR + 1) / 2)], v[1], v[NR] }')
    p=$(sort -n "$OUT/separate.$n" | awk '{ v[NR] = $1 } END { printf "%s (%s-%s)", v[int((NR + 1) / 2)], v[1], v[NR] }')
    ms=$(sort -n "$OUT/shared.$n" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    mp=$(sort -n "$OUT/separate.$n" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    echo "| $n | $s | $p | $(awk -v a="$ms" -v b="$mp" 'BEGIN { printf "%.2f", a / b }') |"
done
echo "raw samples: $OUT"
