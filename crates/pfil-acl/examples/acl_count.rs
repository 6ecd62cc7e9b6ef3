//! Classifies a ClassBench set's generated trace a number of times, for
//! instruction counts under callgrind:
//!
//! ```sh
//! valgrind --tool=callgrind --toggle-collect='acl_count::lookups' \
//!     target/release/examples/acl_count /work/shared/classbench/acl1_1k 1 single
//! ```
//!
//! Arguments: the set (or `two` for a 2-rule ACL), passes over the
//! 100 000-header trace (seed 1, as `pfil-bench acl`), and `batch`
//! (`classify_batch`, the default) or `single` (`classify` per key). The
//! instructions of `lookups` divided by passes × 100 000 are the
//! instructions per lookup.

use pfil_acl::{classbench, text, Action, Classifier, Classify, Config, Key};

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
        .map_or("/work/shared/classbench/acl1_1k", String::as_str);
    let passes: usize = args.get(2).and_then(|p| p.parse().ok()).unwrap_or(1);
    let single = args.get(3).is_some_and(|m| m == "single");
    let rules = if set == "two" {
        text::parse("drop proto udp to any port 53\npass all\n").expect("parses")
    } else {
        let t = std::fs::read_to_string(set).expect("reads the set");
        classbench::parse(&t, Action::Drop).expect("parses the set")
    };
    let keys = if set == "two" {
        let r = classbench::parse(
            &std::fs::read_to_string("/work/shared/classbench/acl1_1k").expect("reads acl1_1k"),
            Action::Drop,
        )
        .expect("parses");
        classbench::trace(&r.rules, 100_000, 1)
    } else {
        classbench::trace(&rules.rules, 100_000, 1)
    };
    // Build parameters from the environment, for sweeps: ACL_BINTH,
    // ACL_SPFAC, ACL_MERGE_BELOW.
    let mut cfg = Config::default();
    let env = |n: &str| std::env::var(n).ok().and_then(|v| v.parse::<f64>().ok());
    if let Some(b) = env("ACL_BINTH") {
        cfg.binth = b as usize;
    }
    if let Some(s) = env("ACL_SPFAC") {
        cfg.spfac = s;
    }
    if let Some(m) = env("ACL_MERGE_BELOW") {
        cfg.merge_below = m as usize;
    }
    let c = Classifier::with_config(&rules, &cfg);
    let mut out = vec![None; keys.len()];
    lookups(&c, &keys, &mut out, passes, single);
    let hits = out.iter().filter(|o| o.is_some()).count();
    eprintln!("{set}: {:?}; {hits} hits", c.stats());
}
