//! The commands that keep a connection open: `stats --watch`,
//! `capture`, `top`.

use super::*;

/// `stats --watch`: a table per period with packets/s and drops/s per
/// link (from the difference to the previous table), or with `--json` one
/// `stats` result per line.
pub(super) fn watch(
    client: &mut Client,
    params: Value,
    secs: f64,
    count: Option<u64>,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), String> {
    let mut prev: std::collections::HashMap<(String, String, String), (u64, u64)> =
        Default::default();
    every(client, params, ("--watch", secs), count, out, |r, dt| {
        if json {
            format!("{r}\n")
        } else {
            let mut rows = vec![[
                "HEAD", "DIR", "HOOK", "PACKETS", "PKT/S", "DROPPED", "DROP/S",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()];
            let mut seen = std::collections::HashMap::new();
            for h in arr(r, "heads") {
                for d in ["in", "out"] {
                    for l in arr(&h, d) {
                        let key = (text(&h["name"]), d.to_owned(), text(&l["hook"]));
                        let pk = l["packets"].as_u64().unwrap_or(0);
                        let dr = l["dropped"].as_u64().unwrap_or(0);
                        let rate = |now: u64, before: Option<u64>| match (dt, before) {
                            (Some(dt), Some(b)) if dt > 0.0 => {
                                format!("{:.0}", now.saturating_sub(b) as f64 / dt)
                            }
                            _ => "-".to_owned(),
                        };
                        let p = prev.get(&key).copied();
                        rows.push(vec![
                            key.0.clone(),
                            key.1.clone(),
                            key.2.clone(),
                            pk.to_string(),
                            rate(pk, p.map(|x| x.0)),
                            dr.to_string(),
                            rate(dr, p.map(|x| x.1)),
                        ]);
                        seen.insert(key, (pk, dr));
                    }
                }
            }
            prev = seen;
            format!("{}generation {}\n\n", table(&rows), text(&r["generation"]))
        }
    })
}

/// `capture`: stream the pcapng the server sends into `write` (`-`:
/// stdout); Ctrl-C asks the server to stop (the tap is unlinked and the
/// file ends with the counters); the summary goes to stderr.
pub(super) fn capture(
    path: &std::path::Path,
    params: Value,
    write: &std::path::Path,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), String> {
    use base64::Engine;
    let mut file: Box<dyn Write> = if write.as_os_str() == "-" {
        Box::new(std::io::stdout())
    } else {
        Box::new(std::fs::File::create(write).map_err(|e| format!("-w {}: {e}", write.display()))?)
    };
    let res = crate::client::stream(path, "capture", params, "capture.data", |p| {
        let data = base64::engine::general_purpose::STANDARD
            .decode(p["data"].as_str().unwrap_or(""))
            .map_err(|e| format!("capture data: {e}"))?;
        file.write_all(&data)
            .and_then(|()| file.flush())
            .map_err(|e| format!("-w {}: {e}", write.display()))
    })?;
    let res = &res;
    let summary = if json {
        format!("{res}\n")
    } else {
        format!(
            "capture {}: {} frames written ({} reached the tap, {} matched, {} copies dropped for a full buffer; ended: {})\n",
            text(&res["hook"]),
            text(&res["captured"]),
            text(&res["seen"]),
            text(&res["matched"]),
            text(&res["dropped"]),
            text(&res["end"]),
        )
    };
    if write.as_os_str() == "-" {
        eprint!("{summary}");
    } else {
        out.write_all(summary.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// One row of `top`: a link over the last period.
pub(super) struct TopRow {
    head: String,
    dir: &'static str,
    hook: String,
    pps: f64,
    drops: f64,
    ns_per_packet: Option<f64>,
    /// Percent of one CPU: ns/packet times packets/s.
    cpu: f64,
}

/// `top`: a `stats` call per period; rates and costs from the difference
/// to the previous call (cost from all timed batches so far until a period
/// has its own).
pub(super) fn top(
    client: &mut Client,
    params: Value,
    secs: f64,
    count: Option<u64>,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), String> {
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout()) && !json;
    type Key = (String, &'static str, String);
    let mut prev: std::collections::HashMap<Key, [u64; 4]> = Default::default();
    every(client, params, ("--delay", secs), count, out, |r, dt| {
        let mut rows = Vec::new();
        let mut seen = std::collections::HashMap::new();
        for h in arr(r, "heads") {
            for d in ["in", "out"] {
                for l in arr(&h, d) {
                    let k: Key = (text(&h["name"]), d, text(&l["hook"]));
                    let v = |f: &str| l[f].as_u64().unwrap_or(0);
                    let cur = [
                        v("packets"),
                        v("dropped"),
                        v("sampled_packets"),
                        v("sampled_ns"),
                    ];
                    let p = prev.get(&k).copied();
                    let rate = |i: usize| match (dt, p) {
                        (Some(dt), Some(p)) if dt > 0.0 => cur[i].saturating_sub(p[i]) as f64 / dt,
                        _ => 0.0,
                    };
                    let (sp, sn) = match p {
                        Some(p) if cur[2] > p[2] => (cur[2] - p[2], cur[3].saturating_sub(p[3])),
                        _ => (cur[2], cur[3]),
                    };
                    let nspp = (sp > 0).then(|| sn as f64 / sp as f64);
                    let pps = rate(0);
                    rows.push(TopRow {
                        head: k.0.clone(),
                        dir: d,
                        hook: k.2.clone(),
                        pps,
                        drops: rate(1),
                        ns_per_packet: nspp,
                        cpu: nspp.map_or(0.0, |ns| ns * pps / 1e7),
                    });
                    seen.insert(k, cur);
                }
            }
        }
        prev = seen;
        rows.sort_by(|a, b| b.cpu.total_cmp(&a.cpu).then(b.pps.total_cmp(&a.pps)));
        if json {
            let rows: Vec<Value> = rows
                    .iter()
                    .map(|t| {
                        json!({"head": t.head, "dir": t.dir, "hook": t.hook, "packets_per_s": t.pps,
                               "drops_per_s": t.drops, "ns_per_packet": t.ns_per_packet, "cpu_percent": t.cpu})
                    })
                    .collect();
            format!(
                "{}\n",
                json!({"generation": r["generation"], "sampling": r["sampling"], "links": rows})
            )
        } else {
            let total: f64 = rows.iter().map(|t| t.cpu).sum();
            let mut rows_text = vec![["HEAD", "DIR", "HOOK", "PKT/S", "DROP/S", "NS/PKT", "CPU%"]
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()];
            for t in &rows {
                rows_text.push(vec![
                    t.head.clone(),
                    t.dir.to_owned(),
                    t.hook.clone(),
                    format!("{:.0}", t.pps),
                    format!("{:.0}", t.drops),
                    t.ns_per_packet.map_or("-".into(), |v| format!("{v:.1}")),
                    format!("{:.1}", t.cpu),
                ]);
            }
            format!(
                    "{}pfilctl top: generation {}, 1 batch in {} timed, hooks take {total:.1}% of a CPU{}\n{}\n",
                    if tty { "\x1b[H\x1b[2J" } else { "" },
                    text(&r["generation"]),
                    text(&r["sampling"]),
                    if dt.is_none() { " (rates from the next table on)" } else { "" },
                    table(&rows_text),
                )
        }
    })
}

/// Call `stats` every `secs` (`flag` names the option in errors) until
/// `count` calls or an error, writing what `render` makes of each result
/// and the seconds since the previous one (`None` the first time).
pub(super) fn every(
    client: &mut Client,
    params: Value,
    (flag, secs): (&str, f64),
    count: Option<u64>,
    out: &mut dyn Write,
    mut render: impl FnMut(&Value, Option<f64>) -> String,
) -> Result<(), String> {
    if !(secs.is_finite() && secs > 0.0) {
        return Err(format!(
            "{flag} {secs}: the period must be a positive number of seconds"
        ));
    }
    let period = std::time::Duration::from_secs_f64(secs);
    let mut last: Option<std::time::Instant> = None;
    let mut n = 0u64;
    loop {
        let r = client
            .call("stats", params.clone())
            .map_err(|e| e.to_string())?;
        let now = std::time::Instant::now();
        let dt = last.map(|t| now.duration_since(t).as_secs_f64());
        let shown = render(&r, dt);
        out.write_all(shown.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| format!("writing the output: {e}"))?;
        last = Some(now);
        n += 1;
        if count.is_some_and(|c| n >= c) {
            return Ok(());
        }
        std::thread::sleep(period);
    }
}
