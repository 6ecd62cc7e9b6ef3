//! Per-packet cost of running a chain: the registry's batch run against the
//! unsynchronized hand loop (the limit) and `std::sync::RwLock` taken per
//! packet; 1 and 2 threads; with and without a writer relinking 1000 times
//! a second.
//!
//! `cargo bench -p pfil-benches --bench run_hooks`
//!
//! One iteration = every thread resets the verdicts of its batch of 64
//! packets and runs it; throughput is packets over all threads, so
//! `time / BATCH` is ns per packet per thread. The packets are built once,
//! as a driver reuses its descriptors.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pfil::{Filter, Packet};
use pfil_bench::{Strategy, Subject};

const BATCH: usize = 64;

/// Time `iters` batches on each of `threads` threads; the slowest thread's
/// time counts.
fn timed(subject: &Arc<Subject>, threads: usize, iters: u64) -> Duration {
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (s, b) = (subject.clone(), barrier.clone());
            thread::spawn(move || {
                let mut w = s.registry().worker().expect("worker slot");
                let mut frames = [[0u8; 64]; BATCH];
                let mut it = frames.iter_mut();
                let mut pkts: [Packet<'_>; BATCH] =
                    std::array::from_fn(|_| Packet::new(it.next().unwrap()));
                b.wait();
                let start = Instant::now();
                for _ in 0..iters {
                    for p in pkts.iter_mut() {
                        p.reset();
                    }
                    s.run(&mut w, &mut pkts);
                    std::hint::black_box(&mut pkts);
                }
                start.elapsed()
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .max()
        .unwrap()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("run_hooks");
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    g.sample_size(20);
    for writer in [false, true] {
        for threads in [1, 2] {
            g.throughput(Throughput::Elements((BATCH * threads) as u64));
            for s in [Strategy::Unsync, Strategy::Epoch, Strategy::RwLockPacket] {
                // With the writer on, unsync gets the same writer thread
                // waking 1000 times a second with nothing to publish: the
                // cost of the thread itself, apart from publication.
                let hooks: Vec<Arc<dyn Filter>> = vec![Arc::new(pfil_filters::Null)];
                let subject = Arc::new(Subject::new(s, hooks, threads));
                let stop = Arc::new(AtomicBool::new(false));
                let bg = writer.then(|| {
                    let (s, stop) = (subject.clone(), stop.clone());
                    thread::spawn(move || {
                        // 1000 relinks a second, bounded by the stop flag.
                        while !stop.load(Ordering::Relaxed) {
                            s.relink();
                            thread::sleep(Duration::from_millis(1));
                        }
                    })
                });
                let id = format!("{}/{}", s, if writer { "writer" } else { "quiet" });
                g.bench_function(BenchmarkId::new(id, format!("{threads}t")), |b| {
                    b.iter_custom(|iters| timed(&subject, threads, iters))
                });
                stop.store(true, Ordering::Relaxed);
                if let Some(h) = bg {
                    h.join().unwrap();
                }
            }
        }
    }
    g.finish();
}

/// Private, so the macro's undocumented `pub fn` is not public API.
mod group {
    use super::*;
    criterion_group!(benches, bench);
}
use group::benches;
criterion_main!(benches);
