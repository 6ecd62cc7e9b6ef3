//! A flow's place in the table: a [`Slot`], an [`Entry`] in atomics
//! with a lock of its own, so that a worker updates a live flow without
//! its shard's lock (see [`super::table`]).

use std::sync::atomic::{
    AtomicU32, AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};

use super::flow::FlowKey;
use super::table::{Entry, LIVE};
use super::tcp::Peer;

/// In a [`Slot`]'s `tail` word (flags bit 7): the entry is locked.
const LOCKED: u8 = 0x80;
/// The key's bits of a `tail` word: ports, protocol, family
/// ([`FlowKey::words`]' fifth word).
const KEY_BITS: u64 = (1 << 48) - 1;
pub(super) const LOCK_BIT: u64 = (LOCKED as u64) << 48;
pub(super) const LIVE_BIT: u64 = (LIVE as u64) << 48;

/// Where one flow lives in the table: an [`Entry`] in atomics, 96 bytes
/// aligned to 32, so that it spans two cache lines wherever it sits in
/// its chunk, with a lock of its own.
///
/// The `tail` word holds the key's ports, protocol and family (bits
/// 0..48), the flags (48..56, bit 7 of the flags the entry's lock) and
/// the timeout (56..64). The lock is taken with one compare-and-swap of
/// that word and released with a plain store of it (flags and timeout
/// updated in the same store). Every field is an atomic, so that a
/// worker may look an entry up without the shard's lock (its key and
/// flags read, then locked if live); the lock, not the atomics, makes
/// an update whole: every write of a live entry holds it, so counters
/// stay exact whichever workers see the flow. (The one exception: the
/// batches of a table's only worker write live entries without it, and
/// the table's bias keeps everyone else out meanwhile: see
/// `ct/bias.rs`.) Inserting into a free
/// slot and clearing a removed one hold the shard's lock (a free slot
/// is never locked: only live ones are). The lock order is the shard's,
/// then the entry's; a worker holding an entry's lock takes no other.
/// Nothing that can panic runs with an entry's lock held (the state step
/// and the counters' saturating sums), and that must stay so: these
/// locks have no owner and no unlock on unwind (the std shard locks
/// recover from a panic through poisoning; these have no one to
/// notice). A lock left held would stall far more than one flow: the
/// lock-free path gives up on a locked entry and takes the shard's lock,
/// then [`lock`](Slot::lock)s the entry there, spinning forever with the
/// shard's lock held, as would a sweep, a listing (`Shard::live`)
/// or a kill reaching that entry; so the whole shard, and every
/// worker that needs it, would stall.
#[derive(Debug, Default)]
#[repr(align(32))]
pub struct Slot {
    /// The key's addresses (`a`, then `b`) as [`FlowKey::words`] 0..4.
    addr: [AtomicU64; 4],
    /// Ports, protocol, family, flags with the lock bit, timeout.
    tail: AtomicU64,
    /// The two [`Peer`]s, three words each: `seqlo`, `seqhi`, then
    /// `max_win`, `wscale` and `state`.
    peers: [AtomicU32; 6],
    created: AtomicU32,
    last: AtomicU32,
    pkts: [AtomicU32; 2],
    bytes: [AtomicU64; 2],
}

/// The flags of a `tail` word (the lock bit included).
#[inline(always)]
pub(super) fn tail_flags(t: u64) -> u8 {
    (t >> 48) as u8
}

/// The timeout of a `tail` word.
#[inline(always)]
pub(super) fn tail_timeout(t: u64) -> u8 {
    (t >> 56) as u8
}

/// `t` with `flags` and `timeout`.
#[inline(always)]
pub(super) fn with_state(t: u64, flags: u8, timeout: u8) -> u64 {
    t & KEY_BITS | u64::from(flags) << 48 | u64::from(timeout) << 56
}

impl Slot {
    /// The `tail` word, read without the lock (a hint unless locked).
    #[inline(always)]
    pub fn tail(&self) -> u64 {
        self.tail.load(Relaxed)
    }

    /// When last seen, read without the lock (a hint unless locked).
    #[inline(always)]
    pub fn last(&self) -> u32 {
        self.last.load(Relaxed)
    }

    /// The `tail` word of a live entry that is not locked, without
    /// locking it: the way of a biased table's owner (see
    /// `ct/bias.rs`), which no one else writes meanwhile.
    #[inline(always)]
    pub fn live_tail(&self) -> Option<u64> {
        let t = self.tail.load(Relaxed);
        (t & (LIVE_BIT | LOCK_BIT) == LIVE_BIT).then_some(t)
    }

    /// A live entry's `tail` word for its holder: locked here with
    /// [`try_lock_live`](Self::try_lock_live), or as it is in the owner's
    /// biased batch (`biased`: no lock, see `bias.rs`); `None` if it is
    /// not live, or locked.
    #[inline(always)]
    pub(super) fn claim(&self, biased: bool) -> Option<u64> {
        if biased {
            self.live_tail()
        } else {
            self.try_lock_live()
        }
    }

