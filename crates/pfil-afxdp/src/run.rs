//! Running AF_XDP workers: which queues, which ports, one thread per
//! queue. The spawners ([`spawn_sink`], [`spawn_forward`], [`spawn_gen`])
//! open the ports (optionally inside a network namespace), start one worker
//! per queue running a loop of [`pfil_port`] over its [`Umem`], wait until
//! every worker is ready or one failed, and return a [`Running`] handle:
//! what a `pfild` CLI needs. By default ([`UmemMode::Shared`]) the queues'
//! workers share one UMEM area, set up on one thread and split into a
//! disjoint frame range per worker.
//!
//! The loop types the spawners take and give ([`LoopConfig`], [`Stats`],
//! [`GenConfig`], ...) are [`pfil_port`]'s, re-exported here.

use std::sync::Arc;

use pfil::{Registry, Worker};
use pfil_port::spawn::{start, take_workers};
pub use pfil_port::{
    forward_loop, gen_loop, head_for, sink_loop, GenConfig, LoopConfig, LoopWorker, Stats,
    StatsSnapshot, Window, BATCH, DEFAULT_HELD_LIMIT,
};
use pfil_port::{FrameCounts, PortId};

use crate::config::{BoundMode, PortConfig, UmemConfig};
use crate::error::{Error, Result};
use crate::sys::{self, XdpStats};
use crate::umem::{SharedUmem, Umem};
use crate::xdp::{enter_netns, queue_count, XdpMode, XdpProgram};

/// Running AF_XDP workers (see [`pfil_port::Running`]).
pub type Running = pfil_port::Running<WorkerReport, Error>;

/// Every AF_XDP worker after it ended (see [`pfil_port::Finished`]).
pub type Finished = pfil_port::Finished<WorkerReport, Error>;

type Body = pfil_port::spawn::Body<WorkerReport, Error>;
type Opener = pfil_port::spawn::Opener<WorkerReport, Error>;

/// How the workers of a spawner get their UMEM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UmemMode {
    /// One UMEM area for all the queues of the spawner ([`SharedUmem`]):
    /// registered once, every socket but the first joins it with
    /// `XDP_SHARED_UMEM`; each worker owns `WorkerSetup::umem.frames`
    /// frames of it and its own sockets and fill/completion rings. The
    /// ports are opened on one setup thread, then each worker's part
    /// moves to its thread.
    #[default]
    Shared,
    /// One UMEM per worker, registered and opened on the worker's thread.
    PerQueue,
}

impl std::fmt::Display for UmemMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UmemMode::Shared => "shared",
            UmemMode::PerQueue => "per-queue",
        })
    }
}

/// Where the worker threads run and what they allocate.
#[derive(Clone, Debug, Default)]
pub struct WorkerSetup {
    /// Network namespace (name in /run/netns or a path) the workers enter.
    pub netns: Option<String>,
    /// Queues to run (one worker each); `None`: every queue of the interface.
    pub queues: Option<Vec<u32>>,
    /// UMEM of each worker (with [`UmemMode::Shared`]: each worker's part
    /// of the shared area).
    pub umem: UmemConfig,
    /// One shared UMEM or one per worker.
    pub umem_mode: UmemMode,
    /// XDP attach mode.
    pub xdp_mode: XdpMode,
    /// Port template (ring sizes, bind mode); interface and queue are set
    /// by the spawner.
    pub port: Option<PortConfig>,
    /// CPUs to pin the workers to: worker `i` (queue order) to
    /// `cpus[i % cpus.len()]`, before it opens its ports (so its rings and
    /// frames are first touched there). `None`: not pinned.
    pub cpus: Option<Vec<usize>>,
}

/// What a worker hands back when it ends.
#[derive(Clone, Debug)]
pub struct WorkerReport {
    /// Queue the worker ran.
    pub queue: u32,
    /// Where every frame of its UMEM (its part of a shared one) was at
    /// the end.
    pub counts: FrameCounts,
    /// Byte offsets of the frames it owned ([`Umem::frame_addrs`]).
    pub frame_addrs: std::ops::Range<u64>,
    /// Workers its UMEM area was shared by (1: its own).
    pub umem_parts: usize,
    /// Its ports.
    pub ports: Vec<PortReport>,
}

