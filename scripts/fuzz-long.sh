#!/usr/bin/env bash
# Long fuzz run, in release mode:
# - every packet-parsing and filter property test of pfil, pfil-filters
#   (the connection tracker's among them), the lock-study hooks of
#   pfil-bench and the eBPF engine (random and
#   mutated programs, JIT vs interpreter, classic BPF) with
#   PROPTEST_CASES cases each (default 100000);
# - the control-protocol fuzzer (crates/pfil-ctl/tests/fuzz.rs: mutated
#   JSON-RPC requests from PROTOCOL.md's examples, hostile framing,
#   oversized and deeply nested input, many connections) with
#   PFIL_CTL_FUZZ_CASES cases (default 10000, a few minutes) in each of
#   PFIL_CTL_FUZZ_RUNS runs (default 3), each from a seed of its own,
#   printed (PFIL_CTL_FUZZ_SEED=N replays one run; with it, one run);
# - hostile BPF objects (crates/pfil-xdp/tests/hostile.rs: xdp-filter's
#   objects with bytes flipped, loaded and run on frames: refused or
#   contained, never a crash) with PFIL_XDP_MUTANTS mutants (default
#   100000).
# CI runs the same tests with a few thousand property cases and 240
# control cases (`cargo test --workspace`); run this before a release or
# after touching Packet::headers, a filter or the control server.
#
#   scripts/fuzz-long.sh                 # the defaults
#   PROPTEST_CASES=1000000 PFIL_CTL_FUZZ_CASES=100000 scripts/fuzz-long.sh
#   FUZZ_ONLY=ctl scripts/fuzz-long.sh   # only the control fuzzer (or: props, xdp)
set -euo pipefail
cd "$(dirname "$0")/.."
export PROPTEST_CASES="${PROPTEST_CASES:-100000}"
export PFIL_CTL_FUZZ_CASES="${PFIL_CTL_FUZZ_CASES:-10000}"
runs="${PFIL_CTL_FUZZ_RUNS:-3}"
if [ -n "${PFIL_CTL_FUZZ_SEED:-}" ]; then
    runs=1
fi
only="${FUZZ_ONLY:-}"
if [ -z "$only" ] || [ "$only" = props ]; then
    echo "fuzz-long: ${PROPTEST_CASES} cases per property"
    cargo test --release -p pfil --test proptest_packets
    cargo test --release -p pfil-filters --test proptest_filters
    # The connection tracker: its state machine against a model, its
    # batch paths against packet-by-packet tracking.
    cargo test --release -p pfil-filters --lib -- ct::model ct::tests_batch
    cargo test --release -p pfil-bench --test proptest_lock_hooks
    # The eBPF engine: hostile programs, JIT vs interpreter, classic BPF.
    cargo test --release -p pfil-ebpf --test robustness --test differential --test cbpf
fi
if [ -z "$only" ] || [ "$only" = ctl ]; then
    echo "fuzz-long: control protocol, ${runs} runs of ${PFIL_CTL_FUZZ_CASES} cases"
    for _ in $(seq "$runs"); do
        # The seed is printed first: a failure names the one to replay.
        cargo test --release -p pfil-ctl --test fuzz -- --nocapture
    done
fi
if [ -z "$only" ] || [ "$only" = xdp ]; then
    export PFIL_XDP_MUTANTS="${PFIL_XDP_MUTANTS:-100000}"
    echo "fuzz-long: ${PFIL_XDP_MUTANTS} mutated BPF objects"
    cargo test --release -p pfil-xdp --test hostile -- --nocapture
fi
echo "fuzz-long: all green"
