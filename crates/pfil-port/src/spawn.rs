//! Worker threads: start one per opener, all or none, and the handle that
//! stops and joins them. A driver's spawners (which queues, which ports)
//! build the openers; this part is the same for every port type.

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use pfil::{Dirs, Head, PacketKind, Registry, Worker};

use crate::config::LoopConfig;
use crate::error::Error;
use crate::stats::{Stats, StatsSnapshot};

/// What a worker thread returns: its report (`None` if it never opened
/// its ports) and how its loop ended.
pub type Outcome<R, E> = (Option<R>, Result<(), E>);

/// A worker's loop, made on its thread by its [`Opener`].
pub type Body<R, E> = Box<dyn FnOnce(&mut Worker, &LoopConfig) -> Outcome<R, E>>;

/// Runs first on a worker's thread: opens its ports (entering a network
/// namespace first if the driver needs one) and returns its loop.
pub type Opener<R, E> = Box<dyn FnOnce() -> Result<Body<R, E>, E> + Send>;

/// Running workers: their stats, a stop flag, and the join handles. `R` is
/// the driver's report of one worker, `E` its error.
pub struct Running<R, E> {
    /// One entry per loop (a forwarder has two per queue: a→b, b→a).
    pub stats: Vec<Arc<Stats>>,
    /// The loop config shared by the workers (set `stop` to end them).
    pub lc: LoopConfig,
    handles: Vec<JoinHandle<Outcome<R, E>>>,
}

impl<R, E> std::fmt::Debug for Running<R, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("workers", &self.handles.len())
            .field("total", &self.total())
            .finish_non_exhaustive()
    }
}

/// Every worker of a [`Running`] after it ended: the reports (also of the
/// workers whose loop failed: their frames are accounted for all the
/// same) and the errors.
#[derive(Debug)]
pub struct Finished<R, E> {
    /// One report per worker that opened its ports.
    pub reports: Vec<R>,
    /// The errors of the workers that failed.
    pub errors: Vec<E>,
}

impl<R, E> Default for Finished<R, E> {
    fn default() -> Self {
        Finished {
            reports: Vec::new(),
            errors: Vec::new(),
        }
    }
}

impl<R, E> Finished<R, E> {
    /// The reports, or the first error.
    ///
    /// # Errors
    /// The first worker error.
    pub fn into_result(mut self) -> Result<Vec<R>, E> {
        if self.errors.is_empty() {
            Ok(self.reports)
        } else {
            Err(self.errors.swap_remove(0))
        }
    }
}

impl<R, E> Running<R, E> {
    /// The sum of every loop's stats.
    pub fn total(&self) -> StatsSnapshot {
        self.stats
            .iter()
            .map(|s| s.snapshot())
            .fold(StatsSnapshot::default(), |a, b| a + b)
    }

    /// Set the stop flag.
    pub fn stop(&self) {
        self.lc.stop.store(true, Ordering::Relaxed);
    }

    /// Have all workers returned?
    pub fn finished(&self) -> bool {
        self.handles.iter().all(|h| h.is_finished())
    }
}

impl<R, E: From<Error>> Running<R, E> {
    /// Stop (if not yet) and wait for every worker.
    ///
    /// # Errors
    /// The first worker error (see [`Running::join_all`] for every report).
    pub fn join(self) -> Result<Vec<R>, E> {
        self.join_all().into_result()
    }

    /// Stop (if not yet) and wait for every worker; every report and
    /// every error.
    pub fn join_all(self) -> Finished<R, E> {
        self.stop();
        self.wait_all()
    }

    /// Wait for every worker without setting the stop flag (a generator
    /// ends by itself after its count, or stalls out after
    /// `LoopConfig::stall_ms`).
    ///
    /// # Errors
    /// The first worker error; [`Error::Config`] if a worker panicked.
    pub fn wait(self) -> Result<Vec<R>, E> {
        self.wait_all().into_result()
    }

    /// [`Running::wait`], with every report and every error.
    pub fn wait_all(mut self) -> Finished<R, E> {
        let mut out = Finished::default();
        for h in std::mem::take(&mut self.handles) {
            match h.join() {
                Ok((report, result)) => {
                    out.reports.extend(report);
                    if let Err(e) = result {
                        out.errors.push(e);
                    }
                }
                Err(_) => out
                    .errors
                    .push(Error::Config("a worker thread panicked".into()).into()),
            }
        }
        out
    }
}

impl<R, E> Drop for Running<R, E> {
    /// Dropping the handle stops the workers (without waiting for them).
    fn drop(&mut self) {
        self.lc.stop.store(true, Ordering::Relaxed);
    }
}

/// Get or register the Ethernet head `name` (both directions).
///
/// # Errors
/// pfil errors (invalid name).
pub fn head_for(reg: &Registry, name: &str) -> Result<Head, Error> {
    match reg.head(name) {
        Ok(h) => Ok(h),
        Err(_) => Ok(reg.register_head(name, PacketKind::Ethernet, Dirs::BOTH)?),
    }
}

