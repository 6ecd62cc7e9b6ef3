//! Chain-publishing strategies for benchmarks: the pfil registry (epoch) and
//! the baselines it is measured against, all running the same hooks over
//! the same batches.
//!
//! - [`Strategy::Epoch`]: the real registry, one pin per batch.
//! - [`Strategy::Unsync`]: a hand-written loop over the hooks, no
//!   synchronization at all. The limit: nothing can be faster.
//! - [`Strategy::RwLockPacket`], [`Strategy::MutexPacket`]: the chain behind
//!   `std::sync::RwLock` / `Mutex`, taken for every packet (the pre-2007
//!   pfil shape, seed 001).
//! - [`Strategy::RwLockBatch`], [`Strategy::MutexBatch`],
//!   [`Strategy::ArcSwapBatch`]: the same locks or arc-swap taken once per
//!   batch.

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex, RwLock};

use arc_swap::ArcSwap;
use pfil::{Ctx, Dir, Dirs, Filter, Head, Packet, PacketKind, Placement, Registry, Worker};

/// How the chain is published to the datapath.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Strategy {
    /// The pfil registry: epoch pin per batch, immutable generations.
    Epoch,
    /// No synchronization: the limit.
    Unsync,
    /// `std::sync::RwLock` read lock per packet.
    RwLockPacket,
    /// `std::sync::Mutex` per packet.
    MutexPacket,
    /// `std::sync::RwLock` read lock per batch.
    RwLockBatch,
    /// `std::sync::Mutex` per batch.
    MutexBatch,
    /// `arc_swap::ArcSwap` load per batch.
    ArcSwapBatch,
}

impl Strategy {
    /// Every strategy, limit first.
    pub const ALL: [Strategy; 7] = [
        Strategy::Unsync,
        Strategy::Epoch,
        Strategy::ArcSwapBatch,
        Strategy::RwLockBatch,
        Strategy::MutexBatch,
        Strategy::RwLockPacket,
        Strategy::MutexPacket,
    ];

