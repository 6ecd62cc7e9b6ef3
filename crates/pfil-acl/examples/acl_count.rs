//! Classifies a ClassBench set's generated trace a number of times, for
//! instruction counts under callgrind:
//!
//! ```sh
//! valgrind --tool=callgrind --toggle-collect='acl_count::lookups' \
//!     target/release/examples/acl_count data/classbench/acl1_1k 1 single
//! ```
//!
//! Arguments: the set (or `two` for a 2-rule ACL, or a generated
//! `adv-KIND-N[-SEED]` set, as `pfil-bench acl --sets` takes it), passes over the
//! 100 000-header trace (seed 1, as `pfil-bench acl`), and a mode:
//! - `batch` (`classify_batch`, the default), `single` (`classify` per
//!   key);
//! - `v4` (`classify_batch_v4` over the same keys as [`KeyV4`]s; collect
//!   `acl_count::lookups_v4`), `v4seq` (the same one key after the other;
//!   `acl_count::lookups_v4_seq`);
//! - `v4time`: prints the min and median ns per lookup of
//!   `classify_batch_v4` over passes runs of 5 passes (`ACL_BATCH=N`: in
//!   batches of N keys, as a datapath calls it); `benches/ab_acl.sh`
//!   alternates two builds' `v4time`;
//! - `ab`: times `v4seq` against `v4`, alternated in one process, passes ×
//!   5 each, and prints the paired ratio; `ACL_AB_PORTABLE=1` the batch
//!   compiled for the baseline CPU instead of `v4seq`, `ACL_AB_LOCKSTEP=1`
//!   `classify_lockstep`; a build parameter set as `ACL_AB_...`
//!   (`ACL_AB_BINTH=16`, `ACL_AB_SMALL_PREFIX=8`, any of the names below)
//!   a classifier built with it, against the one built as the `ACL_...`
//!   variables say.
//!
//! The instructions of the collected function divided by passes × 100 000
//! are the instructions per lookup. `ACL_COST=1` prints the mean trees,
//! nodes and entries per lookup and their histogram; `ACL_BUILD=1` the
//! build's time (the first, and the median of 5 more); `ACL_POOL=N`
//! replaces the trace by draws from its first N keys (N = 1: every branch
//! predicted and everything in cache; a few hundred: in cache, branches
//! not predicted). `ACL_BINTH`, `ACL_SPFAC`, `ACL_CUT_BITS`,
//! `ACL_ROOT_BITS`, `ACL_ROOT_SPFAC`, `ACL_MERGE_BELOW`,
//! `ACL_SMALL_PREFIX`, `ACL_SINGLE` (the single-tree budget), `ACL_WORK`
//! (its work limit), `ACL_TREE_BUDGET`, `ACL_LEAF_BOUND`, `ACL_MAX_TREES`
//! and `ACL_THREADS` set build parameters. `ACL_IPV6=1` moves the set
//! and its trace into IPv6 (`classbench::to_ipv6`) first, for the
//! `batch` and `single` modes (collect `acl_count::lookups`). `ACL_CHECK=1` compares every
//! result of the run (in `v4time`, of its last pass, in its batches) with
//! linear scan ([`Linear`]) and exits non-zero if one differs.

use pfil_acl::{
    adversarial, classbench, text, Action, Classifier, Classify, Config, Key, KeyV4, Linear,
};

#[inline(never)]
fn lookups_v4(c: &Classifier, keys: &[KeyV4], out: &mut [Option<u32>], passes: usize) {
    for _ in 0..passes {
        c.classify_batch_v4(std::hint::black_box(keys), out);
        std::hint::black_box(&mut *out);
    }
}

#[inline(never)]
fn lookups_v4_seq(c: &Classifier, keys: &[KeyV4], out: &mut [Option<u32>], passes: usize) {
    for _ in 0..passes {
        c.classify_batch_v4_seq(std::hint::black_box(keys), out);
        std::hint::black_box(&mut *out);
    }
}

