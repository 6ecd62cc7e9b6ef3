#!/usr/bin/env bash
# Instructions per frame of the loops on the synthetic port, for one or
# more pfild builds: callgrind counts are exact, so this shows a change of
# a few instructions per frame that timing on a noisy machine cannot.
# Each case runs twice (N and 2N frames); the difference divided by N is
# the per-frame count, start-up and teardown cancel out.
#
#   benches/callgrind_synthetic.sh PFILD... (env N=frames, default 100000;
#   CASES=parse for null / drop-udp / two drop-udp hooks)
#
# Needs valgrind (scripts/setup.sh installs it).
set -euo pipefail
N=${N:-100000}
cases=(
    "sink syn0"
    "sink syn0 --hook count"
    "sink syn0 --hook null --hook count --hook drop-udp:53 --hook count"
    "forward syn0 syn1 --hook count"
)
# CASES=parse: the header-parsing cases of issue 9 instead.
if [ "${CASES:-}" = parse ]; then
    cases=(
        "sink syn0 --hook null"
        "sink syn0 --hook drop-udp:53"
        "sink syn0 --hook drop-udp:53 --hook drop-udp:53"
    )
fi
ir() { # pfild args...: total instructions of the run
    local f
    f=$(mktemp /tmp/cg.XXXXXX)
    valgrind --tool=callgrind --callgrind-out-file="$f" "$@" --synthetic --quiet >/dev/null 2>&1
    sed -n 's/^summary: \([0-9]*\).*/\1/p' "$f"
    rm -f "$f"
}
printf '| case |'; for b in "$@"; do printf ' %s |' "$b"; done; echo
printf '|---|'; for _ in "$@"; do printf -- '---:|'; done; echo
for c in "${cases[@]}"; do
    printf '| pfild %s |' "$c"
    for b in "$@"; do
        # shellcheck disable=SC2086
        a=$(ir "$b" $c --count "$N"); z=$(ir "$b" $c --count $((2 * N)))
        awk -v a="$a" -v z="$z" -v n="$N" 'BEGIN { printf " %.1f |", (z - a) / n }'
    done
    echo
done
