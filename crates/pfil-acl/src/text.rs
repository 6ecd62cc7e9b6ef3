//! The pf-like text format (grammar in `FORMAT.md` and the crate docs).
//!
//! Parsing is all or nothing: the first error is returned with its line,
//! column and what was expected, and no ruleset is built.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::rule::{
    Action, Addr, Rule, Ruleset, ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6, STATE_LIMIT_MAX,
};

/// Where and why a ruleset did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column (in characters) of the offending token, or of the
    /// end of the line when something is missing.
    pub column: usize,
    /// What the parser expected there.
    pub expected: String,
    /// What it found (`end of line` when the line ended).
    pub found: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: expected {}, found {}",
            self.line, self.column, self.expected, self.found
        )
    }
}

impl std::error::Error for ParseError {}

/// A whitespace-separated word and its 1-based column.
#[derive(Clone, Copy)]
struct Tok<'a> {
    s: &'a str,
    col: usize,
}

struct Line<'a> {
    toks: Vec<Tok<'a>>,
    pos: usize,
    line: usize,
    end_col: usize,
}

impl<'a> Line<'a> {
    fn new(text: &'a str, line: usize) -> Line<'a> {
        let text = match text.find('#') {
            Some(i) => &text[..i],
            None => text,
        };
        let mut toks = Vec::new();
        let mut start = None;
        let mut col = 0;
        for (ci, (bi, ch)) in text.char_indices().enumerate() {
            col = ci + 1;
            match (ch.is_whitespace(), start) {
                (false, None) => start = Some((bi, col)),
                (true, Some((b, c))) => {
                    toks.push(Tok {
                        s: &text[b..bi],
                        col: c,
                    });
                    start = None;
                }
                _ => {}
            }
        }
        if let Some((b, c)) = start {
            toks.push(Tok {
                s: &text[b..],
                col: c,
            });
        }
        Line {
            toks,
            pos: 0,
            line,
            end_col: col + 1,
        }
    }

    fn peek(&self) -> Option<&'a str> {
        self.toks.get(self.pos).map(|t| t.s)
    }

    fn next(&mut self, expected: &str) -> Result<Tok<'a>, ParseError> {
        match self.toks.get(self.pos) {
            Some(&t) => {
                self.pos += 1;
                Ok(t)
            }
            None => Err(ParseError {
                line: self.line,
                column: self.end_col,
                expected: expected.into(),
                found: "end of line".into(),
            }),
        }
    }

    fn eat(&mut self, word: &str) -> bool {
        if self.peek() == Some(word) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn err(&self, t: Tok<'_>, expected: &str) -> ParseError {
        ParseError {
            line: self.line,
            column: t.col,
            expected: expected.into(),
            found: format!("`{}`", shorten(t.s)),
        }
    }
}

const E_ACTION: &str = "`pass`, `drop`, `default` or `set limit states`";
const E_PORTS: &str = "a port or port range (N or LOW:HIGH, 0-65535)";
const E_PROTO: &str = "a protocol (tcp, udp, icmp, icmp6, sctp, any or 0-255)";
const E_ADDR: &str = "`any`, an IPv4 or IPv6 address or prefix (ADDR/LEN)";
const E_FLAGS: &str = "TCP flags VALUE/MASK of the letters FSRPAUEC (e.g. S/SA)";
const E_U8: &str = "a number 0-255";
const E_CT_STATE: &str =
    "connection states separated by `,` (new, established, related, invalid, untracked)";
const E_CT_DIR: &str = "`original` or `reply`";

