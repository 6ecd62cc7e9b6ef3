//! Set up the registry, hooks and workers for one mode, watch them, stop
//! them, report.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pfil::{Dir, Registry, DEFAULT_MAX_WORKERS};
use pfil_afxdp::live::{spawn_live_gen, LiveConfig, LiveFinished, LiveRunning};
use pfil_afxdp::run::{self, GenConfig, LoopConfig, WorkerReport, WorkerSetup};
use pfil_afxdp::{PortConfig, Umem, UmemConfig, APP_RESERVE};
use pfil_port::synthetic::{spawn_synthetic, SyntheticRunning, MAX_REPLAY_FRAME};
use pfil_port::Stats;

use crate::args::{Args, Control, Engine, Mode, Queues};
use crate::hooks;
use crate::notify::Notifier;
use crate::reload::Reloader;
use crate::report::{self, Flow, Sampler};
use crate::settings::Settings;

/// Why the run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// SIGINT or SIGTERM.
    Signal,
    /// `--seconds` elapsed.
    Time,
    /// `--count` frames reached.
    Count,
    /// Every worker returned by itself (a generator done, or an error).
    Finished,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Signal => "signal",
            StopReason::Time => "time limit",
            StopReason::Count => "frame count reached",
            StopReason::Finished => "workers finished",
        })
    }
}

fn loop_config(a: &Args) -> LoopConfig {
    LoopConfig {
        spin_us: a.spin_us,
        outboxes: hooks::outboxes(),
        ..LoopConfig::new()
    }
}

fn gen_config(a: &Args, count: u64) -> GenConfig {
    GenConfig {
        count,
        window: None,
        ..a.gen.clone()
    }
}

/// Split `total` (0: unbounded) over `n` workers.
fn split(total: u64, n: u32, i: u32) -> u64 {
    if total == 0 {
        return 0;
    }
    let n = u64::from(n.max(1));
    total / n + u64::from(u64::from(i) < total % n)
}

fn check_netns(ns: &str) -> Result<(), String> {
    let path = if ns.starts_with('/') {
        ns.to_owned()
    } else {
        format!("/run/netns/{ns}")
    };
    if Path::new(&path).exists() {
        Ok(())
    } else {
        Err(format!(
            "no network namespace `{ns}` ({path} does not exist): create it with `ip netns add {ns}` or list them with `ip netns list`"
        ))
    }
}

/// Every queue of `iface`, read in `netns`.
fn all_queues(iface: &str, netns: &Option<String>) -> Result<u32, String> {
    let (iface, ns) = (iface.to_owned(), netns.clone());
    std::thread::spawn(move || {
        if let Some(ns) = ns {
            pfil_afxdp::enter_netns(&ns)?;
        }
        pfil_afxdp::queue_count(&iface)
    })
    .join()
    .map_err(|_| "queue lookup thread panicked".to_owned())?
    .map_err(|e| e.to_string())
}

/// Most bytes the frames of a `--pcap` capture may take in memory (their
/// data plus [`FRAME_OVERHEAD`] each): the capture is read into memory
/// once and replayed from there.
pub const MAX_CAPTURE_BYTES: u64 = 1 << 30;

/// Bytes a captured frame costs in memory besides its data (its `Vec`),
/// counted against [`MAX_CAPTURE_BYTES`].
const FRAME_OVERHEAD: u64 = 48;

/// A capture read for `--pcap`.
#[derive(Debug, Default)]
pub struct Capture {
    /// Its frames, as captured (zero-length ones left out).
    pub frames: Vec<Vec<u8>>,
    /// Frames cut short by the capture's snap length (replayed as
    /// captured).
    pub cut: usize,
    /// Zero-length frames left out (nothing a filter could look at).
    pub empty: usize,
}

