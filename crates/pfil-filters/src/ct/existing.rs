//! Lookups that never create a flow: what the acl's `keep state` runs
//! first on every packet. A packet of a tracked flow passes on its
//! state; any other walks the rules, and only a `keep state` rule that
//! passes it creates its flow ([`Table::track_why`]).
//!
//! A packet of a live flow takes the batch path of the `ct` hook: a
//! plain IPv4 UDP or TCP packet keyed by its words alone
//! ([`flow::plain_v4`]), the index probed without the shard's lock and
//! the entry updated under its own ([`Table::hit`]). The shard's lock is
//! taken only when that does not settle it (no live entry, the entry
//! expired or locked, a SYN reopening a closed flow), and the batch, not
//! each packet, sweeps for expired flows ([`Table::sweep_next`]).

use crossbeam_epoch::{self as epoch, Guard};
use pfil::{CtState, Packet};

use super::*;

/// What [`Table::existing`] found for a packet.
#[derive(Clone, Copy, Debug)]
pub enum Existing {
    /// Its flow is tracked (or it is an ICMP error quoting one): the
    /// packet's state and direction, `invalid` when it failed the flow's
    /// checks (its reason counted).
    Found(CtState, bool),
    /// It belongs to no tracked flow: its class, to create the flow
    /// with ([`Table::track_why`]) if the rules keep its state.
    Absent(Class),
}

impl Table {
    /// Track packet `p` (`len` bytes) only if it belongs to a flow in the
    /// table, in a batch: `ad` (the adaptive timeouts' scale) computed
    /// and `g` pinned once a batch, the batch sweeping for expired flows
    /// (once a chunk: [`sweep_next`](Self::sweep_next)). A SYN on a TCP
    /// flow closed both ways removes the flow and finds it
    /// [`Absent`](Existing::Absent): the port is reused, a new flow.
    #[inline]
    pub fn existing(
        &self,
        p: &Packet<'_>,
        len: u32,
        run: Run,
        ad: Adaptive,
        worker: usize,
        g: &Guard,
    ) -> Existing {
        let _hold = self.bias.hold();
        let b = Batch {
            run,
            ad,
            worker,
            biased: false,
        };
        self.existing_in(p, len, &b, g)
    }

    /// [`existing`](Self::existing) in a batch of the table
    /// ([`Bias::enter`](super::bias::Bias::enter) taken; `biased`: its
    /// [`Section::biased`](super::bias::Section::biased)).
    #[inline]
    pub(crate) fn existing_in(&self, p: &Packet<'_>, len: u32, b: &Batch, g: &Guard) -> Existing {
        match flow::plain_v4(p) {
            Some((w, a, kind)) => {
                let h = self.hash_words(&w);
                let found = match self.hit(&w, h, a, kind, len, b, g) {
                    Some((r, _)) => Some(r),
                    None => self.existing_locked(&FlowKey::from_words(w), h, a, kind, len, b),
                };
                self.settle(found, b.worker, || {
                    Class::Flow(FlowKey::from_words(w), a, kind)
                })
            }
            None => self.existing_class(flow::classify(p), len, b, g),
        }
    }

    /// [`existing`](Self::existing) of a packet of class `c`.
    pub(super) fn existing_class(&self, c: Class, len: u32, b: &Batch, g: &Guard) -> Existing {
        let (key, src_a, kind) = match c {
            Class::Untracked | Class::Invalid(_) => return Existing::Absent(c),
            // An error quoting no tracked flow walks the rules.
            Class::Error(..) => {
                return match self.track_kept(c, None, len, b.run, false, false).0 {
                    Ok((s, reply)) => Existing::Found(s, reply),
                    Err(_) => Existing::Absent(c),
                }
            }
            Class::Flow(key, src_a, kind) => (key, src_a, kind),
        };
        let h = self.hash(&key);
        let found = match self.hit(&key.words(), h, src_a, kind, len, b, g) {
            Some((r, _)) => Some(r),
            None => self.existing_locked(&key, h, src_a, kind, len, b),
        };
        self.settle(found, b.worker, || c)
    }

    /// A packet the lock-free way did not settle, under its shard's lock:
    /// `None` when its flow is not live (or a SYN reopened it: removed).
    #[inline(never)]
    fn existing_locked(
        &self,
        key: &FlowKey,
        h: u64,
        src_a: bool,
        kind: Kind,
        len: u32,
        b: &Batch,
    ) -> Option<Result<(CtState, bool), Invalid>> {
        let mut g = lock(self.shard(h));
        let id = self.live(&mut g, key, h as u32, b.run.now, b.ad)?;
        self.update_locked(&mut g, id, src_a, kind, len, b.run).ok()
    }

    /// What a lookup `found`, an invalid packet's reason counted in
    /// `worker`'s slot; `class` for a packet of no live flow.
    #[inline(always)]
    fn settle(
        &self,
        found: Option<Result<(CtState, bool), Invalid>>,
        worker: usize,
        class: impl FnOnce() -> Class,
    ) -> Existing {
        match found {
            Some(Ok((s, reply))) => Existing::Found(s, reply),
            Some(Err(why)) => {
                self.count(worker, why);
                Existing::Found(CtState::Invalid, false)
            }
            None => Existing::Absent(class()),
        }
    }

    /// Track a packet only if it belongs to a flow in the table (or is an
    /// ICMP error quoting one): its state and direction (`invalid` if it
    /// fails the flow's checks, its reason counted), or `None` when it
    /// belongs to none. A SYN on a TCP flow closed both ways removes the
    /// flow and gives `None`: the port is reused, a new flow. One packet
    /// at a time ([`existing`](Self::existing) is the batch's way); it
    /// sweeps a little for expired flows, as a batch does once a chunk.
    /// [`track`](Self::track) creates.
    pub fn track_existing(
        &self,
        c: Class,
        len: u32,
        run: Run,
        worker: usize,
    ) -> Option<(CtState, bool)> {
        let _hold = self.bias.hold();
        let ad = Adaptive::at(self.len(), run.max);
        let b = Batch {
            run,
            ad,
            worker,
            biased: false,
        };
        let found = self.existing_class(c, len, &b, &epoch::pin());
        self.sweep_in(table::SWEEP, run);
        match found {
            Existing::Found(s, reply) => Some((s, reply)),
            Existing::Absent(_) => None,
        }
    }
}
