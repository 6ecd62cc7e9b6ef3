//! The root probe (`Config::probe_root`): on acl4_1k and acl2_1k (the
//! neurocuts sets in `data/classbench/more`), whose merges widen the
//! root's cut, a tree built under the widened cut walks fewer levels a
//! lookup and classifies every key as before; on acl3_1k the widened cut
//! costs more leaf entries than it saves levels, and the build keeps
//! the plain tree.

use pfil_acl::classbench;
use pfil_acl::{Classifier, Classify, Config, Linear, Ruleset};

/// Set `name` from the repository's tarball of the neurocuts sets.
fn neurocuts(name: &str) -> Ruleset {
    let dir = classbench::data_dir().expect("data/classbench");
    let out = std::process::Command::new("tar")
        .arg("-xJOf")
        .arg(dir.join("more/neurocuts-sets.tar.xz"))
        .arg(name)
        .output()
        .expect("tar");
    assert!(
        out.status.success(),
        "tar: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    classbench::parse(
        &String::from_utf8(out.stdout).unwrap(),
        pfil_acl::Action::Drop,
    )
    .unwrap()
}

/// Mean internal nodes and leaf entries a lookup of `keys` visits.
fn cost(c: &Classifier, keys: &[pfil_acl::Key]) -> (f64, f64) {
    let (mut nodes, mut entries) = (0, 0);
    for k in keys {
        let (_, n, e) = c.lookup_cost(k);
        nodes += n;
        entries += e;
    }
    let n = keys.len() as f64;
    (nodes as f64 / n, entries as f64 / n)
}

/// `rs` built with the default [`Config`] and with the probe off.
fn builds(rs: &Ruleset) -> (Classifier, Classifier) {
    let off = Config {
        probe_root: false,
        ..Config::default()
    };
    (
        Classifier::with_config(rs, &Config::default()),
        Classifier::with_config(rs, &off),
    )
}

#[test]
fn a_probed_root_walks_fewer_levels_and_agrees() {
    for name in ["acl4_1k", "acl2_1k"] {
        let rs = neurocuts(name);
        let keys = classbench::trace(&rs.rules, 20_000, 1);
        let (probed, plain) = builds(&rs);
        let linear = Linear::new(&rs);
        for k in &keys {
            assert_eq!(probed.classify(k), linear.classify(k), "{name}: {k:?}");
        }
        let (a, b) = (cost(&probed, &keys), cost(&plain, &keys));
        assert!(a.0 < b.0, "{name}: nodes a lookup {a:?} probed, {b:?} not");
    }
}

#[test]
fn a_probe_that_costs_more_entries_than_it_saves_levels_is_not_kept() {
    let rs = neurocuts("acl3_1k");
    let keys = classbench::trace(&rs.rules, 20_000, 1);
    let (built, plain) = builds(&rs);
    assert_eq!(built.stats(), plain.stats());
    assert_eq!(cost(&built, &keys), cost(&plain, &keys));
}