/// A token as an error shows it: at most 40 characters, then `…`.
fn shorten(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

/// Parses a ruleset in the text format.
///
/// # Errors
/// The first [`ParseError`]; nothing is built.
pub fn parse(text: &str) -> Result<Ruleset, ParseError> {
    let mut rules = Vec::new();
    let mut default = None;
    let mut state_limit = None;
    for (i, raw) in text.lines().enumerate() {
        let mut l = Line::new(raw, i + 1);
        if l.peek().is_none() {
            continue;
        }
        let t = l.next(E_ACTION)?;
        match t.s {
            "default" => {
                let a = l.next("`pass` or `drop`")?;
                let act = action(a.s).ok_or_else(|| l.err(a, "`pass` or `drop`"))?;
                if default.is_some() {
                    return Err(l.err(t, "a single `default` line (this is the second)"));
                }
                default = Some(act);
            }
            "set" => {
                // pf's `set limit states N`.
                for word in ["limit", "states"] {
                    let w = l.next(&format!("`{word}` (`set limit states N`)"))?;
                    if w.s != word {
                        return Err(l.err(w, &format!("`{word}` (`set limit states N`)")));
                    }
                }
                let n = l.next(E_STATES)?;
                let v = parse_count(n.s)
                    .filter(|v| (1..=STATE_LIMIT_MAX).contains(v))
                    .ok_or_else(|| l.err(n, E_STATES))?;
                if state_limit.is_some() {
                    return Err(l.err(t, "a single `set limit states` line (this is the second)"));
                }
                state_limit = Some(v);
            }
            s => {
                let act = action(s).ok_or_else(|| l.err(t, E_ACTION))?;
                rules.push(rule(&mut l, act)?);
            }
        }
        if let Some(&t) = l.toks.get(l.pos) {
            return Err(l.err(t, "end of line"));
        }
    }
    Ok(Ruleset {
        rules,
        default: default.unwrap_or(Action::Pass),
        state_limit,
    })
}

const E_STATES: &str = "a number of states, 1 to 10000000 (`100000`, `100k`, `1M`)";

/// A count as configs write them: `100000`, `100_000`, `100k`, `1M`
/// (`set limit states`, the `ct` hook's `max`); `None` if it is not one
/// or overflows.
pub fn parse_count(s: &str) -> Option<usize> {
    let (digits, mult) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1_000),
        b'm' | b'M' => (&s[..s.len() - 1], 1_000_000),
        _ => (s, 1),
    };
    let digits: String = digits.chars().filter(|&c| c != '_').collect();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<usize>().ok()?.checked_mul(mult)
}

fn action(s: &str) -> Option<Action> {
    match s {
        "pass" => Some(Action::Pass),
        "drop" | "block" => Some(Action::Drop),
        _ => None,
    }
}