/// The frames of a capture file (pcap or pcapng, Ethernet), as captured,
/// each up to [`MAX_REPLAY_FRAME`] bytes, all of them up to
/// [`MAX_CAPTURE_BYTES`] in memory; zero-length frames are left out and
/// counted. A capture with no frame is not an error (it plays nothing).
///
/// # Errors
/// The file and what is wrong with it: unreadable, not Ethernet, a frame
/// or the whole over its cap (naming the cap).
pub fn read_capture(path: &Path) -> Result<Capture, String> {
    read_capture_capped(path, MAX_CAPTURE_BYTES)
}

/// [`read_capture`] with the frames' memory capped at `max_bytes`.
fn read_capture_capped(path: &Path, max_bytes: u64) -> Result<Capture, String> {
    let at = |e: &dyn std::fmt::Display| format!("--pcap {}: {e}", path.display());
    let mut cap = pcap::Capture::from_file(path).map_err(|e| at(&e))?;
    let lt = cap.get_datalink();
    if lt != pcap::Linktype::ETHERNET {
        return Err(at(&format!(
            "link type {} ({}); pfild replays Ethernet captures",
            lt.get_name().unwrap_or_else(|_| "?".into()),
            lt.0
        )));
    }
    let mut c = Capture::default();
    let mut bytes = 0u64;
    loop {
        match cap.next_packet() {
            Ok(p) => {
                let n = c.frames.len() + c.empty + 1;
                if p.data.is_empty() {
                    c.empty += 1;
                    continue;
                }
                if p.data.len() > MAX_REPLAY_FRAME {
                    return Err(at(&format!(
                        "frame {n} has {} bytes, over the {MAX_REPLAY_FRAME} bytes a replayed \
                         frame may have",
                        p.data.len()
                    )));
                }
                bytes += p.data.len() as u64 + FRAME_OVERHEAD;
                if bytes > max_bytes {
                    return Err(at(&format!(
                        "the frames up to frame {n} take more than {max_bytes} bytes in memory \
                         (the cap of a replay, {} MiB; each frame counts {FRAME_OVERHEAD} bytes \
                         more than its length): replay a part of it (e.g. \
                         `editcap -r FILE PART 1-100000`)",
                        max_bytes >> 20
                    )));
                }
                c.cut += usize::from(p.header.caplen < p.header.len);
                c.frames.push(p.data.to_vec());
            }
            Err(pcap::Error::NoMorePackets) => break,
            Err(e) => return Err(at(&format!("after {} frames: {e}", c.frames.len()))),
        }
    }
    Ok(c)
}

/// `a` with the capture of `--pcap` loaded as the frames to send and the
/// frame count it makes (`--loop` times the capture; an empty capture
/// plays nothing, once).
fn with_capture(a: &Args, path: &Path) -> Result<Args, String> {
    let c = read_capture(path)?;
    let count = (c.frames.len() as u64)
        .checked_mul(a.loops)
        .ok_or_else(|| {
            format!(
                "--pcap {}: {} frames x --loop {} is more frames than a run counts (2^64 - 1); \
             use --loop 0 to play until stopped",
                path.display(),
                c.frames.len(),
                a.loops
            )
        })?;
    let mut notes = Vec::new();
    if c.cut > 0 {
        notes.push(format!(
            "{} cut short by the capture's snap length, replayed as captured",
            c.cut
        ));
    }
    if c.empty > 0 {
        notes.push(format!("{} of zero length left out", c.empty));
    }
    eprintln!(
        "pfild: {}: {} frames{}, {}",
        path.display(),
        c.frames.len(),
        if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join("; "))
        },
        match a.loops {
            _ if c.frames.is_empty() => "nothing to play".to_owned(),
            0 => "played until stopped".to_owned(),
            1 => "played once".to_owned(),
            n => format!("played {n} times"),
        }
    );
    let mut a = a.clone();
    a.count = Some(count);
    // The frames are moved, not copied: the port shares them.
    a.gen.replay = Some(Arc::new(c.frames));
    Ok(a)
}

