//! Linux is the oracle (issue 26): the same frames go through Linux's
//! conntrack (namespaces of this test's own, see [`linux`]) and through
//! the `ct` hook, one at a time, and the state of every packet (new,
//! established, related, invalid, and the reply direction) must agree,
//! except where pf-style tracking differs from Linux's by design: each
//! such difference is in [`ALLOWED`], keyed by the kind of packet, with
//! its reason (the `ct` module's docs list the same).
//!
//! Frames: the generated cases of [`cases`] (IPv4 and IPv6) and real
//! captures: `tests/data/ct-oracle/*.pcap` (a few of tcpdump's test
//! captures, BSD licence beside them) and every capture of the directory
//! `$PFIL_CT_CAPTURES` (e.g. tcpdump's `tests/`; see
//! scripts/replay-corpus.sh), each rewritten to the test's addresses
//! (frames::Rewriter), at most [`FRAMES_PER_CAPTURE`] frames a capture
//! and [`CAPTURE_BUDGET`] for all of them (`PFIL_CT_CAPTURE_SECS`: another).
//!
//! A packet's kind for the allow-list is found from the frames as a
//! reader of the capture sees them (the test's own bookkeeping of each
//! TCP direction: data sent, acknowledged), so a documented difference is
//! recognised in a capture it was not written for: a segment before any
//! answer, an ACK of data the capture never showed, a segment below
//! what its receiver acknowledged. In a capture, once a packet of a flow
//! differed by design, the flow's later packets are not compared (each
//! tracker goes on from its own state; counted apart).
//!
//! `PFIL_CT_ORACLE_DUMP=DIR` writes each capture's frames as sent to
//! `DIR` (frame `#i` of a message is stamped `i + 1` seconds).
//!
//! Needs root (skipped with a message otherwise; under `CI=true` a skip
//! is a failure), `nft` and `conntrack` (scripts/setup.sh).

mod cases;
mod frames;
mod linux;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use pfil::{CtState, Ctx, Dir, Filter, Packet};
use pfil_filters::ct::Ct;

use linux::{Oracle, Seen};

/// Most frames taken from one capture.
const FRAMES_PER_CAPTURE: usize = 400;
/// Most time spent on captures (the generated cases always run);
/// `PFIL_CT_CAPTURE_SECS` sets another (a whole corpus takes longer).
const CAPTURE_BUDGET: Duration = Duration::from_secs(90);

