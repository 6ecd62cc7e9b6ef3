#!/usr/bin/env bash
# The test command: install (or check) what the tests need, then run every
# test. The AF_XDP tests build veth pairs in network namespaces of their
# own and need root; as a user they are skipped (and under CI=true a skip
# is a failure). `.ci/run` runs this after format, lint and doc checks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "$(id -u)" -ne 0 ]; then
    echo "test: not root: the AF_XDP tests will be skipped (run as root to include them)" >&2
fi
cargo test --workspace "$@"
