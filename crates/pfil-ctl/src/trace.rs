//! The `trace` control method: a packet trace ([`pfil::Trace`]) attached
//! to a head and direction for the session, its records streamed on the
//! connection as JSON, the trace detached however the session ends.
//!
//! The match is a tcpdump expression compiled by libpcap in a sandbox
//! ([`pfil_filters::bpf::Program`], as `capture` and the `bpf` filter do)
//! and run on each packet where it enters the head: Ethernet frames on an
//! Ethernet head, bare IP packets (`DLT_RAW`) on an IPv4 or IPv6 head.

use std::sync::Arc;
use std::time::Duration;

use pfil::{Head, PacketKind, Trace, TraceRecord};
use pfil_filters::bpf::{Link, Program};
use serde_json::{json, Value};

use crate::capture::session::{deadline, End};

/// Records a trace's queue holds unless told otherwise (`buffer`).
pub const DEFAULT_TRACE_BUFFER: usize = pfil::trace::DEFAULT_TRACE_BUFFER;

/// Records sent per turn of a session's loop, between its checks of the
/// count, the time and the client.
const FLUSH_MAX: usize = 256;

/// `trace` params.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TraceParams {
    head: String,
    dir: String,
    expr: Option<String>,
    #[serde(default)]
    count: u64,
    #[serde(default)]
    seconds: f64,
    buffer: Option<usize>,
}

/// A verdict as the protocol writes it.
pub fn verdict_word(v: pfil::Verdict) -> &'static str {
    match v {
        pfil::Verdict::Pass => "pass",
        pfil::Verdict::Dropped => "dropped",
        pfil::Verdict::Consumed => "consumed",
    }
}

/// A short summary of a packet: its 5-tuple (`udp 198.18.0.1:9 >
/// 198.18.0.2:53`), or its addresses and protocol, or its first bytes.
pub fn summary(r: &TraceRecord) -> String {
    let hex = || {
        let b = r.summary();
        let n = b.len().min(16);
        let h: String = b[..n].iter().map(|x| format!("{x:02x}")).collect();
        format!("bytes {h}{}", if b.len() > n { "…" } else { "" })
    };
    let Some(h) = r.headers else {
        return hex();
    };
    match (h.ip, h.transport) {
        (Some(ip), Some(t)) => {
            let proto = match t.protocol {
                pfil::L4::Udp => "udp",
                pfil::L4::Tcp => "tcp",
                _ => "ip",
            };
            let at = |a: std::net::IpAddr, p: u16| match a {
                std::net::IpAddr::V4(a) => format!("{a}:{p}"),
                std::net::IpAddr::V6(a) => format!("[{a}]:{p}"),
            };
            format!(
                "{proto} {} > {}",
                at(ip.src, t.src_port),
                at(ip.dst, t.dst_port)
            )
        }
        (Some(ip), None) => format!("ip proto {} {} > {}", ip.protocol, ip.src, ip.dst),
        _ => match h.ether_type {
            Some(et) => format!("ethertype 0x{et:04x}, {}", hex()),
            None => hex(),
        },
    }
}

/// One record as the `trace.record` notification carries it.
pub fn record_json(trace: &Trace, head: &str, r: &TraceRecord) -> Value {
    let names = trace.chain(r.generation);
    let name = |i: u16| {
        names
            .as_ref()
            .and_then(|n| n.get(usize::from(i)).cloned())
            .unwrap_or_else(|| format!("#{i}"))
    };
    let hops: Vec<Value> = r
        .hops()
        .iter()
        .map(|h| {
            json!({
                "hook": name(h.index),
                "verdict": verdict_word(h.verdict),
                "ns": h.ns,
                "note": h.note.as_str(),
                "batch": h.batch,
            })
        })
        .collect();
    let decided = r
        .decided_by()
        .map(|h| json!({"hook": name(h.index), "note": h.note.as_str()}));
    let hex: String = r.summary().iter().map(|x| format!("{x:02x}")).collect();
    json!({
        "head": head,
        "dir": r.dir.to_string(),
        "worker": r.worker,
        "generation": r.generation,
        "ts_ns": r.ts_ns,
        "kind": r.kind.to_string(),
        "len": r.len,
        "queue": r.queue,
        "summary": summary(r),
        "bytes": hex,
        "hops": hops,
        "more_hops": r.more_hops,
        "verdict": verdict_word(r.verdict),
        "decided_by": decided,
    })
}

/// The match of `expr` for a head of `kind`.
fn matcher(expr: &str, kind: PacketKind) -> Result<Box<pfil::TraceMatch>, crate::RpcError> {
    let link = match kind {
        PacketKind::Ethernet => Link::Ethernet,
        _ => Link::RawIp,
    };
    let prog =
        Program::compile(expr, link).map_err(|m| crate::RpcError::params(format!("expr: {m}")))?;
    Ok(Box::new(move |p: &pfil::Packet<'_>| {
        p.kind() == kind && prog.matches(p.frame())
    }))
}

