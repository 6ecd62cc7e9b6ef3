#!/usr/bin/env bash
# Install what pfil-rs's tests and benchmarks need on a Debian 12 machine.
# Run it as root, or as a user with sudo; packages already installed are
# not touched (so it is quick the second time).
#   iproute2, procps  - namespaces/veth for the AF_XDP tests, sysctl
#   ministat          - reference for pfil-bench's statistics tests
#   dpdk-dev, librte-net-af-xdp23 - dpdk-testpmd with its AF_XDP PMD, the
#                       comparison peer of benches/afxdp.sh
#   util-linux        - taskset (benches/afxdp.sh pins generator and app)
#   librsvg2-bin      - render pfil-bench's SVG charts to PNG (optional)
#   valgrind          - callgrind instruction counts of the loops
#                       (benches/callgrind_*.sh)
#   libpcap-dev       - libpcap, which compiles the tcpdump expressions of
#                       the `bpf` filter (pfil-filters links it)
#   tcpdump           - the reference the `bpf` filter's tests compare with
#   python3-prometheus-client - a strict OpenMetrics parser the metrics
#                       tests check pfilctl's output with
#   ethtool           - the veth driver's XDP counters (xdp_redirect,
#                       xdp_drops) that benches/afxdp.sh reports per case
#   dpkg-dev, man-db, systemd - scripts/deb.sh and deb-test.sh: the
#                       package's library dependencies, its man pages
#                       rendered, its unit verified (systemd-analyze)
#   clang, llvm, libbpf-dev - compile the XDP programs of the tests and
#                       examples (`clang -target bpf`, libbpf's headers)
#   bpftool, xdp-tools (libxdp1) - xdp-filter's programs
#                       (/usr/lib/x86_64-linux-gnu/bpf/xdpfilt_*.o) and the
#                       kernel as the reference (BPF_PROG_TEST_RUN)
#   nftables, conntrack - Linux's connection tracker, the reference of the
#                       `ct` hook's oracle test
# The main job (`pfild ... --synthetic`) needs a Rust toolchain and
# libpcap-dev (to link the `bpf` filter) only.
set -euo pipefail
packages=(build-essential iproute2 procps util-linux ministat dpdk-dev librte-net-af-xdp23 librsvg2-bin valgrind libpcap-dev tcpdump python3-prometheus-client ethtool dpkg-dev man-db systemd clang llvm libbpf-dev bpftool xdp-tools libxdp1 nftables conntrack)

for tool in cargo rustfmt cargo-clippy; do
    command -v "$tool" >/dev/null || {
        echo "scripts/setup.sh: $tool is missing: install a Rust toolchain with rustfmt and clippy (https://rustup.rs)" >&2
        exit 1
    }
done

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: every package is installed; $(cargo --version)"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null; then
    as_root=(sudo)
else
    echo "scripts/setup.sh: these packages are missing: ${missing[*]}; run this script as root (no sudo here)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: installed ${missing[*]}; $(cargo --version)"
