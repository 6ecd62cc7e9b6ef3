//! The map types and the errors of map operations, with the kernel's
//! numbers and errnos.

use std::fmt;

/// The map types this crate runs (the kernel's `enum bpf_map_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MapType {
    /// `BPF_MAP_TYPE_HASH` (1).
    Hash,
    /// `BPF_MAP_TYPE_ARRAY` (2).
    Array,
    /// `BPF_MAP_TYPE_PROG_ARRAY` (3): `bpf_tail_call`'s table. Each
    /// entry is 4 bytes, the number of a program of the hook's object
    /// (`pfilctl map HOOK` lists them; 0: empty), written only by the
    /// control side; programs reach it only through `bpf_tail_call`.
    ProgArray,
    /// `BPF_MAP_TYPE_PERF_EVENT_ARRAY` (4): `bpf_perf_event_output`'s
    /// rings, one a worker (the kernel's one a CPU); the control side
    /// takes the records out (`pfilctl map HOOK NAME event_pipe`).
    PerfEventArray,
    /// `BPF_MAP_TYPE_PERCPU_HASH` (5).
    PercpuHash,
    /// `BPF_MAP_TYPE_PERCPU_ARRAY` (6).
    PercpuArray,
    /// `BPF_MAP_TYPE_LRU_HASH` (9).
    LruHash,
    /// `BPF_MAP_TYPE_LRU_PERCPU_HASH` (10): an LRU_HASH (the same lists,
    /// evicting the same entries) with one value per worker; an update
    /// of a present key writes its value in place, as the kernel's.
    LruPercpuHash,
    /// `BPF_MAP_TYPE_LPM_TRIE` (11).
    LpmTrie,
    /// `BPF_MAP_TYPE_DEVMAP` (14).
    Devmap,
    /// `BPF_MAP_TYPE_CPUMAP` (16): `bpf_redirect_map` into it hands the
    /// frame on as `XDP_PASS` does (the kernel passes it to its stack on
    /// that CPU).
    Cpumap,
    /// `BPF_MAP_TYPE_DEVMAP_HASH` (25): a devmap keyed by any 4-byte key.
    DevmapHash,
    /// `BPF_MAP_TYPE_XSKMAP` (17): AF_XDP sockets by index. A hook runs
    /// in userspace, past any AF_XDP socket: its xskmap holds none (the
    /// control side cannot set one), so `bpf_redirect_map` into it
    /// misses and returns its flags' action, as the kernel's with an
    /// empty slot, and a lookup finds nothing.
    Xskmap,
    /// `BPF_MAP_TYPE_RINGBUF` (27): `bpf_ringbuf_output`'s ring, shared
    /// by the workers, `max_entries` bytes; the control side takes the
    /// records out (`pfilctl map HOOK NAME event_pipe`).
    Ringbuf,
    /// A type pfil does not run (stack_trace, sockmap, queue...),
    /// with the kernel's number. An object may define one: it loads as
    /// long as the program run does not use the map (as a program of the
    /// same object that does is refused, naming it). Such a map is not
    /// made: it holds nothing, and the control side refuses it.
    Other(u32),
}

const MAP_TYPE_NAMES: [&str; 31] = [
    "unspec",
    "hash",
    "array",
    "prog_array",
    "perf_event_array",
    "percpu_hash",
    "percpu_array",
    "stack_trace",
    "cgroup_array",
    "lru_hash",
    "lru_percpu_hash",
    "lpm_trie",
    "array_of_maps",
    "hash_of_maps",
    "devmap",
    "sockmap",
    "cpumap",
    "xskmap",
    "sockhash",
    "cgroup_storage",
    "reuseport_sockarray",
    "percpu_cgroup_storage",
    "queue",
    "stack",
    "sk_storage",
    "devmap_hash",
    "struct_ops",
    "ringbuf",
    "inode_storage",
    "task_storage",
    "bloom_filter",
];

impl MapType {
    /// The type for the kernel's number, or an error naming an unsupported one.
    ///
    /// # Errors
    /// A type pfil does not run (see [`MapType::Other`]).
    pub fn from_raw(n: u32) -> Result<MapType, String> {
        match MapType::of_raw(n) {
            MapType::Other(n) => Err(format!(
                "map type {n} ({}) is not supported",
                MapType::Other(n).name()
            )),
            t => Ok(t),
        }
    }

    /// The type for the kernel's number, [`MapType::Other`] for one pfil
    /// does not run.
    pub fn of_raw(n: u32) -> MapType {
        match n {
            1 => MapType::Hash,
            2 => MapType::Array,
            3 => MapType::ProgArray,
            4 => MapType::PerfEventArray,
            5 => MapType::PercpuHash,
            6 => MapType::PercpuArray,
            9 => MapType::LruHash,
            10 => MapType::LruPercpuHash,
            11 => MapType::LpmTrie,
            14 => MapType::Devmap,
            16 => MapType::Cpumap,
            17 => MapType::Xskmap,
            25 => MapType::DevmapHash,
            27 => MapType::Ringbuf,
            n => MapType::Other(n),
        }
    }

