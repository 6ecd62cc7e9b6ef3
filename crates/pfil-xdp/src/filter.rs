//! The `xdp` hook: an [`XdpProgram`] as a pfil [`Filter`].
//!
//! Config (what follows `xdp:` in a spec): see [`crate::config`].
//!
//! The program runs over the packet's buffer ([`Packet::buffer_mut`]):
//! it may grow the frame into the headroom and tailroom the port gave,
//! and later hooks, and the port that sends it, see the frame as the
//! program left it ([`Packet::set_frame`]).
//!
//! Verdicts: `XDP_PASS` → Pass; `XDP_DROP` → Dropped; `XDP_ABORTED` →
//! Dropped and counted (`aborted`); `XDP_TX` and `XDP_REDIRECT` →
//! Consumed and sent by the worker through its outbox (back on the
//! packet's interface, or on the redirect target), counted `tx` and
//! `redirected`, when the filter has outboxes
//! ([`XdpFilter::with_outboxes`]) and the frame a driver cookie, else
//! Dropped and counted (`tx_refused`, `redirect_refused`); `XDP_REDIRECT`
//! into a cpumap → Pass, counted (`to_cpu`): the kernel hands such a
//! frame to its stack on that CPU, pfil passes it on; any other
//! action → Dropped and counted
//! (`invalid_action`), as the kernel does. A program that faults
//! (an access outside its regions, its instruction budget spent) is
//! counted (`faults`) and contained as a panicking hook is: the chain
//! quarantines the link and the link's fail mode decides the packet.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use pfil::{Ctx, Filter, FilterStat, Packet, Verdict};
use pfil_port::Outboxes;

use crate::config::XdpConfig;
use crate::helpers::{XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_REDIRECT, XDP_TX};
use crate::program::{Quick, Redirect, RunError, XdpProgram};
use crate::Object;

/// Largest object file `xdp:@PATH` reads.
pub const MAX_OBJECT_BYTES: u64 = 64 << 20;

const STATS: [(&str, &str); 9] = [
    (
        "aborted",
        "Packets the program returned XDP_ABORTED for (dropped).",
    ),
    (
        "invalid_action",
        "Packets the program returned an unknown action for (dropped).",
    ),
    (
        "tx_refused",
        "XDP_TX verdicts the port could not send back (dropped).",
    ),
    (
        "redirect_refused",
        "XDP_REDIRECT verdicts the port could not send on (dropped).",
    ),
    (
        "faults",
        "Runs the sandbox stopped (the link was quarantined).",
    ),
    (
        "busy",
        "Packets dropped because their worker's run environment was in use.",
    ),
    (
        "tx",
        "XDP_TX verdicts handed to the worker to send back out (consumed).",
    ),
    (
        "redirected",
        "XDP_REDIRECT verdicts handed to the worker to send out (consumed).",
    ),
    (
        "to_cpu",
        "XDP_REDIRECT verdicts into a cpumap, passed on as XDP_PASS (the kernel hands them to its stack).",
    ),
];

/// The payload a faulting program's run unwinds with: the chain catches
/// it as it catches a hook's panic and quarantines the link.
#[derive(Debug)]
pub struct XdpFault(pub String);

/// An XDP program as a pfil hook.
pub struct XdpFilter {
    config: String,
    prog: XdpProgram,
    stats: Box<[CachePadded<[AtomicU64; STATS.len()]>]>,
    outboxes: Option<Arc<Outboxes>>,
}

/// Read an object file: a regular file of at most [`MAX_OBJECT_BYTES`].
pub fn read_object(path: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| format!("@{path}: {e}"))?;
    let meta = f.metadata().map_err(|e| format!("@{path}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("@{path}: not a regular file"));
    }
    if meta.len() > MAX_OBJECT_BYTES {
        return Err(format!(
            "@{path}: {} bytes, over the limit of {MAX_OBJECT_BYTES}",
            meta.len()
        ));
    }
    let mut body = Vec::new();
    f.take(MAX_OBJECT_BYTES + 1)
        .read_to_end(&mut body)
        .map_err(|e| format!("@{path}: {e}"))?;
    Ok(body)
}

/// Why [`XdpFilter::try_from_config`] built no hook: the config is not
/// written as the `xdp` module's syntax says, or it is and what it names
/// cannot be run. Either message names what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// The config is not `@PATH [program NAME] [verify kernel] [; map
    /// ...]` ([`XdpConfig::parse`]): what was expected.
    Syntax(String),
    /// The config is well formed, but the object cannot be run: the file
    /// cannot be read, is not a BPF object, has no such program, the
    /// program uses what pfil does not have, pfil's verifier (or, with
    /// `verify kernel`, the kernel's) refuses it, or a map entry of the
    /// config does not fit its map.
    Refused(String),
}

