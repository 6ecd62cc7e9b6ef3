//! pfild as a service: run from its configuration file, tell systemd its
//! state (a datagram socket of our own as `$NOTIFY_SOCKET`), reload on
//! SIGHUP and `pfilctl reload`, refuse a bad file without changing
//! anything, reload while `apply`s run, check a file without starting.

mod common;

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use common::*;

const CONFIG: &str = r#"[pfild]
mode = "sink"
interfaces = ["syn0"]
synthetic = true
quiet = true
rate = 200000
control = "SOCK"

[hooks."drop-udp:dns"]
config = "53"

[hooks."count:edge"]

[heads.syn0]
in = ["drop-udp:dns", "count:edge"]
"#;

/// The next datagram on `rx`, as text (a 20 s limit).
fn next(rx: &UnixDatagram) -> String {
    rx.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = [0u8; 4096];
    let n = rx.recv(&mut buf).expect("a notification within 20 s");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Datagrams until one starting with `what` (STATUS= lines come every
/// second in between); panics after 20 s.
fn until(rx: &UnixDatagram, what: &str) -> String {
    let t0 = Instant::now();
    loop {
        let m = next(rx);
        if m.starts_with(what) {
            return m;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no {what}");
    }
}

fn chain(sock: &str) -> Vec<String> {
    let h = ctl_json(sock, &["heads"]);
    h["heads"][0]["chains"]["in"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["hook"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn runs_from_its_file_notifies_systemd_and_reloads() {
    let dir = TempDir::new("pfild-service");
    let sock = dir.join("ctl").join("pfild.sock");
    let sock = sock.to_str().unwrap();
    let cfg = dir.join("pfild.toml");
    std::fs::write(&cfg, CONFIG.replace("SOCK", sock)).unwrap();
    let notify_path = dir.join("notify");
    let rx = UnixDatagram::bind(&notify_path).unwrap();
    let mut p = Proc::new(
        std::process::Command::new(PFILD)
            .args(["--config", cfg.to_str().unwrap(), "--seconds", "60"])
            .env("NOTIFY_SOCKET", &notify_path)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let ready = until(&rx, "READY=1");
    assert!(ready.contains("STATUS=sink syn0"), "{ready}");
    assert_eq!(chain(sock), ["drop-udp:dns", "count:edge"]);

    // SIGHUP with a changed chain and a changed setting.
    std::fs::write(
        &cfg,
        CONFIG
            .replace("SOCK", sock)
            .replace(
                "in = [\"drop-udp:dns\", \"count:edge\"]",
                "in = [\"count:edge\"]",
            )
            .replace("rate = 200000", "rate = 300000"),
    )
    .unwrap();
    p.signal(libc::SIGHUP);
    let r = until(&rx, "RELOADING=1");
    assert!(r.contains("MONOTONIC_USEC="), "{r}");
    until(&rx, "READY=1");
    assert_eq!(chain(sock), ["count:edge"]);
    assert!(
        p.wait_stderr(
            "needs a restart, left as running: rate (200000 -> 300000)",
            Duration::from_secs(10)
        ),
        "{}",
        p.stderr_so_far()
    );

    // A file cut in the middle: refused with its line, nothing changes,
    // the service stays ready.
    std::fs::write(&cfg, "[heads.syn0]\nin = [\"count:edge\"\n").unwrap();
    let (code, _, err) = pfilctl(&["--socket", sock, "reload"]);
    assert_eq!(code, 1);
    assert!(err.contains("pfild.toml: line 2, column"), "{err}");
    until(&rx, "RELOADING=1");
    until(&rx, "READY=1");
    assert_eq!(chain(sock), ["count:edge"]);
    let show = ctl_json(sock, &["show"]);
    assert!(show["toml"]
        .as_str()
        .unwrap()
        .contains("[hooks.\"drop-udp:dns\"]"));

    // pfilctl reload of a good file: the reply names the plan.
    std::fs::write(
        &cfg,
        CONFIG.replace("SOCK", sock).replace(
            "in = [\"drop-udp:dns\", \"count:edge\"]",
            "in = [\"drop-udp:dns\", { hook = \"count:edge\", fail = \"closed\" }]",
        ),
    )
    .unwrap();
    let r = ctl_json(sock, &["reload"]);
    assert_eq!(r["restart_needed"], serde_json::json!([]), "{r}");
    assert!(
        r["diff"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d == "+ link syn0 in drop-udp:dns first"),
        "{r}"
    );
    assert_eq!(chain(sock), ["drop-udp:dns", "count:edge"]);

    p.signal(libc::SIGTERM);
    until(&rx, "STOPPING=1");
    let out = p.wait_output(Duration::from_secs(30));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_reload_while_applies_run_lands_whole() {
    let dir = TempDir::new("pfild-reload-race");
    let sock = dir.join("ctl").join("pfild.sock");
    let sock = sock.to_str().unwrap().to_owned();
    let cfg = dir.join("pfild.toml");
    std::fs::write(&cfg, CONFIG.replace("SOCK", &sock)).unwrap();
    let mut p = spawn_pfild(&["--config", cfg.to_str().unwrap(), "--seconds", "60"]);
    assert!(
        p.wait_stderr("stop with Ctrl-C", Duration::from_secs(20)),
        "{}",
        p.stderr_so_far()
    );
    // Another writer applies other chains as fast as it can.
    let other = dir.join("other.toml");
    std::fs::write(
        &other,
        "[hooks.\"count:edge\"]\n[hooks.\"count:x\"]\n[heads.syn0]\nin = [\"count:x\", \"count:edge\"]\n",
    )
    .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let applier = {
        let (sock, other, stop) = (sock.clone(), other.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && n < 2000 {
                let (code, _, err) =
                    pfilctl(&["--socket", &sock, "apply", other.to_str().unwrap()]);
                // An apply is refused whole when a reload commits
                // between its plan and its commit (it does not retry).
                assert!(
                    code == 0 || err.contains("the configuration changed meanwhile"),
                    "{err}"
                );
                n += usize::from(code == 0);
            }
            n
        })
    };
    for _ in 0..20 {
        let r = ctl_json(&sock, &["reload"]);
        // The reload's generation holds exactly the file's chain.
        assert!(
            r["generation"].as_u64().unwrap() > r["base"].as_u64().unwrap()
                || r["diff"] == serde_json::json!([]),
            "{r}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let applied = applier.join().unwrap();
    assert!(applied > 0);
    // Last word to a reload: the file's chain.
    ctl_json(&sock, &["reload"]);
    assert_eq!(chain(&sock), ["drop-udp:dns", "count:edge"]);
    p.signal(libc::SIGTERM);
    let out = p.wait_output(Duration::from_secs(30));
    assert!(out.status.success());
}

#[test]
fn a_reload_waits_for_a_file_being_written() {
    use std::io::Write;
    let dir = TempDir::new("pfild-reload-torn");
    let sock = dir.join("ctl").join("pfild.sock");
    let sock = sock.to_str().unwrap().to_owned();
    let cfg = dir.join("pfild.toml");
    let one = CONFIG.replace("SOCK", &sock);
    std::fs::write(&cfg, &one).unwrap();
    let mut p = spawn_pfild(&["--config", cfg.to_str().unwrap(), "--seconds", "60"]);
    assert!(
        p.wait_stderr("stop with Ctrl-C", Duration::from_secs(20)),
        "{}",
        p.stderr_so_far()
    );
    // The new file is written in place, slowly: first everything before
    // the chains (valid TOML on its own: applied, it would empty the
    // chain, as reloads did before they waited for the file to settle),
    // then comment lines every 5 ms for 600 ms, then the chains.
    let two = one.replace(
        "in = [\"drop-udp:dns\", \"count:edge\"]",
        "in = [\"count:edge\", \"drop-udp:dns\"]",
    );
    let cut = two.find("[heads.syn0]").unwrap();
    let mut f = std::fs::File::create(&cfg).unwrap();
    f.write_all(&two.as_bytes()[..cut]).unwrap();
    let writer = std::thread::spawn(move || {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(600) {
            f.write_all(b"# ...\n").unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
        f.write_all(&two.as_bytes()[cut..]).unwrap();
    });
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    let r = ctl_json(&sock, &["reload"]);
    writer.join().unwrap();
    // The reload waited for the whole file, and applied it.
    assert!(
        t0.elapsed() >= Duration::from_millis(500),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(chain(&sock), ["count:edge", "drop-udp:dns"], "{r}");
    p.signal(libc::SIGTERM);
    let out = p.wait_output(Duration::from_secs(30));
    assert!(out.status.success());
}

#[test]
fn check_config_says_what_is_wrong_and_where() {
    let dir = TempDir::new("pfild-check");
    let good = dir.join("good.toml");
    std::fs::write(&good, CONFIG.replace("SOCK", "/nonexistent/x.sock")).unwrap();
    let out = pfild(&["--check-config", good.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let o = String::from_utf8_lossy(&out.stdout);
    assert!(o.contains("good: sink syn0, 2 hook(s), 2 link(s)"), "{o}");
    for (text, want) in [
        (
            CONFIG.replace("rate = 200000", "rate = -5"),
            "line 6, column 8: pfild.rate",
        ),
        (
            CONFIG.replace("quiet = true", "quiet = 1"),
            "line 5, column 9: pfild.quiet: expected true or false",
        ),
        (
            CONFIG.replace("config = \"53\"", "config = \"fifty\""),
            "line 10, column 10",
        ),
        (
            CONFIG.replace("[heads.syn0]", "[heads.syn9]"),
            "no such head",
        ),
        (
            CONFIG.replace(
                "interfaces = [\"syn0\"]",
                "interfaces = [\"syn0\", \"syn1\"]",
            ),
            "`sink` takes 1 interface(s)",
        ),
        // What only the start found before: this machine's namespaces
        // and interfaces, queues = "all" with the synthetic port.
        (
            CONFIG.replace("quiet = true", "quiet = true\nqueues = \"all\""),
            "--queues all needs an interface",
        ),
        (
            CONFIG.replace(
                "quiet = true",
                "quiet = true\npcap = \"/nonexistent/pfil-check.pcap\"",
            ),
            "/nonexistent/pfil-check.pcap",
        ),
        (
            CONFIG
                .replace("rate = 200000\n", "")
                .replace("synthetic = true", "netns = \"pfil-check-no-such-ns\""),
            "no network namespace `pfil-check-no-such-ns`",
        ),
    ] {
        let f = dir.join("bad.toml");
        std::fs::write(&f, text.replace("SOCK", "/x.sock")).unwrap();
        let out = pfild(&["--check-config", f.to_str().unwrap()]);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{want}: {e}");
        assert!(e.contains(want), "{want}: {e}");
    }
    // An interface this namespace does not have, where the file names no
    // netns: a warning (pfild may start in another namespace), exit 0;
    // in the file's netns: an error (above).
    let f = dir.join("elsewhere.toml");
    let text = CONFIG
        .replace("synthetic = true\n", "")
        .replace("rate = 200000\n", "")
        .replace("[\"syn0\"]", "[\"pfilnosuch0\"]")
        .replace("[heads.syn0]", "[heads.pfilnosuch0]");
    std::fs::write(&f, text.replace("SOCK", "/x.sock")).unwrap();
    let out = pfild(&["--check-config", f.to_str().unwrap()]);
    let o = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{o}");
    assert!(
        o.contains("warning: interface `pfilnosuch0`: ") && o.contains("good: sink pfilnosuch0"),
        "{o}"
    );
    // The command line overrides the file: a mode given replaces its
    // heads (syn1 has no chain in the file: an error names the head).
    let out = pfild(&["--check-config", good.to_str().unwrap(), "sink", "syn1"]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("heads.syn0: no such head") && e.contains("syn1"),
        "{e}"
    );
}
