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
    assert!(i("hook count:1: packets 100000") < i("hook drop-udp-53:2: packets 100000"));
    assert!(stdout
        .contains("hook drop-udp-53:2: packets 100000 bytes 6400000 passed 75000 dropped 25000"));
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
    let t = totals(&out.stdout);
    let g = num(&t, "generated");
    assert!(
        (100_000..=200_000).contains(&g),
        "paced at 100 kpps for 1.5 s: {g}"
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
