//! `pfil-bench study`: Max Laier's pfil lock experiment (seed 001) on the
//! real registry, against the unsynchronized limit and lock/arc-swap
//! baselines, with ministat comparisons, JSON and an SVG chart.

mod matrix;
mod measure;
mod svg;

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pfil_bench::{Strategy, Subject};
use pfil_stats::{compare, DataSet, Report, ReportOptions, Sample, Summary};
use serde::Serialize;

pub use matrix::StudyArgs;
use matrix::{Group, Plan, Work};
use measure::{measure, RunResult};

/// What one strategy measured in one configuration group.
#[derive(Clone, Debug)]
pub struct Measured {
    /// The configuration.
    pub group: Group,
    /// The strategy.
    pub strategy: Strategy,
    /// The discarded first run.
    pub warmup: RunResult,
    /// The kept runs.
    pub runs: Vec<RunResult>,
}

impl Measured {
    /// The kept runs' ns/packet as a ministat sample.
    pub fn sample(&self) -> Sample {
        Sample::from_values(self.runs.iter().map(|r| r.ns_per_packet))
            .expect("at least two finite values per configuration")
    }
}

/// The machine the study ran on.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// CPU model name from /proc/cpuinfo.
    pub cpu_model: String,
    /// Cores available to this process.
    pub cores: usize,
    /// Kernel release.
    pub kernel: String,
    /// /proc/loadavg's 1, 5 and 15 minute load averages at the start.
    pub load_average_start: Option<[f64; 3]>,
    /// The same at the end.
    pub load_average_end: Option<[f64; 3]>,
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn load_average() -> Option<[f64; 3]> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = s.split_whitespace().map(|x| x.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs the study the flags describe; returns what goes to standard output
/// (ministat text, or JSON with `--json`). Writes the SVG if asked.
pub fn run(args: &StudyArgs) -> Result<String, String> {
    let cores = cores();
    let plan = Plan::from_args(args, cores)?;
    let groups = plan.groups();
    let mut machine = Machine {
        cpu_model: cpu_model(),
        cores,
        kernel: kernel(),
        load_average_start: load_average(),
        load_average_end: None,
    };
    let total = plan.total_runs();
    let estimate = match plan.work {
        Work::Millis(ms) => format!(", about {:.0} s", (total as u64 * ms) as f64 / 1000.0),
        Work::Packets(_) => String::new(),
    };
    eprintln!(
        "pfil-bench study: {} configuration groups x {} strategies x {} runs of {} per thread{estimate}",
        groups.len(),
        plan.strategies.len(),
        plan.runs,
        plan.work,
    );
    let bar = progress_bar(total as u64);
    let started = Instant::now();
    let mut results: Vec<Vec<Measured>> = Vec::with_capacity(groups.len());
    for group in &groups {
        bar.set_message(group.to_string());
        results.push(run_group(&plan, group, &bar));
    }
    bar.finish_and_clear();
    let elapsed = started.elapsed();
    machine.load_average_end = load_average();
    if let Some(path) = &args.svg {
        let text = svg::render(&plan, &machine, &results);
        std::fs::write(path, text)
            .map_err(|e| format!("cannot write the SVG to {}: {e}", path.display()))?;
    }
    if let Some(path) = &args.report {
        let text = text_report(args, &plan, &machine, &results, elapsed)?;
        std::fs::write(path, text)
            .map_err(|e| format!("cannot write the report to {}: {e}", path.display()))?;
    }
    if args.json {
        let mut s = serde_json::to_string_pretty(&json_report(&plan, &machine, &results, elapsed))
            .map_err(|e| format!("cannot encode JSON: {e}"))?;
        s.push('\n');
        Ok(s)
    } else {
        text_report(args, &plan, &machine, &results, elapsed)
    }
}

fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    if std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} runs, eta {eta}  {msg}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
    } else {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar
}

/// Measures every strategy of one group. Runs are interleaved (run 1 of
/// every strategy, then run 2, ...) so that a change in machine load
/// during the group hits all strategies alike.
fn run_group(plan: &Plan, group: &Group, bar: &ProgressBar) -> Vec<Measured> {
    let max_workers = group.threads + 1;
    let subjects: Vec<Subject> = plan
        .strategies
        .iter()
        .map(|&s| Subject::new(s, group.build_chain(max_workers), group.threads))
        .collect();
    let writer_hz = group.writer.then_some(plan.writer_hz);
    let mut runs: Vec<Vec<RunResult>> = vec![Vec::with_capacity(plan.runs); subjects.len()];
    for _ in 0..plan.runs {
        for (subject, out) in subjects.iter().zip(&mut runs) {
            out.push(measure(
                subject,
                group.threads,
                group.batch,
                plan.work,
                writer_hz,
            ));
            bar.inc(1);
        }
    }
    plan.strategies
        .iter()
        .zip(runs)
        .map(|(&strategy, mut r)| {
            let warmup = r.remove(0);
            Measured {
                group: *group,
                strategy,
                warmup,
                runs: r,
            }
        })
        .collect()
}

