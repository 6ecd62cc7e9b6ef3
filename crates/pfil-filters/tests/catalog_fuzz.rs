//! Every catalog module against hostile config strings (issue 23, item
//! 2): random bytes, mutations of each module's example, huge and deeply
//! repeated inputs. Each one builds or is refused with a message that is
//! bounded in size, without a panic, and without taking long (a limit of
//! seconds per build, far above any good config's milliseconds: a hang
//! is what it catches, not a slow build).

use std::time::{Duration, Instant};

use pfil_filters::{BuildCtx, Catalog};
use proptest::prelude::*;

fn check(spec: &str) {
    let c = Catalog::builtin();
    let ctx = BuildCtx::new(4);
    let t = Instant::now();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        c.create(spec, &ctx).map(|_| ())
    }));
    let took = t.elapsed();
    let shown: String = spec.chars().take(80).collect();
    let r = r.unwrap_or_else(|_| panic!("building {shown:?} panicked"));
    assert!(
        took < Duration::from_secs(10),
        "{shown:?} took {took:?} to build"
    );
    if let Err(e) = r {
        let m = e.to_string();
        assert!(m.len() <= 2048, "{shown:?}: a {}-byte message", m.len());
    }
}

fn examples() -> Vec<String> {
    Catalog::builtin()
        .modules()
        .map(|m| m.example().to_owned())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Printable noise after each module's name.
    #[test]
    fn random_configs(m in 0usize..6, cfg in "[ -~]{0,80}") {
        let names = ["null", "count", "drop-udp", "bpf", "ratelimit", "acl"];
        check(&format!("{}:{cfg}", names[m]));
    }

    /// Each example with bytes replaced, inserted or deleted.
    #[test]
    fn mutated_examples(
        which in 0usize..6,
        edits in proptest::collection::vec((0usize..200, any::<char>(), 0u8..3), 1..6),
    ) {
        let mut s: Vec<char> = examples()[which].chars().collect();
        for (at, c, how) in edits {
            let at = at % (s.len() + 1);
            match how {
                0 if at < s.len() => s[at] = c,
                1 => s.insert(at, c),
                _ if at < s.len() => { s.remove(at); }
                _ => {}
            }
        }
        check(&s.into_iter().collect::<String>());
    }
}

/// Big and repetitive inputs: a megabyte of config for every module,
/// numbers far out of range, many repeated fields.
#[test]
fn huge_and_repetitive_configs() {
    let mb = "x".repeat(1 << 20);
    for spec in [
        format!("null:{mb}"),
        format!("count:{mb}"),
        format!("drop-udp:{mb}"),
        format!("drop-udp:{}", "9".repeat(100_000)),
        format!("bpf:drop {mb}"),
        format!("bpf:drop {}", "(".repeat(10_000)),
        format!("ratelimit:{mb}"),
        format!("ratelimit:{} per src", "9".repeat(10_000)),
        format!(
            "ratelimit:1e308 burst 1e308 per flow table {}",
            "9".repeat(50)
        ),
        format!("ratelimit:10 {}", "burst 5 ".repeat(100_000)),
        format!("acl:{mb}"),
        format!("acl:{}", "pass all; ".repeat(100_000)),
        format!(
            "acl:{}",
            "drop proto udp from 10.0.0.0/8 port 1:65535; ".repeat(20_000)
        ),
        format!("acl:@{mb}"),
        format!("{mb}:x"),
    ] {
        check(&spec);
    }
}
