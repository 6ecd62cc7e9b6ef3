//! The per-worker run environment: stack, context, packet bounds, the
//! regions a program may touch, and the helper ABI.
//!
//! Every load and store a program makes (and every pointer a helper is
//! handed) is checked here to lie inside one region of the run.

use core::ffi::c_void;
use core::ptr::NonNull;

use crate::Fault;

/// Bytes of stack per frame (the kernel's `MAX_BPF_STACK`).
pub const STACK_FRAME: usize = 512;
/// Frames a run may have: the program and 7 nested bpf-to-bpf calls (the
/// kernel's `MAX_CALL_FRAMES`).
pub const MAX_FRAMES: usize = 8;
/// Total stack bytes of a run.
pub const STACK_SIZE: usize = STACK_FRAME * MAX_FRAMES;
/// Size of the XDP context, `struct xdp_md`.
pub const CTX_SIZE: usize = 24;

/// A span of host memory a program may access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Host address of the first byte.
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
    /// Whether stores are allowed.
    pub writable: bool,
}

impl Region {
    /// Whether `[addr, addr + len)` lies inside the region.
    #[inline]
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.start && len <= self.len && addr - self.start <= self.len - len
    }
}

/// A helper function: the kernel's calling convention (arguments in r1-r5,
/// result in r0) plus the run's [`Env`] as sixth argument, so that the
/// SysV x86-64 ABI passes all six in registers.
///
/// # Safety
///
/// The engine calls it with `env` pointing to the live [`Env`] of the run
/// and with no other reference to that `Env` alive; the helper must treat
/// r1-r5 as untrusted numbers and reach memory only through
/// [`Env::check`] and [`Env::check_mut`].
pub type HelperFn =
    unsafe extern "C" fn(r1: u64, r2: u64, r3: u64, r4: u64, r5: u64, env: *mut Env) -> u64;

/// What the verifier needs to know of a helper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signature {
    /// How many of r1-r5 the helper reads (they must be initialised).
    pub args: u8,
}

/// The helpers a program may call, by kernel helper id.
///
/// Helper 1 (`bpf_map_lookup_elem`) has a contract the verifier relies
/// on: called with r1 = the handle of map `i` (from `LDDW`), it returns
/// 0 or the address of that map's value: `value_size` bytes, 8-aligned,
/// readable and writable until the run ends. Accesses inside the value
/// after a null check are then compiled without a run-time check. It
/// does not move the packet ([`Env::set_packet`]): packet bytes proven
/// before the call stay proven after it.
#[derive(Clone, Default)]
pub struct Helpers {
    table: Vec<Option<(HelperFn, Signature)>>,
}

impl Helpers {
    /// No helpers.
    pub fn new() -> Self {
        Helpers::default()
    }

    /// Adds (or replaces) helper `id`.
    pub fn insert(&mut self, id: u32, f: HelperFn, sig: Signature) {
        let i = id as usize;
        if self.table.len() <= i {
            self.table.resize(i + 1, None);
        }
        self.table[i] = Some((f, sig));
    }

    /// Helper `id`, if present.
    #[inline]
    pub fn get(&self, id: u32) -> Option<(HelperFn, Signature)> {
        self.table.get(id as usize).copied().flatten()
    }
}

impl core::fmt::Debug for Helpers {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let ids: Vec<usize> = (0..self.table.len())
            .filter(|&i| self.table[i].is_some())
            .collect();
        f.debug_struct("Helpers").field("ids", &ids).finish()
    }
}

/// Stack and context live in one heap block the `Env` owns through a raw
/// pointer, so that references to the `Env` (a helper's `&mut Env`) never
/// cover the bytes the program accesses through raw pointers.
#[repr(C, align(16))]
pub(crate) struct Scratch {
    stack: [u8; STACK_SIZE],
    ctx: [u8; CTX_SIZE],
}

