//! The event maps: a perf event array (`BPF_MAP_TYPE_PERF_EVENT_ARRAY`),
//! one ring a worker as the kernel's is one ring a CPU, and a ring
//! buffer (`BPF_MAP_TYPE_RINGBUF`), one ring all workers share. Programs
//! write records into them (`bpf_perf_event_output`,
//! `bpf_ringbuf_output`); the control side takes them out
//! ([`Map::drain_events`], `pfilctl map HOOK NAME event_pipe`).
//!
//! # What a program sees, as in the kernel
//! - A perf event array's slot `i` is worker `i`'s ring, as a reader
//!   (libbpf's `perf_buffer`, xdpdump) opens one perf event a CPU and
//!   puts it at that CPU's index. A worker writes its own slot
//!   (`BPF_F_CURRENT_CPU`, or its own index); another worker's slot is
//!   `-EOPNOTSUPP` (the kernel's event is bound to another CPU), an index
//!   past the workers `-ENOENT` (no event there), past `max_entries`
//!   `-E2BIG`. A ring holds [`PERF_RING_BYTES`] bytes of records, each
//!   taking what the kernel's `PERF_RECORD_SAMPLE` takes (an 8-byte
//!   header, a 4-byte size, the data, padded to 8): a record that does
//!   not fit is `-ENOSPC` and counted lost, as the kernel counts it
//!   (`PERF_RECORD_LOST`).
//! - A ring buffer holds `max_entries` bytes (a power of 2, a whole
//!   number of pages, as the kernel wants it), each record its data and
//!   an 8-byte header, padded to 8, and is full when a record would
//!   take the producer position `max_entries` bytes or more past the
//!   consumer's: `-EAGAIN`, as the kernel's. `bpf_ringbuf_query` reads
//!   the same positions the kernel's does.
//!
//! Nothing here blocks a worker for long: a ring is a mutex the control
//! side holds only to take the records out.

use parking_lot::Mutex;

use super::ring::Ring;
use super::{Map, MapDef, MapError, MapType};

/// Bytes of records one worker's perf ring holds (64 pages, as a reader
/// such as xdpdump maps per CPU).
pub const PERF_RING_BYTES: usize = 64 * 4096;

/// The most bytes of `bpf_ringbuf_reserve` records one worker holds at
/// once (its reservation area: the ring's size if smaller); past it a
/// reservation is null, as a full ring's.
pub const RESERVE_AREA: usize = 1 << 20;

/// `BPF_RB_*` flags of `bpf_ringbuf_output` (wake-up hints: no reader
/// sleeps on a ring here).
const BPF_RB_NO_WAKEUP: u64 = 1;
const BPF_RB_FORCE_WAKEUP: u64 = 2;
/// A ring buffer's map flag `BPF_F_NUMA_NODE`, the one the kernel takes.
const BPF_F_NUMA_NODE: u32 = 4;
/// Page size the kernel wants a ring buffer's size a multiple of.
const PAGE: usize = 4096;

/// One record a program wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The perf event array's slot (the worker) it was written to;
    /// `None` for a ring buffer.
    pub slot: Option<u32>,
    /// The bytes: the program's data, then (perf event array) the
    /// packet's bytes it asked for. Without the kernel's padding.
    pub data: Vec<u8>,
}

/// What [`Map::drain_events`] took out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drained {
    /// The records, in the order each ring got them (the perf event
    /// array's slots one after the other).
    pub events: Vec<Event>,
    /// Records lost since the last drain because a ring was full, by
    /// slot (a ring buffer: slot 0).
    pub lost: Vec<(u32, u64)>,
}

/// An event map's rings.
#[derive(Debug)]
pub(crate) enum Events {
    /// A perf event array: one ring a worker (slots past them are empty).
    Perf(Box<[Mutex<Ring>]>),
    /// A ring buffer of `size` bytes.
    Buffer { size: usize, ring: Mutex<Ring> },
}

/// What a record of `len` bytes takes in a perf ring: the sample's
/// header, its size word and the data, padded to 8.
fn perf_cost(len: usize) -> usize {
    8 + (4 + len).div_ceil(8) * 8
}