fn rule(l: &mut Line<'_>, action: Action) -> Result<Rule, ParseError> {
    let first = l.toks[0];
    let mut r = Rule::any(action);
    r.count = l.eat("count");
    // Optional parts, in this order; each may appear at most once.
    if let Some(e) = match l.peek() {
        Some("inet") => Some(ETHERTYPE_IPV4),
        Some("inet6") => Some(ETHERTYPE_IPV6),
        Some("arp") => Some(ETHERTYPE_ARP),
        _ => None,
    } {
        l.pos += 1;
        r.ethertype = Some(e);
    } else if l.eat("ethertype") {
        let t = l.next("an EtherType (0xHHHH)")?;
        r.ethertype = Some(
            t.s.strip_prefix("0x")
                .and_then(|h| u16::from_str_radix(h, 16).ok())
                .ok_or_else(|| l.err(t, "an EtherType (0xHHHH)"))?,
        );
    }
    if l.eat("vlan") {
        let t = l.next("a VLAN id (0-4095)")?;
        r.vlan = Some(
            t.s.parse::<u16>()
                .ok()
                .filter(|v| *v < 4096)
                .ok_or_else(|| l.err(t, "a VLAN id (0-4095)"))?,
        );
    }
    if l.eat("proto") {
        let t = l.next(E_PROTO)?;
        r.proto = match t.s {
            "tcp" => (6, 6),
            "udp" => (17, 17),
            "icmp" => (1, 1),
            "icmp6" => (58, 58),
            "sctp" => (132, 132),
            "any" => (0, 255),
            s => {
                let v = s.parse::<u8>().map_err(|_| l.err(t, E_PROTO))?;
                (v, v)
            }
        };
    }
    if l.eat("all") {
        // `from any to any`
    } else {
        if l.eat("from") {
            (r.src, r.sport) = endpoint(l)?;
        }
        if l.eat("to") {
            (r.dst, r.dport) = endpoint(l)?;
        }
    }
    if l.eat("flags") {
        let t = l.next(E_FLAGS)?;
        r.tcp_flags = flags(t.s).ok_or_else(|| l.err(t, E_FLAGS))?;
        if r.proto == (0, 255) {
            r.proto = (6, 6);
        }
    }
    if l.eat("icmp-type") {
        let t = l.next(E_U8)?;
        r.icmp_type = Some(t.s.parse().map_err(|_| l.err(t, E_U8))?);
        if l.eat("code") {
            let t = l.next(E_U8)?;
            r.icmp_code = Some(t.s.parse().map_err(|_| l.err(t, E_U8))?);
        }
    } else if l.eat("icmp-code") {
        let t = l.next(E_U8)?;
        r.icmp_code = Some(t.s.parse().map_err(|_| l.err(t, E_U8))?);
    }
    if l.peek() == Some("ct") && l.toks.get(l.pos + 1).is_some_and(|t| t.s == "state") {
        l.pos += 2;
        let t = l.next(E_CT_STATE)?;
        let mut bits = 0u8;
        for w in t.s.split(',') {
            let v = crate::ct::NAMES
                .iter()
                .position(|n| *n == w)
                .ok_or_else(|| l.err(t, E_CT_STATE))?;
            bits |= crate::ct::bit(v as u8);
        }
        r.ct_state = bits;
    }
    if l.peek() == Some("ct") && l.toks.get(l.pos + 1).is_some_and(|t| t.s == "dir") {
        l.pos += 2;
        let t = l.next(E_CT_DIR)?;
        r.ct_dir = Some(match t.s {
            "reply" => true,
            "original" => false,
            _ => return Err(l.err(t, E_CT_DIR)),
        });
    }
    if l.eat("mark") {
        let t = l.next(E_MARK)?;
        let (v, m) = match t.s.split_once('/') {
            Some((v, m)) => (v, Some(m)),
            None => (t.s, None),
        };
        let v = mark_number(v).ok_or_else(|| l.err(t, E_MARK))?;
        let m = match m {
            Some(m) => mark_number(m).ok_or_else(|| l.err(t, E_MARK))?,
            None => u32::MAX,
        };
        if v & !m != 0 {
            return Err(l.err(t, "a mark whose value has no bits outside its mask"));
        }
        r.mark = Some((v, m));
    }
    if l.peek() == Some("keep") {
        let t = l.toks[l.pos];
        l.pos += 1;
        if !l.eat("state") {
            let n = l.next("`state` after `keep`")?;
            return Err(l.err(n, "`state` after `keep`"));
        }
        if action != Action::Pass {
            return Err(l.err(t, "`keep state` on a `pass` rule only (or end of line)"));
        }
        r.keep_state = true;
    }
    if l.peek() == Some("set") {
        l.pos += 1;
        if !l.eat("mark") {
            let n = l.next("`mark` after `set`")?;
            return Err(l.err(n, "`mark` after `set`"));
        }
        let t = l.next(E_SET_MARK)?;
        r.set_mark = Some(mark_number(t.s).ok_or_else(|| l.err(t, E_SET_MARK))?);
    }
    if let Some(&t) = l.toks.get(l.pos) {
        return Err(l.err(
            t,
            "`count`, `inet`, `inet6`, `arp`, `ethertype`, `vlan`, `proto`, `all`, `from`, `to`, `flags`, `icmp-type`, `icmp-code`, `ct state`, `ct dir`, `mark`, `keep state`, `set mark` (in this order) or end of line",
        ));
    }
    r.validate()
        .map_err(|e| l.err(first, &format!("a consistent rule ({e})")))?;
    Ok(r)
}

/// A mark: decimal or `0x` hexadecimal, 32 bits.
fn mark_number(s: &str) -> Option<u32> {
    match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

const E_MARK: &str = "a mark (0 to 0xffffffff, decimal or 0x hex, optionally /MASK)";
const E_SET_MARK: &str = "a mark to set (0 to 0xffffffff, decimal or 0x hex)";

fn endpoint(l: &mut Line<'_>) -> Result<(Addr, (u16, u16)), ParseError> {
    let mut addr = Addr::Any;
    if l.peek() != Some("port") {
        let t = l.next(E_ADDR)?;
        addr = address(t.s).ok_or_else(|| l.err(t, E_ADDR))?;
    }
    let mut ports = (0, u16::MAX);
    if l.eat("port") {
        let t = l.next(E_PORTS)?;
        ports = port_range(t.s).ok_or_else(|| l.err(t, E_PORTS))?;
    }
    Ok((addr, ports))
}

fn address(s: &str) -> Option<Addr> {
    if s == "any" {
        return Some(Addr::Any);
    }
    let (a, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l.parse::<u8>().ok()?)),
        None => (s, None),
    };
    if let Ok(v4) = a.parse::<Ipv4Addr>() {
        let len = len.unwrap_or(32);
        (len <= 32).then(|| Addr::v4(u32::from(v4), len))
    } else if let Ok(v6) = a.parse::<Ipv6Addr>() {
        let len = len.unwrap_or(128);
        (len <= 128).then(|| Addr::v6(u128::from(v6), len))
    } else {
        None
    }
}

