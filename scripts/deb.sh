#!/usr/bin/env bash
# Build the Debian package: target/deb/pfil-rs_VERSION_amd64.deb with
# pfild (/usr/sbin) and pfilctl (/usr/bin), the systemd unit, the default
# /etc/pfil/pfild.toml (a conffile; it touches no interface), the man
# pages pfild(8), pfilctl(8), pfild.toml(5) and the bash/zsh/fish
# completions, all generated from the binaries' own definitions.
#
#   scripts/deb.sh            # release build, then the package
#
# Needs dpkg-dev (dpkg-shlibdeps works out the library dependencies;
# build-essential brings it). scripts/deb-test.sh installs, checks and
# removes the package.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
# The workspace's version (pfild and pfilctl inherit it).
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
ARCH=$(dpkg --print-architecture)
cargo build --release -p pfild -p pfil-ctl --bin pfild --bin pfilctl
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release

OUT=$ROOT/target/deb
PKG=$OUT/pfil-rs_${VERSION}_${ARCH}
rm -rf "$PKG"
install -d "$PKG/DEBIAN" "$PKG/usr/sbin" "$PKG/usr/bin" "$PKG/lib/systemd/system" \
    "$PKG/etc/pfil" "$PKG/usr/share/man/man8" "$PKG/usr/share/man/man5" \
    "$PKG/usr/share/bash-completion/completions" "$PKG/usr/share/zsh/vendor-completions" \
    "$PKG/usr/share/fish/vendor_completions.d" "$PKG/usr/share/doc/pfil-rs"
install -m 0755 -s "$BIN/pfild" "$PKG/usr/sbin/pfild"
install -m 0755 -s "$BIN/pfilctl" "$PKG/usr/bin/pfilctl"
install -m 0644 packaging/pfild.service "$PKG/lib/systemd/system/pfild.service"
install -m 0644 packaging/pfild.toml "$PKG/etc/pfil/pfild.toml"

# Man pages and completions from the binaries just built.
"$BIN/pfild" --generate man | gzip -9n > "$PKG/usr/share/man/man8/pfild.8.gz"
"$BIN/pfild" --generate man-config | gzip -9n > "$PKG/usr/share/man/man5/pfild.toml.5.gz"
"$BIN/pfilctl" --generate man | gzip -9n > "$PKG/usr/share/man/man8/pfilctl.8.gz"
for p in pfild pfilctl; do
    "$BIN/$p" --generate bash > "$PKG/usr/share/bash-completion/completions/$p"
    "$BIN/$p" --generate zsh > "$PKG/usr/share/zsh/vendor-completions/_$p"
    "$BIN/$p" --generate fish > "$PKG/usr/share/fish/vendor_completions.d/$p.fish"
done
install -m 0644 README.md "$PKG/usr/share/doc/pfil-rs/README.md"
gzip -9nc CHANGELOG.md > "$PKG/usr/share/doc/pfil-rs/changelog.gz"
cat > "$PKG/usr/share/doc/pfil-rs/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: pfil-rs
Files: *
License: $(sed -n 's/^license = "\(.*\)"/\1/p' Cargo.toml | head -1)
EOF

# Library dependencies, as dpkg-shlibdeps finds them.
SHL=$(mktemp -d)
trap 'rm -rf "$SHL"' EXIT
mkdir -p "$SHL/debian"
printf 'Source: pfil-rs\n\nPackage: pfil-rs\nArchitecture: any\n' > "$SHL/debian/control"
DEPENDS=$(cd "$SHL" && dpkg-shlibdeps -O "$PKG/usr/sbin/pfild" "$PKG/usr/bin/pfilctl" 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')
SIZE=$(du -sk --exclude=DEBIAN "$PKG" | cut -f1)

cat > "$PKG/DEBIAN/control" <<EOF
Package: pfil-rs
Version: $VERSION
Architecture: $ARCH
Maintainer: pfil-rs maintainers <maintainers@pfil-rs.invalid>
Installed-Size: $SIZE
Depends: $DEPENDS
Recommends: systemd
Section: net
Priority: optional
Homepage: $(sed -n 's/^repository = "\(.*\)"/\1/p' Cargo.toml | head -1)
Description: packet-filter hooks for userspace AF_XDP dataplanes
 pfild runs pfil(9)-style heads and hooks inline on AF_XDP sockets: named
 inspection points per interface and direction, filters (acl, tcpdump
 expressions, rate limits) linked and unlinked at run time without
 stopping traffic. pfilctl lists, links, captures, traces and reloads over
 a Unix socket. The package installs the pfild service (not enabled; edit
 /etc/pfil/pfild.toml first), man pages and shell completions.
EOF
echo /etc/pfil/pfild.toml > "$PKG/DEBIAN/conffiles"
cat > "$PKG/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
fi
exit 0
EOF
cat > "$PKG/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
    systemctl stop pfild.service 2>/dev/null || true
    if [ "$1" = remove ]; then
        systemctl disable pfild.service 2>/dev/null || true
    fi
fi
exit 0
EOF
cat > "$PKG/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
fi
exit 0
EOF
chmod 0755 "$PKG/DEBIAN/postinst" "$PKG/DEBIAN/prerm" "$PKG/DEBIAN/postrm"
dpkg-deb --build --root-owner-group "$PKG" "$OUT/" >/dev/null
rm -rf "$PKG"
echo "$OUT/pfil-rs_${VERSION}_${ARCH}.deb"
