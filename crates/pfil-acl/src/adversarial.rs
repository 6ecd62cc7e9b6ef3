//! Rulesets built to hurt decision trees, for tests and benchmarks: what
//! an operator may write without thinking of the classifier (wide
//! prefixes crossed with port ranges, overlapping port ranges, rules that
//! are mostly wildcards), seeded, and written out in the ClassBench format
//! so that `dpdk-test-acl` reads the same rules.
//!
//! The kinds ([`Kind`]):
//! - `cross`: the security review's construction ("ACL memory cap"):
//!   half the rules have a `/15` source and a short (`/1`-`/4`) destination,
//!   half the reverse, each with a source and a destination port range;
//!   every address is wide in one of the two fields, so partitioning by
//!   address size puts them all in one subset, and cutting either address
//!   replicates the other half.
//! - `ports`: a few wide address prefixes, overlapping random port
//!   ranges in both ports (any point of the port plane is in many rules).
//! - `wild`: each field a wildcard with probability 3/4, else specific
//!   (a `/16`-`/32` prefix, an exact port or a short range, a protocol).
//! - `mixed`: rules of the three kinds above, interleaved.

use crate::classbench::Rng;
use crate::rule::{Action, Addr, Rule, Ruleset};

/// A family of adversarial rulesets (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Wide prefixes crossed with `/15`s, with port ranges.
    Cross,
    /// Overlapping port ranges under a few wide prefixes.
    Ports,
    /// Mostly wildcards.
    Wild,
    /// The three interleaved.
    Mixed,
}

impl Kind {
    /// Every kind, for loops.
    pub const ALL: [Kind; 4] = [Kind::Cross, Kind::Ports, Kind::Wild, Kind::Mixed];

