//! The study's flags and the matrix of configurations they select.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use clap::Args;
use pfil::Filter;
use pfil_bench::Strategy;
use pfil_stats::Confidence;
use serde::Serialize;

/// Longest chain accepted by `--chain`.
pub const MAX_CHAIN: usize = 1024;
/// Largest batch accepted by `--batch`.
pub const MAX_BATCH: usize = 65_536;
/// Most reader threads accepted by `--threads`.
pub const MAX_THREADS: usize = 1024;
/// Highest writer rate accepted by `--writer-hz`.
pub const MAX_WRITER_HZ: f64 = 1_000_000.0;
/// Fewest runs accepted by `--runs`: one warm-up plus the two values a
/// Student's t comparison needs.
pub const MIN_RUNS: usize = 3;

/// Default duration of one run of the full study, per thread.
pub const FULL_MS: u64 = 20;
/// Default duration of one run with `--quick`, per thread.
pub const QUICK_MS: u64 = 40;
/// Default number of runs of the full study (the first is discarded).
pub const FULL_RUNS: usize = 10;
/// Default number of runs with `--quick` (the first is discarded).
pub const QUICK_RUNS: usize = 5;

/// A hook of the lock study (seed 001): what each packet pays inside the
/// hook, on top of what the chain's publication costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HookKind {
    /// Does nothing and passes.
    Null,
    /// Takes a `std::sync::Mutex` per packet.
    Mutex,
    /// Takes a `std::sync::RwLock` read lock per packet.
    Rwlock,
    /// The read-mostly lock: a per-worker reader slot (FreeBSD's rmlock).
    Brlock,
    /// An epoch read section (crossbeam-epoch pin) per packet.
    Epoch,
    /// Counts packets and bytes in per-worker slots.
    Count,
}

impl HookKind {
    /// Every hook, in the order of the study's tables.
    pub const ALL: [HookKind; 6] = [
        HookKind::Null,
        HookKind::Mutex,
        HookKind::Rwlock,
        HookKind::Brlock,
        HookKind::Epoch,
        HookKind::Count,
    ];

    /// The hooks of the full study: Laier's null, mutex, rwlock and
    /// read-mostly hooks plus the counting hook.
    pub const STUDY: [HookKind; 5] = [
        HookKind::Null,
        HookKind::Mutex,
        HookKind::Rwlock,
        HookKind::Brlock,
        HookKind::Count,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            HookKind::Null => "null",
            HookKind::Mutex => "mutex",
            HookKind::Rwlock => "rwlock",
            HookKind::Brlock => "brlock",
            HookKind::Epoch => "epoch",
            HookKind::Count => "count",
        }
    }

    /// A fresh hook of this kind for a registry with `max_workers` worker
    /// slots (each hook of a chain is its own instance, with its own lock).
    pub fn build(self, max_workers: usize) -> Arc<dyn Filter> {
        match self {
            HookKind::Null => Arc::new(pfil_filters::Null),
            HookKind::Mutex => Arc::new(pfil_bench::MutexHook::new()),
            HookKind::Rwlock => Arc::new(pfil_bench::RwLockHook::new()),
            HookKind::Brlock => Arc::new(pfil_bench::BrLockHook::new(max_workers)),
            HookKind::Epoch => Arc::new(pfil_bench::EpochHook::new()),
            HookKind::Count => Arc::new(pfil_filters::Count::new(max_workers)),
        }
    }
}

impl fmt::Display for HookKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for HookKind {
    type Err = String;

    /// A hook name; `read-mostly` and `rmlock` are accepted for `brlock`.
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if t == "read-mostly" || t == "rmlock" {
            return Ok(HookKind::Brlock);
        }
        HookKind::ALL
            .into_iter()
            .find(|h| h.name() == t)
            .ok_or_else(|| {
                let names: Vec<_> = HookKind::ALL.iter().map(|h| h.name()).collect();
                format!(
                    "unknown hook `{s}`; expected one of {} (or read-mostly for brlock)",
                    names.join(", ")
                )
            })
    }
}

/// Whether a background writer republishes the chain during a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Writer {
    /// No writer.
    Off,
    /// A writer relinking at `--writer-hz`.
    On,
}

impl Writer {
    /// `off` or `on`.
    pub fn name(self) -> &'static str {
        match self {
            Writer::Off => "off",
            Writer::On => "on",
        }
    }
}

impl FromStr for Writer {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "off" => Ok(Writer::Off),
            "on" => Ok(Writer::On),
            _ => Err(format!("unknown writer setting `{s}`; expected off or on")),
        }
    }
}

