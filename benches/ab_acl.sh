#!/usr/bin/env bash
# Paired A/B of two builds of the classifier's IPv4 batch: alternates
# `acl_count SET 11 v4time` of build A and build B ROUNDS times (each
# prints the fastest of 11 runs of 5 passes over the 100 000-header trace)
# and reports both medians and the median of the per-round ratios B/A, so
# that drift of a shared machine between rounds cancels out.
#
#   benches/ab_acl.sh A B [SET] [ROUNDS]
#
# A and B are `acl_count` binaries (cargo build --release -p pfil-acl
# --examples; copy target/release/examples/acl_count aside between the
# two builds); SET a file of data/classbench (default acl1_10k);
# ROUNDS 6. Environment variables reach both (ACL_BATCH=32: batches of
# 32 keys, as the acl filter calls it; ACL_POOL=N: the trace drawn from
# N keys).
set -euo pipefail
a=$1
b=$2
set_name=${3:-acl1_10k}
rounds=${4:-6}
dir=${PFIL_CLASSBENCH:-$(cd "$(dirname "$0")/.." && pwd)/data/classbench}
for _ in $(seq "$rounds"); do
    x=$("$a" "$dir/$set_name" 11 v4time 2>/dev/null | awk '{print $2}')
    y=$("$b" "$dir/$set_name" 11 v4time 2>/dev/null | awk '{print $2}')
    echo "$x $y"
done | awk '
    { a[NR] = $1; b[NR] = $2; r[NR] = $2 / $1; print "round " NR ": A " $1 " ns, B " $2 " ns, B/A " sprintf("%.3f", $2 / $1) }
    function median(v, n,   i, j, t) {
        for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
        return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    END {
        n = NR
        lo = hi = r[1]; for (i = 2; i <= n; i++) { if (r[i] < lo) lo = r[i]; if (r[i] > hi) hi = r[i] }
        printf "median A %.2f ns, B %.2f ns; B/A median %.3f (min %.3f, max %.3f)\n", median(a, n), median(b, n), median(r, n), lo, hi
    }'