/// `--ring` when not given, for a sink.
pub const DEFAULT_SINK_RING: u32 = 4096;
/// `--ring` when not given, for forward and gen.
pub const DEFAULT_RING: u32 = 2048;

/// `--check-config`: the configuration as `run` would take it (the
/// settings were parsed with the arguments), its hooks built and its
/// chains planned against the heads of its interfaces; nothing starts.
/// Returns the line to print.
///
/// # Errors
/// The file's name, with what is wrong and where.
pub fn check(a: &Args) -> Result<String, String> {
    let path = a.config.as_deref().ok_or("--check-config needs a FILE")?;
    let reg = Registry::new();
    let ifaces = a.mode.ifaces();
    let warnings = environment(a)?;
    for i in &ifaces {
        run::head_for(&reg, i).map_err(|e| format!("head `{i}`: {e}"))?;
    }
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let text = pfil_ctl::config::read_file(path)?;
    let cfg = pfil_ctl::config::Config::parse(&text).map_err(|e| at(&e))?;
    let plan = cfg
        .plan(&reg, &hooks::catalog(), None)
        .map_err(|e| at(&e))?;
    let links = plan
        .changes()
        .iter()
        .filter(|c| matches!(c, pfil_ctl::config::Change::Link { .. }))
        .count();
    // A dry run of the transaction: what the registry would refuse (a
    // link to a hook the file does not declare) is an error here too.
    plan.commit(&reg, true).map_err(|e| at(&e))?;
    let warned: String = warnings.iter().map(|w| format!("{w}\n")).collect();
    Ok(format!(
        "{warned}{}: good: {} {}, {} hook(s), {links} link(s)",
        path.display(),
        match a.mode {
            Mode::Sink { .. } => "sink",
            Mode::Forward { .. } => "forward",
            Mode::Gen { .. } => "gen",
        },
        ifaces.join(" "),
        cfg.hooks().len(),
    ))
}

/// What `run` would find wrong at start about this machine, for
/// `--check-config`: `--queues all` with the synthetic port, a network
/// namespace or an interface in it that does not exist (looked up only
/// with the privileges to enter it), a capture that cannot be read.
/// An interface missing where no netns is configured is a warning, not
/// an error: pfild may be started in another namespace than the check
/// (`ip netns exec`, systemd's `NetworkNamespacePath=`). Privileges to
/// open AF_XDP sockets are not checked: a configuration is often
/// checked by another user. Returns the warnings.
fn environment(a: &Args) -> Result<Vec<String>, String> {
    if a.synthetic && matches!(a.queues, Some(Queues::All)) {
        return Err(QUEUES_ALL_SYNTHETIC.into());
    }
    if let Some(ns) = &a.netns {
        check_netns(ns)?;
    }
    if let Some(p) = &a.pcap {
        with_capture(a, p)?;
    }
    let mut warnings = Vec::new();
    let may_enter = a.netns.is_none() || pfil_afxdp::check_privileges().is_ok();
    if !a.synthetic && may_enter {
        for i in a.mode.ifaces() {
            match (all_queues(i, &a.netns), &a.netns) {
                (Ok(_), _) => {}
                (Err(e), Some(ns)) => return Err(format!("interface `{i}` in netns `{ns}`: {e}")),
                (Err(e), None) => warnings.push(format!(
                    "warning: interface `{i}`: {e} (pfild started here would fail)"
                )),
            }
        }
    }
    Ok(warnings)
}

/// `--queues all` asks the interface how many queues it has.
const QUEUES_ALL_SYNTHETIC: &str =
    "--queues all needs an interface; with --synthetic give a worker count (--queues N)";

