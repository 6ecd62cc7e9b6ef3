//! The in-kernel traffic generator: `BPF_PROG_RUN` with
//! `BPF_F_TEST_XDP_LIVE_FRAMES` (Linux >= 5.18), the way xdp-tools'
//! `xdp-trafficgen` sends.
//!
//! An 8-instruction XDP program returns `bpf_redirect(ifindex, 0)` (57
//! instructions when it rotates destination ports, below); each
//! test run injects `repeat` copies of one frame template into the XDP
//! path, `batch_size` frames per batch, and the kernel transmits every
//! frame the program redirects through the target's `ndo_xdp_xmit` — no
//! skb, no AF_XDP ring, no copy into a UMEM. One thread per
//! [`LiveConfig::threads`], each pinned to a CPU.
//!
//! ## Keeping the program warm
//! A run with `repeat > 1` adds the program to the kernel's XDP
//! dispatcher and removes it again at the end; each change waits for an
//! RCU grace period. Measured here: 0.2 ms per call at `repeat` 1, 24-27
//! ms per call at `repeat` 2 and more. A program that is attached to an interface in
//! native mode stays in the dispatcher, and a run then only takes a
//! reference. So the generator attaches its program to the target
//! interface itself (a bpf_link, gone with the process); the program
//! passes every frame that really arrives there (`ingress_ifindex` is the
//! target's; a test run's ingress is the loopback), so the interface's own
//! receive path is unchanged. If the attach is refused (another XDP
//! program, no native XDP) the generator runs cold and says so: use a
//! large `repeat` then.
//!
//! ## Destination ports
//! A live run sends one template per call. With several
//! [`GenConfig::dst_ports`], the program rotates them **frame by frame**,
//! like the AF_XDP generator: a per-CPU counter picks the next port from
//! an array map, the program writes it into the UDP header and updates
//! the UDP checksum incrementally (RFC 1624) from what the frame holds
//! *now* — the kernel keeps a frame's page, with what the program wrote,
//! between runs (xdp-trafficgen's UDP program does the same). Per-port
//! totals are exact: each thread is alone on its CPU, its counter starts
//! at 0, frame `j` gets port `j mod n`. With more threads than CPUs (or
//! [`LiveConfig::per_frame_ports`] off) the templates take turns **per
//! call** instead, each call up to [`LiveConfig::repeat`] copies of one;
//! the totals stay exact, the wire order is runs of one port.
//!
//! ## Counting and stopping
//! - `count`: exact. A successful run sent all its `repeat` frames
//!   through the program; the last call of a thread carries the
//!   remainder. The stop flag is read between calls, so a stop lands at
//!   most one call late (`repeat` frames; [`DEFAULT_REPEAT`] is 6-30 ms
//!   of frames here).
//! - `rate`: approximate. Calls of at most [`LIVE_PACE_MS`] of the rate
//!   each (each call and each sleep has a fixed cost: asked for 200 kpps,
//!   1 ms calls made 196 kpps here, 4 ms calls 199.6 kpps), paced by
//!   sleeping until the call's due time; a thread that falls behind
//!   catches up by at most [`LIVE_CATCH_UP_MS`] of its rate.
//!   Within a call the kernel sends at full speed.
//! - Stop signals are blocked in the generator threads: an interrupted
//!   run returns `EINTR` without saying how many of its frames it sent.
//!
//! ## What the kernel says about the frames
//! The test run does not report redirects the target refused. What does:
//! the target driver's `xdp_xmit` counters (`ethtool -S`; veth:
//! `tx_queue_N_xdp_xmit` = frames put on the peer's XDP ring,
//! `tx_queue_N_xdp_xmit_errors` = frames the ring had no room for), read
//! before and after the run ([`XmitCounters`]). Frames sent but in
//! neither counter never reached the driver: the redirect was refused
//! before `ndo_xdp_xmit`, e.g. because a veth's peer lost its XDP program
//! (then the device drops `NETDEV_XDP_ACT_NDO_XMIT` and every redirect to
//! it fails; only the `xdp:xdp_redirect_err` tracepoint sees those).
//!
//! ## Threads and veth queues
//! veth puts a frame redirected to it on the ring of its peer's queue
//! `cpu % queues` (256 entries), which the peer's NAPI drains on the CPU
//! that scheduled it. One thread per ring keeps it below a batch; two
//! threads on two CPUs sharing one ring overflow it now and then (seen
//! here: 56 of 20 001 frames at 100 kpps, counted as `xdp_xmit_errors`).
//! Give the veth as many queues as threads (`numrxqueues`/`numtxqueues`)
//! and run the receiver on all of them.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pfil::{Registry, Worker};
use pfil_port::spawn::{start, take_workers};
use pfil_port::{GenConfig, LoopConfig, Stats, MAX_CATCH_UP_MS};

