#!/usr/bin/env bash
# The README's service transcript, on a veth pair whose two ends live in
# network namespaces of its own (198.18.7.0/24), deleted at the end (also
# on failure). pfild runs the unit's command line the way systemd runs it:
# an unprivileged uid with only CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF
# (setpriv), memlock unlimited, $NOTIFY_SOCKET set; the config is the
# packaged default edited for the veth pair.
#
#   scripts/service-demo.sh      # as root; uses the installed package,
#                                # or PFILD=... PFILCTL=... binaries
set -euo pipefail
cd "$(dirname "$0")/.."
PFILD=${PFILD:-/usr/sbin/pfild}
PFILCTL=${PFILCTL:-pfilctl}
DEFAULT=/etc/pfil/pfild.toml
[ -e "$DEFAULT" ] || DEFAULT=packaging/pfild.toml
A=pfdemo-a$$ B=pfdemo-b$$
WORK=$(mktemp -d /tmp/pfil-demo.XXXXXX)
chmod 0755 "$WORK"
PID=
cleanup() {
    [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
run() { printf '\n$ %s\n' "$*"; "$@"; }

ip netns add "$A" && ip netns add "$B"
ip -n "$A" link add v0 type veth peer name v1 netns "$B"
ip -n "$A" addr add 198.18.7.1/24 dev v0 && ip -n "$B" addr add 198.18.7.2/24 dev v1
ip -n "$A" link set v0 up && ip -n "$B" link set v1 up

# The packaged default, edited for v1: AF_XDP instead of the in-memory
# port, a DNS drop before the counter.
CONF=$WORK/pfild.toml
sed -e 's/^interfaces = \["syn0"\]/interfaces = ["v1"]/' \
    -e '/^synthetic = true/d' -e '/^rate = 10 /d' \
    -e 's/^spin-us = 0 .*/spin-us = 0/' \
    -e 's/^\[heads.syn0\]/[heads.v1]/' \
    -e 's/^# \[hooks."drop-udp:dns"\]/[hooks."drop-udp:dns"]/' \
    -e 's/^# config = "53"/config = "53"/' \
    -e 's/^in = \["count:all"\]/in = ["drop-udp:dns", "count:all"]/' \
    "$DEFAULT" > "$CONF"
chmod 0644 "$CONF"
printf '$ diff %s %s\n' "$DEFAULT" pfild.toml
diff "$DEFAULT" "$CONF" || true
# Checked where it runs: v1 lives in $B.
run ip netns exec "$B" "$PFILD" --check-config "$CONF"

SOCK=$WORK/run/pfild.sock
mkdir -m 0700 "$WORK/run" && chown 65534:65534 "$WORK/run"
# The unit raises the memlock limit for the UMEM (LimitMEMLOCK=infinity:
# systemd has CAP_SYS_RESOURCE); where this shell cannot raise its own
# (a container's 8 MiB hard limit), CAP_IPC_LOCK does the same job.
CAPS=net_admin,net_raw,bpf
if ! ulimit -l unlimited 2>/dev/null; then
    CAPS=$CAPS,ipc_lock
fi
printf '\n$ # ExecStart= as systemd runs it: uid 65534, capabilities %s only\n' "$CAPS"
ip netns exec "$B" setpriv --reuid=65534 --regid=65534 --clear-groups \
    --inh-caps=-all,+${CAPS//,/,+} --ambient-caps=-all,+${CAPS//,/,+} \
    --bounding-set=-all,+${CAPS//,/,+} \
    "$PFILD" --config "$CONF" --control "$SOCK" --quiet > "$WORK/out" 2> "$WORK/err" &
PID=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
sed 's/^/  /' "$WORK/err"
run "$PFILCTL" --socket "$SOCK" heads

gen() { "$PFILD" gen v0 --netns "$A" --rate 2000 --count "$1" --size 96 \
    --src-ip 198.18.7.1 --dst-ip 198.18.7.2 --dst-port 53,80 --quiet >/dev/null 2>&1; }
# Traffic while the trace waits: half of it to port 53.
(sleep 1; gen 400) &
GEN=$!
run timeout 20 "$PFILCTL" --socket "$SOCK" trace v1 -i 'udp' -c 2
wait "$GEN"
run "$PFILCTL" --socket "$SOCK" stats v1

printf '\n$ # edit: the counter first, the DNS drop fail-closed; then systemctl reload = kill -HUP\n'
sed -i 's/^in = \["drop-udp:dns", "count:all"\]/in = ["count:all", { hook = "drop-udp:dns", fail = "closed" }]/' "$CONF"
seen=$(wc -l < "$WORK/err")
kill -HUP "$PID"
for _ in $(seq 50); do grep -q 'reloaded' "$WORK/err" && break; sleep 0.1; done
tail -n +$((seen + 1)) "$WORK/err" | sed 's/^/  /'
run "$PFILCTL" --socket "$SOCK" heads

printf '\n$ # systemctl stop = SIGTERM: drain, totals to the journal, XDP detached\n'
kill -TERM "$PID"
wait "$PID" || true
PID=
sed 's/^/  /' "$WORK/out"
run ip -n "$B" link show v1