    /// Short name used on command lines and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Epoch => "epoch",
            Strategy::Unsync => "unsync",
            Strategy::RwLockPacket => "rwlock-pkt",
            Strategy::MutexPacket => "mutex-pkt",
            Strategy::RwLockBatch => "rwlock-batch",
            Strategy::MutexBatch => "mutex-batch",
            Strategy::ArcSwapBatch => "arcswap-batch",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Strategy::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Strategy::ALL.iter().map(|s| s.name()).collect();
                format!(
                    "unknown strategy `{s}`; expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// A filter shared between the registry and the baselines.
#[derive(Clone)]
pub struct SharedFilter(pub Arc<dyn Filter>);

impl Filter for SharedFilter {
    #[inline]
    fn filter(&self, pkt: &mut Packet<'_>, ctx: &Ctx<'_>) -> pfil::Verdict {
        self.0.filter(pkt, ctx)
    }
}

type Chain = Arc<[Arc<dyn Filter>]>;

/// One benchmark subject: a chain of hooks behind one strategy.
pub struct Subject {
    strategy: Strategy,
    registry: Registry,
    head: Head,
    names: Vec<String>,
    chain: Chain,
    rw: RwLock<Chain>,
    mx: Mutex<Chain>,
    swap: ArcSwap<Vec<Arc<dyn Filter>>>,
}

const HEAD: &str = "bench0";

impl Subject {
    /// Build a subject running `hooks` in order, for `workers` threads.
    pub fn new(strategy: Strategy, hooks: Vec<Arc<dyn Filter>>, workers: usize) -> Subject {
        let registry = Registry::with_max_workers(workers + 1);
        let head = registry
            .register_head(HEAD, PacketKind::Ethernet, Dirs::IN)
            .expect("fresh registry");
        let mut names = Vec::new();
        for (i, h) in hooks.iter().enumerate() {
            let name = format!("bench:{i}");
            registry
                .add_hook_shared(&name, PacketKind::Ethernet, Dirs::IN, h.clone())
                .expect("unique name");
            if strategy == Strategy::Epoch {
                registry
                    .link(HEAD, Dir::In, &name, Placement::Append)
                    .expect("valid link");
            }
            names.push(name);
        }
        let chain: Chain = hooks.clone().into();
        Subject {
            strategy,
            registry,
            head,
            names,
            rw: RwLock::new(chain.clone()),
            mx: Mutex::new(chain.clone()),
            swap: ArcSwap::from_pointee(hooks),
            chain,
        }
    }

    /// The registry (for workers and counters).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The strategy.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// Run one batch; verdicts land in the packets.
    #[inline]
    pub fn run(&self, worker: &mut Worker, pkts: &mut [Packet<'_>]) {
        let ctx = Ctx::new(HEAD, Dir::In, worker.index());
        match self.strategy {
            Strategy::Epoch => self.head.run(Dir::In, worker, pkts),
            Strategy::Unsync => walk(&self.chain, pkts, &ctx),
            Strategy::RwLockBatch => walk(
                &self.rw.read().unwrap_or_else(|e| e.into_inner()),
                pkts,
                &ctx,
            ),
            Strategy::MutexBatch => walk(
                &self.mx.lock().unwrap_or_else(|e| e.into_inner()),
                pkts,
                &ctx,
            ),
            Strategy::ArcSwapBatch => walk(&self.swap.load(), pkts, &ctx),
            Strategy::RwLockPacket => {
                for p in pkts.iter_mut() {
                    let chain = self.rw.read().unwrap_or_else(|e| e.into_inner());
                    walk(&chain, std::slice::from_mut(p), &ctx);
                }
            }
            Strategy::MutexPacket => {
                for p in pkts.iter_mut() {
                    let chain = self.mx.lock().unwrap_or_else(|e| e.into_inner());
                    walk(&chain, std::slice::from_mut(p), &ctx);
                }
            }
        }
    }

    /// What the background writer does: publish the same chain anew (a new
    /// generation / a new `Arc` / a write lock), so readers pay only for
    /// the publication, not for a different chain.
    pub fn relink(&self) {
        match self.strategy {
            Strategy::Epoch => {
                if let Some(first) = self.names.first() {
                    let mut tx = self.registry.transaction().unlink(HEAD, Dir::In, first);
                    tx = match self.names.get(1) {
                        Some(second) => {
                            tx.link(HEAD, Dir::In, first, Placement::Before(second.clone()))
                        }
                        None => tx.link(HEAD, Dir::In, first, Placement::Append),
                    };
                    tx.commit().expect("relink of a linked hook");
                }
            }
            Strategy::Unsync => {}
            Strategy::RwLockBatch | Strategy::RwLockPacket => {
                let mut g = self.rw.write().unwrap_or_else(|e| e.into_inner());
                *g = g.iter().cloned().collect();
            }
            Strategy::MutexBatch | Strategy::MutexPacket => {
                let mut g = self.mx.lock().unwrap_or_else(|e| e.into_inner());
                *g = g.iter().cloned().collect();
            }
            Strategy::ArcSwapBatch => {
                let cur = self.swap.load_full();
                self.swap.store(Arc::new(cur.to_vec()));
            }
        }
    }
}

/// The hand loop: every hook over every still-passing packet.
#[inline]
fn walk(chain: &[Arc<dyn Filter>], pkts: &mut [Packet<'_>], ctx: &Ctx<'_>) {
    for f in chain {
        for p in pkts.iter_mut() {
            if p.verdict().is_pass() {
                let v = f.filter(p, ctx);
                p.set_verdict(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_runs_every_hook_and_relinks() {
        let count = pfil_filters::Count::new(4);
        for s in Strategy::ALL {
            let subject = Subject::new(
                s,
                vec![Arc::new(pfil_filters::Null), Arc::new(count.clone())],
                2,
            );
            let mut w = subject.registry().worker().unwrap();
            let mut frames = [[0u8; 64]; 8];
            let mut pkts: Vec<Packet<'_>> = frames.iter_mut().map(|f| Packet::new(f)).collect();
            subject.run(&mut w, &mut pkts);
            subject.relink();
            for p in &mut pkts {
                p.reset();
            }
            subject.run(&mut w, &mut pkts);
            assert!(pkts.iter().all(|p| p.verdict().is_pass()));
            assert_eq!(s.name().parse::<Strategy>().unwrap(), s);
        }
        assert_eq!(count.get(Dir::In).packets, 16 * Strategy::ALL.len() as u64);
    }
}
