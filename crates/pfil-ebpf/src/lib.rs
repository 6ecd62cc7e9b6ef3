//! An eBPF engine for userspace XDP hooks.
//!
//! pfil-rs runs XDP programs (clang-compiled eBPF objects) as hooks. This
//! crate is the engine under that: it decodes instructions ([`insn`]),
//! verifies a program when it is loaded ([`Program::load`]) and runs it
//! in a sandbox ([`Program::run_xdp`]). The ELF loader, the maps and the
//! helpers' implementations live in the loader (`pfil-xdp`); the engine
//! sees a map as a [`MapRef`] and a helper as a [`HelperFn`].
//!
//! # The sandbox
//!
//! Register values that are pointers are host addresses. Every load and
//! store is checked to lie entirely inside one region of the run: the
//! stack (512 bytes per frame), the context (`struct xdp_md`, read-only),
//! the packet (`data_meta..data_end`, writable) and the regions the loader
//! declared in [`Env::new`] (map values, global data). Anything else stops
//! the run with a [`Fault`]; so do running out of the instruction budget,
//! calls nested too deep, and faults raised by helpers. No input, whatever
//! its bytes, makes the engine panic.
//!
//! ```
//! use pfil_ebpf::{asm_exit, Env, Helpers, Insn, LoadOptions, Program};
//! use pfil_ebpf::insn::*;
//!
//! // r0 = XDP_PASS (2) if the packet is at least 14 bytes long, else XDP_DROP (1).
//! let prog = vec![
//!     Insn::new(BPF_LDX | BPF_MEM | BPF_W, 2, 1, 0, 0), // r2 = ctx->data
//!     Insn::new(BPF_LDX | BPF_MEM | BPF_W, 3, 1, 4, 0), // r3 = ctx->data_end
//!     Insn::new(BPF_MOV | BPF_K | BPF_ALU64, 0, 0, 0, 1),
//!     Insn::new(BPF_ADD | BPF_K | BPF_ALU64, 2, 0, 0, 14),
//!     Insn::new(BPF_JGT | BPF_X | BPF_JMP, 2, 3, 1, 0),
//!     Insn::new(BPF_MOV | BPF_K | BPF_ALU64, 0, 0, 0, 2),
//!     asm_exit(),
//! ];
//! let prog = Program::load(prog, &[], &Helpers::new(), &LoadOptions::default())?;
//! // SAFETY: no extra regions.
//! let mut env = unsafe { Env::new(Vec::new(), core::ptr::null_mut()) };
//! let mut frame = [0u8; 64];
//! assert_eq!(prog.run_xdp(&mut env, &mut frame, 0, 60, 1, 0)?.action, 2);
//! assert_eq!(prog.run_xdp(&mut env, &mut frame, 0, 10, 1, 0)?.action, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod asm;
pub mod cbpf;
pub mod env;
pub mod insn;
mod interp;
#[cfg(target_arch = "x86_64")]
mod jit;
#[cfg(target_arch = "x86_64")]
mod jit_fuse;
#[cfg(target_arch = "x86_64")]
mod jit_live;
#[cfg(target_arch = "x86_64")]
mod jit_plan;
mod maps;
mod runner;
pub mod verify;
#[cfg(target_arch = "x86_64")]
mod x86;
mod xdp;

pub use env::{Env, HelperFn, Helpers, Region, Signature};
pub use insn::Insn;
pub use maps::{
    ArrayLayout, MapRef, BPF_F_RDONLY_PROG, BPF_F_WRONLY_PROG, MAP_TYPE_PERF_EVENT_ARRAY,
    MAP_TYPE_PROG_ARRAY, MAP_TYPE_RINGBUF,
};
pub use runner::{PacketRunner, XdpRunner};
pub use xdp::{RunOutcome, XdpEnd};

use maps::resolve_maps;

use insn::*;

