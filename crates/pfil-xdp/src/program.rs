//! A program ready to run: verified by the engine, with its maps
//! allocated (or kept from the program it replaces) and one run
//! environment per worker.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pfil_ebpf::{Env, Fault, Insn, LoadOptions, MapRef, Region, XdpEnd};

use crate::helpers::{xdp_helpers, RunState};
use crate::object::{MapOrigin, Object};
use crate::tails;
use crate::{LoadError, Map, MapType};

/// One worker's run environment, used by one thread at a time.
struct Slot {
    busy: AtomicBool,
    /// The Env and the RunState its `user` pointer points to (boxed, so
    /// the pointer stays valid while the slot moves).
    env: UnsafeCell<Env>,
    _state: Box<UnsafeCell<RunState>>,
}

/// Which of the object's maps program `name` loads (by index); refused if
/// one is of a type pfil does not run
/// ([`MapType::Other`](crate::MapType::Other)): such a map, and one it
/// cannot make, is made inert, which only a program that never names it
/// may be given.
pub(crate) fn used_maps(obj: &Object, name: &str, insns: &[Insn]) -> Result<Vec<bool>, LoadError> {
    use crate::object::{LDDW, PSEUDO_MAP_FD, PSEUDO_MAP_VALUE};
    let mut used = vec![false; obj.maps.len()];
    for i in insns
        .iter()
        .filter(|i| i.code == LDDW && (i.src == PSEUDO_MAP_FD || i.src == PSEUDO_MAP_VALUE))
    {
        let Some(m) = usize::try_from(i.imm).ok().filter(|&m| m < used.len()) else {
            continue; // the verifier names a map index past the maps
        };
        used[m] = true;
        let d = &obj.maps[m];
        if !d.kind.runs() {
            return Err(LoadError::Unsupported(format!(
                "program {name:?} uses map {:?} of type {} ({}), which pfil does not run",
                d.name,
                d.kind.raw(),
                d.kind.name()
            )));
        }
    }
    Ok(used)
}

/// What a run returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunResult {
    /// The XDP action: r0's low 32 bits, as the kernel reads it.
    pub action: u64,
    /// Offset of `data_meta` in the frame after the run.
    pub meta: usize,
    /// Offset of `data`.
    pub data: usize,
    /// Offset of `data_end`.
    pub end: usize,
    /// Where `bpf_redirect`/`bpf_redirect_map` asked to send the frame.
    pub redirect: Option<Redirect>,
}

/// Where a run's `XDP_REDIRECT` asked the frame to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redirect {
    /// Out of the interface with this ifindex (`bpf_redirect`, a devmap
    /// or devmap_hash entry).
    Device(u32),
    /// To this CPU's network stack (a cpumap entry): the hook passes the
    /// frame on, as `XDP_PASS` does.
    Cpu(u32),
}

/// Why a run gave no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The program faulted (contained: nothing outside its regions was
    /// touched).
    #[error(transparent)]
    Fault(#[from] Fault),
    /// The worker's environment is in use by another thread (two threads
    /// claimed one worker index, or indices past the slots that share one).
    #[error("worker {0} has no free run environment")]
    Worker(usize),
}

/// What runs a program's instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// Machine code (x86-64; elsewhere the interpreter).
    Jit,
    /// The interpreter.
    Interpreter,
}

/// A loaded XDP program and its maps.
pub struct XdpProgram {
    name: String,
    section: String,
    defs: Vec<crate::MapDef>,
    maps: Vec<Arc<Map>>,
    prog: pfil_ebpf::Program,
    /// When the object has a prog array: every XDP program of it
    /// (`Object::programs` in order, then those that did not link),
    /// loaded to be a tail call's target, or why it could not be. A prog
    /// array entry `n` names the `n`-th.
    pub(crate) tails: Box<[(String, Result<pfil_ebpf::Program, String>)]>,
    slots: Box<[Slot]>,
}

// SAFETY: a slot's Env and RunState are only touched by the thread that
// won its `busy` flag (run); everything else is immutable or Sync.
unsafe impl Sync for XdpProgram {}
// SAFETY: as above; nothing is tied to a thread.
unsafe impl Send for XdpProgram {}

