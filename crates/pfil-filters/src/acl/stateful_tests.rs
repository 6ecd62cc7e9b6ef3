//! The acl with connection state: `ct state` after a `ct` hook, and
//! pf's `keep state`.

use std::sync::Arc;

use etherparse::PacketBuilder;
use pfil::{Dir, Filter, Packet, PacketKind, Verdict};
use pfil_acl::text;

use super::tests::udp4;
use super::version::Quick;
use super::Acl;

/// The verdicts of `frames` run through `head` in `dir` as one batch.
pub(super) fn run_on(
    head: &pfil::Head,
    w: &mut pfil::Worker,
    dir: Dir,
    frames: Vec<Vec<u8>>,
) -> Vec<Verdict> {
    let mut frames = frames;
    let mut batch: Vec<Packet<'_>> = frames.iter_mut().map(|f| Packet::new(f)).collect();
    match dir {
        Dir::In => head.run_in(w, &mut batch),
        Dir::Out => head.run_out(w, &mut batch),
    }
    batch.iter().map(|p| p.verdict()).collect()
}

/// A head `h` with the acl `config` (one hook, `acl:fw`) linked both
/// ways: what pf's `keep state` tests run on.
fn keep_state_head(config: &str) -> (pfil::Registry, pfil::Head, Acl) {
    use pfil::{Dirs, Placement, Registry};
    let reg = Registry::new();
    let head = reg
        .register_head("h", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    let acl = Acl::from_config(config, reg.max_workers()).unwrap();
    reg.add_hook("acl:fw", PacketKind::Ethernet, Dirs::BOTH, acl.clone())
        .unwrap();
    reg.link("h", Dir::In, "acl:fw", Placement::Append).unwrap();
    reg.link("h", Dir::Out, "acl:fw", Placement::Append)
        .unwrap();
    (reg, head, acl)
}

/// An Ethernet IPv4 TCP segment without data, `flags` of `S`, `F`, `A`
/// (`A`: acknowledging `ack`).
pub(super) fn tcp(
    src: [u8; 4],
    sp: u16,
    dst: [u8; 4],
    dp: u16,
    flags: &str,
    seq: u32,
    ack: u32,
) -> Vec<u8> {
    let mut b = PacketBuilder::ethernet2([2; 6], [4; 6])
        .ipv4(src, dst, 64)
        .tcp(sp, dp, seq, 64000);
    for f in flags.chars() {
        b = match f {
            'S' => b.syn(),
            'F' => b.fin(),
            'A' => b.ack(ack),
            _ => unreachable!("flag {f}"),
        };
    }
    let mut v = Vec::new();
    b.write(&mut v, &[]).unwrap();
    v
}

/// TCP under `keep state`, `me` (whose packets the rules pass) opening
/// to `peer` port 80 from port 40000: the handshake passes on its state
/// both ways; a segment of `peer`'s with data far out of its window
/// does not.
pub(super) fn tcp_keeps_its_window(
    run: &mut impl FnMut(Dir, Vec<Vec<u8>>) -> Vec<Verdict>,
    me: [u8; 4],
    peer: [u8; 4],
) {
    use Verdict::{Dropped as D, Pass as P};
    let mut step = |dir: Dir, f: Vec<u8>| run(dir, vec![f]);
    assert_eq!(step(Dir::Out, tcp(me, 40000, peer, 80, "S", 100, 0)), [P]);
    assert_eq!(
        step(Dir::In, tcp(peer, 80, me, 40000, "SA", 7000, 101)),
        [P]
    );
    assert_eq!(
        step(Dir::Out, tcp(me, 40000, peer, 80, "A", 101, 7001)),
        [P]
    );
    let mut far = tcp(peer, 80, me, 40000, "A", 7001 + 90_000_000, 101);
    far.extend_from_slice(&[0; 100]);
    let ip_len = (far.len() - 14) as u16;
    far[16..18].copy_from_slice(&ip_len.to_be_bytes());
    // (the checksum is wrong: nobody checks it)
    assert_eq!(step(Dir::In, far), [D], "data far out of the window");
}

/// A stateful policy on one head: `ct` then an acl that lets in
/// replies and drops the rest; outbound (`out`) packets start flows.
#[test]
fn ct_state_rules_follow_the_tracker() {
    use pfil::{Dirs, Placement, Registry};
    let reg = Registry::new();
    let head = reg
        .register_head("h", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    let ct: Arc<dyn Filter> = Arc::new(crate::Ct::from_config("", reg.max_workers()).unwrap());
    reg.add_hook_shared("ct:fw", PacketKind::Ethernet, Dirs::BOTH, ct)
        .unwrap();
    let acl_in = Acl::from_config(
        "pass count ct state established,related; drop count all ct state invalid; default drop",
        reg.max_workers(),
    )
    .unwrap();
    reg.add_hook("acl:in", PacketKind::Ethernet, Dirs::IN, acl_in.clone())
        .unwrap();
    reg.add_hook(
        "acl:out",
        PacketKind::Ethernet,
        Dirs::OUT,
        Acl::from_config("pass ct state new,established,related ct dir original; pass ct dir reply; default drop", reg.max_workers()).unwrap(),
    )
    .unwrap();
    reg.link("h", Dir::In, "ct:fw", Placement::Append).unwrap();
    reg.link("h", Dir::In, "acl:in", Placement::Append).unwrap();
    // Out: the ct hook runs first, so it goes last from the wire.
    reg.link("h", Dir::Out, "ct:fw", Placement::Append).unwrap();
    reg.link("h", Dir::Out, "acl:out", Placement::Prepend)
        .unwrap();
    let mut w = reg.worker().unwrap();
    let me = [198, 18, 0, 1];
    let peer = [198, 18, 0, 9];
    let mut run = |dir: Dir, frames: Vec<Vec<u8>>| run_on(&head, &mut w, dir, frames);
    // Unsolicited inbound: dropped (by the default, as new).
    assert_eq!(
        run(Dir::In, vec![udp4(peer, me, 53, 5000)]),
        [Verdict::Dropped]
    );
    // Outbound query, then its reply (and another, unsolicited).
    assert_eq!(
        run(Dir::Out, vec![udp4(me, peer, 5001, 53)]),
        [Verdict::Pass]
    );
    assert_eq!(
        run(
            Dir::In,
            vec![udp4(peer, me, 53, 5001), udp4(peer, me, 53, 5002)]
        ),
        [Verdict::Pass, Verdict::Dropped]
    );
    let hits = acl_in.hits();
    assert_eq!((hits[0].hits, hits[2].hits), (1, 2), "{hits:?}");
    // IPv6 (the per-packet key path), the same way.
    let udp6 = |src: [u8; 16], dst: [u8; 16], sp: u16, dp: u16| {
        let mut v = Vec::new();
        PacketBuilder::ethernet2([2; 6], [4; 6])
            .ipv6(src, dst, 64)
            .udp(sp, dp)
            .write(&mut v, &[0; 8])
            .unwrap();
        v
    };
    let (me6, peer6) = (
        [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9],
    );
    assert_eq!(
        run(Dir::In, vec![udp6(peer6, me6, 53, 7000)]),
        [Verdict::Dropped]
    );
    assert_eq!(
        run(Dir::Out, vec![udp6(me6, peer6, 7001, 53)]),
        [Verdict::Pass]
    );
    assert_eq!(
        run(
            Dir::In,
            vec![udp6(peer6, me6, 53, 7001), udp6(peer6, me6, 53, 7002)]
        ),
        [Verdict::Pass, Verdict::Dropped]
    );
}

/// pf's `keep state`: one acl hook linked both ways on a head; the
/// host's own flows create states, their replies pass on them (TCP
/// in its window only), nothing unsolicited passes; the states
/// survive a replace and a derived filter.
#[test]
fn keep_state_lets_replies_back_and_nothing_else() {
    let (reg, head, acl) = keep_state_head("pass count from 198.18.0.1 keep state; default drop");
    let mut w = reg.worker().unwrap();
    let me = [198, 18, 0, 1];
    let peer = [198, 18, 0, 9];
    let mut run = |dir: Dir, frames: Vec<Vec<u8>>| run_on(&head, &mut w, dir, frames);
    use Verdict::{Dropped as D, Pass as P};
    assert_eq!(run(Dir::In, vec![udp4(peer, me, 53, 5000)]), [D]);
    assert_eq!(run(Dir::Out, vec![udp4(me, peer, 5000, 53)]), [P]);
    assert_eq!(
        run(
            Dir::In,
            vec![udp4(peer, me, 53, 5000), udp4(peer, me, 53, 5001)]
        ),
        [P, D]
    );
    tcp_keeps_its_window(&mut run, me, peer);
    assert_eq!(
        run(
            Dir::In,
            vec![tcp(peer, 80, me, 40000, "A", 7001 + 90_000_000, 101)]
        ),
        [P],
        "no data: only the ack is checked"
    );
    // An unsolicited SYN in: the rules, default drop.
    assert_eq!(run(Dir::In, vec![tcp(peer, 1234, me, 22, "S", 1, 0)]), [D]);
    // Rules replaced (the rule no longer counted): the states stay.
    acl.replace(text::parse("pass from 198.18.0.1 keep state\ndefault drop").unwrap());
    assert_eq!(run(Dir::In, vec![udp4(peer, me, 53, 5000)]), [P]);
    let derived = acl.with_rules(acl.rules());
    // Two flows (UDP, TCP): the dropped SYN created none.
    assert_eq!(derived.states.get().unwrap().len(), 2);
    let s = acl.stats();
    assert!(s.iter().any(|x| x.name == "states"), "{s:?}");
}

/// `set mark` marks what a rule matches (pass or drop), a later acl's
/// `mark V[/M]` matches it, a ruleset with marks keeps first-match order
/// (a rule whose mark does not match is skipped), and `ct state` works
/// with marks; the text round-trips.
#[test]
fn marks_are_set_by_one_acl_and_matched_by_the_next() {
    let ctx = pfil::Ctx::new("h", Dir::In, 0);
    let tagger = Acl::from_config(
        "pass proto udp from 198.18.0.0/24 to any port 22 set mark 0x10; drop from 198.18.9.9 set mark 0x2f; pass all",
        1,
    )
    .unwrap();
    let gate = Acl::from_config(
        "drop from 198.18.0.7 mark 0x10; pass ct state untracked mark 0x10/0xf0; pass count mark 0x20/0xf0; default drop",
        1,
    )
    .unwrap();
    let run = |f: Vec<u8>| {
        let mut f = f;
        let mut p = [Packet::new(&mut f)];
        tagger.filter_batch(&mut p, &ctx);
        let (v1, m1) = (p[0].verdict(), p[0].mark());
        p[0].set_verdict(Verdict::Pass);
        gate.filter_batch(&mut p, &ctx);
        (v1, m1, p[0].verdict())
    };
    let ssh = udp4([198, 18, 0, 1], [198, 18, 1, 1], 5000, 22);
    assert_eq!(run(ssh), (Verdict::Pass, 0x10, Verdict::Pass));
    // Marked, but the gate's first rule matching it drops.
    let ssh7 = udp4([198, 18, 0, 7], [198, 18, 1, 1], 5000, 22);
    assert_eq!(run(ssh7), (Verdict::Pass, 0x10, Verdict::Dropped));
    // Not marked: the gate's default.
    let dns = udp4([198, 18, 0, 1], [198, 18, 1, 1], 5000, 53);
    assert_eq!(run(dns), (Verdict::Pass, 0, Verdict::Dropped));
    // A drop rule marks too; 0x2f & 0xf0 == 0x20.
    let bad = udp4([198, 18, 9, 9], [198, 18, 1, 1], 5000, 53);
    assert_eq!(run(bad), (Verdict::Dropped, 0x2f, Verdict::Pass));
    // One packet by `filter` too.
    let mut f = udp4([198, 18, 0, 1], [198, 18, 1, 1], 5000, 22);
    let mut p = Packet::new(&mut f);
    assert_eq!(tagger.filter(&mut p, &ctx), Verdict::Pass);
    assert_eq!(p.mark(), 0x10);
    assert_eq!(gate.filter(&mut p, &ctx), Verdict::Pass);
    // Text round trip.
    let rs = text::parse("pass mark 16/0xf0 keep state set mark 7\ndrop mark 0x20").unwrap();
    assert_eq!(rs.rules[0].mark, Some((0x10, 0xf0)));
    assert_eq!(rs.rules[0].set_mark, Some(7));
    assert_eq!(rs.rules[1].mark, Some((0x20, u32::MAX)));
    assert_eq!(text::parse(&text::to_text(&rs)).unwrap(), rs);
}

/// Bad marks are errors naming the column and what was expected.
#[test]
fn mark_errors_name_the_column() {
    for (rules, col, says) in [
        ("pass mark zz", 11, "a mark"),
        ("pass mark 0x1ff/0xf0", 11, "no bits outside its mask"),
        ("pass mark 0x100000000", 11, "a mark"),
        ("pass set mark", 14, "a mark to set"),
        ("pass set color 1", 10, "`mark` after `set`"),
        ("pass all set mark -1", 19, "a mark to set"),
        ("pass set mark 1 mark 2", 17, "end of line"),
    ] {
        let e = text::parse(rules).unwrap_err();
        assert_eq!(e.column, col, "{rules}: {e}");
        assert!(e.to_string().contains(says), "{rules}: {e}");
    }
}

/// A part whose first rule matches every packet (`pass ct state
/// established,related` leading) is answered without classifying, with
/// the rule's counter; a leading rule with any other field is
/// classified: packets it does not match fall through.
#[test]
fn a_leading_catch_all_rule_answers_its_state_without_classifying() {
    use pfil::{CtState, Ctx};
    let ctx = Ctx::new("h", Dir::In, 0);
    let (a, b) = ([198, 18, 0, 1], [198, 18, 0, 9]);
    let run = |acl: &Acl, states: &[CtState]| -> Vec<Verdict> {
        let mut frames: Vec<Vec<u8>> = states.iter().map(|_| udp4(a, b, 5000, 53)).collect();
        let mut batch: Vec<Packet<'_>> = frames.iter_mut().map(|f| Packet::new(f)).collect();
        for (p, s) in batch.iter_mut().zip(states) {
            p.set_ct(*s, false);
        }
        acl.filter_batch(&mut batch, &ctx);
        batch.iter().map(|p| p.verdict()).collect()
    };
    use CtState::{Established as Est, New};
    use Verdict::{Dropped, Pass};
    let all = Acl::from_config(
        "pass count ct state established,related; pass count proto udp ct state new; default drop",
        1,
    )
    .unwrap();
    let v = all.current.load();
    assert!(v.quick.contains(&Quick::Rule(0)), "{:?}", v.quick);
    assert!(!v.quick.contains(&Quick::Rule(1)), "a proto is not any");
    assert_eq!(run(&all, &[Est, New, Est, Est]), [Pass, Pass, Pass, Pass]);
    let hits = all.hits();
    assert_eq!((hits[0].hits, hits[1].hits), (3, 1), "{hits:?}");
    let tcp_only = Acl::from_config(
        "pass count proto tcp ct state established,related; default drop",
        1,
    )
    .unwrap();
    assert!(tcp_only
        .current
        .load()
        .quick
        .iter()
        .all(|q| *q == Quick::Classify));
    assert_eq!(run(&tcp_only, &[Est, New]), [Dropped, Dropped]);
    // Not counted: answered by the verdict alone, per state.
    let plain = Acl::from_config(
        "drop ct state invalid; pass ct state established,related; pass proto udp ct state new; default drop",
        1,
    )
    .unwrap();
    let q = plain.current.load().quick;
    assert!(
        q.contains(&Quick::Pass) && q.contains(&Quick::Drop),
        "{q:?}"
    );
    assert_eq!(
        run(&plain, &[Est, CtState::Invalid, New, Est]),
        [Pass, Dropped, Pass, Pass]
    );
}

/// pf's `set limit states N`: the table is made for N flows; at the
/// limit a packet that would make a state is dropped (counted, as pf
/// drops it), flows already kept pass; a later ruleset may lower the
/// limit but not raise it past the table (the error says why), and the
/// line round-trips.
#[test]
fn set_limit_states_bounds_the_table_and_drops_at_the_limit() {
    use pfil::{Dirs, Placement, Registry};
    let reg = Registry::new();
    let head = reg
        .register_head("h", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    let cfg = "set limit states 2; pass from 198.18.0.1 keep state; default drop";
    let acl = Acl::from_config(cfg, reg.max_workers()).unwrap();
    reg.add_hook("acl:fw", PacketKind::Ethernet, Dirs::BOTH, acl.clone())
        .unwrap();
    reg.link("h", Dir::In, "acl:fw", Placement::Append).unwrap();
    reg.link("h", Dir::Out, "acl:fw", Placement::Append)
        .unwrap();
    let mut w = reg.worker().unwrap();
    let (me, peer) = ([198, 18, 0, 1], [198, 18, 0, 9]);
    let mut run = |dir: Dir, frames: Vec<Vec<u8>>| run_on(&head, &mut w, dir, frames);
    use Verdict::{Dropped as D, Pass as P};
    let out: Vec<Vec<u8>> = (0..3).map(|i| udp4(me, peer, 5000 + i, 53)).collect();
    assert_eq!(
        run(Dir::Out, out.clone()),
        [P, P, D],
        "the third flow is over the limit"
    );
    assert_eq!(
        run(
            Dir::In,
            (0..3).map(|i| udp4(peer, me, 53, 5000 + i)).collect()
        ),
        [P, P, D],
        "replies of the kept flows only"
    );
    assert_eq!(run(Dir::Out, out), [P, P, D]);
    let t = acl.states.get().unwrap();
    assert_eq!((t.len(), t.built_for()), (2, 2));
    let (_, _, invalid) = t.counts();
    assert_eq!(
        invalid[crate::ct::Invalid::Limit as usize],
        2,
        "{invalid:?}"
    );
    // Raising the limit past the table is refused, with the reason;
    // lowering it, or leaving it out (the table's size), is taken.
    for (config, ok) in [
        ("set limit states 3; pass from 198.18.0.1 keep state", false),
        ("set limit states 1; pass from 198.18.0.1 keep state", true),
        ("pass from 198.18.0.1 keep state", true),
    ] {
        let r = acl.derive(config).unwrap();
        assert_eq!(r.is_ok(), ok, "{config}");
        if let Err(e) = r {
            assert!(
                e.contains("set limit states: 3 is over the 2 states"),
                "{e}"
            );
        }
        assert_eq!(acl.reconfigure(config).unwrap().is_ok(), ok, "{config}");
    }
    // A new hook's table is made for its limit; the text round-trips.
    let big = Acl::from_config("set limit states 1M; pass all keep state", 1).unwrap();
    assert_eq!(big.states.get().unwrap().built_for(), 1_000_000);
    let rs = big.rules();
    assert_eq!(rs.state_limit, Some(1_000_000));
    assert_eq!(text::parse(&text::to_text(&rs)).unwrap(), rs);
}

/// The keep path's lookups other than plain IPv4 UDP and TCP (IPv6, ICMP
/// echo: classified in full) pass replies on their state as those do,
/// and a TCP flow closed both ways and reopened by a SYN on the same
/// ports is a new flow: its SYN walks the rules again (an inbound one is
/// dropped, an outbound one makes the state anew).
#[test]
fn keep_state_tracks_ipv6_icmp_echo_and_port_reuse() {
    let (reg, head, acl) = keep_state_head(
        "pass from 198.18.0.1 keep state; pass inet6 from 2001:db8::1 keep state; default drop",
    );
    let mut w = reg.worker().unwrap();
    let mut run = |dir: Dir, frames: Vec<Vec<u8>>| run_on(&head, &mut w, dir, frames);
    let build = |b: etherparse::PacketBuilderStep<etherparse::UdpHeader>| {
        let mut v = Vec::new();
        b.write(&mut v, &[0; 8]).unwrap();
        v
    };
    let (me6, peer6) = (
        "2001:db8::1"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
        "2001:db8::9"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    let udp6 = |src, dst, sp, dp| {
        build(
            PacketBuilder::ethernet2([2; 6], [4; 6])
                .ipv6(src, dst, 64)
                .udp(sp, dp),
        )
    };
    let (me, peer) = ([198, 18, 0, 1], [198, 18, 0, 9]);
    let echo = |src: [u8; 4], dst: [u8; 4], reply: bool| {
        let b = PacketBuilder::ethernet2([2; 6], [4; 6]).ipv4(src, dst, 64);
        let b = if reply {
            b.icmpv4_echo_reply(7, 1)
        } else {
            b.icmpv4_echo_request(7, 1)
        };
        let mut v = Vec::new();
        b.write(&mut v, &[0; 8]).unwrap();
        v
    };
    use Verdict::{Dropped as D, Pass as P};
    // IPv6 UDP: the reply passes, a reply from another port does not.
    assert_eq!(run(Dir::In, vec![udp6(peer6, me6, 53, 6000)]), [D]);
    assert_eq!(run(Dir::Out, vec![udp6(me6, peer6, 6000, 53)]), [P]);
    assert_eq!(
        run(
            Dir::In,
            vec![udp6(peer6, me6, 53, 6000), udp6(peer6, me6, 54, 6000)]
        ),
        [P, D]
    );
    // ICMP echo: a reply nothing asked for is dropped; after a request,
    // its reply passes.
    assert_eq!(run(Dir::In, vec![echo(peer, me, true)]), [D]);
    assert_eq!(run(Dir::Out, vec![echo(me, peer, false)]), [P]);
    assert_eq!(run(Dir::In, vec![echo(peer, me, true)]), [P]);
    // TCP opened, closed both ways, then the same ports again.
    let (c, s) = (100u32, 9000u32);
    assert_eq!(
        run(Dir::Out, vec![tcp(me, 40001, peer, 80, "S", c, 0)]),
        [P]
    );
    assert_eq!(
        run(Dir::In, vec![tcp(peer, 80, me, 40001, "SA", s, c + 1)]),
        [P]
    );
    assert_eq!(
        run(Dir::Out, vec![tcp(me, 40001, peer, 80, "FA", c + 1, s + 1)]),
        [P]
    );
    assert_eq!(
        run(Dir::In, vec![tcp(peer, 80, me, 40001, "FA", s + 1, c + 2)]),
        [P]
    );
    assert_eq!(
        run(Dir::Out, vec![tcp(me, 40001, peer, 80, "A", c + 2, s + 2)]),
        [P]
    );
    let states = || acl.with_rules(acl.rules()).states.get().unwrap().len();
    let before = states();
    // The server's SYN on the closed flow's ports: a new flow, through
    // the rules (inbound: dropped), and the closed flow is gone.
    assert_eq!(
        run(Dir::In, vec![tcp(peer, 80, me, 40001, "S", 50_000, 0)]),
        [D]
    );
    assert_eq!(states(), before - 1, "the reopened flow's state is removed");
    // The client's SYN makes it again, and its answer passes.
    assert_eq!(
        run(Dir::Out, vec![tcp(me, 40001, peer, 80, "S", 70_000, 0)]),
        [P]
    );
    assert_eq!(states(), before);
    assert_eq!(
        run(Dir::In, vec![tcp(peer, 80, me, 40001, "SA", 1, 70_001)]),
        [P]
    );
}