/// A malformed program image.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The byte length is not a non-empty multiple of 8.
    #[error("program of {0} bytes: eBPF instructions are 8-byte slots")]
    Length(usize),
}

/// Why a program was refused at load.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("instruction {pc}: {reason}")]
pub struct VerifyError {
    /// The instruction the refusal is about.
    pub pc: usize,
    /// What is wrong, in words a user can act on.
    pub reason: String,
}

impl VerifyError {
    pub(crate) fn new(pc: usize, reason: impl Into<String>) -> Self {
        VerifyError {
            pc,
            reason: reason.into(),
        }
    }
}

/// Why a run stopped without a result.
#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// A load or store outside every region of the run (or a store into a
    /// read-only one).
    #[error("instruction {pc}: {len}-byte {} at {addr:#x} outside the program's memory", if *write { "store" } else { "load" })]
    OutOfBounds {
        /// The instruction.
        pc: usize,
        /// The first byte's address.
        addr: u64,
        /// The access size.
        len: u32,
        /// Whether it was a store.
        write: bool,
    },
    /// An access to the context the kernel would not allow (a store, or
    /// a load of part of a pointer field).
    #[error("instruction {pc}: {len}-byte access at offset {off} of the context")]
    Context {
        /// The instruction.
        pc: usize,
        /// Offset in `struct xdp_md`.
        off: u32,
        /// The access size.
        len: u8,
    },
    /// An atomic operation on an address not aligned to its size.
    #[error("instruction {pc}: misaligned atomic access at {addr:#x}")]
    Misaligned {
        /// The instruction.
        pc: usize,
        /// The address.
        addr: u64,
    },
    /// The instruction budget ([`LoadOptions::max_insns_per_run`]) ran out.
    #[error("instruction {pc}: instruction budget exhausted (a loop that does not end?)")]
    Budget {
        /// Where the run was.
        pc: usize,
    },
    /// bpf-to-bpf calls nested deeper than 8 frames.
    #[error(
        "instruction {pc}: calls nested deeper than {} frames",
        env::MAX_FRAMES
    )]
    CallDepth {
        /// The call.
        pc: usize,
    },
    /// Control reached a pc outside the program.
    #[error("instruction {pc}: jump or fall-through out of the program")]
    PcOutOfRange {
        /// The jumping instruction.
        pc: usize,
    },
    /// An instruction the engine cannot execute.
    #[error("instruction {pc}: invalid instruction")]
    InvalidInsn {
        /// The instruction.
        pc: usize,
    },
    /// A call to a helper the program was not given.
    #[error("instruction {pc}: call to unknown helper {id}")]
    UnknownHelper {
        /// The call.
        pc: usize,
        /// The helper id.
        id: u32,
    },
    /// [`Program::run_packet`] on a program that may write to memory.
    #[error("the program may write outside its stack: it cannot run over a read-only packet")]
    NotReadOnly,
    /// A helper stopped the program ([`Env::fault`]).
    #[error("instruction {pc}: helper failed: {reason}")]
    Helper {
        /// The call.
        pc: usize,
        /// What the helper found wrong.
        reason: &'static str,
    },
    /// Not a fault: the program ended in a tail call (`bpf_tail_call`,
    /// raised by the loader's helper with [`Env::fault`]) to the loader's
    /// program `target`, which runs next on the packet as it is. An XDP
    /// run returns it as [`RunOutcome::tail_call`]; other runs as this.
    #[error("instruction {pc}: tail call to program {target}")]
    TailCall {
        /// The call.
        pc: usize,
        /// The program to run next (the loader's number).
        target: u32,
    },
}