impl BuildError {
    /// The message, whichever kind.
    pub fn message(&self) -> &str {
        match self {
            BuildError::Syntax(m) | BuildError::Refused(m) => m,
        }
    }
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for BuildError {}

impl XdpFilter {
    /// Build from an `xdp:` config for a registry of `workers` worker slots.
    ///
    /// # Errors
    /// A bad config, an unreadable file, or the loader's or verifier's
    /// refusal, each naming what was wrong ([`try_from_config`] tells
    /// the config's syntax from the rest).
    ///
    /// [`try_from_config`]: XdpFilter::try_from_config
    pub fn from_config(config: &str, workers: usize) -> Result<XdpFilter, String> {
        Self::try_from_config(config, workers).map_err(|e| e.to_string())
    }

    /// [`from_config`](XdpFilter::from_config), saying whether the config
    /// was not in the module's syntax ([`BuildError::Syntax`]) or named
    /// what cannot be run ([`BuildError::Refused`]).
    ///
    /// # Errors
    /// As [`from_config`](XdpFilter::from_config).
    pub fn try_from_config(config: &str, workers: usize) -> Result<XdpFilter, BuildError> {
        Self::build(config, workers, &[])
    }

    fn build(
        config: &str,
        workers: usize,
        keep: &[Arc<crate::Map>],
    ) -> Result<XdpFilter, BuildError> {
        let c = XdpConfig::parse(config).map_err(BuildError::Syntax)?;
        Self::load(c, config, workers, keep).map_err(BuildError::Refused)
    }

    /// The hook `c` (parsed from `config`) names, built.
    fn load(
        c: XdpConfig,
        config: &str,
        workers: usize,
        keep: &[Arc<crate::Map>],
    ) -> Result<XdpFilter, String> {
        let bytes = read_object(&c.path)?;
        let mut obj = Object::parse(&bytes).map_err(|e| format!("@{}: {e}", c.path))?;
        let rest = c.preset(&mut obj)?;
        if c.verify_kernel {
            let p = obj
                .program(c.program.as_deref())
                .map_err(|e| format!("@{}: {e}", c.path))?;
            if !crate::kernel::available() {
                return Err(format!(
                    "@{}: `verify kernel` needs bpf(2) (root, CAP_BPF)",
                    c.path
                ));
            }
            crate::kernel::KernelProgram::load(&obj, p)
                .map_err(|e| format!("@{}: the kernel's verifier refused it: {e}", c.path))?;
        }
        let prog = XdpProgram::load(&obj, c.program.as_deref(), workers, keep)
            .map_err(|e| format!("@{}: {e}", c.path))?;
        for e in rest {
            let m = prog.map(&e.map).ok_or_else(|| {
                let names: Vec<&str> = prog.maps().iter().map(|m| m.name()).collect();
                format!(
                    "map {}: the program has no such map (its maps: {})",
                    e.map,
                    names.join(", ")
                )
            })?;
            let mut value = match &e.program {
                Some(name) => prog
                    .tail_number(name)
                    .map_err(|err| format!("map {} key {:?}: {err}", e.map, e.key))?
                    .to_le_bytes()
                    .to_vec(),
                None => e.value.clone(),
            };
            if m.kind() == crate::MapType::ProgArray {
                prog.check_tail_value(&value)
                    .map_err(|err| format!("map {} key {:?}: {err}", e.map, e.key))?;
            }
            if m.kind().per_cpu() && value.len() == m.value_size() {
                let stride = m.user_value_size() / m.workers();
                value.resize(stride, 0);
                value = value.repeat(m.workers());
            }
            m.update(&e.key, &value, crate::maps::BPF_ANY)
                .map_err(|err| format!("map {} key {:?}: {err}", e.map, e.key))?;
        }
        Ok(XdpFilter {
            config: config.trim().to_owned(),
            prog,
            stats: (0..workers.max(1))
                .map(|_| CachePadded::new(Default::default()))
                .collect(),
            outboxes: None,
        })
    }