/// The environment of one worker's runs.
///
/// It owns the stack (`STACK_FRAME` bytes per frame) and the context, and
/// holds the packet bounds of the current run and the extra regions the
/// loader declared (map value arenas, global data).
pub struct Env {
    pub(crate) scratch: NonNull<Scratch>,
    regions: Vec<Region>,
    user: *mut c_void,
    /// The frame of the current run (headroom and tailroom included).
    pub(crate) frame: (u64, u64),
    /// `data_meta`, `data`, `data_end` of the current run.
    pub(crate) meta: u64,
    pub(crate) data: u64,
    pub(crate) data_end: u64,
    /// `data` when the run began (where the packet started).
    start: u64,
    /// `data_end - size` for sizes 1, 2, 4, 8: the last start address of
    /// an access of that size inside the packet (the JIT's inline check).
    pub(crate) last: [u64; 4],
    pending: Option<Fault>,
    /// `[FAULT]` is nonzero when `pending` holds a fault (the JIT tests
    /// this byte after helper calls); `[READ_BACK]` is nonzero when
    /// [`Env::set_packet`] moved the packet, or a helper called
    /// [`Env::read_back`], since it was last cleared.
    /// The end of a run tests both with one load.
    pub(crate) flags: [u8; 2],
    /// The JIT's instruction budget for the current run.
    pub(crate) budget: u64,
    /// The JIT's native stack pointer at entry (to unwind on a fault).
    pub(crate) jit_rsp: u64,
    /// Per map index, the address of value 0 of an inlined array map
    /// ([`Env::set_array_bases`]); `bases_ptr` is its start for the JIT.
    bases: Vec<u64>,
    pub(crate) bases_ptr: *const u64,
    /// The first [`INLINE_BASES`] of `bases`, in the `Env` itself: one
    /// load fewer for the JIT.
    pub(crate) first_bases: [u64; INLINE_BASES],
}

/// `Env::flags` index: a fault is pending.
pub(crate) const FAULT: usize = 0;
/// `Env::flags` index: the run must be read back (the packet's bounds
/// moved, or a helper asked).
pub(crate) const READ_BACK: usize = 1;

/// How many array bases the `Env` keeps in place.
pub(crate) const INLINE_BASES: usize = 8;

// SAFETY: the `Env` exclusively owns its scratch block; the raw `user`
// pointer and the regions are the loader's, who promised in `Env::new`
// that they stay valid while the `Env` lives, wherever it is used.
unsafe impl Send for Env {}

impl Env {
    /// An environment whose programs may also touch `regions`; `user` is
    /// handed back to helpers by [`Env::user`].
    ///
    /// # Safety
    ///
    /// Every region must be memory that stays valid (and, when writable,
    /// writable) for as long as this `Env` is used, and that Rust code does
    /// not hold references into while a program runs.
    pub unsafe fn new(regions: Vec<Region>, user: *mut c_void) -> Env {
        let scratch = Box::new(Scratch {
            stack: [0; STACK_SIZE],
            ctx: [0; CTX_SIZE],
        });
        Env {
            scratch: NonNull::from(Box::leak(scratch)),
            regions,
            user,
            frame: (0, 0),
            meta: 0,
            data: 0,
            data_end: 0,
            start: 0,
            last: [0; 4],
            pending: None,
            flags: [0; 2],
            budget: 0,
            jit_rsp: 0,
            bases: Vec::new(),
            bases_ptr: core::ptr::null(),
            first_bases: [0; INLINE_BASES],
        }
    }

    /// Declares where the values of array maps are for this environment's
    /// runs: `bases[i]` for map `i` (the index into the `maps` given to
    /// [`Program::load`](crate::Program::load)), the running worker's own
    /// copy for a per-CPU array. Lookups in maps whose
    /// [`MapRef::array`](crate::MapRef::array) is set are then compiled
    /// inline by the JIT; a run needing a base this `Env` lacks faults.
    ///
    /// # Safety
    ///
    /// For every program run with this `Env` and every map `i` of it with
    /// an [`ArrayLayout`](crate::ArrayLayout) `l`, the bytes
    /// `bases[i] + k * l.stride .. + value_size` for `k < max_entries`
    /// must be valid, writable, 8-aligned memory for as long as this `Env`
    /// is used, which Rust code holds no references into while a program
    /// runs (as the regions of [`Env::new`], which must cover them too).
    pub unsafe fn set_array_bases(&mut self, bases: Vec<u64>) {
        self.first_bases = [0; INLINE_BASES];
        for (b, &v) in self.first_bases.iter_mut().zip(&bases) {
            *b = v;
        }
        self.bases = bases;
        self.bases_ptr = self.bases.as_ptr();
    }

    /// How many array bases [`Env::set_array_bases`] gave.
    #[inline]
    pub(crate) fn array_bases(&self) -> usize {
        self.bases.len()
    }

    /// An environment with no regions besides the stack, the context and
    /// the packet (enough for programs without maps, e.g. converted
    /// classic BPF).
    pub fn without_regions() -> Env {
        // SAFETY: no regions to vouch for; `user` is null and never read
        // by the engine.
        unsafe { Env::new(Vec::new(), core::ptr::null_mut()) }
    }

