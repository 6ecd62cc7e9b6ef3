//! Counters and per-link costs in the OpenMetrics text format
//! (<https://openmetrics.io>, which Prometheus scrapes), rendered from a
//! `stats` result, so `pfilctl stats --openmetrics` and an app's HTTP
//! endpoint print the same.
//!
//! Metric names are stable; every per-link metric has the labels `head`,
//! `dir` (`in`, `out`) and `hook`:
//!
//! | metric | type | what |
//! |---|---|---|
//! | `pfil_link_packets_total` | counter | packets that reached the link |
//! | `pfil_link_bytes_total` | counter | their bytes |
//! | `pfil_link_passed_total` | counter | of those, passed |
//! | `pfil_link_dropped_total` | counter | dropped |
//! | `pfil_link_consumed_total` | counter | consumed |
//! | `pfil_link_faults_total` | counter | panics of the hook on this link |
//! | `pfil_link_sampled_batches_total` | counter | batches timed |
//! | `pfil_link_sampled_packets_total` | counter | packets in the timed batches |
//! | `pfil_link_sampled_seconds_total` | counter | time of the timed batches |
//! | `pfil_link_quarantined` | gauge | 1 while the link is quarantined |
//! | `pfil_generation` | gauge | the configuration's generation |
//! | `pfil_sampling_batches` | gauge | one batch in how many is timed (0: off) |
//!
//! Filters' own statistics ([`pfil::Filter::stats`], the
//! `filter_stats` result, see [`render_with_filters`]) follow, one family
//! per stat name, `pfil_filter_NAME` (`_total` for counters), with the
//! label `hook` and the stat's own labels:
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `pfil_filter_rule_hits_total` | counter | `hook`, `rule` (index or `default`), `text` | packets an `acl` rule marked `count` (or the default action) decided |
//! | `pfil_filter_evictions_total` | counter | `hook` | `ratelimit` buckets evicted for a new key |
//! | `pfil_filter_table_used` | gauge | `hook` | `ratelimit` (`per`) buckets in use |
//! | `pfil_filter_table_slots` | gauge | `hook` | `ratelimit` (`per`) bucket slots of the tables allocated so far (one per worker that ran) |
//! | `pfil_filter_table_bytes` | gauge | `hook` | `ratelimit` (`per`) bytes of those tables |
//!
//! A filter's counters live as long as the filter: `pfilctl set` (a new
//! filter) starts them at 0, which Prometheus reads as a counter reset;
//! an acl rule's count carries over an in-place ruleset swap.
//!
//! A link's cost in Prometheus:
//! `rate(pfil_link_sampled_seconds_total[1m]) / rate(pfil_link_sampled_packets_total[1m])`.
//! Counters of a link start at 0 when it is linked and go when it is
//! unlinked (a new series each time: the labels alone do not tell two
//! links of the same hook on the same head apart over time).
//!
//! [`MetricsServer`] serves the text over HTTP (`pfild --metrics`), with
//! a deadline per request, a bounded number of connections at once, and
//! a shutdown that never waits on a client. It bypasses the control
//! socket's access control: anyone who can reach its address reads the
//! counters and, unless [`FilterExport`] says otherwise, the text of
//! every acl rule marked `count`.

use std::fmt::Write;

use serde_json::Value;

pub mod server;

pub use server::{FilterExport, MetricsOptions, MetricsServer, SHUTDOWN_WAIT};

/// The content type of the text: what an HTTP endpoint answers with.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

const COUNTERS: &[(&str, &str, &str)] = &[
    (
        "packets",
        "pfil_link_packets",
        "Packets that reached the link.",
    ),
    (
        "bytes",
        "pfil_link_bytes",
        "Bytes of the packets that reached the link.",
    ),
    ("passed", "pfil_link_passed", "Packets the link passed."),
    ("dropped", "pfil_link_dropped", "Packets the link dropped."),
    (
        "consumed",
        "pfil_link_consumed",
        "Packets the link's hook consumed.",
    ),
    (
        "faults",
        "pfil_link_faults",
        "Panics of the hook on this link.",
    ),
    (
        "sampled_batches",
        "pfil_link_sampled_batches",
        "Batches of this link that were timed.",
    ),
    (
        "sampled_packets",
        "pfil_link_sampled_packets",
        "Packets in the timed batches.",
    ),
];

/// A label value, escaped as the format asks (backslash, quote, newline).
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Render a `stats` result (see [`crate::stats`]).
pub fn render(stats: &Value) -> String {
    render_with_filters(stats, &Value::Null)
}

/// A metric or label name as the format allows: `[a-zA-Z0-9_]`, other
/// characters replaced by `_`, and not starting with a digit.
fn name(v: &str) -> String {
    let mut n: String = v
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if n.is_empty() || n.starts_with(|c: char| c.is_ascii_digit()) {
        n.insert(0, '_');
    }
    n
}

/// One exposition family of filter stats: its kind, help and samples
/// (labels text, value).
struct Family {
    kind: String,
    help: String,
    samples: Vec<(String, u64)>,
}

