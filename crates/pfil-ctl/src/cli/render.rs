//! The human-readable output of each command: aligned tables and
//! summaries of the server's results.

use super::*;

/// Aligned columns, two spaces apart.
pub(super) fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c + 1 == r.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:w$}  ", w = widths[c]));
            }
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}

pub(crate) fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        Value::Array(a) => a.iter().map(text).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

pub(super) fn arr(v: &Value, key: &str) -> Vec<Value> {
    v.get(key)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

pub(super) fn human(cmd: &Cmd, r: &Value) -> String {
    let generation = r.get("generation").map(text).unwrap_or_default();
    match cmd {
        Cmd::Heads => {
            let mut rows = vec![vec![
                "HEAD".into(),
                "KIND".into(),
                "DIR".into(),
                "CHAIN (walk order)".into(),
            ]];
            for h in arr(r, "heads") {
                for d in arr(&h, "dirs") {
                    let d = text(&d);
                    let chain: Vec<String> = h
                        .pointer(&format!("/chains/{d}"))
                        .and_then(Value::as_array)
                        .map(|c| {
                            c.iter()
                                .map(|l| format!("{}{}", text(&l["hook"]), quarantined(l)))
                                .collect()
                        })
                        .unwrap_or_default();
                    let chain = if chain.is_empty() {
                        "-".to_owned()
                    } else {
                        chain.join(" -> ")
                    };
                    rows.push(vec![text(&h["name"]), text(&h["kind"]), d, chain]);
                }
            }
            format!("{}generation {generation}\n", table(&rows))
        }
        Cmd::Hooks => {
            let mut rows = vec![vec![
                "HOOK".into(),
                "KIND".into(),
                "DIRS".into(),
                "FAULTS".into(),
                "LINKED".into(),
            ]];
            for h in arr(r, "hooks") {
                let linked: Vec<String> = arr(&h, "linked")
                    .iter()
                    .map(|l| format!("{} {}{}", text(&l["head"]), text(&l["dir"]), quarantined(l)))
                    .collect();
                rows.push(vec![
                    text(&h["name"]),
                    text(&h["kind"]),
                    text(&h["dirs"]),
                    text(&h["faults"]),
                    if linked.is_empty() {
                        "-".into()
                    } else {
                        linked.join(", ")
                    },
                ]);
            }
            format!("{}generation {generation}\n", table(&rows))
        }
        Cmd::Stats { .. } => {
            let cols = [
                "packets", "bytes", "passed", "dropped", "consumed", "faults",
            ];
            let mut rows = vec![["HEAD", "DIR", "HOOK"]
                .iter()
                .map(|s| s.to_string())
                .chain(cols.iter().map(|c| c.to_uppercase()))
                .collect::<Vec<_>>()];
            for h in arr(r, "heads") {
                for d in ["in", "out"] {
                    for l in arr(&h, d) {
                        let mut row = vec![text(&h["name"]), d.to_owned(), text(&l["hook"])];
                        row.extend(cols.iter().map(|c| text(&l[*c])));
                        rows.push(row);
                    }
                }
            }
            format!("{}generation {generation}\n", table(&rows))
        }
        Cmd::Rules { .. } => rules(r),
        Cmd::States { kill: true, .. } => {
            let mut o = String::new();
            for h in arr(r, "hooks") {
                o.push_str(&format!(
                    "hook {}: {} states killed\n",
                    text(&h["hook"]),
                    text(&h["killed"])
                ));
            }
            o
        }
        Cmd::States { .. } => states(r),
        Cmd::Map { .. } => crate::xdpmaps::human(r),
        Cmd::Reload => {
            let diff = arr(r, "diff");
            let mut s = format!(
                "reloaded {}: generation {} -> {generation}, {} change(s)\n",
                text(&r["file"]),
                text(&r["base"]),
                diff.len()
            );
            for d in &diff {
                s += &format!("  {}\n", text(d));
            }
            let restart = arr(r, "restart_needed");
            if !restart.is_empty() {
                let r: Vec<String> = restart.iter().map(text).collect();
                s += &format!("needs a restart, left as running: {}\n", r.join(", "));
            }
            if !arr(r, "reaped").is_empty() {
                s += &reaped(r);
            }
            s
        }
        Cmd::Version => format!(
            "pfilctl {}, protocol {}; server: {} protocol {}, methods {}\n",
            env!("CARGO_PKG_VERSION"),
            crate::PROTOCOL_VERSION,
            text(&r["app"]),
            text(&r["protocol"]),
            arr(r, "methods")
                .iter()
                .map(text)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Cmd::Add { spec, .. } => format!("added {spec} (generation {generation})\n{}", reaped(r)),
        Cmd::Set { hook, .. } if r["in_place"] == json!(true) => format!(
            "reconfigured {hook} in place, its counters kept (generation {generation})\n{}",
            reaped(r)
        ),
        Cmd::Set { hook, .. } => format!(
            "reconfigured {hook} (generation {generation})\n{}",
            reaped(r)
        ),
        Cmd::Del { hook } => format!(
            "removed {hook} (generation {generation}){}{}",
            retired(r),
            reaped(r)
        ),
        Cmd::Link {
            dir, hook, head, ..
        } => format!(
            "linked {hook} to {head} {} (generation {generation})\n{}",
            dir.name(),
            reaped(r)
        ),
        Cmd::Unlink { dir, hook, head } => format!(
            "unlinked {hook} from {head} {} (generation {generation}){}{}",
            dir.name(),
            retired(r),
            reaped(r)
        ),
        Cmd::Reap { .. } if arr(r, "reaped").is_empty() => {
            format!("no quarantined link (generation {generation})\n")
        }
        Cmd::Reap { .. } => format!("reaped (generation {generation}):\n{}", reaped(r)),
        Cmd::Show => text(&r["toml"]),
        Cmd::Top { .. } | Cmd::Capture { .. } | Cmd::Trace { .. } => String::new(),
        Cmd::Sampling { .. } => match r["sampling"].as_u64() {
            Some(0) => "sampling: off (no link is timed)\n".to_owned(),
            _ => format!(
                "sampling: 1 batch in {} timed per worker and link\n",
                text(&r["sampling"])
            ),
        },
        Cmd::Apply { dry_run, .. } => {
            let diff = arr(r, "diff");
            let mut s: String = diff.iter().map(|l| format!("{}\n", text(l))).collect();
            let base = text(&r["base"]);
            s += &match (diff.len(), dry_run) {
                (n, false) if n > 0 && r["complete"] == json!(false) => format!(
                    "applied {n} change(s) in one transaction: generation {base} -> {generation} \
                     (a datapath thread still held the previous one at the answer)\n"
                ),
                (0, _) => format!(
                    "no changes: the running configuration equals the file (generation {base})\n"
                ),
                (n, true) => format!(
                    "dry run: {n} change(s) checked against generation {base}, nothing applied\n"
                ),
                (n, false) => format!(
                    "applied {n} change(s) in one transaction: generation {base} -> {generation}\n"
                ),
            };
            s
        }
    }
}

/// The end of a write's line: the final counters of the links it removed
/// (one per line), or that the grace period had not passed yet.
/// `rules`: the `rule_hits` of every hook as one table (HOOK, RULE,
/// HITS, TEXT, in rule order), then every other stat (HOOK, STAT,
/// LABELS, VALUE).
/// `pfilctl states` words: the hook (a first word that does not start an
/// expression) and the expression (the rest, joined), each if given.
pub(super) fn states_args(args: &[String]) -> (Option<&str>, Option<String>) {
    let (hook, rest) = match args.first() {
        Some(w) if !pfil_filters::ct::expr::KEYWORDS.contains(&w.as_str()) => {
            (Some(w.as_str()), &args[1..])
        }
        _ => (None, args),
    };
    let expr = (!rest.is_empty()).then(|| rest.join(" "));
    (hook, expr)
}

/// `states`: one table per `ct` hook, originator first.
pub(super) fn states(r: &Value) -> String {
    let mut o = String::new();
    for h in arr(r, "hooks") {
        let mut rows = vec![[
            "PROTO", "SRC", "DST", "STATE", "AGE", "EXPIRES", "PACKETS", "BYTES", "KEPT",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()];
        let ep = |a: &Value, p: &Value| {
            let a = text(a);
            if a.contains(':') {
                format!("[{a}]:{}", text(p))
            } else {
                format!("{a}:{}", text(p))
            }
        };
        for x in arr(&h, "states") {
            let proto = match x["proto"].as_u64() {
                Some(6) => "tcp".to_owned(),
                Some(17) => "udp".to_owned(),
                Some(1) => "icmp".to_owned(),
                Some(58) => "icmp6".to_owned(),
                _ => text(&x["proto"]),
            };
            rows.push(vec![
                proto,
                ep(&x["src"], &x["sport"]),
                ep(&x["dst"], &x["dport"]),
                text(&x["state"]),
                format!("{}s", text(&x["age"])),
                format!("{}s", text(&x["expires"])),
                format!("{}:{}", text(&x["packets"][0]), text(&x["packets"][1])),
                format!("{}:{}", text(&x["bytes"][0]), text(&x["bytes"][1])),
                if x["kept"] == true { "yes" } else { "" }.to_owned(),
            ]);
        }
        let total = x_total(&h);
        o.push_str(&format!("hook {}: {total} states\n", text(&h["hook"])));
        if rows.len() > 1 {
            o.push_str(&table(&rows));
        }
        if (rows.len() - 1) < total as usize {
            o.push_str(&format!(
                "({} listed, --limit N lists more)\n",
                rows.len() - 1
            ));
        }
    }
    o
}

pub(super) fn x_total(h: &Value) -> u64 {
    h["total"].as_u64().unwrap_or(0)
}

pub(super) fn rules(r: &Value) -> String {
    let mut hits = vec![vec![
        "HOOK".to_owned(),
        "RULE".into(),
        "HITS".into(),
        "TEXT".into(),
    ]];
    let mut other = vec![vec![
        "HOOK".to_owned(),
        "STAT".into(),
        "LABELS".into(),
        "VALUE".into(),
    ]];
    for h in arr(r, "hooks") {
        for st in arr(&h, "stats") {
            let is_hits = st["name"] == "rule_hits";
            for x in arr(&st, "samples") {
                if is_hits {
                    hits.push(vec![
                        text(&h["hook"]),
                        text(&x["labels"]["rule"]),
                        text(&x["value"]),
                        text(&x["labels"]["text"]),
                    ]);
                    continue;
                }
                let labels: Vec<String> = x["labels"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| format!("{k}={}", text(v)))
                    .collect();
                other.push(vec![
                    text(&h["hook"]),
                    text(&st["name"]),
                    if labels.is_empty() {
                        "-".into()
                    } else {
                        labels.join(",")
                    },
                    text(&x["value"]),
                ]);
            }
        }
    }
    let mut s = String::new();
    if hits.len() > 1 {
        s += &table(&hits);
    }
    if other.len() > 1 {
        if !s.is_empty() {
            s.push('\n');
        }
        s += &table(&other);
    }
    if s.is_empty() {
        s = "no hook keeps filter statistics\n".into();
    }
    let generation = r.get("generation").map(text).unwrap_or_default();
    format!("{s}generation {generation}\n")
}

/// How `heads` and `hooks` mark a quarantined link: a fail-closed one
/// drops everything until `pfilctl reap`; a fail-open one is skipped until
/// the next change.
pub(super) fn quarantined(l: &Value) -> &'static str {
    match (l["quarantined"] == json!(true), l["fail"].as_str()) {
        (false, _) => "",
        (true, Some("closed")) => " (QUARANTINED, fail closed: dropping all until `pfilctl reap`)",
        (true, _) => " (quarantined, fail open: skipped)",
    }
}

/// The quarantined links a write reaped, with their final counters, one
/// per line (nothing if none).
pub(super) fn reaped(r: &Value) -> String {
    let mut s = String::new();
    for l in arr(r, "reaped") {
        s += &format!(
            "  reaped quarantined {} {} {} (fail {}): final packets {} bytes {} passed {} dropped {} consumed {} faults {}\n",
            text(&l["head"]),
            text(&l["dir"]),
            text(&l["hook"]),
            text(&l["fail"]),
            text(&l["packets"]),
            text(&l["bytes"]),
            text(&l["passed"]),
            text(&l["dropped"]),
            text(&l["consumed"]),
            text(&l["faults"]),
        );
    }
    s
}

pub(super) fn retired(r: &Value) -> String {
    let mut s = String::from("\n");
    for l in arr(r, "retired") {
        s += &format!(
            "  {} {} {}: final packets {} bytes {} passed {} dropped {} consumed {}\n",
            text(&l["head"]),
            text(&l["dir"]),
            text(&l["hook"]),
            text(&l["packets"]),
            text(&l["bytes"]),
            text(&l["passed"]),
            text(&l["dropped"]),
            text(&l["consumed"]),
        );
    }
    if r["complete"] == json!(false) {
        s += "  (a datapath thread still ran the previous chain at the answer: counters may still grow)\n";
    }
    s
}