impl Fault {
    /// The same fault at instruction `pc` (helpers raise faults without
    /// knowing where the call was).
    pub fn at(self, pc: usize) -> Fault {
        match self {
            Fault::OutOfBounds {
                addr, len, write, ..
            } => Fault::OutOfBounds {
                pc,
                addr,
                len,
                write,
            },
            Fault::Context { off, len, .. } => Fault::Context { pc, off, len },
            Fault::Misaligned { addr, .. } => Fault::Misaligned { pc, addr },
            Fault::Budget { .. } => Fault::Budget { pc },
            Fault::CallDepth { .. } => Fault::CallDepth { pc },
            Fault::PcOutOfRange { .. } => Fault::PcOutOfRange { pc },
            Fault::InvalidInsn { .. } => Fault::InvalidInsn { pc },
            Fault::UnknownHelper { id, .. } => Fault::UnknownHelper { pc, id },
            Fault::Helper { reason, .. } => Fault::Helper { pc, reason },
            Fault::TailCall { target, .. } => Fault::TailCall { pc, target },
            Fault::NotReadOnly => Fault::NotReadOnly,
        }
    }
}

/// Options of [`Program::load`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadOptions {
    /// Instructions a run may execute before [`Fault::Budget`]
    /// (programs proven loop-free are not counted; loops are charged
    /// their body's length each time their head runs).
    pub max_insns_per_run: u64,
    /// Also refuse what the kernel refuses although it is well defined
    /// here (division by a zero immediate, shifts by an immediate out of
    /// range). On by default; the conformance suite turns it off.
    pub kernel_rules: bool,
    /// How many argument registers hold a value at entry: 1 for XDP (r1,
    /// the context), 2 for [`Program::run_mem`] (r1, r2).
    pub entry_args: u8,
    /// r1 at entry is the XDP context (`struct xdp_md`): loads through it
    /// (and its copies) are field reads with the kernel's conversion,
    /// checked at load and compiled inline; stores into it are refused.
    /// On by default; off for programs whose r1 is plain memory
    /// ([`Program::run_mem`] as the conformance suite uses it).
    pub xdp_ctx: bool,
    /// r1 and r2 at entry are the packet's start and end, as
    /// [`Program::run_packet`] passes them: comparisons of `r1 + n` with
    /// r2 prove packet bytes, as for XDP's `data` and `data_end`. Off by
    /// default.
    pub packet_args: bool,
    /// Compile to machine code (x86-64 only; the default there). Otherwise,
    /// and elsewhere, the interpreter runs the program.
    pub jit: bool,
    /// Functions (by first instruction) that are callbacks, as a loader
    /// lowering `bpf_loop` makes them: with `kernel_rules`, each exit must
    /// return 0 or 1, as the kernel's verifier has a callback's r0.
    pub callbacks: Vec<usize>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            max_insns_per_run: 1_000_000,
            kernel_rules: true,
            entry_args: 1,
            xdp_ctx: true,
            packet_args: false,
            jit: cfg!(target_arch = "x86_64"),
            callbacks: Vec::new(),
        }
    }
}

/// A loaded (verified) program.
#[derive(Debug)]
pub struct Program {
    pub(crate) insns: Vec<Insn>,
    pub(crate) helpers: Helpers,
    /// Whether runs count instructions (the program may loop).
    pub(crate) counted: bool,
    /// Budget charged at each loop head (see `verify::Analysis`).
    pub(crate) loop_cost: Vec<u32>,
    pub(crate) max_insns: u64,
    /// No store outside the stack, no helper call.
    read_only: bool,
    /// How each access is made, by pc (`verify::Analysis::access`).
    pub(crate) access: Vec<verify::Access>,
    /// The machine code, when JIT-compiled.
    #[cfg(target_arch = "x86_64")]
    jit: Option<jit::JitCode>,
    /// Array bases ([`Env::set_array_bases`]) the machine code reads: one
    /// more than the highest map index of an inlined lookup, or 0.
    need_bases: usize,
    /// Whether a run reads `Env::last` (JIT code with inline checks).
    reads_last: bool,
    /// Whether the program may read the context's plain fields
    /// (`ingress_ifindex` and after): a converted load of one, or a
    /// load the verifier could not place (it may reach the context).
    reads_ctx: bool,
    /// JIT code sealed from its `Env`: it reads only its arguments and
    /// its stack and cannot fault (every access proven or on the stack,
    /// no helper, no loop, no local call, no context field, no inlined
    /// lookup) and stores nothing outside its stack. [`Program::run_packet`]
    /// calls it with nothing set up and nothing read back.
    sealed: bool,
    /// JIT code that calls nothing out of itself (no helper left after
    /// inlining, no local call, no slow path, no loop) and checks nothing
    /// inline: it reads of its `Env` only `data`, `data_end`, `data_meta`
    /// and the array bases, and cannot fault. An XDP run of it sets those
    /// three and reads nothing back ([`Program::run_xdp_quick`]).
    contained: bool,
}

