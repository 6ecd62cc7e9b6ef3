//! `keep state` after a `ct` hook: the acl marks its flows in the hook's
//! table (`ct/keep.rs`) instead of tracking them a second time.

use std::sync::Arc;

use pfil::{Dir, Dirs, Filter, PacketKind, Placement, Registry, Verdict};
use pfil_acl::text;

use super::stateful_tests::{run_on, tcp_keeps_its_window};
use super::tests::udp4;
use super::Acl;
use crate::Ct;

use Verdict::{Dropped as D, Pass as P};

/// A head `h` with `ct:fw` and then each acl of `acls` (`acl:0`,
/// `acl:1`...) linked both ways, run in that order both ways.
fn ct_then(acls: &[&str]) -> (Registry, pfil::Head, Arc<Ct>, Vec<Acl>) {
    let reg = Registry::new();
    let head = reg
        .register_head("h", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    let ct = Arc::new(Ct::from_config("max 1000", reg.max_workers()).unwrap());
    reg.add_hook_shared(
        "ct:fw",
        PacketKind::Ethernet,
        Dirs::BOTH,
        ct.clone() as Arc<dyn Filter>,
    )
    .unwrap();
    let mut out = Vec::new();
    for d in [Dir::In, Dir::Out] {
        reg.link("h", d, "ct:fw", Placement::Append).unwrap();
    }
    for (i, cfg) in acls.iter().enumerate() {
        let acl = Acl::from_config(cfg, reg.max_workers()).unwrap();
        let name = format!("acl:{i}");
        reg.add_hook(&name, PacketKind::Ethernet, Dirs::BOTH, acl.clone())
            .unwrap();
        // Out chains run last link first: prepended, each acl runs after
        // the hook (and after the acls before it), as on the way in.
        reg.link("h", Dir::In, &name, Placement::Append).unwrap();
        reg.link("h", Dir::Out, &name, Placement::Prepend).unwrap();
        out.push(acl);
    }
    (reg, head, ct, out)
}

/// A stat of `f` by name (its first sample).
fn stat(f: &dyn Filter, name: &str) -> u64 {
    f.stats()
        .iter()
        .find(|s| s.name == name)
        .and_then(|s| s.value())
        .unwrap_or_else(|| panic!("no stat {name}"))
}

/// `ct`, then `pass from me keep state; default drop`: the acl's states
/// are the `ct` hook's flows with its mark; its own table stays empty.
/// Replies of marked flows pass, a flow the hook tracks but no rule
/// passed does not (its packets walk the rules), TCP's window is the
/// hook's (an out-of-window segment of a marked flow is dropped), and a
/// version made by `with_rules` or `replace` keeps the marks.
#[test]
fn keep_state_after_a_ct_hook_keeps_its_states_in_the_hooks_table() {
    let (reg, head, ct, acls) = ct_then(&["pass from 198.18.0.1 keep state; default drop"]);
    let acl = &acls[0];
    let mut w = reg.worker().unwrap();
    let (me, peer) = ([198, 18, 0, 1], [198, 18, 0, 9]);
    let mut run = |dir: Dir, frames: Vec<Vec<u8>>| run_on(&head, &mut w, dir, frames);
    // Unsolicited: tracked by the hook (new), dropped by the rules, and
    // again (its flow has no mark).
    assert_eq!(run(Dir::In, vec![udp4(peer, me, 53, 5000)]), [D]);
    assert_eq!(run(Dir::In, vec![udp4(peer, me, 53, 5000)]), [D]);
    // Out from me: the rule passes it and marks the flow; its replies
    // pass, another port's do not.
    assert_eq!(run(Dir::Out, vec![udp4(me, peer, 5001, 53)]), [P]);
    assert_eq!(
        run(
            Dir::In,
            vec![udp4(peer, me, 53, 5001), udp4(peer, me, 53, 5002)]
        ),
        [P, D]
    );
    // The first flow, answered from me: now marked, both ways pass.
    assert_eq!(run(Dir::Out, vec![udp4(me, peer, 5000, 53)]), [P]);
    assert_eq!(run(Dir::In, vec![udp4(peer, me, 53, 5000)]), [P]);
    // TCP: SYN out marks; the SYN-ACK passes on the mark; a segment far
    // out of the window is the hook's `invalid`: dropped.
    tcp_keeps_its_window(&mut run, me, peer);
    // No second table: the acl's own has nothing; the hook's has the
    // three marked flows and the unsolicited one from port 5002.
    assert_eq!(acl.states().map(|s| s.len()), Some(0));
    assert_eq!(stat(acl, "states_in_ct"), 3);
    assert_eq!(ct.states().len(), 4);
    assert_eq!(
        ct.states().iter().filter(|s| s.kept).count(),
        3,
        "listed as kept"
    );
    // A replaced ruleset and a derived filter keep the marks.
    acl.replace(text::parse("pass from 198.18.0.1 keep state\ndefault drop").unwrap());
    assert_eq!(run(Dir::In, vec![udp4(peer, me, 53, 5001)]), [P]);
    let derived = acl.with_rules(acl.rules());
    reg.replace_filter("acl:0", derived.clone()).unwrap();
    assert_eq!(run(Dir::In, vec![udp4(peer, me, 53, 5001)]), [P]);
    assert_eq!(stat(&derived, "states_in_ct"), 3);
    // A flow killed in the hook's table loses its mark: replies drop.
    let killed = ct.kill_states(&crate::ct::StateExpr::parse("all").unwrap());
    assert_eq!(killed, 4);
    assert_eq!(run(Dir::In, vec![udp4(peer, me, 53, 5001)]), [D]);
}

/// Two acls with `keep state` after one `ct` hook: the first marks in
/// the hook's table, the second keeps its own table (one mark bit cannot
/// tell two rulesets' flows apart): a flow only the first passed gets
/// no reply through the second. Were the second to read the first's
/// mark, the reply on port 6001 would pass.
#[test]
fn a_second_keep_state_acl_after_the_hook_keeps_its_own_table() {
    let (reg, head, _ct, acls) = ct_then(&[
        "pass from 198.18.0.1 keep state; default drop",
        "pass from 198.18.0.1 port 6000 keep state; default drop",
    ]);
    let mut w = reg.worker().unwrap();
    let (me, peer) = ([198, 18, 0, 1], [198, 18, 0, 9]);
    let mut run = |dir: Dir, frames: Vec<Vec<u8>>| run_on(&head, &mut w, dir, frames);
    // Out from 6000: both pass it, each keeps it its own way; its reply
    // passes both.
    assert_eq!(run(Dir::Out, vec![udp4(me, peer, 6000, 53)]), [P]);
    assert_eq!(run(Dir::In, vec![udp4(peer, me, 53, 6000)]), [P]);
    // Out from 6001: the first passes and marks it, the second drops it;
    // its reply passes the first (marked) and not the second.
    assert_eq!(run(Dir::Out, vec![udp4(me, peer, 6001, 53)]), [D]);
    assert_eq!(run(Dir::In, vec![udp4(peer, me, 53, 6001)]), [D]);
    assert_eq!(stat(&acls[0], "states_in_ct"), 2);
    assert_eq!(acls[0].states().map(|s| s.len()), Some(0));
    assert_eq!(stat(&acls[1], "states_in_ct"), 0);
    assert_eq!(acls[1].states().map(|s| s.len()), Some(1));
}

/// An acl with `keep state` *before* the `ct` hook sees no annotation of
/// the hook (the hook has not run yet in the walk, though it ran on this
/// thread in the walks before): it keeps its own table and does not take
/// the hook's table from an acl linked after the hook later. Were it to
/// claim the table at its first batch (the hook's table noted from the
/// walk before), the acl after the hook would keep a table of its own.
#[test]
fn an_acl_before_the_hook_does_not_take_its_table() {
    let (reg, head, _ct, _) = ct_then(&[]);
    let mut w = reg.worker().unwrap();
    let (me, peer) = ([198, 18, 0, 1], [198, 18, 0, 9]);
    let mut run = |port: u16| run_on(&head, &mut w, Dir::In, vec![udp4(peer, me, 53, port)]);
    assert_eq!(run(7000), [P], "the hook alone, noted on this thread");
    let pre = Acl::from_config("pass keep state", reg.max_workers()).unwrap();
    reg.add_hook("acl:pre", PacketKind::Ethernet, Dirs::BOTH, pre.clone())
        .unwrap();
    reg.link("h", Dir::In, "acl:pre", Placement::Prepend)
        .unwrap();
    assert_eq!(run(7001), [P]);
    let post = Acl::from_config("pass keep state", reg.max_workers()).unwrap();
    reg.add_hook("acl:post", PacketKind::Ethernet, Dirs::BOTH, post.clone())
        .unwrap();
    reg.link("h", Dir::In, "acl:post", Placement::Append)
        .unwrap();
    for port in 7002..7005 {
        assert_eq!(run(port), [P]);
    }
    assert_eq!(pre.states().map(|s| s.len()), Some(4));
    assert_eq!(stat(&pre, "states_in_ct"), 0);
    assert_eq!(post.states().map(|s| s.len()), Some(0));
    assert_eq!(stat(&post, "states_in_ct"), 3);
}

/// A flow's first packet and its reply in one batch: the hook annotates
/// both before the acl runs (neither marked yet), the acl marks the flow
/// on the first and finds the mark for the reply. Without the look at
/// the table's mark for a packet annotated without it, the reply is
/// dropped (and with two workers sending the same flows, any reply that
/// overtakes the other worker's mark).
#[test]
fn a_reply_in_the_batch_of_its_flows_first_packet_passes() {
    let (reg, head, _ct, acls) = ct_then(&["pass from 198.18.0.1 keep state; default drop"]);
    let mut w = reg.worker().unwrap();
    let (me, peer) = ([198, 18, 0, 1], [198, 18, 0, 9]);
    let batch = vec![
        udp4(me, peer, 8000, 53),
        udp4(peer, me, 53, 8000),
        udp4(me, peer, 8000, 53),
        udp4(peer, me, 53, 8001),
    ];
    assert_eq!(run_on(&head, &mut w, Dir::In, batch), [P, P, P, D]);
    assert_eq!(stat(&acls[0], "states_in_ct"), 1, "one flow, marked once");
}

/// A batch of which the hook annotated only some packets (the others
/// never met it: a head without it, a hook quarantined mid-batch): the
/// annotated ones are kept in the hook's table, the others in the acl's
/// own, each packet once. Were the own table's pass to take the packets
/// the hook's table took, their flows would be in both (and their rules
/// counted twice).
#[test]
fn a_batch_the_hook_annotated_in_part_keeps_each_packet_once() {
    use pfil::{Ctx, Packet};
    let ct = Ct::from_config("max 1000", 1).unwrap();
    let acl = Acl::from_config("pass count from 198.18.0.1 keep state; default drop", 1).unwrap();
    let ctx = Ctx::new("h", Dir::Out, 0);
    let (me, peer) = ([198, 18, 0, 1], [198, 18, 0, 9]);
    let mut frames: Vec<Vec<u8>> = (0..4).map(|i| udp4(me, peer, 9000 + i, 53)).collect();
    let mut batch: Vec<Packet<'_>> = frames.iter_mut().map(|f| Packet::new(f)).collect();
    ct.filter_batch(&mut batch[..2], &ctx);
    acl.filter_batch(&mut batch, &ctx);
    assert!(batch.iter().all(|p| p.verdict() == P));
    assert_eq!(stat(&acl, "states_in_ct"), 2, "the hook's two");
    assert_eq!(acl.states().map(|s| s.len()), Some(2), "the other two");
    // Each packet met the rule once.
    assert_eq!(acl.hits()[0].hits, 4);
}
