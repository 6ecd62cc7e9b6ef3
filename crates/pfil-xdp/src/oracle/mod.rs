//! The kernel as the oracle, for any object: the same program loaded
//! into the kernel (bpf(2)) and into pfil, run by its JIT and by its
//! interpreter, with the same map contents; each frame run by all three
//! (`BPF_PROG_TEST_RUN` and [`XdpProgram::run`]) and everything compared:
//! the action, the output bytes (after rewrites and adjustments) and, when
//! asked, every map's contents.
//!
//! This is what the crate's own oracle tests run, and what the
//! `xdp-oracle` command runs on an object, map entries and captures of
//! the user's choosing. It needs root (`CAP_BPF`).
//!
//! Everything is compared, LRU maps too: pfil's LRU_HASH runs the
//! kernel's LRU lists, so it evicts the entries the kernel evicts.

mod events;
pub mod frames;
pub mod pcap;

use std::fmt;

use crate::config::MapEntry;
use crate::kernel::{self, KernelProgram};
use crate::program::Engine;
use crate::{MapType, Object, XdpProgram};

/// The kernel's XDP test run gives this much headroom
/// (`XDP_PACKET_HEADROOM`).
pub const HEADROOM: usize = 256;
/// A test-run frame is one page less the shared info the kernel keeps at
/// its end (`SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` on x86-64).
pub const FRAME: usize = 4096 - 320;
/// The ingress the kernel's test run gives a frame: the loopback device
/// (ifindex 1), queue 0.
const IFINDEX: u32 = 1;

/// One object in the kernel and in pfil (JIT and interpreter).
pub struct Oracle {
    /// The object.
    pub obj: Object,
    /// The kernel's copy.
    pub kernel: KernelProgram,
    /// pfil's copies: the JIT's, then the interpreter's.
    pub ours: Vec<(Engine, XdpProgram)>,
    cpu: usize,
    runs: usize,
    /// The kernel's perf event arrays' and ring buffers' readers.
    events: events::KernelEvents,
}

/// What the kernel did with a frame, which pfil did too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agreed {
    /// The XDP action.
    pub action: u32,
    /// The frame after the run (from `data_meta` when the kernel kept
    /// metadata, to `data_end`).
    pub bytes: Vec<u8>,
}

