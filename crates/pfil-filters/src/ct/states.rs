//! One flow as an operator sees it (`pfilctl states`).

use std::net::IpAddr;

use super::table::{Adaptive, Entry, KEPT, ORIG_A, REPLY_SEEN};
use super::{tcp, PF_TIMEOUTS};

/// A tracked flow, originator first.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StateInfo {
    /// IP protocol number.
    pub proto: u8,
    /// The originator's address.
    pub src: IpAddr,
    /// The originator's port (the echo identifier for ICMP echo, 0 for
    /// protocols without ports).
    pub sport: u16,
    /// The responder's address.
    pub dst: IpAddr,
    /// The responder's port.
    pub dport: u16,
    /// The state: TCP `ORIG:REPLY` side states (`established:established`),
    /// else `new` (no reply seen yet) or `established`.
    pub state: String,
    /// Seconds since the flow was created.
    pub age: u32,
    /// Seconds until it expires if no packet comes (0: expired, waiting
    /// to be swept).
    pub expires: u32,
    /// Packets from the originator and from the responder.
    pub packets: [u64; 2],
    /// Bytes from the originator and from the responder.
    pub bytes: [u64; 2],
    /// An acl's `keep state` rule passed the flow (the acl after this
    /// `ct` hook keeps its states in its table).
    pub kept: bool,
}

impl StateInfo {
    pub(crate) fn of(e: &Entry, now: u32, ad: Adaptive) -> StateInfo {
        let orig_a = e.flags & ORIG_A != 0;
        let k = &e.key;
        let (src, sport, dst, dport) = if orig_a {
            (k.addr(false), k.pa, k.addr(true), k.pb)
        } else {
            (k.addr(true), k.pb, k.addr(false), k.pa)
        };
        let state = if k.proto == 6 {
            format!(
                "{}:{}",
                tcp::state::name(e.peers[0].state),
                tcp::state::name(e.peers[1].state)
            )
        } else if e.flags & REPLY_SEEN != 0 {
            "established".into()
        } else {
            "new".into()
        };
        let t = u64::from(PF_TIMEOUTS[usize::from(e.timeout).min(PF_TIMEOUTS.len() - 1)]);
        let scaled = (t * ad.num).checked_div(ad.den).unwrap_or(0);
        let idle = u64::from(now.saturating_sub(e.last));
        StateInfo {
            proto: k.proto,
            src,
            sport,
            dst,
            dport,
            state,
            age: now.saturating_sub(e.created),
            expires: u32::try_from(scaled.saturating_sub(idle)).unwrap_or(u32::MAX),
            packets: [u64::from(e.pkts[0]), u64::from(e.pkts[1])],
            bytes: e.bytes,
            kept: e.flags & KEPT != 0,
        }
    }
}

impl super::Table {
    /// How many flows `pred` holds for, and at most `limit` of them (`max`:
    /// the limit in force, for the adaptive timeouts). Each shard's lock
    /// is held only to copy its entries.
    pub fn states_matching(
        &self,
        max: usize,
        limit: usize,
        pred: impl Fn(&StateInfo) -> bool,
    ) -> (usize, Vec<StateInfo>) {
        // The owner's batches lock entries while they are read.
        let _hold = self.bias.hold();
        let now = self.now();
        let ad = Adaptive::at(self.len(), max);
        let (mut total, mut out) = (0, Vec::new());
        for s in self.shards.iter() {
            let copied: Vec<Entry> = super::lock(s).entries().collect();
            for e in &copied {
                let info = StateInfo::of(e, now, ad);
                if pred(&info) {
                    total += 1;
                    if out.len() < limit {
                        out.push(info);
                    }
                }
            }
        }
        (total, out)
    }

    /// Remove every flow `pred` holds for (`pfilctl states --kill`); how
    /// many. A shard's entries are copied under its lock, judged without
    /// it, and the chosen ones removed under it again if they still hold
    /// the same flow (never a stall of the datapath longer than a copy).
    /// Counted in `killed`.
    pub fn kill(&self, max: usize, pred: impl Fn(&StateInfo) -> bool) -> usize {
        // The owner's batches lock entries while some are removed.
        let _hold = self.bias.hold();
        let now = self.now();
        let ad = Adaptive::at(self.len(), max);
        let mut n = 0;
        for s in self.shards.iter() {
            let copied: Vec<(u32, Entry)> = super::lock(s).live().collect();
            let doomed: Vec<(u32, Entry)> = copied
                .into_iter()
                .filter(|(_, e)| pred(&StateInfo::of(e, now, ad)))
                .collect();
            if doomed.is_empty() {
                continue;
            }
            let mut g = super::lock(s);
            for (id, e) in doomed {
                if g.is_live(id) && g.slot(id).key() == e.key {
                    g.remove(id);
                    n += 1;
                }
            }
        }
        self.entries
            .fetch_sub(n, std::sync::atomic::Ordering::Relaxed);
        self.killed
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        n
    }

    /// Flows removed by [`kill`](Self::kill).
    pub fn killed(&self) -> u64 {
        self.killed.load(std::sync::atomic::Ordering::Relaxed)
    }
}