/// Run the app the arguments describe (`file`: the `--config` file and
/// the settings pfild started with, for reloads); `Err` is the message
/// to print.
pub fn run(a: &Args, file: Option<(PathBuf, Settings)>) -> Result<(), String> {
    let replayed;
    let a = match &a.pcap {
        Some(p) => {
            replayed = with_capture(a, p)?;
            &replayed
        }
        None => a,
    };
    if !a.synthetic {
        pfil_afxdp::check_privileges().map_err(|e| {
            format!("{e}\n       (or try the in-memory port without privileges: add --synthetic)")
        })?;
    }
    if let Some(ns) = &a.netns {
        check_netns(ns)?;
    }

    // Stop flag for SIGINT/SIGTERM; a second signal exits at once.
    // SIGHUP reloads (its default action would kill pfild).
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())
        .map_err(|e| format!("installing the signal handler: {e}"))?;
    let term = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, term.clone())
            .map_err(|e| format!("installing the signal handler: {e}"))?;
        signal_hook::flag::register(sig, term.clone())
            .map_err(|e| format!("installing the signal handler: {e}"))?;
    }

    // Measured (BENCHMARKS.md, "ring and batch sizes"): at the top rate a
    // sink loses a third as many frames with 4096 entries as with 2048, at
    // the same rate; 8192 is slower (the kernel copies into a larger set of
    // frames). A forwarder is bound by its TX path, where 4096 did not help.
    let ring = a.ring.unwrap_or(match a.mode {
        Mode::Sink { .. } => DEFAULT_SINK_RING,
        _ => DEFAULT_RING,
    });
    let mut port = PortConfig::new("unset", 0);
    port.bind = a.bind;
    port.rx_size = ring;
    port.tx_size = ring;
    port.fill_size = ring;
    port.comp_size = ring;
    // Keep the whole fill ring stocked: the kernel drops what finds it empty.
    port.fill_target = ring;
    let lc = loop_config(a);
    // The frame budget of a worker: the fill target, RX and TX rings of each of
    // its ports (a forwarder has two), its batches and the held frames.
    let ports = match a.mode {
        Mode::Forward { .. } => vec![port.clone(), port.clone()],
        Mode::Gen { .. } => vec![port.clone().tx_only()],
        Mode::Sink { .. } => vec![port.clone()],
    };
    let needed = Umem::frames_needed(&ports, APP_RESERVE + lc.held_limit as u64);
    let frames = match a.umem_frames {
        Some(n) if u64::from(n) < needed && !a.synthetic => {
            return Err(format!(
                "--umem-frames {n} is too small for --ring {ring}: each worker needs {needed} \
                 frames ({} port(s) x (fill + RX + TX rings) + {} for batches and held frames); \
                 raise --umem-frames or lower --ring",
                ports.len(),
                APP_RESERVE + lc.held_limit as u64
            ))
        }
        Some(n) => n,
        None => {
            u32::try_from(needed.max(8192)).map_err(|_| format!("--ring {ring} is too large"))?
        }
    };
    let umem = UmemConfig {
        frames,
        ring,
        ..UmemConfig::default()
    };
    let queues: Option<Vec<u32>> = match (a.queues, &a.mode) {
        (Some(Queues::Count(n)), _) => Some((0..n).collect()),
        (Some(Queues::All), _) if a.synthetic => return Err(QUEUES_ALL_SYNTHETIC.into()),
        (Some(Queues::All), Mode::Gen { iface }) => {
            Some((0..all_queues(iface, &a.netns)?).collect())
        }
        (Some(Queues::All), _) => None,
        (None, Mode::Gen { .. }) => Some(vec![0]),
        (None, _) if a.synthetic => Some(vec![0]),
        (None, _) => None,
    };
    let setup = WorkerSetup {
        netns: a.netns.clone(),
        queues: queues.clone(),
        umem,
        umem_mode: a.umem_mode,
        xdp_mode: a.xdp_mode,
        port: Some(port),
        cpus: a.cpus.clone(),
    };

    // One registry worker slot per worker: NICs may have more queues than
    // the default slot count.
    let live = a.engine == Engine::XdpLive && matches!(a.mode, Mode::Gen { .. });
    let workers = match (&queues, &a.mode) {
        _ if live => a.live.threads as usize,
        (Some(q), _) => q.len(),
        (None, Mode::Sink { iface }) | (None, Mode::Forward { a: iface, .. }) => {
            all_queues(iface, &a.netns)? as usize
        }
        (None, Mode::Gen { .. }) => 1,
    };
    let reg = Registry::with_max_workers(workers.max(DEFAULT_MAX_WORKERS));
    reg.set_sampling(a.sample_every);
    hooks::init_outboxes(reg.max_workers());
    let ifaces = a.mode.ifaces();
    for i in &ifaces {
        run::head_for(&reg, i).map_err(|e| format!("head `{i}`: {e}"))?;
    }
    let hook_dir = match a.mode {
        Mode::Gen { .. } => Dir::Out,
        _ => Dir::In,
    };
    let hook_names = hooks::link_all(&reg, &a.hooks, &ifaces, hook_dir)?;
    let config_line = match &a.config {
        Some(path) => Some(hooks::apply_file(&reg, path)?),
        None => None,
    };
    let notifier = Arc::new(Notifier::from_env());
    let reloader = file.map(|(path, settings)| {
        Arc::new(Reloader::new(path, settings, reg.clone(), notifier.clone()))
    });
    let (control, control_line) = start_control(&a.control, &reg, reloader.clone())?;
    let metrics = a
        .metrics
        .as_deref()
        .map(|addr| {
            let mut opts = pfil_ctl::metrics::MetricsOptions::default();
            opts.filters = a.metrics_filters;
            pfil_ctl::metrics::MetricsServer::start_with(reg.clone(), addr, opts)
                .map_err(|e| format!("--metrics: {e}"))
        })
        .transpose()?;

    // Start the workers; every flow records which heads its frames pass.
    let mut runs: Vec<Run> = Vec::new();
    let mut flows: Vec<Flow> = Vec::new();
    let count = a.count.unwrap_or(0);
    let started = (|| -> pfil_afxdp::Result<()> {
        if a.synthetic {
            let n = queues.as_ref().map_or(1, |q| q.len() as u32);
            let (hin, hout) = match &a.mode {
                Mode::Sink { iface } => (iface.as_str(), None),
                Mode::Forward { a, b } => (a.as_str(), Some(b.as_str())),
                Mode::Gen { iface } => (iface.as_str(), Some(iface.as_str())),
            };
            let gen_mode = matches!(a.mode, Mode::Gen { .. });
            for i in 0..n {
                let r = spawn_synthetic(
                    &reg,
                    hin,
                    hout,
                    1,
                    gen_config(a, split(count, n, i)),
                    loop_config(a),
                )?;
                for st in &r.stats {
                    flows.push(Flow {
                        stats: st.clone(),
                        input: (!gen_mode).then(|| hin.to_owned()),
                        output: hout.map(str::to_owned),
                        generator: gen_mode,
                    });
                }
                runs.push(Run::Synthetic(r));
            }
            return Ok(());
        }
        match &a.mode {
            Mode::Sink { iface } => {
                let r = run::spawn_sink(&reg, iface, &setup, lc.clone())?;
                for st in &r.stats {
                    flows.push(Flow {
                        stats: st.clone(),
                        input: Some(iface.clone()),
                        output: None,
                        generator: false,
                    });
                }
                runs.push(Run::Xdp(r));
            }
            Mode::Forward { a: x, b: y } => {
                let r = run::spawn_forward(&reg, x, y, &setup, lc.clone())?;
                for (i, st) in r.stats.iter().enumerate() {
                    let (src, dst) = if i % 2 == 0 { (x, y) } else { (y, x) };
                    flows.push(Flow {
                        stats: st.clone(),
                        input: Some(src.clone()),
                        output: Some(dst.clone()),
                        generator: false,
                    });
                }
                runs.push(Run::Xdp(r));
            }
            Mode::Gen { iface } if live => {
                let cfg = LiveConfig {
                    netns: a.netns.clone(),
                    ..a.live.clone()
                };
                let r = spawn_live_gen(&reg, iface, &cfg, &gen_config(a, count), lc.clone())?;
                for st in &r.stats {
                    flows.push(Flow {
                        stats: st.clone(),
                        input: None,
                        output: Some(iface.clone()),
                        generator: true,
                    });
                }
                runs.push(Run::Live(r));
            }
            Mode::Gen { iface } => {
                let qs = queues.clone().unwrap_or_else(|| vec![0]);
                let n = qs.len() as u32;
                for (i, q) in qs.into_iter().enumerate() {
                    let s = WorkerSetup {
                        queues: Some(vec![q]),
                        ..setup.clone()
                    };
                    let r = run::spawn_gen(
                        &reg,
                        iface,
                        &s,
                        gen_config(a, split(count, n, i as u32)),
                        loop_config(a),
                    )?;
                    for st in &r.stats {
                        flows.push(Flow {
                            stats: st.clone(),
                            input: None,
                            output: Some(iface.clone()),
                            generator: true,
                        });
                    }
                    runs.push(Run::Xdp(r));
                }
            }
        }
        Ok(())
    })();
    if let Err(e) = started {
        // Stop whatever started before the failure (their drop stops them).
        for r in runs {
            let _ = r.join_all();
        }
        return Err(e.to_string());
    }

    let mode_desc = describe(a, &runs);
    eprintln!("pfild: {mode_desc}; stop with Ctrl-C");
    if !hook_names.is_empty() {
        eprintln!(
            "pfild: hooks on {} {}: {}",
            ifaces.join(", "),
            hook_dir,
            hook_names.join(" -> ")
        );
    }
    if let Some(l) = config_line {
        eprintln!("pfild: {l}");
    }
    eprintln!("pfild: {control_line}");
    notifier.ready(&mode_desc);
    if let Some(m) = &metrics {
        eprintln!(
            "pfild: metrics on http://{}/metrics (OpenMetrics)",
            m.addr()
        );
    }

    // Watch: stop conditions every 10 ms, status every second.
    let generator = matches!(a.mode, Mode::Gen { .. });
    let t0 = Instant::now();
    let mut sampler = Sampler::new(&flows, t0);
    let mut next_status = t0 + Duration::from_secs(1);
    let reason = loop {
        std::thread::sleep(Duration::from_millis(10));
        let now = Instant::now();
        sampler.tick(&flows, now);
        if term.load(Ordering::Relaxed) {
            break StopReason::Signal;
        }
        notifier.tick(now);
        if hup.swap(false, Ordering::Relaxed) {
            match &reloader {
                // Errors are logged by the reloader; the old
                // configuration keeps running.
                Some(r) => drop(r.reload()),
                None => {
                    eprintln!("pfild: SIGHUP: started without --config FILE, nothing to reload")
                }
            }
        }
        if runs.iter().all(|r| r.finished()) {
            break StopReason::Finished;
        }
        if let Some(s) = a.seconds {
            if now.duration_since(t0).as_secs_f64() >= s {
                break StopReason::Time;
            }
        }
        if !generator && !a.synthetic && count > 0 && sampler.frames() >= count {
            break StopReason::Count;
        }
        if now >= next_status {
            next_status += Duration::from_secs(1);
            // Housekeeping: drop what retired filters left behind a ticket
            // that timed out, and log the quarantined fail-open links that
            // writes without a reply reaped (a control write names them in
            // its reply). Fail-closed ones are left to the operator
            // (`pfilctl reap`): no write but an explicit one removes them,
            // and `reap_quarantine` is not called here, since it would.
            reg.reclaim();
            for r in reg.take_reaped() {
                let c = r.retirement.counters();
                eprintln!(
                    "pfild: quarantined link {} {} {} (fail {}) reaped: final packets {} dropped {} faults {}",
                    r.head, r.dir, r.hook, r.fail, c.packets, c.dropped, c.faults
                );
            }
            if !a.quiet || notifier.active() {
                let mut line = sampler.status(&flows, now.duration_since(t0));
                if let Some(c) = report::costliest(&reg) {
                    line += "; ";
                    line += &c;
                }
                notifier.status(&line);
                if !a.quiet {
                    eprintln!("{line}");
                }
            }
        }
    };
    let elapsed = t0.elapsed();
    notifier.stopping();
    // No configuration changes while the workers drain and report.
    drop(control);
    // Shuts its connections down: waits on no client (at most
    // pfil_ctl::metrics::SHUTDOWN_WAIT for their threads).
    drop(metrics);
    for r in &runs {
        r.stop();
    }
    let mut reports: Vec<WorkerReport> = Vec::new();
    let mut errors = Vec::new();
    let mut live_done = None;
    for r in runs {
        // Every report, also of a worker that failed: its frames are
        // accounted for all the same.
        let (mut done, failed, l) = r.join_all();
        reports.append(&mut done);
        errors.extend(failed);
        live_done = live_done.or(l);
    }
    sampler.tick(&flows, Instant::now());
    let title = format!(
        "pfild {mode_desc}: stopped after {:.2} s ({reason})",
        elapsed.as_secs_f64()
    );
    let ok = report::totals(
        &title,
        &report::Summary {
            reg: &reg,
            ifaces: &ifaces,
            flows: &flows,
            reports: &reports,
            sampler: &sampler,
            elapsed,
            xdp: !a.synthetic && !live,
            live: live_done.as_ref().map(|d| report::Live {
                done: d,
                ifname: a.mode.ifaces()[0],
                repeat: a.live.repeat,
                batch_size: a.live.batch_size,
                warm: d.warm,
            }),
        },
    );
    if !errors.is_empty() {
        return Err(format!("a worker failed: {}", errors.join("; ")));
    }
    if !ok {
        return Err("frame accounting does not add up (see the port lines above)".into());
    }
    Ok(())
}

