#!/usr/bin/env bash
# Run the AF_XDP end-to-end suites N times in a row (root: veth pairs in
# namespaces the tests create), stopping at the first failure, whose output
# is kept. Usage: scripts/e2e-loop.sh N [--release]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20}; shift || true
cargo test "$@" --no-run -q -p pfil-afxdp -p pfild 2>/dev/null
log=$(mktemp /tmp/e2e-loop.XXXXXX)
start=$(date +%s)
for i in $(seq "$N"); do
    if ! { cargo test "$@" -q -p pfil-afxdp --test e2e --test faults --test loader \
            && cargo test "$@" -q -p pfild --test afxdp --test xdplive; } >"$log" 2>&1; then
        echo "e2e-loop: run $i of $N FAILED after $(( $(date +%s) - start )) s; output: $log" >&2
        grep -E 'panicked|left|right|FAILED' "$log" | head -20 >&2
        exit 1
    fi
    echo "e2e-loop: run $i/$N ok ($(grep -c '^test result: ok' "$log") suites, $(( $(date +%s) - start )) s)"
done
echo "e2e-loop: $N runs in a row passed ($* ) in $(( $(date +%s) - start )) s"
rm -f "$log"
