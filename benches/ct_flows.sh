#!/usr/bin/env bash
# Connection tracking at scale (issue 26's speed targets), on one worker
# of the synthetic port with `--flows N` traffic (N UDP flows, a frame
# each way to set each up, then the flows in a scattered order, a frame
# each way):
#
#   ct1k / ct1m: --hook 'ct:max 2M' --hook acl:@RULES (pass ct state
#                established,related; pass new flows from the clients;
#                default drop) at 1 000 and at 1 000 000 flows
#   keep1k / keep1m: the same ct hook and an acl of `pass ... keep state;
#                default drop` at 1 000 and 1 000 000 flows (the acl
#                keeps its states in the ct hook's table)
#   keepacl1k:   that acl alone (its keep state is its own state table:
#                pf's way, no ct hook) at 1 000 flows
#   acl1k:       the stateless ClassBench acl1_1k at 1 000 flows
#   tcp1k / tcp1m: ct1k / ct1m with TCP flows (--flow-proto tcp: each
#                flow's SYN and SYN-ACK, then ACKs each way, the
#                tracker's window checks on every segment)
#
# Each sample is a difference of two runs, so set-up (the table, the
# flows' first frames) cancels: established ns a frame = CPU time of
# (2N + M frames) minus CPU time of (2N frames), over M; new flows a
# second = N over the CPU time of (2N frames) minus that of 2 000 frames
# (N = 1M: each flow's first frame and its reply; through the ct rules'
# chain and through the keep state chain). CPU time (user +
# sys, /usr/bin/time) rather than wall time: on a shared machine the
# process is descheduled, which wall time counts. Cases interleave,
# RUNS rounds; medians and spread (min-max).
#
#   benches/ct_flows.sh [PFILD] [RUNS] [M]   (defaults: target/release/pfild, 5, 10000000)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PFILD=${1:-$ROOT/target/release/pfild}
RUNS=${2:-5}
M=${3:-10000000}
OUT=$(mktemp -d /tmp/ct-flows.XXXXXX)
cat > "$OUT/ct.rules" <<'EOF'
pass ct state established,related
pass from 198.18.0.0/18 to 198.18.0.2 ct state new
default drop
EOF
cat > "$OUT/keep.rules" <<'EOF'
pass from 198.18.0.0/18 to 198.18.0.2 keep state
default drop
EOF
ACL1K=$ROOT/data/classbench/acl1_1k
. "$ROOT/benches/synthetic_cpu.sh"
est() { # name flows hooks...: one sample of ns a frame, established
    local name=$1 flows=$2
    shift 2
    local a b
    a=$(cpu "$flows" $((2 * flows)) "$@")
    b=$(cpu "$flows" $((2 * flows + M)) "$@")
    awk -v a="$a" -v b="$b" -v m="$M" 'BEGIN { printf "%.1f\n", (b - a) * 1e9 / m }' >> "$OUT/$name"
}
CT=(--hook 'ct:max 2M')
echo "# ct_flows: $RUNS rounds, M=$M, $(date -u +%FT%TZ), $PFILD (sha256 $(sha256sum "$PFILD" | cut -c1-12); tree $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)), $(nproc) CPUs: $(lscpu | sed -n 's/^Model name: *//p')"
for r in $(seq "$RUNS"); do
    est ct1k 1000 "${CT[@]}" --hook "acl:@$OUT/ct.rules"
    est ct1m 1000000 "${CT[@]}" --hook "acl:@$OUT/ct.rules"
    est keep1k 1000 "${CT[@]}" --hook "acl:@$OUT/keep.rules"
    est keep1m 1000000 "${CT[@]}" --hook "acl:@$OUT/keep.rules"
    est keepacl1k 1000 --hook "acl:@$OUT/keep.rules"
    est acl1k 1000 --hook "acl:@$ACL1K"
    est tcp1k 1000 "${CT[@]}" --hook "acl:@$OUT/ct.rules" --flow-proto tcp
    est tcp1m 1000000 "${CT[@]}" --hook "acl:@$OUT/ct.rules" --flow-proto tcp
    a=$(cpu 1000000 2000 "${CT[@]}" --hook "acl:@$OUT/ct.rules")
    b=$(cpu 1000000 2000000 "${CT[@]}" --hook "acl:@$OUT/ct.rules")
    awk -v a="$a" -v b="$b" 'BEGIN { printf "%.0f\n", 999000 / (b - a) }' >> "$OUT/new1m"
    a=$(cpu 1000000 2000 "${CT[@]}" --hook "acl:@$OUT/keep.rules")
    b=$(cpu 1000000 2000000 "${CT[@]}" --hook "acl:@$OUT/keep.rules")
    awk -v a="$a" -v b="$b" 'BEGIN { printf "%.0f\n", 999000 / (b - a) }' >> "$OUT/newkeep1m"
    echo "round $r done" >&2
done
med() { sort -n "$1" | awk '{ v[NR] = $1 } END { printf "%s (%s-%s)", v[int((NR + 1) / 2)], v[1], v[NR] }'; }
m() { sort -n "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "| case | ns a frame, median (min-max) |"
echo "|---|---:|"
for c in ct1k ct1m keep1k keep1m keepacl1k acl1k tcp1k tcp1m; do
    echo "| $c | $(med "$OUT/$c") |"
done
echo "| new flows a second, 1M flows (first frame + reply each) | $(med "$OUT/new1m") |"
echo "| the same through the keep state chain | $(med "$OUT/newkeep1m") |"
awk -v k="$(m "$OUT/ct1k")" -v g="$(m "$OUT/ct1m")" -v a="$(m "$OUT/acl1k")" -v s="$(m "$OUT/keep1k")" -v sm="$(m "$OUT/keep1m")" -v p="$(m "$OUT/keepacl1k")" 'BEGIN {
    printf "rate at 1M / rate at 1k: %.2f (target >= 0.5)\n", k / g
    printf "ct+acl at 1k / acl1_1k: %.2f (target <= 1.5)\n", k / a
    printf "ct+acl keep state: rate at 1M / rate at 1k: %.2f (target >= 0.5)\n", s / sm
    printf "ct+acl keep state at 1k / acl1_1k: %.2f (target <= 1.5)\n", s / a
    printf "acl keep state alone at 1k / acl1_1k: %.2f\n", p / a
}'
awk -v k="$(m "$OUT/tcp1k")" -v g="$(m "$OUT/tcp1m")" -v a="$(m "$OUT/acl1k")" 'BEGIN {
    printf "TCP: rate at 1M / rate at 1k: %.2f; ct+acl at 1k / acl1_1k: %.2f\n", k / g, k / a
}'
echo "raw samples: $OUT"
