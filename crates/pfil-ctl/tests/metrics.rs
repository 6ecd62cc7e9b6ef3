//! The OpenMetrics output, read back by a strict parser (Python's
//! `prometheus_client.openmetrics.parser`, Debian's
//! python3-prometheus-client): names, types, labels and values as the
//! registry's counters say; and the HTTP endpoint.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use pfil::{Ctx, Dir, Dirs, Packet, PacketKind, Placement, Registry, Verdict};
use pfil_ctl::metrics::{render, MetricsServer, CONTENT_TYPE};

/// The parser's view: `name{labels} value` per sample, sorted, or why it
/// refused the text.
fn parse(text: &str) -> Option<Result<Vec<String>, String>> {
    let py = "/usr/bin/python3";
    let script = r#"
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = []
for fam in text_string_to_metric_families(sys.stdin.read()):
    for s in fam.samples:
        labels = ",".join(f'{k}={v}' for k, v in sorted(s.labels.items()))
        out.append(f"{fam.type} {s.name}{{{labels}}} {s.value}")
print("\n".join(sorted(out)))
"#;
    let ok = Command::new(py)
        .args(["-c", "import prometheus_client"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "python3-prometheus-client is missing under CI: scripts/setup.sh installs it"
        );
        eprintln!("skipped: no python3-prometheus-client (scripts/setup.sh installs it)");
        return None;
    }
    let mut c = Command::new(py)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    Some(if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_owned)
            .collect())
    } else {
        Err(String::from_utf8_lossy(&o.stderr).into_owned())
    })
}

fn drop_odd(p: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
    if p.len() % 2 == 1 {
        Verdict::Dropped
    } else {
        Verdict::Pass
    }
}

