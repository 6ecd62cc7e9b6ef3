#!/usr/bin/env bash
# Long property-test run: every packet-parsing and filter property test of
# pfil, pfil-filters and the lock-study hooks of pfil-bench with
# PROPTEST_CASES cases each (default 100000),
# in release mode. CI runs the same tests with a few thousand cases
# (`cargo test --workspace`); run this before a release or after touching
# Packet::headers or a filter.
#
#   scripts/fuzz-long.sh                 # 100000 cases per property
#   PROPTEST_CASES=1000000 scripts/fuzz-long.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PROPTEST_CASES="${PROPTEST_CASES:-100000}"
echo "fuzz-long: ${PROPTEST_CASES} cases per property"
cargo test --release -p pfil --test proptest_packets
cargo test --release -p pfil-filters --test proptest_filters
cargo test --release -p pfil-bench --test proptest_lock_hooks
echo "fuzz-long: all green"