    /// The kind's name (`cross`, `ports`, `wild`, `mixed`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Cross => "cross",
            Kind::Ports => "ports",
            Kind::Wild => "wild",
            Kind::Mixed => "mixed",
        }
    }

    /// The kind named `s`.
    pub fn from_name(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// A set named `adv-KIND-N[-SEED]` (as `pfil-bench acl --sets` takes
/// it): `n` rules of `kind`, seed 1 unless given.
///
/// # Errors
/// If `name` is not of that form, naming what is wrong.
pub fn from_name(name: &str) -> Result<Ruleset, String> {
    let mut parts = name.split('-');
    if parts.next() != Some("adv") {
        return Err(format!(
            "`{name}`: a generated set is named adv-KIND-N[-SEED]"
        ));
    }
    let kind = parts
        .next()
        .and_then(Kind::from_name)
        .ok_or_else(|| format!("`{name}`: KIND is one of cross, ports, wild, mixed"))?;
    let n: usize = parts
        .next()
        .and_then(|n| n.parse().ok())
        .filter(|&n| (1..=1 << 20).contains(&n))
        .ok_or_else(|| format!("`{name}`: N is a rule count, 1 to 1048576"))?;
    let seed: u64 = match parts.next() {
        None => 1,
        Some(s) => s
            .parse()
            .map_err(|_| format!("`{name}`: SEED is an unsigned integer"))?,
    };
    if parts.next().is_some() {
        return Err(format!(
            "`{name}`: a generated set is named adv-KIND-N[-SEED]"
        ));
    }
    Ok(generate(kind, n, seed))
}

/// `n` rules of `kind` from `seed` (the same seed, the same rules). Every
/// rule drops; the default passes.
pub fn generate(kind: Kind, n: usize, seed: u64) -> Ruleset {
    let mut rng = Rng::new(seed ^ 0xad5e_75a1);
    let rules = (0..n)
        .map(|i| {
            let k = match kind {
                Kind::Mixed => Kind::ALL[i % 3],
                k => k,
            };
            match k {
                Kind::Cross => cross(i, &mut rng),
                Kind::Ports => ports(&mut rng),
                _ => wild(&mut rng),
            }
        })
        .collect();
    Ruleset {
        rules,
        default: Action::Pass,
        state_limit: None,
    }
}

fn prefix(rng: &mut Rng, lo: u8, hi: u8) -> Addr {
    let l = rng.range(u64::from(lo), u64::from(hi)) as u8;
    Addr::v4(rng.next_u64() as u32, l)
}

/// A random range of 16-bit values of width up to `max_width`.
fn range(rng: &mut Rng, max_width: u64) -> (u16, u16) {
    let lo = rng.range(0, 65535) as u16;
    let w = rng.range(0, max_width) as u16;
    (lo, lo.saturating_add(w))
}

fn base(src: Addr, dst: Addr) -> Rule {
    Rule {
        src,
        dst,
        ..Rule::any(Action::Drop)
    }
}

fn cross(i: usize, rng: &mut Rng) -> Rule {
    let narrow = prefix(rng, 15, 15);
    let wide = prefix(rng, 1, 4);
    let (src, dst) = if i % 2 == 0 {
        (narrow, wide)
    } else {
        (wide, narrow)
    };
    Rule {
        proto: (6, 6),
        sport: range(rng, 30000),
        dport: range(rng, 30000),
        ..base(src, dst)
    }
}

fn ports(rng: &mut Rng) -> Rule {
    let src = prefix(rng, 0, 4);
    let dst = prefix(rng, 0, 4);
    let proto = if rng.next_u64() & 1 == 0 { 6 } else { 17 };
    Rule {
        proto: (proto, proto),
        sport: range(rng, 40000),
        dport: range(rng, 40000),
        ..base(src, dst)
    }
}

fn wild(rng: &mut Rng) -> Rule {
    // Two fields (of src, dst, sport, dport, protocol) are specific, each
    // other one a wildcard with probability 3/4: no rule is all
    // wildcards (one would hide every rule after it).
    let a = rng.range(0, 4);
    let b = (a + rng.range(1, 4)) % 5;
    let mut specific = [false; 5];
    for f in &mut specific {
        *f = rng.next_u64() % 4 == 0;
    }
    specific[a as usize] = true;
    specific[b as usize] = true;
    let addr = |rng: &mut Rng, s: bool| {
        if s {
            prefix(rng, 16, 32)
        } else {
            Addr::v4(0, 0)
        }
    };
    let port = |rng: &mut Rng, s: bool| if s { range(rng, 16) } else { (0, 65535) };
    let src = addr(rng, specific[0]);
    let dst = addr(rng, specific[1]);
    let sport = port(rng, specific[2]);
    let dport = port(rng, specific[3]);
    let proto = if specific[4] {
        let p = [6, 17, 1][rng.range(0, 2) as usize];
        (p, p)
    } else {
        (0, 255)
    };
    Rule {
        proto,
        sport,
        dport,
        ..base(src, dst)
    }
}

/// `rs` in the ClassBench format ([`crate::classbench::parse`] reads it
/// back to the same rules, up to the action), for `dpdk-test-acl`. A
/// ruleset of IPv6 addresses (as [`crate::classbench::to_ipv6`] makes)
/// is written the same way with IPv6 prefixes (`@2001:db8:a::/40 ...`),
/// the format `dpdk-test-acl --ipv6` reads; a wildcard address is then
/// `::/0`.
///
/// # Errors
/// A rule the format cannot hold (IPv4 and IPv6 addresses in one set, a
/// protocol range other than one value or all, conditions beyond the
/// 5-tuple), by its index.
pub fn to_classbench(rs: &Ruleset) -> Result<String, String> {
    let v6 = rs
        .rules
        .iter()
        .flat_map(|r| [r.src, r.dst])
        .any(|a| matches!(a, Addr::V6(..)));
    let mut out = String::with_capacity(rs.rules.len() * 64);
    for (i, r) in rs.rules.iter().enumerate() {
        let addr = |a: Addr| match (a, v6) {
            (Addr::Any, false) => Ok(format!("{}/0", std::net::Ipv4Addr::UNSPECIFIED)),
            (Addr::Any, true) => Ok(format!("{}/0", std::net::Ipv6Addr::UNSPECIFIED)),
            (Addr::V4(p, l), false) => Ok(format!("{}/{l}", std::net::Ipv4Addr::from(p))),
            (Addr::V6(p, l), true) => Ok(format!("{}/{l}", std::net::Ipv6Addr::from(p))),
            _ => Err(format!("rule {i}: IPv4 and IPv6 addresses in one set")),
        };
        let (s, d) = (addr(r.src)?, addr(r.dst)?);
        let proto = match r.proto {
            (0, 255) => "0x00/0x00".to_string(),
            (a, b) if a == b => format!("0x{a:02x}/0xFF"),
            _ => return Err(format!("rule {i}: a protocol range")),
        };
        if r.vlan.is_some()
            || r.tcp_flags.1 != 0
            || r.icmp_type.is_some()
            || r.icmp_code.is_some()
            || r.uses_ct()
        {
            return Err(format!("rule {i}: conditions beyond the 5-tuple"));
        }
        out.push_str(&format!(
            "@{s}\t{d}\t{} : {}\t{} : {}\t{proto}\t0x0000/0x0000\n",
            r.sport.0, r.sport.1, r.dport.0, r.dport.1
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classbench;

    #[test]
    fn round_trips_through_classbench() {
        for kind in Kind::ALL {
            let rs = generate(kind, 300, 7);
            let text = to_classbench(&rs).unwrap();
            let back = classbench::parse(&text, Action::Drop).unwrap();
            assert_eq!(back.rules.len(), rs.rules.len());
            for (a, b) in rs.rules.iter().zip(&back.rules) {
                assert_eq!(
                    (
                        a.src.v4_range(),
                        a.dst.v4_range(),
                        a.sport,
                        a.dport,
                        a.proto
                    ),
                    (
                        b.src.v4_range(),
                        b.dst.v4_range(),
                        b.sport,
                        b.dport,
                        b.proto
                    ),
                    "{kind:?}"
                );
            }
        }
    }

    #[test]
    fn writes_ipv6_sets_for_dpdk_test_acl() {
        let rs = classbench::parse(
            "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t53 : 53\t0x11/0xFF\t0x0000/0x0000\n",
            Action::Drop,
        )
        .unwrap();
        assert_eq!(
            to_classbench(&classbench::to_ipv6(&rs)).unwrap(),
            "@2001:db8:a00::/40\t2001:db8::/32\t0 : 65535\t53 : 53\t0x11/0xFF\t0x0000/0x0000\n"
        );
        let mut mixed = classbench::to_ipv6(&rs);
        mixed.rules.extend(rs.rules.iter().copied());
        assert!(to_classbench(&mixed)
            .unwrap_err()
            .contains("rule 1: IPv4 and IPv6"));
    }

    #[test]
    fn names_parse_and_bad_names_say_why() {
        assert_eq!(from_name("adv-cross-10").unwrap().rules.len(), 10);
        assert_eq!(
            from_name("adv-wild-5-3").unwrap(),
            generate(Kind::Wild, 5, 3)
        );
        assert!(from_name("adv-foo-10").unwrap_err().contains("KIND"));
        assert!(from_name("adv-cross-x").unwrap_err().contains("N is"));
        assert!(from_name("adv-cross-0").is_err());
        assert!(from_name("adv-cross-1-2-3").is_err());
        assert!(from_name("acl1_1k").is_err());
    }
}