fn port_range(s: &str) -> Option<(u16, u16)> {
    let (lo, hi) = match s.split_once(':') {
        Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
        None => {
            let p = s.parse().ok()?;
            (p, p)
        }
    };
    (lo <= hi).then_some((lo, hi))
}

/// `S/SA`: letters F S R P A U E C (E = ECE, C = CWR) for value and mask;
/// an empty value (`/SA`) means none of the mask bits set.
fn flags(s: &str) -> Option<(u8, u8)> {
    let (v, m) = s.split_once('/')?;
    let bits = |s: &str| -> Option<u8> {
        s.chars().try_fold(0u8, |acc, c| {
            let b = match c {
                'F' => 0x01,
                'S' => 0x02,
                'R' => 0x04,
                'P' => 0x08,
                'A' => 0x10,
                'U' => 0x20,
                'E' => 0x40,
                'C' => 0x80,
                _ => return None,
            };
            Some(acc | b)
        })
    };
    let (v, m) = (bits(v)?, bits(m)?);
    (m != 0 && v & !m == 0).then_some((v, m))
}

/// Writes a ruleset back in the text format (parsing the output gives the
/// same ruleset).
pub fn to_text(rs: &Ruleset) -> String {
    let mut s = String::new();
    for r in &rs.rules {
        s.push_str(&rule_text(r));
        s.push('\n');
    }
    s.push_str(&format!("default {}\n", rs.default));
    if let Some(n) = rs.state_limit {
        s.push_str(&format!("set limit states {n}\n"));
    }
    s
}

