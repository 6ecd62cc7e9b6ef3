#!/usr/bin/env bash
# Install what pfil-rs needs on a fresh Debian 12 machine (run as root).
#   iproute2, procps  - namespaces/veth for the AF_XDP tests, sysctl
#   ministat          - reference for pfil-bench's statistics tests
#   dpdk-dev, librte-net-af-xdp23 - dpdk-testpmd with its AF_XDP PMD, the
#                       comparison peer of benches/afxdp.sh
#   util-linux        - taskset (benches/afxdp.sh pins generator and app)
#   librsvg2-bin      - render pfil-bench's SVG charts to PNG (optional)
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/setup.sh: run as root (apt-get needs it): sudo $0" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
    build-essential iproute2 procps util-linux ministat dpdk-dev librte-net-af-xdp23 librsvg2-bin >/dev/null
for tool in cargo rustfmt cargo-clippy; do
    command -v "$tool" >/dev/null || { echo "scripts/setup.sh: $tool is missing (install a Rust toolchain with rustfmt and clippy)" >&2; exit 1; }
done
echo "setup: apt packages installed; $(cargo --version)"
