//! Small value types shared by the control path and the datapath: directions,
//! packet kinds, verdicts and fail modes. Parsing them from text and name
//! validation, which can fail with an [`Error`](crate::Error), are in
//! parse.rs.

use std::fmt;

/// Longest accepted head or hook name, in bytes.
pub const MAX_NAME_LEN: usize = 64;

/// The direction a packet travels through a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Dir {
    /// Received from the wire, on its way into the application.
    In = 0,
    /// Leaving the application, on its way to the wire.
    Out = 1,
}

impl Dir {
    /// Both directions, `In` first.
    pub const ALL: [Dir; 2] = [Dir::In, Dir::Out];

    /// `0` for `In`, `1` for `Out`: the index of this direction's chain.
    #[inline]
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Dir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dir::In => "in",
            Dir::Out => "out",
        })
    }
}

/// A set of directions: what a head supports or what a hook accepts.
///
/// Its text form (`Display`, `FromStr`, and serde with the `serde`
/// feature) is `none`, `in`, `out` or `in,out`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Dirs(u8);

impl Dirs {
    /// No direction.
    pub const NONE: Dirs = Dirs(0);
    /// Input only.
    pub const IN: Dirs = Dirs(1);
    /// Output only.
    pub const OUT: Dirs = Dirs(2);
    /// Input and output.
    pub const BOTH: Dirs = Dirs(3);

    /// Does this set contain `dir`?
    #[inline]
    pub const fn contains(self, dir: Dir) -> bool {
        self.0 & (1 << dir as u8) != 0
    }

    /// The set holding only `dir`.
    pub const fn only(dir: Dir) -> Dirs {
        Dirs(1 << dir as u8)
    }

    /// Iterate over the directions in the set, `In` first.
    pub fn iter(self) -> impl Iterator<Item = Dir> {
        Dir::ALL.into_iter().filter(move |d| self.contains(*d))
    }
}

impl From<Dir> for Dirs {
    fn from(d: Dir) -> Dirs {
        Dirs::only(d)
    }
}

impl fmt::Display for Dirs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Dirs::NONE => f.write_str("none"),
            Dirs::IN => f.write_str("in"),
            Dirs::OUT => f.write_str("out"),
            _ => f.write_str("in,out"),
        }
    }
}

impl fmt::Debug for Dirs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// What the frames at a head start with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum PacketKind {
    /// An Ethernet II frame (optionally VLAN tagged).
    Ethernet,
    /// A bare IPv4 packet.
    Ipv4,
    /// A bare IPv6 packet.
    Ipv6,
}

impl fmt::Display for PacketKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PacketKind::Ethernet => "ethernet",
            PacketKind::Ipv4 => "ipv4",
            PacketKind::Ipv6 => "ipv6",
        })
    }
}

/// What a hook did with a packet (pfil's `pfil_return_t`).
///
/// The contract, enforced by the chain runners (always, not only with the
/// `witness` feature):
/// - `Pass`: the frame goes on to the next hook, then back to the caller.
/// - `Dropped`: the caller discards the frame; no later hook sees it.
/// - `Consumed`: the hook took ownership of the frame; the caller must not
///   recycle it until the hook gives it back; no later hook sees it.
///
/// Once a packet is `Dropped` or `Consumed`, that is final for the run: a
/// per-packet hook is only shown `Pass` packets, and a final verdict that a
/// batch hook changes is put back and counted in
/// [`witness::violations`](crate::witness::violations).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
#[repr(u8)]
pub enum Verdict {
    /// Let the packet continue.
    #[default]
    Pass = 0,
    /// The packet is to be discarded.
    Dropped = 1,
    /// The hook took the frame.
    Consumed = 2,
}

impl Verdict {
    /// `true` for [`Verdict::Pass`].
    #[inline]
    pub const fn is_pass(self) -> bool {
        matches!(self, Verdict::Pass)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Pass => "pass",
            Verdict::Dropped => "dropped",
            Verdict::Consumed => "consumed",
        })
    }
}

/// What a link does with the packet on which its hook panicked, and with the
/// hook afterwards (it is quarantined either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum FailMode {
    /// The packet passes (the hook is treated as absent).
    #[default]
    Open,
    /// The packet is dropped.
    Closed,
}

impl FailMode {
    /// The verdict given to the packet on which the hook failed.
    #[inline]
    pub const fn verdict(self) -> Verdict {
        match self {
            FailMode::Open => Verdict::Pass,
            FailMode::Closed => Verdict::Dropped,
        }
    }
}

impl fmt::Display for FailMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailMode::Open => "fail-open",
            FailMode::Closed => "fail-closed",
        })
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Dirs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Dirs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Dirs, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}
