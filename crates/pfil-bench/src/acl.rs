//! `pfil-bench acl`: ns/packet of the pfil-acl classifier against linear
//! scan and DPDK's rte_acl (through `dpdk-test-acl`) on the ClassBench
//! sets, with the same rules and the same trace, in one run.
//!
//! Per set: parse the rules, build our classifier (timed, median of the
//! runs), generate the trace (half in a random rule's box, half uniform;
//! seeded), write it in dpdk-test-acl's `SRC DST SPORT DPORT PROTO` format,
//! then check that our batch (over `Key`s and over `KeyV4`s), lockstep and
//! single lookups, linear scan and every
//! rte_acl algorithm this CPU runs give the same rule for every header.
//! Timing runs are interleaved: run 1 of every case of every set, then
//! run 2, and so on; the table shows medians and the spread (min-max).
//! `--ipv6` moves every set and its trace into IPv6 first, for both
//! classifiers (`dpdk-test-acl --ipv6` reads the moved rules and trace).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use pfil_acl::{
    adversarial, classbench, Action, Classifier, Classify, Config, Key, KeyV4, Linear, Ruleset,
};

mod dpdk;
use dpdk::{dpdk_ns, dpdk_results};
use pfil_stats::Sample;

/// Flags of `pfil-bench acl`.
#[derive(Debug, Args)]
pub struct AclArgs {
    /// Directory of the ClassBench sets (default: `$PFIL_CLASSBENCH`, else
    /// the repository's `data/classbench`).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Rule sets to measure, comma-separated: file names in the directory,
    /// or generated adversarial sets `adv-KIND-N[-SEED]` (KIND cross,
    /// ports, wild or mixed; `pfil_acl::adversarial`).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "acl1_1k,acl1_10k,fw1_1k,fw1_10k"
    )]
    sets: Vec<String>,
    /// Headers in each trace.
    #[arg(long, default_value_t = 100_000)]
    trace: usize,
    /// Timed runs per case (medians are over these).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Seed of the traces.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Passes over the trace per timed run of our classifier and of rte_acl.
    #[arg(long, default_value_t = 20)]
    iters: usize,
    /// Headers of the trace linear scan is timed on (its first N), as it
    /// is slow on 10k rules; its correctness check uses the whole trace.
    #[arg(long, default_value_t = 20_000)]
    linear_keys: usize,
    /// The dpdk-test-acl binary.
    #[arg(long, default_value = "/usr/bin/dpdk-test-acl")]
    dpdk: PathBuf,
    /// rte_acl algorithms to try (those the CPU cannot run are reported and skipped).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "scalar,sse,avx2,avx512x16,avx512x32"
    )]
    algs: Vec<String>,
    /// EAL arguments for dpdk-test-acl.
    #[arg(
        long,
        default_value = "--no-huge --no-pci -m 512 -l 0 --log-level=lib.eal:error"
    )]
    eal: String,
    /// Skip rte_acl (compare with linear scan only).
    #[arg(long)]
    no_dpdk: bool,
    /// Move every set and its trace into IPv6 (`classbench::to_ipv6`: each
    /// IPv4 prefix a/l becomes 2001:db8:a::/(32+l)) and measure the IPv6
    /// path against linear scan and rte_acl (`dpdk-test-acl --ipv6`, its
    /// addresses as four 32-bit fields).
    #[arg(long)]
    ipv6: bool,
    /// Classifier build parameter: largest leaf (default: the library's).
    #[arg(long)]
    binth: Option<usize>,
    /// Classifier build parameter: space factor.
    #[arg(long)]
    spfac: Option<f64>,
    /// Classifier build parameter: most cut bits per node.
    #[arg(long)]
    cut_bits: Option<u8>,
    /// Classifier build parameter: most cut bits of a tree's root.
    #[arg(long)]
    root_bits: Option<u8>,
    /// Classifier build parameter: space factor of a tree's root.
    #[arg(long)]
    root_spfac: Option<f64>,
    /// Classifier build parameter: prefix length from which an address
    /// field counts as small when partitioning.
    #[arg(long)]
    small_prefix: Option<u8>,
    /// Classifier build parameter: merge subsets below 1/N of the rules.
    #[arg(long)]
    merge_below: Option<usize>,
    /// Classifier build parameter: largest leaf before a tree is split.
    #[arg(long)]
    leaf_bound: Option<usize>,
    /// Classifier build parameter: 32-byte units per rule a tree may use
    /// before it is split.
    #[arg(long)]
    tree_budget: Option<usize>,
    /// Classifier build parameter: most trees per address family.
    #[arg(long)]
    max_trees: Option<usize>,
    /// Also time the lockstep batch lookup (`ours-lockstep`).
    #[arg(long)]
    lockstep: bool,
    /// Also time our classifier's one-at-a-time lookups (`ours-single`).
    #[arg(long)]
    single: bool,
    /// Keep the traces and every raw measurement in this directory.
    #[arg(long)]
    raw: Option<PathBuf>,
}

