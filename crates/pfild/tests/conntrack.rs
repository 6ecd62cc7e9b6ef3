//! A stateful policy end to end (issue 26): a capture replayed through
//! `--hook ct --hook acl:@RULES` (no root): the host's own connections
//! and their replies pass, unsolicited inbound traffic and packets the
//! tracker calls invalid are dropped, ICMP errors about the host's flows
//! pass as related; the ct hook's statistics are in the report.

mod common;
use common::*;

use etherparse::PacketBuilder;

const ME: [u8; 4] = [198, 18, 0, 1];
const PEER: [u8; 4] = [198, 19, 0, 9];
const EVIL: [u8; 4] = [198, 19, 0, 66];

fn eth() -> etherparse::PacketBuilderStep<etherparse::Ethernet2Header> {
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
}

#[allow(clippy::too_many_arguments)]
fn tcp(
    src: [u8; 4],
    sp: u16,
    dst: [u8; 4],
    dp: u16,
    syn: bool,
    ack: Option<u32>,
    seq: u32,
    data: usize,
) -> Vec<u8> {
    let mut b = eth().ipv4(src, dst, 64).tcp(sp, dp, seq, 64000);
    if syn {
        b = b.syn();
    }
    if let Some(a) = ack {
        b = b.ack(a);
    }
    let mut v = Vec::new();
    b.write(&mut v, &vec![0x61; data]).unwrap();
    v
}

fn udp(src: [u8; 4], sp: u16, dst: [u8; 4], dp: u16) -> Vec<u8> {
    let mut v = Vec::new();
    eth()
        .ipv4(src, dst, 64)
        .udp(sp, dp)
        .write(&mut v, b"query")
        .unwrap();
    v
}

fn ping(src: [u8; 4], dst: [u8; 4], reply: bool) -> Vec<u8> {
    let b = eth().ipv4(src, dst, 64);
    let b = if reply {
        b.icmpv4_echo_reply(7, 1)
    } else {
        b.icmpv4_echo_request(7, 1)
    };
    let mut v = Vec::new();
    b.write(&mut v, b"ping").unwrap();
    v
}

/// Port unreachable from `from` to `to` quoting `orig`'s IP header and
/// 8 bytes.
fn unreachable(from: [u8; 4], to: [u8; 4], orig: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    eth()
        .ipv4(from, to, 64)
        .icmpv4_raw(3, 3, [0; 4])
        .write(&mut v, &orig[14..42])
        .unwrap();
    v
}

/// The host's flows, replies, and unsolicited or forged packets.
fn capture() -> Vec<Vec<u8>> {
    let query = udp(ME, 5353, PEER, 53);
    vec![
        // The host's TCP connection: handshake and data both ways.
        tcp(ME, 40000, PEER, 80, true, None, 100, 0),
        tcp(PEER, 80, ME, 40000, true, Some(101), 9000, 0),
        tcp(ME, 40000, PEER, 80, false, Some(9001), 101, 0),
        tcp(ME, 40000, PEER, 80, false, Some(9001), 101, 200),
        tcp(PEER, 80, ME, 40000, false, Some(301), 9001, 1000),
        // Unsolicited: a SYN to the host's ssh port, an ACK of nothing.
        tcp(EVIL, 1234, ME, 22, true, None, 1, 0),
        tcp(EVIL, 1234, ME, 40001, false, Some(1), 1, 0),
        // Into the host's connection, far outside its window.
        tcp(
            PEER,
            80,
            ME,
            40000,
            false,
            Some(301),
            9001 + 50_000_000,
            100,
        ),
        // DNS: the query, its answer, an answer to no query.
        query.clone(),
        udp(PEER, 53, ME, 5353),
        udp(PEER, 53, ME, 5354),
        // ICMP errors: about the query (related), about nothing.
        unreachable(PEER, ME, &query),
        unreachable(PEER, ME, &udp(ME, 9999, PEER, 53)),
        // Ping out and its reply; a ping in.
        ping(ME, PEER, false),
        ping(PEER, ME, true),
        ping(EVIL, ME, false),
    ]
}

