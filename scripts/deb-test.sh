#!/usr/bin/env bash
# Build the Debian package, install it, check what it installed, remove
# and purge it, and check that nothing is left. As root on a Debian 12
# machine (CI runs it). The service is not started: the machine may not
# run systemd; `systemd-analyze verify` checks the unit offline.
#
#   scripts/deb-test.sh [PKG.deb]     # default: build with scripts/deb.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/deb-test.sh: run as root (it installs a package)" >&2
    exit 1
fi
DEB=${1:-$(bash scripts/deb.sh | tail -1)}
step() { printf '\n--- %s\n' "$*"; }
fail() { echo "deb-test: $*" >&2; exit 1; }
if dpkg-query -W -f='${Status}' pfil-rs 2>/dev/null | grep -q 'install ok installed'; then
    fail "pfil-rs is installed already: remove it first (dpkg -P pfil-rs)"
fi
cleanup() { dpkg -P pfil-rs >/dev/null 2>&1 || true; }
trap cleanup EXIT

step "install $DEB"
apt-get install -y -qq --no-install-recommends "$(realpath "$DEB")" >/dev/null
dpkg -L pfil-rs | grep -qx /usr/sbin/pfild || fail "no /usr/sbin/pfild"

step "pfild --version, pfilctl --version"
v=$(dpkg-deb -f "$DEB" Version)
# Not `tee /dev/stderr`: when stderr is a log file, tee opens it anew
# with O_TRUNC and the log loses everything before (a hole of NULs).
out=$(/usr/sbin/pfild --version)
echo "$out" >&2
[ "$out" = "pfild $v" ] || fail "pfild --version is '$out', not 'pfild $v'"
pfilctl --version | grep -qx "pfilctl $v" || fail "pfilctl --version is not $v"

step "pfild --check-config /etc/pfil/pfild.toml (the default config)"
/usr/sbin/pfild --check-config /etc/pfil/pfild.toml
[ "$(stat -c %a /etc/pfil/pfild.toml)" = 644 ] || fail "mode of /etc/pfil/pfild.toml"

step "man pages render"
for page in /usr/share/man/man8/pfild.8.gz /usr/share/man/man8/pfilctl.8.gz /usr/share/man/man5/pfild.toml.5.gz; do
    out=$(MANWIDTH=80 man -l "$page" 2>&1) || fail "man -l $page: $out"
    echo "$out" | grep -q '^NAME' || fail "$page has no NAME section"
    echo "$out" | grep -qi 'warning' && fail "$page: $out"
    echo "$page: $(echo "$out" | wc -l) lines"
done
MANWIDTH=80 man -l /usr/share/man/man5/pfild.toml.5.gz | grep -q 'xdp-mode' || fail "pfild.toml(5) lists no xdp-mode"

step "completions load"
bash -c 'source /usr/share/bash-completion/completions/pfilctl && complete -p pfilctl' >/dev/null ||
    fail "bash completion of pfilctl"
bash -c 'source /usr/share/bash-completion/completions/pfild && complete -p pfild' >/dev/null ||
    fail "bash completion of pfild"
grep -q 'complete -c pfilctl' /usr/share/fish/vendor_completions.d/pfilctl.fish || fail "fish completion"
head -1 /usr/share/zsh/vendor-completions/_pfild | grep -q '#compdef pfild' || fail "zsh completion"

step "systemd-analyze verify the unit"
out=$(systemd-analyze verify /lib/systemd/system/pfild.service 2>&1) || fail "verify: $out"
# Warnings about the machine itself (no running systemd) are not the unit's.
if echo "$out" | grep -v -e 'Failed to connect to bus' -e '^$' | grep -q .; then
    fail "systemd-analyze verify: $out"
fi
systemd-analyze security --offline=yes /lib/systemd/system/pfild.service 2>/dev/null | tail -1

step "remove, then purge"
dpkg -r pfil-rs >/dev/null
[ ! -e /usr/sbin/pfild ] && [ ! -e /usr/bin/pfilctl ] || fail "binaries left after remove"
[ ! -e /lib/systemd/system/pfild.service ] || fail "unit left after remove"
[ -e /etc/pfil/pfild.toml ] || fail "remove (not purge) keeps the conffile"
dpkg -P pfil-rs >/dev/null
[ ! -e /etc/pfil ] || fail "/etc/pfil left after purge"
dpkg-query -W pfil-rs >/dev/null 2>&1 && fail "the package is still known to dpkg"
trap - EXIT
echo "deb-test: installed, checked, removed and purged $DEB"