/// One measured case of one set.
struct Case {
    name: String,
    ns: Vec<f64>,
}

struct Set {
    name: String,
    rules: Ruleset,
    ours: Classifier,
    linear: Linear,
    keys: Vec<Key>,
    /// The same trace as [`KeyV4`]s (the IPv4 batch API the acl filter
    /// uses), if every header is IPv4.
    keys_v4: Option<Vec<KeyV4>>,
    trace_path: PathBuf,
    /// The rules as dpdk-test-acl reads them.
    rules_file: PathBuf,
    build_ms: Vec<f64>,
    /// rte_acl algorithms that ran and agreed.
    algs: Vec<String>,
    /// rte_acl's runtime memory (its build's "runtime memory footprint"
    /// debug lines, the most over the algorithms), 0 if not known.
    dpdk_mem: usize,
    cases: Vec<Case>,
}

/// Runs the benchmark; returns the report.
pub fn run(a: &AclArgs) -> Result<String, String> {
    if a.runs < 1 || a.trace < 2 || a.iters < 1 {
        return Err("--runs, --iters must be >= 1 and --trace >= 2".into());
    }
    let dir = a
        .dir
        .clone()
        .or_else(classbench::data_dir)
        .ok_or("no ClassBench directory: pass --dir or set PFIL_CLASSBENCH")?;
    let work = match &a.raw {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("pfil-bench-acl-{}", std::process::id())),
    };
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let mut out = String::new();
    let mut log = String::new();
    let mut cfg = Config::default();
    cfg.binth = a.binth.unwrap_or(cfg.binth);
    cfg.spfac = a.spfac.unwrap_or(cfg.spfac);
    cfg.max_cut_bits = a.cut_bits.unwrap_or(cfg.max_cut_bits);
    cfg.root_cut_bits = a.root_bits.unwrap_or(cfg.root_cut_bits);
    cfg.root_spfac = a.root_spfac.unwrap_or(cfg.root_spfac);
    cfg.small_prefix = a.small_prefix.unwrap_or(cfg.small_prefix);
    cfg.merge_below = a.merge_below.unwrap_or(cfg.merge_below);
    cfg.leaf_bound = a.leaf_bound.unwrap_or(cfg.leaf_bound);
    cfg.tree_budget = a.tree_budget.unwrap_or(cfg.tree_budget);
    cfg.max_trees = a.max_trees.unwrap_or(cfg.max_trees);
    writeln!(out, "classifier config: {cfg:?}").unwrap();
    if a.ipv6 {
        writeln!(
            out,
            "sets and traces moved into IPv6 (2001:db8:a::/(32+l) for each IPv4 prefix a/l); rte_acl on the same (dpdk-test-acl --ipv6)"
        )
        .unwrap();
    }
    let mut sets = Vec::new();
    for name in &a.sets {
        // A generated set (adv-KIND-N[-SEED]) is written out for
        // dpdk-test-acl; a file is read from the directory.
        let (v4, rules_file) = if name.starts_with("adv-") {
            let rs = adversarial::from_name(name)?;
            let path = work.join(format!("{name}.rules"));
            let text = adversarial::to_classbench(&rs)?;
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            (rs, path)
        } else {
            let path = dir.join(name);
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let rs = classbench::parse(&text, Action::Drop).map_err(|e| format!("{name}: {e}"))?;
            (rs, path)
        };
        let (rules, rules_file) = if a.ipv6 {
            // rte_acl reads the moved rules from a file of their own.
            let rules = classbench::to_ipv6(&v4);
            let path = work.join(format!("{name}.v6.rules"));
            let text = adversarial::to_classbench(&rules).map_err(|e| format!("{name}: {e}"))?;
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            (rules, path)
        } else {
            (v4.clone(), rules_file)
        };
        let mut build_ms = Vec::new();
        let mut ours = None;
        for _ in 0..a.runs.max(3) {
            let t = Instant::now();
            let c = Classifier::with_config(&rules, &cfg);
            build_ms.push(t.elapsed().as_secs_f64() * 1e3);
            ours = Some(c);
        }
        let ours = ours.expect("built at least once");
        let linear = Linear::new(&rules);
        let mut keys = classbench::trace(&v4.rules, a.trace, a.seed);
        let trace_path = work.join(format!("{name}.trace"));
        if a.ipv6 {
            keys = keys.iter().map(classbench::key_to_ipv6).collect();
        }
        let mut t = String::with_capacity(keys.len() * 32);
        for k in &keys {
            t.push_str(&classbench::dpdk_trace_line(k));
            t.push('\n');
        }
        std::fs::write(&trace_path, t).map_err(|e| format!("{}: {e}", trace_path.display()))?;
        let keys_v4 = keys.iter().map(KeyV4::of).collect();
        sets.push(Set {
            name: name.clone(),
            rules,
            ours,
            linear,
            keys,
            keys_v4,
            trace_path,
            rules_file,
            build_ms,
            algs: Vec::new(),
            dpdk_mem: 0,
            cases: Vec::new(),
        });
    }

    // Correctness: every header, every implementation.
    writeln!(out, "## Same rule for every header").unwrap();
    for s in &mut sets {
        let mut batch = vec![None; s.keys.len()];
        s.ours.classify_batch(&s.keys, &mut batch);
        let reference: Vec<Option<u32>> = s.keys.iter().map(|k| s.linear.classify(k)).collect();
        let single = s
            .keys
            .iter()
            .filter(|k| s.ours.classify(k) != s.linear.classify(k))
            .count();
        let mut lock = vec![None; s.keys.len()];
        s.ours.classify_lockstep(&s.keys, &mut lock);
        let mut v4 = reference.clone();
        if let Some(k4) = &s.keys_v4 {
            s.ours.classify_batch_v4(k4, &mut v4);
        }
        let bad = [&batch, &lock, &v4]
            .iter()
            .map(|r| r.iter().zip(&reference).filter(|(a, b)| a != b).count())
            .sum::<usize>();
        let matched = reference.iter().filter(|r| r.is_some()).count();
        writeln!(
            out,
            "{}: {} rules, {} headers ({} match a rule): ours (batch, IPv4 batch and lockstep) vs linear: {} differ; ours (single) vs linear: {} differ",
            s.name,
            s.rules.rules.len(),
            s.keys.len(),
            matched,
            bad,
            single
        )
        .unwrap();
        if bad + single > 0 {
            return Err(format!(
                "{out}\n{}: our classifier disagrees with linear scan",
                s.name
            ));
        }
        if a.no_dpdk {
            continue;
        }
        for alg in &a.algs {
            match dpdk_results(a, s, alg) {
                Ok((res, mem)) => {
                    if let Some(m) = mem {
                        s.dpdk_mem = s.dpdk_mem.max(m);
                    }
                    let differ =
                        res.len() != batch.len() || res.iter().zip(&batch).any(|(r, b)| *r != *b);
                    let n = res.iter().zip(&batch).filter(|(r, b)| r != b).count();
                    writeln!(
                        out,
                        "{}: rte_acl {alg} vs ours: {} results, {n} differ",
                        s.name,
                        res.len()
                    )
                    .unwrap();
                    if differ {
                        return Err(format!("{out}\n{}: rte_acl {alg} disagrees", s.name));
                    }
                    s.algs.push(alg.clone());
                }
                Err(e) => writeln!(out, "{}: rte_acl {alg}: not run ({e})", s.name).unwrap(),
            }
        }
    }

    // Timing, interleaved.
    for s in &mut sets {
        s.cases.push(Case {
            name: "linear".into(),
            ns: vec![],
        });
        s.cases.push(Case {
            name: "ours".into(),
            ns: vec![],
        });
        if s.keys_v4.is_some() {
            s.cases.push(Case {
                name: "ours-key".into(),
                ns: vec![],
            });
        }
        if a.single {
            s.cases.push(Case {
                name: "ours-single".into(),
                ns: vec![],
            });
        }
        if a.lockstep {
            s.cases.push(Case {
                name: "ours-lockstep".into(),
                ns: vec![],
            });
        }
        for alg in &s.algs {
            s.cases.push(Case {
                name: format!("rte_acl {alg}"),
                ns: vec![],
            });
        }
    }
    writeln!(log, "# set case run ns_per_packet").unwrap();
    // One untimed warm-up pass per set so page faults and first-touch
    // costs are out of run 1.
    for s in &sets {
        let mut res = vec![None; s.keys.len()];
        s.ours.classify_batch(&s.keys, &mut res);
        std::hint::black_box(&res);
    }
    for run in 0..a.runs {
        for s in &mut sets {
            for ci in 0..s.cases.len() {
                let name = s.cases[ci].name.clone();
                let ns = if name == "linear" {
                    time_linear(&s.linear, &s.keys[..a.linear_keys.min(s.keys.len())])
                } else if name == "ours" {
                    match &s.keys_v4 {
                        Some(k4) => time_batch(k4, a.iters, |k, o| s.ours.classify_batch_v4(k, o)),
                        None => time_batch(&s.keys, a.iters, |k, o| s.ours.classify_batch(k, o)),
                    }
                } else if name == "ours-key" {
                    time_batch(&s.keys, a.iters, |k, o| s.ours.classify_batch(k, o))
                } else if name == "ours-lockstep" {
                    time_batch(&s.keys, a.iters, |k, o| s.ours.classify_lockstep(k, o))
                } else if name == "ours-single" {
                    time_single(&s.ours, &s.keys, a.iters)
                } else {
                    let alg = name.trim_start_matches("rte_acl ");
                    dpdk_ns(a, s, alg)?
                };
                writeln!(
                    log,
                    "{} {} {} {ns:.2}",
                    s.name,
                    name.replace(' ', "_"),
                    run + 1
                )
                .unwrap();
                s.cases[ci].ns.push(ns);
            }
        }
    }

    writeln!(
        out,
        "\n## ns per packet (median of {} runs, min-max)",
        a.runs
    )
    .unwrap();
    writeln!(
        out,
        "| set | rules | linear | ours (batch) | rte_acl best (alg) | ours / rte_acl | ours vs rte_acl, Student's t at 95 % | build ms (median) | memory | rte_acl memory | worst-case entries |"
    )
    .unwrap();
    writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|").unwrap();
    for s in &sets {
        let med = |c: &Case| {
            Sample::from_values(c.ns.iter().copied()).map(|x| (x.median(), x.min(), x.max()))
        };
        let cell = |c: &Case| match med(c) {
            Ok((m, lo, hi)) => format!("{m:.1} ({lo:.1}-{hi:.1})"),
            Err(_) => format!("{:.1}", c.ns[0]),
        };
        let m = |c: &Case| med(c).map(|x| x.0).unwrap_or(c.ns[0]);
        let lin = &s.cases[0];
        let ours = &s.cases[1];
        let best = s.cases[2..]
            .iter()
            .filter(|c| c.name.starts_with("rte_acl"))
            .min_by(|x, y| m(x).total_cmp(&m(y)));
        let (best_cell, ratio) = match best {
            Some(b) => (
                format!("{} ({})", cell(b), b.name.trim_start_matches("rte_acl ")),
                format!("{:.2}", m(ours) / m(b)),
            ),
            None => ("-".into(), "-".into()),
        };
        // ministat's test of the means: is ours different from rte_acl's
        // best, and by how much (with the 95 % half-width)?
        let t = best
            .and_then(|b| {
                let (x, y) = (
                    Sample::from_values(b.ns.iter().copied()).ok()?,
                    Sample::from_values(ours.ns.iter().copied()).ok()?,
                );
                let c = pfil_stats::compare(&x, &y, pfil_stats::Confidence::P95);
                Some(if c.significant {
                    format!(
                        "ours {} by {:.1} % ± {:.1} %",
                        if c.difference < 0.0 {
                            "faster"
                        } else {
                            "slower"
                        },
                        c.relative_difference.abs(),
                        c.relative_half_width
                    )
                } else {
                    format!(
                        "no difference ({:.1} % ± {:.1} %)",
                        c.relative_difference, c.relative_half_width
                    )
                })
            })
            .unwrap_or_else(|| "-".into());
        let mut bm = s.build_ms.clone();
        bm.sort_by(f64::total_cmp);
        let st = s.ours.stats();
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {:.1} | {:.2} MiB | {} | {}{} |",
            s.name,
            s.rules.rules.len(),
            cell(lin),
            cell(ours),
            best_cell,
            ratio,
            t,
            bm[bm.len() / 2],
            st.bytes as f64 / (1 << 20) as f64,
            if s.dpdk_mem > 0 {
                format!("{:.2} MiB", s.dpdk_mem as f64 / (1 << 20) as f64)
            } else {
                "-".into()
            },
            st.worst_entries,
            if st.bounded { "" } else { " (not bounded)" }
        )
        .unwrap();
    }
    writeln!(out, "\n## Every case").unwrap();
    for s in &sets {
        let st = s.ours.stats();
        writeln!(
            out,
            "{}: trees {} (split {}) nodes {} leaves {} entries {} max leaf {} max depth {} bytes {}; worst case {} entries compared{}",
            s.name,
            st.trees,
            st.split_trees,
            st.nodes,
            st.leaves,
            st.entries,
            st.max_leaf,
            st.max_depth,
            st.bytes,
            st.worst_entries,
            if st.bounded { "" } else { " (BOUND NOT MET)" }
        )
        .unwrap();
        let (mut t, mut n, mut e) = (0, 0, 0);
        for k in &s.keys {
            let c = s.ours.lookup_cost(k);
            t += c.0;
            n += c.1;
            e += c.2;
        }
        let per = |x: usize| x as f64 / s.keys.len() as f64;
        writeln!(
            out,
            "  per lookup: {:.2} trees, {:.2} nodes, {:.2} entries compared",
            per(t),
            per(n),
            per(e)
        )
        .unwrap();
        for c in &s.cases {
            let v: Vec<String> = c.ns.iter().map(|x| format!("{x:.1}")).collect();
            writeln!(out, "  {:18} {}", c.name, v.join(" ")).unwrap();
        }
    }
    writeln!(
        out,
        "\nlinear is timed on the first {} headers of each trace; ours and rte_acl on {} passes over all {}. ours is `classify_batch_v4` (IPv4 keys, the acl filter's path) when every header is IPv4, else `classify_batch`; ours-key is `classify_batch` on the same headers as `Key`s.",
        a.linear_keys.min(a.trace),
        a.iters,
        a.trace
    )
    .unwrap();
    if let Some(d) = &a.raw {
        let p = d.join("runs.txt");
        std::fs::write(&p, &log).map_err(|e| format!("{}: {e}", p.display()))?;
    } else {
        let _ = std::fs::remove_dir_all(&work);
    }
    Ok(out)
}