#[test]
fn a_stateful_policy_lets_replies_in_and_nothing_else() {
    let d = pfil_testnet::TempDir::new("pfild-conntrack");
    let frames = capture();
    let file = d.join("stateful.pcap");
    pfil_testnet::write_pcap(&file, 1, &frames);
    let rules = d.join("host.rules");
    std::fs::write(
        &rules,
        "# the host's firewall: replies to its own flows, nothing else\n\
         pass count ct state established,related\n\
         drop count all ct state invalid\n\
         pass count from 198.18.0.1 ct state new\n\
         default drop\n",
    )
    .unwrap();
    let out = pfild(&[
        "sink",
        "cap0",
        "--pcap",
        file.to_str().unwrap(),
        "--hook",
        "ct:max 1000",
        "--hook",
        &format!("acl:@{}", rules.display()),
        "--no-control",
        "--quiet",
    ]);
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{so}\n{se}");
    let t = totals(&out.stdout);
    assert_eq!(num(&t, "rx"), 16, "{so}");
    // 5 TCP, the query, its answer, the related error, ping and reply.
    assert_eq!(num(&t, "filtered"), 6, "{so}");
    for want in [
        "rule 0: 7 hits: pass count from any to any ct state established,related",
        "rule 1: 3 hits: drop count from any to any ct state invalid",
        "rule 2: 3 hits: pass count from 198.18.0.1/32 to any ct state new",
        "default: 3 hits: default drop",
        "entries 6",
        "inserts 6",
        "refused 0",
        "reason=no_state: 2",
        "reason=tcp_window: 1",
    ] {
        assert!(so.contains(want), "{want:?} not in\n{so}");
    }
}

/// The same policy in pf's words, the acl alone: `pass from ME keep
/// state; default drop`. The host's first packets pass on the rule and
/// create states, everything else of their flows (replies, the related
/// error) on the state without the rules; the out-of-window segment
/// fails its state and is dropped; the rest meets the default.
#[test]
fn keep_state_in_the_acl_alone_gives_the_same_policy() {
    let d = pfil_testnet::TempDir::new("pfild-keep-state");
    let file = d.join("stateful.pcap");
    pfil_testnet::write_pcap(&file, 1, &capture());
    let out = pfild(&[
        "sink",
        "cap0",
        "--pcap",
        file.to_str().unwrap(),
        "--hook",
        "acl:pass count from 198.18.0.1 keep state; default drop",
        "--no-control",
        "--quiet",
    ]);
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{so}\n{se}");
    let t = totals(&out.stdout);
    assert_eq!(num(&t, "rx"), 16, "{so}");
    assert_eq!(num(&t, "filtered"), 6, "{so}");
    for want in [
        "rule 0: 3 hits: pass count from 198.18.0.1/32 to any keep state",
        "default: 5 hits: default drop",
        "states 3",
        "state_inserts 3",
    ] {
        assert!(so.contains(want), "{want:?} not in\n{so}");
    }
}