use crate::error::{Error, Result};
use crate::run::in_setup;
use crate::sys;
use crate::xdp::enter_netns;

/// Default frames per test-run call: large enough that the per-call cost
/// (the kernel sets up a page pool per call) is noise (64 frames per call
/// made half the rate of 1024 and more), small enough that a call lasts
/// 6-30 ms at the 0.55-2.5 Mpps measured here, the most a stop or
/// `--seconds` lands late.
pub const DEFAULT_REPEAT: u32 = 1 << 14;

/// Default frames per batch inside a call (the kernel's default, NAPI's
/// weight): the frames of a batch are flushed to the target together.
pub const DEFAULT_BATCH_SIZE: u32 = 64;

/// The largest `batch_size` the kernel takes (`TEST_XDP_MAX_BATCH`).
pub const MAX_BATCH_SIZE: u32 = sys::LIVE_MAX_BATCH;

/// Largest frame the generator sends: a live run refuses frames that do
/// not fit a page with the kernel's head- and tailroom.
pub const MAX_FRAME: usize = 2048;

/// How the in-kernel generator runs.
#[derive(Clone, Debug)]
pub struct LiveConfig {
    /// Network namespace (name in /run/netns or a path) the threads enter.
    pub netns: Option<String>,
    /// Generator threads, each pinned to one CPU of the process's
    /// affinity mask (thread `i` to the `i`-th CPU, wrapping around).
    pub threads: u32,
    /// Frames per test-run call at most.
    pub repeat: u32,
    /// Frames per batch inside a call, 1..=[`MAX_BATCH_SIZE`].
    pub batch_size: u32,
    /// Rotate several destination ports frame by frame in the program
    /// (see the module docs); otherwise, or when two threads would share
    /// a CPU, per call.
    pub per_frame_ports: bool,
}

impl Default for LiveConfig {
    fn default() -> Self {
        LiveConfig {
            netns: None,
            threads: 1,
            repeat: DEFAULT_REPEAT,
            batch_size: DEFAULT_BATCH_SIZE,
            per_frame_ports: true,
        }
    }
}

/// What [`probe`] found out about an interface.
#[derive(Clone, Debug)]
pub struct Probe {
    /// The interface's index.
    pub ifindex: u32,
    /// Its `NETDEV_XDP_ACT_*` features (`None`: the kernel does not say).
    pub xdp_features: Option<u64>,
}

/// The target driver's XDP transmit counters (summed over its queues).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XmitCounters {
    /// Frames the driver took (veth: put on the peer's XDP ring).
    pub xmit: u64,
    /// Frames the driver refused (veth: the peer's ring was full, or a
    /// frame longer than its MTU).
    pub errors: u64,
}

impl std::ops::Sub for XmitCounters {
    type Output = XmitCounters;
    fn sub(self, o: XmitCounters) -> XmitCounters {
        XmitCounters {
            xmit: self.xmit.wrapping_sub(o.xmit),
            errors: self.errors.wrapping_sub(o.errors),
        }
    }
}

