//! The IPv6 trees' lanes are exact for a key under the address words
//! most rules name above the words the trees cut (`2001:db8` here), and
//! a rule exact only for such keys must not hide the rules after it
//! from the others: batch and single lookups against linear scan, keys
//! under and not under those words, with and without ports, with and
//! without a loose rule (one that needs ports and names every protocol).

use pfil_acl::{text, Classifier, Classify, Key, Linear};

/// Under `2001:db8::/32` the rules differ in the second word, so that is
/// the word the trees cut, and `2001:db8` the words above it.
/// `loose`: first a rule that needs ports and names every protocol,
/// whose lanes take a key without ports (ICMPv6) where it does not match.
fn ruleset(loose: bool) -> String {
    let mut t = String::new();
    if loose {
        t += "drop from 2001:db8:0:3::/64 to any port 0:100\n";
    }
    for i in 0..300u32 {
        t += &format!(
            "drop proto udp from 2001:db8:{:x}:{:x}::/64 to any port {}\n",
            i >> 4,
            i & 15,
            1000 + i
        );
    }
    // A longer prefix than the chosen word holds: always confirmed.
    t += "drop proto tcp from 2001:db8:0:5:1::/80 to any port 22\n";
    // Covers every box of the trees, for keys under 2001:db8, and
    // matches no key outside it: it must not prune what follows.
    t += "pass from 2001:db8::/32 to any\n";
    t += "drop proto udp from ::/0 to any port 53\n";
    // (To, not from: a rule from fe80::/16 would be confirmed on every
    // key, and sit in every TCP leaf.)
    t += "drop proto tcp from any to fe80::/16\n";
    t += "pass from ::/0 to any\n";
    t
}

fn keys() -> Vec<Key> {
    let db8 = 0x2001_0db8u128 << 96;
    let mut k = Vec::new();
    for i in 0..300u128 {
        // The /64 of rule `i`.
        let net = ((i >> 4) << 16 | (i & 15)) << 64;
        for port in [1000 + i as u16, 1000 + ((i as u16 + 1) % 300), 53] {
            // Under 2001:db8 (the lanes decide), outside it (every hit
            // confirmed).
            k.push(Key::ipv6(db8 | net | i, 1, 17, 4000, port));
            k.push(Key::ipv6(0x2001_0db9u128 << 96 | net, 1, 17, 4000, port));
        }
        // TCP to 22 in the /80, next to it, and to fe80::/16.
        k.push(Key::ipv6(db8 | 5 << 64 | 1 << 48 | i, 1, 6, 4000, 22));
        k.push(Key::ipv6(db8 | 5 << 64 | 2 << 48 | i, 1, 6, 4000, 22));
        k.push(Key::ipv6(
            0x2001_0db9u128 << 96,
            0xfe80u128 << 112 | i,
            6,
            4000,
            22,
        ));
        // No ports (ICMPv6): every hit confirmed.
        let mut icmp = Key::ipv6(db8 | net, 1, 58, 0, 0);
        icmp.has &= !pfil_acl::has::PORTS;
        k.push(icmp);
        // And IPv4 keys in the same batch.
        k.push(Key::ipv4(0x0a00_0000 | i as u32, 1, 17, 4000, 53));
    }
    k
}

#[test]
fn ipv6_batches_and_single_lookups_agree_with_linear_scan() {
    for loose in [false, true] {
        check(loose);
    }
}

fn check(loose: bool) {
    let rs = text::parse(&ruleset(loose)).expect("parses");
    let c = Classifier::new(&rs);
    let lin = Linear::new(&rs);
    let keys = keys();
    let want: Vec<Option<u32>> = keys.iter().map(|k| lin.classify(k)).collect();
    // Every rule is somebody's match, the catch-all included.
    let first = u32::from(loose);
    for r in [0, 299, 300, 301, 302, 303, 304] {
        assert!(want.contains(&Some(first + r)), "no key matches rule {r}");
    }
    for (k, w) in keys.iter().zip(&want) {
        assert_eq!(c.classify(k), *w, "single lookup of {k:?} (loose {loose})");
    }
    // A datapath's batch (small chunks) and a long one.
    for n in [32, keys.len()] {
        let mut got = vec![None; keys.len()];
        for (ks, os) in keys.chunks(n).zip(got.chunks_mut(n)) {
            c.classify_batch(ks, os);
        }
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "batch of {n}, loose {loose}: key {:?}", keys[i]);
        }
    }
}
