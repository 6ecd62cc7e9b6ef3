#!/usr/bin/env bash
# Build ms of old vs new pfil-bench, interleaved, ROUNDS rounds.
set -euo pipefail
OLD=$1 NEW=$2 ROUNDS=${3:-3}
SETS=${SETS:-acl1_10k acl2_10k acl3_10k acl4_10k acl5_10k fw1_10k fw2_10k fw3_10k fw4_10k fw5_10k ipc1_10k ipc2_10k adv-ports-8000 adv-mixed-8000 adv-cross-32000 adv-wild-32000}
OUT=/tmp/bench/aclbuild.$(date +%H%M)
mkdir -p $OUT
for r in $(seq $ROUNDS); do
  for s in $SETS; do
    for b in old new; do
      bin=$OLD; [ $b = new ] && bin=$NEW
      ms=$($bin acl --no-dpdk --runs 3 --iters 1 --trace 10000 --linear-keys 500 --dir /tmp/cb24 --sets $s 2>&1 | awk -F'|' -v s=$s '$2 ~ " "s" " {print $9}' | tr -d ' ')
      echo "$s $b $ms" >> $OUT/raw.txt
    done
  done
done
python3 - $OUT/raw.txt <<'PY'
import sys,collections,statistics
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    s,b,ms=l.split(); d[(s,b)].append(float(ms))
sets=[]
for (s,b) in d:
    if s not in sets: sets.append(s)
print("| set | main bba1481: build ms, median (min-max) | new: build ms, median (min-max) | new / main |")
print("|---|---:|---:|---:|")
for s in sets:
    o=d[(s,'old')]; n=d[(s,'new')]
    print("| %s | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.2f |"%(s,statistics.median(o),min(o),max(o),statistics.median(n),min(n),max(n),statistics.median(n)/statistics.median(o)))
PY