    /// Zeroes the stack. A run may read stack bytes it did not write (the
    /// verifier does not track stack contents), which are then what an
    /// earlier run left: clear between programs that must not see each
    /// other's data.
    pub fn clear_stack(&mut self) {
        // SAFETY: the scratch block is ours and no run is in progress
        // (`&mut self`).
        unsafe { (*self.scratch.as_ptr()).stack.fill(0) };
    }

    /// The loader's pointer given to [`Env::new`].
    pub fn user<T>(&self) -> *mut T {
        self.user.cast()
    }

    /// Host address one past the top of the stack (r10 of the main frame).
    #[inline]
    pub fn stack_top(&self) -> u64 {
        self.stack_base() + STACK_SIZE as u64
    }

    #[inline]
    pub(crate) fn stack_base(&self) -> u64 {
        self.scratch.as_ptr() as u64
    }

    /// Host address of the context (`struct xdp_md`).
    #[inline]
    pub fn ctx_addr(&self) -> u64 {
        self.stack_base() + STACK_SIZE as u64
    }

    #[inline]
    pub(crate) fn set_ctx_field(&mut self, off: usize, v: u32) {
        let p = (self.ctx_addr() as usize + off) as *mut u32;
        // SAFETY: `off` is one of the context's u32 fields (below
        // CTX_SIZE, 4-aligned in the 16-aligned scratch block we own).
        unsafe { p.write(v) }
    }

    /// The current packet: `(data_meta, data, data_end)` host addresses
    /// (all 0 outside a run).
    pub fn packet(&self) -> (u64, u64, u64) {
        if self.frame.1 == 0 {
            return (0, 0, 0);
        }
        (self.meta, self.data, self.data_end)
    }

    /// Where the packet started when the run began (`data` then; 0
    /// outside a run): the XDP helpers bound growth by it as the kernel's
    /// headroom does.
    pub fn run_start(&self) -> u64 {
        if self.frame.1 == 0 {
            return 0;
        }
        self.start
    }

    /// The frame around the packet (headroom and tailroom included), as
    /// `(start, end)` host addresses (both 0 outside a run).
    pub fn frame(&self) -> (u64, u64) {
        if self.frame.1 == 0 {
            return (0, 0);
        }
        self.frame
    }

    /// Sets the run's packet; `last` only for code that reads it (the
    /// JIT's inline checks): code without any never reads it.
    #[inline]
    pub(crate) fn begin_packet(&mut self, frame: (u64, u64), data: u64, end: u64, last: bool) {
        self.frame = frame;
        self.meta = data;
        self.data = data;
        self.start = data;
        self.data_end = end;
        if last {
            self.last = last_starts(end);
        }
        // `flags[FAULT]` is nonzero exactly when a fault is pending.
        if self.flags[FAULT] != 0 {
            self.pending = None;
            self.flags[FAULT] = 0;
        }
    }

    /// The packet of a run of contained code (`Program::contained`):
    /// only the bounds its context loads read. The frame stays as the
    /// last run ended it (its end at 0), so nothing else of the Env
    /// reaches the packet.
    #[inline]
    pub(crate) fn lean_packet(&mut self, data: u64, end: u64) {
        self.meta = data;
        self.data = data;
        self.data_end = end;
    }

    /// Ends the run's packet: one store. With the frame's end at 0,
    /// [`Env::set_packet`] admits no bounds but an empty packet at 0 and
    /// [`Env::find`] no packet bytes (it bounds the packet by the
    /// frame's end): nothing reaches the frame after the run, whatever
    /// `meta`, `data` and `data_end` still hold (the next run sets them).
    #[inline]
    pub(crate) fn end_packet(&mut self) {
        self.frame.1 = 0;
    }

    /// Moves the packet's bounds (for `bpf_xdp_adjust_head`, `_tail`,
    /// `_meta`): `meta <= data <= end`, all inside the frame.
    ///
    /// # Errors
    ///
    /// [`Fault::Helper`] when the bounds are out of order or leave the frame;
    /// nothing is changed then.
    pub fn set_packet(&mut self, data: u64, meta: u64, end: u64) -> Result<(), Fault> {
        if !(self.frame.0 <= meta && meta <= data && data <= end && end <= self.frame.1) {
            return Err(Fault::Helper {
                pc: 0,
                reason: "packet bounds outside the frame",
            });
        }
        self.meta = meta;
        self.data = data;
        self.data_end = end;
        self.last = last_starts(end);
        self.flags[READ_BACK] = 1;
        Ok(())
    }