/// One port of a worker at the end of its run.
#[derive(Clone, Debug)]
pub struct PortReport {
    /// Interface name.
    pub ifname: String,
    /// Queue.
    pub queue: u32,
    /// Copy or zero-copy.
    pub bound: BoundMode,
    /// Mode of the XDP program steering to the port (`None`: TX only).
    pub xdp_mode: Option<XdpMode>,
    /// The kernel's AF_XDP statistics (`None` if they could not be read).
    pub kernel: Option<XdpStats>,
    /// TX kicks the kernel answered with EAGAIN/EBUSY.
    pub tx_busy: u64,
}

impl WorkerReport {
    /// The report of a worker that ran `queue` on `umem`.
    pub fn of(umem: &Umem, queue: u32) -> WorkerReport {
        WorkerReport {
            queue,
            counts: umem.counts(),
            frame_addrs: umem.frame_addrs(),
            umem_parts: umem.parts(),
            ports: umem
                .port_ids()
                .map(|p| PortReport {
                    ifname: umem.ifname(p).to_owned(),
                    queue: umem.queue(p),
                    bound: umem.mode(p),
                    xdp_mode: umem.program(p).map(|x| x.mode()),
                    kernel: umem.statistics(p).ok(),
                    tx_busy: umem.tx_busy(p),
                })
                .collect(),
        }
    }
}

pub(crate) fn in_setup<T: Send + 'static>(
    netns: &Option<String>,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let ns = netns.clone();
    std::thread::spawn(move || {
        if let Some(ns) = ns {
            enter_netns(&ns)?;
        }
        f()
    })
    .join()
    .unwrap_or_else(|_| Err(Error::Config("setup thread panicked".into())))
}

/// The frame budget of one worker: refuse a UMEM that cannot stock the
/// fill rings, the TX rings, the loop's batches and `held_limit` frames.
fn check_budget(setup: &WorkerSetup, ports: &[PortConfig], lc: &LoopConfig) -> Result<()> {
    let needed = Umem::frames_needed(ports, crate::config::APP_RESERVE + lc.held_limit as u64);
    if u64::from(setup.umem.frames) < needed {
        return Err(Error::Config(format!(
            "{} UMEM frames per worker cannot hold what its {} port(s) keep in flight: {needed} \
             needed (fill target + TX ring of each port, {} for the loop's batches, {} held for \
             hooks); use more frames or smaller rings",
            setup.umem.frames,
            ports.len(),
            crate::config::APP_RESERVE,
            lc.held_limit,
        )));
    }
    Ok(())
}

fn queues_of(setup: &WorkerSetup, ifname: &str) -> Result<Vec<u32>> {
    if let Some(q) = &setup.queues {
        return Ok(q.clone());
    }
    let name = ifname.to_owned();
    let n = in_setup(&setup.netns, move || queue_count(&name))?;
    Ok((0..n).collect())
}

fn port_cfg(
    setup: &WorkerSetup,
    ifname: &str,
    queue: u32,
    prog: Option<Arc<XdpProgram>>,
) -> PortConfig {
    let mut c = setup
        .port
        .clone()
        .unwrap_or_else(|| PortConfig::new(ifname, queue));
    c.ifname = ifname.to_owned();
    c.queue = queue;
    c.xdp_mode = setup.xdp_mode;
    c.program = prog;
    c
}

fn attach(setup: &WorkerSetup, ifname: &str) -> Result<Arc<XdpProgram>> {
    let name = ifname.to_owned();
    let mode = setup.xdp_mode;
    in_setup(&setup.netns, move || {
        let n = queue_count(&name)?;
        Ok(Arc::new(XdpProgram::attach(&name, n, mode)?))
    })
}

/// Makes a worker's loop body from its UMEM and the ids of its ports (in
/// the order of its port configs).
type MakeBody = Box<dyn FnOnce(Umem, Vec<PortId>) -> Body + Send>;

