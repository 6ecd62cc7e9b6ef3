//! How a build that does not fit one tree splits the IPv4 rules into
//! subsets by which address fields are small, seen from the lookups: a
//! tree whose smallest rule index comes after a key's match is not
//! walked, so the subsets' indices decide how many trees a lookup walks.

use pfil_acl::{classbench, text, Classifier, Classify, Config, Linear};

#[test]
fn a_few_rules_small_in_both_addresses_do_not_make_every_lookup_walk_the_general_tree() {
    // A firewall's shape: its first rules name both addresses (too few
    // for a subset of their own), then rules that name the source, rules
    // that name the destination, and last a few that name neither. The
    // first ones join a one-small subset; joined to the general subset
    // (neither address small), they gave its tree the index 0, and every
    // lookup walked it and the two others.
    let mut t = String::new();
    for i in 0..100 {
        t += &format!("drop proto udp from 198.18.{i}.0/24 to 198.19.{i}.0/24\n");
    }
    for i in 0..2000 {
        let (a, b) = (i / 200, i % 200);
        t += &format!(
            "drop proto udp from 10.{a}.{b}.0/24 to any port {}\n",
            1000 + i
        );
    }
    for i in 0..2000 {
        let (a, b) = (i / 200, i % 200);
        t += &format!(
            "drop proto udp from 0.0.0.0/0 to 172.{a}.{b}.0/24 port {}\n",
            5000 + i
        );
    }
    for i in 0..200 {
        t += &format!(
            "drop proto tcp from 0.0.0.0/0 to 0.0.0.0/0 port {}\n",
            9000 + i
        );
    }
    let rs = text::parse(&t).expect("parses");
    // No single tree: the subsets' trees.
    let cfg = Config {
        single_tree_budget: 0,
        ..Config::default()
    };
    let c = Classifier::with_config(&rs, &cfg);
    let lin = Linear::new(&rs);
    let keys = classbench::trace(&rs.rules, 2000, 7);
    let mut before_general = 0;
    for k in &keys {
        let m = lin.classify(k);
        assert_eq!(c.classify(k), m, "{k:?}");
        if m.is_some_and(|r| r < 4100) {
            before_general += 1;
            let (trees, _, _) = c.lookup_cost(k);
            assert!(
                trees <= 2,
                "{k:?} matches rule {m:?} and walked {trees} trees: {:?}",
                c.stats()
            );
        }
    }
    assert!(
        before_general > 500,
        "{before_general} keys match a rule before the general ones"
    );
}