impl XdpProgram {
    /// Load program `name` (or the object's only XDP program) for
    /// `workers` workers. Maps of `keep` whose definition matches one of
    /// the object's (same name, type, sizes, flags) are reused with their
    /// contents; the others are made new.
    ///
    /// # Errors
    /// The object's refusals ([`Object::program`]), a map the kernel
    /// would refuse, or the engine's verifier's reason.
    pub fn load(
        obj: &Object,
        name: Option<&str>,
        workers: usize,
        keep: &[Arc<Map>],
    ) -> Result<XdpProgram, LoadError> {
        XdpProgram::load_on(obj, name, workers, keep, Engine::Jit)
    }

    /// [`load`](Self::load) run by `engine` (the interpreter is the JIT's
    /// reference: the kernel oracle, [`crate::oracle`], runs both).
    ///
    /// # Errors
    /// As [`load`](Self::load).
    pub fn load_on(
        obj: &Object,
        name: Option<&str>,
        workers: usize,
        keep: &[Arc<Map>],
        engine: Engine,
    ) -> Result<XdpProgram, LoadError> {
        let p = obj.program(name)?;
        let insns = Insn::decode_all(&p.insns).map_err(|e| LoadError::Malformed(e.to_string()))?;
        let used = used_maps(obj, &p.name, &insns)?;
        let mut maps = Vec::with_capacity(obj.maps.len());
        for (d, &used) in obj.maps.iter().zip(&used) {
            let kept = keep.iter().find(|m| {
                m.same_definition(d)
                    && m.workers() == workers_of(d, workers)
                    && (!used || m.not_made().is_none())
            });
            maps.push(match kept {
                Some(m) => m.clone(),
                None => Arc::new(match Map::new(d, workers) {
                    Ok(m) => m,
                    // The kernel's loader makes every map of the object;
                    // one the program never names need not be.
                    Err(e) if !used => Map::inert(d, e.to_string()),
                    Err(e) => return Err(LoadError::Map(e.to_string())),
                }),
            });
        }
        let refs: Vec<MapRef> = maps
            .iter()
            .zip(&obj.maps)
            .map(|(m, d)| {
                let r = m.region();
                MapRef {
                    handle: Arc::as_ptr(m) as u64,
                    key_size: d.key_size,
                    value_size: d.value_size,
                    // (A perf event array's 0 is the workers'.)
                    max_entries: m.max_entries() as u32,
                    direct: (d.origin == MapOrigin::Global).then_some(Region {
                        start: r.start,
                        len: u64::from(d.value_size),
                        writable: r.writable,
                    }),
                    array: m
                        .array_layout(0)
                        .map(|(_, stride)| pfil_ebpf::ArrayLayout { stride }),
                    map_type: d.kind.raw(),
                    flags: d.flags | forced_flags(d),
                }
            })
            .collect();
        let mut opts = LoadOptions::default();
        opts.jit &= engine == Engine::Jit;
        opts.callbacks.clone_from(&p.callbacks);
        let prog = pfil_ebpf::Program::load(insns, &refs, &xdp_helpers(), &opts)
            .map_err(|e| LoadError::Verify(format!("program {:?}: {e}", p.name)))?;
        // An object with a prog array: all its programs, as libbpf loads
        // them (its entries name them, and the object may set some).
        let tails: Box<[_]> = if obj.maps.iter().any(|d| d.kind == MapType::ProgArray) {
            let frags = p.frags;
            obj.programs
                .iter()
                .map(|t| {
                    (
                        t.name.clone(),
                        tails::load(obj, t, frags, (&maps, &refs), &opts),
                    )
                })
                // Those that did not link (after: the kernel's numbers
                // are the programs that link), each with why.
                .chain(
                    obj.unlinked()
                        .map(|(n, e)| (n.to_owned(), Err(e.to_string()))),
                )
                .collect()
        } else {
            Box::new([])
        };
        let targets: Arc<[bool]> = tails.iter().map(|(_, t)| t.is_ok()).collect();
        tails::init_prog_arrays(obj, &maps, &used, &tails)?;
        // Each worker's regions: a per-CPU map's values of that worker only.
        let regions = |w: usize| -> Vec<Region> {
            maps.iter()
                .map(|m| {
                    let r = m.worker_region(w);
                    Region {
                        start: r.start,
                        len: r.len,
                        writable: r.writable,
                    }
                })
                .collect()
        };
        let slots = (0..workers.max(1))
            .map(|w| {
                let mut st = RunState::new(maps.clone(), w, p.name.clone());
                st.tail_targets = targets.clone();
                let state = Box::new(UnsafeCell::new(st));
                // SAFETY: the regions are the maps' arenas, which `state`
                // (and the XdpProgram) keep alive as long as the Env; Rust
                // code touches them only through raw pointers (maps.rs).
                let mut env = unsafe { Env::new(regions(w), state.get().cast()) };
                // Worker w's values of the array maps (0 for the others,
                // which have no `MapRef::array` and so no inlined lookup).
                let bases = maps
                    .iter()
                    .map(|m| m.array_layout(w).map_or(0, |(b, _)| b))
                    .collect();
                // SAFETY: for a map with `array` set, value k < max_entries
                // of worker w is at base + k * stride, value_size bytes
                // 8-aligned inside its arena (a region above), kept alive
                // by `state` as long as the Env.
                unsafe { env.set_array_bases(bases) };
                Slot {
                    busy: AtomicBool::new(false),
                    env: UnsafeCell::new(env),
                    _state: state,
                }
            })
            .collect();
        Ok(XdpProgram {
            name: p.name.clone(),
            section: p.section.clone(),
            defs: obj.maps.clone(),
            maps,
            prog,
            tails,
            slots,
        })
    }