    /// Whether no fault is pending and nothing asked for the run to be
    /// read back since `clear_read_back` (one load).
    #[inline]
    pub(crate) fn quiet(&self) -> bool {
        u16::from_ne_bytes(self.flags) == 0
    }

    #[inline]
    pub(crate) fn clear_read_back(&mut self) {
        self.flags[READ_BACK] = 0;
    }

    /// Makes the current run end [`XdpEnd::Full`](crate::XdpEnd::Full):
    /// for helpers that leave something their loader reads after the run
    /// (a redirect target), so that a run that called none of them ends
    /// [`XdpEnd::Quiet`](crate::XdpEnd::Quiet) and its caller reads
    /// nothing back.
    pub fn read_back(&mut self) {
        self.flags[READ_BACK] = 1;
    }

    /// Stops the program after the running helper returns, with `fault`
    /// (its `pc` is filled in by the engine).
    pub fn fault(&mut self, fault: Fault) {
        if self.pending.is_none() {
            self.pending = Some(fault);
            self.flags[FAULT] = 1;
        }
    }

    pub(crate) fn take_fault(&mut self) -> Option<Fault> {
        self.flags[FAULT] = 0;
        self.pending.take()
    }

    /// Which region `[addr, addr + len)` lies in, and whether it may be
    /// written; `None` when it lies in none (the context excluded).
    #[inline]
    pub(crate) fn find(&self, addr: u64, len: u64) -> Option<bool> {
        let stack = Region {
            start: self.stack_base(),
            len: STACK_SIZE as u64,
            writable: true,
        };
        if stack.contains(addr, len) {
            return Some(true);
        }
        // Outside a run the frame's end is 0 (`end_packet`): no bytes.
        let pkt = Region {
            start: self.meta,
            len: self.data_end.min(self.frame.1).saturating_sub(self.meta),
            writable: true,
        };
        if pkt.contains(addr, len) {
            return Some(true);
        }
        self.regions
            .iter()
            .find(|r| r.contains(addr, len))
            .map(|r| r.writable)
    }

    /// Whether `[addr, addr + len)` overlaps the context.
    #[inline]
    pub(crate) fn in_ctx(&self, addr: u64, len: u64) -> bool {
        let c = self.ctx_addr();
        addr < c + CTX_SIZE as u64 && addr.wrapping_add(len) > c
    }

    /// The bytes `[addr, addr + len)` if they lie in one readable region
    /// of the run (a helper's pointer argument).
    ///
    /// # Errors
    ///
    /// [`Fault::OutOfBounds`] otherwise.
    pub fn check(&self, addr: u64, len: u64) -> Result<&[u8], Fault> {
        match self.find(addr, len) {
            // SAFETY: the range lies in a region: our own stack, the packet
            // of the current run (borrowed mutably by `run_xdp`), or one
            // the loader promised valid in `Env::new`.
            Some(_) => Ok(unsafe { core::slice::from_raw_parts(addr as *const u8, len as usize) }),
            None => Err(Fault::OutOfBounds {
                pc: 0,
                addr,
                len: len as u32,
                write: false,
            }),
        }
    }

    /// The bytes `[addr, addr + len)` if they lie in one writable region.
    ///
    /// # Errors
    ///
    /// [`Fault::OutOfBounds`] otherwise.
    pub fn check_mut(&mut self, addr: u64, len: u64) -> Result<&mut [u8], Fault> {
        match self.find(addr, len) {
            Some(true) => {
                // SAFETY: as in `check`, and the region is writable; the
                // `&mut self` borrow keeps a second slice from this `Env` away.
                Ok(unsafe { core::slice::from_raw_parts_mut(addr as *mut u8, len as usize) })
            }
            _ => Err(Fault::OutOfBounds {
                pc: 0,
                addr,
                len: len as u32,
                write: true,
            }),
        }
    }
}

/// `end - size` for sizes 1, 2, 4, 8. For a packet shorter than `size`
/// this is below its start, so the JIT's check (`start <= addr <= last`)
/// admits nothing; `end` is a host address, far above 8.
#[inline]
fn last_starts(end: u64) -> [u64; 4] {
    [
        end.wrapping_sub(1),
        end.wrapping_sub(2),
        end.wrapping_sub(4),
        end.wrapping_sub(8),
    ]
}

impl Drop for Env {
    fn drop(&mut self) {
        // SAFETY: `scratch` came from `Box::leak` in `new` and is freed once.
        drop(unsafe { Box::from_raw(self.scratch.as_ptr()) });
    }
}

impl core::fmt::Debug for Env {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Env")
            .field("regions", &self.regions)
            .finish_non_exhaustive()
    }
}