fn capture_budget() -> Duration {
    std::env::var("PFIL_CT_CAPTURE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(CAPTURE_BUDGET, Duration::from_secs)
}

/// A state as both trackers can say it: `(state, reply)`, the direction
/// left out for invalid and untracked packets.
type State = (&'static str, bool);

fn linux_state(s: Seen) -> Option<State> {
    Some(match s {
        Seen::Tag(1) => ("new", false),
        Seen::Tag(7) => ("new", true),
        Seen::Tag(2) => ("established", false),
        Seen::Tag(3) => ("established", true),
        Seen::Tag(4) => ("related", false),
        Seen::Tag(5) => ("related", true),
        Seen::Tag(6) => ("invalid", false),
        Seen::Tag(8) => ("untracked", false),
        Seen::Tag(_) | Seen::Lost => return None,
    })
}

fn pfil_state((s, reply): (CtState, bool)) -> State {
    match s {
        CtState::New => ("new", reply),
        CtState::Established => ("established", reply),
        CtState::Related => ("related", reply),
        CtState::Invalid => ("invalid", false),
        CtState::Untracked => ("untracked", false),
    }
}

/// A direction of a TCP flow: addresses and ports, source first.
type Way = Vec<u8>;

/// The TCP directions a case has sent, to tell a segment sent before
/// any answer; each direction's furthest sequence sent (its data's end)
/// and furthest acknowledgement, to tell an ACK of data never seen and a
/// segment wholly below what its receiver acknowledged; and the flows
/// (either direction) on which a difference by design was allowed.
#[derive(Default)]
struct Ways {
    seen: std::collections::HashSet<Way>,
    sent: std::collections::HashMap<Way, u32>,
    acked: std::collections::HashMap<Way, u32>,
    diverged: std::collections::HashSet<Way>,
}

/// `a` is after `b` in sequence space (RFC 793's comparison).
fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

impl Ways {
    /// This TCP segment's direction and its reverse, or `None`.
    fn of(f: &[u8]) -> Option<(Way, Way)> {
        let (alen, src, l4) = match u16::from_be_bytes([f[12], f[13]]) {
            0x0800 if f[23] == 6 => (4, 26, 14 + usize::from(f[14] & 0xf) * 4),
            0x86dd if f[20] == 6 => (16, 22, 54),
            _ => return None,
        };
        let (a, b) = (f.get(src..src + alen)?, f.get(src + alen..src + 2 * alen)?);
        let (sp, dp) = (f.get(l4..l4 + 2)?, f.get(l4 + 2..l4 + 4)?);
        Some(([a, sp, b, dp].concat(), [b, dp, a, sp].concat()))
    }
}

/// The kind of a packet, for the allow-list: protocol and, for ICMP, the
/// message's class; a TCP segment other than a SYN sent before its flow
/// has seen any packet the other way (a SYN-ACK that came before any SYN
/// is no answer) is `tcp before any answer`; one acknowledging past all
/// the data the other way has sent is `tcp ack of data not seen` (a
/// capture that lost packets); one whose data ends at or before what its
/// receiver has acknowledged is `tcp old segment`.
fn kind(f: &[u8], ways: &mut Ways) -> &'static str {
    let (proto, l4) = match u16::from_be_bytes([f[12], f[13]]) {
        0x0800 => (f[23], 14 + usize::from(f[14] & 0xf) * 4),
        0x86dd => (f[20], 54),
        _ => return "other",
    };
    let ty = f.get(l4).copied().unwrap_or(0);
    match proto {
        6 => {
            let Some((way, back)) = Ways::of(f) else {
                return "tcp";
            };
            let fl = f.get(l4 + 13).copied().unwrap_or(0);
            let syn_only = fl & 0x12 == 0x02;
            let first = !ways.seen.contains(&back) && !syn_only;
            // A SYN-ACK before any SYN the other way answers nothing.
            let early_synack = fl & 0x12 == 0x12 && !ways.seen.contains(&back);
            let be32 = |o: usize| {
                f.get(o..o + 4)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            };
            let (Some(seq), Some(ack)) = (be32(l4 + 4), be32(l4 + 8)) else {
                return "tcp";
            };
            let ip_end = match u16::from_be_bytes([f[12], f[13]]) {
                0x0800 => 14 + usize::from(u16::from_be_bytes([f[16], f[17]])),
                _ => 54 + usize::from(u16::from_be_bytes([f[18], f[19]])),
            };
            let hl = usize::from(f.get(l4 + 12).copied().unwrap_or(0) >> 4) * 4;
            let len = ip_end.min(f.len()).saturating_sub(l4 + hl) as u32;
            let end = seq
                .wrapping_add(len)
                .wrapping_add(u32::from(fl & 0x02 != 0))
                .wrapping_add(u32::from(fl & 0x01 != 0));
            let ack_ahead =
                fl & 0x10 != 0 && ways.sent.get(&back).is_some_and(|&peer| after(ack, peer));
            let old = len > 0
                && fl & 0x07 == 0
                && ways.acked.get(&back).is_some_and(|&rcv| !after(end, rcv));
            if !early_synack {
                ways.seen.insert(way.clone());
            }
            let e = ways.sent.entry(way.clone()).or_insert(end);
            if after(end, *e) {
                *e = end;
            }
            if fl & 0x10 != 0 {
                let a = ways.acked.entry(way).or_insert(ack);
                if after(ack, *a) {
                    *a = ack;
                }
            }
            if first {
                "tcp before any answer"
            } else if old {
                "tcp old segment"
            } else if ack_ahead {
                "tcp ack of data not seen"
            } else {
                "tcp"
            }
        }
        132 => "sctp",
        17 => "udp",
        1 => match ty {
            0 | 8 => "icmp echo",
            3 | 4 | 5 | 11 | 12 => "icmp error",
            _ => "icmp informational",
        },
        58 => match ty {
            128 | 129 => "icmp echo",
            0..=127 => "icmp error",
            // Not redirects (137): Linux calls them invalid.
            130..=136 | 143 => "icmpv6 nd/mld",
            _ => "icmp informational",
        },
        _ => "other protocol",
    }
}

/// Differences by design: (TCP mode, case prefix, packet kind, Linux's
/// state, the hook's state) and why. The mode is `strict` (the hook's
/// `tcp strict`, Linux's `nf_conntrack_tcp_loose=0`), `loose` (`tcp
/// loose`, `nf_conntrack_tcp_loose=1`) or `*`; a case prefix `capture:`
/// is every capture.
const ALLOWED: &[(&str, &str, &str, &str, &str, &str)] = &[
    (
        "loose",
        "",
        "tcp",
        "invalid",
        "established",
        "`tcp loose` is flags only, as VPP's: no sequence checks, so a \
         segment or RST out of the window passes on the flow; Linux's \
         nf_conntrack_tcp_loose only lets it pick flows up mid-stream and \
         still checks the window",
    ),
    (
        "loose",
        "tcp_no_flow_",
        "tcp before any answer",
        "invalid",
        "new",
        "`tcp loose` picks a flow up mid-stream from any segment but a \
         SYN-ACK or a RST (a FIN-ACK too); Linux's loose pick-up takes an \
         ACK without FIN only",
    ),
    (
        "strict",
        "",
        "tcp old segment",
        "established",
        "invalid",
        "a segment wholly below the receiver's window (old data already \
         acknowledged; in a capture also one 2^31 or more ahead, which wraps \
         to behind): Linux passes it without updating the flow \
         (NFCT_TCP_IGNORE, 'SEQ is under the lower bound'), pf's tracking \
         calls it a bad state (the hook: invalid)",
    ),
    (
        "*",
        "capture:",
        "tcp before any answer",
        "invalid",
        "new",
        "a segment (not a SYN) from the originator before any answer (a \
         capture of one direction, or TCP Fast Open): Linux's state table \
         calls an ACK from the originator in SYN_SENT invalid; pf's tracking \
         knows no window of the responder yet and lets the originator's \
         segments through (the hook: new, as the flow has no reply)",
    ),
    (
        "*",
        "capture:",
        "tcp ack of data not seen",
        "invalid",
        "*",
        "(as tcp_ack_of_unsent_data: an ACK past all the data seen the other \
         way, in a capture that lost packets; pf lets it be up to \
         MAXACKWINDOW ahead, Linux not past the data sent)",
    ),
    (
        "*",
        "capture:",
        "sctp",
        "invalid",
        "*",
        "Linux tracks SCTP with a state machine of its own (INIT, INIT ACK, \
         COOKIE ECHO, verification tags) and calls chunks outside it \
         invalid; the hook has no SCTP tracker and tracks SCTP like other \
         protocols (by address pair, ports 0)",
    ),
    (
        "*",
        "capture:",
        "icmpv6 nd/mld",
        "untracked",
        "*",
        "Linux leaves neighbour discovery and MLD untracked; the hook tracks \
         non-echo informational ICMP by address pair like other protocols",
    ),
    (
        "*",
        "capture:",
        "icmp informational",
        "*",
        "*",
        "Linux tracks only echo, timestamp, information and address-mask \
         requests (by identifier) and calls other informational ICMP invalid; \
         the hook tracks every non-echo informational message by address pair",
    ),
];

/// pf's TCP rules where Linux's differ, each shown by a scenario capture
/// of `tests/data/ct-oracle/scenarios` (its name is the row's case), in
/// both modes (the knock-on packets of the capture too): the frames
/// listed, or any frame of the capture when none is.
const PF_RULES: &[(&str, &[usize], &str)] = &[
    (
        "capture:tcp_data_exceeds_window",
        &[],
        "a segment whose end runs past the receiver's window: pf requires \
         the whole segment inside it, Linux only its start (and lets it \
         overshoot up to a window)",
    ),
    (
        "capture:tcp_data_just_beyond_window",
        &[],
        "(as tcp_data_exceeds_window)",
    ),
    (
        "capture:tcp_zero_window_probes",
        &[],
        "(as tcp_data_exceeds_window: a probe's byte past a zero window)",
    ),
    (
        "capture:tcp_ack_of_unsent_data",
        &[],
        "an ACK ahead of the data sent: pf lets it be up to MAXACKWINDOW \
         (65 535) ahead, Linux not past the data sent",
    ),
    (
        "capture:tcp_rst_during_syn_sent",
        &[3],
        "a RST-ACK answering a SYN whose ack is a little ahead of the SYN \
         (within pf's MAXACKWINDOW): pf accepts it, Linux (RFC 5961) not",
    ),
    (
        "capture:tcp_synack_wrong_ack",
        &[2, 4, 5],
        "a SYN-ACK whose ack is one past the SYN's end (within pf's \
         MAXACKWINDOW: accepted, Linux: invalid) and what follows it; a \
         RST from the originator before any valid answer passes by pf's \
         leniency for segments sent before the peer answers",
    ),
    (
        "capture:tcp_rst_in_window_not_exact",
        &[],
        "a RST inside the window but not at the next sequence: Linux \
         accepts it (and sends a challenge ACK), pf only at the next \
         sequence, one before or one after",
    ),
    (
        "capture:tcp_rst_one_below_rcv_nxt",
        &[],
        "(as tcp_rst_in_window_not_exact: pf's one before)",
    ),
    (
        "capture:tcp_sack",
        &[],
        "SACK blocks are not checked (pf's tracking does not; Linux calls a \
         block past the data sent invalid)",
    ),
    (
        "capture:tcp_syn_in_close_wait",
        &[],
        "a SYN with a new ISN on a flow not closed both ways: pf calls it a \
         bad state, Linux lets it through without changing the flow (and its \
         answer with it)",
    ),
    (
        "capture:tcp_syn_in_last_ack",
        &[],
        "(as tcp_syn_in_close_wait)",
    ),
    (
        "capture:tcp_syn_on_established_after_client_reboot",
        &[],
        "(as tcp_syn_in_close_wait)",
    ),
    (
        "capture:tcp_syn_retransmission_new_isn",
        &[],
        "a SYN (or a SYN-ACK) sent again with a new ISN before the \
         handshake ends: outside the window pf's tracking holds for it",
    ),
    (
        "capture:tcp_synack_retransmitted_new_isn",
        &[],
        "(as tcp_syn_retransmission_new_isn)",
    ),
    (
        "capture:tcp_syn_with_psh_or_urg",
        &[],
        "flag combinations: pf's normaliser's rules (SYN with PSH or URG: \
         invalid here, new in Linux; SYN-ACK-URG, RST-ACK-URG, FIN-RST-ACK: \
         invalid in Linux's table, valid here)",
    ),
    (
        "capture:tcp_flags_linux_rejects",
        &[],
        "(as tcp_syn_with_psh_or_urg)",
    ),
    (
        "capture:tcp_port_reuse_after_server_rst",
        &[],
        "a new SYN after the server's RST: Linux keeps the closed entry and \
         calls the SYN established; pf's tracking starts a new flow",
    ),
    (
        "capture:tcp_synack_spoofed_before_genuine",
        &[3, 4],
        "a blind SYN-ACK before the genuine one: both call it invalid, but \
         Linux's flow is thrown out of step by it (it calls the ACKs after \
         the genuine handshake invalid); the hook sets nothing from an \
         invalid packet",
    ),
    (
        "capture:tcp_blind_rst_ack_acking_isn_before_synack",
        &[3, 4, 5],
        "(as tcp_synack_spoofed_before_genuine: a blind RST-ACK acking the \
         ISN itself before the genuine SYN-ACK; Linux's flow is thrown out \
         of step, strict mode calls the genuine handshake's ACKs invalid, \
         loose mode picks the flow up as new)",
    ),
    (
        "capture:tcp_synack_unseen_then_originator_ack",
        &[2],
        "a responder whose first segment seen is not a SYN-ACK (the SYN-ACK \
         lost before the capture point): Linux passes the responder's \
         segments but stays in SYN_SENT and calls the originator's later \
         ACKs invalid; pf's tracking takes the responder's first segment as \
         its window and goes on (established)",
    ),
    (
        "capture:icmp_echo_code_mismatch",
        &[],
        "an echo reply whose code differs from its request's: Linux calls it \
         invalid, the hook looks at the type and identifier only",
    ),
    (
        "capture:udplite_two_port_pairs",
        &[],
        "UDP-Lite (like SCTP and other protocols without a tracker here) is \
         tracked by address pair, without ports: two port pairs are one flow",
    ),
];

/// A capture's later packets of a flow after an allowed difference on it.
const KNOCK_ON: &str = "a later packet of a flow on which an earlier packet differed by \
     design: each tracker goes on from its own state";

fn allowed(
    loose: bool,
    case: &str,
    frame: usize,
    kind: &str,
    linux: State,
    pfil: State,
) -> Option<&'static str> {
    let pf = PF_RULES.iter().find(|(c, frames, _)| {
        case.starts_with(c) && (frames.is_empty() || frames.contains(&frame))
    });
    if let Some(&(_, _, why)) = pf {
        return Some(why);
    }
    ALLOWED.iter().find_map(|&(mode, c, k, l, p, why)| {
        let mode_ok = mode == "*" || (mode == "loose") == loose;
        let case_ok = mode_ok && case.starts_with(c);
        let ok = case_ok && k == kind && (l == "*" || l == linux.0) && (p == "*" || p == pfil.0);
        ok.then_some(why)
    })
}

