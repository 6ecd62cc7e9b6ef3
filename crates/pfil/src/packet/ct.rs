//! The connection-tracking annotation a packet carries.

use std::fmt;

/// The connection state a tracker (the `ct` hook) gave a packet, in
/// netfilter's words ([`Packet::ct`](super::Packet::ct)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CtState {
    /// No tracker looked at the packet (the state of every packet until
    /// one does).
    #[default]
    Untracked = 0,
    /// The packet starts a flow, or belongs to one that has not seen a
    /// packet in the reply direction yet.
    New = 1,
    /// The packet belongs to a flow that has seen packets both ways.
    Established = 2,
    /// An ICMP error about a tracked flow (it quotes that flow's packet).
    Related = 3,
    /// The tracker could not place the packet: malformed or truncated,
    /// outside the TCP window, a reply to nothing, or no room to track it.
    Invalid = 4,
}

impl CtState {
    /// The state of code `c` (the low 3 bits of the packet's annotation).
    #[inline]
    pub(super) const fn from_bits(c: u8) -> CtState {
        match c & 7 {
            1 => CtState::New,
            2 => CtState::Established,
            3 => CtState::Related,
            4 => CtState::Invalid,
            _ => CtState::Untracked,
        }
    }

    /// The state's name as rules write it: `untracked`, `new`,
    /// `established`, `related`, `invalid`.
    pub const fn name(self) -> &'static str {
        match self {
            CtState::Untracked => "untracked",
            CtState::New => "new",
            CtState::Established => "established",
            CtState::Related => "related",
            CtState::Invalid => "invalid",
        }
    }
}

impl fmt::Display for CtState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