fn mpps(ns: f64) -> f64 {
    1e3 / ns
}

fn limit_median(group: &[Measured]) -> Option<f64> {
    group
        .iter()
        .find(|m| m.strategy == Strategy::Unsync)
        .map(|m| m.sample().median())
}

fn text_report(
    args: &StudyArgs,
    plan: &Plan,
    machine: &Machine,
    results: &[Vec<Measured>],
    elapsed: Duration,
) -> Result<String, String> {
    use std::fmt::Write;
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(
        w,
        "pfil-bench study: {} ({} cores), Linux {}",
        machine.cpu_model, machine.cores, machine.kernel
    );
    let _ = writeln!(
        w,
        "values: ns/packet per thread, {} runs of {} per thread (first discarded); writer {} Hz; baseline {}; {} s; load average {} -> {}",
        plan.runs,
        plan.work,
        plan.writer_hz,
        plan.baseline,
        elapsed.as_secs(),
        fmt_load(machine.load_average_start),
        fmt_load(machine.load_average_end),
    );
    let options = ReportOptions {
        width: args.width.map_or(74, |w| w as usize),
        confidence: plan.confidence,
        plot: !args.no_plot,
        ..ReportOptions::default()
    };
    for group in results {
        let g = &group[0].group;
        let _ = writeln!(w, "\n== {g} ==");
        let sets: Vec<DataSet> = group
            .iter()
            .map(|m| DataSet::new(m.strategy.name(), m.sample()))
            .collect();
        let report = Report::new(&sets, options).map_err(|e| e.to_string())?;
        w.push_str(&report.render());
    }
    let _ = writeln!(w, "\n== summary: median ns/packet per thread ==");
    w.push_str(&summary_table(plan, results));
    Ok(out)
}

fn fmt_load(l: Option<[f64; 3]>) -> String {
    l.map_or("?".into(), |[a, b, c]| format!("{a:.2} {b:.2} {c:.2}"))
}

/// The summary: one line per configuration and strategy.
fn summary_table(plan: &Plan, results: &[Vec<Measured>]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<7} {:>5} {:>5} {:>3} {:>6} {:<13} {:>9} {:>9} {:>9} {:>8} {:>9} {:>8}  vs {} ({}%)",
        "hook",
        "chain",
        "batch",
        "thr",
        "writer",
        "strategy",
        "median",
        "min",
        "max",
        "stddev",
        "Mpps/thr",
        "x limit",
        plan.baseline,
        plan.confidence,
    );
    for group in results {
        let limit = limit_median(group);
        let base = group[0].sample();
        for m in group {
            let g = &m.group;
            let s: Summary = m.sample().summary();
            let ratio = limit.map_or("-".into(), |l| format!("{:.2}", s.median / l));
            let vs = if m.strategy == plan.baseline {
                "(baseline)".to_string()
            } else {
                let c = compare(&base, &m.sample(), plan.confidence);
                if c.significant {
                    format!(
                        "{:+.1}% +/- {:.1}%",
                        c.relative_difference, c.relative_half_width
                    )
                } else {
                    "no difference proven".into()
                }
            };
            let _ = writeln!(
                out,
                "{:<7} {:>5} {:>5} {:>3} {:>6} {:<13} {:>9.2} {:>9.2} {:>9.2} {:>8.2} {:>9.1} {:>8}  {}",
                g.hook_name(),
                g.chain,
                g.batch,
                g.threads,
                if g.writer { "on" } else { "off" },
                m.strategy.name(),
                s.median,
                s.min,
                s.max,
                s.std_dev,
                mpps(s.median),
                ratio,
                vs,
            );
        }
    }
    out
}

/// The JSON document of `--json`.
#[derive(Serialize)]
struct JsonReport {
    tool: &'static str,
    version: &'static str,
    unit: &'static str,
    machine: Machine,
    elapsed_s: f64,
    parameters: JsonParameters,
    configurations: Vec<JsonConfiguration>,
}

#[derive(Serialize)]
struct JsonParameters {
    quick: bool,
    hooks: Vec<&'static str>,
    chains: Vec<usize>,
    batches: Vec<usize>,
    threads: Vec<usize>,
    strategies: Vec<&'static str>,
    writer: Vec<&'static str>,
    writer_hz: f64,
    runs: usize,
    discarded_runs: usize,
    packets_per_run: Option<u64>,
    ms_per_run: Option<u64>,
    confidence: f64,
    baseline: &'static str,
    limit: &'static str,
}

