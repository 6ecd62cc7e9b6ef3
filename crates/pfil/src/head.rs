//! The datapath entry points: `Head`, `Worker` and `Snapshot`.
//!
//! A batch pins the epoch once, loads the current generation once and walks
//! the head's chain for every packet: no lock, no allocation, no
//! read-modify-write on a shared cache line.

use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossbeam_epoch::{self as epoch, Guard};

use crate::chain::{drop_passing, Env};
use crate::shared::Shared;
use crate::state::{Generation, HeadInner};
use crate::{Ctx, Dir, Dirs, Packet, PacketKind, Verdict};

/// A handle to a registered head: what an inspection point calls.
#[derive(Clone)]
pub struct Head {
    pub(crate) shared: Arc<Shared>,
    pub(crate) inner: Arc<HeadInner>,
}

impl Head {
    /// The head's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The kind of packets the head carries.
    pub fn kind(&self) -> PacketKind {
        self.inner.kind
    }

    /// The directions the head supports.
    pub fn dirs(&self) -> Dirs {
        self.inner.dirs
    }

    /// Is anything linked in `dir` (or a packet trace attached there,
    /// [`Registry::trace`](crate::Registry::trace))? One relaxed load
    /// (pfil's `PFIL_HOOKED_IN`), so an inspection point can skip the run
    /// when not.
    #[inline]
    pub fn is_hooked(&self, dir: Dir) -> bool {
        self.inner.hooked[dir.index()].load(Ordering::Relaxed)
    }

    /// Run the chain for `dir` over a batch; read each packet's verdict
    /// afterwards. Packets already `Dropped`/`Consumed` are not shown to
    /// any hook.
    ///
    /// Never panics: a `worker` of another registry, or packets of another
    /// kind than the head's, are refused, dropped and counted as
    /// [`Snapshot::run`] says.
    #[inline]
    pub fn run(&self, dir: Dir, worker: &mut Worker, pkts: &mut [Packet<'_>]) {
        Snapshot::pin(&self.shared).run(self, dir, worker, pkts);
    }

    /// Run the input chain over a batch.
    #[inline]
    pub fn run_in(&self, worker: &mut Worker, pkts: &mut [Packet<'_>]) {
        self.run(Dir::In, worker, pkts)
    }

    /// Run the output chain over a batch.
    #[inline]
    pub fn run_out(&self, worker: &mut Worker, pkts: &mut [Packet<'_>]) {
        self.run(Dir::Out, worker, pkts)
    }

    /// Run one packet and return its verdict.
    #[inline]
    pub fn run_one(&self, dir: Dir, worker: &mut Worker, pkt: &mut Packet<'_>) -> Verdict {
        self.run(dir, worker, std::slice::from_mut(pkt));
        pkt.verdict()
    }
}

impl std::fmt::Debug for Head {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Head")
            .field("name", &self.inner.name)
            .field("kind", &self.inner.kind)
            .field("dirs", &self.inner.dirs)
            .finish()
    }
}

/// A datapath thread's identity: owns one counter slot in every link.
///
/// Taken with [`Registry::worker`](crate::Registry::worker), given back on drop. `&mut Worker` on
/// every run guarantees each slot has a single writer.
pub struct Worker {
    pub(crate) index: usize,
    pub(crate) shared: Arc<Shared>,
    /// Head runs so far, for the sampling of link costs.
    pub(crate) tick: u32,
}

impl Worker {
    /// This worker's slot index, below [`Registry::max_workers`](crate::Registry::max_workers).
    pub fn index(&self) -> usize {
        self.index
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.shared.release_worker(self.index);
    }
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("index", &self.index)
            .finish()
    }
}

/// One generation, pinned: run several heads against the same configuration
/// (e.g. a forwarder's `A in` then `B out` for one batch).
///
/// Not `Send`: it holds an epoch pin of the current thread. Keep it for one
/// batch; a snapshot held open delays every retirement.
pub struct Snapshot<'r> {
    _guard: Guard,
    gen: *const Generation,
    shared: &'r Shared,
    _not_send: PhantomData<*const ()>,
}

impl<'r> Snapshot<'r> {
    #[inline]
    pub(crate) fn pin(shared: &'r Shared) -> Snapshot<'r> {
        let guard = epoch::pin();
        // Acquire pairs with the writer's AcqRel swap: the generation's
        // contents are visible before we walk them.
        let gen = shared.current.load(Ordering::Acquire, &guard).as_raw();
        Snapshot {
            _guard: guard,
            gen,
            shared,
            _not_send: PhantomData,
        }
    }

    /// The generation number this snapshot sees.
    pub fn generation(&self) -> u64 {
        self.generation_ref().number
    }

    #[inline]
    fn generation_ref(&self) -> &Generation {
        // SAFETY: `gen` was loaded from `current`, which is never null, while
        // `_guard` was pinned; writers retire generations only through
        // a deferred function (it buries them in the graveyard, which frees
        // them later), which cannot run while our pin is alive. The
        // reference cannot outlive `self`, which owns the pin.
        unsafe { &*self.gen }
    }

    /// Run `head`'s chain for `dir` over a batch in this generation.
    ///
    /// Never panics. The batch is refused, and no hook runs on it, when
    /// `head` or `worker` belong to another registry than the snapshot (their
    /// slots would index someone else's chains and counters). A packet whose
    /// [`kind`](Packet::kind) is not the head's is refused alone, before any
    /// hook sees it (a hook would parse it as what it is not); the rest of
    /// its batch runs. (On a direction with nothing linked no hook can
    /// misparse it: the runner returns at once and checks nothing.) A
    /// refused packet that was still `Pass` gets [`Verdict::Dropped`];
    /// refusals are counted in [`Registry::refused`](crate::Registry::refused) of the worker's
    /// registry.
    #[inline]
    pub fn run(&self, head: &Head, dir: Dir, worker: &mut Worker, pkts: &mut [Packet<'_>]) {
        if !std::ptr::eq(self.shared, &*head.shared) || !std::ptr::eq(self.shared, &*worker.shared)
        {
            return refuse_foreign(worker, pkts);
        }
        if let Some(chains) = self.generation_ref().chains.get(head.inner.slot) {
            let ctx = Ctx {
                head: &head.inner.name,
                dir,
                worker: worker.index,
            };
            // One batch in `every` is timed, link by link.
            let every = self.shared.sample_every.load(Ordering::Relaxed);
            worker.tick = worker.tick.wrapping_add(1);
            let env = Env {
                kind: head.inner.kind,
                quarantine: &self.shared.quarantine,
                refused: &self.shared.refused,
                sample: every != 0 && worker.tick & every.wrapping_sub(1) == 0,
            };
            chains[dir.index()].run(pkts, &ctx, &env);
        }
    }
}

/// A head or worker of another registry than the snapshot: run nothing,
/// drop the batch, count it in the worker's own registry and slot.
#[cold]
#[inline(never)]
fn refuse_foreign(worker: &mut Worker, pkts: &mut [Packet<'_>]) {
    let n = drop_passing(pkts.iter_mut());
    worker.shared.refused.foreign(worker.index, n);
}
