//! Runs of one program over many packets with the set-up done once: for
//! a caller's batch loop (pfil's `bpf` and `xdp` hooks). Only code that
//! needs no more than the packet gets one, so a run is the call alone.

use crate::env::Env;
use crate::Program;

/// What a runner holds: the code, the environment it runs in (borrowed
/// for the batch) and that environment's stack top.
struct Bound<'p, 'e> {
    #[cfg(target_arch = "x86_64")]
    code: &'p crate::jit::JitCode,
    #[cfg(not(target_arch = "x86_64"))]
    _p: core::marker::PhantomData<&'p ()>,
    env: &'e mut Env,
    top: u64,
}

/// Runs of sealed code over packets ([`Program::packet_runner`]): what
/// [`Program::run_packet`] does, its checks made once.
pub struct PacketRunner<'p, 'e>(Bound<'p, 'e>);

/// Runs of contained XDP code over frames ([`Program::xdp_runner`]):
/// what [`Program::run_xdp_quick`] does on its shortest path, its checks
/// made once. Every run ends quiet (contained code cannot fault, move
/// the packet or ask for a redirect target).
pub struct XdpRunner<'p, 'e>(Bound<'p, 'e>);

impl Program {
    /// A runner of this program over read-only packets in `env`, for JIT
    /// code sealed from its `Env` (it reads only its arguments and its
    /// stack, cannot fault, stores only to its stack); `None` for any
    /// other program (use [`Program::run_packet`]).
    pub fn packet_runner<'p, 'e>(&'p self, env: &'e mut Env) -> Option<PacketRunner<'p, 'e>> {
        #[cfg(target_arch = "x86_64")]
        if self.sealed {
            let top = env.stack_top();
            return self
                .jit
                .as_ref()
                .map(|code| PacketRunner(Bound { code, env, top }));
        }
        let _ = env;
        None
    }

    /// A runner of this XDP program over frames in `env`, for contained
    /// JIT code (nothing called out, nothing checked inline, no context
    /// field but `data`, `data_end` and `data_meta`) when `env` has the
    /// array bases its inlined lookups read; `None` otherwise (use
    /// [`Program::run_xdp_quick`]).
    pub fn xdp_runner<'p, 'e>(&'p self, env: &'e mut Env) -> Option<XdpRunner<'p, 'e>> {
        #[cfg(target_arch = "x86_64")]
        if self.contained && env.array_bases() >= self.need_bases {
            let top = env.stack_top();
            return self
                .jit
                .as_ref()
                .filter(|c| c.plain)
                .map(|code| XdpRunner(Bound { code, env, top }));
        }
        let _ = env;
        None
    }
}

impl PacketRunner<'_, '_> {
    /// The environment, for runs of other programs between this one's.
    pub fn env(&mut self) -> &mut Env {
        self.0.env
    }

    /// Runs over `pkt` with r3 = `arg`, as [`Program::run_packet`].
    #[inline(always)]
    pub fn run(&mut self, pkt: &[u8], arg: u64) -> u64 {
        let base = pkt.as_ptr() as u64;
        let b = &mut self.0;
        #[cfg(target_arch = "x86_64")]
        return b
            .code
            .call_at(b.env, b.top, [base, base + pkt.len() as u64, arg]);
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no runner without the JIT ({base}, {arg}, {})", b.top)
    }
}

impl XdpRunner<'_, '_> {
    /// Runs over `frame[data..data + len]` (the frame's headroom and
    /// tailroom around it), as [`Program::run_xdp_quick`]: the action
    /// (r0's low 32 bits). `None` where the packet does not lie in the
    /// frame (nothing is run).
    #[inline(always)]
    pub fn run(&mut self, frame: &mut [u8], data: usize, len: usize) -> Option<u32> {
        let end = data.checked_add(len).filter(|&e| e <= frame.len())?;
        let base = frame.as_mut_ptr() as u64;
        let b = &mut self.0;
        b.env.lean_packet(base + data as u64, base + end as u64);
        #[cfg(target_arch = "x86_64")]
        return Some(b.code.call_at(b.env, b.top, [b.top, 0, 0]) as u32);
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no runner without the JIT ({})", b.top)
    }
}
