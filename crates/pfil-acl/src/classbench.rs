//! The ClassBench rule format, and seeded traces of lookup keys.
//!
//! A ClassBench line is
//! `@SRC/LEN<ws>DST/LEN<ws>SPLO : SPHI<ws>DPLO : DPHI<ws>PROTO/MASK[<ws>FLAGS/MASK]`.
//! Rule order is priority order. The protocol mask must be a prefix mask
//! (`0xFF` a value, `0x00` any). The trailing flags column is checked for
//! syntax and **not matched**, as `dpdk-test-acl` does, so results can be
//! compared with rte_acl's rule for rule.

use std::net::Ipv4Addr;

use crate::rule::{Action, Addr, Key, Rule, Ruleset, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use crate::text::ParseError;

/// Parses a ClassBench rule file. Every rule gets `action`; the default
/// action is the other one, so that "matched" and "not matched" differ.
///
/// # Errors
/// The first line that does not parse, with the column of the bad field.
pub fn parse(text: &str, action: Action) -> Result<Ruleset, ParseError> {
    let mut rules = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        rules.push(parse_line(line, i + 1, action)?);
    }
    Ok(Ruleset {
        rules,
        default: match action {
            Action::Pass => Action::Drop,
            Action::Drop => Action::Pass,
        },
        state_limit: None,
    })
}

fn parse_line(line: &str, n: usize, action: Action) -> Result<Rule, ParseError> {
    // Tokens with 1-based columns.
    let mut toks = Vec::new();
    let mut start = None;
    let mut col = 0;
    for (ci, (bi, ch)) in line.char_indices().enumerate() {
        col = ci + 1;
        match (ch.is_whitespace(), start) {
            (false, None) => start = Some((bi, col)),
            (true, Some((b, c))) => {
                toks.push((&line[b..bi], c));
                start = None;
            }
            _ => {}
        }
    }
    if let Some((b, c)) = start {
        toks.push((&line[b..], c));
    }
    let end = col + 1;
    let mut it = toks.into_iter();
    let mut next = |expected: &str| {
        it.next().ok_or_else(|| ParseError {
            line: n,
            column: end,
            expected: expected.into(),
            found: "end of line".into(),
        })
    };
    let bad = |(s, c): (&str, usize), expected: &str| ParseError {
        line: n,
        column: c,
        expected: expected.into(),
        found: format!("`{s}`"),
    };
    const E_SRC: &str = "`@` and a source prefix (@A.B.C.D/LEN)";
    const E_DST: &str = "a destination prefix (A.B.C.D/LEN)";
    const E_PORT: &str = "a port (0-65535)";
    let t = next(E_SRC)?;
    let src =
        t.0.strip_prefix('@')
            .and_then(prefix)
            .ok_or_else(|| bad(t, E_SRC))?;
    let t = next(E_DST)?;
    let dst = prefix(t.0).ok_or_else(|| bad(t, E_DST))?;
    let mut range = |what: &str| -> Result<(u16, u16), ParseError> {
        let lo = next(E_PORT)?;
        let lo_v = lo.0.parse::<u16>().map_err(|_| bad(lo, E_PORT))?;
        let colon = next("` : `")?;
        if colon.0 != ":" {
            return Err(bad(colon, "` : `"));
        }
        let hi = next(E_PORT)?;
        let hi_v = hi.0.parse::<u16>().map_err(|_| bad(hi, E_PORT))?;
        if lo_v > hi_v {
            return Err(bad(hi, &format!("a {what} port high end >= {lo_v}")));
        }
        Ok((lo_v, hi_v))
    };
    let sport = range("source")?;
    let dport = range("destination")?;
    const E_PROTO: &str = "PROTO/MASK in hex with a prefix mask (0x06/0xFF, 0x00/0x00)";
    let t = next(E_PROTO)?;
    let proto = hex_pair(t.0)
        .and_then(|(v, m)| {
            let (v, m) = (u8::try_from(v).ok()?, u8::try_from(m).ok()?);
            // A prefix mask: ones then zeros.
            (m.leading_ones() + m.trailing_zeros() == 8).then_some((v & m, v | !m))
        })
        .ok_or_else(|| bad(t, E_PROTO))?;
    if let Ok(t) = next("") {
        if hex_pair(t.0).is_none() {
            return Err(bad(t, "FLAGS/MASK in hex (0x0000/0x0200) or end of line"));
        }
    }
    let mut r = Rule::any(action);
    r.src = src;
    r.dst = dst;
    r.sport = sport;
    r.dport = dport;
    r.proto = proto;
    Ok(r)
}

