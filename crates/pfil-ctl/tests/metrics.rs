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
/// set per worker takes 4 sources and evicts for 2), 2 TCP frames (the
/// default drops them).
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
        "gauge pfil_filter_table_slots{hook=ratelimit:src} 8",
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
    assert_eq!(filter_samples, 6, "{}", samples.join("\n"));
    // The HTTP endpoint serves them too.
    let server = MetricsServer::start(reg.clone(), "127.0.0.1:0").unwrap();
    let mut c = std::net::TcpStream::connect(server.addr()).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    let mut r = String::new();
    c.read_to_string(&mut r).unwrap();
    assert!(r.ends_with(&text), "{r}");
}