fn rule_text(r: &Rule) -> String {
    let mut w = vec![r.action.to_string()];
    if r.count {
        w.push("count".into());
    }
    match r.ethertype {
        None => {}
        Some(ETHERTYPE_IPV4) => w.push("inet".into()),
        Some(ETHERTYPE_IPV6) => w.push("inet6".into()),
        Some(ETHERTYPE_ARP) => w.push("arp".into()),
        Some(e) => w.push(format!("ethertype 0x{e:04x}")),
    }
    if let Some(v) = r.vlan {
        w.push(format!("vlan {v}"));
    }
    let flagged = r.tcp_flags.1 != 0;
    if r.proto != (0, 255) && !(flagged && r.proto == (6, 6)) {
        w.push(format!("proto {}", r.proto.0));
    }
    let ep = |a: Addr, p: (u16, u16)| {
        let mut s = match a {
            Addr::Any => "any".to_string(),
            Addr::V4(a, l) => format!("{}/{l}", Ipv4Addr::from(a)),
            Addr::V6(a, l) => format!("{}/{l}", Ipv6Addr::from(a)),
        };
        if p != (0, u16::MAX) {
            s.push_str(&format!(" port {}:{}", p.0, p.1));
        }
        s
    };
    w.push(format!("from {}", ep(r.src, r.sport)));
    w.push(format!("to {}", ep(r.dst, r.dport)));
    if flagged {
        let l = |b: u8| {
            "FSRPAUEC"
                .chars()
                .enumerate()
                .filter(|(i, _)| b & (1 << i) != 0)
                .map(|(_, c)| c)
                .collect::<String>()
        };
        w.push(format!("flags {}/{}", l(r.tcp_flags.0), l(r.tcp_flags.1)));
    }
    if let Some(t) = r.icmp_type {
        w.push(format!("icmp-type {t}"));
    }
    match (r.icmp_type, r.icmp_code) {
        (Some(_), Some(c)) => w.push(format!("code {c}")),
        (None, Some(c)) => w.push(format!("icmp-code {c}")),
        _ => {}
    }
    if r.ct_state != 0 {
        let names: Vec<&str> = (0..5u8)
            .filter(|&v| r.ct_state & crate::ct::bit(v) != 0)
            .map(|v| crate::ct::NAMES[usize::from(v)])
            .collect();
        w.push(format!("ct state {}", names.join(",")));
    }
    if let Some(reply) = r.ct_dir {
        w.push(format!(
            "ct dir {}",
            if reply { "reply" } else { "original" }
        ));
    }
    if let Some((v, m)) = r.mark {
        if m == u32::MAX {
            w.push(format!("mark {v:#x}"));
        } else {
            w.push(format!("mark {v:#x}/{m:#x}"));
        }
    }
    if r.keep_state {
        w.push("keep state".into());
    }
    if let Some(v) = r.set_mark {
        w.push(format!("set mark {v:#x}"));
    }
    w.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::Key;

    #[test]
    fn ct_state_and_dir_parse_print_and_match() {
        let rs = parse(
            "pass ct state established,related\n\
             pass proto tcp to any port 22 ct state new ct dir original\n\
             drop all ct state invalid\n\
             pass ct dir reply\n\
             default drop\n",
        )
        .unwrap();
        use crate::ct::*;
        assert_eq!(rs.rules[0].ct_state, bit(ESTABLISHED) | bit(RELATED));
        assert_eq!(
            (rs.rules[1].ct_state, rs.rules[1].ct_dir),
            (bit(NEW), Some(false))
        );
        assert_eq!(rs.rules[3].ct_dir, Some(true));
        assert_eq!(parse(&to_text(&rs)).unwrap(), rs);
        let ks = parse("pass out proto udp to any port 53 keep state").unwrap_err();
        assert!(ks.to_string().contains("expected"), "{ks}");
        let ks = parse("pass proto udp to any port 53 keep state").unwrap();
        assert!(ks.rules[0].keep_state);
        assert_eq!(parse(&to_text(&ks)).unwrap(), ks);
        let mut k = Key::ipv4(1, 2, 6, 1000, 22);
        let first = |k: &Key| rs.rules.iter().position(|r| r.matches(k));
        assert_eq!(first(&k), None, "untracked");
        k.ct = NEW;
        assert_eq!(first(&k), Some(1));
        k.ct = NEW | REPLY;
        assert_eq!(first(&k), Some(3));
        k.ct = RELATED | REPLY;
        assert_eq!(first(&k), Some(0));
        k.ct = INVALID;
        assert_eq!(first(&k), Some(2));
        for (bad, col, says) in [
            ("pass ct state establish", 15, "connection states"),
            ("pass ct state new,", 15, "connection states"),
            ("pass ct dir in", 13, "`original` or `reply`"),
            ("pass ct dir reply ct state new", 19, "in this order"),
            ("drop proto tcp keep state", 16, "on a `pass` rule only"),
            ("pass proto tcp keep", 20, "`state` after `keep`"),
            ("pass proto tcp keep state ct dir reply", 27, "end of line"),
            ("pass ct", 6, "in this order"),
        ] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.column, col, "{bad}: {e}");
            assert!(e.to_string().contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn the_issue_examples_parse() {
        let rs = parse(
            "# edge ACL\n\
             drop proto tcp from 10.0.0.0/8 to 198.18.0.0/15 port 22 flags S/SA\n\
             pass proto udp from any port 1024:65535 to 198.18.0.1   # dns replies\n\
             \n\
             drop count inet6 proto icmp6 from 2001:db8::/32 to any icmp-type 128 code 0\n\
             pass vlan 7 all\n\
             default drop\n",
        )
        .unwrap();
        assert_eq!(rs.default, Action::Drop);
        assert_eq!(rs.rules.len(), 4);
        let r = rs.rules[0];
        assert_eq!(r.action, Action::Drop);
        assert_eq!(r.src, Addr::V4(0x0a00_0000, 8));
        assert_eq!(r.dst, Addr::V4(0xc612_0000, 15));
        assert_eq!((r.proto, r.dport, r.sport), ((6, 6), (22, 22), (0, 65535)));
        assert_eq!(r.tcp_flags, (0x02, 0x12));
        let r = rs.rules[1];
        assert_eq!((r.sport, r.dst), ((1024, 65535), Addr::V4(0xc612_0001, 32)));
        let r = rs.rules[2];
        assert!(r.count);
        assert_eq!(r.ethertype, Some(ETHERTYPE_IPV6));
        assert_eq!((r.icmp_type, r.icmp_code), (Some(128), Some(0)));
        assert_eq!(rs.rules[3].vlan, Some(7));

        let syn = Key {
            tcp_flags: 0x02,
            ..Key::ipv4(0x0a01_0203, 0xc613_0001, 6, 5555, 22)
        };
        assert!(rs.rules[0].matches(&syn));
        let ack = Key {
            tcp_flags: 0x12,
            ..syn
        };
        assert!(!rs.rules[0].matches(&ack));
    }

    #[test]
    fn text_round_trips() {
        let text = "drop proto tcp from 10.0.0.0/8 to 198.18.0.0/15 port 22 flags S/SA\n\
                    pass count arp all\n\
                    pass ethertype 0x88cc all\n\
                    pass proto 47 from ::1 to fe80::/10 port 1:2\n\
                    drop inet proto icmp icmp-type 8\n\
                    default pass\n";
        let rs = parse(text).unwrap();
        assert_eq!(parse(&to_text(&rs)).unwrap(), rs);
    }

    #[test]
    fn errors_name_line_column_and_what_was_expected() {
        // (input, line, column, expected fragment, found)
        let cases: &[(&str, usize, usize, &str, &str)] = &[
            (
                "allow all",
                1,
                1,
                "`pass`, `drop`, `default` or `set limit states`",
                "`allow`",
            ),
            ("set limits states 5", 1, 5, "`limit`", "`limits`"),
            ("set limit", 1, 10, "`states`", "end of line"),
            (
                "set limit states",
                1,
                17,
                "a number of states",
                "end of line",
            ),
            ("set limit states 0", 1, 18, "1 to 10000000", "`0`"),
            ("set limit states 11M", 1, 18, "a number of states", "`11M`"),
            (
                "set limit states lots",
                1,
                18,
                "a number of states",
                "`lots`",
            ),
            (
                "set limit states 5\nset limit states 6",
                2,
                1,
                "single `set limit states`",
                "`set`",
            ),
            ("pass all\n  drop proto tcpp", 2, 14, "a protocol", "`tcpp`"),
            (
                "pass from 10.0.0.0/33",
                1,
                11,
                "IPv4 or IPv6 address",
                "`10.0.0.0/33`",
            ),
            (
                "pass from 10.0.0.300",
                1,
                11,
                "IPv4 or IPv6",
                "`10.0.0.300`",
            ),
            ("pass to any port 80:22", 1, 18, "port range", "`80:22`"),
            ("pass to any port 65536", 1, 18, "port range", "`65536`"),
            ("pass to any port", 1, 17, "port range", "end of line"),
            ("pass flags X/SA", 1, 12, "TCP flags", "`X/SA`"),
            ("pass flags SA/S", 1, 12, "TCP flags", "`SA/S`"),
            ("pass vlan 4096 all", 1, 11, "VLAN id", "`4096`"),
            (
                "pass proto tcp from any to any extra",
                1,
                32,
                "end of line",
                "`extra`",
            ),
            ("pass to any from any", 1, 13, "in this order", "`from`"),
            ("default", 1, 8, "`pass` or `drop`", "end of line"),
            (
                "default drop\ndefault pass",
                2,
                1,
                "single `default`",
                "`default`",
            ),
            (
                "pass from 10.0.0.1 to ::1",
                1,
                1,
                "different address families",
                "`pass`",
            ),
            (
                "pass inet6 from 10.0.0.1",
                1,
                1,
                "contradicts the ethertype",
                "`pass`",
            ),
            ("pass icmp-type 300", 1, 16, "0-255", "`300`"),
            ("pass ethertype 86dd all", 1, 16, "EtherType", "`86dd`"),
            ("\t drop   proto", 1, 15, "a protocol", "end of line"),
        ];
        for &(input, line, column, expected, found) in cases {
            let e = parse(input).unwrap_err();
            assert_eq!((e.line, e.column), (line, column), "{input:?}: {e}");
            assert!(e.expected.contains(expected), "{input:?}: {e}");
            assert_eq!(e.found, found, "{input:?}: {e}");
            let msg = e.to_string();
            assert!(
                msg.starts_with(&format!("line {line}, column {column}: expected")),
                "{msg}"
            );
        }
    }

    #[test]
    fn comments_and_blank_lines_are_skipped_and_default_is_pass() {
        let rs = parse("# nothing\n\n   # still nothing\n").unwrap();
        assert!(rs.rules.is_empty());
        assert_eq!(rs.default, Action::Pass);
    }
}