/// Start the control server `--control` asks for. Returns it (if any) and
/// the start-up line that says where it listens. At the default path, a
/// socket held by a running pfild (or no default path) is a warning and
/// pfild runs without control; an explicit path that fails is an error.
fn start_control(
    c: &Control,
    reg: &Registry,
    reloader: Option<Arc<Reloader>>,
) -> Result<(Option<pfil_ctl::Server>, String), String> {
    let path = match c {
        Control::Off => return Ok((None, "control: off (--no-control)".into())),
        Control::Path(p) => Some(p.clone()),
        Control::Default => None,
    };
    let mut cfg = pfil_ctl::ControlConfig::new("pfild");
    if let Some(r) = reloader {
        cfg = cfg.on_reload(move || r.reload());
    }
    if let Some(p) = &path {
        cfg = cfg.path(p);
    }
    match pfil_ctl::Server::start(reg.clone(), Arc::new(hooks::catalog()), cfg) {
        Ok(s) => {
            let line = format!(
                "control socket {} (pfilctl --socket {} heads)",
                s.path().display(),
                s.path().display()
            );
            Ok((Some(s), line))
        }
        Err(e) if path.is_none() && (e.is_busy() || matches!(e, pfil_ctl::Error::NoRuntimeDir)) => {
            Ok((
                None,
                format!("warning: running without control: {e} (give another with --control PATH, or --no-control)"),
            ))
        }
        Err(e) => Err(format!("--control: {e}")),
    }
}

