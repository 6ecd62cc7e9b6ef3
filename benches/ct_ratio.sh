#!/usr/bin/env bash
# Issue 26's speed ratios round by round: in each round, on one worker of
# the synthetic port, the keep state chain (`ct:max 2M` + an acl of
# `pass ... keep state; default drop`) at 1 000 000 flows (keep1m) and at
# 1 000 flows (keep1k), and the stateless ClassBench acl1_1k at 1 000
# flows (acl1k), back to back; each round's ratios keep1m / acl1k,
# keep1k / acl1k and keep1k / keep1m (the rate at 1M over the rate at
# 1k) come from runs a few seconds apart, so the machine's drift cancels
# in them. ns a frame as in benches/ct_flows.sh: CPU time of 2N + M
# frames less that of 2N (N flows, each set up by a frame each way),
# over M (M = 20 000 000).
#
#   benches/ct_ratio.sh [PFILD] [ROUNDS]   (defaults: target/release/pfild, 9)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PFILD=${1:-$ROOT/target/release/pfild}
ROUNDS=${2:-9}
M=20000000
OUT=$(mktemp -d /tmp/ct-ratio.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
printf 'pass from 198.18.0.0/18 to 198.18.0.2 keep state\ndefault drop\n' > "$OUT/keep.rules"
. "$ROOT/benches/synthetic_cpu.sh"
est() { # flows hooks...: ns a frame
    local flows=$1 a b
    shift
    a=$(cpu "$flows" $((2 * flows)) "$@")
    b=$(cpu "$flows" $((2 * flows + M)) "$@")
    awk -v a="$a" -v b="$b" -v m="$M" 'BEGIN { printf "%.1f\n", (b - a) * 1e9 / m }'
}
KEEP=(--hook 'ct:max 2M' --hook "acl:@$OUT/keep.rules")
echo "# ct_ratio: $ROUNDS rounds, M=$M, $(date -u +%FT%TZ), $PFILD (sha256 $(sha256sum "$PFILD" | cut -c1-12); tree $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)), $(nproc) CPUs: $(lscpu | sed -n 's/^Model name: *//p')"
echo "# keep1m keep1k acl1k keep1m/acl1k keep1k/acl1k keep1k/keep1m"
for r in $(seq "$ROUNDS"); do
    k1m=$(est 1000000 "${KEEP[@]}")
    a=$(est 1000 --hook "acl:@$ROOT/data/classbench/acl1_1k")
    k1k=$(est 1000 "${KEEP[@]}")
    awk -v x="$k1m" -v y="$k1k" -v a="$a" 'BEGIN { printf "%s %s %s %.3f %.3f %.3f\n", x, y, a, x / a, y / a, y / x }'
done | tee "$OUT/rows"
for k in 1 2 3 4 5 6; do
    sort -g -k"$k" "$OUT/rows" | awk -v k="$k" '{ v[NR] = $k } END { printf "column %d: median %s (%s-%s)\n", k, v[int((NR + 1) / 2)], v[1], v[NR] }'
done