#[cfg(target_arch = "x86_64")]
impl core::fmt::Debug for jit::JitCode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "JitCode({} bytes)", self.len())
    }
}

/// The final `exit` instruction, a convenience for hand-written programs.
pub const fn asm_exit() -> Insn {
    Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
}

impl Insn {
    /// The same instruction with source register `src`.
    pub const fn with_src(mut self, src: u8) -> Insn {
        self.src = src;
        self
    }
}

impl Program {
    /// Verifies `insns` and prepares them to run: map references are
    /// resolved against `maps`, helper calls against `helpers`.
    ///
    /// # Errors
    ///
    /// A [`VerifyError`] naming the first instruction refused and why.
    pub fn load(
        mut insns: Vec<Insn>,
        maps: &[MapRef],
        helpers: &Helpers,
        opts: &LoadOptions,
    ) -> Result<Program, VerifyError> {
        let (map_refs, consts) = resolve_maps(&mut insns, maps)?;
        acquire_release_as_plain(&mut insns);
        let a = verify::verify(&insns, helpers, opts, (&map_refs, &consts), maps)?;
        let read_only = insns.iter().all(|i| match i.class() {
            BPF_ST | BPF_STX => i.dst == 10 && i.code & 0xe0 == BPF_MEM,
            BPF_JMP => !(i.op() == BPF_CALL && i.src == 0),
            _ => true,
        });
        Program {
            insns,
            helpers: helpers.clone(),
            counted: a.has_loops,
            loop_cost: if a.has_loops {
                a.back_edge_cost.clone()
            } else {
                Vec::new()
            },
            max_insns: opts.max_insns_per_run,
            read_only,
            access: a.access.clone(),
            #[cfg(target_arch = "x86_64")]
            jit: None,
            need_bases: 0,
            reads_last: false,
            reads_ctx: false,
            sealed: false,
            contained: false,
        }
        .compiled(opts, &a, maps)
        .map(|mut p| {
            p.reads_ctx = reads_ctx_fields(&p.insns, &p.access);
            let plain = !p.counted && !p.reads_last && !p.reads_ctx;
            p.set_plain(plain);
            p
        })
    }

