//! The hooks of the lock study (seed 001, Max Laier's rmlock benchmark):
//! each one consults a shared "ruleset" under a different kind of lock, so
//! the study measures what the lock costs per packet over threads.
//!
//! The ruleset is one word: a packet passes unless its first byte equals it
//! (the study's packets never match, so every verdict is `Pass`, but the
//! compiler cannot know that).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crossbeam_utils::CachePadded;
use pfil::{Ctx, Filter, Packet, Verdict};
use pfil_filters::{Catalog, CatalogError, Module};

/// Add the lock-study hooks to `catalog` as modules `mutex`, `rwlock`,
/// `brlock` and `epoch` (none takes a config), so an app's `--hook mutex`
/// builds one.
///
/// # Errors
/// [`CatalogError::Duplicate`] if the catalog already has one of the names.
pub fn register(catalog: &mut Catalog) -> Result<(), CatalogError> {
    catalog.register(Module::new(
        "mutex",
        "lock study: a std Mutex taken per packet",
        |_| Arc::new(MutexHook::new()),
    ))?;
    catalog.register(Module::new(
        "rwlock",
        "lock study: a std RwLock read lock taken per packet",
        |_| Arc::new(RwLockHook::new()),
    ))?;
    catalog.register(Module::new(
        "brlock",
        "lock study: a per-worker reader lock (read-mostly, rmlock-like) per packet",
        |ctx| Arc::new(BrLockHook::new(ctx.max_workers)),
    ))?;
    catalog.register(Module::new(
        "epoch",
        "lock study: an epoch read section (crossbeam-epoch pin) per packet",
        |_| Arc::new(EpochHook::new()),
    ))
}

#[inline]
fn decide(pkt: &Packet<'_>, rule: u64) -> Verdict {
    match pkt.frame().first() {
        Some(&b) if u64::from(b) == rule => Verdict::Dropped,
        _ => Verdict::Pass,
    }
}

/// Takes a `std::sync::Mutex` for every packet.
#[derive(Clone, Debug)]
pub struct MutexHook(Arc<Mutex<u64>>);

impl MutexHook {
    /// A hook whose ruleset never matches a study packet.
    pub fn new() -> Self {
        MutexHook(Arc::new(Mutex::new(u64::MAX)))
    }

    /// Change the ruleset (the writer side).
    pub fn set(&self, rule: u64) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = rule;
    }
}

impl Default for MutexHook {
    fn default() -> Self {
        Self::new()
    }
}

impl Filter for MutexHook {
    #[inline]
    fn filter(&self, pkt: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        let rule = *self.0.lock().unwrap_or_else(|e| e.into_inner());
        decide(pkt, rule)
    }

    fn spec(&self) -> Option<String> {
        Some("mutex".into())
    }
}

/// Takes a `std::sync::RwLock` read lock for every packet.
#[derive(Clone, Debug)]
pub struct RwLockHook(Arc<RwLock<u64>>);

impl RwLockHook {
    /// A hook whose ruleset never matches a study packet.
    pub fn new() -> Self {
        RwLockHook(Arc::new(RwLock::new(u64::MAX)))
    }

    /// Change the ruleset (the writer side).
    pub fn set(&self, rule: u64) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = rule;
    }
}

impl Default for RwLockHook {
    fn default() -> Self {
        Self::new()
    }
}

impl Filter for RwLockHook {
    #[inline]
    fn filter(&self, pkt: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        let rule = *self.0.read().unwrap_or_else(|e| e.into_inner());
        decide(pkt, rule)
    }

    fn spec(&self) -> Option<String> {
        Some("rwlock".into())
    }
}

/// A read-mostly "big reader" lock: one reader lock per worker, each on its
/// own cache line. A reader takes only its own (uncontended, so the RMW
/// stays in its own line); a writer takes all of them. This is the
/// userspace form of the per-CPU reader state that FreeBSD's rmlock keeps.
#[derive(Clone)]
pub struct BrLockHook {
    slots: Arc<[CachePadded<parking_lot::RwLock<u64>>]>,
}

impl BrLockHook {
    /// A hook for up to `max_workers` workers.
    pub fn new(max_workers: usize) -> Self {
        BrLockHook {
            slots: (0..max_workers.max(1))
                .map(|_| CachePadded::new(parking_lot::RwLock::new(u64::MAX)))
                .collect(),
        }
    }

    /// Change the ruleset: take every reader slot for writing, in order.
    pub fn set(&self, rule: u64) {
        let mut guards: Vec<_> = self.slots.iter().map(|s| s.write()).collect();
        for g in &mut guards {
            **g = rule;
        }
    }
}

