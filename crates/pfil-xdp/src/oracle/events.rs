//! The event maps on the kernel's side of the oracle: for a perf event
//! array, one perf event a CPU (`PERF_COUNT_SW_BPF_OUTPUT`, as libbpf's
//! `perf_buffer` opens them) mapped and put at that CPU's index; for a
//! ring buffer, its consumer and producer pages mapped. Both are read
//! after every run and compared, record for record, with what pfil's
//! maps got ([`Map::drain_events`](crate::Map::drain_events)).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::kernel::{possible_cpus, KernelMap};
use crate::maps::{Event, MapType, PERF_RING_BYTES};

const PAGE: usize = 4096;
/// `PERF_TYPE_SOFTWARE`, `PERF_COUNT_SW_BPF_OUTPUT`, `PERF_SAMPLE_RAW`.
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_BPF_OUTPUT: u64 = 10;
const PERF_SAMPLE_RAW: u64 = 1 << 10;
/// `PERF_RECORD_SAMPLE`.
const PERF_RECORD_SAMPLE: u32 = 9;
/// `PERF_FLAG_FD_CLOEXEC`.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
/// A ring buffer record's header bits (`BPF_RINGBUF_BUSY_BIT`,
/// `BPF_RINGBUF_DISCARD_BIT`).
const BUSY: u32 = 1 << 31;
const DISCARD: u32 = 1 << 30;

/// A shared mapping, unmapped on drop.
struct Mapping {
    at: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(fd: i32, len: usize, offset: usize, write: bool) -> io::Result<Mapping> {
        let prot = libc::PROT_READ | if write { libc::PROT_WRITE } else { 0 };
        // SAFETY: a new shared mapping of `fd`, at an address the kernel
        // picks; nothing else is mapped there.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                fd,
                offset as libc::off_t,
            )
        };
        if at == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { at: at.cast(), len })
    }

    /// The u64 at byte `off` (8-aligned, inside the mapping).
    fn word(&self, off: usize) -> &AtomicU64 {
        assert!(off % 8 == 0 && off + 8 <= self.len);
        // SAFETY: inside the mapping (checked), aligned (a page-aligned
        // mapping, an 8-aligned offset); the kernel writes it atomically.
        unsafe { &*self.at.add(off).cast::<AtomicU64>() }
    }

    /// `len` bytes from byte `off` (inside the mapping).
    fn bytes(&self, off: usize, len: usize) -> Vec<u8> {
        assert!(off + len <= self.len);
        // SAFETY: inside the mapping (checked); the kernel does not write
        // a record's bytes once it published it.
        unsafe { std::slice::from_raw_parts(self.at.add(off), len) }.to_vec()
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps what `new` mapped, once.
        unsafe { libc::munmap(self.at.cast(), self.len) };
    }
}

// SAFETY: the mapping is plain shared memory; the reader uses it from one
// thread at a time.
unsafe impl Send for Mapping {}

/// One CPU's perf event and its ring.
struct PerfRing {
    cpu: u32,
    _fd: OwnedFd,
    pages: Mapping,
}

impl PerfRing {
    /// A `PERF_COUNT_SW_BPF_OUTPUT` event on `cpu` with a ring of
    /// [`PERF_RING_BYTES`], the size of pfil's.
    fn open(cpu: u32) -> io::Result<PerfRing> {
        let mut attr = [0u8; 128];
        attr[0..4].copy_from_slice(&PERF_TYPE_SOFTWARE.to_le_bytes());
        attr[4..8].copy_from_slice(&128u32.to_le_bytes());
        attr[8..16].copy_from_slice(&PERF_COUNT_SW_BPF_OUTPUT.to_le_bytes());
        attr[16..24].copy_from_slice(&1u64.to_le_bytes()); // sample_period
        attr[24..32].copy_from_slice(&PERF_SAMPLE_RAW.to_le_bytes());
        attr[48..52].copy_from_slice(&1u32.to_le_bytes()); // wakeup_events
                                                           // SAFETY: perf_event_open reads the attribute we own; it returns a
                                                           // new fd or -1.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                attr.as_ptr(),
                -1 as libc::pid_t,
                cpu as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let pages = Mapping::new(fd.as_raw_fd(), PAGE + PERF_RING_BYTES, 0, true)?;
        Ok(PerfRing {
            cpu,
            _fd: fd,
            pages,
        })
    }

    /// The samples written since the last read.
    fn read(&self, out: &mut Vec<Event>) {
        // perf_event_mmap_page: data_head at 1024, data_tail at 1032.
        let head = self.pages.word(1024).load(Ordering::Acquire);
        let mut tail = self.pages.word(1032).load(Ordering::Relaxed);
        let size = PERF_RING_BYTES as u64;
        let at = |pos: u64, len: usize| -> Vec<u8> {
            // A record may wrap round the ring's end.
            let off = (pos % size) as usize;
            let first = len.min(PERF_RING_BYTES - off);
            let mut b = self.pages.bytes(PAGE + off, first);
            b.extend(self.pages.bytes(PAGE, len - first));
            b
        };
        while tail < head {
            let h = at(tail, 8);
            let kind = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
            let len = usize::from(u16::from_le_bytes([h[6], h[7]]));
            if len < 8 {
                break;
            }
            if kind == PERF_RECORD_SAMPLE {
                let r = at(tail, len);
                let raw = u32::from_le_bytes([r[8], r[9], r[10], r[11]]) as usize;
                out.push(Event {
                    slot: Some(self.cpu),
                    data: r[12..12 + raw.min(len - 12)].to_vec(),
                });
            }
            tail += len as u64;
        }
        self.pages.word(1032).store(tail, Ordering::Release);
    }
}

