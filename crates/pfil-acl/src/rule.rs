//! The rule model: what a rule matches, the lookup [`Key`] and the
//! reference semantics ([`Rule::matches`]) every classifier must agree with.

use std::fmt;

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86DD;
/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;

/// Bits of [`Key::has`]: which parts of the key are meaningful.
pub mod has {
    /// The packet is IPv4 or IPv6: `src`, `dst` and `proto` are valid.
    pub const IP: u8 = 1;
    /// The transport header has ports (TCP, UDP, SCTP, ...): `sport` and
    /// `dport` are valid.
    pub const PORTS: u8 = 2;
    /// The packet is TCP: `tcp_flags` is valid.
    pub const TCP: u8 = 4;
    /// The packet is ICMP or ICMPv6: `icmp_type` and `icmp_code` are valid.
    pub const ICMP: u8 = 8;
}

/// The header fields of one packet that rules match on.
///
/// IPv4 addresses are stored in the low 32 bits of `src`/`dst` (host
/// order: `10.0.0.1` is `0x0a00_0001`); IPv6 addresses use all 128 bits.
/// Fields whose bit in [`has`](Key::has) is clear are ignored by rules
/// that do not constrain them and fail rules that do: a rule with a port
/// range other than `0:65535` never matches an ICMP packet, a rule with
/// `flags` never matches UDP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Key {
    /// Source address.
    pub src: u128,
    /// Destination address.
    pub dst: u128,
    /// EtherType after VLAN tags ([`ETHERTYPE_IPV4`], ...).
    pub ethertype: u16,
    /// The (outer) VLAN id, if the frame is tagged.
    pub vlan: Option<u16>,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// IP protocol (IPv6: the final next header).
    pub proto: u8,
    /// TCP flags byte (FIN = 0x01 ... CWR = 0x80).
    pub tcp_flags: u8,
    /// ICMP type.
    pub icmp_type: u8,
    /// ICMP code.
    pub icmp_code: u8,
    /// Which fields are valid: bits of [`has`].
    pub has: u8,
    /// The connection-tracking annotation a `ct` hook gave the packet
    /// (pfil's `Packet::ct_bits`): the state in bits 0..=2 ([`ct`]'s
    /// `UNTRACKED` = 0 to `INVALID` = 4), bit 7 set in the reply
    /// direction. 0 (untracked, original) when no tracker ran.
    pub ct: u8,
    /// The packet's mark (pfil's `Packet::mark`, set by an earlier hook
    /// or an earlier rule's `set mark`); 0 when none was set.
    pub mark: u32,
}

/// Connection states as [`Rule::ct_state`] bits and [`Key::ct`] values.
pub mod ct {
    /// [`Key::ct`](super::Key::ct) state values (bits 0..=2), as pfil's `CtState`.
    pub const UNTRACKED: u8 = 0;
    /// A flow's first packets (no reply seen yet).
    pub const NEW: u8 = 1;
    /// A flow seen both ways.
    pub const ESTABLISHED: u8 = 2;
    /// An ICMP error about a tracked flow.
    pub const RELATED: u8 = 3;
    /// Not placed in any flow.
    pub const INVALID: u8 = 4;
    /// [`Key::ct`](super::Key::ct) bit: the packet goes in the reply direction.
    pub const REPLY: u8 = 0x80;
    /// The states' names, indexed by value.
    pub const NAMES: [&str; 5] = ["untracked", "new", "established", "related", "invalid"];

    /// The [`Rule::ct_state`](super::Rule::ct_state) bit of state value `s`.
    pub const fn bit(s: u8) -> u8 {
        1 << (s & 7)
    }
}

