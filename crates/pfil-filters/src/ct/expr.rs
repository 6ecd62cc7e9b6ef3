//! Which states an operator means (`pfilctl states [HOOK] [EXPR]`,
//! `pfilctl states --kill EXPR`): a small filter language in the words
//! of conntrack(8), pfctl(8) and tcpdump(1).
//!
//! ```text
//! EXPR  := TERM { "and" TERM }          every term must hold
//! TERM  := [ "not" ] MATCH
//! MATCH := "all"                        every state
//!        | "proto" ( tcp | udp | icmp | icmp6 | NUMBER )
//!        | ( "src" | "dst" | "host" ) [ "net" ] ADDR[/LEN]
//!        | ( "sport" | "dport" | "port" ) NUMBER
//!        | "state" NAME
//! ```
//! `src` is the originator's address, `dst` the responder's, `host`
//! either; `sport`/`dport` likewise and `port` either. `state NAME`
//! matches a flow whose state is NAME (`new`, `established`) or, for
//! TCP, either side's state (`established`, `fin_wait_2`, `closed`,
//! ... as `pfilctl states` shows them, `syn_sent:closed`). Words are
//! separated by spaces; an empty expression is refused (say `all`).

use std::net::IpAddr;

use super::StateInfo;

/// A parsed expression: the terms, all of which must hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateExpr {
    terms: Vec<(bool, Match)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Side {
    Src,
    Dst,
    Either,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Match {
    All,
    Proto(u8),
    Addr(Side, IpAddr, u8),
    Port(Side, u16),
    State(String),
}

/// The words that start a match (a caller telling a hook name from
/// an expression looks at the first word).
pub const KEYWORDS: &[&str] = &[
    "all", "not", "proto", "src", "dst", "host", "sport", "dport", "port", "state",
];

fn prefix_len(a: IpAddr) -> u8 {
    if a.is_ipv4() {
        32
    } else {
        128
    }
}

fn in_net(x: IpAddr, net: IpAddr, len: u8) -> bool {
    match (x, net) {
        (IpAddr::V4(x), IpAddr::V4(n)) => {
            let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            u32::from(x) & m == u32::from(n) & m
        }
        (IpAddr::V6(x), IpAddr::V6(n)) => {
            let m = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            u128::from(x) & m == u128::from(n) & m
        }
        _ => false,
    }
}

impl StateExpr {
    /// Parse `text`; the error names the word at fault and what was
    /// expected there.
    pub fn parse(text: &str) -> Result<StateExpr, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        if words.is_empty() {
            return Err("an empty expression: say `all` for every state".into());
        }
        let mut terms = Vec::new();
        let mut i = 0;
        let next = |i: &mut usize, what: &str| -> Result<&str, String> {
            let w = words
                .get(*i)
                .copied()
                .ok_or_else(|| format!("{what} expected after `{}`", words[*i - 1]))?;
            *i += 1;
            Ok(w)
        };
        loop {
            let mut neg = false;
            let mut w = next(&mut i, "a match")?;
            if w == "not" {
                neg = true;
                w = next(&mut i, "a match")?;
            }
            let m = match w {
                "all" => Match::All,
                "proto" => {
                    let p = next(&mut i, "a protocol (tcp, udp, icmp, icmp6 or a number)")?;
                    Match::Proto(match p {
                        "tcp" => 6,
                        "udp" => 17,
                        "icmp" => 1,
                        "icmp6" | "ipv6-icmp" => 58,
                        n => n.parse().map_err(|_| {
                            format!("proto: `{n}` is not tcp, udp, icmp, icmp6 or a number 0-255")
                        })?,
                    })
                }
                "src" | "dst" | "host" => {
                    let side = match w {
                        "src" => Side::Src,
                        "dst" => Side::Dst,
                        _ => Side::Either,
                    };
                    let mut a = next(&mut i, "an address")?;
                    if a == "net" {
                        a = next(&mut i, "a network (ADDR/LEN)")?;
                    }
                    let (addr, len) = match a.split_once('/') {
                        Some((a, l)) => (a, Some(l)),
                        None => (a, None),
                    };
                    let addr: IpAddr = addr
                        .parse()
                        .map_err(|_| format!("{w}: `{addr}` is not an IPv4 or IPv6 address"))?;
                    let max = prefix_len(addr);
                    let len = match len {
                        None => max,
                        Some(l) => l
                            .parse::<u8>()
                            .ok()
                            .filter(|&l| l <= max)
                            .ok_or_else(|| format!("{w}: prefix length `/{l}` is not 0 to {max}"))?,
                    };
                    Match::Addr(side, addr, len)
                }
                "sport" | "dport" | "port" => {
                    let side = match w {
                        "sport" => Side::Src,
                        "dport" => Side::Dst,
                        _ => Side::Either,
                    };
                    let p = next(&mut i, "a port number")?;
                    Match::Port(
                        side,
                        p.parse()
                            .map_err(|_| format!("{w}: `{p}` is not a port number 0-65535"))?,
                    )
                }
                "state" => Match::State(next(&mut i, "a state name (new, established, ...)")?.to_owned()),
                other => {
                    return Err(format!(
                        "`{other}` is not a match: all, proto, src, dst, host, sport, dport, port, state (or not)"
                    ))
                }
            };
            terms.push((neg, m));
            match words.get(i) {
                None => break,
                Some(&"and") => i += 1,
                Some(w) => return Err(format!("`{w}`: `and` or the end expected")),
            }
        }
        Ok(StateExpr { terms })
    }

    /// Does the flow `s` match?
    pub fn matches(&self, s: &StateInfo) -> bool {
        self.terms.iter().all(|(neg, m)| {
            let hit = match m {
                Match::All => true,
                Match::Proto(p) => s.proto == *p,
                Match::Addr(side, a, l) => match side {
                    Side::Src => in_net(s.src, *a, *l),
                    Side::Dst => in_net(s.dst, *a, *l),
                    Side::Either => in_net(s.src, *a, *l) || in_net(s.dst, *a, *l),
                },
                Match::Port(side, p) => match side {
                    Side::Src => s.sport == *p,
                    Side::Dst => s.dport == *p,
                    Side::Either => s.sport == *p || s.dport == *p,
                },
                Match::State(n) => s.state == *n || s.state.split(':').any(|x| x == n),
            };
            hit != *neg
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(proto: u8, src: &str, sport: u16, dst: &str, dport: u16, state: &str) -> StateInfo {
        StateInfo {
            proto,
            src: src.parse().unwrap(),
            sport,
            dst: dst.parse().unwrap(),
            dport,
            state: state.into(),
            age: 0,
            expires: 10,
            packets: [1, 1],
            bytes: [60, 60],
            kept: false,
        }
    }

    #[test]
    fn matches_as_an_operator_means() {
        let web = st(
            6,
            "198.18.0.1",
            40000,
            "198.18.1.2",
            80,
            "established:established",
        );
        let dns = st(17, "198.18.0.7", 5353, "198.18.1.9", 53, "new");
        let v6 = st(17, "2001:2::1", 1000, "2001:2::2", 53, "established");
        for (e, want) in [
            ("all", [true, true, true]),
            ("proto tcp", [true, false, false]),
            ("proto 17", [false, true, true]),
            ("src 198.18.0.1", [true, false, false]),
            ("src net 198.18.0.0/24", [true, true, false]),
            ("dst 198.18.1.0/24 and port 53", [false, true, false]),
            ("host 198.18.1.2", [true, false, false]),
            ("host 2001:2::/48", [false, false, true]),
            ("port 80", [true, false, false]),
            ("dport 53 and not proto tcp", [false, true, true]),
            ("sport 53", [false, false, false]),
            ("state established", [true, false, true]),
            ("state established:established", [true, false, false]),
            ("state new", [false, true, false]),
            ("not state new and proto udp", [false, false, true]),
        ] {
            let x = StateExpr::parse(e).unwrap();
            assert_eq!(
                [x.matches(&web), x.matches(&dns), x.matches(&v6)],
                want,
                "{e}"
            );
        }
    }

    #[test]
    fn errors_name_the_word() {
        for (e, says) in [
            ("", "empty"),
            ("proto", "a protocol"),
            ("proto tpc", "`tpc`"),
            ("src 300.1.1.1", "`300.1.1.1`"),
            ("src 198.18.0.0/33", "/33"),
            ("port http", "`http`"),
            ("port 80 or port 443", "`or`"),
            ("bogus", "`bogus` is not a match"),
            ("not", "a match expected"),
            ("port 80 and", "a match expected"),
        ] {
            let err = StateExpr::parse(e).unwrap_err();
            assert!(err.contains(says), "{e}: {err}");
        }
    }
}