/// A ring buffer's pages: the consumer's (written), the producer's and
/// the data (read, mapped twice so that a record never wraps).
struct Ring {
    size: usize,
    consumer: Mapping,
    producer: Mapping,
}

impl Ring {
    fn open(map: &KernelMap) -> io::Result<Ring> {
        let size = map.def.max_entries as usize;
        Ok(Ring {
            size,
            consumer: Mapping::new(map.raw_fd(), PAGE, 0, true)?,
            producer: Mapping::new(map.raw_fd(), PAGE + 2 * size, PAGE, false)?,
        })
    }

    fn read(&self, out: &mut Vec<Event>) {
        let prod = self.producer.word(0).load(Ordering::Acquire);
        let mut cons = self.consumer.word(0).load(Ordering::Relaxed);
        while cons < prod {
            let off = PAGE + (cons as usize & (self.size - 1));
            // SAFETY: the header's u32, inside the producer's mapping
            // (the data is mapped twice past it), 8-aligned.
            let h = unsafe { &*self.producer.at.add(off).cast::<AtomicU32>() };
            let word = h.load(Ordering::Acquire);
            if word & BUSY != 0 {
                break;
            }
            let len = (word & !(BUSY | DISCARD)) as usize;
            if word & DISCARD == 0 {
                out.push(Event {
                    slot: None,
                    data: self.producer.bytes(off + 8, len),
                });
            }
            cons += (len + 8).div_ceil(8) as u64 * 8;
        }
        self.consumer.word(0).store(cons, Ordering::Release);
    }
}

/// One event map's reader.
enum Reader {
    Perf(Vec<PerfRing>),
    Ring(Ring),
}

/// The kernel's event maps, by the object's map index.
#[derive(Default)]
pub(super) struct KernelEvents {
    readers: Vec<(usize, Reader)>,
}

impl KernelEvents {
    /// Readers for the event maps of `maps`: a perf event array gets an
    /// event on each CPU below its `max_entries`, put at the CPU's index.
    pub(super) fn open(maps: &[KernelMap]) -> io::Result<KernelEvents> {
        let mut readers = Vec::new();
        for (i, m) in maps.iter().enumerate() {
            match m.def.kind {
                MapType::PerfEventArray => {
                    let n = if m.def.max_entries == 0 {
                        possible_cpus()
                    } else {
                        (m.def.max_entries as usize).min(possible_cpus())
                    };
                    let mut rings = Vec::new();
                    for cpu in 0..n as u32 {
                        let r = PerfRing::open(cpu).map_err(|e| {
                            io::Error::new(e.kind(), format!("perf event on CPU {cpu}: {e}"))
                        })?;
                        let fd = r._fd.as_raw_fd() as u32;
                        m.update(&cpu.to_le_bytes(), &fd.to_le_bytes())?;
                        rings.push(r);
                    }
                    readers.push((i, Reader::Perf(rings)));
                }
                MapType::Ringbuf => readers.push((i, Reader::Ring(Ring::open(m)?))),
                _ => {}
            }
        }
        Ok(KernelEvents { readers })
    }

    /// The records each event map got since the last read: (map index,
    /// records, each slot's in turn).
    pub(super) fn read(&self) -> Vec<(usize, Vec<Event>)> {
        self.readers
            .iter()
            .map(|(i, r)| {
                let mut out = Vec::new();
                match r {
                    Reader::Perf(rings) => rings.iter().for_each(|p| p.read(&mut out)),
                    Reader::Ring(ring) => ring.read(&mut out),
                }
                (*i, out)
            })
            .collect()
    }
}

/// Whether the kernel's record `k` is pfil's `m`: the same slot and
/// bytes. The kernel pads a perf sample's data to `ALIGN(len + 4, 8) -
/// 4` bytes with whatever its ring held there (it skips them, unwritten);
/// pfil keeps the data as written.
fn same(k: &Event, m: &Event) -> bool {
    if k.slot != m.slot {
        return false;
    }
    if k.slot.is_none() {
        return k.data == m.data;
    }
    let n = m.data.len();
    k.data.len() == (n + 4).div_ceil(8) * 8 - 4 && k.data[..n] == m.data[..]
}

/// The first event map whose records differ: the kernel's `theirs`
/// against each of pfil's programs' (drained).
pub(super) fn compare(
    theirs: &[(usize, Vec<Event>)],
    ours: &[(crate::program::Engine, crate::XdpProgram)],
    obj: &crate::Object,
) -> Option<super::Mismatch> {
    let mut first = None;
    for (i, kernel) in theirs {
        for (engine, x) in ours {
            // Drained whatever the answer, so every engine stays in step.
            let mine = x.maps()[*i]
                .drain_events(usize::MAX)
                .map(|d| d.events)
                .unwrap_or_default();
            let same =
                kernel.len() == mine.len() && kernel.iter().zip(&mine).all(|(k, m)| same(k, m));
            if !same && first.is_none() {
                first = Some(super::Mismatch::Events {
                    engine: *engine,
                    map: obj.maps[*i].name.clone(),
                    kernel: kernel.clone(),
                    ours: mine,
                });
            }
        }
    }
    first
}