#[derive(Serialize)]
struct JsonConfiguration {
    hook: &'static str,
    chain: usize,
    batch: usize,
    threads: usize,
    writer: bool,
    strategy: &'static str,
    /// ns/packet per thread of the kept runs, in run order.
    ns_per_packet: Vec<f64>,
    warmup_ns_per_packet: f64,
    packets: Vec<u64>,
    median_ns_per_packet: f64,
    min_ns_per_packet: f64,
    max_ns_per_packet: f64,
    mean_ns_per_packet: f64,
    stddev_ns_per_packet: Option<f64>,
    mpps_per_thread: f64,
    limit_median_ns_per_packet: Option<f64>,
    ratio_to_limit: Option<f64>,
    writer_relinks_per_s: Option<f64>,
    vs_baseline: Option<JsonComparison>,
}

#[derive(Serialize)]
struct JsonComparison {
    baseline: &'static str,
    confidence: f64,
    significant: bool,
    median_ratio: f64,
    difference_ns: f64,
    half_width_ns: f64,
    relative_difference_pct: f64,
    relative_half_width_pct: f64,
    pooled_stddev_ns: f64,
    ministat: String,
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

fn json_report(
    plan: &Plan,
    machine: &Machine,
    results: &[Vec<Measured>],
    elapsed: Duration,
) -> JsonReport {
    let mut configurations = Vec::new();
    for group in results {
        let limit = limit_median(group);
        let base = group[0].sample();
        for m in group {
            let g = &m.group;
            let sample = m.sample();
            let s = sample.summary();
            let vs_baseline = (m.strategy != plan.baseline).then(|| {
                let c = compare(&base, &sample, plan.confidence);
                JsonComparison {
                    baseline: plan.baseline.name(),
                    confidence: plan.confidence.percent(),
                    significant: c.significant,
                    median_ratio: s.median / base.median(),
                    difference_ns: c.difference,
                    half_width_ns: c.half_width,
                    relative_difference_pct: c.relative_difference,
                    relative_half_width_pct: c.relative_half_width,
                    pooled_stddev_ns: c.pooled_std_dev,
                    ministat: c.render(),
                }
            });
            // Intervals between relinks over the writer's time: the first
            // relink is at its start.
            let relinks: u64 = m.runs.iter().map(|r| r.relinks.saturating_sub(1)).sum();
            let writer_time: f64 = m.runs.iter().map(|r| r.writer_time.as_secs_f64()).sum();
            configurations.push(JsonConfiguration {
                hook: g.hook_name(),
                chain: g.chain,
                batch: g.batch,
                threads: g.threads,
                writer: g.writer,
                strategy: m.strategy.name(),
                ns_per_packet: sample.values().to_vec(),
                warmup_ns_per_packet: m.warmup.ns_per_packet,
                packets: m.runs.iter().map(|r| r.packets).collect(),
                median_ns_per_packet: s.median,
                min_ns_per_packet: s.min,
                max_ns_per_packet: s.max,
                mean_ns_per_packet: s.mean,
                stddev_ns_per_packet: finite(s.std_dev),
                mpps_per_thread: mpps(s.median),
                limit_median_ns_per_packet: limit,
                ratio_to_limit: limit.map(|l| s.median / l),
                writer_relinks_per_s: g.writer.then(|| relinks as f64 / writer_time.max(1e-9)),
                vs_baseline,
            });
        }
    }
    JsonReport {
        tool: "pfil-bench study",
        version: env!("CARGO_PKG_VERSION"),
        unit: "ns/packet per thread",
        machine: machine.clone(),
        elapsed_s: elapsed.as_secs_f64(),
        parameters: JsonParameters {
            quick: plan.quick,
            hooks: plan.hooks.iter().map(|h| h.name()).collect(),
            chains: plan.chains.clone(),
            batches: plan.batches.clone(),
            threads: plan.threads.clone(),
            strategies: plan.strategies.iter().map(|s| s.name()).collect(),
            writer: plan.writers.iter().map(|w| w.name()).collect(),
            writer_hz: plan.writer_hz,
            runs: plan.runs,
            discarded_runs: 1,
            packets_per_run: match plan.work {
                Work::Packets(n) => Some(n),
                Work::Millis(_) => None,
            },
            ms_per_run: match plan.work {
                Work::Millis(ms) => Some(ms),
                Work::Packets(_) => None,
            },
            confidence: plan.confidence.percent(),
            baseline: plan.baseline.name(),
            limit: Strategy::Unsync.name(),
        },
        configurations,
    }
}
