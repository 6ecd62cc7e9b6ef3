#!/usr/bin/env bash
# Instructions per frame of the loops on the synthetic port, for one or
# more pfild builds: callgrind counts are exact, so this shows a change of
# a few instructions per frame that timing on a noisy machine cannot.
# Each case runs twice (N and 2N frames); the difference divided by N is
# the per-frame count, start-up and teardown cancel out.
#
#   benches/callgrind_synthetic.sh PFILD... (env N=frames, default 100000;
#   CASES=parse for null / drop-udp / two drop-udp hooks; CASES=filters
#   for null / count / drop-udp / bpf / acl1_1k, one hook each, as
#   ab_synthetic.sh runs them: ACL_PREFIXES="- @" gives each build's acl
#   file prefix in order, `-` for none (0.1.0 took `acl:PATH`, 0.2.0
#   takes `acl:@PATH`); default `@` for every build)
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
# CASES=filters: one hook of each built-in filter (issue 23's A/B).
if [ "${CASES:-}" = filters ]; then
    cases=(
        "sink syn0 --hook null"
        "sink syn0 --hook count"
        "sink syn0 --hook drop-udp:53"
        "sink syn0 --hook BPF"
        "sink syn0 --hook ACL"
    )
fi
ACL_RULES=${ACL_RULES:-$(cd "$(dirname "$0")/.." && pwd)/data/classbench/acl1_1k}
read -r -a prefixes <<< "${ACL_PREFIXES:-}"
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
    i=0
    for b in "$@"; do
        p=${prefixes[$i]:-@}; [ "$p" = - ] && p=
        i=$((i + 1))
        args=()
        for w in $c; do
            case $w in
                ACL) args+=("acl:$p$ACL_RULES") ;;
                BPF) args+=("bpf:drop udp port 53") ;;
                *) args+=("$w") ;;
            esac
        done
        a=$(ir "$b" "${args[@]}" --count "$N"); z=$(ir "$b" "${args[@]}" --count $((2 * N)))
        awk -v a="$a" -v z="$z" -v n="$N" 'BEGIN { printf " %.1f |", (z - a) / n }'
    done
    echo
done