    #[cfg(target_arch = "x86_64")]
    fn compiled(
        mut self,
        opts: &LoadOptions,
        a: &verify::Analysis,
        maps: &[MapRef],
    ) -> Result<Program, VerifyError> {
        if opts.jit {
            let code = jit::compile(
                &self.insns,
                &self.loop_cost,
                &self.access,
                &self.helpers,
                a,
                maps,
            )
            .map_err(|e| VerifyError::new(0, e))?;
            let (code, inline_checks, contained) = code;
            self.reads_last = inline_checks;
            self.contained = contained && !self.counted;
            self.sealed = self.contained
                && self.read_only
                && a.lookups.is_empty()
                && !a.access.contains(&verify::Access::Ctx);
            self.jit = Some(code);
            self.need_bases = a
                .lookups
                .iter()
                .map(|l| l.1 as usize + 1)
                .max()
                .unwrap_or(0);
        }
        Ok(self)
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn compiled(
        self,
        _: &LoadOptions,
        _: &verify::Analysis,
        _: &[MapRef],
    ) -> Result<Program, VerifyError> {
        Ok(self)
    }

    /// Marks JIT code that needs only the packet (see `JitCode::plain`).
    fn set_plain(&mut self, plain: bool) {
        #[cfg(target_arch = "x86_64")]
        if let Some(code) = &mut self.jit {
            code.plain = plain;
        }
        let _ = plain;
    }

    /// Whether runs take `run_xdp`'s short path (plain JIT code).
    #[cfg(test)]
    pub(crate) fn plain(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        return self.jit.as_ref().is_some_and(|c| c.plain);
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// Whether the program runs as machine code (else the interpreter).
    pub fn is_jitted(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        return self.jit.is_some();
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// Whether a run reads `Env::last` (JIT code with inline checks).
    #[inline]
    fn reads_last(&self) -> bool {
        self.reads_last
    }

    /// Runs with r1-r3 = `args` on the JIT if there is code, else the
    /// interpreter.
    #[inline]
    fn exec(&self, env: &mut Env, args: [u64; 3]) -> Result<u64, Fault> {
        #[cfg(target_arch = "x86_64")]
        if let Some(code) = &self.jit {
            if env.array_bases() < self.need_bases {
                return Err(Fault::Helper {
                    pc: 0,
                    reason: "the run environment gives no base for an inlined array lookup",
                });
            }
            // Code without loops never reads the budget.
            let budget = self.counted.then_some(self.max_insns);
            return code.run(env, args, budget);
        }
        self.interpret(env, args[0], args[1], args[2])
    }

    /// The interpreter, out of line: the arguments in registers, so that
    /// the JIT's path builds no argument array in memory.
    #[inline(never)]
    fn interpret(&self, env: &mut Env, r1: u64, r2: u64, r3: u64) -> Result<u64, Fault> {
        interp::run_with(self, env, [r1, r2, r3])
    }

    /// Runs over a read-only packet: r1 = its start, r2 = its end (one
    /// past the last byte), r3 = `arg` (for a converted classic program, [`cbpf`], the length
    /// on the wire). Only for programs that store nothing outside their
    /// stack and call no helper ([`Program::is_read_only`]).
    ///
    /// # Errors
    ///
    /// The [`Fault`] that stopped the run; [`Fault::NotReadOnly`] for a
    /// program that may write.
    #[inline(always)]
    pub fn run_packet(&self, env: &mut Env, pkt: &[u8], arg: u64) -> Result<u64, Fault> {
        let base = pkt.as_ptr() as u64;
        let end = base + pkt.len() as u64;
        #[cfg(target_arch = "x86_64")]
        if self.sealed {
            if let Some(code) = &self.jit {
                // Nothing to set up, no fault to read back (see `sealed`;
                // a sealed program is read-only).
                return Ok(code.call(env, [base, end, arg]));
            }
        }
        self.run_packet_full(env, base, end, arg)
    }

    /// [`Program::run_packet`] for code that is not sealed.
    #[inline(never)]
    fn run_packet_full(&self, env: &mut Env, base: u64, end: u64, arg: u64) -> Result<u64, Fault> {
        if !self.read_only {
            return Err(Fault::NotReadOnly);
        }
        env.begin_packet((base, end), base, end, self.reads_last());
        // The packet region is nominally writable, but this program has
        // no store that can reach it and no helper that could.
        let r = self.exec(env, [base, end, arg]);
        env.end_packet();
        r
    }

    /// The JIT's machine code (x86-64), for inspection (`objdump -D -b
    /// binary -m i386:x86-64`); `None` when the interpreter runs it.
    pub fn machine_code(&self) -> Option<&[u8]> {
        #[cfg(target_arch = "x86_64")]
        return self.jit.as_ref().map(|j| j.code());
        #[cfg(not(target_arch = "x86_64"))]
        None
    }

    /// Whether the program stores only into its stack and calls no helper
    /// (so that [`Program::run_packet`] may hand it a shared packet).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Runs on the interpreter whatever `LoadOptions::jit` said: the
    /// reference the JIT is compared with.
    ///
    /// # Errors
    ///
    /// The [`Fault`] that stopped the run.
    pub fn run_mem_interpreted(&self, env: &mut Env, mem: &mut [u8]) -> Result<u64, Fault> {
        let base = mem.as_mut_ptr() as u64;
        let end = base + mem.len() as u64;
        env.begin_packet((base, end), base, end, self.reads_last());
        let r = interp::run_with(self, env, [base, mem.len() as u64, 0]);
        env.end_packet();
        r
    }

    /// The program's instructions (map references resolved).
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// Runs the program with r1 = the address of `mem` and r2 = its length
    /// (`mem` is the packet region; the context is empty), as the
    /// conformance suite and ubpf do.
    ///
    /// # Errors
    ///
    /// The [`Fault`] that stopped the run.
    pub fn run_mem(&self, env: &mut Env, mem: &mut [u8]) -> Result<u64, Fault> {
        let base = mem.as_mut_ptr() as u64;
        let end = base + mem.len() as u64;
        env.begin_packet((base, end), base, end, self.reads_last());
        let r = self.exec(env, [base, mem.len() as u64, 0]);
        env.end_packet();
        r
    }
}

/// Whether a program may read the context's plain fields: a converted
/// context load at offset 12 or more, or a load whose region the
/// verifier did not decide (checked at run time, it may reach the
/// context). Loads from the stack pointer (r10) never do.
fn reads_ctx_fields(insns: &[Insn], access: &[verify::Access]) -> bool {
    use verify::Access;
    insns.iter().enumerate().any(|(pc, i)| {
        let base = match i.class() {
            BPF_LDX => i.src,
            BPF_STX if i.code & 0xe0 == BPF_ATOMIC => i.dst,
            _ => return false,
        };
        base != 10
            && match access.get(pc) {
                Some(Access::Packet | Access::Value) => false,
                Some(Access::Ctx) => i.off >= 12,
                _ => true,
            }
    })
}

/// Load-acquire (`BPF_STX | BPF_ATOMIC`, imm `BPF_LOAD_ACQ`: `dst =
/// *(src + off)`, zero-extended) and store-release (imm
/// `BPF_STORE_REL`: `*(dst + off) = src`), Linux 6.15, of any size,
/// as the plain load and store they are on x86-64 (whose loads acquire
/// and stores release): verified, interpreted and compiled as those.
///
/// And `may_goto` (`BPF_JMP | BPF_JCOND`, Linux 6.9: taken once the
/// kernel's per-run allowance of 8 million is spent) as a jump on r10
/// being null: both edges stay for the verifiers, the jump is never
/// taken; a run that would spend the allowance meets pfil's own
/// instruction budget first (a contained fault).
fn acquire_release_as_plain(insns: &mut [Insn]) {
    const LOAD_ACQ: i32 = 0x100;
    const STORE_REL: i32 = 0x110;
    const MAY_GOTO: u8 = BPF_JMP | 0xe0;
    for i in insns.iter_mut() {
        if i.code == MAY_GOTO && i.src == 0 && i.dst == 0 && i.imm == 0 {
            *i = Insn::new(BPF_JMP | BPF_JEQ | BPF_K, 10, 0, i.off, 0);
            continue;
        }
        if i.class() != BPF_STX || i.code & 0xe0 != BPF_ATOMIC {
            continue;
        }
        let size = i.code & 0x18;
        match i.imm {
            LOAD_ACQ => *i = Insn::new(BPF_LDX | BPF_MEM | size, i.dst, i.src, i.off, 0),
            STORE_REL => *i = Insn::new(BPF_STX | BPF_MEM | size, i.dst, i.src, i.off, 0),
            _ => {}
        }
    }
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod run_tests;
