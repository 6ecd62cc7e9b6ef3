//! pfild processes on veth pairs in namespaces the test creates:
//! `pfild gen` (ns g) -> `pfild forward` (ns f) -> `pfild sink` (ns s),
//! with exact end-to-end accounting; errors; and `kill -9` leaving no XDP
//! program behind. Root only (under CI, `CI=true`, not being root fails).

mod common;
use common::*;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn spawn(args: &[&str]) -> Proc {
    Proc::new(
        Command::new(PFILD)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pfild"),
    )
}

fn wait_xdp(ns: &Netns, ifname: &str, want: bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        if ns.has_xdp(ifname) == want {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn text(o: &std::process::Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// pfild prints this on stderr once every worker is ready (fill rings
/// stocked, sockets in the XSKMAP).
const READY: &str = "stop with Ctrl-C";

/// gen -> forward -> sink as three processes; returns their outputs.
/// Three dataplanes share this machine's cores (two, on CI), so none of
/// them busy-polls (`--spin-us 0`: sleep in poll(2) when a ring is empty):
/// spinning ones would take turns on the cores and each stall the others
/// for whole scheduler slices, which no ring size absorbs. The
/// forwarder and the sink stop by themselves when they have seen every
/// frame they should (`--count`), so nothing here depends on a sleep;
/// a lost frame leaves them running until `--seconds`, and the counts say
/// what went missing.
fn pipeline(
    t: &Topo,
    count: u64,
    expect_at_sink: u64,
    fwd_hooks: &[&str],
    dst_ports: &str,
) -> [std::process::Output; 3] {
    let (n, ns) = (count.to_string(), expect_at_sink.to_string());
    let mut sink = spawn(&[
        "sink",
        "s0",
        "--netns",
        &t.s.name,
        "--hook",
        "count",
        "--ring",
        "4096",
        "--count",
        &ns,
        "--seconds",
        "30",
        "--spin-us",
        "0",
        "--quiet",
    ]);
    assert!(
        sink.wait_stderr(READY, Duration::from_secs(20)),
        "sink ready: {}",
        sink.stderr_so_far()
    );
    let mut fargs = vec![
        "forward",
        "f0",
        "f1",
        "--netns",
        &t.f.name,
        "--ring",
        "4096",
        "--count",
        &n,
        "--seconds",
        "30",
        "--spin-us",
        "0",
        "--quiet",
    ];
    for h in fwd_hooks {
        fargs.extend_from_slice(&["--hook", h]);
    }
    let mut fwd = spawn(&fargs);
    assert!(
        fwd.wait_stderr(READY, Duration::from_secs(20)),
        "forwarder ready: {}",
        fwd.stderr_so_far()
    );
    let gen = pfild(&[
        "gen",
        "g0",
        "--netns",
        &t.g.name,
        "--count",
        &n,
        // 50 kpps: a 4096-frame ring absorbs an 80 ms stall of the
        // (debug-built) forwarder, which a machine busy with builds
        // causes; at 100 kpps it overflowed now and then.
        "--rate",
        "50000",
        "--size",
        "96",
        "--dst-port",
        dst_ports,
        "--quiet",
    ]);
    assert!(gen.status.success(), "gen: {}", text(&gen));
    let fwd = fwd.wait_output(Duration::from_secs(40));
    let sink = sink.wait_output(Duration::from_secs(40));
    assert!(fwd.status.success(), "forward: {}", text(&fwd));
    assert!(sink.status.success(), "sink: {}", text(&sink));
    for (ns, i) in [(&t.f, "f0"), (&t.f, "f1"), (&t.s, "s0")] {
        assert!(wait_xdp(ns, i, false), "XDP left on {i} after a clean stop");
    }
    [gen, fwd, sink]
}

#[test]
fn processes_gen_forward_sink_exact() {
    if !require_root("processes_gen_forward_sink_exact") {
        return;
    }
    let _turn = traffic_turn();
    let t = Topo::new("e");
    let count = 200_000u64;
    let [gen, fwd, sink] = pipeline(
        &t,
        count,
        count - count / 4,
        &["count", "drop-udp:53", "null"],
        "53,80,443,8080",
    );
    let (g, f, s) = (
        totals(&gen.stdout),
        totals(&fwd.stdout),
        totals(&sink.stdout),
    );
    let ctx = format!(
        "gen {}\nfwd {}\nsink {}",
        text(&gen),
        text(&fwd),
        text(&sink)
    );
    assert_eq!(num(&g, "generated"), count, "{ctx}");
    assert_eq!(num(&g, "tx"), count, "{ctx}");
    assert_eq!(
        num(&f, "rx"),
        count,
        "forwarder received every frame sent\n{ctx}"
    );
    assert_eq!(
        num(&f, "in_dropped"),
        count / 4,
        "exactly the port-53 frames\n{ctx}"
    );
    assert_eq!(num(&f, "tx"), num(&f, "rx") - num(&f, "filtered"), "{ctx}");
    assert_eq!(
        num(&s, "rx"),
        num(&f, "tx"),
        "sink received every frame forwarded\n{ctx}"
    );
    // End to end: sent = received + dropped by filters, exactly.
    assert_eq!(
        num(&g, "tx"),
        num(&s, "rx") + num(&f, "filtered") + num(&s, "filtered"),
        "{ctx}"
    );
    for o in [&f, &s, &g] {
        assert_eq!(o.get("accounted").map(String::as_str), Some("yes"), "{ctx}");
        assert_eq!(num(o, "kernel_rx_dropped"), 0, "{ctx}");
    }
    // Registry counters in the totals.
    let fo = String::from_utf8_lossy(&fwd.stdout);
    assert!(
        fo.contains(&format!("hook count:1: packets {count}")),
        "{ctx}"
    );
    assert!(
        fo.contains(&format!("hook null:3: packets {}", count - count / 4)),
        "{ctx}"
    );
    assert!(fo.contains("XDP program detached from f0, f1"), "{ctx}");
}

/// The control plane on a real dataplane: `pfild sink` on veth started
/// from a configuration file, 150 link/set/unlink operations and a final
/// `apply` from pfilctl while `pfild gen` sends 96-byte UDP frames to
/// ports 53 and 80; every frame sent is received, and either counted by
/// count:all or dropped by one incarnation of drop-udp:dns, exactly once.
#[test]
fn control_churn_during_veth_traffic_accounts_every_frame() {
    if !require_root("control_churn_during_veth_traffic_accounts_every_frame") {
        return;
    }
    let _turn = traffic_turn();
    let a = Netns::new("ca");
    let b = Netns::new("cb");
    veth(&a, "c0", &b, "c1", 6);
    let dir = std::env::temp_dir().join(format!("pfild-vchurn-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("start.toml");
    std::fs::write(&cfg, CHURN_START.replace("HEAD", "c0")).unwrap();
    let sock = dir.join("ctl").join("s.sock").to_str().unwrap().to_owned();
    let mut sink = spawn(&[
        "sink",
        "c0",
        "--netns",
        &a.name,
        "--config",
        cfg.to_str().unwrap(),
        "--control",
        &sock,
        "--ring",
        "4096",
        "--seconds",
        "90",
        "--spin-us",
        "0",
        "--quiet",
    ]);
    assert!(
        sink.wait_stderr(READY, Duration::from_secs(20)),
        "sink ready: {}",
        sink.stderr_so_far()
    );
    let count = 160_000u64;
    let gen = spawn(&[
        "gen",
        "c1",
        "--netns",
        &b.name,
        "--count",
        &count.to_string(),
        "--rate",
        "40000",
        "--size",
        "96",
        "--dst-port",
        "53,80",
        "--spin-us",
        "0",
        "--quiet",
    ]);
    let dns = churn(&sock, "c0", &cfg, 150);
    let gen = gen.wait_output(Duration::from_secs(60));
    assert!(gen.status.success(), "gen: {}", text(&gen));
    let sent = num(&totals(&gen.stdout), "tx");
    assert_eq!(sent, count, "gen: {}", text(&gen));
    // Wait (bounded) for the sink to have seen every frame sent.
    let seen = || {
        let s = ctl_json(&sock, &["stats", "c0"]);
        link_field(&s, "count:all", "packets") + dns.dropped
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen() < sent && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    sink.signal(libc::SIGINT);
    let out = sink.wait_output(Duration::from_secs(20));
    let ctx = format!("sink {}\ngen {}\ndns {dns:?}", text(&out), text(&gen));
    assert!(out.status.success(), "{ctx}");
    let t = totals(&out.stdout);
    let (rx, passed, filtered) = (num(&t, "rx"), num(&t, "passed"), num(&t, "filtered"));
    assert_eq!(num(&t, "kernel_rx_dropped"), 0, "{ctx}");
    assert_eq!(rx, sent, "every frame sent was received: {ctx}");
    assert_eq!(rx, passed + filtered, "{ctx}");
    assert_eq!(
        filtered, dns.dropped,
        "every drop is one incarnation's: {ctx}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(final_packets(&stdout, "count:all"), passed, "{ctx}");
    assert!(dns.dropped > 0, "{ctx}");
    assert!(wait_xdp(&a, "c0", false), "XDP left on c0");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn kill_9_of_a_sink_leaves_no_xdp_program() {
    if !require_root("kill_9_of_a_sink_leaves_no_xdp_program") {
        return;
    }
    let a = Netns::new("ka");
    let b = Netns::new("kb");
    veth(&a, "k0", &b, "k1", 2);
    let p = spawn(&[
        "sink",
        "k0",
        "--netns",
        &a.name,
        "--hook",
        "count",
        "--seconds",
        "60",
    ]);
    assert!(
        wait_xdp(&a, "k0", true),
        "{}",
        a.exec(&["ip", "-d", "link", "show", "k0"])
    );
    p.signal(libc::SIGKILL);
    let out = p.wait_output(Duration::from_secs(10));
    assert!(!out.status.success());
    assert!(
        wait_xdp(&a, "k0", false),
        "XDP still attached after kill -9: {}",
        a.exec(&["ip", "-d", "link", "show", "k0"])
    );
}

#[test]
fn bad_interface_and_busy_queue_are_explained() {
    if !require_root("bad_interface_and_busy_queue_are_explained") {
        return;
    }
    let a = Netns::new("xa");
    let b = Netns::new("xb");
    veth(&a, "x0", &b, "x1", 3);
    let out = pfild(&["sink", "nosuch0", "--netns", &a.name]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains("no such interface `nosuch0`") && e.contains("ip link show"),
        "{e}"
    );
    let out = pfild(&["sink", "x0", "--netns", &a.name, "--queues", "4"]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.contains("queue") && e.contains("out of range"), "{e}");
    // A second sink on the same interface: XDP busy, named with the fix.
    let first = spawn(&[
        "sink",
        "x0",
        "--netns",
        &a.name,
        "--seconds",
        "30",
        "--quiet",
    ]);
    assert!(wait_xdp(&a, "x0", true));
    let out = pfild(&["sink", "x0", "--netns", &a.name]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.contains("already has an XDP program"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    first.signal(libc::SIGTERM);
    let out = first.wait_output(Duration::from_secs(10));
    assert!(out.status.success(), "{}", text(&out));
    assert!(wait_xdp(&a, "x0", false));
}
