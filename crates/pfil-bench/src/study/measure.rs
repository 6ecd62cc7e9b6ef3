//! One timed run: reader threads running batches through a subject, and
//! optionally a writer republishing its chain in the background.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use pfil::{Packet, Worker};
use pfil_bench::Subject;

use super::matrix::Work;

/// Bytes per study frame (a minimal Ethernet frame).
pub const FRAME_LEN: usize = 64;

/// In duration mode, readers look at the stop flag after about this many
/// packets, so that batch size 1 does not pay a flag load per packet.
const CHECK_PACKETS: usize = 256;

/// What one run measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunResult {
    /// Nanoseconds per packet per thread: the readers' summed busy time
    /// over the packets they ran.
    pub ns_per_packet: f64,
    /// Packets run by all readers.
    pub packets: u64,
    /// Relinks the writer made (0 without a writer).
    pub relinks: u64,
    /// How long the writer ran (it starts before the readers' start signal
    /// and stops after they end), so `relinks / writer_time` is its rate.
    pub writer_time: Duration,
    /// Wall time from the start signal to the last reader's end.
    pub wall: Duration,
}

/// Runs `threads` readers over `subject` for `work`, each with its own
/// worker slot and batch of `batch` frames, with a writer calling
/// [`Subject::relink`] `writer_hz` times a second if given. The writer
/// starts before the readers' start signal and stops after they finish.
pub fn measure(
    subject: &Subject,
    threads: usize,
    batch: usize,
    work: Work,
    writer_hz: Option<f64>,
) -> RunResult {
    let start = Barrier::new(threads + 1);
    let stop = AtomicBool::new(false);
    let writer_stop = AtomicBool::new(false);
    thread::scope(|s| {
        let writer = writer_hz.map(|hz| {
            let writer_stop = &writer_stop;
            s.spawn(move || write_loop(subject, hz, writer_stop))
        });
        let readers: Vec<_> = (0..threads)
            .map(|_| {
                let (start, stop) = (&start, &stop);
                s.spawn(move || read_loop(subject, batch, work, start, stop))
            })
            .collect();
        start.wait();
        let t0 = Instant::now();
        if let Work::Millis(ms) = work {
            thread::sleep(Duration::from_millis(ms));
            stop.store(true, Ordering::Relaxed);
        }
        let per_reader: Vec<(Duration, u64)> = readers
            .into_iter()
            .map(|h| h.join().expect("reader thread panicked"))
            .collect();
        let wall = t0.elapsed();
        writer_stop.store(true, Ordering::Relaxed);
        let (relinks, writer_time) = writer.map_or((0, Duration::ZERO), |h| {
            h.join().expect("writer thread panicked")
        });
        let busy: f64 = per_reader.iter().map(|(d, _)| d.as_nanos() as f64).sum();
        let packets: u64 = per_reader.iter().map(|&(_, n)| n).sum();
        RunResult {
            ns_per_packet: busy / packets.max(1) as f64,
            packets,
            relinks,
            writer_time,
            wall,
        }
    })
}

/// One reader: takes a worker slot, builds its batch, waits for the start
/// signal, then runs batches until the work is done.
fn read_loop(
    subject: &Subject,
    batch: usize,
    work: Work,
    start: &Barrier,
    stop: &AtomicBool,
) -> (Duration, u64) {
    let mut worker = subject
        .registry()
        .worker()
        .expect("the subject has a worker slot per reader");
    let mut frames = vec![[0u8; FRAME_LEN]; batch];
    let mut pkts: Vec<Packet<'_>> = frames.iter_mut().map(|f| Packet::new(&mut f[..])).collect();
    // Touch the code and the batch once before the clock starts.
    run_batch(subject, &mut worker, &mut pkts);
    start.wait();
    let t0 = Instant::now();
    let packets = match work {
        Work::Packets(n) => {
            let batches = n.div_ceil(batch as u64);
            for _ in 0..batches {
                run_batch(subject, &mut worker, &mut pkts);
            }
            batches * batch as u64
        }
        Work::Millis(_) => {
            let per_check = (CHECK_PACKETS / batch).max(1);
            let mut batches = 0u64;
            loop {
                for _ in 0..per_check {
                    run_batch(subject, &mut worker, &mut pkts);
                }
                batches += per_check as u64;
                if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            batches * batch as u64
        }
    };
    let elapsed = t0.elapsed();
    assert!(
        pkts.iter().all(|p| p.verdict().is_pass()),
        "study packets never match a rule"
    );
    (elapsed, packets)
}

#[inline]
fn run_batch(subject: &Subject, worker: &mut Worker, pkts: &mut [Packet<'_>]) {
    for p in pkts.iter_mut() {
        p.reset();
    }
    subject.run(worker, pkts);
    black_box(&mut *pkts);
}

/// The writer: relinks on a fixed schedule (`hz` a second, catching up
/// without bursts if it falls behind) until told to stop; returns the
/// number of relinks and how long it ran.
fn write_loop(subject: &Subject, hz: f64, stop: &AtomicBool) -> (u64, Duration) {
    let period = Duration::from_secs_f64(1.0 / hz);
    let started = Instant::now();
    let mut next = started;
    let mut relinks = 0;
    // At least one relink per run, even if the readers are done first.
    loop {
        subject.relink();
        relinks += 1;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        next += period;
        let now = Instant::now();
        if next > now {
            thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    (relinks, started.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfil_bench::Strategy;
    use std::sync::Arc;

    #[test]
    fn packet_mode_runs_exactly_whole_batches_and_counts() {
        let count = pfil_filters::Count::new(3);
        let subject = Subject::new(Strategy::Epoch, vec![Arc::new(count.clone())], 2);
        let r = measure(&subject, 2, 32, Work::Packets(100), Some(1000.0));
        // 4 batches of 32 per thread, plus the untimed first batch.
        assert_eq!(r.packets, 2 * 128);
        assert_eq!(count.get(pfil::Dir::In).packets, 2 * (128 + 32));
        assert!(r.relinks >= 1);
        assert!(r.ns_per_packet > 0.0);
    }

    #[test]
    fn duration_mode_stops() {
        let subject = Subject::new(Strategy::MutexPacket, vec![Arc::new(pfil_filters::Null)], 1);
        let r = measure(&subject, 1, 1, Work::Millis(2), None);
        assert!(r.packets > 0);
        assert_eq!(r.relinks, 0);
    }
}
