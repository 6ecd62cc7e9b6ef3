//! Builds classifiers only: for build-time work under callgrind, and to
//! check that a change to the build makes the same structure.
//!
//! ```sh
//! target/release/examples/acl_build 3 /tmp/cb24/acl2_10k adv-ports-8000
//! valgrind --tool=callgrind --toggle-collect='acl_build::build' \
//!     target/release/examples/acl_build 1 /tmp/cb24/acl2_10k
//! ```
//!
//! Arguments: builds per set, then sets (ClassBench files, or generated
//! adversarial sets `adv-KIND-N[-SEED]`). Per set it prints the median
//! and least build time, the [`Stats`](pfil_acl::Stats), and a digest of
//! the whole built structure (FNV-1a over its `Debug` output): two
//! builds with the same digest made the same trees, blocks and leaves.
//! `ACL_THREADS=N` sets [`Config::threads`](pfil_acl::Config::threads)
//! (1: the serial build, whose instructions callgrind counts exactly).
//! `ACL_NO_DIGEST=1` leaves the digest out (its hashing costs about as
//! much as the build: in a whole-program instruction count, the build's
//! part is then most of it).

use std::fmt::Write as _;
use std::time::Instant;

use pfil_acl::{adversarial, classbench, Action, Classifier, Config, Ruleset};

/// One build, apart so that callgrind can collect it alone.
#[inline(never)]
fn build(rs: &Ruleset, cfg: &Config) -> Classifier {
    Classifier::with_config(std::hint::black_box(rs), cfg)
}

/// FNV-1a over what is written to it.
struct Fnv(u64);

impl std::fmt::Write for Fnv {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        for &b in s.as_bytes() {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        Ok(())
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(1);
    let cfg = Config {
        threads: std::env::var("ACL_THREADS")
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or(0),
        ..Config::default()
    };
    for set in &args[2..] {
        let rs = if set.starts_with("adv-") {
            adversarial::from_name(set).expect("an adversarial set")
        } else {
            let t = std::fs::read_to_string(set).expect("reads the set");
            classbench::parse(&t, Action::Drop).expect("parses the set")
        };
        let mut ms = Vec::new();
        let mut c = None;
        for _ in 0..runs.max(1) {
            let t = Instant::now();
            c = Some(build(&rs, &cfg));
            ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let c = c.expect("built");
        ms.sort_by(f64::total_cmp);
        let mut h = Fnv(0xcbf2_9ce4_8422_2325);
        if std::env::var_os("ACL_NO_DIGEST").is_none() {
            write!(h, "{c:?}").expect("hashes");
        }
        let name = set.rsplit('/').next().unwrap_or(set);
        println!(
            "{name}: build {:.1} ms (min {:.1}); digest {:016x}; {:?}",
            ms[ms.len() / 2],
            ms[0],
            h.0,
            c.stats()
        );
    }
}