fn prefix(s: &str) -> Option<Addr> {
    let (a, l) = s.split_once('/')?;
    let a: Ipv4Addr = a.parse().ok()?;
    let l: u8 = l.parse().ok()?;
    (l <= 32).then(|| Addr::v4(u32::from(a), l))
}

fn hex_pair(s: &str) -> Option<(u32, u32)> {
    let (v, m) = s.split_once('/')?;
    let h = |x: &str| u32::from_str_radix(x.strip_prefix("0x")?, 16).ok();
    Some((h(v)?, h(m)?))
}

/// A small seeded generator (SplitMix64), so traces are reproducible
/// without a dependency.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi]` (inclusive).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        let span = hi - lo;
        if span == u64::MAX {
            return self.next_u64();
        }
        // Lemire's multiply-shift; the tiny bias is irrelevant here.
        lo + ((u128::from(self.next_u64()) * u128::from(span + 1)) >> 64) as u64
    }
}

/// `n` keys: half inside the box of a random rule (a uniform point of each
/// of its ranges), half uniformly random (IPv4, random protocol byte,
/// random ports), shuffled together; the same seed gives the same trace.
/// IPv6 rules give IPv6 keys. With no rules, every key is random.
pub fn trace(rules: &[Rule], n: usize, seed: u64) -> Vec<Key> {
    let mut rng = Rng::new(seed);
    let mut keys = Vec::with_capacity(n);
    for i in 0..n {
        if i % 2 == 0 && !rules.is_empty() {
            let r = &rules[rng.range(0, rules.len() as u64 - 1) as usize];
            keys.push(in_box(r, &mut rng));
        } else {
            let v = rng.next_u64();
            keys.push(Key::ipv4(
                v as u32,
                (v >> 32) as u32,
                rng.next_u64() as u8,
                rng.next_u64() as u16,
                rng.next_u64() as u16,
            ));
        }
    }
    // Fisher-Yates, so in-box and random keys interleave irregularly.
    for i in (1..keys.len()).rev() {
        let j = rng.range(0, i as u64) as usize;
        keys.swap(i, j);
    }
    keys
}

/// A key inside rule `r`'s box (matching `r` unless a field the trace does
/// not model, such as VLAN, says otherwise).
pub fn in_box(r: &Rule, rng: &mut Rng) -> Key {
    let v6 = r.family() == Some(ETHERTYPE_IPV6);
    let addr = |a: Addr, rng: &mut Rng| -> u128 {
        match a {
            Addr::Any if v6 => u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64()),
            Addr::Any => u128::from(rng.next_u64() as u32),
            Addr::V4(p, l) => {
                let host = if l == 32 {
                    0
                } else {
                    (rng.next_u64() as u32) >> l
                };
                u128::from(p | host)
            }
            Addr::V6(p, l) => {
                let r = u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64());
                let host = if l == 128 { 0 } else { r >> l };
                p | host
            }
        }
    };
    let src = addr(r.src, rng);
    let dst = addr(r.dst, rng);
    let proto = rng.range(u64::from(r.proto.0), u64::from(r.proto.1)) as u8;
    let sport = rng.range(u64::from(r.sport.0), u64::from(r.sport.1)) as u16;
    let dport = rng.range(u64::from(r.dport.0), u64::from(r.dport.1)) as u16;
    let mut k = if v6 {
        Key::ipv6(src, dst, proto, sport, dport)
    } else {
        Key::ipv4(src as u32, dst as u32, proto, sport, dport)
    };
    k.tcp_flags = r.tcp_flags.0 | (rng.next_u64() as u8 & !r.tcp_flags.1);
    if r.tcp_flags.1 != 0 {
        k.has |= crate::rule::has::TCP;
    }
    if r.icmp_type.is_some() || r.icmp_code.is_some() {
        k.has |= crate::rule::has::ICMP;
        k.icmp_type = r.icmp_type.unwrap_or(rng.next_u64() as u8);
        k.icmp_code = r.icmp_code.unwrap_or(rng.next_u64() as u8);
    }
    k.vlan = r.vlan;
    if let Some(e) = r.ethertype {
        if e != ETHERTYPE_IPV4 && e != ETHERTYPE_IPV6 {
            k.ethertype = e;
            k.has = 0;
        }
    }
    debug_assert!(k.ethertype != ETHERTYPE_IPV4 || src >> 32 == 0);
    k
}