/// How much work one run does on each reader thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// A fixed number of packets per thread (rounded up to whole batches).
    Packets(u64),
    /// A fixed duration per thread, in milliseconds.
    Millis(u64),
}

impl fmt::Display for Work {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Work::Packets(n) => write!(f, "{n} packets"),
            Work::Millis(ms) => write!(f, "{ms} ms"),
        }
    }
}

fn parse_count(s: &str, what: &str, min: usize, max: usize) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a {what} (a whole number {min}..={max})"))?;
    if n < min || n > max {
        return Err(format!("{what} {n} is out of range {min}..={max}"));
    }
    Ok(n)
}

/// Parses one `--chain` entry.
pub fn parse_chain(s: &str) -> Result<usize, String> {
    parse_count(s, "chain length", 0, MAX_CHAIN)
}

/// Parses one `--batch` entry.
pub fn parse_batch(s: &str) -> Result<usize, String> {
    parse_count(s, "batch size", 1, MAX_BATCH)
}

/// Parses one `--threads` entry.
pub fn parse_threads(s: &str) -> Result<usize, String> {
    parse_count(s, "thread count", 1, MAX_THREADS)
}

/// Parses `--runs`.
pub fn parse_runs(s: &str) -> Result<usize, String> {
    parse_count(s, "number of runs", MIN_RUNS, 100_000)
}

/// Parses `--packets`.
pub fn parse_packets(s: &str) -> Result<u64, String> {
    parse_count(s, "packet count", 1, usize::MAX).map(|n| n as u64)
}

/// Parses `--ms`.
pub fn parse_ms(s: &str) -> Result<u64, String> {
    parse_count(s, "run duration in ms", 1, 3_600_000).map(|n| n as u64)
}

/// Parses `--writer-hz`.
pub fn parse_writer_hz(s: &str) -> Result<f64, String> {
    let hz: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a rate in Hz"))?;
    if !(hz > 0.0 && hz <= MAX_WRITER_HZ) {
        return Err(format!(
            "writer rate {s} Hz is out of range (above 0, at most {MAX_WRITER_HZ})"
        ));
    }
    Ok(hz)
}

/// Options of `pfil-bench study`.
#[derive(Debug, Args)]
#[command(after_help = "\
Runs Max Laier's pfil lock experiment (seed 001) on the real registry: each hook \
in chains of each length, each batch size, 1..N reader threads, with and without \
a background writer relinking the chain, under every chain-publishing strategy: \
epoch (the pfil registry), unsync (no synchronization: the limit), the chain \
behind std RwLock/Mutex per packet or per batch, and arc-swap per batch. \
Each configuration runs R times (the first is discarded as warm-up, like the \
seeds); values are ns per packet per thread. Each strategy is compared with the \
baseline's runs in the same configuration with ministat's Student's t test.

Lists are comma-separated, e.g. --hooks null,count --chain 1,4. \
Flags given with --quick override its reduced matrix.")]
pub struct StudyArgs {
    /// Reduced matrix that finishes in well under a minute on 2 cores:
    /// hooks null,count; chain 1,4; batch 32; threads 1 and every core;
    /// writer off,on; strategies unsync,epoch,rwlock-pkt,mutex-pkt,
    /// arcswap-batch; 5 runs of 40 ms.
    #[arg(long)]
    pub quick: bool,

    /// Hooks: null, mutex, rwlock, brlock (read-mostly), epoch, count
    /// [default: null,mutex,rwlock,brlock,count].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub hooks: Option<Vec<HookKind>>,

    /// Chain lengths (hooks per chain; 0 runs the empty chain once)
    /// [default: 0,1,4,16].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_chain)]
    pub chain: Option<Vec<usize>>,

    /// Batch sizes (packets per run of the chain) [default: 1,32,256].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_batch)]
    pub batch: Option<Vec<usize>>,

    /// Reader thread counts [default: 1 to the number of cores].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_threads)]
    pub threads: Option<Vec<usize>>,

    /// Strategies: unsync, epoch, arcswap-batch, rwlock-batch, mutex-batch,
    /// rwlock-pkt, mutex-pkt [default: all].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub strategies: Option<Vec<Strategy>>,

    /// Background writer: off, on, or both [default: off,on].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub writer: Option<Vec<Writer>>,

    /// Relinks per second of the background writer.
    #[arg(long, value_name = "HZ", default_value = "1000", value_parser = parse_writer_hz)]
    pub writer_hz: f64,