    /// The program's name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The section it came from.
    pub fn section(&self) -> &str {
        &self.section
    }
    /// Its maps, in the object's order.
    pub fn maps(&self) -> &[Arc<Map>] {
        &self.maps
    }
    /// The map named `name`.
    pub fn map(&self, name: &str) -> Option<&Arc<Map>> {
        self.maps.iter().find(|m| m.name() == name)
    }
    /// The engine's program (its instructions, its machine code).
    pub fn engine(&self) -> &pfil_ebpf::Program {
        &self.prog
    }

    /// The definitions the maps were made from.
    pub fn map_defs(&self) -> &[crate::MapDef] {
        &self.defs
    }

    /// Run the program as worker `worker` on `frame[data..data + len]`
    /// (bytes before are headroom, after tailroom), arriving on
    /// `ifindex`/`queue`.
    ///
    /// # Errors
    /// A [`Fault`] of the program, or a worker slot in use.
    pub fn run(
        &self,
        worker: usize,
        frame: &mut [u8],
        data: usize,
        len: usize,
        ifindex: u32,
        queue: u32,
    ) -> Result<RunResult, RunError> {
        self.claim(worker)?.run(frame, data, len, ifindex, queue)
    }

    /// Claim worker `worker`'s run environment for several runs (a
    /// batch): one atomic exchange for all of them. A worker index past
    /// the slots (a caller that is not a registry worker) shares a slot.
    ///
    /// # Errors
    /// [`RunError::Worker`] when another thread holds that slot.
    #[inline]
    pub fn claim(&self, worker: usize) -> Result<Claim<'_>, RunError> {
        let n = self.slots.len();
        // No division on the common path (a registry worker's index).
        let slot = &self.slots[if worker < n { worker } else { worker % n }];
        if slot.busy.swap(true, Ordering::Acquire) {
            return Err(RunError::Worker(worker));
        }
        Ok(Claim { prog: self, slot })
    }
}

/// A worker's run environment, held by one thread until dropped
/// ([`XdpProgram::claim`]).
pub struct Claim<'p> {
    prog: &'p XdpProgram,
    slot: &'p Slot,
}

/// How [`Claim::run_quick`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quick {
    /// No fault, the packet's bounds unmoved, no redirect target asked
    /// for: the action (r0's low 32 bits).
    Quiet(u32),
    /// Anything else: what [`Claim::run`] returns.
    Full(Result<RunResult, RunError>),
}