/// ns per key of `iters` passes of the batch call `batch` over `keys`.
fn time_batch<K>(keys: &[K], iters: usize, batch: impl Fn(&[K], &mut [Option<u32>])) -> f64 {
    let mut res = vec![None; keys.len()];
    let t = Instant::now();
    for _ in 0..iters {
        batch(std::hint::black_box(keys), &mut res);
        std::hint::black_box(&res);
    }
    ns_per(t.elapsed(), keys.len() * iters)
}

fn time_single(c: &Classifier, keys: &[Key], iters: usize) -> f64 {
    let t = Instant::now();
    let mut hits = 0usize;
    for _ in 0..iters {
        for k in std::hint::black_box(keys) {
            hits += usize::from(c.classify(k).is_some());
        }
    }
    std::hint::black_box(hits);
    ns_per(t.elapsed(), keys.len() * iters)
}

fn time_linear(l: &Linear, keys: &[Key]) -> f64 {
    let t = Instant::now();
    let mut hits = 0usize;
    for k in std::hint::black_box(keys) {
        hits += usize::from(l.classify(k).is_some());
    }
    std::hint::black_box(hits);
    ns_per(t.elapsed(), keys.len())
}

fn ns_per(d: Duration, n: usize) -> f64 {
    d.as_secs_f64() * 1e9 / n as f64
}