/// The openers of the workers: each opens the ports of `ports[i]` and
/// builds its body with `make[i]`. [`UmemMode::Shared`]: one area is
/// registered and every port opened now, on a setup thread (in the
/// namespace); the openers only hand each worker its part.
/// [`UmemMode::PerQueue`]: each opener makes its own UMEM on its thread.
fn openers(
    setup: &WorkerSetup,
    what: &str,
    workers: Vec<(Vec<PortConfig>, MakeBody)>,
) -> Result<Vec<Opener>> {
    let open = open_parts(setup, what, workers)?;
    // Every worker thread enters the namespace first, then opens its
    // ports (or takes its part of the shared area).
    let cpus = setup.cpus.clone().filter(|c| !c.is_empty());
    Ok(open
        .into_iter()
        .enumerate()
        .map(|(i, o)| {
            let ns = setup.netns.clone();
            let cpu = cpus.as_ref().map(|c| c[i % c.len()]);
            Box::new(move || {
                if let Some(c) = cpu {
                    sys::pin_to_cpu(c).map_err(|e| Error::io("sched_setaffinity", e))?;
                }
                if let Some(ns) = ns {
                    enter_netns(&ns)?;
                }
                o()
            }) as Opener
        })
        .collect())
}

fn open_parts(
    setup: &WorkerSetup,
    what: &str,
    workers: Vec<(Vec<PortConfig>, MakeBody)>,
) -> Result<Vec<Opener>> {
    let uc = setup.umem;
    let n = workers.len();
    tracing::info!(
        target: "pfil_afxdp",
        what,
        workers = n,
        umem_mode = %setup.umem_mode,
        frames_per_worker = uc.frames,
        "UMEM mode: {}",
        match setup.umem_mode {
            UmemMode::Shared => "one area shared by every queue's worker",
            UmemMode::PerQueue => "one area per worker",
        }
    );
    match setup.umem_mode {
        UmemMode::PerQueue => Ok(workers
            .into_iter()
            .map(|(ports, make)| {
                Box::new(move || {
                    let mut umem = Umem::new(uc)?;
                    let ids = ports
                        .into_iter()
                        .map(|p| umem.open(p))
                        .collect::<Result<Vec<_>>>()?;
                    Ok(make(umem, ids))
                }) as Opener
            })
            .collect()),
        UmemMode::Shared => {
            let (ports, makes): (Vec<_>, Vec<_>) = workers.into_iter().unzip();
            let parts = in_setup(&setup.netns, move || {
                let mut shared = SharedUmem::new(uc, n)?;
                let mut ids = Vec::with_capacity(n);
                for (i, ports) in ports.into_iter().enumerate() {
                    let part = shared.part(i);
                    ids.push(
                        ports
                            .into_iter()
                            .map(|p| part.open(p))
                            .collect::<Result<Vec<_>>>()?,
                    );
                }
                Ok(shared.into_parts().into_iter().zip(ids).collect::<Vec<_>>())
            })?;
            Ok(parts
                .into_iter()
                .zip(makes)
                .map(|((umem, ids), make)| Box::new(move || Ok(make(umem, ids))) as Opener)
                .collect())
        }
    }
}

/// `sink IF`: one worker per queue receives, runs head `IF` In, drops.
///
/// # Errors
/// The first open error (every worker is stopped then); [`Error::Config`]
/// when the registry has too few free worker slots or the UMEM too few
/// frames ([`Umem::frames_needed`]).
pub fn spawn_sink(
    reg: &Registry,
    ifname: &str,
    setup: &WorkerSetup,
    lc: LoopConfig,
) -> Result<Running> {
    let head = head_for(reg, ifname)?;
    let queues = queues_of(setup, ifname)?;
    let ws = take_workers(reg, queues.len())?;
    check_budget(setup, &[port_cfg(setup, ifname, 0, None)], &lc)?;
    let prog = attach(setup, ifname)?;
    let mut workers: Vec<(Vec<PortConfig>, MakeBody)> = Vec::new();
    let mut stats = Vec::new();
    for q in queues {
        let st = Arc::new(Stats::default());
        stats.push(st.clone());
        let (head, reg) = (head.clone(), reg.clone());
        let make: MakeBody = Box::new(move |mut umem: Umem, ids: Vec<PortId>| {
            let port = ids[0];
            Box::new(move |w: &mut Worker, lc: &LoopConfig| {
                let mut lw = LoopWorker {
                    reg: &reg,
                    worker: w,
                    stats: &st,
                    back: None,
                };
                let r = sink_loop(&mut umem, (port, &head), &mut lw, lc);
                umem.stop_rx(port);
                (Some(WorkerReport::of(&umem, q)), r)
            }) as Body
        });
        workers.push((vec![port_cfg(setup, ifname, q, Some(prog.clone()))], make));
    }
    let openers = openers(setup, "sink", workers)?;
    start("sink", ws, openers, stats, lc)
}