/// Take `n` registry worker slots, all or none.
///
/// # Errors
/// [`Error::Config`] naming the slots needed and free.
pub fn take_workers(reg: &Registry, n: usize) -> Result<Vec<Worker>, Error> {
    let mut ws = Vec::with_capacity(n);
    for _ in 0..n {
        match reg.worker() {
            Ok(w) => ws.push(w),
            Err(e) => {
                return Err(Error::Config(format!(
                    "{n} worker(s) need {n} registry worker slot(s), {} were free ({e}); \
                     build the registry with Registry::with_max_workers(N) for N >= the queues to run",
                    ws.len()
                )))
            }
        }
    }
    Ok(ws)
}

/// The message of a panic's payload (a `&str` or `String`), or a
/// placeholder.
fn panic_message(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// Start one thread per opener with one of `workers` each: open (the
/// opener returns the loop body), report ready, run. Every resource is
/// acquired before the first thread starts; if a thread cannot start or a
/// worker fails to open (its opener returns an error or panics), every
/// started worker is stopped and joined before the error is returned.
///
/// # Errors
/// The first opener error; [`Error::Config`] naming the worker thread
/// (`pfil-WHAT-I`) and the panic's message if an opener panicked;
/// [`Error::Io`] if a thread cannot be spawned.
pub fn start<R: Send + 'static, E: From<Error> + std::fmt::Display + Send + 'static>(
    what: &str,
    workers: Vec<Worker>,
    openers: Vec<Opener<R, E>>,
    stats: Vec<Arc<Stats>>,
    lc: LoopConfig,
) -> Result<Running<R, E>, E> {
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), E>>();
    let n = openers.len();
    debug_assert_eq!(n, workers.len());
    let mut running = Running {
        stats,
        lc,
        handles: Vec::with_capacity(n),
    };
    for (i, (open, mut worker)) in openers.into_iter().zip(workers).enumerate() {
        let lc2 = running.lc.clone();
        let ready = ready_tx.clone();
        let name = format!("pfil-{what}-{i}");
        let thread_name = name.clone();
        let spawned = std::thread::Builder::new()
            .name(thread_name)
            .spawn(move || {
                // Every opener reports exactly once, also when it panics:
                // `start` waits for one report per worker.
                let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(open));
                match opened {
                    Ok(Ok(body)) => {
                        let _ = ready.send(Ok(()));
                        // The sender is not kept while the loop runs.
                        drop(ready);
                        body(&mut worker, &lc2)
                    }
                    Ok(Err(e)) => {
                        let msg = e.to_string();
                        let _ = ready.send(Err(e));
                        let failed = Error::Config(format!("worker {name} failed to open: {msg}"));
                        (None, Err(failed.into()))
                    }
                    Err(panic) => {
                        let failed = || {
                            Error::Config(format!(
                                "worker {name} panicked while opening its ports: {}",
                                panic_message(&*panic)
                            ))
                        };
                        let _ = ready.send(Err(failed().into()));
                        (None, Err(failed().into()))
                    }
                }
            });
        match spawned {
            Ok(h) => running.handles.push(h),
            Err(e) => {
                let _ = running.join_all();
                return Err(Error::Io {
                    what: "spawning a worker thread",
                    source: e,
                }
                .into());
            }
        }
    }
    drop(ready_tx);
    for _ in 0..n {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = running.join_all();
                return Err(e);
            }
            Err(_) => {
                let _ = running.join_all();
                return Err(Error::Config("a worker died while opening".into()).into());
            }
        }
    }
    Ok(running)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// One opener panics while the other opens and runs: `start` returns
    /// an error naming the worker (it waited forever before), and the
    /// running worker is stopped and joined. Bounded by a timeout so a
    /// regression fails instead of hanging.
    #[test]
    fn a_panicking_opener_fails_start_naming_the_worker() {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let reg = Registry::new();
            let ws = take_workers(&reg, 2).unwrap();
            let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let ran2 = ran.clone();
            let runs: Opener<(), Error> = Box::new(move || {
                Ok(Box::new(move |_: &mut Worker, lc: &LoopConfig| {
                    ran2.store(true, Ordering::Relaxed);
                    while !lc.stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    (Some(()), Ok(()))
                }) as Body<(), Error>)
            });
            let panics: Opener<(), Error> = Box::new(|| {
                std::thread::sleep(Duration::from_millis(50));
                panic!("no such device")
            });
            let stats = vec![Arc::new(Stats::default()), Arc::new(Stats::default())];
            let r = start("test", ws, vec![runs, panics], stats, LoopConfig::new());
            let _ = tx.send((
                r.map(|_| ()).map_err(|e| e.to_string()),
                ran.load(Ordering::Relaxed),
            ));
        });
        let (r, _) = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("start returned within 20 s");
        let e = r.expect_err("a panicking opener fails start");
        assert!(e.contains("pfil-test-1"), "{e}");
        assert!(
            e.contains("panicked") && e.contains("no such device"),
            "{e}"
        );
    }
}