/// What one generator thread did.
#[derive(Clone, Debug)]
pub struct LiveReport {
    /// Thread index.
    pub thread: u32,
    /// The CPU it was pinned to.
    pub cpu: Option<usize>,
    /// Test-run calls made.
    pub calls: u64,
    /// Frames sent (the sum of the calls' `repeat`).
    pub frames: u64,
    /// Frames per destination port, in [`GenConfig::dst_ports`] order.
    pub per_port: Vec<(u16, u64)>,
    /// Kernel time in the calls (their `duration` x `repeat`), in ns.
    pub kernel_ns: u64,
}

/// Running generator threads.
pub struct LiveRunning {
    /// One entry per thread (`generated`, `tx` and `passed` count the frames
    /// sent; `batches` counts the calls).
    pub stats: Vec<Arc<Stats>>,
    /// What the probe found.
    pub probe: Probe,
    inner: pfil_port::Running<LiveReport, Error>,
    ifname: String,
    netns: Option<String>,
    before: Option<XmitCounters>,
    // Kept open until the threads are joined.
    _prog: Arc<OwnedFd>,
    // The program attached to the target (native mode) to keep it in the
    // dispatcher; closing it detaches.
    warm: Option<OwnedFd>,
    per_frame: bool,
}

impl std::fmt::Debug for LiveRunning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveRunning")
            .field("ifname", &self.ifname)
            .field("threads", &self.stats.len())
            .finish_non_exhaustive()
    }
}

/// Every generator thread after it ended, and what the driver counted.
#[derive(Debug)]
pub struct LiveFinished {
    /// One report per thread that started.
    pub reports: Vec<LiveReport>,
    /// The errors of the threads that failed.
    pub errors: Vec<Error>,
    /// The driver's transmit counters over the run (`None`: the driver has
    /// no `xdp_xmit` counters, or they could not be read).
    pub xmit: Option<XmitCounters>,
    /// The program was kept in the XDP dispatcher ([`LiveRunning::warm`]).
    pub warm: bool,
    /// Destination ports rotated frame by frame (else per call).
    pub per_frame: bool,
}

impl LiveFinished {
    /// Frames sent by every thread.
    pub fn frames(&self) -> u64 {
        self.reports.iter().map(|r| r.frames).sum()
    }

    /// Frames sent that the driver counted neither as transmitted nor as
    /// refused: redirects refused before the driver (`None` without
    /// counters). Saturates at 0 if something else redirected to the
    /// interface during the run.
    pub fn not_reaching_driver(&self) -> Option<u64> {
        self.xmit
            .map(|x| self.frames().saturating_sub(x.xmit + x.errors))
    }
}

impl LiveRunning {
    /// Set the stop flag (the threads end after their current call).
    pub fn stop(&self) {
        self.inner.stop();
    }

    /// Have all threads returned?
    pub fn finished(&self) -> bool {
        self.inner.finished()
    }

    /// The interface sent on.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Is the program attached to the interface, so that it stays in the
    /// kernel's XDP dispatcher between calls (see the module docs)?
    pub fn warm(&self) -> bool {
        self.warm.is_some()
    }

    /// Stop (if not yet), wait for every thread, read the driver's counters.
    pub fn join_all(self) -> LiveFinished {
        let done = self.inner.join_all();
        let warm = self.warm.is_some();
        drop(self.warm);
        let after = read_counters(&self.netns, &self.ifname);
        LiveFinished {
            reports: done.reports,
            errors: done.errors,
            xmit: match (self.before, after) {
                (Some(b), Some(a)) => Some(a - b),
                _ => None,
            },
            warm,
            per_frame: self.per_frame,
        }
    }
}

/// The driver's XDP transmit counters of `ifname` (calling thread's
/// namespace): the `ethtool -S` values whose names end in `xdp_xmit`
/// (sent) and `xdp_xmit_errors` / `xdp_xmit_err` / `xdp_xmit_drops`
/// (refused), summed. `None` if the driver has none.
pub fn xmit_counters(ifname: &str) -> Option<XmitCounters> {
    let stats = sys::ethtool_stats(ifname).ok()?;
    let mut c = XmitCounters::default();
    let mut seen = false;
    for (name, v) in stats {
        if name.ends_with("xdp_xmit") {
            c.xmit += v;
            seen = true;
        } else if name.ends_with("xdp_xmit_errors")
            || name.ends_with("xdp_xmit_err")
            || name.ends_with("xdp_xmit_drops")
        {
            c.errors += v;
            seen = true;
        }
    }
    seen.then_some(c)
}