/// What a record of `len` bytes takes in a ring buffer: its header and
/// the data, padded to 8 (`round_up(size + BPF_RINGBUF_HDR_SZ, 8)`).
fn ring_cost(len: usize) -> usize {
    (len + 8).div_ceil(8) * 8
}

impl Events {
    /// The rings of `def` for `workers` workers, or why the kernel would
    /// refuse the map (a ring buffer's size, its keys and values; a perf
    /// event array's).
    pub(crate) fn new(def: &MapDef, workers: usize) -> Result<Events, MapError> {
        let inv = |m: String| MapError::Invalid(format!("map {:?}: {m}", def.name));
        let (ks, vs, n) = (def.key_size, def.value_size, def.max_entries as usize);
        match def.kind {
            MapType::PerfEventArray => {
                if ks != 4 || vs != 4 {
                    return Err(inv(format!(
                        "a perf_event_array has 4-byte keys and values, not {ks} and {vs}"
                    )));
                }
                let slots = workers.max(1).min(n);
                Ok(Events::Perf(
                    (0..slots)
                        .map(|_| Mutex::new(Ring::new(PERF_RING_BYTES)))
                        .collect(),
                ))
            }
            _ => {
                if ks != 0 || vs != 0 {
                    return Err(inv(format!(
                        "a ringbuf has no keys or values (sizes 0), not {ks} and {vs}"
                    )));
                }
                if !n.is_power_of_two() || n % PAGE != 0 {
                    return Err(inv(format!(
                        "a ringbuf's max_entries is its size in bytes, a power of 2 and a \
                         multiple of {PAGE}, not {n}"
                    )));
                }
                if n > super::MAX_ARENA {
                    return Err(inv(format!(
                        "a ringbuf of {n} bytes is over {} bytes",
                        super::MAX_ARENA
                    )));
                }
                if def.flags & !BPF_F_NUMA_NODE != 0 {
                    return Err(inv(format!(
                        "ringbuf flags {:#x}: the kernel takes only BPF_F_NUMA_NODE",
                        def.flags
                    )));
                }
                Ok(Events::Buffer {
                    size: n,
                    ring: Mutex::new(Ring::new(n)),
                })
            }
        }
    }

    /// `bpf_perf_event_output`'s write of `data` then `tail` into slot
    /// `index` (`u32::MAX`: the worker's own) from `worker`, of a map of
    /// `max_entries`: 0 or the kernel's errno.
    pub(crate) fn perf_output(
        &self,
        worker: usize,
        index: u64,
        max_entries: usize,
        data: &[u8],
        tail: &[u8],
    ) -> i64 {
        const E2BIG: i64 = -7;
        const ENOENT: i64 = -2;
        const EOPNOTSUPP: i64 = -95;
        const ENOSPC: i64 = -28;
        let Events::Perf(slots) = self else {
            return -22;
        };
        let i = if index == u64::from(u32::MAX) {
            worker
        } else {
            index as usize
        };
        if i >= max_entries {
            return E2BIG;
        }
        let Some(ring) = slots.get(i) else {
            return ENOENT;
        };
        if i != worker {
            return EOPNOTSUPP;
        }
        let cost = perf_cost(data.len() + tail.len());
        let mut r = ring.lock();
        if !r.fits(cost) {
            r.lost += 1;
            return ENOSPC;
        }
        r.push(cost, &[data, tail]);
        0
    }

    /// `bpf_ringbuf_output`'s write of `data` with `flags`: 0 or the
    /// kernel's errno.
    pub(crate) fn ring_output(&self, data: &[u8], flags: u64) -> i64 {
        const EAGAIN: i64 = -11;
        let Events::Buffer { ring, .. } = self else {
            return -22;
        };
        if flags & !(BPF_RB_NO_WAKEUP | BPF_RB_FORCE_WAKEUP) != 0 {
            return -22;
        }
        let cost = ring_cost(data.len());
        let mut r = ring.lock();
        if !r.fits(cost) {
            r.lost += 1;
            return EAGAIN;
        }
        r.push(cost, &[data]);
        0
    }