/// Head `syn0` with `odd:x`
/// dropping odd-length frames, 10 frames of 60 bytes and 5 of 61 run.
fn registry() -> Registry {
    let reg = Registry::with_max_workers(2);
    let head = reg
        .register_head("syn0", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    reg.add_hook("odd:x", PacketKind::Ethernet, Dirs::BOTH, drop_odd)
        .unwrap();
    reg.link("syn0", Dir::In, "odd:x", Placement::Append)
        .unwrap();
    reg.set_sampling(1);
    let mut w = reg.worker().unwrap();
    let mut frames: Vec<Vec<u8>> = (0..15)
        .map(|i| vec![0u8; if i < 10 { 60 } else { 61 }])
        .collect();
    let mut pkts: Vec<Packet<'_>> = frames.iter_mut().map(|f| Packet::new(f)).collect();
    head.run(Dir::In, &mut w, &mut pkts);
    reg
}

#[test]
fn a_strict_parser_reads_what_the_counters_say() {
    let reg = registry();
    let text = render(&pfil_ctl::stats(&reg, None).unwrap());
    assert!(text.ends_with("# EOF\n"), "{text}");
    let Some(parsed) = parse(&text) else { return };
    let samples = parsed.unwrap_or_else(|e| panic!("the parser refused it: {e}\n{text}"));
    let l = "{dir=in,head=syn0,hook=odd:x}";
    for want in [
        format!("counter pfil_link_packets_total{l} 15"),
        format!("counter pfil_link_bytes_total{l} 905"),
        format!("counter pfil_link_passed_total{l} 10"),
        format!("counter pfil_link_dropped_total{l} 5"),
        format!("counter pfil_link_consumed_total{l} 0"),
        format!("counter pfil_link_sampled_batches_total{l} 1"),
        format!("counter pfil_link_sampled_packets_total{l} 15"),
        format!("gauge pfil_link_quarantined{l} 0"),
        format!("gauge pfil_generation{{}} {}", reg.generation()),
        "gauge pfil_sampling_batches{} 1".to_owned(),
    ] {
        assert!(
            samples.contains(&want),
            "{want} not in\n{}",
            samples.join("\n")
        );
    }
    assert!(
        samples
            .iter()
            .any(|s| s.starts_with(&format!("counter pfil_link_sampled_seconds_total{l} "))),
        "{}",
        samples.join("\n")
    );
    // The parser is strict: a text without `# EOF` is refused.
    let cut = text.trim_end_matches("# EOF\n");
    assert!(
        parse(cut).unwrap().is_err(),
        "the parser would take anything"
    );
}

#[test]
fn the_http_endpoint_serves_the_same_text() {
    let reg = registry();
    let server = MetricsServer::start(reg.clone(), "127.0.0.1:0").unwrap();
    let get = |req: &str| {
        let mut c = std::net::TcpStream::connect(server.addr()).unwrap();
        c.write_all(req.as_bytes()).unwrap();
        let mut r = String::new();
        c.read_to_string(&mut r).unwrap();
        r
    };
    let r = get("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    let (head, body) = r.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(
        head.contains(&format!("Content-Type: {CONTENT_TYPE}")),
        "{head}"
    );
    assert_eq!(body, render(&pfil_ctl::stats(&reg, None).unwrap()));
    assert!(get("GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert!(get("POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
    let e = MetricsServer::start(reg.clone(), &server.addr().to_string())
        .err()
        .unwrap();
    assert!(e.contains(&server.addr().to_string()), "{e}");
}

fn udp(src: u8, dport: u16) -> Vec<u8> {
    let mut v = Vec::new();
    etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
        .ipv4([10, 0, 0, src], [198, 18, 0, 1], 64)
        .udp(1000, dport)
        .write(&mut v, &[0; 8])
        .unwrap();
    v
}

fn tcp(dport: u16) -> Vec<u8> {
    let mut v = Vec::new();
    etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
        .ipv4([10, 0, 1, 1], [198, 18, 0, 1], 64)
        .tcp(1000, dport, 1, 1000)
        .write(&mut v, &[])
        .unwrap();
    v
}

/// Head `syn0` with `acl:edge` then `ratelimit:src` on `in`, built by
/// the catalog: 3 UDP frames to port 53 (acl rule 0 drops them), 6 to
/// port 80 from 6 sources (rule 1 passes them; the limiter's one 4-way
/// set per worker takes 4 sources and evicts for 2; one worker runs, so
/// one table is allocated), 2 TCP frames (the default drops them).
pub fn filter_registry() -> Registry {
    let reg = Registry::with_max_workers(2);
    let head = reg
        .register_head("syn0", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    let cat = pfil_filters::Catalog::builtin();
    let ctx = pfil_filters::BuildCtx::new(reg.max_workers());
    for (name, spec) in [
        (
            "acl:edge",
            "acl:drop count proto udp to any port 53; pass count proto udp; default drop",
        ),
        ("ratelimit:src", "ratelimit:0.001 burst 1 per src table 4"),
    ] {
        let f = cat.create(spec, &ctx).unwrap();
        reg.add_hook_shared(name, PacketKind::Ethernet, Dirs::BOTH, f)
            .unwrap();
        reg.link("syn0", Dir::In, name, Placement::Append).unwrap();
    }
    let mut frames: Vec<Vec<u8>> = (0..3).map(|i| udp(i, 53)).collect();
    frames.extend((0..6).map(|i| udp(i, 80)));
    frames.extend((0..2).map(|_| tcp(22)));
    let mut w = reg.worker().unwrap();
    let mut pkts: Vec<Packet<'_>> = frames.iter_mut().map(|f| Packet::new(f)).collect();
    head.run(Dir::In, &mut w, &mut pkts);
    reg
}

#[test]
fn filter_stats_are_exported_as_families_per_stat() {
    let reg = filter_registry();
    let text = pfil_ctl::metrics::render_with_filters(
        &pfil_ctl::stats(&reg, None).unwrap(),
        &pfil_ctl::filter_stats(&reg, None).unwrap(),
    );
    let Some(parsed) = parse(&text) else { return };
    let samples = parsed.unwrap_or_else(|e| panic!("the parser refused it: {e}\n{text}"));
    for want in [
        "counter pfil_filter_rule_hits_total{hook=acl:edge,rule=0,text=drop count proto 17 from any to any port 53:53} 3",
        "counter pfil_filter_rule_hits_total{hook=acl:edge,rule=1,text=pass count proto 17 from any to any} 6",
        "counter pfil_filter_rule_hits_total{hook=acl:edge,rule=default,text=default drop} 2",
        "counter pfil_filter_evictions_total{hook=ratelimit:src} 2",
        "gauge pfil_filter_table_used{hook=ratelimit:src} 4",
        // One worker ran: one table of 4 slots (16 B each) of the two.
        "gauge pfil_filter_table_slots{hook=ratelimit:src} 4",
        "gauge pfil_filter_table_bytes{hook=ratelimit:src} 64",
        "counter pfil_link_packets_total{dir=in,head=syn0,hook=ratelimit:src} 6",
    ] {
        assert!(
            samples.iter().any(|s| s == want),
            "{want} not in\n{}",
            samples.join("\n")
        );
    }
    let filter_samples = samples
        .iter()
        .filter(|s| s.contains("pfil_filter_"))
        .count();
    assert_eq!(filter_samples, 7, "{}", samples.join("\n"));
    // The HTTP endpoint serves them too.
    let server = MetricsServer::start(reg.clone(), "127.0.0.1:0").unwrap();
    let mut c = std::net::TcpStream::connect(server.addr()).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    let mut r = String::new();
    c.read_to_string(&mut r).unwrap();
    assert!(r.ends_with(&text), "{r}");
}

/// One scrape with a bound on its wait (the client's own timeouts):
/// the response, or what went wrong.
fn scrape(addr: std::net::SocketAddr, limit: std::time::Duration) -> Result<String, String> {
    let mut c = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
    c.set_read_timeout(Some(limit)).unwrap();
    c.set_write_timeout(Some(limit)).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut r = String::new();
    c.read_to_string(&mut r)
        .map_err(|e| format!("{e} after {r:?}"))?;
    Ok(r)
}

/// A slow-loris client: sends the start of a request head, then one byte
/// every `every` until the server closes the connection or `limit`
/// passes; returns how long the server kept it.
fn slow_loris(
    addr: std::net::SocketAddr,
    every: std::time::Duration,
    limit: std::time::Duration,
) -> std::thread::JoinHandle<std::time::Duration> {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    std::thread::spawn(move || {
        let t = std::time::Instant::now();
        let _ = c.write_all(b"GET /metrics HTTP/1.1\r\n");
        c.set_read_timeout(Some(every)).unwrap();
        let mut buf = [0u8; 256];
        while t.elapsed() < limit {
            // A read that ends (0: closed, or an error) before its
            // timeout: the server let go.
            match c.read(&mut buf) {
                Ok(_) => return t.elapsed(),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return t.elapsed(),
            }
            if c.write_all(b"X").is_err() {
                return t.elapsed();
            }
        }
        t.elapsed()
    })
}

/// Review H1: a client trickling its head a byte at a time holds neither
/// the scrapes (they are answered at once, concurrently) nor itself past
/// the head deadline, however long it keeps sending.
#[test]
fn a_slow_client_does_not_block_scrapes_and_is_cut_at_its_deadline() {
    use std::time::Duration;
    let reg = registry();
    let mut opts = pfil_ctl::metrics::MetricsOptions::default();
    opts.head_timeout = Duration::from_millis(800);
    let server = MetricsServer::start_with(reg.clone(), "127.0.0.1:0", opts).unwrap();
    let loris = slow_loris(
        server.addr(),
        Duration::from_millis(100),
        Duration::from_secs(10),
    );
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let r = scrape(server.addr(), Duration::from_secs(3))
            .expect("scrape while a slow client is connected");
        assert!(
            r.starts_with("HTTP/1.1 200 OK") && r.ends_with("# EOF\n"),
            "{r}"
        );
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    }
    let held = loris.join().unwrap();
    assert!(
        held < Duration::from_secs(5),
        "the slow client was cut off after {held:?}, not by its 0.8 s head deadline"
    );
    assert_eq!(server.connections(), 0);
}

/// Review H1: dropping the server (pfild's shutdown) does not wait on a
/// connected client, neither one silent in its head nor one trickling.
#[test]
fn dropping_the_server_does_not_wait_on_a_client() {
    use std::time::{Duration, Instant};
    let reg = registry();
    // Long deadlines: only the shutdown may end these connections.
    let mut opts = pfil_ctl::metrics::MetricsOptions::default();
    opts.head_timeout = Duration::from_secs(60);
    opts.response_timeout = Duration::from_secs(60);
    let server = MetricsServer::start_with(reg.clone(), "127.0.0.1:0", opts).unwrap();
    let loris = slow_loris(
        server.addr(),
        Duration::from_millis(100),
        Duration::from_secs(30),
    );
    let mut silent = std::net::TcpStream::connect(server.addr()).unwrap();
    let t = Instant::now();
    while server.connections() < 2 {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "both connections in flight"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let t = Instant::now();
    drop(server);
    let took = t.elapsed();
    assert!(
        took <= pfil_ctl::metrics::SHUTDOWN_WAIT + Duration::from_millis(500),
        "drop took {took:?}"
    );
    // And the clients see their connections end.
    assert!(loris.join().unwrap() < Duration::from_secs(10));
    silent
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 16];
    assert!(
        matches!(silent.read(&mut buf), Ok(0) | Err(_)),
        "the silent client's connection was closed"
    );
}

/// Review H1: connections over the cap do not pile up and do not block
/// scrapes: a new connection closes the oldest one still in its head; a
/// scrape gets through while the cap is full of idle clients.
#[test]
fn connections_over_the_cap_are_closed_and_scrapes_still_answered() {
    use std::time::{Duration, Instant};
    let reg = registry();
    let mut opts = pfil_ctl::metrics::MetricsOptions::default();
    opts.max_connections = 2;
    opts.head_timeout = Duration::from_secs(60);
    opts.response_timeout = Duration::from_secs(60);
    let server = MetricsServer::start_with(reg.clone(), "127.0.0.1:0", opts).unwrap();
    let idle: Vec<std::net::TcpStream> = (0..10)
        .map(|_| {
            let c = std::net::TcpStream::connect(server.addr()).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            c
        })
        .collect();
    // All ten were accepted, eight of them closed to keep to the cap.
    let t = Instant::now();
    let mut closed = 0;
    for mut c in idle.iter() {
        let mut buf = [0u8; 16];
        let left = Duration::from_secs(5).saturating_sub(t.elapsed());
        c.set_read_timeout(Some(left.max(Duration::from_millis(50))))
            .unwrap();
        if matches!(c.read(&mut buf), Ok(0) | Err(_)) && t.elapsed() < Duration::from_secs(5) {
            closed += 1;
        }
    }
    assert_eq!(closed, 8, "the cap is 2 connections");
    assert!(server.connections() <= 2);
    let r = scrape(server.addr(), Duration::from_secs(3)).expect("scrape with the cap full");
    assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
    drop(idle);
}

/// The operator's choice of what of the filters is served: all of it,
/// without the acl rule texts, or none of it.
#[test]
fn the_filter_export_option_hides_rule_texts_or_all_filter_stats() {
    use pfil_ctl::metrics::{FilterExport, MetricsOptions};
    let reg = filter_registry();
    let get = |f: FilterExport| {
        let mut opts = MetricsOptions::default();
        opts.filters = f;
        let server = MetricsServer::start_with(reg.clone(), "127.0.0.1:0", opts).unwrap();
        scrape(server.addr(), std::time::Duration::from_secs(5)).unwrap()
    };
    let all = get(FilterExport::All);
    assert!(
        all.contains("text=\"drop count proto 17 from any to any port 53:53\""),
        "{all}"
    );
    let no_text = get(FilterExport::NoRuleText);
    assert!(!no_text.contains("text="), "{no_text}");
    assert!(!no_text.contains("proto 17"), "{no_text}");
    for want in [
        "pfil_filter_rule_hits_total{hook=\"acl:edge\",rule=\"0\"} 3\n",
        "pfil_filter_rule_hits_total{hook=\"acl:edge\",rule=\"default\"} 2\n",
        "pfil_filter_evictions_total{hook=\"ratelimit:src\"} 2\n",
    ] {
        assert!(no_text.contains(want), "{want} not in {no_text}");
    }
    let off = get(FilterExport::Off);
    assert!(!off.contains("pfil_filter_"), "{off}");
    assert!(
        off.contains("pfil_link_packets_total{head=\"syn0\",dir=\"in\",hook=\"acl:edge\"} 11\n"),
        "{off}"
    );
    assert_eq!(
        "no-rule-text".parse::<FilterExport>(),
        Ok(FilterExport::NoRuleText)
    );
    assert!("text"
        .parse::<FilterExport>()
        .unwrap_err()
        .contains("all, no-rule-text or off"));
}