impl Key {
    /// An IPv4 5-tuple whose ports are valid whatever the protocol (the
    /// ClassBench and rte_acl model, where ports are matched for every
    /// protocol); TCP flags are marked valid for protocol 6.
    pub fn ipv4(src: u32, dst: u32, proto: u8, sport: u16, dport: u16) -> Key {
        Key {
            src: u128::from(src),
            dst: u128::from(dst),
            ethertype: ETHERTYPE_IPV4,
            sport,
            dport,
            proto,
            has: has::IP | has::PORTS | if proto == 6 { has::TCP } else { 0 },
            ..Key::default()
        }
    }

    /// An IPv6 5-tuple, like [`Key::ipv4`].
    pub fn ipv6(src: u128, dst: u128, proto: u8, sport: u16, dport: u16) -> Key {
        Key {
            src,
            dst,
            ethertype: ETHERTYPE_IPV6,
            sport,
            dport,
            proto,
            has: has::IP | has::PORTS | if proto == 6 { has::TCP } else { 0 },
            ..Key::default()
        }
    }
}

/// What happens to a packet a rule matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Let it through.
    Pass,
    /// Drop it.
    Drop,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Pass => "pass",
            Action::Drop => "drop",
        })
    }
}

/// An address match: any address, an IPv4 prefix or an IPv6 prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Addr {
    /// Any address (of either family).
    #[default]
    Any,
    /// An IPv4 prefix: address (host order) and length 0..=32. Bits past
    /// the length are zero.
    V4(u32, u8),
    /// An IPv6 prefix: address and length 0..=128. Bits past the length
    /// are zero.
    V6(u128, u8),
}

impl Addr {
    /// An IPv4 prefix; bits past `len` are cleared.
    ///
    /// # Panics
    /// If `len > 32`.
    pub fn v4(addr: u32, len: u8) -> Addr {
        assert!(len <= 32, "IPv4 prefix length {len} > 32");
        Addr::V4(addr & mask32(len), len)
    }

    /// An IPv6 prefix; bits past `len` are cleared.
    ///
    /// # Panics
    /// If `len > 128`.
    pub fn v6(addr: u128, len: u8) -> Addr {
        assert!(len <= 128, "IPv6 prefix length {len} > 128");
        Addr::V6(addr & mask128(len), len)
    }

    /// The IPv4 range `[lo, hi]` this matches (the whole space for `Any`),
    /// or `None` for an IPv6 prefix.
    pub fn v4_range(&self) -> Option<(u32, u32)> {
        match *self {
            Addr::Any => Some((0, u32::MAX)),
            Addr::V4(a, l) => Some((a, a | !mask32(l))),
            Addr::V6(..) => None,
        }
    }

    fn matches(&self, ethertype: u16, a: u128) -> bool {
        match *self {
            Addr::Any => true,
            Addr::V4(p, l) => {
                ethertype == ETHERTYPE_IPV4 && (a as u32) & mask32(l) == p && a >> 32 == 0
            }
            Addr::V6(p, l) => ethertype == ETHERTYPE_IPV6 && a & mask128(l) == p,
        }
    }
}

/// The network mask of an IPv4 prefix length.
pub(crate) fn mask32(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len.min(32)))
    }
}

fn mask128(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len.min(128)))
    }
}

