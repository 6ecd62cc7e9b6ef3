//! The events `xdp` hooks' programs write (PROTOCOL.md, `map_events`):
//! the records of a perf event array (`bpf_perf_event_output`) or a ring
//! buffer (`bpf_ringbuf_output`), taken out of the hook's map, and
//! `pfilctl map HOOK NAME event_pipe`, which follows them as bpftool's
//! `map event_pipe` does.

use std::io::Write;

use pfil::Registry;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::rpc::{code, RpcError};
use crate::Client;

/// Params of `map_events`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventParams {
    hook: String,
    map: String,
    #[serde(default)]
    limit: Option<usize>,
}

/// Records one `map_events` reply takes out by default, and at most.
pub const DEFAULT_EVENT_LIMIT: usize = 1000;
/// Most records one `map_events` reply takes out.
pub const MAX_EVENT_LIMIT: usize = 10_000;

/// How long `event_pipe` waits between two looks at an empty map.
const POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// `map_events`: take up to `limit` records out of the map.
pub(crate) fn take(reg: &Registry, p: EventParams) -> Result<Value, RpcError> {
    let limit = p.limit.unwrap_or(DEFAULT_EVENT_LIMIT);
    if limit == 0 || limit > MAX_EVENT_LIMIT {
        return Err(RpcError::params(format!(
            "limit: 1 to {MAX_EVENT_LIMIT} records a reply, not {limit}"
        )));
    }
    crate::xdpmaps::with_map(reg, &p.hook, Some(&p.map), |_, m| {
        let Some(m) = m else {
            return Err(RpcError::params("map: missing"));
        };
        let d = m.drain_events(limit).map_err(|e| {
            RpcError::new(code::REGISTRY, "map_error", format!("map `{}`: {e}", p.map))
        })?;
        let events: Vec<Value> = d
            .events
            .iter()
            .map(|e| {
                let mut v = json!({"data": crate::xdpmaps::bytes(&e.data)});
                if let Some(s) = e.slot {
                    v["slot"] = json!(s);
                }
                v
            })
            .collect();
        let lost: Vec<Value> = d
            .lost
            .iter()
            .map(|(slot, n)| json!({"slot": slot, "records": n}))
            .collect();
        Ok(json!({
            "hook": p.hook,
            "map": p.map,
            "type": m.kind().name(),
            "events": events,
            "lost": lost,
        }))
    })
}

/// The `--count N` (or `-n N`) written after `event_pipe`, where the
/// operation's words take it (`map HOOK NAME event_pipe --count 3`).
///
/// # Errors
/// Other words, or a count that is not a number.
pub(crate) fn count_in(op: &[String]) -> Result<Option<u64>, String> {
    match op {
        [_] => Ok(None),
        [_, flag, n] if flag == "--count" || flag == "-n" => n
            .parse()
            .map(Some)
            .map_err(|_| format!("event_pipe {flag}: a number of records, not `{n}`")),
        _ => Err(format!(
            "event_pipe takes only --count N, not `{}`",
            op[1..].join(" ")
        )),
    }
}

/// One record as `event_pipe` prints it: a header, then its bytes 16 to
/// a line as bpftool prints them.
fn human(e: &Value, o: &mut String) {
    let bytes: Vec<&str> = e["data"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match e["slot"].as_u64() {
        Some(s) => o.push_str(&format!(
            "== slot {s} (worker {s}): {} bytes ==\n",
            bytes.len()
        )),
        None => o.push_str(&format!("== {} bytes ==\n", bytes.len())),
    }
    for line in bytes.chunks(16) {
        let l: Vec<&str> = line.iter().map(|b| b.trim_start_matches("0x")).collect();
        o.push_str(&l.join(" "));
        o.push('\n');
    }
}

/// `pfilctl map HOOK NAME event_pipe`: print the records as they come,
/// until `count` of them (or for ever, if `None`); `--json`: one object
/// a record (or a loss) a line.
pub(crate) fn follow(
    client: &mut Client,
    params: Value,
    count: Option<u64>,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), String> {
    let mut seen = 0u64;
    loop {
        let mut p = params.clone();
        if let Some(c) = count {
            p["limit"] = json!((c - seen).min(MAX_EVENT_LIMIT as u64));
        }
        let r = client.call("map_events", p).map_err(|e| e.to_string())?;
        let mut o = String::new();
        for l in r["lost"].as_array().into_iter().flatten() {
            if json {
                o.push_str(&format!(
                    "{}\n",
                    json!({"lost": l["records"], "slot": l["slot"]})
                ));
            } else {
                o.push_str(&format!(
                    "lost {} records (slot {}: the ring was full)\n",
                    l["records"], l["slot"]
                ));
            }
        }
        let events = r["events"].as_array().cloned().unwrap_or_default();
        for e in &events {
            if json {
                o.push_str(&format!("{e}\n"));
            } else {
                human(e, &mut o);
            }
        }
        out.write_all(o.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| format!("writing the output: {e}"))?;
        seen += events.len() as u64;
        if count.is_some_and(|c| seen >= c) {
            return Ok(());
        }
        if events.is_empty() {
            std::thread::sleep(POLL);
        }
    }
}