impl Claim<'_> {
    /// Run the program on `frame[data..data + len]` (see
    /// [`XdpProgram::run`]).
    ///
    /// # Errors
    /// A [`Fault`] of the program.
    #[inline]
    pub fn run(
        &mut self,
        frame: &mut [u8],
        data: usize,
        len: usize,
        ifindex: u32,
        queue: u32,
    ) -> Result<RunResult, RunError> {
        match self.run_quick(frame, data, len, ifindex, queue) {
            Quick::Quiet(action) => Ok(RunResult {
                action: u64::from(action),
                meta: data,
                data,
                end: data + len,
                redirect: None,
            }),
            Quick::Full(r) => r,
        }
    }

    /// A runner over frames with the set-up done once, for a batch, where
    /// the program's code is contained ([`pfil_ebpf::Program::xdp_runner`]:
    /// each run ends quiet, its action alone); `None` otherwise.
    pub fn runner(&mut self) -> Option<pfil_ebpf::XdpRunner<'_, '_>> {
        // SAFETY: as in `run_quick`: this Claim holds the slot, and the
        // runner borrows the claim mutably for as long as it lives.
        let env = unsafe { &mut *self.slot.env.get() };
        self.prog.prog.xdp_runner(env)
    }

    /// [`Claim::run`] for the hook's hot path: a run that neither
    /// faulted, moved the packet nor asked for a redirect target gives
    /// its action alone.
    #[inline(always)]
    pub fn run_quick(
        &mut self,
        frame: &mut [u8],
        data: usize,
        len: usize,
        ifindex: u32,
        queue: u32,
    ) -> Quick {
        // SAFETY: this Claim won the slot's busy flag: no other thread
        // touches this Env or its RunState until it is dropped, and
        // `&mut self` keeps two runs of this claim apart.
        let env = unsafe { &mut *self.slot.env.get() };
        match self
            .prog
            .prog
            .run_xdp_quick(env, frame, data, len, ifindex, queue)
        {
            // The action is r0's low 32 bits: the kernel's `u32 act =
            // bpf_prog_run_xdp(...)` (its verifier does not range-check
            // an XDP program's return).
            XdpEnd::Quiet(action) => Quick::Quiet(action as u32),
            XdpEnd::Full(r) => Quick::Full(self.full(r, frame, data, (ifindex, queue))),
        }
    }

    /// The end of a run that ended `Full`: the rest of its tail call
    /// chain, and what the helpers left for the loader (out of line: the
    /// quiet path's caller keeps its registers).
    #[inline(never)]
    fn full(
        &mut self,
        r: Result<pfil_ebpf::RunOutcome, Fault>,
        frame: &mut [u8],
        data: usize,
        (ifindex, queue): (u32, u32),
    ) -> Result<RunResult, RunError> {
        // SAFETY: as in `run_quick`: this Claim holds the slot.
        let env = unsafe { &mut *self.slot.env.get() };
        let r = match r {
            Ok(o) if o.tail_call.is_some() => {
                self.prog.run_tails(env, frame, data, o, ifindex, queue)
            }
            r => r,
        };
        // SAFETY: as above; the runs are over.
        let st = unsafe { &mut *self.slot._state.get() };
        // A run that counted a tail call ended Full: 0 for the next.
        st.tail_calls = 0;
        // A run that faulted holding ring buffer records: discarded.
        if st.reserved != 0 {
            crate::helpers::abandon_records(st);
        }
        // The redirect helpers make their run end Full: the target is
        // taken here, so a later run never sees it.
        full(r, st.redirect.take())
    }
}

fn full(
    r: Result<pfil_ebpf::RunOutcome, Fault>,
    redirect: Option<Redirect>,
) -> Result<RunResult, RunError> {
    let o = r?;
    Ok(RunResult {
        action: o.action & 0xffff_ffff,
        meta: o.data_meta,
        data: o.data,
        end: o.data_end,
        redirect,
    })
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.slot.busy.store(false, Ordering::Release);
    }
}

fn workers_of(d: &crate::MapDef, workers: usize) -> usize {
    if d.kind.per_cpu() {
        workers.max(1)
    } else {
        1
    }
}

impl std::fmt::Debug for XdpProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpProgram")
            .field("name", &self.name)
            .field("section", &self.section)
            .field("maps", &self.maps)
            .finish_non_exhaustive()
    }
}

/// The flags the kernel sets on a map whatever its definition says: a
/// devmap's, devmap_hash's and cpumap's values are read-only to programs
/// (`BPF_F_RDONLY_PROG`: a lookup returns the redirect target itself).
/// (`.rodata` has the flag in its definition, as libbpf gives it.)
fn forced_flags(d: &crate::MapDef) -> u32 {
    let redirect = matches!(
        d.kind,
        MapType::Devmap | MapType::DevmapHash | MapType::Cpumap
    );
    if redirect {
        pfil_ebpf::BPF_F_RDONLY_PROG
    } else {
        0
    }
}