/// One rule: every field that is set must match; unset fields match
/// anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rule {
    /// What to do on a match.
    pub action: Action,
    /// Whether the filter keeps a hit counter for this rule.
    pub count: bool,
    /// EtherType the packet must have. IPv4/IPv6 prefixes imply theirs.
    pub ethertype: Option<u16>,
    /// VLAN id the packet must carry.
    pub vlan: Option<u16>,
    /// Source address.
    pub src: Addr,
    /// Destination address.
    pub dst: Addr,
    /// Protocol range `[lo, hi]`: `(0, 255)` is any; a value is `(v, v)`.
    /// A protocol constraint implies an IP packet.
    pub proto: (u8, u8),
    /// Source port range, inclusive; `(0, 65535)` is any.
    pub sport: (u16, u16),
    /// Destination port range, inclusive; `(0, 65535)` is any.
    pub dport: (u16, u16),
    /// TCP flags `(value, mask)`: `flags & mask == value`. A nonzero mask
    /// implies TCP.
    pub tcp_flags: (u8, u8),
    /// ICMP type (implies ICMP/ICMPv6).
    pub icmp_type: Option<u8>,
    /// ICMP code (implies ICMP/ICMPv6).
    pub icmp_code: Option<u8>,
    /// Connection states the packet must be in, as [`ct::bit`]s of their
    /// values (`ct state established,related`); 0: any.
    pub ct_state: u8,
    /// The direction the packet must go in its flow: `Some(true)` reply,
    /// `Some(false)` original (`ct dir reply|original`); `None`: either.
    pub ct_dir: Option<bool>,
    /// pf's `keep state` (pass rules only): a packet this rule passes
    /// creates a state, and later packets of its flow, both ways, pass
    /// on that state without the rules (the `acl` filter's tracker).
    pub keep_state: bool,
    /// The mark the packet must carry, `(value, mask)`: `mark & mask ==
    /// value` (`mark 0x10`, `mark 0x10/0xf0`); `None`: any.
    pub mark: Option<(u32, u32)>,
    /// The mark a packet this rule matches is given (`set mark 0x10`),
    /// for later hooks (and later `mark` matches of later hooks).
    pub set_mark: Option<u32>,
}

impl Rule {
    /// A rule matching everything with `action`.
    pub const fn any(action: Action) -> Rule {
        Rule {
            action,
            count: false,
            ethertype: None,
            vlan: None,
            src: Addr::Any,
            dst: Addr::Any,
            proto: (0, 255),
            sport: (0, u16::MAX),
            dport: (0, u16::MAX),
            tcp_flags: (0, 0),
            icmp_type: None,
            icmp_code: None,
            ct_state: 0,
            ct_dir: None,
            keep_state: false,
            mark: None,
            set_mark: None,
        }
    }

    /// Whether the rule matches on connection tracking (`ct state`,
    /// `ct dir`).
    pub fn uses_ct(&self) -> bool {
        self.ct_state != 0 || self.ct_dir.is_some()
    }

    /// Whether the rule's `ct` parts accept a packet annotated `ct` (a
    /// [`Key::ct`] value).
    #[inline]
    pub fn ct_matches(&self, ct: u8) -> bool {
        (self.ct_state == 0 || self.ct_state & ct::bit(ct & 7) != 0)
            && self.ct_dir.is_none_or(|r| (ct & ct::REPLY != 0) == r)
    }

    /// The bits of [`Key::has`] a key needs for this rule to match it.
    pub fn needs(&self) -> u8 {
        let mut n = 0;
        if self.src != Addr::Any || self.dst != Addr::Any || self.proto != (0, 255) {
            n |= has::IP;
        }
        if self.sport != (0, u16::MAX) || self.dport != (0, u16::MAX) {
            n |= has::IP | has::PORTS;
        }
        if self.tcp_flags.1 != 0 {
            n |= has::IP | has::TCP;
        }
        if self.icmp_type.is_some() || self.icmp_code.is_some() {
            n |= has::IP | has::ICMP;
        }
        n
    }

    /// The EtherType this rule is restricted to, explicit or implied by
    /// its addresses (`None`: any).
    pub fn family(&self) -> Option<u16> {
        if self.ethertype.is_some() {
            return self.ethertype;
        }
        match (self.src, self.dst) {
            (Addr::V4(..), _) | (_, Addr::V4(..)) => Some(ETHERTYPE_IPV4),
            (Addr::V6(..), _) | (_, Addr::V6(..)) => Some(ETHERTYPE_IPV6),
            _ => None,
        }
    }

    /// Whether the rule can match a key of this EtherType: its family
    /// ([`Rule::family`]) is unset or equal.
    pub fn applies_to(&self, ethertype: u16) -> bool {
        self.family().is_none_or(|e| e == ethertype)
    }

