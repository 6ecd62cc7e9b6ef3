//! The clocks and the CPU's place: `bpf_ktime_get_ns` and its siblings,
//! `bpf_jiffies64`, `bpf_get_numa_node_id`. None takes an argument or
//! touches the run's state.

use std::sync::OnceLock;

use pfil_ebpf::Env;

/// A clock's time in nanoseconds.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// A helper of no argument that returns `$value` (the helper ABI's
/// arguments unused), or reads `clock`.
macro_rules! no_arg_helper {
    ($(#[$doc:meta])* $name:ident, $value:expr) => {
        $(#[$doc])*
        pub(super) unsafe extern "C" fn $name(
            _: u64,
            _: u64,
            _: u64,
            _: u64,
            _: u64,
            _env: *mut Env,
        ) -> u64 {
            $value
        }
    };
}

macro_rules! clock_helper {
    ($(#[$doc:meta])* $name:ident, $clock:expr) => {
        no_arg_helper!($(#[$doc])* $name, clock_ns($clock));
    };
}

clock_helper!(
    /// `bpf_ktime_get_ns`: the monotonic clock.
    ktime_get_ns,
    libc::CLOCK_MONOTONIC
);
clock_helper!(
    /// `bpf_ktime_get_boot_ns`: the monotonic clock, suspend included.
    ktime_get_boot_ns,
    libc::CLOCK_BOOTTIME
);
clock_helper!(
    /// `bpf_ktime_get_coarse_ns`: the monotonic clock at tick resolution.
    ktime_get_coarse_ns,
    libc::CLOCK_MONOTONIC_COARSE
);
clock_helper!(
    /// `bpf_ktime_get_tai_ns`: International Atomic Time (the realtime
    /// clock plus the leap seconds the kernel was told of).
    ktime_get_tai_ns,
    libc::CLOCK_TAI
);

/// The kernel's tick: its length in nanoseconds (`1e9 / HZ`, the
/// resolution of `CLOCK_MONOTONIC_COARSE`, which moves once a tick) and
/// the jiffies at coarse time 0.
struct Tick {
    ns: u64,
    base: u64,
}

impl Tick {
    fn get() -> &'static Tick {
        static TICK: OnceLock<Tick> = OnceLock::new();
        TICK.get_or_init(|| {
            let mut res = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: clock_getres writes the timespec we own.
            let ok = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut res) } == 0;
            let ns = if ok && res.tv_sec == 0 && res.tv_nsec > 0 {
                res.tv_nsec as u64
            } else {
                4_000_000
            };
            let hz = 1_000_000_000 / ns;
            // The jiffies start at INITIAL_JIFFIES (five minutes before
            // the 32-bit counter wraps) when the monotonic clock is about
            // 0; /proc/timer_list (root) says where they are now, which
            // sets the start to the tick.
            let base = timer_list_jiffies()
                .map(|(j, at)| j.wrapping_sub(at / ns))
                .unwrap_or((1u64 << 32).wrapping_sub(300 * hz));
            Tick { ns, base }
        })
    }
}

/// The kernel's jiffies as `/proc/timer_list` shows them, with the coarse
/// clock read just before (`None`: unreadable, not root).
fn timer_list_jiffies() -> Option<(u64, u64)> {
    let at = clock_ns(libc::CLOCK_MONOTONIC_COARSE);
    let text = std::fs::read_to_string("/proc/timer_list").ok()?;
    let line = text.lines().find(|l| l.starts_with("jiffies: "))?;
    let j = line["jiffies: ".len()..].trim().parse().ok()?;
    Some((j, at))
}

/// The kernel's jiffies now.
fn jiffies() -> u64 {
    let t = Tick::get();
    t.base
        .wrapping_add(clock_ns(libc::CLOCK_MONOTONIC_COARSE) / t.ns)
}

no_arg_helper!(
    /// `bpf_jiffies64`: the kernel's tick count (`HZ` a second, from the
    /// coarse monotonic clock; at most a tick from the kernel's own).
    jiffies64,
    jiffies()
);

/// The NUMA node of each CPU (`/sys/devices/system/node/nodeN/cpulist`;
/// empty without NUMA: node 0).
fn cpu_nodes() -> &'static [u32] {
    static NODES: OnceLock<Vec<u32>> = OnceLock::new();
    NODES.get_or_init(|| {
        let mut v = Vec::new();
        let Ok(dir) = std::fs::read_dir("/sys/devices/system/node") else {
            return v;
        };
        for e in dir.flatten() {
            let name = e.file_name();
            let Some(node) = name
                .to_str()
                .and_then(|n| n.strip_prefix("node"))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(list) = std::fs::read_to_string(e.path().join("cpulist")) else {
                continue;
            };
            for part in list.trim().split(',').filter(|p| !p.is_empty()) {
                let (a, b) = part.split_once('-').unwrap_or((part, part));
                let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) else {
                    continue;
                };
                // (A CPU list past 4 096 CPUs is not one of this machine.)
                for cpu in a..=b.min(4095) {
                    if v.len() <= cpu {
                        v.resize(cpu + 1, 0);
                    }
                    v[cpu] = node;
                }
            }
        }
        v
    })
}

/// The NUMA node of the CPU the calling thread runs on.
fn numa_node() -> u64 {
    // SAFETY: sched_getcpu takes nothing and returns a number.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu)
        .ok()
        .and_then(|c| cpu_nodes().get(c))
        .map_or(0, |&n| u64::from(n))
}

no_arg_helper!(
    /// `bpf_get_numa_node_id`: the NUMA node of the CPU the worker runs
    /// on.
    get_numa_node_id,
    numa_node()
);
