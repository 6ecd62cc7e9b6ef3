# Sourced by the connection-tracking benches (ct_flows.sh, ct_ratio.sh):
# `cpu FLOWS COUNT HOOKS...` prints the CPU seconds (user + sys) of one
# `pfild sink syn0 --synthetic` run of COUNT frames over FLOWS flows with
# HOOKS, pinned to CPU 1 where taskset is. Needs PFILD and OUT (a scratch
# directory) set by the caller.
PIN=()
command -v taskset >/dev/null && PIN=(taskset -c 1)
cpu() {
    local flows=$1 count=$2
    shift 2
    /usr/bin/time -f '%U %S' -o "$OUT/time" "${PIN[@]}" "$PFILD" sink syn0 --synthetic \
        --flows "$flows" --count "$count" "$@" --no-control --quiet >/dev/null 2>&1
    awk '{ printf "%.3f\n", $1 + $2 }' "$OUT/time"
}