/// A difference between the kernel and pfil.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// The kernel's test run failed on a frame pfil could run.
    Kernel(String),
    /// pfil's run faulted where the kernel's returned `action`.
    Fault {
        /// Which of pfil's engines.
        engine: Engine,
        /// The fault.
        error: String,
        /// The kernel's action.
        action: u32,
    },
    /// Another action.
    Action {
        /// Which of pfil's engines.
        engine: Engine,
        /// The kernel's.
        kernel: u32,
        /// pfil's.
        ours: u64,
    },
    /// The same action, other bytes.
    Bytes {
        /// Which of pfil's engines.
        engine: Engine,
        /// The kernel's.
        kernel: Vec<u8>,
        /// pfil's.
        ours: Vec<u8>,
    },
    /// A map's contents differ after the runs so far.
    Map {
        /// Which of pfil's engines.
        engine: Engine,
        /// The map.
        map: String,
        /// Entries (key, value) only the kernel has or has otherwise.
        kernel_only: Vec<(Vec<u8>, Vec<u8>)>,
        /// Entries only pfil has or has otherwise.
        ours_only: Vec<(Vec<u8>, Vec<u8>)>,
        /// Entries each side holds (kernel, pfil).
        sizes: (usize, usize),
    },
    /// A perf event array or ring buffer got other records from a run
    /// (perf samples as the kernel pads them).
    Events {
        /// Which of pfil's engines.
        engine: Engine,
        /// The map.
        map: String,
        /// The kernel's records.
        kernel: Vec<crate::maps::Event>,
        /// pfil's.
        ours: Vec<crate::maps::Event>,
    },
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::Kernel(e) => write!(f, "the kernel's test run failed: {e}"),
            Mismatch::Fault {
                engine,
                error,
                action,
            } => write!(
                f,
                "pfil ({engine:?}) faulted: {error}; the kernel returned {}",
                action_name(u64::from(*action))
            ),
            Mismatch::Action {
                engine,
                kernel,
                ours,
            } => write!(
                f,
                "action: kernel {}, pfil ({engine:?}) {}",
                action_name(u64::from(*kernel)),
                action_name(*ours)
            ),
            Mismatch::Bytes {
                engine,
                kernel,
                ours,
            } => write!(
                f,
                "output bytes differ (pfil: {engine:?}) from byte {}:\n  kernel {}\n  pfil   {}",
                kernel
                    .iter()
                    .zip(ours)
                    .position(|(a, b)| a != b)
                    .unwrap_or(kernel.len().min(ours.len())),
                hex(kernel),
                hex(ours)
            ),
            Mismatch::Map {
                engine,
                map,
                kernel_only,
                ours_only,
                sizes,
            } => {
                write!(
                    f,
                    "map {map} differs (pfil: {engine:?}; entries: kernel {}, pfil {})",
                    sizes.0, sizes.1
                )?;
                for (k, v) in kernel_only.iter().take(8) {
                    write!(f, "\n  kernel: key {} value {}", hex(k), hex(v))?;
                }
                for (k, v) in ours_only.iter().take(8) {
                    write!(f, "\n  pfil:   key {} value {}", hex(k), hex(v))?;
                }
                Ok(())
            }
            Mismatch::Events {
                engine,
                map,
                kernel,
                ours,
            } => {
                write!(
                    f,
                    "map {map}: other events (pfil: {engine:?}; records: kernel {}, pfil {})",
                    kernel.len(),
                    ours.len()
                )?;
                for (side, list) in [("kernel", kernel), ("pfil  ", ours)] {
                    for e in list.iter().take(8) {
                        let slot = e.slot.map_or(String::new(), |s| format!(" slot {s}"));
                        write!(f, "\n  {side}:{slot} {}", hex(&e.data))?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// An XDP action's name (`XDP_PASS`...), or its number.
pub fn action_name(a: u64) -> String {
    match a {
        0 => "XDP_ABORTED".into(),
        1 => "XDP_DROP".into(),
        2 => "XDP_PASS".into(),
        3 => "XDP_TX".into(),
        4 => "XDP_REDIRECT".into(),
        n => format!("action {n}"),
    }
}

/// Bytes as lowercase hex, two digits each.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Oracle {
    /// Load program `program` (or the object's only one) of the object
    /// `bytes` into the kernel and into pfil (both engines), for the CPU
    /// the calling thread is pinned to ([`pin_cpu`]).
    ///
    /// # Errors
    /// What the object's parse, the kernel's verifier (its log's last
    /// lines) or pfil's loader said, naming which.
    pub fn load(bytes: &[u8], program: Option<&str>, cpu: usize) -> Result<Oracle, String> {
        Oracle::load_with(bytes, program, cpu, |_| Ok(()))
    }

    /// [`Oracle::load`] with `preset` run on the object first (e.g.
    /// [`XdpConfig::preset`](crate::XdpConfig::preset): `.rodata` settings,
    /// written before load on both sides).
    ///
    /// # Errors
    /// As [`Oracle::load`], and what `preset` said.
    pub fn load_with(
        bytes: &[u8],
        program: Option<&str>,
        cpu: usize,
        preset: impl FnOnce(&mut Object) -> Result<(), String>,
    ) -> Result<Oracle, String> {
        let mut obj = Object::parse(bytes).map_err(|e| format!("object: {e}"))?;
        preset(&mut obj)?;
        let p = obj.program(program).map_err(|e| format!("object: {e}"))?;
        let kernel = KernelProgram::load(&obj, p).map_err(|e| format!("the kernel: {e}"))?;
        let events = events::KernelEvents::open(&kernel.maps)
            .map_err(|e| format!("the kernel's event maps: {e}"))?;
        let workers = kernel::possible_cpus().max(cpu + 1);
        let mut ours = Vec::new();
        for engine in [Engine::Jit, Engine::Interpreter] {
            let x = XdpProgram::load_on(&obj, program, workers, &[], engine)
                .map_err(|e| format!("pfil: {e}"))?;
            ours.push((engine, x));
        }
        Ok(Oracle {
            obj,
            kernel,
            ours,
            cpu,
            runs: 0,
            events,
        })
    }

    /// Frames run so far.
    pub fn runs(&self) -> usize {
        self.runs
    }

    fn index(&self, map: &str) -> Result<usize, String> {
        self.obj
            .maps
            .iter()
            .position(|m| m.name == map)
            .ok_or_else(|| {
                let names: Vec<&str> = self.obj.maps.iter().map(|m| m.name.as_str()).collect();
                format!("no map {map:?} (the object has {})", names.join(", "))
            })
    }

    /// Set `e.key` in map `e.map` everywhere; `e.value` is one CPU's
    /// value, written for every CPU of a per-CPU map (as `xdp-filter`
    /// and bpftool with one value do).
    ///
    /// # Errors
    /// No such map, or what either side refused (sizes, a full map).
    pub fn set(&self, e: &MapEntry) -> Result<(), String> {
        let i = self.index(&e.map)?;
        let k = &self.kernel.maps[i];
        if k.def.kind == MapType::ProgArray {
            return self.set_tail(i, e);
        }
        let full: Vec<u8> = if k.def.kind.per_cpu() {
            let stride = e.value.len().div_ceil(8) * 8;
            let mut one = e.value.clone();
            one.resize(stride, 0);
            one.repeat(kernel::possible_cpus())
        } else {
            e.value.clone()
        };
        k.update(&e.key, &full)
            .map_err(|err| format!("map {}: the kernel: {err}", e.map))?;
        for (engine, x) in &self.ours {
            let ours = if k.def.kind.per_cpu() {
                // pfil's per-CPU maps have a value per worker, which may be
                // more than the kernel's CPUs (the pinned CPU's index).
                let stride = full.len() / kernel::possible_cpus();
                full[..stride].repeat(x.maps()[i].workers())
            } else {
                full.clone()
            };
            x.maps()[i]
                .update(&e.key, &ours, 0)
                .map_err(|err| format!("map {}: pfil ({engine:?}): {err}", e.map))?;
        }
        Ok(())
    }

    /// [`Oracle::set`] of prog array `i`'s entry `e`: in pfil the
    /// program's number, in the kernel its fd.
    fn set_tail(&self, i: usize, e: &MapEntry) -> Result<(), String> {
        let map = &e.map;
        for (engine, x) in &self.ours {
            let value = match &e.program {
                Some(name) => x.tail_number(name)?.to_le_bytes().to_vec(),
                None => e.value.clone(),
            };
            x.check_tail_value(&value)
                .and_then(|()| {
                    x.maps()[i]
                        .update(&e.key, &value, 0)
                        .map_err(|e| e.to_string())
                })
                .map_err(|err| format!("map {map}: pfil ({engine:?}): {err}"))?;
            let n = u32::from_le_bytes(value[..4].try_into().unwrap_or_default());
            let fd = self.kernel.tail_fd(n).ok_or_else(|| {
                let name = x.tail_programs().nth(n as usize - 1).map_or("?", |p| p.0);
                format!("map {map}: the kernel did not load program {n} ({name:?})")
            })?;
            self.kernel.maps[i]
                .update(&e.key, &fd.to_le_bytes())
                .map_err(|err| format!("map {map}: the kernel: {err}"))?;
        }
        Ok(())
    }

    /// Run `frame` everywhere. Frames shorter than an Ethernet header are
    /// not run (the kernel's test run refuses them): `Ok(None)`.
    ///
    /// # Errors
    /// The first difference.
    pub fn run(&mut self, frame: &[u8]) -> Result<Option<Agreed>, Mismatch> {
        if frame.len() < 14 || frame.len() > FRAME - HEADROOM {
            return Ok(None);
        }
        let k = self
            .kernel
            .test_run(frame)
            .map_err(|e| Mismatch::Kernel(e.to_string()))?;
        // Every engine runs the frame, a differing one too, so that their
        // maps stay in step with the kernel's; the first difference is
        // the answer.
        let mut first = None;
        for (engine, x) in &self.ours {
            let engine = *engine;
            let mut buf = vec![0u8; FRAME];
            buf[HEADROOM..HEADROOM + frame.len()].copy_from_slice(frame);
            let m = match x.run(self.cpu, &mut buf, HEADROOM, frame.len(), IFINDEX, 0) {
                Err(e) => Some(Mismatch::Fault {
                    engine,
                    error: e.to_string(),
                    action: k.action,
                }),
                Ok(r) if r.action != u64::from(k.action) => Some(Mismatch::Action {
                    engine,
                    kernel: k.action,
                    ours: r.action,
                }),
                Ok(r) if buf[r.meta..r.end] != k.data[..] => Some(Mismatch::Bytes {
                    engine,
                    kernel: k.data.clone(),
                    ours: buf[r.meta..r.end].to_vec(),
                }),
                Ok(_) => None,
            };
            first = first.or(m);
        }
        // The records the run wrote, read on both sides after every run
        // (so the rings never fill across runs).
        let theirs = self.events.read();
        let events = events::compare(&theirs, &self.ours, &self.obj);
        if let Some(m) = first.or(events) {
            return Err(m);
        }
        self.runs += 1;
        Ok(Some(Agreed {
            action: k.action,
            bytes: k.data,
        }))
    }

    /// Every map's contents, compared (an LRU_HASH evicts what the
    /// kernel's would: pfil runs the kernel's LRU lists).
    ///
    /// # Errors
    /// The first map that differs, or the kernel's dump failing.
    pub fn compare_maps(&self) -> Result<(), Mismatch> {
        // A map of a type pfil does not run is not used by the program
        // (the loader refused it otherwise): nothing to compare.
        for (i, d) in self
            .obj
            .maps
            .iter()
            .enumerate()
            // An xskmap holds no socket on either side (the kernel's
            // cannot be dumped).
            // Event maps' records are compared after every run.
            .filter(|(_, d)| d.kind.runs() && d.kind != MapType::Xskmap && !d.kind.holds_events())
        {
            let mut theirs = self.kernel.maps[i]
                .entries()
                .map_err(|e| Mismatch::Kernel(format!("dump of map {}: {e}", d.name)))?;
            theirs.sort();
            if d.kind == MapType::ProgArray {
                // The kernel names its programs by id, pfil by number:
                // the same keys set (the runs do not write either).
                for (_, v) in &mut theirs {
                    *v = Vec::new();
                }
            }
            for (engine, x) in &self.ours {
                let m = &x.maps()[i];
                let mut mine = m.entries();
                if d.kind == MapType::ProgArray {
                    for (_, v) in &mut mine {
                        *v = Vec::new();
                    }
                }
                if d.kind.per_cpu() {
                    // Only the kernel's CPUs (pfil may have more workers).
                    let n = kernel::possible_cpus();
                    for (_, v) in &mut mine {
                        let stride = v.len() / m.workers().max(1);
                        v.truncate(stride * n);
                    }
                }
                mine.sort();
                let sizes = (theirs.len(), mine.len());
                if theirs != mine {
                    return Err(Mismatch::Map {
                        engine: *engine,
                        map: d.name.clone(),
                        kernel_only: theirs
                            .iter()
                            .filter(|e| !mine.contains(e))
                            .cloned()
                            .collect(),
                        ours_only: mine
                            .iter()
                            .filter(|e| !theirs.contains(e))
                            .cloned()
                            .collect(),
                        sizes,
                    });
                }
            }
        }
        Ok(())
    }
}

/// Pin the calling thread to the first CPU it may run on and return it:
/// the kernel's per-CPU map values of its test runs land in that CPU's
/// slot, and [`Oracle`] runs pfil as the worker of the same index.
///
/// # Errors
/// sched_getaffinity/sched_setaffinity failing.
pub fn pin_cpu() -> std::io::Result<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // fills it and sched_setaffinity reads it, for the calls only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let cpu = (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &set))
            .ok_or_else(|| std::io::Error::other("no CPU in the affinity mask"))?;
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        if libc::sched_setaffinity(0, std::mem::size_of_val(&one), &one) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(cpu)
    }
}
