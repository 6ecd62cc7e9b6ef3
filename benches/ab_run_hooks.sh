#!/usr/bin/env bash
# A/B of the criterion `run_hooks` bench between two builds in one run:
# the two bench binaries alternate RUNS times on the same ids, and each
# criterion point estimate (ns per batch of 64) is one sample; medians,
# spread and ministat's comparison per id.
#
#   benches/ab_run_hooks.sh BASE_BIN NEW_BIN [RUNS] [FILTER]
#
# BIN: a `run_hooks` bench executable (`cargo bench -p pfil-benches --bench
# run_hooks --no-run` prints its path), e.g. one built from a worktree of
# the previous commit. FILTER: a criterion filter (default: the null-hook
# lines without a writer, 1 and 2 threads). Needs ministat (scripts/setup.sh).
set -euo pipefail
BASE=$1 NEW=$2 RUNS=${3:-5}
FILTER=${4:-'run_hooks/(unsync|epoch)/quiet/'}
OUT=$(mktemp -d /tmp/ab-run-hooks.XXXXXX)
echo "# ab_run_hooks: $RUNS runs, filter $FILTER, $(date -u +%FT%TZ), $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null)"
for r in $(seq "$RUNS"); do
    for side in base new; do
        bin=$BASE; [ $side = new ] && bin=$NEW
        "$bin" --bench "$FILTER" --noplot 2>/dev/null | awk -v side=$side -v out="$OUT" '
            /^run_hooks\// { id = $1; gsub("/", "_", id) }
            /time:/ && $4 !~ /%/ { v = $4; u = $5; if (u == "us" || u == "µs") v *= 1000; print v >> (out "/" id "." side) }'
    done
    echo "run $r done" >&2
done
for f in "$OUT"/*.base; do
    id=$(basename "$f" .base)
    echo
    echo "## $id (ns per batch of 64; x = base, + = new)"
    ministat -A "$f" "$OUT/$id.new"
    med() { sort -n "$1" | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f %.1f %.1f\n", m, v[1], v[NR] }'; }
    read -r mb lb hb < <(med "$f")
    read -r mn ln hn < <(med "$OUT/$id.new")
    awk -v mb="$mb" -v mn="$mn" -v s="base $mb [$lb-$hb], new $mn [$ln-$hn]" \
        'BEGIN { printf "median %s, new/base %.3f\n", s, mn / mb }'
done
echo
echo "raw: $OUT"