/// Serve a `trace` request on its connection: attach a trace, stream its
/// records as `trace.record` notifications until the count or time is
/// reached, the client sends any line (stop) or goes away, then detach
/// it and answer with its counters. Always detaches the trace, whichever
/// way it ends (the [`pfil::Tracing`] guard).
pub(crate) fn session(
    target: &crate::methods::Target,
    s: &mut std::os::unix::net::UnixStream,
    next_line: &mut dyn FnMut(&mut std::os::unix::net::UnixStream, Duration) -> Option<bool>,
    stopping: &dyn Fn() -> bool,
    id: &serde_json::value::RawValue,
    params: serde_json::Map<String, Value>,
) -> Result<(), crate::RpcError> {
    let reg = &target.registry;
    let p: TraceParams = serde_json::from_value(Value::Object(params))
        .map_err(|e| crate::RpcError::params(format!("trace: {e}")))?;
    let d = crate::methods::dir(&p.dir)?;
    let deadline = deadline(p.seconds)?;
    let buffer = p.buffer.unwrap_or(DEFAULT_TRACE_BUFFER);
    if !(1..=pfil::trace::MAX_TRACE_BUFFER).contains(&buffer) {
        return Err(crate::RpcError::params(format!(
            "buffer: 1 to {} records, not {buffer}",
            pfil::trace::MAX_TRACE_BUFFER
        )));
    }
    let head: Head = reg
        .head(&p.head)
        .map_err(|e| crate::rpc::registry_error(&e))?;
    let m = p
        .expr
        .as_deref()
        .map(|e| matcher(e, head.kind()))
        .transpose()?;
    let trace = Arc::new(Trace::new(m, p.count, buffer));
    // From here the trace is detached however the session ends, a panic
    // included (the guard's drop).
    let tracing = reg
        .trace(&p.head, d, trace.clone())
        .map_err(|e| crate::rpc::registry_error(&e))?;
    tracing::info!(target: "pfil_ctl", head = %p.head, dir = %d, expr = ?p.expr, count = p.count, generation = tracing.generation(), "control: trace started");
    let send = |s: &mut std::os::unix::net::UnixStream, r: &TraceRecord| {
        let line = format!(
            r#"{{"jsonrpc":"2.0","method":"trace.record","params":{{"id":{},"record":{}}}}}"#,
            id.get(),
            record_json(&trace, &p.head, r)
        );
        crate::server::send_line(s, &line)
    };
    let mut sent = 0u64;
    // Up to `max` records of the trace's queue, sent (bounded, so that a
    // queue refilled as fast as it is sent still lets the session see
    // its end): how many; `None`: the client is gone.
    let flush = |s: &mut std::os::unix::net::UnixStream, max: usize| {
        let mut n = 0u64;
        for _ in 0..max {
            let Some(r) = trace.pop() else { break };
            send(s, &r).ok()?;
            n += 1;
        }
        Some(n)
    };
    let end = loop {
        let Some(n) = flush(s, FLUSH_MAX) else {
            break End::ClientGone;
        };
        sent += n;
        // A full turn: more may be waiting, look at the client briefly.
        let wait = if n == FLUSH_MAX as u64 {
            Duration::from_millis(1)
        } else {
            Duration::from_millis(10)
        };
        if trace.done() {
            break End::Count;
        }
        if deadline.is_some_and(|t| std::time::Instant::now() >= t) {
            break End::Time;
        }
        if stopping() {
            break End::ServerStopping;
        }
        match next_line(s, wait) {
            Some(true) => break End::Stopped,
            Some(false) => break End::ClientGone,
            None => {}
        }
    };
    // Detach, wait for the grace period (no worker runs the trace any
    // more), then send what it recorded last and its counters.
    let removed = tracing.stop().map(|t| t.wait_timeout(target.grace_timeout));
    let gone = end == End::ClientGone
        || match flush(s, usize::MAX) {
            Some(n) => {
                sent += n;
                false
            }
            None => true,
        };
    let st = trace.stats();
    tracing::info!(target: "pfil_ctl", head = %p.head, dir = %d, end = ?end, sent, traced = st.traced, dropped = st.dropped, detached = ?removed.is_ok(), "control: trace ended");
    if gone {
        return Ok(());
    }
    let r = json!({
        "head": p.head,
        "dir": d.to_string(),
        "records": sent,
        "traced": st.traced,
        "dropped": st.dropped,
        "end": format!("{end:?}").to_lowercase(),
        "reaped": target.reaped(Vec::new()),
    });
    let _ = crate::server::send_line(s, &crate::rpc::response(id, r));
    Ok(())
}

