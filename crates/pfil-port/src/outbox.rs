//! Frames hooks consumed, and how they give them back.
//!
//! A hook that returns [`pfil::Verdict::Consumed`] takes ownership of the
//! frame: the worker loop moves it to its port's *held* set ([`crate::Held`]) under the
//! packet's [`cookie`](pfil::Packet::cookie) and does not recycle it. The
//! hook later tells the worker what to do with it through the worker's
//! [`Outbox`]: [`release`](Outbox::release) it to the pool, or
//! [`transmit`](Outbox::transmit) it on one of the worker's ports (e.g. a
//! responder that rewrote the frame in place before consuming it). The
//! worker drains its outbox after every batch (at most [`BATCH`] requests
//! at a time), so a request made inside `filter` is served right after the
//! batch that consumed the frame.
//!
//! ## Bounds, and what happens past them
//! - A worker holds at most `LoopConfig::held_limit` frames. When a batch
//!   takes it past that, the oldest held frames go back to the pool and are
//!   counted as `held_evicted` ([`crate::Stats`]); their cookies become
//!   stale. The frame budget of a spawner reserves `held_limit` frames, so
//!   held frames never starve a fill ring.
//! - An outbox holds at most its capacity of requests; past it,
//!   [`Outbox::release`] and [`Outbox::transmit`] return [`OutboxFull`] (and
//!   count it): the caller keeps the cookie and tries again later.
//! - A request whose cookie is not held (stale, never consumed, or given
//!   back already) changes nothing and is counted as `stale`; a transmit to
//!   an interface the worker has no port on, or one that cannot be queued
//!   (TX ring full after bounded retries, or a TX error), releases the
//!   frame and is counted as `refused`; a transmit queued is counted as
//!   `reinjected` (not in `tx`). These counters land in the loop's
//!   `LoopWorker::stats` (a forwarder's a→b stats). Cookies carry a
//!   per-batch epoch, so a stale cookie never reaches a frame that was
//!   reused.
//!
//! [`BATCH`]: crate::BATCH

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_queue::ArrayQueue;

/// What a hook asks the worker to do with a frame it consumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// Give the frame back to the pool.
    Release {
        /// The packet's cookie.
        cookie: u64,
    },
    /// Send the frame on the worker's port on `ifindex`.
    Transmit {
        /// The packet's cookie.
        cookie: u64,
        /// Interface index of the port to send on (e.g. the packet's own
        /// [`ifindex`](pfil::Packet::ifindex) to send it back out).
        ifindex: u32,
        /// Where the packet is in the frame's buffer when a hook moved or
        /// resized it ([`Outbox::transmit_packet`]); `None`: as the port
        /// holds it ([`Outbox::transmit`]).
        span: Option<Span>,
    },
}

/// Where a packet lies in its frame's buffer: `len` bytes from `start`
/// (the packet's [`headroom`](pfil::Packet::headroom)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Offset of the packet's first byte in the frame's buffer.
    pub start: u32,
    /// The packet's length.
    pub len: u32,
}

/// The outbox was full: the request was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the worker's outbox is full ({capacity} requests); keep the cookie and try again after the next batch")]
pub struct OutboxFull {
    /// The outbox's capacity.
    pub capacity: usize,
}

/// One worker's bounded, lock-free request queue (any thread may push; the
/// worker pops).
#[derive(Debug)]
pub struct Outbox {
    q: ArrayQueue<Request>,
    full: AtomicU64,
}

impl Outbox {
    /// An outbox for at most `capacity` (at least 1) pending requests.
    pub fn new(capacity: usize) -> Outbox {
        Outbox {
            q: ArrayQueue::new(capacity.max(1)),
            full: AtomicU64::new(0),
        }
    }

    /// Ask the worker to give the frame of `cookie` back to the pool.
    ///
    /// # Errors
    /// [`OutboxFull`].
    pub fn release(&self, cookie: u64) -> Result<(), OutboxFull> {
        self.push(Request::Release { cookie })
    }

    /// Ask the worker to send the frame of `cookie` on its port on
    /// `ifindex`.
    ///
    /// # Errors
    /// [`OutboxFull`].
    pub fn transmit(&self, cookie: u64, ifindex: u32) -> Result<(), OutboxFull> {
        self.push(Request::Transmit {
            cookie,
            ifindex,
            span: None,
        })
    }

    /// Ask the worker to send `pkt`'s frame on its port on `ifindex` as
    /// the packet holds it now: from its current start, its current
    /// length (a hook may have grown or narrowed it into the room the port
    /// gave, [`pfil::Packet::adjust_head`]). The packet's cookie names
    /// the frame; the hook returns [`pfil::Verdict::Consumed`] for it.
    ///
    /// # Errors
    /// [`OutboxFull`], as [`transmit`](Self::transmit).
    pub fn transmit_packet(&self, pkt: &pfil::Packet<'_>, ifindex: u32) -> Result<(), OutboxFull> {
        // A port's headroom is far below 4 GiB, a frame's length too
        // (Packet keeps both within u32).
        self.push(Request::Transmit {
            cookie: pkt.cookie(),
            ifindex,
            span: Some(Span {
                start: pkt.headroom() as u32,
                len: pkt.len() as u32,
            }),
        })
    }

    fn push(&self, r: Request) -> Result<(), OutboxFull> {
        self.q.push(r).map_err(|_| {
            self.full.fetch_add(1, Ordering::Relaxed);
            OutboxFull {
                capacity: self.q.capacity(),
            }
        })
    }

    /// The next request (the worker's side).
    #[inline]
    pub fn pop(&self) -> Option<Request> {
        self.q.pop()
    }

    /// Is no request pending? (One load: the worker's check per batch.)
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Requests refused because the outbox was full.
    pub fn full_count(&self) -> u64 {
        self.full.load(Ordering::Relaxed)
    }
}

/// The outboxes of a registry's workers, indexed by the worker index a
/// hook sees in [`pfil::Ctx::worker`]. Give the same `Arc` to the hooks
/// and to the loops (`LoopConfig::outboxes`).
#[derive(Debug)]
pub struct Outboxes(Vec<Outbox>);

impl Outboxes {
    /// One outbox of `capacity` requests for each of `workers` worker slots
    /// (the registry's [`max_workers`](pfil::Registry::max_workers)).
    pub fn new(workers: usize, capacity: usize) -> Outboxes {
        Outboxes((0..workers).map(|_| Outbox::new(capacity)).collect())
    }

    /// The outbox of worker `index` (`None` past the slots it was made for).
    #[inline]
    pub fn get(&self, index: usize) -> Option<&Outbox> {
        self.0.get(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_counted() {
        let o = Outbox::new(2);
        o.release(1).unwrap();
        o.transmit(2, 7).unwrap();
        assert_eq!(o.release(3), Err(OutboxFull { capacity: 2 }));
        assert_eq!(o.full_count(), 1);
        assert_eq!(o.pop(), Some(Request::Release { cookie: 1 }));
        assert_eq!(
            o.pop(),
            Some(Request::Transmit {
                cookie: 2,
                ifindex: 7,
                span: None
            })
        );
        assert!(o.is_empty());
        let all = Outboxes::new(3, 4);
        assert!(all.get(2).is_some() && all.get(3).is_none());
    }
}