    /// `bpf_ringbuf_reserve` of `size` bytes with `flags` by `worker`,
    /// whose reservation area has `area` bytes: the record's offset in
    /// that area, or `None` (the helper's null) when the kernel's would
    /// fail (flags, a full ring) or the worker's reservations held at
    /// once would pass its area. `fill` gives the record's bytes for its
    /// offset, to start as the kernel's ([`Ring::reserve`]). One lock.
    ///
    /// [`Ring::reserve`]: super::ring::Ring::reserve
    pub(crate) fn reserve<'a>(
        &self,
        worker: usize,
        size: u64,
        flags: u64,
        area: usize,
        fill: impl FnOnce(usize) -> Option<&'a mut [u8]>,
    ) -> Option<usize> {
        let Events::Buffer { ring, .. } = self else {
            return None;
        };
        if flags != 0 || size > u64::from(u32::MAX / 4) {
            return None;
        }
        let len = size as usize;
        let cost = ring_cost(len);
        let mut r = ring.lock();
        if !r.fits(cost) {
            r.lost += 1;
            return None;
        }
        r.reserve(worker, len, cost, area, fill)
    }

    /// `bpf_ringbuf_submit` or `_discard` (`discard`) of `worker`'s
    /// record at `off` (`bytes` gives the record's bytes for its length):
    /// whether it held one there. One lock.
    pub(crate) fn commit<'a>(
        &self,
        worker: usize,
        off: usize,
        discard: bool,
        bytes: impl FnOnce(usize) -> Option<&'a [u8]>,
    ) -> bool {
        match self {
            Events::Buffer { ring, .. } => ring.lock().commit(worker, off, discard, bytes),
            Events::Perf(_) => false,
        }
    }

    /// Discard every record `worker` reserved and did not give back (its
    /// run faulted): a reader does not wait on them for ever.
    pub(crate) fn abandon(&self, worker: usize) {
        if let Events::Buffer { ring, .. } = self {
            ring.lock().abandon(worker);
        }
    }

    /// `bpf_ringbuf_query`: available data, size, consumer and producer
    /// positions (`flags` 0 to 3), else 0.
    pub(crate) fn ring_query(&self, flags: u64) -> u64 {
        let Events::Buffer { size, ring } = self else {
            return 0;
        };
        let r = ring.lock();
        match flags {
            0 => r.prod - r.cons,
            1 => *size as u64,
            2 => r.cons,
            3 => r.prod,
            _ => 0,
        }
    }

    /// Take up to `max` records out (the consumer moves past them), and
    /// the losses counted since the last drain.
    fn drain(&self, max: usize) -> Drained {
        let mut out = Drained::default();
        let take =
            |slot: Option<u32>, r: &mut Ring, out: &mut Drained, cost: fn(usize) -> usize| {
                let room = max.saturating_sub(out.events.len());
                r.drain(room, cost, |data| out.events.push(Event { slot, data }));
                if r.lost > 0 {
                    out.lost
                        .push((slot.unwrap_or(0), std::mem::take(&mut r.lost)));
                }
            };
        match self {
            Events::Perf(slots) => {
                for (i, ring) in slots.iter().enumerate() {
                    take(Some(i as u32), &mut ring.lock(), &mut out, perf_cost);
                }
            }
            Events::Buffer { ring, .. } => take(None, &mut ring.lock(), &mut out, ring_cost),
        }
        out
    }
}

impl Map {
    /// Control side: take up to `max` of the records programs wrote into
    /// this perf event array or ring buffer, oldest first (each slot's
    /// in turn), and the records lost since the last drain.
    ///
    /// # Errors
    /// A map of another type, or one not made.
    pub fn drain_events(&self, max: usize) -> Result<Drained, MapError> {
        self.check_runs()?;
        match &self.events {
            Some(e) => Ok(e.drain(max)),
            None => Err(MapError::Invalid(format!(
                "map {:?} is a {}: it holds entries, not events (dump it)",
                self.name,
                self.kind.name()
            ))),
        }
    }

    /// Whether the map holds entries (lookups, updates, deletes, dumps);
    /// a map of events refuses them, naming how to read it.
    ///
    /// # Errors
    /// A perf event array or a ring buffer.
    pub fn check_entries(&self) -> Result<(), MapError> {
        if self.events.is_none() {
            return Ok(());
        }
        Err(MapError::Invalid(format!(
            "map {:?} is a {}: it holds the events programs write, not entries (read them \
             with `pfilctl map HOOK {} event_pipe`)",
            self.name,
            self.kind.name(),
            self.name
        )))
    }