/// Where [`to_ipv6`] puts an IPv4 address: under 2001:db8::/32, in the
/// second 32-bit word.
fn v6_of(a: u32) -> u128 {
    0x2001_0db8u128 << 96 | u128::from(a) << 64
}

/// The ruleset moved into IPv6, to measure the IPv6 path on a set's
/// structure: each IPv4 prefix `a/l` becomes `2001:db8:a::/(32 + l)` (`a`
/// in the second 32-bit word), an IPv4-only EtherType becomes IPv6, the
/// rest is unchanged. An IPv4 key moved with [`key_to_ipv6`] matches the
/// moved rules the original matched.
pub fn to_ipv6(rs: &Ruleset) -> Ruleset {
    let addr = |a: Addr| match a {
        Addr::V4(p, l) => Addr::v6(v6_of(p), 32 + l),
        other => other,
    };
    let rules = rs
        .rules
        .iter()
        .map(|r| Rule {
            src: addr(r.src),
            dst: addr(r.dst),
            ethertype: r.ethertype.map(|e| {
                if e == ETHERTYPE_IPV4 {
                    ETHERTYPE_IPV6
                } else {
                    e
                }
            }),
            ..*r
        })
        .collect();
    Ruleset {
        rules,
        default: rs.default,
        state_limit: rs.state_limit,
    }
}

/// IPv4 key `k` moved into IPv6 the way [`to_ipv6`] moves rules; any
/// other key unchanged.
pub fn key_to_ipv6(k: &Key) -> Key {
    if k.ethertype != ETHERTYPE_IPV4 {
        return *k;
    }
    Key {
        src: v6_of(k.src as u32),
        dst: v6_of(k.dst as u32),
        ethertype: ETHERTYPE_IPV6,
        ..*k
    }
}

/// The directory of the ClassBench sets: `$PFIL_CLASSBENCH` if set, else
/// the repository's own copy (`data/classbench` at the workspace root:
/// acl1 and fw1 at 1k and 10k rules, Apache-2.0, from the neurocuts
/// repository; see its README), else the first `data/classbench` above
/// the current directory. Nothing outside the repository is looked for.
pub fn data_dir() -> Option<std::path::PathBuf> {
    if let Some(d) = std::env::var_os("PFIL_CLASSBENCH") {
        return Some(d.into());
    }
    let src = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let here = std::env::current_dir().ok();
    std::iter::once(&src)
        .chain(here.iter())
        .flat_map(|p| p.ancestors())
        .map(|a| a.join("data/classbench"))
        .find(|d| d.join("acl1_1k").is_file())
}

/// The old name of [`data_dir`].
#[deprecated(
    since = "0.2.0",
    note = "use data_dir: the sets live in the repository's data/classbench"
)]
pub fn shared_dir() -> Option<std::path::PathBuf> {
    data_dir()
}