fn read_counters(netns: &Option<String>, ifname: &str) -> Option<XmitCounters> {
    let name = ifname.to_owned();
    in_setup(netns, move || Ok(xmit_counters(&name)))
        .ok()
        .flatten()
}

/// Check, in the calling thread's namespace, that the kernel runs live
/// frames: an `XDP_DROP` program over one live frame (nothing is sent; no
/// interface is used).
///
/// # Errors
/// [`Error::Permission`] (the program cannot be loaded);
/// [`Error::LiveUnsupported`] (kernel before 5.18, without
/// `CONFIG_BPF_SYSCALL`/XDP, or one that refuses live frames to a
/// program it loaded).
pub fn runs_live_frames() -> Result<()> {
    let prog = sys::load_xdp_program(&sys::drop_program(), "pfil_live_probe").map_err(
        |(e, log)| match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => Error::Permission {
                what: "bpf(BPF_PROG_LOAD)",
            },
            _ => Error::LiveUnsupported {
                detail: format!("an XDP program did not load: {e}; verifier: {log}"),
            },
        },
    )?;
    let frame = [0u8; 60];
    if let Err(e) = sys::prog_test_run_live(&prog, &frame, 1, 1) {
        return Err(match e.raw_os_error() {
            // The program loaded: the privileges are there, and the kernel
            // refuses live frames as such (Linux 6.18.44-fc, a
            // Firecracker guest's build, does, as root).
            Some(libc::EPERM) | Some(libc::EACCES) => Error::LiveUnsupported {
                detail: format!(
                    "BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES was refused ({e}) although the \
                     kernel loaded the XDP program: this kernel does not run live frames"
                ),
            },
            Some(libc::EINVAL) | Some(libc::E2BIG) | Some(libc::EOPNOTSUPP) => {
                Error::LiveUnsupported {
                    detail: format!("BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES failed: {e}"),
                }
            }
            _ => Error::io("bpf(BPF_PROG_TEST_RUN)", e),
        });
    }
    Ok(())
}

/// Check, in the calling thread's namespace, that the kernel runs live
/// frames and that `ifname` takes redirected frames, as `xdp-trafficgen
/// probe` does: run an `XDP_DROP` program over one live frame (nothing is
/// sent), then read the interface's XDP features.
///
/// # Errors
/// [`Error::NoSuchInterface`]; [`Error::Permission`];
/// [`Error::LiveUnsupported`] (kernel before 5.18 or without
/// `CONFIG_BPF_SYSCALL`/XDP); [`Error::NoRedirectTarget`] (the interface
/// lacks `NETDEV_XDP_ACT_NDO_XMIT`: for veth, the peer has no XDP program).
pub fn probe(ifname: &str) -> Result<Probe> {
    let ifindex = sys::if_nametoindex(ifname).map_err(|_| Error::NoSuchInterface {
        ifname: ifname.to_owned(),
    })?;
    runs_live_frames()?;
    let xdp_features = match sys::xdp_features(ifindex) {
        Ok(f) => f,
        Err(e) => {
            tracing::debug!(target: "pfil_afxdp", ifname, error = %e, "XDP features unknown");
            None
        }
    };
    if let Some(f) = xdp_features {
        if f & sys::NETDEV_XDP_ACT_NDO_XMIT == 0 {
            return Err(Error::NoRedirectTarget {
                ifname: ifname.to_owned(),
                detail: format!("its XDP features are {f:#x}, without NETDEV_XDP_ACT_NDO_XMIT"),
            });
        }
    } else {
        tracing::warn!(target: "pfil_afxdp", ifname, "the kernel does not report XDP features: cannot check that the interface takes redirected frames; the driver's xdp_xmit counters will tell");
    }
    Ok(Probe {
        ifindex,
        xdp_features,
    })
}

