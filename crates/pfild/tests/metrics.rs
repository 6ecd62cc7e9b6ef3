//! `pfild --metrics` against hostile clients (review H1): a slow client
//! holds neither the scrapes nor pfild's shutdown, and
//! `--metrics-filters` keeps the acl rule texts out of the endpoint.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{spawn_pfild, totals};

/// The endpoint's address from pfild's stderr.
fn metrics_addr(p: &mut common::Proc) -> String {
    assert!(
        p.wait_stderr("/metrics (OpenMetrics)", Duration::from_secs(30)),
        "{}",
        p.stderr_so_far()
    );
    p.stderr_so_far()
        .split("metrics on http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap()
        .to_owned()
}

fn scrape(addr: &str) -> String {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    let mut r = String::new();
    c.read_to_string(&mut r)
        .unwrap_or_else(|e| panic!("scrape: {e} after {r:?}"));
    r
}

/// With a client trickling its request a byte every 100 ms (a slow
/// loris: before, it held the only metrics thread for hours), scrapes are
/// answered, and `kill -INT` ends pfild promptly with its final report.
#[test]
fn a_slow_metrics_client_holds_neither_scrapes_nor_the_shutdown() {
    let mut p = spawn_pfild(&[
        "sink",
        "syn0",
        "--synthetic",
        "--rate",
        "100000",
        "--hook",
        "acl:drop count proto udp to any port 53; pass count proto udp; default pass",
        "--metrics",
        "127.0.0.1:0",
        "--metrics-filters",
        "no-rule-text",
        "--no-control",
        "--seconds",
        "60",
        "--quiet",
    ]);
    let addr = metrics_addr(&mut p);
    let mut loris = std::net::TcpStream::connect(&addr).unwrap();
    loris.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let trickle = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if loris.write_all(b"X").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let r = scrape(&addr);
    assert!(
        r.starts_with("HTTP/1.1 200 OK") && r.ends_with("# EOF\n"),
        "{r}"
    );
    // The rules by index, without their text.
    assert!(
        r.contains("pfil_filter_rule_hits_total{hook=\"acl:1\",rule=\"0\"} "),
        "{r}"
    );
    assert!(!r.contains("text=") && !r.contains("port 53"), "{r}");
    // A fresh slow client, connected as the signal comes.
    let mut silent = std::net::TcpStream::connect(&addr).unwrap();
    silent.write_all(b"GET /met").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    p.signal(libc::SIGINT);
    let out = p.wait_output(Duration::from_secs(30));
    let took = t.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = trickle.join();
    drop(silent);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        took < Duration::from_secs(10),
        "pfild took {took:?} to stop after SIGINT"
    );
    assert!(stdout.contains("(signal)"), "{stdout}");
    let t = totals(&out.stdout);
    assert!(common::num(&t, "rx") > 0, "{stdout}");
}

#[test]
fn metrics_filters_is_checked_and_documented() {
    let out = common::pfild(&["sink", "syn0", "--synthetic", "--metrics-filters", "text"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--metrics-filters"), "{err}");
    let help = common::pfild(&["--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    for want in [
        "--metrics-filters",
        "no-rule-text",
        "bypasses the control socket's access control",
    ] {
        assert!(help.contains(want), "{want} not in {help}");
    }
}