    /// This filter, sending `XDP_TX` and `XDP_REDIRECT` frames through the
    /// workers' `outboxes` (the frame is consumed, and the worker sends it
    /// on the interface: back where it came from for `XDP_TX`). Without
    /// outboxes, or for a frame without a driver cookie, those verdicts
    /// drop and are counted (`tx_refused`, `redirect_refused`).
    #[must_use]
    pub fn with_outboxes(mut self, outboxes: Option<Arc<Outboxes>>) -> XdpFilter {
        self.outboxes = outboxes;
        self
    }

    /// Hand the frame to the worker to send on `ifindex`: Consumed, or
    /// Dropped and counted under `refused` when it cannot.
    #[inline]
    fn send(
        &self,
        pkt: &Packet<'_>,
        worker: usize,
        ifindex: u32,
        sent: usize,
        refused: usize,
    ) -> Verdict {
        let ob = self.outboxes.as_ref().and_then(|o| o.get(worker));
        match ob {
            Some(ob) if pkt.cookie() != 0 && ob.transmit_packet(pkt, ifindex).is_ok() => {
                self.count(worker, sent);
                Verdict::Consumed
            }
            _ => {
                self.count(worker, refused);
                Verdict::Dropped
            }
        }
    }

    /// The loaded program (its maps for the control side).
    pub fn program(&self) -> &XdpProgram {
        &self.prog
    }

    #[inline]
    fn count(&self, worker: usize, which: usize) {
        if let Some(s) = self.stats.get(worker) {
            s[which].fetch_add(1, Relaxed);
        }
    }
}

impl Filter for XdpFilter {
    fn filter(&self, pkt: &mut Packet<'_>, ctx: &Ctx<'_>) -> Verdict {
        match self.prog.claim(ctx.worker) {
            Ok(mut claim) => self.decide(&mut claim, pkt, ctx.worker),
            Err(_) => {
                self.count(ctx.worker, 5);
                Verdict::Dropped
            }
        }
    }