impl Filter for BrLockHook {
    #[inline]
    fn filter(&self, pkt: &mut Packet<'_>, ctx: &Ctx<'_>) -> Verdict {
        let slot = &self.slots[ctx.worker % self.slots.len()];
        let rule = *slot.read();
        decide(pkt, rule)
    }

    fn spec(&self) -> Option<String> {
        Some("brlock".into())
    }
}

impl std::fmt::Debug for BrLockHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrLockHook")
            .field("slots", &self.slots.len())
            .finish()
    }
}

/// Reads the ruleset inside an epoch read section per packet
/// (crossbeam-epoch pin): readers never write a shared line; writers
/// replace the word atomically.
#[derive(Clone, Debug)]
pub struct EpochHook(Arc<CachePadded<AtomicU64>>);

impl EpochHook {
    /// A hook whose ruleset never matches a study packet.
    pub fn new() -> Self {
        EpochHook(Arc::new(CachePadded::new(AtomicU64::new(u64::MAX))))
    }

    /// Change the ruleset.
    pub fn set(&self, rule: u64) {
        self.0.store(rule, Ordering::Release);
    }
}

impl Default for EpochHook {
    fn default() -> Self {
        Self::new()
    }
}

impl Filter for EpochHook {
    #[inline]
    fn filter(&self, pkt: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        let _section = crossbeam_epoch::pin();
        decide(pkt, self.0.load(Ordering::Acquire))
    }

    fn spec(&self) -> Option<String> {
        Some("epoch".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfil::{Dir, Dirs, PacketKind, Placement, Registry};
    use pfil_filters::BuildCtx;

    #[test]
    fn register_adds_the_four_to_the_builtin_catalog() {
        let mut c = Catalog::builtin();
        register(&mut c).unwrap();
        let names: Vec<_> = c.modules().map(Module::name).collect();
        assert_eq!(
            names,
            [
                "null",
                "count",
                "drop-udp",
                "bpf",
                "ratelimit",
                "ct",
                "acl",
                "xdp",
                "mutex",
                "rwlock",
                "brlock",
                "epoch"
            ]
        );
        let ctx = BuildCtx::new(2);
        for n in ["mutex", "rwlock", "brlock", "epoch"] {
            let spec = c.create(n, &ctx).unwrap().spec();
            assert_eq!(
                spec.as_deref(),
                Some(n),
                "a saved configuration rebuilds it"
            );
            let f = c.create(n, &ctx).unwrap();
            let ctx = Ctx::new("h", Dir::In, 1);
            assert_eq!(
                f.filter(&mut Packet::new(&mut [7u8; 8]), &ctx),
                Verdict::Pass
            );
        }
        assert!(c.create("mutex:1", &ctx).is_err());
        assert_eq!(
            register(&mut c),
            Err(CatalogError::Duplicate("mutex".into()))
        );
    }

    #[test]
    fn every_lock_hook_decides_by_its_ruleset() {
        let reg = Registry::with_max_workers(2);
        let head = reg
            .register_head("h", PacketKind::Ethernet, Dirs::IN)
            .unwrap();
        let m = MutexHook::new();
        let r = RwLockHook::new();
        let b = BrLockHook::new(2);
        let e = EpochHook::new();
        reg.add_hook("lock:mutex", PacketKind::Ethernet, Dirs::IN, m.clone())
            .unwrap();
        reg.add_hook("lock:rwlock", PacketKind::Ethernet, Dirs::IN, r.clone())
            .unwrap();
        reg.add_hook("lock:brlock", PacketKind::Ethernet, Dirs::IN, b.clone())
            .unwrap();
        reg.add_hook("lock:epoch", PacketKind::Ethernet, Dirs::IN, e.clone())
            .unwrap();
        for n in ["lock:mutex", "lock:rwlock", "lock:brlock", "lock:epoch"] {
            reg.link("h", Dir::In, n, Placement::Append).unwrap();
        }
        let mut w = reg.worker().unwrap();
        let mut f = [7u8; 8];
        assert_eq!(
            head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f)),
            Verdict::Pass
        );
        for (i, set) in [
            Box::new(|v| m.set(v)) as Box<dyn Fn(u64)>,
            Box::new(|v| r.set(v)),
            Box::new(|v| b.set(v)),
            Box::new(|v| e.set(v)),
        ]
        .iter()
        .enumerate()
        {
            set(7);
            assert_eq!(
                head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f)),
                Verdict::Dropped
            );
            let chain = reg.chain("h", Dir::In).unwrap();
            assert_eq!(chain[i].counters.dropped, 1, "hook {i} dropped it");
            set(u64::MAX);
        }
    }
}