/// The filters' families by name, over every hook of a `filter_stats`
/// result. A stat whose kind differs from the first hook's with that
/// name is left out (two families cannot share a name).
fn filter_families(filters: &Value) -> std::collections::BTreeMap<String, Family> {
    let mut fams = std::collections::BTreeMap::<String, Family>::new();
    for h in filters["hooks"].as_array().into_iter().flatten() {
        let hook = h["hook"].as_str().unwrap_or("");
        for st in h["stats"].as_array().into_iter().flatten() {
            let kind = match st["kind"].as_str() {
                Some(k @ ("counter" | "gauge")) => k,
                _ => continue,
            };
            let fam = fams
                .entry(format!(
                    "pfil_filter_{}",
                    name(st["name"].as_str().unwrap_or(""))
                ))
                .or_insert_with(|| Family {
                    kind: kind.to_owned(),
                    help: st["help"].as_str().unwrap_or("").to_owned(),
                    samples: Vec::new(),
                });
            if fam.kind != kind {
                continue;
            }
            for x in st["samples"].as_array().into_iter().flatten() {
                let mut labels = format!("hook=\"{}\"", label(hook));
                for (k, v) in x["labels"].as_object().into_iter().flatten() {
                    let k = match name(k) {
                        k if k == "hook" => "filter_hook".to_owned(),
                        k => k,
                    };
                    let _ = write!(labels, ",{k}=\"{}\"", label(v.as_str().unwrap_or("")));
                }
                fam.samples.push((labels, x["value"].as_u64().unwrap_or(0)));
            }
        }
    }
    fams
}

/// Render a `stats` result (see [`crate::stats`]) and the filters' own
/// statistics of a `filter_stats` result (see [`crate::filter_stats`];
/// `Value::Null`: none), as one exposition.
pub fn render_with_filters(stats: &Value, filters: &Value) -> String {
    let mut links = Vec::new();
    for h in stats["heads"].as_array().into_iter().flatten() {
        let head = h["name"].as_str().unwrap_or("");
        for dir in ["in", "out"] {
            for l in h[dir].as_array().into_iter().flatten() {
                let hook = l["hook"].as_str().unwrap_or("");
                let labels = format!(
                    "head=\"{}\",dir=\"{dir}\",hook=\"{}\"",
                    label(head),
                    label(hook)
                );
                links.push((labels, l));
            }
        }
    }
    let mut s = String::new();
    let u = |v: &Value| v.as_u64().unwrap_or(0);
    for (field, name, help) in COUNTERS {
        let _ = writeln!(s, "# TYPE {name} counter\n# HELP {name} {help}");
        for (labels, l) in &links {
            let _ = writeln!(s, "{name}_total{{{labels}}} {}", u(&l[*field]));
        }
    }
    let name = "pfil_link_sampled_seconds";
    let _ = writeln!(
        s,
        "# TYPE {name} counter\n# UNIT {name} seconds\n# HELP {name} Time of the timed batches of this link."
    );
    for (labels, l) in &links {
        let _ = writeln!(
            s,
            "{name}_total{{{labels}}} {}",
            u(&l["sampled_ns"]) as f64 / 1e9
        );
    }
    let name = "pfil_link_quarantined";
    let _ = writeln!(
        s,
        "# TYPE {name} gauge\n# HELP {name} 1 while the link is quarantined (its hook panicked)."
    );
    for (labels, l) in &links {
        let _ = writeln!(
            s,
            "{name}{{{labels}}} {}",
            u8::from(l["quarantined"] == true)
        );
    }
    let _ = writeln!(
        s,
        "# TYPE pfil_generation gauge\n# HELP pfil_generation The configuration's generation.\npfil_generation {}",
        u(&stats["generation"])
    );
    let _ = writeln!(
        s,
        "# TYPE pfil_sampling_batches gauge\n# HELP pfil_sampling_batches One batch in how many is timed per worker (0: off).\npfil_sampling_batches {}",
        u(&stats["sampling"])
    );
    for (fam, f) in filter_families(filters) {
        let _ = writeln!(
            s,
            "# TYPE {fam} {}\n# HELP {fam} {}",
            f.kind,
            label(&f.help)
        );
        let suffix = if f.kind == "counter" { "_total" } else { "" };
        for (labels, v) in f.samples {
            let _ = writeln!(s, "{fam}{suffix}{{{labels}}} {v}");
        }
    }
    s.push_str("# EOF\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_families_sanitize_names_and_keep_one_kind_per_name() {
        let f = serde_json::json!({"hooks": [
            {"hook": "a:1", "stats": [
                {"name": "rule-hits", "kind": "counter", "help": "h\"q", "samples": [
                    {"labels": {"hook": "x", "9z": "v"}, "value": 1}]},
            ]},
            {"hook": "b:1", "stats": [
                {"name": "rule-hits", "kind": "gauge", "help": "other", "samples": [
                    {"labels": {}, "value": 2}]},
                {"name": "depth", "kind": "gauge", "help": "d", "samples": [
                    {"labels": {}, "value": 3}]},
            ]},
        ]});
        let text = render_with_filters(&serde_json::json!({}), &f);
        for want in [
            "# TYPE pfil_filter_rule_hits counter\n# HELP pfil_filter_rule_hits h\\\"q\n",
            "pfil_filter_rule_hits_total{hook=\"a:1\",_9z=\"v\",filter_hook=\"x\"} 1\n",
        ] {
            assert!(text.contains(want), "{want} not in {text}");
        }
        assert!(
            !text.contains("} 2\n"),
            "b:1's gauge of the counter's name is left out: {text}"
        );
        assert!(
            text.contains("pfil_filter_depth{hook=\"b:1\"} 3\n"),
            "{text}"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
    }
}
