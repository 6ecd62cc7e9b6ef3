//! The real binary on the in-memory port (no root needed), and its errors.

mod common;
use common::*;

#[test]
fn synthetic_sink_counts_exactly() {
    let out = pfild(&[
        "sink",
        "syn0",
        "--synthetic",
        "--hook",
        "count",
        "--count",
        "300000",
        "--quiet",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = totals(&out.stdout);
    assert_eq!(num(&t, "generated"), 300_000);
    assert_eq!(num(&t, "rx"), 300_000);
    assert_eq!(num(&t, "passed"), 300_000);
    assert_eq!(num(&t, "filtered"), 0);
    // Per-hook counters from the registry.
    assert!(
        stdout.contains("hook count:1: packets 300000 bytes 19200000 passed 300000 dropped 0"),
        "{stdout}"
    );
    assert!(stdout.contains("head syn0 in: 300000 frames"), "{stdout}");
}

#[test]
fn synthetic_forward_filters_in_command_line_order() {
    // Two workers, four ports round robin, port 53 dropped on syn0 in.
    let out = pfild(&[
        "forward",
        "syn0",
        "syn1",
        "--synthetic",
        "--queues",
        "2",
        "--hook",
        "count",
        "--hook",
        "drop-udp:53",
        "--hook",
        "null",
        "--dst-port",
        "53,80,443,8080",
        "--count",
        "100000",
        "--quiet",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = totals(&out.stdout);
    assert_eq!(num(&t, "rx"), 100_000);
    assert_eq!(num(&t, "in_dropped"), 25_000);
    assert_eq!(num(&t, "tx"), 75_000);
    assert_eq!(num(&t, "rx"), num(&t, "tx") + num(&t, "filtered"));
    // The chain walks count, drop-udp, null: null sees only what passed.
    let i = |s: &str| stdout.find(s).unwrap_or_else(|| panic!("{s} in {stdout}"));
    assert!(i("hook count:1: packets 100000") < i("hook drop-udp:2: packets 100000"));
    assert!(
        stdout.contains("hook drop-udp:2: packets 100000 bytes 6400000 passed 75000 dropped 25000")
    );
    assert!(stdout.contains("hook null:3: packets 75000"), "{stdout}");
}

#[test]
fn synthetic_stops_after_seconds_with_status_line() {
    let out = pfild(&[
        "gen",
        "syn0",
        "--synthetic",
        "--hook",
        "count",
        "--seconds",
        "1.5",
        "--rate",
        "100000",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("(time limit)"), "{stdout}");
    assert!(
        stderr.contains("[   1s] syn0: out"),
        "status line: {stderr}"
    );
    assert!(
        stderr.contains("; costliest hook syn0 out count:1 (") && stderr.contains(" ns/pkt)"),
        "the status line names the costliest hook: {stderr}"
    );
    let t = totals(&out.stdout);
    let g = num(&t, "generated");
    // Paced: never more than the rate allows over the time it ran (the
    // stop itself may come late on a loaded machine; active_seconds is
    // measured at the 10 ms ticks of the status sampler, so 20 ms of
    // slack), plus the bounded catch-up of 1 ms and a batch; at least
    // some (pacing gives up the frames it falls behind by more than 1 ms,
    // by design).
    let active: f64 = t["active_seconds"].parse().unwrap();
    assert!(
        g >= 10_000 && g as f64 <= 100_000.0 * (active + 0.02) + 100.0 + 64.0,
        "paced at 100 kpps for {active} s: {g}"
    );
    assert_eq!(num(&t, "tx"), g);
    assert!(
        stdout.contains(&format!("hook count:1: packets {g}")),
        "{stdout}"
    );
}

#[test]
fn sigint_stops_cleanly_with_totals() {
    let child = std::process::Command::new(PFILD)
        .args([
            "sink",
            "syn0",
            "--synthetic",
            "--hook",
            "count",
            "--seconds",
            "30",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut p = Proc::new(child);
    // Signal once the workers are running (the ready line), not after a
    // guessed sleep.
    assert!(
        p.wait_stderr("stop with Ctrl-C", std::time::Duration::from_secs(20)),
        "{}",
        p.stderr_so_far()
    );
    p.signal(libc::SIGINT);
    let out = p.wait_output(std::time::Duration::from_secs(10));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("(signal)"), "{stdout}");
    let t = totals(&out.stdout);
    assert!(num(&t, "rx") > 0);
    assert_eq!(num(&t, "rx"), num(&t, "passed"));
}

#[test]
fn errors_name_cause_and_fix_without_panicking() {
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["sink", "syn0", "--synthetic", "--hook", "nope"],
            1,
            "unknown hook `nope`",
        ),
        (
            &["sink", "syn0", "--synthetic", "--hook", "drop-udp:x"],
            1,
            "drop-udp:PORT",
        ),
        (&["sink"], 2, "missing IFACE"),
        (&["bogus", "x"], 2, "unknown mode"),
        (&["sink", "x", "--queues", "zero"], 2, "--queues"),
        (&["sink", "x", "--rate", "5"], 2, "apply to `gen`"),
        (&["sink", "bad name!", "--synthetic"], 1, "invalid name"),
    ];
    for (args, code, msg) in cases {
        let out = pfild(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {stderr}");
        assert!(stderr.contains(msg), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    let out = pfild(&["--help"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--synthetic"));
}

#[test]
fn privileges_or_missing_namespace_are_explained() {
    // Without root: a permission error that names the fix. With root: the
    // namespace that does not exist is named (nothing is touched).
    let out = pfild(&["sink", "pd0none", "--netns", "pfild-test-no-such-ns"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert!(
            stderr.contains("no network namespace `pfild-test-no-such-ns`")
                && stderr.contains("ip netns add"),
            "{stderr}"
        );
    } else {
        assert!(
            stderr.contains("permission denied") && stderr.contains("--synthetic"),
            "{stderr}"
        );
    }
}

#[test]
fn pfilctl_drives_a_running_pfild_every_verb() {
    use std::time::Duration;
    let dir = pfil_testnet::TempDir::new("pfild-ctl");
    let sock_path = dir.join("ctl").join("x.sock");
    let sock = sock_path.to_str().unwrap().to_owned();
    let mut p = spawn_pfild(&[
        "sink",
        "syn0",
        "--synthetic",
        "--hook",
        "count",
        "--control",
        &sock,
        "--seconds",
        "20",
        "--quiet",
    ]);
    assert!(
        p.wait_stderr("stop with Ctrl-C", Duration::from_secs(20)),
        "{}",
        p.stderr_so_far()
    );
    assert!(
        p.wait_stderr(&format!("control socket {sock}"), Duration::from_secs(5)),
        "{}",
        p.stderr_so_far()
    );
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&sock_path).unwrap().mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::metadata(sock_path.parent().unwrap())
            .unwrap()
            .mode()
            & 0o777,
        0o700
    );

    let v = ctl_ok(&sock, &["version"]);
    assert!(v.contains("server: pfild protocol 1"), "{v}");
    let heads = ctl_ok(&sock, &["heads"]);
    assert!(
        heads.contains("syn0") && heads.contains("count:1"),
        "{heads}"
    );
    let out = ctl_ok(&sock, &["add", "count:a"]);
    assert!(out.starts_with("added count:a (generation "), "{out}");
    let out = ctl_ok(
        &sock,
        &["link", "-i", "--before", "count:1", "count:a", "syn0"],
    );
    assert!(out.starts_with("linked count:a to syn0 in"), "{out}");
    let heads = ctl_ok(&sock, &["he"]);
    assert!(heads.contains("count:a -> count:1"), "{heads}");
    let hooks = ctl_json(&sock, &["hooks"]);
    let a = hooks["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "count:a")
        .unwrap();
    assert_eq!(
        a["linked"],
        serde_json::json!([{"head": "syn0", "dir": "in", "fail": "open", "quarantined": false}])
    );
    // Counters grow while traffic runs.
    let s1 = ctl_json(&sock, &["stats", "syn0"]);
    std::thread::sleep(Duration::from_millis(300));
    let s2 = ctl_json(&sock, &["stats"]);
    let (a1, a2) = (
        link_field(&s1, "count:a", "packets"),
        link_field(&s2, "count:a", "packets"),
    );
    assert!(a2 > a1, "count:a did not grow: {a1} -> {a2}");
    assert!(s2["generation"].as_u64().unwrap() >= s1["generation"].as_u64().unwrap());
    let table = ctl_ok(&sock, &["stats"]);
    assert!(
        table.contains("PACKETS") && table.contains("count:a"),
        "{table}"
    );
    // Errors: exit 1 with the server's message; usage: exit 2.
    let (code, _, err) = pfilctl(&["--socket", &sock, "add", "count:a"]);
    assert_eq!(code, 1);
    assert!(err.contains("already registered"), "{err}");
    let (code, _, _) = pfilctl(&["--socket", &sock, "link", "count:a", "syn0"]);
    assert_eq!(code, 2);
    // A second pfild on the same explicit socket refuses to start.
    let busy = pfild(&[
        "sink",
        "syn1",
        "--synthetic",
        "--control",
        &sock,
        "--seconds",
        "5",
    ]);
    assert!(!busy.status.success());
    let err = String::from_utf8_lossy(&busy.stderr);
    assert!(
        err.contains("in use by a running server") && err.contains(&sock),
        "{err}"
    );

    let out = ctl_ok(&sock, &["unlink", "-i", "count:a", "syn0"]);
    assert!(out.starts_with("unlinked count:a from syn0 in"), "{out}");
    let s3 = ctl_json(&sock, &["stats"]);
    assert!(s3["heads"][0]["in"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l["hook"] != "count:a"));
    let out = ctl_ok(&sock, &["del", "count:a"]);
    assert!(out.starts_with("removed count:a"), "{out}");
    let (code, _, err) = pfilctl(&["--socket", &sock, "del", "count:a"]);
    assert_eq!(code, 1);
    assert!(err.contains("no such hook `count:a`"), "{err}");

    p.signal(libc::SIGINT);
    let out = p.wait_output(Duration::from_secs(10));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!sock_path.exists(), "the socket is removed at exit");
}

#[test]
fn default_control_socket_busy_is_a_warning() {
    use std::time::Duration;
    let mut a = spawn_pfild(&["sink", "syn0", "--synthetic", "--seconds", "20", "--quiet"]);
    assert!(
        a.wait_stderr("stop with Ctrl-C", Duration::from_secs(20)),
        "{}",
        a.stderr_so_far()
    );
    assert!(
        a.wait_stderr("pfild: control socket", Duration::from_secs(5))
            || a.wait_stderr("running without control", Duration::from_secs(1)),
        "{}",
        a.stderr_so_far()
    );
    let a_has_it = a.stderr_so_far().contains("pfild: control socket");
    let b = pfild(&["sink", "syn0", "--synthetic", "--seconds", "0.3", "--quiet"]);
    let err = String::from_utf8_lossy(&b.stderr);
    assert!(b.status.success(), "{err}");
    if a_has_it {
        assert!(
            err.contains("warning: running without control") && err.contains("in use"),
            "{err}"
        );
    }
    let off = pfild(&[
        "sink",
        "syn0",
        "--synthetic",
        "--seconds",
        "0.2",
        "--quiet",
        "--no-control",
    ]);
    assert!(String::from_utf8_lossy(&off.stderr).contains("control: off"));
    a.signal(libc::SIGINT);
    let out = a.wait_output(Duration::from_secs(10));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `pfilctl set` swaps a hook's filter while traffic runs: same place in
/// the chain, counters kept, the new config in force at once, and every
/// frame accounted for at the end.
#[test]
fn set_reconfigures_a_filter_in_place_while_traffic_runs() {
    use std::time::{Duration, Instant};
    let dir = pfil_testnet::TempDir::new("pfild-set");
    let sock = dir.join("ctl").join("x.sock").to_str().unwrap().to_owned();
    let mut p = spawn_pfild(&[
        "sink",
        "syn0",
        "--synthetic",
        "--hook",
        "count",
        "--rate",
        "200000",
        "--dst-port",
        "53,80",
        "--control",
        &sock,
        "--seconds",
        "20",
        "--quiet",
    ]);
    assert!(
        p.wait_stderr(&format!("control socket {sock}"), Duration::from_secs(20)),
        "{}",
        p.stderr_so_far()
    );
    ctl_ok(&sock, &["add", "drop-udp:dns", "--set", "53"]);
    ctl_ok(
        &sock,
        &["link", "-i", "--before", "count:1", "drop-udp:dns", "syn0"],
    );
    let stats = |f: &str| link_field(&ctl_json(&sock, &["stats", "syn0"]), "drop-udp:dns", f);
    let deadline = Instant::now() + Duration::from_secs(10);
    while stats("dropped") < 1000 {
        assert!(Instant::now() < deadline, "drop-udp:dns dropped nothing");
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = stats("packets");
    let out = ctl_ok(&sock, &["set", "drop-udp:dns", "--set", "9999"]);
    assert!(out.contains("reconfigured drop-udp:dns"), "{out}");
    // The new filter serves from the next batch on; let the old one's
    // last batches finish, then nothing more is dropped.
    std::thread::sleep(Duration::from_millis(100));
    let dropped = stats("dropped");
    assert!(stats("packets") >= before, "counters kept across the swap");
    let heads = ctl_ok(&sock, &["heads"]);
    assert!(heads.contains("drop-udp:dns -> count:1"), "{heads}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while stats("packets") < before + 10_000 {
        assert!(Instant::now() < deadline, "traffic stopped");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(stats("dropped"), dropped, "port 9999 drops nothing");
    // stats --watch: three tables, rates from the second on.
    let w = ctl_ok(&sock, &["stats", "syn0", "--watch", "0.2", "--count", "3"]);
    let tables: Vec<&str> = w.split("\n\n").filter(|t| !t.trim().is_empty()).collect();
    assert_eq!(tables.len(), 3, "{w}");
    let rate = |t: &str| -> f64 {
        let line = t
            .lines()
            .find(|l| l.contains("count:1"))
            .expect("count:1 row");
        line.split_whitespace()
            .nth(4)
            .unwrap()
            .parse()
            .unwrap_or(-1.0)
    };
    assert!(tables[0].contains("PKT/S"), "{w}");
    assert!(
        rate(tables[1]) > 10_000.0 && rate(tables[2]) > 10_000.0,
        "{w}"
    );
    // A bad config changes nothing.
    let (code, _, err) = pfilctl(&["--socket", &sock, "set", "drop-udp:dns", "--set", "x"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("bad config"), "{err}");
    p.signal(libc::SIGINT);
    let out = p.wait_output(Duration::from_secs(10));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = totals(&out.stdout);
    assert_eq!(num(&t, "rx"), num(&t, "passed") + num(&t, "filtered"));
    assert_eq!(num(&t, "in_dropped"), dropped);
}