    /// Runs per configuration, the first discarded as warm-up
    /// [default: 10; 5 with --quick].
    #[arg(long, value_name = "N", value_parser = parse_runs)]
    pub runs: Option<usize>,

    /// Packets per thread in each run (instead of a duration).
    #[arg(long, value_name = "N", value_parser = parse_packets, conflicts_with = "ms")]
    pub packets: Option<u64>,

    /// Duration of each run per thread, in ms [default: 20; 40 with --quick].
    #[arg(long, value_name = "MS", value_parser = parse_ms)]
    pub ms: Option<u64>,

    /// Confidence level of the comparisons: 80, 90, 95, 98, 99 or 99.5.
    #[arg(long, value_name = "LEVEL", default_value = "95")]
    pub confidence: Confidence,

    /// The strategy every other one is compared with (must be among
    /// --strategies).
    #[arg(long, value_name = "STRATEGY", default_value = "unsync")]
    pub baseline: Strategy,

    /// Print JSON to standard output instead of the ministat text.
    #[arg(long)]
    pub json: bool,

    /// Also write the ministat text report to FILE (useful with --json).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,

    /// Also write an SVG chart of ns/packet by strategy and threads.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,

    /// Leave the ASCII-art plots out of the ministat text.
    #[arg(long)]
    pub no_plot: bool,

    /// Width of the ministat plots [default: 74].
    #[arg(long, value_name = "WIDTH", value_parser = clap::value_parser!(u64).range(2..=1000))]
    pub width: Option<u64>,
}

/// One configuration group: everything but the strategy. Each strategy
/// runs in every group and is compared within it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Group {
    /// The hook (`None` for the empty chain).
    pub hook: Option<HookKind>,
    /// Hooks in the chain.
    pub chain: usize,
    /// Packets per batch.
    pub batch: usize,
    /// Reader threads.
    pub threads: usize,
    /// Whether the background writer runs.
    pub writer: bool,
}

impl Group {
    /// The hook's name, `-` for the empty chain.
    pub fn hook_name(&self) -> &'static str {
        self.hook.map_or("-", HookKind::name)
    }

    /// The hooks of this group's chain, fresh instances.
    pub fn build_chain(&self, max_workers: usize) -> Vec<Arc<dyn Filter>> {
        match self.hook {
            Some(h) => (0..self.chain).map(|_| h.build(max_workers)).collect(),
            None => Vec::new(),
        }
    }
}

impl fmt::Display for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "hook {} x{}, batch {}, {} thread{}, writer {}",
            self.hook_name(),
            self.chain,
            self.batch,
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            if self.writer { "on" } else { "off" }
        )
    }
}

/// The resolved study: every flag filled in and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Hooks, in the order given.
    pub hooks: Vec<HookKind>,
    /// Chain lengths, ascending.
    pub chains: Vec<usize>,
    /// Batch sizes, ascending.
    pub batches: Vec<usize>,
    /// Thread counts, ascending.
    pub threads: Vec<usize>,
    /// Strategies, the baseline first.
    pub strategies: Vec<Strategy>,
    /// Writer settings, off first.
    pub writers: Vec<Writer>,
    /// Relinks per second when the writer runs.
    pub writer_hz: f64,
    /// Runs per configuration, including the discarded warm-up.
    pub runs: usize,
    /// Work per run and thread.
    pub work: Work,
    /// Confidence level of the comparisons.
    pub confidence: Confidence,
    /// The strategy compared against.
    pub baseline: Strategy,
    /// Whether this is the `--quick` matrix.
    pub quick: bool,
}

fn sorted_unique<T: Ord + Copy>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v.dedup();
    v
}