#[inline(never)]
fn lookups(c: &Classifier, keys: &[Key], out: &mut [Option<u32>], passes: usize, single: bool) {
    for _ in 0..passes {
        if single {
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                *o = c.classify(std::hint::black_box(k));
            }
        } else {
            c.classify_batch(std::hint::black_box(keys), out);
        }
        std::hint::black_box(&mut *out);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let set = args
        .get(1)
        .map_or("data/classbench/acl1_1k", String::as_str);
    let passes: usize = args.get(2).and_then(|p| p.parse().ok()).unwrap_or(1);
    let mode = args.get(3).map_or("batch", String::as_str);
    let single = mode == "single";
    let rules = if set == "two" {
        text::parse("drop proto udp to any port 53\npass all\n").expect("parses")
    } else if set.starts_with("adv-") {
        adversarial::from_name(set).expect("an adv-KIND-N[-SEED] set")
    } else {
        let t = std::fs::read_to_string(set).expect("reads the set");
        classbench::parse(&t, Action::Drop).expect("parses the set")
    };
    let keys = if set == "two" {
        let r = classbench::parse(
            &std::fs::read_to_string("data/classbench/acl1_1k").expect("reads acl1_1k"),
            Action::Drop,
        )
        .expect("parses");
        classbench::trace(&r.rules, 100_000, 1)
    } else {
        classbench::trace(&rules.rules, 100_000, 1)
    };
    let keys = match std::env::var("ACL_POOL")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
    {
        Some(n) => {
            let mut x = 12345u64;
            (0..keys.len())
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    keys[((x >> 33) as usize) % n.min(keys.len())]
                })
                .collect()
        }
        None => keys,
    };
    // ACL_IPV6=1: the set and its trace moved into IPv6
    // (`classbench::to_ipv6`), for the `batch` and `single` modes.
    let v6 = std::env::var_os("ACL_IPV6").is_some();
    let (rules, keys) = if v6 {
        let k = keys.iter().map(classbench::key_to_ipv6).collect();
        (classbench::to_ipv6(&rules), k)
    } else {
        (rules, keys)
    };
    // Build parameters from the environment, for sweeps.
    let cfg = config_from("ACL_", Config::default());
    let t = std::time::Instant::now();
    let c = Classifier::with_config(&rules, &cfg);
    let build = t.elapsed();
    if std::env::var_os("ACL_BUILD").is_some() {
        // ACL_BUILD=1: the median build time of 5 more builds.
        let mut v: Vec<f64> = (0..5)
            .map(|_| {
                let t = std::time::Instant::now();
                std::hint::black_box(Classifier::with_config(&rules, &cfg));
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        v.sort_by(f64::total_cmp);
        eprintln!(
            "build: first {:.1} ms, median of 5 more {:.1} ms",
            build.as_secs_f64() * 1e3,
            v[2]
        );
    }
    let mut out = vec![None; keys.len()];
    if mode == "ab" {
        // In-process A/B timing: the IPv4 batch one key after the other
        // vs `classify_batch_v4` (breadth first),
        // alternated; min and median ns per lookup of each.
        let k4: Vec<KeyV4> = keys
            .iter()
            .map(|k| KeyV4::of(k).expect("an IPv4 trace"))
            .collect();
        // ACL_AB_BINTH=N (or any build parameter as ACL_AB_...): the
        // other side is a classifier built with it (batch), not the
        // one-by-one batch.
        let other_cfg = config_from("ACL_AB_", cfg);
        let other = (other_cfg != cfg).then(|| Classifier::with_config(&rules, &other_cfg));
        // ACL_AB_PORTABLE=1: the other side is the same batch compiled for
        // the baseline CPU (no AVX2).
        let portable = std::env::var_os("ACL_AB_PORTABLE").is_some();
        // ACL_AB_LOCKSTEP=1: the other side is `classify_lockstep`.
        let lockstep = std::env::var_os("ACL_AB_LOCKSTEP").is_some();
        let mut r: Vec<Vec<f64>> = vec![Vec::new(); 2];
        for _ in 0..passes {
            for (m, v) in r.iter_mut().enumerate() {
                let t = std::time::Instant::now();
                for _ in 0..5 {
                    let k = std::hint::black_box(&k4);
                    if m == 1 {
                        c.classify_batch_v4(k, &mut out);
                    } else if lockstep {
                        c.classify_lockstep(std::hint::black_box(&keys), &mut out);
                    } else if portable {
                        c.classify_batch_v4_portable(k, &mut out);
                    } else if let Some(b) = &other {
                        b.classify_batch_v4(k, &mut out);
                    } else {
                        c.classify_batch_v4_seq(k, &mut out);
                    }
                    std::hint::black_box(&mut out);
                }
                v.push(t.elapsed().as_nanos() as f64 / (5 * k4.len()) as f64);
            }
        }
        let first = if portable {
            "batch, baseline CPU"
        } else if other.is_some() {
            "other config, batch"
        } else {
            "one after the other"
        };
        let mut q: Vec<f64> = r[1].iter().zip(&r[0]).map(|(b, a)| b / a).collect();
        q.sort_by(f64::total_cmp);
        eprintln!(
            "batch / other, paired: median {:.3} (quartiles {:.3}-{:.3})",
            q[q.len() / 2],
            q[q.len() / 4],
            q[3 * q.len() / 4]
        );
        for (n, v) in [first, "batch"].iter().zip(r.iter_mut()) {
            v.sort_by(f64::total_cmp);
            eprintln!("{n}: min {:.1} median {:.1} ns", v[0], v[v.len() / 2]);
        }
    } else if mode == "v4time" {
        // Times `classify_batch_v4` alone: passes runs of 5 passes over
        // the trace; min and median ns per lookup (for A/B runs of two
        // builds, alternated by a script).
        let k4: Vec<KeyV4> = keys
            .iter()
            .map(|k| KeyV4::of(k).expect("an IPv4 trace"))
            .collect();
        // ACL_BATCH=N: in batches of N keys, as a datapath calls it.
        let batch = std::env::var("ACL_BATCH")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(k4.len())
            .max(1);
        let mut v = Vec::new();
        for _ in 0..passes {
            let t = std::time::Instant::now();
            for _ in 0..5 {
                for (k, o) in k4.chunks(batch).zip(out.chunks_mut(batch)) {
                    c.classify_batch_v4(std::hint::black_box(k), o);
                }
                std::hint::black_box(&mut out);
            }
            v.push(t.elapsed().as_nanos() as f64 / (5 * k4.len()) as f64);
        }
        v.sort_by(f64::total_cmp);
        println!("min {:.2} median {:.2}", v[0], v[v.len() / 2]);
    } else if mode == "v4seq" {
        let k4: Vec<KeyV4> = keys
            .iter()
            .map(|k| KeyV4::of(k).expect("an IPv4 trace"))
            .collect();
        lookups_v4_seq(&c, &k4, &mut out, passes);
    } else if mode == "v4" {
        let k4: Vec<KeyV4> = keys
            .iter()
            .map(|k| KeyV4::of(k).expect("an IPv4 trace"))
            .collect();
        lookups_v4(&c, &k4, &mut out, passes);
    } else {
        lookups(&c, &keys, &mut out, passes, single);
    }
    let hits = out.iter().filter(|o| o.is_some()).count();
    eprintln!("{set}: {:?}; {hits} hits", c.stats());
    if std::env::var_os("ACL_CHECK").is_some() && mode != "ab" {
        // The run's results against linear scan, key by key.
        let lin = Linear::new(&rules);
        let differ = keys
            .iter()
            .zip(&out)
            .filter(|(k, o)| lin.classify(k) != **o)
            .count();
        eprintln!("{set}: {differ} of {} differ from linear scan", keys.len());
        if differ > 0 {
            std::process::exit(1);
        }
    }
    if std::env::var_os("ACL_COST").is_some() {
        // Mean lookup cost over the trace, and the share of keys per
        // (nodes, entries) pair: where a lookup's work goes.
        let mut hist = std::collections::BTreeMap::new();
        let (mut t, mut n, mut e) = (0, 0, 0);
        for k in &keys {
            let (trees, nodes, entries) = c.lookup_cost(k);
            t += trees;
            n += nodes;
            e += entries;
            *hist.entry((nodes, entries)).or_insert(0usize) += 1;
        }
        let len = keys.len() as f64;
        eprintln!(
            "mean trees {:.2}, nodes {:.2}, entries {:.2}",
            t as f64 / len,
            n as f64 / len,
            e as f64 / len
        );
        for ((nodes, entries), c) in hist {
            eprintln!(
                "  nodes {nodes} entries {entries}: {:.1} %",
                100.0 * c as f64 / len
            );
        }
    }
}

/// `base` with the build parameters set in the environment under
/// `prefix` (`ACL_BINTH`, `ACL_AB_BINTH`, ...).
fn config_from(prefix: &str, base: Config) -> Config {
    let env = |n: &str| {
        std::env::var(format!("{prefix}{n}"))
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
    };
    let mut cfg = base;
    // Each parameter: its name after the prefix, its field and type.
    macro_rules! set {
        ($($name:literal => $field:ident as $t:ty),* $(,)?) => {
            $(if let Some(v) = env($name) {
                cfg.$field = v as $t;
            })*
        };
    }
    set!(
        "BINTH" => binth as usize,
        "SPFAC" => spfac as f64,
        "ROOT_BITS" => root_cut_bits as u8,
        "ROOT_SPFAC" => root_spfac as f64,
        "CUT_BITS" => max_cut_bits as u8,
        "SINGLE" => single_tree_budget as usize,
        "WORK" => single_tree_work as usize,
        "MERGE_BELOW" => merge_below as usize,
        "TREE_BUDGET" => tree_budget as usize,
        "LEAF_BOUND" => leaf_bound as usize,
        "MAX_TREES" => max_trees as usize,
        "THREADS" => threads as usize,
        "SMALL_PREFIX" => small_prefix as u8,
    );
    cfg
}
