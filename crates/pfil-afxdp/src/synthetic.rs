//! The synthetic port: frames built in memory and run through the heads
//! with the same loop shape as an AF_XDP worker (batch, one pin, in head,
//! out head, count). Needs no privileges, so `pfild --synthetic` and tests
//! exercise the datapath anywhere.

use std::sync::atomic::Ordering;
use std::time::Instant;

use arrayvec::ArrayVec;
use pfil::{Dir, Head, Packet, Registry, Verdict, Worker};

use crate::error::Result;
use crate::run::{GenConfig, LoopConfig, Stats, BATCH};

/// Frame buffer size of the synthetic port.
pub const SYNTHETIC_FRAME: usize = 2048;

/// A synthetic port on one worker: a ring of in-memory frames.
pub struct SyntheticPort {
    bufs: Vec<[u8; SYNTHETIC_FRAME]>,
    lens: [usize; BATCH],
    templates: Vec<Vec<u8>>,
    next: usize,
    ifindex: u32,
    queue: u32,
}

impl SyntheticPort {
    /// A port that produces the frames `gen` describes (its count and rate
    /// are used by [`SyntheticPort::run`]), reporting `ifindex`/`queue` as
    /// the frames' origin.
    ///
    /// # Errors
    /// [`crate::Error::Config`] for a frame that does not fit.
    pub fn new(gen: &GenConfig, ifindex: u32, queue: u32) -> Result<SyntheticPort> {
        Ok(SyntheticPort {
            bufs: vec![[0u8; SYNTHETIC_FRAME]; BATCH],
            lens: [0; BATCH],
            templates: gen.templates(SYNTHETIC_FRAME)?,
            next: 0,
            ifindex,
            queue,
        })
    }

    /// Fill up to `n` frames (at most [`BATCH`]) and return how many.
    fn produce(&mut self, n: usize) -> usize {
        let n = n.min(BATCH);
        for i in 0..n {
            let t = &self.templates[self.next];
            self.next = (self.next + 1) % self.templates.len();
            self.bufs[i][..t.len()].copy_from_slice(t);
            self.lens[i] = t.len();
        }
        n
    }

    /// Run batches until `gen.count` frames (0: until stopped) or
    /// `lc.stop`: each batch runs `head_in` In, then `head_out` Out (if
    /// given) over what passed, in one pinned generation. Passed frames are
    /// counted as `tx` when there is an out head, as delivered otherwise.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &mut self,
        head_in: &Head,
        head_out: Option<&Head>,
        reg: &Registry,
        worker: &mut Worker,
        stats: &Stats,
        gen: &GenConfig,
        lc: &LoopConfig,
    ) -> Result<()> {
        let start = Instant::now();
        let mut built = 0u64;
        while !lc.stop.load(Ordering::Relaxed) && (gen.count == 0 || built < gen.count) {
            let want = gen.budget(built, start);
            if want == 0 {
                // Only the rate can say 0 here: the loop ends at `count`.
                std::thread::sleep(std::time::Duration::from_micros(50));
                continue;
            }
            let n = self.produce(want as usize);
            built += n as u64;
            let (ifindex, queue) = (self.ifindex, self.queue);
            let lens = self.lens;
            let mut pkts: ArrayVec<Packet<'_>, BATCH> = self.bufs[..n]
                .iter_mut()
                .zip(lens)
                .map(|(b, l)| Packet::new(&mut b[..l]).with_origin(ifindex, queue))
                .collect();
            let hin = head_in.is_hooked(Dir::In);
            let hout = head_out.filter(|h| h.is_hooked(Dir::Out));
            let (mut ind, mut inc) = (0, 0);
            if hin || hout.is_some() {
                let snap = reg.snapshot();
                if hin {
                    snap.run(head_in, Dir::In, worker, &mut pkts);
                    ind = pkts
                        .iter()
                        .filter(|p| p.verdict() == Verdict::Dropped)
                        .count() as u64;
                    inc = pkts
                        .iter()
                        .filter(|p| p.verdict() == Verdict::Consumed)
                        .count() as u64;
                }
                if let Some(h) = hout {
                    snap.run(h, Dir::Out, worker, &mut pkts);
                }
            }
            let d = pkts
                .iter()
                .filter(|p| p.verdict() == Verdict::Dropped)
                .count() as u64;
            let c = pkts
                .iter()
                .filter(|p| p.verdict() == Verdict::Consumed)
                .count() as u64;
            let passed = (n as u64).saturating_sub(d + c);
            let add = |a: &std::sync::atomic::AtomicU64, v: u64| {
                a.fetch_add(v, Ordering::Relaxed);
            };
            add(&stats.generated, n as u64);
            add(&stats.rx, n as u64);
            add(&stats.in_dropped, ind);
            add(&stats.in_consumed, inc);
            // The out head never sees what the in head stopped, so these
            // only grow; saturate anyway (a datapath never panics).
            add(&stats.out_dropped, d.saturating_sub(ind));
            add(&stats.out_consumed, c.saturating_sub(inc));
            add(&stats.passed, passed);
            if head_out.is_some() {
                add(&stats.tx, passed);
            }
            add(&stats.batches, 1);
        }
        Ok(())
    }
}

impl std::fmt::Debug for SyntheticPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyntheticPort")
            .field("ifindex", &self.ifindex)
            .field("queue", &self.queue)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfil::{Ctx, Dirs, PacketKind, Placement};

    #[test]
    fn synthetic_counts_and_filters() {
        let reg = Registry::new();
        let a = reg
            .register_head("syn0", PacketKind::Ethernet, Dirs::BOTH)
            .unwrap();
        let b = reg
            .register_head("syn1", PacketKind::Ethernet, Dirs::BOTH)
            .unwrap();
        reg.add_hook(
            "udp:drop7",
            PacketKind::Ethernet,
            Dirs::BOTH,
            |p: &mut Packet<'_>, _: &Ctx<'_>| match p.headers().and_then(|h| h.transport) {
                Some(t) if t.dst_port == 7 => Verdict::Dropped,
                _ => Verdict::Pass,
            },
        )
        .unwrap();
        reg.link("syn0", Dir::In, "udp:drop7", Placement::Prepend)
            .unwrap();
        let gen = GenConfig {
            count: 10_000,
            dst_ports: vec![7, 8, 9, 10],
            ..GenConfig::default()
        };
        let mut port = SyntheticPort::new(&gen, 1, 0).unwrap();
        let mut w = reg.worker().unwrap();
        let stats = Stats::default();
        port.run(&a, Some(&b), &reg, &mut w, &stats, &gen, &LoopConfig::new())
            .unwrap();
        let s = stats.snapshot();
        assert_eq!(s.generated, 10_000);
        assert_eq!(s.in_dropped, 2_500);
        assert_eq!(s.tx, 7_500);
        assert_eq!(s.generated, s.tx + s.filtered());
    }
}