    /// The kernel's number.
    pub fn raw(self) -> u32 {
        match self {
            MapType::Hash => 1,
            MapType::Array => 2,
            MapType::ProgArray => 3,
            MapType::PerfEventArray => 4,
            MapType::PercpuHash => 5,
            MapType::PercpuArray => 6,
            MapType::LruHash => 9,
            MapType::LruPercpuHash => 10,
            MapType::LpmTrie => 11,
            MapType::Devmap => 14,
            MapType::Cpumap => 16,
            MapType::Xskmap => 17,
            MapType::DevmapHash => 25,
            MapType::Ringbuf => 27,
            MapType::Other(n) => n,
        }
    }

    /// The kernel's name (`percpu_array`; `unknown` past the types the
    /// kernel had when this was written).
    pub fn name(self) -> &'static str {
        MAP_TYPE_NAMES
            .get(self.raw() as usize)
            .copied()
            .unwrap_or("unknown")
    }

    /// A type pfil runs (not [`MapType::Other`]).
    pub fn runs(self) -> bool {
        !matches!(self, MapType::Other(_))
    }

    /// One value per worker.
    pub fn per_cpu(self) -> bool {
        matches!(
            self,
            MapType::PercpuHash | MapType::PercpuArray | MapType::LruPercpuHash
        )
    }

    /// A map whose entries the kernel's LRU lists evict (LRU_HASH,
    /// LRU_PERCPU_HASH).
    pub fn is_lru(self) -> bool {
        matches!(self, MapType::LruHash | MapType::LruPercpuHash)
    }

    /// A map of events programs write and the control side takes out
    /// (perf event array, ring buffer), not of entries.
    pub fn holds_events(self) -> bool {
        matches!(self, MapType::PerfEventArray | MapType::Ringbuf)
    }

    pub(crate) fn is_array(self) -> bool {
        matches!(
            self,
            MapType::Array
                | MapType::PercpuArray
                | MapType::ProgArray
                | MapType::Devmap
                | MapType::Cpumap
                | MapType::Xskmap
        )
    }

    /// A map `bpf_redirect_map` sends into: its value's first 4 bytes say
    /// where (an ifindex, a cpumap's queue size), 0 for an empty entry,
    /// and only the control side writes it.
    pub(crate) fn is_redirect(self) -> bool {
        matches!(
            self,
            MapType::Devmap | MapType::DevmapHash | MapType::Cpumap | MapType::Xskmap
        )
    }
}

/// Why a map operation failed; [`MapError::errno`] is what a helper returns.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MapError {
    /// No such key (`ENOENT`).
    NotFound,
    /// The key exists and `BPF_NOEXIST` was asked (`EEXIST`).
    Exists,
    /// The map is full (`E2BIG`).
    Full,
    /// An array index at or past `max_entries` (`E2BIG`, as the kernel).
    Range,
    /// An LPM_TRIE is full (`ENOSPC`, as the kernel's trie says it).
    NoSpace,
    /// An LRU_HASH found no node to take, not even by evicting
    /// (`ENOMEM`, as the kernel's).
    NoMemory,
    /// A bad key or value size, index or flag (`EINVAL`), with the reason.
    Invalid(String),
}

impl MapError {
    /// The negative errno a helper returns for it.
    pub fn errno(&self) -> i64 {
        match self {
            MapError::NotFound => -2,
            MapError::Exists => -17,
            MapError::Full | MapError::Range => -7,
            MapError::NoSpace => -28,
            MapError::NoMemory => -12,
            MapError::Invalid(_) => -22,
        }
    }
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MapError::NotFound => f.write_str("no such key"),
            MapError::Exists => f.write_str("key exists"),
            MapError::Full | MapError::NoSpace | MapError::NoMemory => f.write_str("map is full"),
            MapError::Range => f.write_str("index past max_entries"),
            MapError::Invalid(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for MapError {}

/// `BPF_ANY`: create or update.
pub const BPF_ANY: u64 = 0;
/// `BPF_NOEXIST`: create only.
pub const BPF_NOEXIST: u64 = 1;
/// `BPF_EXIST`: update only.
pub const BPF_EXIST: u64 = 2;
/// Map flag: an LRU_HASH with one set of LRU lists per CPU (worker)
/// instead of common lists with per-CPU local lists.
pub const BPF_F_NO_COMMON_LRU: u32 = 2;
