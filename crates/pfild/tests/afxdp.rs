//! pfild processes on veth pairs in namespaces the test creates:
//! `pfild gen` (ns g) -> `pfild forward` (ns f) -> `pfild sink` (ns s),
//! with exact end-to-end accounting; errors; and `kill -9` leaving no XDP
//! program behind. Root only (a failure under `CI` when not root).

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

/// gen -> forward -> sink as three processes; returns their outputs.
fn pipeline(
    t: &Topo,
    count: u64,
    fwd_hooks: &[&str],
    dst_ports: &str,
) -> [std::process::Output; 3] {
    let sink = spawn(&[
        "sink",
        "s0",
        "--netns",
        &t.s.name,
        "--hook",
        "count",
        "--ring",
        "4096",
        "--seconds",
        "60",
        "--quiet",
    ]);
    assert!(wait_xdp(&t.s, "s0", true), "sink attached XDP on s0");
    let mut fargs = vec![
        "forward",
        "f0",
        "f1",
        "--netns",
        &t.f.name,
        "--ring",
        "4096",
        "--seconds",
        "60",
        "--quiet",
    ];
    for h in fwd_hooks {
        fargs.extend_from_slice(&["--hook", h]);
    }
    let fwd = spawn(&fargs);
    assert!(
        wait_xdp(&t.f, "f0", true) && wait_xdp(&t.f, "f1", true),
        "forwarder attached XDP"
    );
    let n = count.to_string();
    let gen = pfild(&[
        "gen",
        "g0",
        "--netns",
        &t.g.name,
        "--count",
        &n,
        "--rate",
        "100000",
        "--size",
        "96",
        "--dst-port",
        dst_ports,
        "--quiet",
    ]);
    assert!(gen.status.success(), "gen: {}", text(&gen));
    // Let the last frames through, then stop both with a signal.
    std::thread::sleep(Duration::from_millis(500));
    fwd.signal(libc::SIGTERM);
    let fwd = fwd.wait_output(Duration::from_secs(20));
    sink.signal(libc::SIGINT);
    let sink = sink.wait_output(Duration::from_secs(20));
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
    let t = Topo::new("e");
    let count = 200_000u64;
    let [gen, fwd, sink] = pipeline(
        &t,
        count,
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
