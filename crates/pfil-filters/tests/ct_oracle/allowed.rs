//! The differences by design between Linux's conntrack and the `ct`
//! hook, each with its reason (the `ct` module's docs list the same):
//! by packet kind ([`ALLOWED`]) and by scenario capture ([`PF_RULES`]).

use crate::State;

/// Differences by design: (TCP mode, case prefix, packet kind, Linux's
/// state, the hook's state) and why. The mode is `strict` (the hook's
/// `tcp strict`, Linux's `nf_conntrack_tcp_loose=0`), `loose` (`tcp
/// loose`, `nf_conntrack_tcp_loose=1`) or `*`; a case prefix `capture:`
/// is every capture.
pub const ALLOWED: &[(&str, &str, &str, &str, &str, &str)] = &[
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
        "tcp flags judged apart",
        "*",
        "*",
        "(as tcp_syn_with_psh_or_urg: a flag combination pf's normaliser and \
         Linux's table judge differently)",
    ),
    (
        "*",
        "capture:",
        "tcp after a first answer that was a rst",
        "*",
        "established",
        "a flow whose first answer was a RST: Linux deletes its entry at once \
         (a RST before any reply: nf_ct_kill), so the flow's later segments \
         find none (invalid, or new when picked up); pf's state stays, \
         closing, and passes segments inside its window",
    ),
    (
        "*",
        "capture:",
        "tcp after a first answer that was no syn-ack",
        "invalid",
        "established",
        "(as tcp_synack_unseen_then_originator_ack: the responder's first \
         segment seen was not a SYN-ACK)",
    ),
    (
        "*",
        "capture:",
        "tcp syn with a new isn",
        "*",
        "invalid",
        "(as tcp_syn_retransmission_new_isn and tcp_syn_in_close_wait: a SYN \
         or SYN-ACK with a new ISN on a live flow)",
    ),
    (
        "strict",
        "capture:",
        "tcp rst not at the next sequence",
        "established",
        "invalid",
        "(as tcp_rst_in_window_not_exact)",
    ),
    (
        "strict",
        "capture:",
        "tcp data past the window",
        "established",
        "invalid",
        "(as tcp_data_exceeds_window: a segment ending past the window its \
         receiver advertised)",
    ),
    (
        "strict",
        "capture:",
        "tcp ack far below the data sent",
        "established",
        "invalid",
        "an ACK more than a window below the data the other way has sent: \
         Linux (6.1 on) passes it without updating the flow ('ignored ACK \
         under lower bound', NFCT_TCP_IGNORE), pf's ackskew check calls it a \
         bad state (the hook: invalid)",
    ),
    (
        "*",
        "capture:",
        "icmp echo code mismatch",
        "invalid",
        "*",
        "(as icmp_echo_code_mismatch: an echo reply whose code differs from \
         its request's)",
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
pub const PF_RULES: &[(&str, &[usize], &str)] = &[
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
pub const KNOCK_ON: &str = "a later packet of a flow on which an earlier packet differed by \
     design: each tracker goes on from its own state";

pub fn allowed(
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
        // A row for `tcp` is every TCP segment, whatever its finer kind.
        let kind_ok = k == kind || (k == "tcp" && kind.starts_with("tcp"));
        let ok = case_ok && kind_ok && (l == "*" || l == linux.0) && (p == "*" || p == pfil.0);
        ok.then_some(why)
    })
}