/// One record as `pfilctl trace` prints it: a line for the packet, one
/// per link visited, one for the final verdict.
pub fn record_text(r: &Value) -> String {
    use crate::cli::text;
    let mut t = format!(
        "[w{}] {} {} {} B {} (gen {})\n",
        text(&r["worker"]),
        text(&r["head"]),
        text(&r["dir"]),
        text(&r["len"]),
        text(&r["summary"]),
        text(&r["generation"]),
    );
    let hops = r["hops"].as_array().cloned().unwrap_or_default();
    let w = hops
        .iter()
        .map(|h| text(&h["hook"]).len())
        .max()
        .unwrap_or(0);
    for h in &hops {
        let note = match h["note"].as_str() {
            Some("called") | None => String::new(),
            Some("batch") => format!("  (batch call of {} packets)", text(&h["batch"])),
            Some("quarantined") => "  (link quarantined: not called)".to_owned(),
            Some("fault") => "  (the hook panicked: the link's fail verdict)".to_owned(),
            Some("refused_kind") => "  (refused: not the head's packet kind)".to_owned(),
            Some(other) => format!("  ({other})"),
        };
        t += &format!(
            "    {:w$}  {:7}  {:>7} ns{note}\n",
            text(&h["hook"]),
            text(&h["verdict"]),
            text(&h["ns"]),
        );
    }
    if r["more_hops"].as_u64().unwrap_or(0) > 0 {
        t += &format!("    ... {} more links\n", text(&r["more_hops"]));
    }
    let by = &r["decided_by"];
    let why = match by["note"].as_str() {
        None => String::new(),
        Some("quarantined") => format!(" by {} (quarantined, fail-closed)", text(&by["hook"])),
        Some("fault") => format!(" by {} (the hook panicked, fail-closed)", text(&by["hook"])),
        Some("refused_kind") => format!(" at {} (refused: packet kind)", text(&by["hook"])),
        Some(_) => format!(" by {}", text(&by["hook"])),
    };
    t += &format!("  => {}{why}\n", text(&r["verdict"]));
    t
}

/// `pfilctl trace`: send the request, print each record as it comes
/// (text, or one JSON object a line with `json`), then the summary (on
/// `err` with `json`); Ctrl-C stops the trace (the server detaches it
/// and answers).
pub(crate) fn follow(
    path: &std::path::Path,
    params: Value,
    json_out: bool,
    out: &mut dyn std::io::Write,
    err: &mut dyn std::io::Write,
) -> Result<(), String> {
    let res = crate::client::stream(path, "trace", params, "trace.record", |p| {
        let rec = &p["record"];
        let t = if json_out {
            format!("{rec}\n")
        } else {
            record_text(rec)
        };
        out.write_all(t.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| e.to_string())
    })?;
    let res = &res;
    let t = crate::cli::text;
    let summary = format!(
        "trace {} {}: {} packets traced, {} records dropped for a full queue; ended: {}",
        t(&res["head"]),
        t(&res["dir"]),
        t(&res["traced"]),
        t(&res["dropped"]),
        t(&res["end"]),
    );
    if json_out {
        writeln!(err, "{summary}")
    } else {
        writeln!(out, "{summary}")
    }
    .map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfil::Dir;
    use std::panic::{catch_unwind, AssertUnwindSafe};

    fn target() -> crate::methods::Target {
        let reg = pfil::Registry::with_max_workers(2);
        reg.register_head("syn0", PacketKind::Ethernet, pfil::Dirs::BOTH)
            .unwrap();
        crate::methods::Target {
            registry: reg,
            catalog: Arc::new(pfil_filters::Catalog::builtin()),
            app: "t".into(),
            grace_timeout: Duration::from_secs(1),
            reload: None,
        }
    }

    fn params(v: Value) -> serde_json::Map<String, Value> {
        let Value::Object(m) = v else { unreachable!() };
        m
    }

    /// The session detaches its trace however it ends, a panic included.
    #[test]
    fn a_panic_in_a_session_leaves_no_trace_attached() {
        let t = target();
        let head = t.registry.head("syn0").unwrap();
        let (mut a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| {
            session(
                &t,
                &mut a,
                &mut |_, _| None,
                &|| panic!("a bug while the trace runs (expected by the test)"),
                &crate::rpc::null_id(),
                params(json!({"head": "syn0", "dir": "in"})),
            )
        }));
        assert!(r.is_err(), "the panic went through");
        assert!(!head.is_hooked(Dir::In), "the trace is detached");
        // A new trace can be attached: the old one is gone.
        let g = t
            .registry
            .trace("syn0", Dir::In, Arc::new(Trace::new(None, 0, 1)))
            .unwrap();
        drop(g);
    }

    #[test]
    fn bad_input_is_named() {
        let t = target();
        let (mut a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut go = |v: Value| {
            session(
                &t,
                &mut a,
                &mut |_, _| Some(true),
                &|| false,
                &crate::rpc::null_id(),
                params(v),
            )
            .err()
            .map(|e| e.message)
        };
        let m = go(json!({"head": "nope", "dir": "in"})).unwrap();
        assert!(m.contains("nope"), "{m}");
        let m = go(json!({"head": "syn0", "dir": "sideways"})).unwrap();
        assert!(m.contains("dir") && m.contains("sideways"), "{m}");
        let m = go(json!({"head": "syn0", "dir": "in", "expr": "udp port"})).unwrap();
        assert!(m.starts_with("expr: "), "{m}");
        let m = go(json!({"head": "syn0", "dir": "in", "buffer": 0})).unwrap();
        assert!(m.starts_with("buffer: "), "{m}");
        assert!(!t.registry.head("syn0").unwrap().is_hooked(Dir::In));
    }
}
