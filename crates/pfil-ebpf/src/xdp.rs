//! XDP runs of a [`Program`]: over a frame's packet, with its headroom
//! and tailroom; the short path that reads nothing back; a tail call's
//! target run on the packet where the last program left it.

use crate::env::{self, Env};
use crate::{Fault, Program};

/// The result of an XDP run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunOutcome {
    /// r0 at exit: the XDP action (`XDP_ABORTED` 0, `XDP_DROP` 1,
    /// `XDP_PASS` 2, `XDP_TX` 3, `XDP_REDIRECT` 4).
    pub action: u64,
    /// Offset of `data_meta` in the frame after the run.
    pub data_meta: usize,
    /// Offset of `data` in the frame after the run.
    pub data: usize,
    /// Offset of `data_end` in the frame after the run.
    pub data_end: usize,
    /// The run ended in a tail call to the loader's program of this
    /// number ([`Fault::TailCall`]): its `action` means nothing; the
    /// loader runs that program on the packet as the bounds above leave
    /// it ([`Program::run_xdp_tail`]), as the kernel does.
    pub tail_call: Option<u32>,
}

/// How [`Program::run_xdp_quick`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpEnd {
    /// No fault, and the packet's bounds where the run found them: the
    /// action (r0).
    Quiet(u64),
    /// A fault, bounds a helper moved, or a helper that asked for it
    /// ([`Env::read_back`]): what [`Program::run_xdp`] returns.
    Full(Result<RunOutcome, Fault>),
}

impl Program {
    /// Runs the program as XDP over the packet `frame[data_off..data_off +
    /// data_len]`; the bytes before are headroom, those after tailroom.
    ///
    /// # Errors
    ///
    /// The [`Fault`] that stopped the run; also [`Fault::OutOfBounds`] at
    /// pc 0 when the packet does not fit in `frame`.
    #[inline]
    pub fn run_xdp(
        &self,
        env: &mut Env,
        frame: &mut [u8],
        data_off: usize,
        data_len: usize,
        ingress_ifindex: u32,
        rx_queue: u32,
    ) -> Result<RunOutcome, Fault> {
        match self.run_xdp_quick(env, frame, data_off, data_len, ingress_ifindex, rx_queue) {
            XdpEnd::Quiet(action) => Ok(RunOutcome {
                action,
                data_meta: data_off,
                data: data_off,
                data_end: data_off + data_len,
                tail_call: None,
            }),
            XdpEnd::Full(r) => r,
        }
    }

    /// [`Program::run_xdp`] for a caller's hot path: a run without a
    /// fault that left the packet where it was ends [`XdpEnd::Quiet`]
    /// with the action alone (nothing read back from the `Env`);
    /// anything else as `run_xdp` returns it.
    #[inline(always)]
    pub fn run_xdp_quick(
        &self,
        env: &mut Env,
        frame: &mut [u8],
        data_off: usize,
        data_len: usize,
        ingress_ifindex: u32,
        rx_queue: u32,
    ) -> XdpEnd {
        let base = frame.as_mut_ptr() as u64;
        let fits = data_off
            .checked_add(data_len)
            .is_some_and(|e| e <= frame.len());
        if !fits {
            return XdpEnd::Full(Err(Fault::OutOfBounds {
                pc: 0,
                addr: base + data_off as u64,
                len: data_len as u32,
                write: false,
            }));
        }
        let data = base + data_off as u64;
        let frame_end = base + frame.len() as u64;
        #[cfg(target_arch = "x86_64")]
        if let Some(code) = self.jit.as_ref().filter(|c| c.plain) {
            // The short path: nothing but the packet to set up (the
            // context's plain fields are read by no load of this code).
            if env.array_bases() >= self.need_bases {
                if self.contained {
                    // Nothing but the packet's bounds to set, nothing to
                    // read back (no fault, no helper: see `contained`).
                    env.lean_packet(data, data + data_len as u64);
                    return XdpEnd::Quiet(code.call(env, [env.ctx_addr(), 0, 0]));
                }
                env.begin_packet((base, frame_end), data, data + data_len as u64, false);
                let action = code.call(env, [env.ctx_addr(), 0, 0]);
                // No fault, the packet where it was: nothing to read back.
                if env.quiet() {
                    env.end_packet();
                    return XdpEnd::Quiet(action);
                }
                return XdpEnd::Full(Self::xdp_end(env, Ok(action)));
            }
        }
        XdpEnd::Full(self.run_xdp_full(
            env,
            (base, frame_end),
            data,
            (data, data, data + data_len as u64),
            ingress_ifindex,
            rx_queue,
        ))
    }

