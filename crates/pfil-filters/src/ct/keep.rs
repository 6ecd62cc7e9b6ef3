//! An acl's `keep state` after a `ct` hook keeps its states in the
//! hook's table.
//!
//! pf's `keep state` and a `ct` hook both track flows; in a chain of
//! both (`ct`, then `acl:pass ... keep state; default drop`) each flow
//! was tracked twice, once for the annotation and once in the acl's own
//! table, and the second lookup cost as much as the first. Now the acl
//! marks the flows its `keep state` rules pass in the `ct` hook's table
//! ([`KEPT`] in the entry's flags), and the hook hands the mark on in
//! the packet's annotation ([`Packet::ct_ext`]): a packet of a marked
//! flow passes the acl on its state without a lookup; any other walks
//! the rules, and a `keep state` rule that passes it marks its flow.
//!
//! How the acl finds the hook's table: the hook notes its table in a
//! thread-local slot once a batch ([`note`]), and tags the packets it
//! annotates with the table's tag (1 to 7, in the annotation's extra
//! bits beside the mark). The acl, later in the same walk on the same
//! thread, takes the noted table ([`noted`]) and uses it for the packets
//! that carry its tag; a packet annotated by anything else (no `ct` hook
//! before the acl, another tracker, the acl's own table) is kept in the
//! acl's own table as before. The slot holds a weak reference: a table
//! whose hook is gone is freed as usual.
//!
//! One acl marks a table ([`Table::keep_for`]): the first whose `keep
//! state` sees it, by a keep id that the acl's versions (`set`, `apply`)
//! share. Another acl after the same hook keeps its own table, as before
//! (two rulesets' marks in one bit would let one's flows through the
//! other). The mark follows the `ct` hook's state: its timeouts, its TCP
//! mode and its `max` (the acl's `set limit states` bounds its own table
//! only), and `pfilctl states` lists these flows under the `ct` hook.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Weak};

use pfil::Packet;

use super::*;

/// In a packet's [`Packet::ct_ext`]: the flow carries a `keep state`
/// mark ([`KEPT`]); bits 1..=3 are the annotating table's tag.
pub(crate) const EXT_KEPT: u8 = 1;

thread_local! {
    /// The table of the last `ct` hook batch on this thread.
    static NOTED: RefCell<Weak<Table>> = const { RefCell::new(Weak::new()) };
}

/// A fresh table's tag: 1 to 7, in turn (tables alive at once may share
/// one; a tag only tells an acl whether a packet's annotation is the
/// noted table's, which two `ct` hooks of different tables in one walk
/// make uncertain).
pub(super) fn next_tag() -> u8 {
    static NEXT: AtomicU8 = AtomicU8::new(0);
    NEXT.fetch_add(1, Relaxed) % 7 + 1
}

/// Note `t` as the table of this thread's `ct` hook batch (no reference
/// count touched when it is the one noted already).
#[inline]
pub(super) fn note(t: &Arc<Table>) {
    NOTED.with(|n| {
        let mut n = n.borrow_mut();
        if n.as_ptr() != Arc::as_ptr(t) || n.strong_count() == 0 {
            *n = Arc::downgrade(t);
        }
    });
}

/// The table of this thread's last `ct` hook batch, if it still lives.
pub(crate) fn noted() -> Option<Arc<Table>> {
    NOTED.with(|n| n.borrow().upgrade())
}

impl Table {
    /// The annotation's extra bits for a packet of a flow with (or
    /// without) the `keep state` mark.
    #[inline(always)]
    pub(crate) fn ext(&self, kept: bool) -> u8 {
        self.tag << 1 | u8::from(kept)
    }

    /// Whether packet `p`'s annotation is this table's.
    #[inline(always)]
    pub(crate) fn annotated(&self, p: &Packet<'_>) -> bool {
        p.ct_ext() >> 1 == self.tag
    }

    /// Whether the acl of keep id `id` marks flows in this table: it
    /// does if it is the first to ask (an acl asks when it sees a packet
    /// this table's hook annotated, so only an acl after the hook).
    pub(crate) fn keep_for(&self, id: u64) -> bool {
        match self.keeper.load(Relaxed) {
            0 => match self.keeper.compare_exchange(0, id, Relaxed, Relaxed) {
                Ok(_) => true,
                Err(k) => k == id,
            },
            k => k == id,
        }
    }

    /// Whether the flow of packet `p` (or the flow an ICMP error quotes)
    /// carries the `keep state` mark now, under its shard's lock: for a
    /// packet annotated without it (the mark may have come since).
    pub(crate) fn kept_now(&self, p: &Packet<'_>) -> bool {
        self.kept_slow(&flow::classify(p), None)
    }

    /// Mark the live flow of packet `p` as passed by a `keep state` rule
    /// (worker `worker`, `now` and `max` as the `ct` hook's run): its
    /// packets will carry the mark. Whether it was not marked yet
    /// (`false` also when the flow is not tracked: the hook refused it,
    /// or it is an ICMP error's).
    pub(crate) fn mark_kept(&self, p: &Packet<'_>, worker: usize, run: Run) -> bool {
        let Class::Flow(key, ..) = flow::classify(p) else {
            return false;
        };
        let h = self.hash(&key);
        // A writer of entries: by the table's bias (`bias.rs`).
        let _section = self.bias.enter(worker);
        let mut g = lock(self.shard(h));
        let ad = Adaptive::at(self.len(), run.max);
        let Some(id) = self.live(&mut g, &key, h as u32, run.now, ad) else {
            return false;
        };
        let s = g.slot(id);
        let t = s.lock();
        let flags = table::tail_flags(t);
        s.unlock(table::with_state(t, flags | KEPT, slot::tail_timeout(t)));
        flags & KEPT == 0
    }
}