fn describe(a: &Args, runs: &[Run]) -> String {
    let workers: usize = runs.iter().map(|r| r.stats().len()).sum();
    let live = runs.iter().any(|r| matches!(r, Run::Live(_)));
    let port = if a.synthetic {
        "synthetic in-memory port".to_owned()
    } else if live {
        match &a.netns {
            Some(ns) => format!("in-kernel generator (BPF_PROG_RUN live frames) in netns {ns}"),
            None => "in-kernel generator (BPF_PROG_RUN live frames)".to_owned(),
        }
    } else {
        match &a.netns {
            Some(ns) => format!("AF_XDP in netns {ns}"),
            None => "AF_XDP".to_owned(),
        }
    };
    let what = match &a.mode {
        Mode::Sink { iface } => format!("sink {iface}"),
        Mode::Forward { a: x, b: y } if a.synthetic => format!("forward {x} -> {y}"),
        Mode::Forward { a: x, b: y } => format!("forward {x} <-> {y}"),
        Mode::Gen { iface } => format!("gen {iface}"),
    };
    let unit = if matches!(a.mode, Mode::Forward { .. }) && !a.synthetic {
        "directional worker loop"
    } else if live {
        "thread"
    } else {
        "worker"
    };
    format!(
        "{what} ({port}, {workers} {unit}{})",
        if workers == 1 { "" } else { "s" }
    )
}

