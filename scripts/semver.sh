#!/usr/bin/env bash
# The public API of every library crate against the baseline release
# (0.1.0, commit bf9e1de), with cargo-semver-checks: a break the version
# number does not allow (0.x: a minor bump) fails with exit 100.
#
# Run it before every version bump and for every change to a public item.
# cargo-semver-checks is installed from crates.io when missing, built at
# opt-level 1 without LTO or debug info: 6 min 16 s on this 2-core machine
# (25 min as released); the check itself takes about 4 min on a fresh
# clone (rustdoc of both versions), seconds when its cache is warm.
set -euo pipefail
cd "$(dirname "$0")/.."
SEMVER_BASELINE="${SEMVER_BASELINE:-bf9e1de}"
if ! command -v cargo-semver-checks >/dev/null; then
    CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=256 \
        CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_DEBUG=false \
        cargo install cargo-semver-checks --locked --version 0.51.0
fi
if ! git cat-file -e "$SEMVER_BASELINE^{commit}" 2>/dev/null; then
    # A shallow clone: fetch the history, or say why the check cannot run.
    git fetch --quiet --unshallow 2>/dev/null || git fetch --quiet origin "$SEMVER_BASELINE" 2>/dev/null || {
        echo "semver: baseline $SEMVER_BASELINE is not in this clone and cannot be fetched; clone the full history" >&2
        exit 1
    }
fi
# A crate the baseline does not have (added since: pfil-ebpf, pfil-xdp)
# has no API to break: left out, and said so.
EXCLUDE=()
while read -r name manifest; do
    if ! git cat-file -e "$SEMVER_BASELINE:$manifest" 2>/dev/null; then
        echo "semver: $name is new since $SEMVER_BASELINE: not checked" >&2
        EXCLUDE+=(--exclude "$name")
    fi
done < <(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, os, sys
m = json.load(sys.stdin)
root = m["workspace_root"]
for p in m["packages"]:
    print(p["name"], os.path.relpath(p["manifest_path"], root))
')
cargo semver-checks --workspace "${EXCLUDE[@]}" --baseline-rev "$SEMVER_BASELINE"