/// The trace line `dpdk-test-acl --tracef` reads for a key: `SRC DST
/// SPORT DPORT PROTO`, an IPv4 key's addresses as decimal u32, an IPv6
/// key's as IPv6 text (what `dpdk-test-acl --ipv6` reads).
pub fn dpdk_trace_line(k: &Key) -> String {
    if k.ethertype == ETHERTYPE_IPV6 {
        let ip = std::net::Ipv6Addr::from;
        return format!(
            "{} {} {} {} {}",
            ip(k.src),
            ip(k.dst),
            k.sport,
            k.dport,
            k.proto
        );
    }
    debug_assert_eq!(k.ethertype, ETHERTYPE_IPV4);
    format!(
        "{} {} {} {} {}",
        k.src as u32, k.dst as u32, k.sport, k.dport, k.proto
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_classbench_columns() {
        let rs = parse(
            "@176.19.181.33/32\t90.145.23.162/24\t0 : 65535\t1550 : 1550\t0x06/0xFF\t0x0000/0x0200\t\n\
             @0.0.0.0/0\t1.2.3.4/32\t1024 : 2048\t0 : 65535\t0x00/0x00\n",
            Action::Drop,
        )
        .unwrap();
        assert_eq!(rs.default, Action::Pass);
        let r = rs.rules[0];
        assert_eq!(r.src, Addr::V4(0xb013_b521, 32));
        assert_eq!(r.dst, Addr::V4(0x5a91_1700, 24));
        assert_eq!(
            (r.sport, r.dport, r.proto),
            ((0, 65535), (1550, 1550), (6, 6))
        );
        let r = rs.rules[1];
        assert_eq!(
            (r.src, r.sport, r.proto),
            (Addr::V4(0, 0), (1024, 2048), (0, 255))
        );
        assert_eq!(r.family(), Some(ETHERTYPE_IPV4));
    }

    #[test]
    fn bad_lines_name_line_and_column() {
        let cases: &[(&str, usize, &str)] = &[
            ("1.2.3.4/32 1.2.3.4/32 0 : 1 0 : 1 0x06/0xFF", 1, "`@`"),
            ("@1.2.3.4/33 1.2.3.4/32 0 : 1 0 : 1 0x06/0xFF", 1, "`@`"),
            ("@1.2.3.4/32 1.2.3.4/32 0 - 1 0 : 1 0x06/0xFF", 26, "` : `"),
            (
                "@1.2.3.4/32 1.2.3.4/32 0 : 1 9 : 1 0x06/0xFF",
                34,
                "high end",
            ),
            (
                "@1.2.3.4/32 1.2.3.4/32 0 : 1 0 : 1 0x06/0x0F",
                36,
                "prefix mask",
            ),
            ("@1.2.3.4/32 1.2.3.4/32 0 : 1 0 : 1", 35, "PROTO/MASK"),
            (
                "@1.2.3.4/32 1.2.3.4/32 0 : 1 0 : 1 0x06/0xFF zz",
                46,
                "FLAGS/MASK",
            ),
        ];
        for &(line, col, want) in cases {
            let text = format!("# header\n{line}\n");
            let e = parse(&text, Action::Drop).unwrap_err();
            assert_eq!((e.line, e.column), (2, col), "{line}: {e}");
            assert!(e.expected.contains(want), "{line}: {e}");
        }
    }

    #[test]
    fn the_shared_sets_parse_completely() {
        for (name, min) in [("acl1_1k", 900), ("fw1_1k", 700)] {
            let dir = data_dir().expect("data/classbench not found (the repository carries it)");
            let text = std::fs::read_to_string(dir.join(name)).unwrap();
            let rs = parse(&text, Action::Drop).unwrap();
            assert_eq!(
                rs.rules.len(),
                text.lines().filter(|l| l.starts_with('@')).count()
            );
            assert!(rs.rules.len() >= min, "{name}: {}", rs.rules.len());
        }
    }

    #[test]
    fn in_box_keys_match_their_rule_and_traces_are_seeded() {
        let rs = parse(
            "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t80 : 90\t0x06/0xFF\n\
             @0.0.0.0/0\t192.168.1.0/24\t5 : 5\t0 : 65535\t0x00/0x00\n",
            Action::Drop,
        )
        .unwrap();
        let mut rng = Rng::new(7);
        for r in &rs.rules {
            for _ in 0..1000 {
                assert!(r.matches(&in_box(r, &mut rng)));
            }
        }
        let a = trace(&rs.rules, 1000, 1);
        assert_eq!(a, trace(&rs.rules, 1000, 1));
        assert_ne!(a, trace(&rs.rules, 1000, 2));
        let inside = a
            .iter()
            .filter(|k| rs.rules.iter().any(|r| r.matches(k)))
            .count();
        assert!((450..700).contains(&inside), "{inside}");
        assert_eq!(dpdk_trace_line(&Key::ipv4(1, 2, 6, 3, 4)), "1 2 3 4 6");
        assert_eq!(
            dpdk_trace_line(&key_to_ipv6(&Key::ipv4(0x0a00_0001, 2, 17, 3, 53))),
            "2001:db8:a00:1:: 2001:db8:0:2:: 3 53 17"
        );
        assert_eq!(a[0].ethertype, ETHERTYPE_IPV4);
    }
}