/// `forward A B`: one worker per queue forwards A⇄B through A's in head and
/// B's out head (and back), both ports of a queue on one UMEM (part). Both
/// interfaces must be in the same namespace. `stats` holds, per queue, a→b
/// then b→a.
///
/// # Errors
/// As [`spawn_sink`].
pub fn spawn_forward(
    reg: &Registry,
    a: &str,
    b: &str,
    setup: &WorkerSetup,
    lc: LoopConfig,
) -> Result<Running> {
    let head_a = head_for(reg, a)?;
    let head_b = head_for(reg, b)?;
    let queues = queues_of(setup, a)?;
    let ws = take_workers(reg, queues.len())?;
    check_budget(
        setup,
        &[port_cfg(setup, a, 0, None), port_cfg(setup, b, 0, None)],
        &lc,
    )?;
    let prog_a = attach(setup, a)?;
    let prog_b = attach(setup, b)?;
    let mut workers: Vec<(Vec<PortConfig>, MakeBody)> = Vec::new();
    let mut stats = Vec::new();
    for q in queues {
        let ab = Arc::new(Stats::default());
        let ba = Arc::new(Stats::default());
        stats.push(ab.clone());
        stats.push(ba.clone());
        let pa = port_cfg(setup, a, q, Some(prog_a.clone()));
        let pb = port_cfg(setup, b, q, Some(prog_b.clone()));
        let (ha, hb, reg) = (head_a.clone(), head_b.clone(), reg.clone());
        let make: MakeBody = Box::new(move |mut umem: Umem, ids: Vec<PortId>| {
            let (pa, pb) = (ids[0], ids[1]);
            Box::new(move |w: &mut Worker, lc: &LoopConfig| {
                let mut lw = LoopWorker {
                    reg: &reg,
                    worker: w,
                    stats: &ab,
                    back: Some(&ba),
                };
                let r = forward_loop(&mut umem, (pa, pb), (&ha, &hb), &mut lw, lc);
                umem.stop_rx(pa);
                umem.stop_rx(pb);
                (Some(WorkerReport::of(&umem, q)), r)
            }) as Body
        });
        workers.push((vec![pa, pb], make));
    }
    let openers = openers(setup, "forward", workers)?;
    start("forward", ws, openers, stats, lc)
}

/// `gen IF`: one worker per queue (usually just queue 0) builds and sends
/// frames through head `IF` Out. Each worker sends `gen.count` frames.
///
/// # Errors
/// As [`spawn_sink`].
pub fn spawn_gen(
    reg: &Registry,
    ifname: &str,
    setup: &WorkerSetup,
    gen: GenConfig,
    lc: LoopConfig,
) -> Result<Running> {
    let head = head_for(reg, ifname)?;
    let queues = setup.queues.clone().unwrap_or_else(|| vec![0]);
    let ws = take_workers(reg, queues.len())?;
    check_budget(setup, &[port_cfg(setup, ifname, 0, None).tx_only()], &lc)?;
    let mut workers: Vec<(Vec<PortConfig>, MakeBody)> = Vec::new();
    let mut stats = Vec::new();
    for q in queues {
        let st = Arc::new(Stats::default());
        stats.push(st.clone());
        let pc = port_cfg(setup, ifname, q, None).tx_only();
        let (head, reg, gen) = (head.clone(), reg.clone(), gen.clone());
        let make: MakeBody = Box::new(move |mut umem: Umem, ids: Vec<PortId>| {
            let port = ids[0];
            Box::new(move |w: &mut Worker, lc: &LoopConfig| {
                let mut lw = LoopWorker {
                    reg: &reg,
                    worker: w,
                    stats: &st,
                    back: None,
                };
                let r = gen_loop(&mut umem, (port, &head), &mut lw, &gen, lc);
                (Some(WorkerReport::of(&umem, q)), r)
            }) as Body
        });
        workers.push((vec![pc], make));
    }
    let openers = openers(setup, "gen", workers)?;
    start("gen", ws, openers, stats, lc)
}
