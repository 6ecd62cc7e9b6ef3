//! `pfilctl trace` against a running pfild on the synthetic port: the
//! records show each link a packet visits and the one that dropped it;
//! the trace leaves nothing behind.

mod common;
use common::*;

use std::time::Duration;

#[test]
fn pfilctl_trace_shows_the_link_that_drops_a_packet() {
    let dir = pfil_testnet::TempDir::new("pfild-trace");
    let sock_path = dir.join("ctl").join("t.sock");
    let sock = sock_path.to_str().unwrap().to_owned();
    let p = spawn_controlled(
        &[
            "sink",
            "syn0",
            "--synthetic",
            "--hook",
            "count",
            "--hook",
            "drop-udp:53",
            "--rate",
            "20000",
            "--dst-port",
            "53,80",
        ],
        &sock,
    );
    let before = ctl_json(&sock, &["heads"]);
    let (code, out, err) = pfilctl(&[
        "--socket",
        &sock,
        "trace",
        "syn0",
        "udp port 53",
        "-c",
        "5",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let recs: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect();
    assert_eq!(recs.len(), 5, "{out}");
    for r in &recs {
        assert_eq!(r["head"], "syn0", "{r}");
        assert_eq!(r["dir"], "in", "{r}");
        assert_eq!(r["kind"], "ethernet", "{r}");
        assert!(r["summary"].as_str().unwrap().ends_with(":53"), "{r}");
        assert!(r["len"].as_u64().unwrap() >= 42, "{r}");
        let hops = r["hops"].as_array().unwrap();
        let names: Vec<&str> = hops.iter().map(|h| h["hook"].as_str().unwrap()).collect();
        assert_eq!(names, ["count:1", "drop-udp:2"], "{r}");
        assert_eq!(hops[0]["verdict"], "pass", "{r}");
        assert_eq!(hops[1]["verdict"], "dropped", "{r}");
        assert_eq!(hops[1]["note"], "called", "{r}");
        assert_eq!(r["verdict"], "dropped", "{r}");
        assert_eq!(r["decided_by"]["hook"], "drop-udp:2", "{r}");
    }
    assert!(
        err.contains("5 packets traced") && err.contains("ended: count"),
        "{err}"
    );
    // The text form: one line per link, then the verdict and who decided.
    let text = ctl_ok(
        &sock,
        &["trace", "syn0", "-i", "udp", "port", "80", "-c", "1"],
    );
    assert!(
        text.contains("udp ") && text.contains(":80 (gen "),
        "{text}"
    );
    assert!(text.contains("  => pass\n"), "{text}");
    assert!(text.contains("ended: count"), "{text}");
    // Matching nothing (the synthetic source port is 9): ends on time,
    // nothing traced.
    let none = ctl_ok(&sock, &["trace", "syn0", "udp port 9999", "-G", "0.3"]);
    assert!(
        none.contains("0 packets traced") && none.contains("ended: time"),
        "{none}"
    );
    // Bad input is named; nothing is attached.
    for (args, want) in [
        (vec!["trace", "syn9"], "syn9"),
        (vec!["trace", "syn0", "udp port"], "expr: "),
        (vec!["trace", "syn0", "-B", "0"], "buffer: "),
    ] {
        let mut all = vec!["--socket", sock.as_str()];
        all.extend(args);
        let (code, _, err) = pfilctl(&all);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains(want), "{err}");
    }
    // Nothing left behind: the same chains (a trace is no link), and a
    // new trace can be attached.
    let after = ctl_json(&sock, &["heads"]);
    assert_eq!(before["heads"], after["heads"]);
    let again = ctl_ok(&sock, &["trace", "syn0", "-c", "1"]);
    assert!(again.contains("1 packets traced"), "{again}");
    // Every packet matching: the time bound ends it even while records
    // keep coming faster than they are printed.
    let t0 = std::time::Instant::now();
    let all = ctl_ok(&sock, &["trace", "syn0", "-G", "0.5"]);
    assert!(
        all.contains("ended: time"),
        "{}",
        &all[all.len().saturating_sub(300)..]
    );
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    p.signal(libc::SIGINT);
    let o = p.wait_output(Duration::from_secs(10));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