/// The workers of one spawner: AF_XDP ones, synthetic ones, or the
/// in-kernel generator's threads.
enum Run {
    Xdp(run::Running),
    Synthetic(SyntheticRunning),
    Live(LiveRunning),
}

impl Run {
    fn stats(&self) -> &[Arc<Stats>] {
        match self {
            Run::Xdp(r) => &r.stats,
            Run::Synthetic(r) => &r.stats,
            Run::Live(r) => &r.stats,
        }
    }

    fn stop(&self) {
        match self {
            Run::Xdp(r) => r.stop(),
            Run::Synthetic(r) => r.stop(),
            Run::Live(r) => r.stop(),
        }
    }

    fn finished(&self) -> bool {
        match self {
            Run::Xdp(r) => r.finished(),
            Run::Synthetic(r) => r.finished(),
            Run::Live(r) => r.finished(),
        }
    }

    /// Stop, wait, and return the AF_XDP reports, every error (a
    /// synthetic pool whose frames do not add up is one) and the
    /// in-kernel generator's end.
    fn join_all(self) -> (Vec<WorkerReport>, Vec<String>, Option<LiveFinished>) {
        fn errs<E: std::fmt::Display>(e: &[E]) -> Vec<String> {
            e.iter().map(|e| e.to_string()).collect()
        }
        match self {
            Run::Xdp(r) => {
                let done = r.join_all();
                let e = errs(&done.errors);
                (done.reports, e, None)
            }
            Run::Live(r) => {
                let done = r.join_all();
                let e = errs(&done.errors);
                (Vec::new(), e, Some(done))
            }
            Run::Synthetic(r) => {
                let done = r.join_all();
                let mut e = errs(&done.errors);
                // The synthetic pools are accounted for like a UMEM: every
                // frame back in its pool or held by a hook.
                for rep in &done.reports {
                    let c = rep.counts;
                    if !c.adds_up() || c.app != 0 {
                        e.push(format!(
                            "synthetic worker {}: frames unaccounted: {c:?}",
                            rep.queue
                        ));
                    }
                }
                (Vec::new(), e, None)
            }
        }
    }
}

#[cfg(test)]
mod capture_tests {
    use super::*;

    /// The memory cap of a replay: a capture over it is refused with an
    /// error naming the cap (tested with a small cap; the real one is 1 GiB).
    #[test]
    fn a_capture_over_the_memory_cap_is_refused_naming_it() {
        let d = std::env::temp_dir().join(format!("pfild-capcap-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("ten.pcap");
        let frames: Vec<Vec<u8>> = (0..10).map(|_| vec![0xab; 1000]).collect();
        pfil_testnet::write_pcap(&f, 1, &frames);
        let whole = 10 * (1000 + FRAME_OVERHEAD);
        let c = read_capture_capped(&f, whole).unwrap();
        assert_eq!(c.frames.len(), 10);
        let e = read_capture_capped(&f, whole - 1).unwrap_err();
        assert!(
            e.contains(&format!("more than {} bytes in memory", whole - 1))
                && e.contains("frame 10")
                && e.contains("the cap of a replay"),
            "{e}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