    /// One claim of the worker's run environment for the whole batch.
    fn filter_batch(&self, pkts: &mut [Packet<'_>], ctx: &Ctx<'_>) {
        let mut claim = match self.prog.claim(ctx.worker) {
            Ok(c) => c,
            Err(_) => {
                for p in pkts.iter_mut().filter(|p| p.verdict().is_pass()) {
                    self.count(ctx.worker, 5);
                    p.set_verdict(Verdict::Dropped);
                }
                return;
            }
        };
        if let Some(mut r) = claim.runner() {
            // Contained code: every run ends quiet (no fault, the packet
            // where it was, no redirect target asked for).
            for p in pkts.iter_mut().filter(|p| p.verdict().is_pass()) {
                let len = p.len();
                let (buf, data) = p.buffer_mut();
                let v = match r.run(buf, data, len) {
                    Some(action) => self.quiet(p, ctx.worker, action),
                    // A packet outside its buffer would be pfil's bug:
                    // dropped rather than run (as `decide_full`).
                    None => {
                        self.count(ctx.worker, 1);
                        Verdict::Dropped
                    }
                };
                p.set_verdict(v);
            }
            return;
        }
        for p in pkts.iter_mut().filter(|p| p.verdict().is_pass()) {
            let v = self.decide(&mut claim, p, ctx.worker);
            p.set_verdict(v);
        }
    }

    fn batched(&self) -> bool {
        // Also for programs that move the head: the chain tells a batch's
        // packets apart by their buffers, which moving the head leaves.
        true
    }

    fn spec(&self) -> Option<String> {
        Some(format!("xdp:{}", self.config))
    }

    fn derive(&self, config: &str) -> Option<Result<Arc<dyn Filter>, String>> {
        Some(
            Self::build(config, self.stats.len(), self.prog.maps())
                .map(|f| Arc::new(f.with_outboxes(self.outboxes.clone())) as Arc<dyn Filter>)
                .map_err(|e| e.to_string()),
        )
    }

    fn stats(&self) -> Vec<FilterStat> {
        STATS
            .iter()
            .enumerate()
            .map(|(i, (name, help))| {
                let v = self.stats.iter().map(|s| s[i].load(Relaxed)).sum();
                FilterStat::counter(name, help, v)
            })
            .collect()
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

impl XdpFilter {
    /// A run faulted: count it and unwind. Contained like a panicking
    /// hook: the chain catches the unwind, quarantines the link and
    /// applies its fail mode. resume_unwind skips the panic hook: a
    /// program's fault is not a bug of pfild.
    #[cold]
    #[inline(never)]
    fn fault(&self, worker: usize, f: pfil_ebpf::Fault, pkt: &[u8]) -> ! {
        self.count(worker, 4);
        // An access outside the frame, said where it was from the packet
        // (the address alone tells an operator nothing).
        let near = match f {
            pfil_ebpf::Fault::OutOfBounds { addr, .. } => {
                let off = addr.wrapping_sub(pkt.as_ptr() as u64) as i64;
                if off.unsigned_abs() < 1 << 16 {
                    format!(" (byte {off} of a {}-byte packet)", pkt.len())
                } else {
                    String::new()
                }
            }
            _ => String::new(),
        };
        let what = format!("xdp program {:?}: {f}{near}", self.prog.name());
        // What the program did, for the operator: the chain's log line
        // that follows ("hook panicked; link quarantined") cannot read it
        // from the payload. Once per link and worker at most: the link
        // is quarantined and not called again.
        tracing::error!(target: "pfil_xdp", worker, "faulted: {what}");
        std::panic::resume_unwind(Box::new(XdpFault(what)));
    }

    /// Run the program on one packet with a claimed environment and turn
    /// its action into a verdict (see the module docs).
    #[inline(always)]
    fn decide(
        &self,
        claim: &mut crate::program::Claim<'_>,
        pkt: &mut Packet<'_>,
        worker: usize,
    ) -> Verdict {
        let (ifindex, queue) = (pkt.ifindex(), pkt.queue());
        let len = pkt.len();
        // The program sees the frame in its buffer: it may grow it into
        // the headroom and tailroom the port gave (data_meta lives in the
        // headroom too, as the kernel's).
        let (buf, data) = pkt.buffer_mut();
        match claim.run_quick(buf, data, len, ifindex, queue) {
            Quick::Quiet(action) => self.quiet(pkt, worker, action),
            Quick::Full(r) => self.decide_full(pkt, worker, r),
        }
    }

    /// The verdict of a quiet run's action (r0's low 32 bits).
    #[inline(always)]
    fn quiet(&self, pkt: &mut Packet<'_>, worker: usize, action: u32) -> Verdict {
        // The two common verdicts without a jump table.
        if action == XDP_PASS as u32 {
            return Verdict::Pass;
        }
        if action == XDP_DROP as u32 {
            return Verdict::Dropped;
        }
        // A quiet run asked for no redirect target.
        self.act(pkt, worker, u64::from(action), None)
    }

    /// The verdict of a run that faulted or moved the packet.
    #[inline(never)]
    fn decide_full(
        &self,
        pkt: &mut Packet<'_>,
        worker: usize,
        r: Result<crate::program::RunResult, RunError>,
    ) -> Verdict {
        // The packet's bounds as the run found them (only `set_frame`
        // below changes them).
        let (head, len) = (pkt.headroom(), pkt.len());
        let r = match r {
            Ok(r) => r,
            Err(RunError::Fault(f)) => self.fault(worker, f, pkt.frame()),
            Err(RunError::Worker(_)) => {
                self.count(worker, 5);
                return Verdict::Dropped;
            }
        };
        // Later hooks, and the port that sends the frame, see it as the
        // program left it. The engine keeps data..data_end in the buffer
        // it was given; a range outside it would be the engine's bug, and
        // the frame is dropped rather than sent wrong.
        if (r.data, r.end) != (head, head + len) && pkt.set_frame(r.data, r.end).is_err() {
            self.count(worker, 1);
            return Verdict::Dropped;
        }
        match r.action {
            XDP_PASS => Verdict::Pass,
            XDP_DROP => Verdict::Dropped,
            a => self.act(pkt, worker, a, r.redirect),
        }
    }

    /// The verdict of the other actions (and unknown ones).
    #[inline(never)]
    fn act(
        &self,
        pkt: &mut Packet<'_>,
        worker: usize,
        action: u64,
        redirect: Option<Redirect>,
    ) -> Verdict {
        match action {
            XDP_ABORTED => {
                self.count(worker, 0);
                Verdict::Dropped
            }
            // The worker sends the frame as the packet holds it now
            // (grown, narrowed or as it came).
            XDP_TX => self.send(pkt, worker, pkt.ifindex(), 6, 2),
            XDP_REDIRECT => match redirect {
                Some(Redirect::Device(ifindex)) => self.send(pkt, worker, ifindex, 7, 3),
                Some(Redirect::Cpu(_)) => {
                    self.count(worker, 8);
                    Verdict::Pass
                }
                None => {
                    self.count(worker, 3);
                    Verdict::Dropped
                }
            },
            _ => {
                self.count(worker, 1);
                Verdict::Dropped
            }
        }
    }
}