/// What one case (or capture) gave.
#[derive(Default)]
struct Tally {
    frames: usize,
    agree: usize,
    allowed: BTreeMap<&'static str, usize>,
    lost: usize,
    differ: Vec<String>,
}

fn run_case(oracle: &Oracle, loose: bool, name: &str, frames: &[Vec<u8>], t: &mut Tally) {
    oracle.flush();
    let ct = Ct::from_config(if loose { "tcp loose" } else { "" }, 1).expect("a ct config");
    let mode = if loose { "loose" } else { "strict" };
    let ctx = Ctx::new("oracle", Dir::In, 0);
    let mut ways = Ways::default();
    for (i, f) in frames.iter().enumerate() {
        let kind = kind(f, &mut ways);
        let seen = oracle.see(f);
        let mut g = f.clone();
        let mut batch = [Packet::new(&mut g)];
        ct.filter_batch(&mut batch, &ctx);
        let ours = pfil_state(batch[0].ct());
        t.frames += 1;
        let Some(theirs) = linux_state(seen) else {
            t.lost += 1;
            t.differ.push(format!(
                "{mode} {name} #{i}: Linux {seen:?} (lost or untagged), ct {ours:?}"
            ));
            continue;
        };
        let flow = Ways::of(f).map(|(w, b)| w.min(b));
        let diverged = flow.as_ref().is_some_and(|w| ways.diverged.contains(w));
        if theirs == ours {
            t.agree += 1;
        } else if let Some(why) = allowed(loose, name, i, kind, theirs, ours) {
            *t.allowed.entry(why).or_default() += 1;
            if let Some(w) = flow {
                ways.diverged.insert(w);
            }
        } else if diverged && name.starts_with("capture:") {
            // The two trackers' states of this flow parted by design at
            // an earlier packet: what they say after is not comparable.
            *t.allowed.entry(KNOCK_ON).or_default() += 1;
        } else {
            t.differ.push(format!(
                "{mode} {name} #{i} ({kind}): Linux {theirs:?}, ct {ours:?}"
            ));
        }
    }
}