    /// The event rings (perf event arrays and ring buffers).
    pub(crate) fn events(&self) -> Option<&Events> {
        self.events.as_ref()
    }

    /// A ring buffer's reservation area for `worker`: its start and size.
    pub(crate) fn reserve_area(&self, worker: usize) -> (u64, usize) {
        let r = self.worker_region(worker);
        (r.start, r.len as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::MapOrigin;

    fn def(kind: MapType, ks: u32, vs: u32, n: u32) -> MapDef {
        MapDef {
            name: "ev".into(),
            kind,
            key_size: ks,
            value_size: vs,
            max_entries: n,
            flags: 0,
            origin: MapOrigin::Btf,
            readonly: false,
            init: None,
            tails: Vec::new(),
            sym_off: 0,
            section: 0,
        }
    }

    #[test]
    fn a_ring_buffer_is_full_as_the_kernels_is() {
        let e = Events::new(&def(MapType::Ringbuf, 0, 0, 4096), 2).unwrap();
        // 4096 bytes: records of 8 + 120 = 128 bytes; the 32nd would take
        // the producer 4096 past the consumer (more than size - 1).
        for i in 0..31 {
            assert_eq!(e.ring_output(&[i as u8; 120], 0), 0, "record {i}");
        }
        assert_eq!(e.ring_output(&[0; 120], 0), -11);
        // 8 bytes are left: a record of 112 bytes (120) fits, then none.
        assert_eq!(e.ring_output(&[0; 112], 0), 0);
        assert_eq!(e.ring_output(&[0; 1], 0), -11);
        assert_eq!(e.ring_query(0), 31 * 128 + 120);
        assert_eq!(e.ring_query(1), 4096);
        assert_eq!(e.ring_output(&[0; 1], 4), -22);
        let d = e.drain(10);
        assert_eq!(d.events.len(), 10);
        assert_eq!(d.events[3].data, vec![3u8; 120]);
        assert_eq!(e.ring_query(2), 10 * 128);
        assert_eq!(e.ring_query(3), 31 * 128 + 120);
        assert_eq!(e.ring_output(&[0; 120], 0), 0);
        assert_eq!(e.drain(100).events.len(), 23);
        assert_eq!(e.ring_query(0), 0);
    }

    #[test]
    fn a_perf_slot_is_its_workers_and_counts_what_it_loses() {
        let e = Events::new(&def(MapType::PerfEventArray, 4, 4, 4), 2).unwrap();
        assert_eq!(e.perf_output(1, u64::from(u32::MAX), 4, &[1, 2], &[3]), 0);
        assert_eq!(e.perf_output(1, 1, 4, &[4], &[]), 0);
        assert_eq!(e.perf_output(1, 0, 4, &[4], &[]), -95);
        assert_eq!(e.perf_output(1, 2, 4, &[4], &[]), -2);
        assert_eq!(e.perf_output(1, 4, 4, &[4], &[]), -7);
        let big = vec![0u8; PERF_RING_BYTES / 2];
        assert_eq!(e.perf_output(0, 0, 4, &big, &[]), 0);
        assert_eq!(e.perf_output(0, 0, 4, &big, &[]), -28);
        let d = e.drain(usize::MAX);
        assert_eq!(d.events.len(), 3);
        assert_eq!(d.events[1].slot, Some(1));
        assert_eq!(d.events[1].data, vec![1, 2, 3]);
        assert_eq!(d.lost, vec![(0, 1)]);
        assert!(e.drain(usize::MAX).lost.is_empty());
        assert_eq!(e.perf_output(0, 0, 4, &big, &[]), 0);
    }

    #[test]
    fn the_kernels_refusals_of_the_definitions() {
        assert!(Events::new(&def(MapType::Ringbuf, 0, 0, 6000), 1).is_err());
        assert!(Events::new(&def(MapType::Ringbuf, 0, 0, 2048), 1).is_err());
        assert!(Events::new(&def(MapType::Ringbuf, 4, 0, 4096), 1).is_err());
        assert!(Events::new(&def(MapType::PerfEventArray, 4, 8, 4), 1).is_err());
    }
}
