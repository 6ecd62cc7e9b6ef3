//! The control plane against the real pfild on its in-memory port (no
//! root): a configuration file at start, `show` → `apply` round trip,
//! and 1000 link/unlink/set operations from pfilctl while traffic runs
//! with every frame accounted for, per link and in total.

mod common;
use common::*;

use std::time::Duration;

fn temp_dir(tag: &str) -> pfil_testnet::TempDir {
    pfil_testnet::TempDir::new(&format!("pfild-{tag}"))
}

#[test]
fn a_bad_config_file_stops_pfild_naming_the_line() {
    let dir = temp_dir("badcfg");
    let f = dir.join("bad.toml");
    std::fs::write(&f, "[hooks.\"drop-udp:dns\"]\nconfig = \"dns\"\n").unwrap();
    let out = pfild(&[
        "sink",
        "syn0",
        "--synthetic",
        "--config",
        f.to_str().unwrap(),
        "--no-control",
        "--count",
        "10",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("--config {}: line 2, column 10:", f.display()))
            && err.contains("drop-udp:PORT"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    std::fs::write(&f, "[heads.eth9]\nin = []\n").unwrap();
    let out = pfild(&[
        "sink",
        "syn0",
        "--synthetic",
        "--config",
        f.to_str().unwrap(),
        "--no-control",
        "--count",
        "10",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("heads.eth9: no such head in this app") && err.contains("it has: syn0"),
        "{err}"
    );
    let (_, _, e) = pfilctl(&[
        "--socket",
        "/nonexistent/x.sock",
        "apply",
        "/nonexistent/c.toml",
    ]);
    assert!(e.contains("reading /nonexistent/c.toml"), "{e}");
}

/// The issue's load test: pfild starts from a configuration file; pfilctl
/// shows it and applies it back (no change); then 1000 operations (link
/// drop-udp:dns before count:all, set it to the same port, unlink it: the
/// retired counters of each incarnation come back with the unlink) while
/// 100 kpps of UDP to ports 53 and 80 flow; the last is an `apply` of the
/// start file. Every frame received is either counted by count:all or
/// dropped by one incarnation of drop-udp:dns, exactly once, and the
/// drops are exactly pfild's own count of filtered frames.
#[test]
fn a_thousand_control_operations_during_traffic_lose_and_double_count_nothing() {
    let dir = temp_dir("churn");
    let cfg = dir.join("start.toml");
    std::fs::write(&cfg, CHURN_START.replace("HEAD", "syn0")).unwrap();
    let sock = dir.join("ctl").join("x.sock").to_str().unwrap().to_owned();
    let mut p = spawn_pfild(&[
        "sink",
        "syn0",
        "--synthetic",
        "--config",
        cfg.to_str().unwrap(),
        "--rate",
        "100000",
        "--dst-port",
        "53,80",
        "--control",
        &sock,
        "--seconds",
        "240",
        "--quiet",
    ]);
    assert!(
        p.wait_stderr(&format!("control socket {sock}"), Duration::from_secs(20)),
        "{}",
        p.stderr_so_far()
    );
    assert!(
        p.stderr_so_far().contains("configuration ") && p.stderr_so_far().contains("3 change(s)"),
        "{}",
        p.stderr_so_far()
    );

    // show → apply: a no-op, also as a dry run.
    let shown = ctl_ok(&sock, &["show"]);
    assert!(
        shown.contains("[hooks.\"drop-udp:dns\"]\nconfig = \"53\"\ndirs = \"in\""),
        "{shown}"
    );
    assert!(shown.contains("in = [\"count:all\"]"), "{shown}");
    let saved = dir.join("shown.toml");
    std::fs::write(&saved, &shown).unwrap();
    let g0 = u(&ctl_json(&sock, &["show"]), "generation");
    for dry in [true, false] {
        let mut args = vec!["apply", saved.to_str().unwrap()];
        if dry {
            args.push("--dry-run");
        }
        let out = ctl_ok(&sock, &args);
        assert!(out.contains("no changes"), "{out}");
    }
    assert_eq!(u(&ctl_json(&sock, &["show"]), "generation"), g0);

    // 1000 operations, the last an apply.
    let dns = churn(&sock, "syn0", &cfg, 1000);
    assert!(dns.dropped > 1000, "drop-udp:dns saw traffic: {dns:?}");

    p.signal(libc::SIGINT);
    let out = p.wait_output(Duration::from_secs(20));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = totals(&out.stdout);
    let (rx, passed, filtered) = (num(&t, "rx"), num(&t, "passed"), num(&t, "filtered"));
    assert_eq!(num(&t, "generated"), rx, "the synthetic port loses nothing");
    assert_eq!(rx, passed + filtered, "{stdout}");
    assert_eq!(
        filtered, dns.dropped,
        "every drop is one incarnation's: {stdout}"
    );
    let count_all = final_packets(&stdout, "count:all");
    assert_eq!(
        count_all + dns.dropped,
        rx,
        "each frame counted once: {stdout}"
    );
    assert_eq!(count_all, passed);
}

/// `pfilctl top` on a running pfild: per-link rates and costs, the most
/// expensive link first; `sampling` switches the timing off and on.
#[test]
fn top_shows_the_most_expensive_hook_first() {
    let dir = temp_dir("top");
    let sock = dir.join("ctl").join("t.sock").to_str().unwrap().to_owned();
    let p = spawn_controlled(
        &[
            "sink",
            "syn0",
            "--synthetic",
            "--hook",
            "bpf:drop udp port 53 and udp[8:4] = 0x12345678",
            "--hook",
            "null",
            // Fast enough for full batches: a timed batch of one or two
            // packets is mostly the timing itself, and with a few hundred
            // of those per period the cheaper hook could come out first.
            "--rate",
            "2000000",
        ],
        &sock,
    );
    let out = ctl_ok(&sock, &["top", "-d", "0.5", "-n", "4"]);
    let tables: Vec<&str> = out.split("\n\n").filter(|t| !t.trim().is_empty()).collect();
    assert_eq!(tables.len(), 4, "{out}");
    let num = |s: &str| s.parse::<f64>().unwrap_or_else(|_| panic!("{s}: {out}"));
    // Top sorts links by their share of a CPU (ns a packet times packets
    // a second). The first table has no period (no rates, no shares: the
    // links in chain order; no cost either if no batch was timed yet,
    // right after the start); from the second on, the bpf hook (more work
    // a packet, the same packets) comes first in most tables. Not in
    // every one: a timed batch the scheduler preempts counts the time the
    // thread was off the CPU, and on a loaded machine one such batch of
    // the null hook can outweigh a period's others (seen once: 420 ns a
    // packet).
    let mut bpf_first = 0;
    for (i, t) in tables.iter().enumerate() {
        let rows: Vec<Vec<&str>> = t
            .lines()
            .skip(2)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), 2, "{t}");
        assert!(t.contains("1 batch in 64 timed"), "{t}");
        if i == 0 {
            // Nothing timed yet, possibly: `-` for the cost.
            continue;
        }
        assert!(num(rows[0][5]) > 0.0 && num(rows[1][5]) > 0.0, "{t}");
        assert!(
            num(rows[0][3]) > 50_000.0 && num(rows[1][3]) > 50_000.0,
            "{t}"
        );
        assert!(num(rows[0][6]) >= num(rows[1][6]), "sorted by CPU: {t}");
        bpf_first += usize::from(rows[0][2] == "bpf:1");
    }
    // In at least one of the three timed tables: with four test suites
    // running beside it on two cores, preempted timed batches of the null
    // hook put it first in two of three (2026-12-06); each table's order
    // by CPU share is checked above whatever the noise.
    assert!(bpf_first >= 1, "the costlier hook first: {out}");
    // --json: one object per table, the same links, sorted the same way.
    let j: serde_json::Value =
        serde_json::from_str(ctl_ok(&sock, &["--json", "top", "-n", "1"]).trim()).unwrap();
    let (l0, l1) = (&j["links"][0], &j["links"][1]);
    let mut hooks = [l0["hook"].as_str(), l1["hook"].as_str()];
    hooks.sort();
    assert_eq!(hooks, [Some("bpf:1"), Some("null:2")], "{j}");
    let f = |l: &serde_json::Value, k: &str| l[k].as_f64().unwrap();
    assert!(
        f(l0, "ns_per_packet") > 0.0 && f(l1, "ns_per_packet") > 0.0,
        "{j}"
    );
    assert!(f(l0, "cpu_percent") >= f(l1, "cpu_percent"), "{j}");
    // Off: the timed batches stop growing.
    assert!(ctl_ok(&sock, &["sampling", "0"]).contains("sampling: off"));
    let timed = || {
        link_field(
            &ctl_json(&sock, &["stats", "syn0"]),
            "null:2",
            "sampled_batches",
        )
    };
    // The switch takes effect from each worker's next batch
    // (`Registry::set_sampling`): a batch in flight when it came may still
    // be timed (once seen 219 against 218 when read at once).
    std::thread::sleep(Duration::from_millis(50));
    let before = timed();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(timed(), before, "no batch timed with sampling off");
    assert!(ctl_ok(&sock, &["sampling", "1"]).contains("1 batch in 1 timed"));
    std::thread::sleep(Duration::from_millis(300));
    assert!(timed() > before + 100, "every batch timed");
    p.signal(libc::SIGINT);
    let out = p.wait_output(Duration::from_secs(20));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `pfild --metrics`: the OpenMetrics endpoint of a running pfild, and
/// `pfilctl stats --openmetrics` printing the same series.
#[test]
fn metrics_are_served_and_printed() {
    use std::io::{Read, Write};
    let dir = temp_dir("metrics");
    let sock = dir.join("ctl").join("m.sock").to_str().unwrap().to_owned();
    let mut p = spawn_pfild(&[
        "sink",
        "syn0",
        "--synthetic",
        "--hook",
        "count",
        "--rate",
        "100000",
        "--metrics",
        "127.0.0.1:0",
        "--control",
        &sock,
        "--seconds",
        "30",
        "--quiet",
    ]);
    assert!(
        p.wait_stderr("/metrics (OpenMetrics)", Duration::from_secs(20)),
        "{}",
        p.stderr_so_far()
    );
    let err = p.stderr_so_far();
    let addr = err
        .split("metrics on http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap()
        .to_owned();
    assert!(addr.starts_with("127.0.0.1:"), "{err}");
    let scrape = || {
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        let mut r = String::new();
        c.read_to_string(&mut r).unwrap();
        let v = r
            .lines()
            .find_map(|l| {
                l.strip_prefix(r#"pfil_link_packets_total{head="syn0",dir="in",hook="count:1"} "#)
            })
            .unwrap_or_else(|| panic!("{r}"))
            .parse::<u64>()
            .unwrap();
        (r, v)
    };
    let (r, first) = scrape();
    assert!(
        r.starts_with("HTTP/1.1 200 OK") && r.ends_with("# EOF\n"),
        "{r}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(scrape().1 > first, "the counter grows with the traffic");
    let text = ctl_ok(&sock, &["stats", "--openmetrics"]);
    assert!(
        text.contains(r#"pfil_link_packets_total{head="syn0",dir="in",hook="count:1"} "#),
        "{text}"
    );
    assert!(
        text.contains("# TYPE pfil_link_sampled_seconds counter"),
        "{text}"
    );
    p.signal(libc::SIGINT);
    let out = p.wait_output(Duration::from_secs(20));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Hostile filter configs against a running pfild (issue 23, item 2): a
/// 98 KB tcpdump expression used to overflow the control thread's stack
/// inside libpcap and abort pfild; a 700-host one takes libpcap's
/// optimizer about a minute. Both are answered with an error naming the
/// limit, the same for `capture`; traffic keeps flowing through the
/// running chain meanwhile and the daemon keeps answering.
#[test]
fn hostile_filter_expressions_get_errors_and_the_dataplane_runs_on() {
    let dir = temp_dir("hostile");
    let sock = dir.join("ctl").join("h.sock").to_str().unwrap().to_owned();
    let mut p = spawn_pfild(&[
        "sink",
        "syn0",
        "--synthetic",
        "--hook",
        "count",
        "--rate",
        "200000",
        "--control",
        &sock,
        "--seconds",
        "60",
        "--quiet",
    ]);
    assert!(
        p.wait_stderr(&format!("control socket {sock}"), Duration::from_secs(20)),
        "{}",
        p.stderr_so_far()
    );
    let counted = || link_field(&ctl_json(&sock, &["stats", "syn0"]), "count:1", "packets");
    let before = counted();
    let deep = format!("drop {}udp", "udp or ".repeat(14_000));
    let (code, _, err) = pfilctl(&["--socket", &sock, "add", "bpf:deep", "--set", &deep]);
    assert_ne!(code, 0);
    assert!(err.contains("over the limit of 16384 bytes"), "{err}");
    assert!(
        err.len() < 1024,
        "the error does not echo the expression: {err}"
    );
    let slow = (0..700)
        .map(|i| format!("host 198.18.{}.{}", i / 250, i % 250))
        .collect::<Vec<_>>()
        .join(" or ");
    let (code, _, err) = pfilctl(&[
        "--socket",
        &sock,
        "add",
        "bpf:slow",
        "--set",
        &format!("drop {slow}"),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("time limit"), "{err}");
    let pcap = dir.join("c.pcapng");
    let (code, _, err) = pfilctl(&[
        "--socket",
        &sock,
        "capture",
        "syn0",
        "-i",
        "-c",
        "1",
        "-G",
        "1",
        "-w",
        pcap.to_str().unwrap(),
        &slow,
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("time limit"), "{err}");
    // Nothing was added, the daemon answers, the traffic went on.
    let hooks = ctl_ok(&sock, &["hooks"]);
    assert!(!hooks.contains("bpf:"), "{hooks}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(counted() > before, "traffic kept flowing");
    p.signal(libc::SIGINT);
    let out = p.wait_output(Duration::from_secs(20));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