/// Split `total` (0: unbounded) over `n` shares; share `i`.
fn split(total: u64, n: usize, i: usize) -> u64 {
    if total == 0 {
        return 0;
    }
    let n = n.max(1) as u64;
    total / n + u64::from((i as u64) < total % n)
}

/// One thread's loop: calls round robin over the templates.
struct Sender {
    prog: Arc<OwnedFd>,
    templates: Vec<Vec<u8>>,
    ports: Vec<u16>,
    /// The program rotates the ports frame by frame (one template).
    per_frame: bool,
    /// Frames left per template (`None`: unbounded).
    left: Option<Vec<u64>>,
    /// Frames per call at most.
    chunk: u32,
    batch_size: u32,
    /// Frames per second of this thread (0: unpaced).
    rate: u64,
}

impl Sender {
    fn run(
        self,
        thread: u32,
        cpu: Option<usize>,
        st: &Stats,
        lc: &LoopConfig,
    ) -> (LiveReport, Result<()>) {
        let mut rep = LiveReport {
            thread,
            cpu,
            calls: 0,
            frames: 0,
            per_port: self.ports.iter().map(|&p| (p, 0)).collect(),
            kernel_ns: 0,
        };
        let result = self.send(&mut rep, st, lc);
        if self.per_frame {
            // Frame j of this thread (alone on its CPU, whose counter
            // started at 0) got port j mod n.
            let n = self.ports.len();
            for (k, (_, c)) in rep.per_port.iter_mut().enumerate() {
                *c = split(rep.frames, n, k);
            }
        }
        (rep, result)
    }

