//! The batch's way to a live flow: the index probed without the shard's
//! lock and the entry updated under its own, or with no lock at all in
//! the owner's biased batch (`bias.rs`) ([`Table::hit`]); what the lock-free
//! way does not settle goes to the shard's lock, and its `keep state`
//! mark is read there, with the entry in hand.

use std::sync::atomic::Ordering::Relaxed;

use crossbeam_epoch::Guard;
use pfil::CtState;

use super::table::Slot;
use super::tcp::Peer;
use super::*;

/// What a batch fixes once for every packet it tracks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Batch {
    /// Its clock, TCP mode and limit.
    pub(crate) run: Run,
    /// The adaptive timeouts' scale (the table's size moves by at most
    /// the batch's new flows meanwhile).
    pub(crate) ad: Adaptive,
    /// The worker that runs it.
    pub(crate) worker: usize,
    /// The owner's biased batch (`bias.rs`): live entries are written
    /// without their locks.
    pub(crate) biased: bool,
}

/// What [`Table::hit`] found: the packet's state and direction (or why
/// it is invalid), and whether its flow carries a `keep state` mark.
pub(super) type Hit = (Result<(CtState, bool), Invalid>, bool);

impl Table {
    /// The batch path's [`track_hashed`](Self::track_hashed), `c` by
    /// reference, the adaptive scale `ad` computed and the epoch `g`
    /// pinned once a batch: a packet of a live flow is tracked under the
    /// entry's lock alone ([`hit`](Self::hit)), any other under its
    /// shard's.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn track_batch(
        &self,
        c: &Class,
        h: Option<u64>,
        len: u32,
        b: &Batch,
        g: &Guard,
    ) -> (CtState, bool, bool) {
        let run = b.run;
        let (r, kept) = match (c, h) {
            (&Class::Flow(ref key, src_a, kind), Some(h)) => {
                match self.hit(&key.words(), h, src_a, kind, len, b, g) {
                    Some(r) => r,
                    None => self.track_kept(*c, Some(h), len, run, false, false),
                }
            }
            _ => self.track_kept(*c, h, len, run, false, true),
        };
        let (s, reply) = r.unwrap_or_else(|why| self.invalid(why, b.worker));
        (s, reply, kept)
    }

    /// [`track_batch`](Self::track_batch) of a packet of flow `w` (its
    /// key's [`FlowKey::words`], `h` their hash) from side `src_a`,
    /// carrying `kind`; `hint` as for [`find_hinted`](Self::find_hinted).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn track_words(
        &self,
        hint: Option<&Slot>,
        w: &[u64; 5],
        h: u64,
        src_a: bool,
        kind: Kind,
        len: u32,
        b: &Batch,
        g: &Guard,
    ) -> (CtState, bool, bool) {
        let (r, kept) = match self.hit_hinted(hint, w, h, src_a, kind, len, b, g) {
            Some(r) => r,
            None => self.track_miss(w, h, src_a, kind, len, b.run),
        };
        let (s, reply) = r.unwrap_or_else(|why| self.invalid(why, b.worker));
        (s, reply, kept)
    }

    /// A packet that is invalid for `why`: counted in `worker`'s slot.
    #[cold]
    #[inline(never)]
    pub(super) fn invalid(&self, why: Invalid, worker: usize) -> (CtState, bool) {
        self.count(worker, why);
        (CtState::Invalid, false)
    }

    /// The batch path of a packet [`hit`](Self::hit) did not settle (or
    /// did not see: not a plain IPv4 UDP or TCP packet), classified anew.
    #[cold]
    #[inline(never)]
    pub(super) fn track_cold(
        &self,
        p: &pfil::Packet<'_>,
        len: u32,
        b: &Batch,
        g: &Guard,
    ) -> (CtState, bool, bool) {
        let c = flow::classify(p);
        self.track_batch(&c, self.hash_of(&c), len, b, g)
    }

    /// [`track_words`](Self::track_words) when the lock-free way did not
    /// settle it.
    #[inline(never)]
    fn track_miss(
        &self,
        w: &[u64; 5],
        h: u64,
        src_a: bool,
        kind: Kind,
        len: u32,
        run: Run,
    ) -> (Result<(CtState, bool), Invalid>, bool) {
        let c = Class::Flow(FlowKey::from_words(*w), src_a, kind);
        self.track_kept(c, Some(h), len, run, false, false)
    }

    /// Whether the flow of a packet of class `c` (`h`: its hash if
    /// known; an ICMP error's: the quoted flow's) carries a `keep state`
    /// mark ([`KEPT`]), read under its shard's lock: for an acl's packet
    /// annotated without it (`keep.rs`; the hook's own paths read the
    /// mark with the entry in hand). A table no acl marks answers at once.
    pub(super) fn kept_slow(&self, c: &Class, h: Option<u64>) -> bool {
        if self.keeper.load(Relaxed) == 0 {
            return false;
        }
        let key = match c {
            Class::Flow(k, ..) | Class::Error(k, _) => k,
            Class::Untracked | Class::Invalid(_) => return false,
        };
        let h = h.unwrap_or_else(|| self.hash(key));
        let g = lock(self.shard(h));
        // The flag only goes on under the entry's lock and off with the
        // entry, under the shard's (held): a read without the entry's
        // lock is exact.
        g.find(key, h as u32)
            .is_some_and(|id| table::tail_flags(g.slot(id).tail()) & KEPT != 0)
    }

    /// Track a packet of a live flow without the shard's lock: the
    /// index probed lock-free ([`Peek::find_live`]), the entry locked,
    /// checked (its key, not expired) and updated. `None` when the
    /// packet needs the shard's lock: no live entry found (or the index
    /// changing under the probe, or the entry locked), the entry
    /// expired, or a SYN reopening a closed TCP flow; nothing changed.
    /// In the owner's biased batch (`b.biased`, [`super::bias`]) without
    /// the entry's lock (no one else writes entries meanwhile).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn hit(
        &self,
        w: &[u64; 5],
        h: u64,
        src_a: bool,
        kind: Kind,
        len: u32,
        b: &Batch,
        g: &Guard,
    ) -> Option<Hit> {
        self.hit_hinted(None, w, h, src_a, kind, len, b, g)
    }

    /// [`hit`](Self::hit), the entry `hint` tried before the index
    /// ([`find_hinted`](Self::find_hinted)).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn hit_hinted(
        &self,
        hint: Option<&Slot>,
        w: &[u64; 5],
        h: u64,
        src_a: bool,
        kind: Kind,
        len: u32,
        b: &Batch,
        g: &Guard,
    ) -> Option<Hit> {
        let (run, ad, biased) = (b.run, b.ad, b.biased);
        let (s, t) = self.find_hinted(hint, w, h, biased, g)?;
        // Leave the entry as it was (unlocked if locked here).
        let leave = |t: u64| {
            if !biased {
                s.unlock(t)
            }
        };
        let (mut flags, mut timeout) = (table::tail_flags(t), super::slot::tail_timeout(t));
        if expired_at(timeout, s.last(), run.now, ad) {
            leave(t);
            return None;
        }
        let from = usize::from((flags & ORIG_A != 0) != src_a);
        // A UDP (or other) flow seen both ways and under its last
        // timeout already: the packet changes nothing but the counters
        // (and, biased, the `tail` word need not be written).
        if steady(kind, flags, timeout) {
            s.count(from, len, run.now);
            leave(t);
            return Some((Ok((CtState::Established, from == 1)), flags & KEPT != 0));
        }
        let tcp = matches!(kind, Kind::Tcp(_));
        let mut peers = if tcp { s.peers() } else { [Peer::default(); 2] };
        match step(&mut flags, &mut timeout, &mut peers, from, kind, run) {
            Err(Reopen) => {
                leave(t);
                return None;
            }
            Ok(Err(why)) => {
                leave(t);
                return Some((Err(why), flags & KEPT != 0));
            }
            Ok(Ok(())) => {}
        }
        if tcp {
            s.set_peers(&peers);
        }
        s.count(from, len, run.now);
        s.unlock(table::with_state(t, flags, timeout));
        Some((Ok(state_of(flags, from == 1)), flags & KEPT != 0))
    }
}
