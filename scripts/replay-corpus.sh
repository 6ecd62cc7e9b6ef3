#!/usr/bin/env bash
# replay-corpus.sh DIR [EXPR...]
#
# Replays every Ethernet capture (*.pcap, *.pcapng) of DIR through
# `pfild sink --pcap FILE --hook 'bpf:pass EXPR'` for each bpf expression
# and compares the frames pfild passed with the frames tcpdump matches
# (`tcpdump --count -r FILE EXPR`). Prints one line per capture and a
# summary; exits 1 if any count differs, or if pfild refuses a capture
# that tcpdump reads whole.
#
# A corpus: tcpdump's own test captures (its repository's tests/); not
# kept in this repository (licence and size). For example:
#   git clone --depth 1 https://github.com/the-tcpdump-group/tcpdump /tmp/tcpdump
#   scripts/replay-corpus.sh /tmp/tcpdump/tests
#
# Captures that are not Ethernet (link type EN10MB) are skipped and
# counted. Captures tcpdump itself cannot read to the end (truncated or
# corrupt on purpose) are listed as "unreadable" and not compared; pfild
# must refuse them too (it refuses a damaged file, tcpdump prints what it
# read before the damage).
#
# Environment: PFILD (the binary; default: build and use target/debug/pfild),
# TCPDUMP (default: tcpdump on PATH), VERBOSE=1 (every line, not only
# the ones that disagree).
set -u -o pipefail

if [ $# -lt 1 ] || [ ! -d "$1" ]; then
    echo "usage: $0 DIR [EXPR...]  (DIR: a directory of .pcap/.pcapng captures)" >&2
    exit 2
fi
dir=$1
shift
if [ $# -gt 0 ]; then
    exprs=("$@")
else
    exprs=("udp" "tcp port 80" "ip6" "vlan" "not arp" "icmp or icmp6" "tcp[tcpflags] & tcp-syn != 0")
fi

root=$(cd "$(dirname "$0")/.." && pwd)
TCPDUMP=${TCPDUMP:-$(command -v tcpdump || true)}
if [ -z "$TCPDUMP" ]; then
    echo "$0: tcpdump is not installed (scripts/setup.sh installs it)" >&2
    exit 2
fi
if [ -z "${PFILD:-}" ]; then
    (cd "$root" && cargo build -q -p pfild) || exit 2
    PFILD=$root/target/debug/pfild
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

total=0 ethernet=0 skipped=0 unreadable=0 agree=0 mismatched=0 refused=0 frames_all=0
bad=()
shopt -s nullglob
printf '%-48s %7s  %s\n' "CAPTURE" "FRAMES" "tcpdump/pfild per expression: ${exprs[*]/#/| }"
for f in "$dir"/*.pcap "$dir"/*.pcapng; do
    total=$((total + 1))
    name=$(basename "$f")
    info=$("$TCPDUMP" -r "$f" -c 1 2>&1 >/dev/null)
    case "$info" in
    *"link-type EN10MB"*) ;;
    *)
        skipped=$((skipped + 1))
        continue
        ;;
    esac
    ethernet=$((ethernet + 1))
    # All frames, and whether tcpdump reads the file to its end.
    if ! all=$("$TCPDUMP" --count -r "$f" 2>"$tmp/td.err" | awk '{print $1}'); then
        unreadable=$((unreadable + 1))
        if "$PFILD" sink cap0 --pcap "$f" --no-control --quiet >/dev/null 2>"$tmp/pf.err"; then
            bad+=("$name: tcpdump cannot read it ($(tail -1 "$tmp/td.err")) but pfild replayed it")
            mismatched=$((mismatched + 1))
        elif [ "${VERBOSE:-0}" = 1 ]; then
            printf '%-48s %7s  unreadable: tcpdump: %s; pfild: %s\n' "$name" "-" \
                "$(tail -1 "$tmp/td.err")" "$(grep -m1 -- '--pcap' "$tmp/pf.err")"
        fi
        continue
    fi
    frames_all=$((frames_all + all))
    line="" ok=1
    for e in "${exprs[@]}"; do
        want=$("$TCPDUMP" --count -r "$f" "$e" 2>/dev/null | awk '{print $1}')
        if ! out=$("$PFILD" sink cap0 --pcap "$f" --hook "bpf:pass $e" --no-control --quiet 2>"$tmp/pf.err"); then
            refused=$((refused + 1))
            bad+=("$name: pfild refused it: $(grep -m1 -- '--pcap' "$tmp/pf.err" || tail -1 "$tmp/pf.err")")
            ok=0
            line="$line | refused"
            break
        fi
        got=$(printf '%s\n' "$out" | sed -n 's/^totals:.* passed=\([0-9]*\) .*/\1/p')
        line="$line | $want/$got"
        if [ "$want" != "$got" ]; then
            ok=0
            bad+=("$name: \`$e\`: tcpdump $want, pfild $got")
        fi
    done
    if [ $ok = 1 ]; then
        agree=$((agree + 1))
    elif [ -n "$line" ] && [[ "$line" != *refused ]]; then
        mismatched=$((mismatched + 1))
    fi
    if [ $ok = 0 ] || [ "${VERBOSE:-0}" = 1 ]; then
        printf '%-48s %7s  %s\n' "$name" "$all" "${line# | }"
    fi
done

echo
echo "captures: $total; Ethernet: $ethernet (others skipped: $skipped)"
echo "Ethernet captures tcpdump reads to the end: $((ethernet - unreadable)) ($frames_all frames), unreadable: $unreadable"
echo "agree on every expression: $agree; disagree: $mismatched; refused by pfild: $refused"
echo "expressions: ${exprs[*]/#/| }"
if [ ${#bad[@]} -gt 0 ]; then
    echo
    printf '%s\n' "${bad[@]}"
    exit 1
fi