/// `pfilctl states` on a running pfild: the synthetic port's flows as
/// the ct hook tracks them (one way: `new`), as a table and as JSON;
/// a hook that is not `ct` is named as such; `rules` shows the ct
/// hook's counters; `set` keeps the states.
#[test]
fn pfilctl_states_lists_the_flows_and_set_keeps_them() {
    use std::time::Duration;
    let d = pfil_testnet::TempDir::new("pfild-ct-states");
    let sock = d.join("ctl").join("ct.sock").to_str().unwrap().to_owned();
    let p = spawn_controlled(
        &[
            "sink",
            "syn0",
            "--synthetic",
            "--hook",
            "ct:max 1000",
            "--hook",
            "count",
            "--rate",
            "20000",
        ],
        &sock,
    );
    std::thread::sleep(Duration::from_millis(300));
    let table = ctl_ok(&sock, &["states"]);
    assert!(table.starts_with("hook ct:1: "), "{table}");
    assert!(table.contains("PROTO") && table.contains("udp "), "{table}");
    assert!(table.contains(" new "), "one-way traffic is new: {table}");
    let j = ctl_json(&sock, &["states", "ct:1", "--limit", "1"]);
    let h = &j["hooks"][0];
    assert_eq!(h["hook"], "ct:1", "{j}");
    let total = h["total"].as_u64().unwrap();
    assert!(total >= 1, "{j}");
    assert_eq!(h["states"].as_array().unwrap().len(), 1, "{j}");
    let s = &h["states"][0];
    assert_eq!(
        (s["proto"].as_u64(), s["state"].as_str()),
        (Some(17), Some("new")),
        "{j}"
    );
    assert!(
        s["packets"][0].as_u64().unwrap() > 0 && s["packets"][1] == 0,
        "{j}"
    );
    let (code, _, err) = pfilctl(&["--socket", &sock, "states", "count:2"]);
    assert_ne!(code, 0);
    assert!(err.contains("its filter is not `ct`"), "{err}");
    // An acl with keep state before the ct hook lists its own table.
    ctl_ok(&sock, &["add", "acl:ks", "--set", "pass keep state"]);
    ctl_ok(&sock, &["link", "-i", "acl:ks", "syn0"]);
    // One after it keeps its states in the hook's table: its own has
    // none, its `states_in_ct` counts the flows it marked there.
    ctl_ok(&sock, &["add", "acl:kc", "--set", "pass keep state"]);
    ctl_ok(&sock, &["link", "-i", "-a", "acl:kc", "syn0"]);
    std::thread::sleep(Duration::from_millis(200));
    let ks = ctl_json(&sock, &["states", "acl:ks"]);
    assert!(ks["hooks"][0]["total"].as_u64().unwrap() >= 1, "{ks}");
    let kc = ctl_json(&sock, &["states", "acl:kc"]);
    assert_eq!(kc["hooks"][0]["total"].as_u64(), Some(0), "{kc}");
    let kc_rules = ctl_ok(&sock, &["rules", "acl:kc"]);
    let marked = kc_rules
        .lines()
        .find(|l| l.contains("states_in_ct"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|n| n.parse::<u64>().ok());
    assert!(marked.is_some_and(|n| n >= 1), "{kc_rules}");
    let kept = ctl_json(&sock, &["states", "ct:1", "--limit", "1"]);
    assert_eq!(kept["hooks"][0]["states"][0]["kept"], true, "{kept}");
    assert!(ctl_ok(&sock, &["states", "ct:1"]).contains("KEPT"));
    let rules = ctl_ok(&sock, &["rules", "ct:1"]);
    assert!(
        rules.contains("entries") && rules.contains("reason=limit"),
        "{rules}"
    );
    // `set` in place: the flows stay.
    ctl_ok(&sock, &["set", "ct:1", "--set", "max 1000 tcp loose"]);
    let after = ctl_json(&sock, &["states", "ct:1"]);
    assert!(
        after["hooks"][0]["total"].as_u64().unwrap() >= total,
        "{after}"
    );
    p.signal(libc::SIGINT);
    let out = p.wait_output(Duration::from_secs(20));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `pfilctl states [HOOK] EXPR` lists the flows an expression matches
/// (with or without a hook named first), `--kill EXPR` removes them and
/// counts them (`killed`), a bad expression is an error naming the word,
/// and `--kill` wants an expression.
#[test]
fn pfilctl_states_by_expression_and_kill() {
    use std::time::Duration;
    let d = pfil_testnet::TempDir::new("pfild-ct-kill");
    let sock = d.join("ctl").join("ct.sock").to_str().unwrap().to_owned();
    // 100 flows from 198.18.0.1:1024-1123 to 198.18.0.2:9, set up within
    // the first second, then each seen once a second both ways.
    #[rustfmt::skip]
    let p = spawn_controlled(
        &["sink", "syn0", "--synthetic", "--flows", "100", "--rate", "200", "--hook", "ct:max 1000"],
        &sock,
    );
    std::thread::sleep(Duration::from_millis(1500));
    let total = |args: &[&str]| {
        let mut a = vec!["states"];
        a.extend_from_slice(args);
        let j = ctl_json(&sock, &a);
        j["hooks"][0]["total"].as_u64().unwrap()
    };
    assert_eq!(total(&["ct:1", "sport", "1030"]), 1);
    assert_eq!(total(&["sport", "1030", "and", "dst", "198.18.0.2"]), 1);
    assert_eq!(
        total(&["ct:1", "src", "net", "198.18.0.0/24", "and", "dport", "9"]),
        100
    );
    assert_eq!(total(&["ct:1", "proto", "tcp"]), 0);
    assert_eq!(
        total(&["ct:1", "not", "sport", "1030", "and", "proto", "udp"]),
        99
    );
    assert_eq!(total(&["ct:1", "state", "established"]), 100);
    let (code, _, err) = pfilctl(&["--socket", &sock, "states", "ct:1", "port", "http"]);
    assert_ne!(code, 0);
    assert!(err.contains("`http` is not a port number"), "{err}");
    let (code, _, err) = pfilctl(&["--socket", &sock, "states", "--kill"]);
    assert_ne!(code, 0);
    assert!(err.contains("an expression is required"), "{err}");
    let one = ctl_json(&sock, &["states", "--kill", "ct:1", "sport", "1030"]);
    assert_eq!(one["hooks"][0]["killed"], 1, "{one}");
    let text = ctl_ok(&sock, &["states", "--kill", "all"]);
    let n: u64 = text
        .trim()
        .strip_prefix("hook ct:1: ")
        .and_then(|t| t.strip_suffix(" states killed"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!((99..=100).contains(&n), "{text}");
    let rules = ctl_ok(&sock, &["rules", "ct:1"]);
    let killed = rules
        .lines()
        .find(|l| l.contains("killed"))
        .unwrap_or_else(|| panic!("{rules}"));
    assert!(killed.contains(&(n + 1).to_string()), "{rules}");
    p.signal(libc::SIGINT);
    let out = p.wait_output(Duration::from_secs(20));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `--flows N --flow-proto tcp`: every flow's SYN is `new` (passed by
/// the rule for new flows from the clients), its SYN-ACK and every ACK
/// after `established` in strict TCP mode (window checks on each): a
/// stateful ruleset with a default drop passes them all, nothing is
/// invalid, the table holds each flow once. With UDP flows (no
/// `--flow-proto`) the TCP rule passes nothing: the counts tell the two
/// apart. `--flow-proto` without `--flows`, or not udp/tcp, is an error
/// that says so.
#[test]
fn tcp_flows_of_the_synthetic_port_are_tracked_established() {
    let d = pfil_testnet::TempDir::new("pfild-ct-tcpflows");
    let rules = d.join("fw.rules");
    std::fs::write(
        &rules,
        "pass ct state established,related\n\
         pass count proto tcp from 198.18.0.0/18 to 198.18.0.2 ct state new\n\
         default drop\n",
    )
    .unwrap();
    let acl = format!("acl:@{}", rules.display());
    // 300 flows set up (600 frames), then 2 400 frames of ACKs (or
    // datagrams): stdout and totals of a run.
    let run = |proto: &[&str]| {
        let mut args = vec!["sink", "syn0", "--synthetic", "--flows", "300"];
        args.extend_from_slice(proto);
        args.extend_from_slice(&["--count", "3000", "--hook", "ct:max 1000 tcp strict"]);
        args.extend_from_slice(&["--hook", &acl, "--quiet", "--no-control"]);
        pfild_totals(&args)
    };
    let (t, stdout) = run(&["--flow-proto", "tcp"]);
    assert_eq!(num(&t, "passed"), 3000, "{stdout}");
    assert!(stdout.contains("entries 300,"), "{stdout}");
    for reason in ["tcp_flags", "tcp_window", "tcp_rst", "no_state"] {
        assert!(
            stdout.contains(&format!("reason={reason}: 0")),
            "{reason}: {stdout}"
        );
    }
    // The rule for new TCP flows passed exactly the 300 SYNs.
    assert!(
        stdout.contains("rule 1: 300 hits: pass count proto 6"),
        "{stdout}"
    );
    let (t, stdout) = run(&[]);
    // UDP: the clients' first frames match no pass rule (not TCP) and
    // are dropped; the tracker made their states all the same (it runs
    // first), so every later frame is established and passes.
    assert_eq!(num(&t, "passed"), 2700, "{stdout}");
    assert!(stdout.contains("rule 1: 0 hits"), "{stdout}");
    for (args, want) in [
        (
            &[
                "sink",
                "syn0",
                "--synthetic",
                "--flow-proto",
                "tcp",
                "--count",
                "10",
            ][..],
            "--flow-proto applies to --flows only",
        ),
        (
            &[
                "sink",
                "syn0",
                "--synthetic",
                "--flows",
                "3",
                "--flow-proto",
                "sctp",
            ][..],
            "`sctp`: the flows' protocol is udp or tcp",
        ),
    ] {
        let out = pfild(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
