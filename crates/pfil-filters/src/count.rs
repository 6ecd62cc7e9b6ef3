//! The counting hook: packets and bytes per direction, in per-worker slots.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use pfil::{Ctx, Dir, Filter, Packet, Verdict};

#[derive(Default)]
struct Slot {
    packets: [AtomicU64; 2],
    bytes: [AtomicU64; 2],
}

/// Counts packets and bytes per direction and passes them.
///
/// Clone it before adding it as a hook: clones share the counts, so the
/// clone you keep reads what the hook counted. Each worker writes only its
/// own cache-line-padded slot (a load and a store, no read-modify-write).
#[derive(Clone)]
pub struct Count {
    slots: Arc<[CachePadded<Slot>]>,
}

/// Packets and bytes seen in one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirCount {
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
}

impl Count {
    /// A counter for up to `max_workers` workers (use
    /// [`Registry::max_workers`](pfil::Registry::max_workers)).
    pub fn new(max_workers: usize) -> Count {
        Count {
            slots: (0..max_workers.max(1))
                .map(|_| CachePadded::new(Slot::default()))
                .collect(),
        }
    }

    /// Totals for one direction, summed over workers.
    pub fn get(&self, dir: Dir) -> DirCount {
        let d = dir.index();
        self.slots
            .iter()
            .fold(DirCount::default(), |a, s| DirCount {
                packets: a.packets + s.packets[d].load(Relaxed),
                bytes: a.bytes + s.bytes[d].load(Relaxed),
            })
    }
}

impl Filter for Count {
    #[inline]
    fn filter(&self, pkt: &mut Packet<'_>, ctx: &Ctx<'_>) -> Verdict {
        if let Some(s) = self.slots.get(ctx.worker) {
            let d = ctx.dir.index();
            // Single writer per slot: a plain load and store suffice.
            s.packets[d].store(s.packets[d].load(Relaxed) + 1, Relaxed);
            s.bytes[d].store(s.bytes[d].load(Relaxed) + pkt.len() as u64, Relaxed);
        }
        Verdict::Pass
    }

    fn spec(&self) -> Option<String> {
        Some("count".into())
    }
}

impl std::fmt::Debug for Count {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Count")
            .field("in", &self.get(Dir::In))
            .field("out", &self.get(Dir::Out))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfil::{Dirs, PacketKind, Placement, Registry};

    #[test]
    fn counts_more_than_64_workers() {
        const N: usize = 130;
        let reg = Registry::with_max_workers(N);
        let head = reg
            .register_head("h", PacketKind::Ethernet, Dirs::IN)
            .unwrap();
        let count = Count::new(reg.max_workers());
        reg.add_hook("count:all", PacketKind::Ethernet, Dirs::IN, count.clone())
            .unwrap();
        reg.link("h", Dir::In, "count:all", Placement::Prepend)
            .unwrap();
        let mut workers: Vec<_> = (0..N).map(|_| reg.worker().unwrap()).collect();
        let mut f = [0u8; 10];
        for w in &mut workers {
            head.run_one(Dir::In, w, &mut Packet::new(&mut f));
        }
        assert_eq!(
            count.get(Dir::In),
            DirCount {
                packets: N as u64,
                bytes: 10 * N as u64
            }
        );
    }

    #[test]
    fn counts_per_direction_across_workers() {
        let reg = Registry::with_max_workers(2);
        let head = reg
            .register_head("h", PacketKind::Ethernet, Dirs::BOTH)
            .unwrap();
        let count = Count::new(reg.max_workers());
        reg.add_hook("count:all", PacketKind::Ethernet, Dirs::BOTH, count.clone())
            .unwrap();
        reg.link("h", Dir::In, "count:all", Placement::Prepend)
            .unwrap();
        reg.link("h", Dir::Out, "count:all", Placement::Prepend)
            .unwrap();
        let (mut w1, mut w2) = (reg.worker().unwrap(), reg.worker().unwrap());
        let mut a = [0u8; 100];
        let mut b = [0u8; 60];
        head.run_one(Dir::In, &mut w1, &mut Packet::new(&mut a));
        head.run_one(Dir::In, &mut w2, &mut Packet::new(&mut b));
        head.run_one(Dir::Out, &mut w2, &mut Packet::new(&mut b));
        assert_eq!(
            count.get(Dir::In),
            DirCount {
                packets: 2,
                bytes: 160
            }
        );
        assert_eq!(
            count.get(Dir::Out),
            DirCount {
                packets: 1,
                bytes: 60
            }
        );
    }
}
