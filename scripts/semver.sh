#!/usr/bin/env bash
# The public API of every library crate against the baseline release
# (0.1.0, commit bf9e1de), with cargo-semver-checks: a break the version
# number does not allow (0.x: a minor bump) fails with exit 100.
#
# Run it before every version bump and for every change to a public item.
# cargo-semver-checks is installed from crates.io when missing; that build
# takes about 18 min on 2 busy cores (without LTO, 16 codegen units), which
# is why `.ci/run` runs this only where the tool is already installed, or
# when PFIL_SEMVER=1 asks for it. The check itself takes about 4 min.
set -euo pipefail
cd "$(dirname "$0")/.."
SEMVER_BASELINE="${SEMVER_BASELINE:-bf9e1de}"
if ! command -v cargo-semver-checks >/dev/null; then
    CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
        cargo install cargo-semver-checks --locked --version 0.51.0
fi
if ! git cat-file -e "$SEMVER_BASELINE^{commit}" 2>/dev/null; then
    # A shallow clone: fetch the history, or say why the check cannot run.
    git fetch --quiet --unshallow 2>/dev/null || git fetch --quiet origin "$SEMVER_BASELINE" 2>/dev/null || {
        echo "semver: baseline $SEMVER_BASELINE is not in this clone and cannot be fetched; clone the full history" >&2
        exit 1
    }
fi
cargo semver-checks --workspace --baseline-rev "$SEMVER_BASELINE"