    /// Lock a live entry if it is not locked: its `tail` word (lock bit
    /// clear), or `None` (not live, or locked: the caller takes the
    /// shard's way).
    #[inline(always)]
    pub fn try_lock_live(&self) -> Option<u64> {
        let t = self.tail.load(Relaxed);
        if t & (LIVE_BIT | LOCK_BIT) != LIVE_BIT {
            return None;
        }
        // Acquire: pairs with the Release of the unlock (or insert) that
        // wrote the fields this holder reads.
        self.tail
            .compare_exchange(t, t | LOCK_BIT, Acquire, Relaxed)
            .ok()
    }

    /// Lock the entry, waiting for a holder (which keeps it a few dozen
    /// instructions: spin, then yield); its `tail` word. Waits forever
    /// if a holder never unlocks (see [`Slot`]: callers hold the shard's
    /// lock, so that stalls the shard).
    #[inline]
    pub fn lock(&self) -> u64 {
        let mut spins = 0u32;
        loop {
            let t = self.tail.load(Relaxed);
            if t & LOCK_BIT == 0
                && self
                    .tail
                    .compare_exchange_weak(t, t | LOCK_BIT, Acquire, Relaxed)
                    .is_ok()
            {
                return t;
            }
            spins += 1;
            if spins < 128 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Free the slot (not live, not locked; with the lock held, under
    /// the shard's lock): Release, as an unlock.
    #[inline]
    pub(super) fn clear(&self) {
        self.tail.store(0, Release);
    }

    /// Unlock, leaving `tail` word `t` (its flags and timeout).
    #[inline(always)]
    pub fn unlock(&self, t: u64) {
        // Release: what the holder wrote is seen by the next to lock.
        self.tail.store(t & !LOCK_BIT, Release);
    }

    /// Whether the entry's key is `w` ([`FlowKey::words`]), `t` its
    /// `tail` word.
    #[inline(always)]
    pub fn key_is(&self, w: &[u64; 5], t: u64) -> bool {
        (t ^ w[4]) & KEY_BITS == 0
            && self.addr[0].load(Relaxed) == w[0]
            && self.addr[1].load(Relaxed) == w[1]
            && self.addr[2].load(Relaxed) == w[2]
            && self.addr[3].load(Relaxed) == w[3]
    }

    /// The key (stable under the shard's lock: only an insert writes it).
    pub fn key(&self) -> FlowKey {
        let a = |i: usize| self.addr[i].load(Relaxed);
        FlowKey::from_words([a(0), a(1), a(2), a(3), self.tail() & KEY_BITS])
    }

    /// The TCP peers (with the lock held).
    #[inline]
    pub fn peers(&self) -> [Peer; 2] {
        let p = |i: usize| {
            let w = self.peers[i * 3 + 2].load(Relaxed);
            Peer {
                seqlo: self.peers[i * 3].load(Relaxed),
                seqhi: self.peers[i * 3 + 1].load(Relaxed),
                max_win: w as u16,
                wscale: (w >> 16) as u8,
                state: (w >> 24) as u8,
            }
        };
        [p(0), p(1)]
    }

    /// Write the TCP peers (with the lock held).
    #[inline]
    pub fn set_peers(&self, peers: &[Peer; 2]) {
        for (i, p) in peers.iter().enumerate() {
            self.peers[i * 3].store(p.seqlo, Relaxed);
            self.peers[i * 3 + 1].store(p.seqhi, Relaxed);
            let w = u32::from(p.max_win) | u32::from(p.wscale) << 16 | u32::from(p.state) << 24;
            self.peers[i * 3 + 2].store(w, Relaxed);
        }
    }

    /// Count a packet of `len` bytes from side `from` (0 the originator)
    /// seen at `now` (with the lock held: plain loads and stores, exact).
    /// `last` only moves forward: the clock is read once a batch, so a
    /// worker still on an older batch may come with an earlier `now`.
    #[inline(always)]
    pub fn count(&self, from: usize, len: u32, now: u32) {
        if self.last.load(Relaxed) < now {
            self.last.store(now, Relaxed);
        }
        let p = &self.pkts[from & 1];
        p.store(p.load(Relaxed).saturating_add(1), Relaxed);
        let b = &self.bytes[from & 1];
        b.store(b.load(Relaxed).saturating_add(u64::from(len)), Relaxed);
    }

    /// The entry, `t` the `tail` word [`lock`](Self::lock) returned
    /// (with the lock held).
    pub fn load(&self, t: u64) -> Entry {
        Entry {
            key: self.key(),
            flags: tail_flags(t) & !LOCKED,
            timeout: tail_timeout(t),
            peers: self.peers(),
            created: self.created.load(Relaxed),
            last: self.last.load(Relaxed),
            pkts: [0, 1].map(|i| self.pkts[i].load(Relaxed)),
            bytes: [0, 1].map(|i| self.bytes[i].load(Relaxed)),
        }
    }

    /// Write `e` whole and unlock (with the lock held, or into a free
    /// slot under the shard's lock).
    pub fn store_unlock(&self, e: &Entry) {
        let w = e.key.words();
        for (a, w) in self.addr.iter().zip(w) {
            a.store(w, Relaxed);
        }
        self.set_peers(&e.peers);
        self.created.store(e.created, Relaxed);
        self.last.store(e.last, Relaxed);
        for i in 0..2 {
            self.pkts[i].store(e.pkts[i], Relaxed);
            self.bytes[i].store(e.bytes[i], Relaxed);
        }
        self.unlock(with_state(w[4], e.flags & !LOCKED, e.timeout));
    }
}