    fn send(&self, rep: &mut LiveReport, st: &Stats, lc: &LoopConfig) -> Result<()> {
        let mut left = self.left.clone();
        let mut next = 0usize;
        let mut start = Instant::now();
        let n_t = self.templates.len();
        loop {
            if lc.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            // The next template with frames left, round robin.
            let (t, n) = match &left {
                None => (next, u64::from(self.chunk)),
                Some(l) => match (0..n_t).map(|k| (next + k) % n_t).find(|&k| l[k] > 0) {
                    Some(k) => (k, l[k].min(u64::from(self.chunk))),
                    None => return Ok(()),
                },
            };
            next = (t + 1) % n_t;
            if self.rate != 0 && !pace(self.rate, rep.frames, &mut start, lc) {
                return Ok(());
            }
            let r =
                sys::prog_test_run_live(&self.prog, &self.templates[t], n as u32, self.batch_size)
                    .map_err(|e| Error::io("bpf(BPF_PROG_TEST_RUN) with live frames", e))?;
            rep.calls += 1;
            rep.frames += n;
            rep.per_port[t].1 += n;
            rep.kernel_ns += u64::from(r.ns_per_frame) * n;
            if let Some(l) = &mut left {
                l[t] -= n;
            }
            // Relaxed: live counters, read by the status line only.
            st.generated.fetch_add(n, Ordering::Relaxed);
            st.passed.fetch_add(n, Ordering::Relaxed);
            st.tx.fetch_add(n, Ordering::Relaxed);
            st.batches.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// How far, in milliseconds of its rate, a paced thread catches up after
/// falling behind: two paced calls back to back at most (sleeps overshoot
/// by tens of microseconds, so a bound of one call would forgive too often).
pub const LIVE_CATCH_UP_MS: u64 = 2 * LIVE_PACE_MS;

/// A paced thread's calls carry this many milliseconds of its rate
/// (at most `repeat` frames, at least one).
pub const LIVE_PACE_MS: u64 = 4 * MAX_CATCH_UP_MS;

/// Sleep until `sent` frames are due at `rate` since `start` (in slices, so
/// a stop is seen within 10 ms). A thread more than [`LIVE_CATCH_UP_MS`]
/// behind forgives the older debt by moving `start`. `false` if stopped
/// while waiting.
fn pace(rate: u64, sent: u64, start: &mut Instant, lc: &LoopConfig) -> bool {
    let due = *start + Duration::from_secs_f64(sent as f64 / rate as f64);
    let now = Instant::now();
    let slack = Duration::from_millis(LIVE_CATCH_UP_MS);
    if now > due + slack {
        *start += now - due - slack;
        return true;
    }
    while Instant::now() < due {
        if lc.stop.load(Ordering::Relaxed) {
            return false;
        }
        let left = due.saturating_duration_since(Instant::now());
        std::thread::sleep(left.min(Duration::from_millis(10)));
    }
    true
}

/// Start the in-kernel generator on `ifname`: probe (in the namespace),
/// load the redirect program, read the driver's counters, then start
/// [`LiveConfig::threads`] threads, each entering the namespace, blocking
/// stop signals, pinning itself and sending its share of `gen.count`
/// (`gen.rate` is split over the threads too). `gen.window` is ignored
/// (the frames are not ours to count once sent). Takes one registry
/// worker slot per thread.
///
/// # Errors
/// [`probe`]'s errors; [`Error::Config`] for a bad template or setting;
/// the first thread's error.
pub fn spawn_live_gen(
    reg: &Registry,
    ifname: &str,
    cfg: &LiveConfig,
    gen: &GenConfig,
    lc: LoopConfig,
) -> Result<LiveRunning> {
    if cfg.threads == 0 {
        return Err(Error::Config(
            "the in-kernel generator needs at least one thread".into(),
        ));
    }
    if cfg.repeat == 0 {
        return Err(Error::Config("repeat must be at least 1".into()));
    }
    if !(1..=MAX_BATCH_SIZE).contains(&cfg.batch_size) {
        return Err(Error::Config(format!(
            "batch size {} out of range: the kernel takes 1 to {MAX_BATCH_SIZE}",
            cfg.batch_size
        )));
    }
    let mut templates: Vec<Vec<u8>> = gen.templates(MAX_FRAME)?.as_ref().clone();
    if templates.is_empty() {
        return Err(Error::Config(
            "the in-kernel generator has no frame to send (an empty capture)".into(),
        ));
    }
    let cpus = sys::affinity().unwrap_or_default();
    let n = cfg.threads as usize;
    // Per-frame rotation keeps a counter per CPU: exact only with one
    // pinned thread per CPU.
    let per_frame =
        cfg.per_frame_ports && gen.dst_ports.len() > 1 && !cpus.is_empty() && n <= cpus.len();
    if per_frame {
        templates.truncate(1);
    }
    let name = ifname.to_owned();
    let ports = gen.dst_ports.clone();
    let (probe, prog, warm, before) = in_setup(&cfg.netns, move || {
        let probe = probe(&name)?;
        // The maps stay open until the program is loaded; the loaded
        // program then holds its own references to them.
        let mut maps = Vec::new();
        let insns = if per_frame {
            let map_err = |e| Error::io("bpf(BPF_MAP_CREATE) for the port rotation", e);
            let counter = sys::create_u32_array(1, true, "pfil_live_ctr").map_err(map_err)?;
            let table = sys::create_u32_array(ports.len() as u32, false, "pfil_live_ports")
                .map_err(map_err)?;
            for (k, &p) in ports.iter().enumerate() {
                // The port's network-order bytes, as a u16 load sees them.
                let v = u32::from(u16::from_ne_bytes(p.to_be_bytes()));
                sys::map_update_u32(&table, k as u32, v)
                    .map_err(|e| Error::io("bpf(BPF_MAP_UPDATE_ELEM) for the port rotation", e))?;
            }
            let insns = sys::live_rotate_program(
                probe.ifindex,
                counter.as_raw_fd(),
                table.as_raw_fd(),
                ports.len() as u32,
            );
            maps.push(counter);
            maps.push(table);
            insns
        } else {
            sys::live_redirect_program(probe.ifindex).to_vec()
        };
        let prog = sys::load_xdp_program(&insns, "pfil_live_gen").map_err(|(e, log)| {
            Error::LiveUnsupported {
                detail: format!("the redirect program did not load: {e}; verifier: {log}"),
            }
        })?;
        drop(maps);
        let warm = match sys::xdp_link_create(&prog, probe.ifindex, sys::XDP_FLAGS_DRV_MODE) {
            Ok(l) => Some(l),
            Err(e) => {
                tracing::warn!(target: "pfil_afxdp", ifname = %name, error = %e, "cannot attach the generator's program to the interface (native mode) to keep it in the XDP dispatcher: every BPF_PROG_RUN call now waits for two RCU grace periods (~27 ms here); use a large --repeat");
                None
            }
        };
        Ok((probe, prog, warm, xmit_counters(&name)))
    })?;
    let prog = Arc::new(prog);
    let ws = take_workers(reg, n)?;
    let mut stats = Vec::with_capacity(n);
    let mut openers: Vec<pfil_port::spawn::Opener<LiveReport, Error>> = Vec::with_capacity(n);
    for i in 0..n {
        let st = Arc::new(Stats::default());
        stats.push(st.clone());
        let count = split(gen.count, n, i);
        let rate = split(gen.rate, n, i);
        let left = (gen.count != 0).then(|| {
            (0..templates.len())
                .map(|k| split(count, templates.len(), k))
                .collect()
        });
        // Paced: calls of at most LIVE_PACE_MS of the rate.
        let chunk = if rate == 0 {
            cfg.repeat
        } else {
            (rate * LIVE_PACE_MS / 1000).clamp(1, u64::from(cfg.repeat)) as u32
        };
        let sender = Sender {
            prog: prog.clone(),
            templates: templates.clone(),
            ports: gen.dst_ports.clone(),
            per_frame,
            left,
            chunk,
            batch_size: cfg.batch_size,
            rate,
        };
        let cpu = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
        let ns = cfg.netns.clone();
        openers.push(Box::new(move || {
            if let Some(ns) = ns {
                enter_netns(&ns)?;
            }
            sys::block_stop_signals().map_err(|e| Error::io("pthread_sigmask", e))?;
            if let Some(c) = cpu {
                sys::pin_to_cpu(c).map_err(|e| Error::io("sched_setaffinity", e))?;
            }
            Ok(Box::new(move |_w: &mut Worker, lc: &LoopConfig| {
                let (rep, r) = sender.run(i as u32, cpu, &st, lc);
                (Some(rep), r)
            }) as pfil_port::spawn::Body<LiveReport, Error>)
        }));
    }
    tracing::info!(target: "pfil_afxdp", ifname, ifindex = probe.ifindex, threads = n, repeat = cfg.repeat, batch_size = cfg.batch_size, ports_per_frame = per_frame, "in-kernel generator (BPF_PROG_RUN live frames)");
    let inner = start("live", ws, openers, stats.clone(), lc)?;
    Ok(LiveRunning {
        stats,
        probe,
        inner,
        ifname: ifname.to_owned(),
        netns: cfg.netns.clone(),
        before,
        _prog: prog,
        warm,
        per_frame,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_split_exactly() {
        for (total, n) in [(10u64, 3usize), (7, 7), (2, 5), (1_000_001, 4)] {
            let parts: Vec<u64> = (0..n).map(|i| split(total, n, i)).collect();
            assert_eq!(parts.iter().sum::<u64>(), total);
            assert!(parts.iter().max().unwrap() - parts.iter().min().unwrap() <= 1);
        }
        assert_eq!(split(0, 3, 1), 0);
    }

    #[test]
    fn counters_subtract() {
        let a = XmitCounters {
            xmit: 10,
            errors: 3,
        };
        let b = XmitCounters { xmit: 4, errors: 1 };
        assert_eq!(a - b, XmitCounters { xmit: 6, errors: 2 });
        let f = LiveFinished {
            reports: vec![LiveReport {
                thread: 0,
                cpu: None,
                calls: 1,
                frames: 10,
                per_port: vec![(9, 10)],
                kernel_ns: 0,
            }],
            errors: vec![],
            xmit: Some(XmitCounters { xmit: 7, errors: 1 }),
            warm: true,
            per_frame: false,
        };
        assert_eq!(f.not_reaching_driver(), Some(2));
    }
}
