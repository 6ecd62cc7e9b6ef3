//! The per-packet state machine of an entry, apart from where the entry
//! lives: a packet's update of a flow's flags, timeout and TCP peers
//! ([`step`], [`update`]), the state and direction it gives, and when an
//! entry has expired under pf's (adaptive) timeouts.

use pfil::CtState;

use super::tcp::Peer;
use super::*;

/// Whether `e` has outlived its timeout at `now`, scaled by `ad`.
#[inline]
pub fn expired(e: &Entry, now: u32, ad: Adaptive) -> bool {
    expired_at(e.timeout, e.last, now, ad)
}

/// Each timeout's longest idle time in seconds at scale `ad` (indexed by
/// the timeout's number, 16 of them, those past the last as the last):
/// an entry idle longer has expired, as [`expired_at`] says without its
/// multiplies (`idle × den > t × num` is `idle > ⌊t × num / den⌋`).
pub(super) fn idle_limits(ad: Adaptive) -> [u64; 16] {
    std::array::from_fn(|i| {
        let t = u64::from(PF_TIMEOUTS[i.min(PF_TIMEOUTS.len() - 1)]);
        (t * ad.num).checked_div(ad.den).unwrap_or(u64::MAX)
    })
}

/// Whether an entry under `timeout` last seen at `last` has outlived it
/// at `now`, scaled by `ad`.
#[inline(always)]
pub(super) fn expired_at(timeout: u8, last: u32, now: u32, ad: Adaptive) -> bool {
    let t = u64::from(PF_TIMEOUTS[usize::from(timeout).min(PF_TIMEOUTS.len() - 1)]);
    u64::from(now.saturating_sub(last)) * ad.den > t * ad.num
}

/// Whether a packet carrying `kind` leaves a flow of `flags` under
/// `timeout` as it is: UDP or another protocol without TCP's states,
/// seen both ways (what [`step`] would set is set). Such a packet is
/// `established`.
#[inline(always)]
pub(super) fn steady(kind: Kind, flags: u8, timeout: u8) -> bool {
    let multiple = match kind {
        Kind::Udp => Timeout::UdpMultiple,
        Kind::Other => Timeout::OtherMultiple,
        _ => return false,
    } as u8;
    flags & (ORIG_MORE | REPLY_SEEN) == ORIG_MORE | REPLY_SEEN && timeout == multiple
}

/// A SYN reopened a closed TCP flow.
pub(super) struct Reopen;

/// Update entry `e` with a packet from side `src_a` (is the key's `a`).
#[inline]
pub(super) fn update(
    e: &mut Entry,
    src_a: bool,
    kind: Kind,
    len: u32,
    run: Run,
) -> Result<Result<(CtState, bool), Invalid>, Reopen> {
    let from = usize::from((e.flags & ORIG_A != 0) != src_a);
    if let Err(why) = step(&mut e.flags, &mut e.timeout, &mut e.peers, from, kind, run)? {
        return Ok(Err(why));
    }
    // Never backwards: `run.now` may be an older batch's clock.
    e.last = e.last.max(run.now);
    e.pkts[from] = e.pkts[from].saturating_add(1);
    e.bytes[from] = e.bytes[from].saturating_add(u64::from(len));
    Ok(Ok(state_of(e.flags, from == 1)))
}

/// A packet's state and direction once its flow's `flags` are updated.
#[inline(always)]
pub(super) fn state_of(flags: u8, reply: bool) -> (CtState, bool) {
    let state = if flags & REPLY_SEEN != 0 {
        CtState::Established
    } else {
        CtState::New
    };
    (state, reply)
}

/// The state part of an update by a packet from side `from` (1: the
/// responder): `flags`, `timeout` and, for TCP, `peers`; nothing changed
/// when the packet is invalid or reopens the flow.
#[inline(always)]
pub(super) fn step(
    flags: &mut u8,
    timeout: &mut u8,
    peers: &mut [Peer; 2],
    from: usize,
    kind: Kind,
    run: Run,
) -> Result<Result<(), Invalid>, Reopen> {
    let reply = from == 1;
    let ok = match kind {
        Kind::Tcp(seg) => {
            let out = if run.loose {
                tcp::track_loose(peers, from, &seg)
            } else {
                tcp::track(peers, from, &seg)
            };
            match out {
                tcp::Outcome::Reopen => return Err(Reopen),
                tcp::Outcome::Invalid(why) => Err(why),
                tcp::Outcome::Valid => {
                    *timeout = tcp::timeout(peers) as u8;
                    Ok(())
                }
            }
        }
        Kind::Udp | Kind::Other => {
            let (single, multiple) = if kind == Kind::Udp {
                (Timeout::UdpSingle, Timeout::UdpMultiple)
            } else {
                (Timeout::OtherSingle, Timeout::OtherMultiple)
            };
            // Branch-free: which side sent is a coin toss to a predictor.
            *flags |= [ORIG_MORE, REPLY_SEEN][from];
            *timeout = if *flags & REPLY_SEEN != 0 {
                multiple
            } else {
                single
            } as u8;
            Ok(())
        }
        Kind::EchoRequest => Ok(()),
        Kind::EchoReply if reply => {
            *timeout = Timeout::IcmpError as u8;
            Ok(())
        }
        Kind::EchoReply => Err(Invalid::NoState),
    };
    if let Err(why) = ok {
        return Ok(Err(why));
    }
    *flags |= REPLY_SEEN * u8::from(reply);
    Ok(Ok(()))
}