    /// The reference semantics: does this rule match `k`?
    #[inline]
    pub fn matches(&self, k: &Key) -> bool {
        let n = self.needs();
        k.has & n == n
            && self.ethertype.is_none_or(|e| e == k.ethertype)
            && self.vlan.is_none_or(|v| k.vlan == Some(v))
            && self.src.matches(k.ethertype, k.src)
            && self.dst.matches(k.ethertype, k.dst)
            && (self.proto.0..=self.proto.1).contains(&k.proto)
            && (self.sport.0..=self.sport.1).contains(&k.sport)
            && (self.dport.0..=self.dport.1).contains(&k.dport)
            && k.tcp_flags & self.tcp_flags.1 == self.tcp_flags.0
            && self.icmp_type.is_none_or(|t| t == k.icmp_type)
            && self.icmp_code.is_none_or(|c| c == k.icmp_code)
            && self.mark.is_none_or(|(v, m)| k.mark & m == v)
            && self.ct_matches(k.ct)
    }

    /// Checks the invariants the classifiers rely on: ranges not
    /// inverted, flags value within mask, addresses of one family that
    /// agrees with `ethertype`.
    ///
    /// # Errors
    /// What is wrong, as a phrase.
    pub fn validate(&self) -> Result<(), String> {
        if self.proto.0 > self.proto.1 {
            return Err("protocol range is inverted".into());
        }
        if self.sport.0 > self.sport.1 || self.dport.0 > self.dport.1 {
            return Err("port range is inverted (low > high)".into());
        }
        if self.tcp_flags.0 & !self.tcp_flags.1 != 0 {
            return Err("TCP flags value has bits outside its mask".into());
        }
        let fam = |a: Addr| match a {
            Addr::Any => None,
            Addr::V4(..) => Some(ETHERTYPE_IPV4),
            Addr::V6(..) => Some(ETHERTYPE_IPV6),
        };
        if let (Some(a), Some(b)) = (fam(self.src), fam(self.dst)) {
            if a != b {
                return Err("source and destination are of different address families".into());
            }
        }
        if let (Some(e), Some(a)) = (self.ethertype, fam(self.src).or(fam(self.dst))) {
            if e != a {
                return Err("address family contradicts the ethertype".into());
            }
        }
        if self.vlan.is_some_and(|v| v > 4095) {
            return Err("VLAN id above 4095".into());
        }
        if self.keep_state && self.action != Action::Pass {
            return Err("`keep state` on a rule that does not pass".into());
        }
        if self.mark.is_some_and(|(v, m)| v & !m != 0) {
            return Err("mark value has bits outside its mask".into());
        }
        if self.ct_state & !0x1f != 0 {
            return Err("connection state bits beyond `invalid`".into());
        }
        Ok(())
    }
}

/// An ordered list of rules (first match wins) and the action for
/// packets no rule matches.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ruleset {
    /// The rules, in priority order.
    pub rules: Vec<Rule>,
    /// The action when no rule matches.
    pub default: Action,
    /// The most flows the `keep state` rules may keep (pf's `set limit
    /// states`; text format `set limit states N`, 1 to
    /// [`STATE_LIMIT_MAX`]); `None`: the filter's default (100 000, or
    /// what its table was made with).
    pub state_limit: Option<usize>,
}

/// The largest `set limit states` (the `ct` hook's largest `max`).
pub const STATE_LIMIT_MAX: usize = 10_000_000;

impl Ruleset {
    /// A ruleset; the default action is [`Action::Pass`].
    pub fn new(rules: Vec<Rule>) -> Ruleset {
        Ruleset {
            rules,
            default: Action::Pass,
            state_limit: None,
        }
    }

    /// The action for a classification result.
    #[inline]
    pub fn action(&self, matched: Option<u32>) -> Action {
        match matched {
            Some(i) => self.rules[i as usize].action,
            None => self.default,
        }
    }
}