/// The capture files to replay: the vendored ones and `$PFIL_CT_CAPTURES`.
fn captures() -> Vec<std::path::PathBuf> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ct-oracle");
    let mut dirs = vec![data.join("scenarios"), data];
    if let Some(d) = std::env::var_os("PFIL_CT_CAPTURES") {
        dirs.push(d.into());
    }
    let mut files = Vec::new();
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut v: Vec<_> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("pcap" | "pcapng")
                )
            })
            .collect();
        v.sort();
        files.extend(v);
    }
    files
}

/// A capture's frames the oracle can use, rewritten; `None` if it is not
/// an Ethernet capture libpcap reads.
fn capture_frames(path: &Path) -> Option<Vec<Vec<u8>>> {
    let mut cap = pcap::Capture::from_file(path).ok()?;
    if cap.get_datalink() != pcap::Linktype::ETHERNET {
        return None;
    }
    let mut rw = frames::Rewriter::default();
    let mut out = Vec::new();
    while out.len() < FRAMES_PER_CAPTURE {
        match cap.next_packet() {
            Ok(p) => {
                if let Some(f) = rw.rewrite(p.data, p.header.len as usize) {
                    out.push(f);
                }
            }
            Err(_) => break,
        }
    }
    Some(out)
}

#[test]
fn linux_conntrack_and_the_ct_hook_agree_on_every_packet() {
    if !pfil_testnet::require_root("linux_conntrack_and_the_ct_hook_agree_on_every_packet") {
        return;
    }
    for tool in ["nft", "conntrack"] {
        if std::process::Command::new(tool)
            .arg("--version")
            .output()
            .is_err()
        {
            assert!(
                !pfil_testnet::under_ci(),
                "{tool} is missing under CI: scripts/setup.sh installs it"
            );
            eprintln!("SKIP: no {tool} (scripts/setup.sh installs it)");
            return;
        }
    }
    let oracle = Oracle::new();
    let files = captures();
    let mut loaded = Vec::new();
    let mut skipped = 0;
    for path in &files {
        let name = format!(
            "capture:{}",
            path.file_name().unwrap_or_default().to_string_lossy()
        );
        match capture_frames(path) {
            Some(f) if !f.is_empty() => {
                if let Some(d) = std::env::var_os("PFIL_CT_ORACLE_DUMP") {
                    // The frames as sent (frame i stamped i + 1 s), to read
                    // a disagreement with `tcpdump -r`.
                    let out = Path::new(&d).join(path.file_name().unwrap_or_default());
                    pfil_testnet::write_pcap(&out.with_extension("pcap"), 1, &f);
                }
                loaded.push((name, f));
            }
            _ => skipped += 1,
        }
    }
    let (mut generated, mut captured) = (Tally::default(), Tally::default());
    let mut used = 0;
    let start = Instant::now();
    let budget = capture_budget();
    // Each TCP mode against Linux's: strict (pf's) with
    // nf_conntrack_tcp_loose=0, loose (flags only) with =1.
    for loose in [false, true] {
        oracle.set_tcp_loose(loose);
        for (name, frames) in cases::all() {
            run_case(&oracle, loose, &name, &frames, &mut generated);
        }
        for (name, f) in &loaded {
            if start.elapsed() > budget {
                break;
            }
            used += 1;
            run_case(&oracle, loose, name, f, &mut captured);
        }
    }
    let (e, r) = oracle.names();
    eprintln!(
        "oracle ({e}, {r}): generated: {} frames, {} agree, allowed {:?}; captures: {used} replays (both TCP modes) of {} \
         files ({skipped} unusable) in {:.1}s: {} frames, {} agree, allowed {:?}, {} lost",
        generated.frames,
        generated.agree,
        generated.allowed,
        files.len(),
        start.elapsed().as_secs_f64(),
        captured.frames,
        captured.agree,
        captured.allowed,
        captured.lost,
    );
    let mut differ = generated.differ;
    differ.extend(captured.differ);
    assert!(
        differ.is_empty(),
        "{} packets where Linux's conntrack and the ct hook disagree (not by design):\n{}",
        differ.len(),
        differ
            .iter()
            .take(200)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        generated.frames > 100
            && generated.agree == generated.frames - generated.allowed.values().sum::<usize>()
    );
}