fn unique_in_order<T: PartialEq + Copy>(v: Vec<T>) -> Vec<T> {
    let mut out = Vec::with_capacity(v.len());
    for x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

impl Plan {
    /// Resolves the flags on a machine with `cores` cores: fills in the
    /// defaults (the full study's or `--quick`'s), sorts and deduplicates
    /// the lists, and checks that the baseline is among the strategies.
    pub fn from_args(args: &StudyArgs, cores: usize) -> Result<Plan, String> {
        let cores = cores.max(1);
        let quick = args.quick;
        let hooks = match &args.hooks {
            Some(h) => unique_in_order(h.clone()),
            None if quick => vec![HookKind::Null, HookKind::Count],
            None => HookKind::STUDY.to_vec(),
        };
        let chains = sorted_unique(match &args.chain {
            Some(c) => c.clone(),
            None if quick => vec![1, 4],
            None => vec![0, 1, 4, 16],
        });
        let batches = sorted_unique(match &args.batch {
            Some(b) => b.clone(),
            None if quick => vec![32],
            None => vec![1, 32, 256],
        });
        let threads = sorted_unique(match &args.threads {
            Some(t) => t.clone(),
            None if quick => vec![1, cores],
            None => (1..=cores).collect(),
        });
        let mut strategies = unique_in_order(match &args.strategies {
            Some(s) => s.clone(),
            None if quick => vec![
                Strategy::Unsync,
                Strategy::Epoch,
                Strategy::RwLockPacket,
                Strategy::MutexPacket,
                Strategy::ArcSwapBatch,
            ],
            None => Strategy::ALL.to_vec(),
        });
        let writers = sorted_unique(match &args.writer {
            Some(w) => w.clone(),
            None => vec![Writer::Off, Writer::On],
        });
        let Some(pos) = strategies.iter().position(|&s| s == args.baseline) else {
            let names: Vec<_> = strategies.iter().map(|s| s.name()).collect();
            return Err(format!(
                "--baseline {} is not among the strategies ({}); add it to --strategies",
                args.baseline,
                names.join(",")
            ));
        };
        let baseline = strategies.remove(pos);
        strategies.insert(0, baseline);
        if strategies.len() > pfil_stats::MAX_DATA_SETS {
            // Cannot happen with 7 strategies, but ministat's limit is real.
            return Err(format!(
                "at most {} strategies can be compared at once",
                pfil_stats::MAX_DATA_SETS
            ));
        }
        if hooks.is_empty() && chains.iter().any(|&c| c > 0) {
            return Err("--hooks is empty".into());
        }
        let runs = args
            .runs
            .unwrap_or(if quick { QUICK_RUNS } else { FULL_RUNS });
        let work = match (args.packets, args.ms) {
            (Some(p), _) => Work::Packets(p),
            (None, Some(ms)) => Work::Millis(ms),
            (None, None) => Work::Millis(if quick { QUICK_MS } else { FULL_MS }),
        };
        Ok(Plan {
            hooks,
            chains,
            batches,
            threads,
            strategies,
            writers,
            writer_hz: args.writer_hz,
            runs,
            work,
            confidence: args.confidence,
            baseline,
            quick,
        })
    }

    /// Every configuration group, in report order: hook, chain, batch,
    /// writer, threads. The empty chain does not depend on the hook, so it
    /// appears once (hook `-`), before the hooks.
    pub fn groups(&self) -> Vec<Group> {
        let mut out = Vec::new();
        let mut push = |hook: Option<HookKind>, chain: usize| {
            for &batch in &self.batches {
                for &writer in &self.writers {
                    for &threads in &self.threads {
                        out.push(Group {
                            hook,
                            chain,
                            batch,
                            threads,
                            writer: writer == Writer::On,
                        });
                    }
                }
            }
        };
        if self.chains.contains(&0) {
            push(None, 0);
        }
        for &hook in &self.hooks {
            for &chain in self.chains.iter().filter(|&&c| c > 0) {
                push(Some(hook), chain);
            }
        }
        out
    }

    /// Number of timed runs the plan makes.
    pub fn total_runs(&self) -> usize {
        self.groups().len() * self.strategies.len() * self.runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        study: StudyArgs,
    }

    fn parse(args: &[&str]) -> Result<StudyArgs, String> {
        Cli::try_parse_from(std::iter::once("study").chain(args.iter().copied()))
            .map(|c| c.study)
            .map_err(|e| e.to_string())
    }

    fn plan(args: &[&str], cores: usize) -> Result<Plan, String> {
        Plan::from_args(&parse(args)?, cores)
    }

    #[test]
    fn full_defaults_are_the_issue_matrix() {
        let p = plan(&[], 2).unwrap();
        assert_eq!(p.hooks, HookKind::STUDY.to_vec());
        assert_eq!(p.chains, vec![0, 1, 4, 16]);
        assert_eq!(p.batches, vec![1, 32, 256]);
        assert_eq!(p.threads, vec![1, 2]);
        assert_eq!(p.strategies.len(), 7);
        assert_eq!(p.strategies[0], Strategy::Unsync);
        assert_eq!(p.writers, vec![Writer::Off, Writer::On]);
        assert_eq!(p.runs, FULL_RUNS);
        assert_eq!(p.work, Work::Millis(FULL_MS));
        assert_eq!(p.writer_hz, 1000.0);
        assert_eq!(p.confidence, Confidence::P95);
        // chain 0 once (3 batches x 2 writers x 2 thread counts), then
        // 5 hooks x 3 chains x 12.
        assert_eq!(p.groups().len(), 12 + 5 * 3 * 12);
        assert_eq!(p.groups().iter().filter(|g| g.hook.is_none()).count(), 12);
        assert_eq!(p.total_runs(), (12 + 180) * 7 * 10);
        assert_eq!(plan(&[], 4).unwrap().threads, vec![1, 2, 3, 4]);
    }

    #[test]
    fn quick_is_reduced_and_flags_override_it() {
        let p = plan(&["--quick"], 2).unwrap();
        assert_eq!(p.hooks, vec![HookKind::Null, HookKind::Count]);
        assert_eq!(p.chains, vec![1, 4]);
        assert_eq!(p.batches, vec![32]);
        assert_eq!(p.threads, vec![1, 2]);
        assert_eq!(
            p.strategies,
            vec![
                Strategy::Unsync,
                Strategy::Epoch,
                Strategy::RwLockPacket,
                Strategy::MutexPacket,
                Strategy::ArcSwapBatch
            ]
        );
        assert_eq!(p.runs, QUICK_RUNS);
        assert_eq!(p.work, Work::Millis(QUICK_MS));
        assert_eq!(p.groups().len(), 2 * 2 * 2 * 2);
        assert_eq!(plan(&["--quick"], 1).unwrap().threads, vec![1]);
        assert_eq!(plan(&["--quick"], 8).unwrap().threads, vec![1, 8]);

        let p = plan(
            &["--quick", "--ms", "2", "--runs", "3", "--threads", "1"],
            2,
        )
        .unwrap();
        assert_eq!((p.work, p.runs, p.threads), (Work::Millis(2), 3, vec![1]));
    }

    #[test]
    fn lists_are_parsed_sorted_and_deduplicated() {
        let p = plan(
            &[
                "--hooks",
                "count,read-mostly,count",
                "--chain",
                "4,1,4",
                "--batch",
                "256,1",
                "--threads",
                "2,1",
                "--strategies",
                "epoch,mutex-pkt,unsync",
                "--writer",
                "on",
                "--packets",
                "1000",
                "--baseline",
                "epoch",
                "--confidence",
                "99.5",
                "--writer-hz",
                "250",
            ],
            2,
        )
        .unwrap();
        assert_eq!(p.hooks, vec![HookKind::Count, HookKind::Brlock]);
        assert_eq!(p.chains, vec![1, 4]);
        assert_eq!(p.batches, vec![1, 256]);
        assert_eq!(p.threads, vec![1, 2]);
        assert_eq!(
            p.strategies,
            vec![Strategy::Epoch, Strategy::MutexPacket, Strategy::Unsync]
        );
        assert_eq!(p.writers, vec![Writer::On]);
        assert_eq!(p.work, Work::Packets(1000));
        assert_eq!(p.confidence, Confidence::P99_5);
        assert_eq!(p.writer_hz, 250.0);
        let g = p.groups();
        assert_eq!(g.len(), 2 * 2 * 2 * 2);
        assert!(g.iter().all(|g| g.writer));
        assert_eq!(
            g[0],
            Group {
                hook: Some(HookKind::Count),
                chain: 1,
                batch: 1,
                threads: 1,
                writer: true
            }
        );
        assert_eq!(g[0].build_chain(3).len(), 1);
    }

    #[test]
    fn bad_flags_name_the_bad_value() {
        for (args, needle) in [
            (&["--hooks", "null,bogus"][..], "bogus"),
            (&["--chain", "1,x"], "`x`"),
            (&["--chain", "5000"], "5000"),
            (&["--batch", "0"], "batch size 0"),
            (&["--threads", "0"], "thread count 0"),
            (&["--strategies", "epoch,spinlock"], "spinlock"),
            (&["--writer", "maybe"], "maybe"),
            (&["--writer-hz", "-5"], "-5"),
            (&["--writer-hz", "fast"], "fast"),
            (&["--runs", "2"], "number of runs 2"),
            (&["--ms", "0"], "0"),
            (&["--confidence", "97"], "97"),
            (&["--baseline", "nope"], "nope"),
            (&["--ms", "5", "--packets", "9"], "--packets"),
        ] {
            let err = plan(args, 2).unwrap_err();
            assert!(err.contains(needle), "{args:?}: {err}");
        }
        let err = plan(&["--strategies", "epoch,rwlock-pkt"], 2).unwrap_err();
        assert!(err.contains("--baseline unsync"), "{err}");
        assert!(err.contains("epoch,rwlock-pkt"), "{err}");
    }
}