    /// Runs the program as the target of a tail call: on the packet where
    /// the last run left it (`bounds`: the [`RunOutcome`]'s `data_meta`,
    /// `data` and `data_end` offsets in `frame`), `start` being where the
    /// packet began when the first program of the chain ran (the helpers
    /// bound its growth by it, as the kernel's headroom does).
    ///
    /// # Errors
    ///
    /// As [`Program::run_xdp`]; [`Fault::OutOfBounds`] at pc 0 when the
    /// bounds do not lie in `frame` in order.
    pub fn run_xdp_tail(
        &self,
        env: &mut Env,
        frame: &mut [u8],
        start: usize,
        bounds: (usize, usize, usize),
        ingress_ifindex: u32,
        rx_queue: u32,
    ) -> Result<RunOutcome, Fault> {
        let (meta, data, end) = bounds;
        let base = frame.as_mut_ptr() as u64;
        if !(meta <= data && data <= end && end <= frame.len() && start <= frame.len()) {
            return Err(Fault::OutOfBounds {
                pc: 0,
                addr: base + data as u64,
                len: end.saturating_sub(data) as u32,
                write: false,
            });
        }
        let at = |off: usize| base + off as u64;
        self.run_xdp_full(
            env,
            (base, at(frame.len())),
            at(start),
            (at(meta), at(data), at(end)),
            ingress_ifindex,
            rx_queue,
        )
    }

    /// `run_xdp` for code that needs more set-up (or the interpreter).
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn run_xdp_full(
        &self,
        env: &mut Env,
        frame: (u64, u64),
        start: u64,
        (meta, data, end): (u64, u64, u64),
        ingress_ifindex: u32,
        rx_queue: u32,
    ) -> Result<RunOutcome, Fault> {
        env.begin_packet(frame, start, end, self.reads_last());
        // A tail call's target: the packet where the last program left it.
        env.meta = meta;
        env.data = data;
        // Only the plain fields: data, data_end and data_meta are read
        // from the Env (the verifier allows nothing but their 4-byte
        // loads, converted), egress_ifindex stays 0 from `Env::new`.
        env.set_ctx_field(12, ingress_ifindex);
        env.set_ctx_field(16, rx_queue);
        let r = self.exec(env, [env.ctx_addr(), 0, 0]);
        Self::xdp_end(env, r)
    }

    /// The end of an XDP run: its pending fault, or its action and the
    /// packet's bounds as offsets from the frame's start.
    #[inline(never)]
    fn xdp_end(env: &mut Env, r: Result<u64, Fault>) -> Result<RunOutcome, Fault> {
        let base = env.frame.0;
        let r = match r {
            // The short path's code left its fault pending.
            Ok(a) if env.flags[env::FAULT] != 0 => env.take_fault().map_or(Ok(a), Err),
            r => r,
        };
        let (meta, data, end) = (env.meta, env.data, env.data_end);
        env.clear_read_back();
        env.end_packet();
        let (action, tail_call) = match r {
            Err(Fault::TailCall { target, .. }) => (0, Some(target)),
            r => (r?, None),
        };
        Ok(RunOutcome {
            action,
            data_meta: (meta - base) as usize,
            data: (data - base) as usize,
            data_end: (end - base) as usize,
            tail_call,
        })
    }
}
