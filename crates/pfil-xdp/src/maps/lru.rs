//! The kernel's LRU lists for LRU_HASH maps (`kernel/bpf/bpf_lru_list.c`),
//! node for node, so that a map evicts the entries the kernel would
//! evict: an active and an inactive list with reference bits, nodes taken
//! a batch at a time into a per-CPU (here per-worker) local free list, a
//! local pending list for new entries, rotations and shrinks of at most
//! `nr_scans` nodes, stealing from other CPUs' local lists when the
//! global lists have nothing; or, with `BPF_F_NO_COMMON_LRU`, one set of
//! lists per CPU. Learnt from the kernel's description and behaviour
//! (checked against it with `xdp-oracle`), written anew.
//!
//! Nodes are the map's value slots (`0..n`); list heads are the indices
//! after them. Everything but the reference bits is changed under the
//! map's index lock; a program's lookup sets a reference bit without it.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// What the kernel calls `LOCAL_FREE_TARGET` and `LOCAL_NR_SCANS`.
const LOCAL_NR_SCANS: u32 = 128;
/// `PERCPU_FREE_TARGET` and `PERCPU_NR_SCANS`.
const PERCPU_TARGET: u32 = 4;

/// A node's (or a list's) type, as `enum bpf_lru_list_type`.
const ACTIVE: u8 = 0;
const INACTIVE: u8 = 1;
const FREE: u8 = 2;
const LOCAL_FREE: u8 = 3;
const LOCAL_PENDING: u8 = 4;

/// Mark node `i` used (a program's lookup; an update that replaced an
/// entry): `bpf_lru_node_set_ref`, a store only when the bit is clear.
pub(super) fn set_ref(refs: &[AtomicU8], i: u32) {
    if let Some(r) = refs.get(i as usize) {
        if r.load(Ordering::Relaxed) == 0 {
            r.store(1, Ordering::Relaxed);
        }
    }
}

/// One `struct bpf_lru_list`: its three heads and counts.
struct ListSet {
    /// Head of the active list; inactive and free follow.
    head: u32,
    /// Nodes on the active and inactive lists.
    counts: [u32; 2],
    /// Where the inactive rotation resumes (a node or the inactive head).
    next_inactive_rotation: u32,
}

/// The LRU lists of one map.
pub(super) struct Lru {
    prev: Vec<u32>,
    next: Vec<u32>,
    kind: Vec<u8>,
    cpu: Vec<u16>,
    /// Reference bits, set by lookups without the lock (the map keeps
    /// them too: [`Lru::refs`]).
    refs: Arc<[AtomicU8]>,
    /// The common lists, or one set per CPU (`BPF_F_NO_COMMON_LRU`).
    sets: Vec<ListSet>,
    /// Common: per CPU, the head of its local free list (pending next).
    local: Vec<u32>,
    /// Common: per CPU, where stealing starts.
    next_steal: Vec<usize>,
    percpu: bool,
    /// Free nodes a CPU takes into its local list at a time.
    target_free: u32,
    nr_scans: u32,
}

impl Lru {
    /// The lists of a map of `n` nodes for `cpus` CPUs, every node free,
    /// in the kernel's order.
    pub(super) fn new(n: usize, cpus: usize, percpu: bool) -> Lru {
        let cpus = cpus.max(1);
        let nsets = if percpu { cpus } else { 1 };
        let heads = nsets * 3 + if percpu { 0 } else { 2 * cpus };
        let total = n + heads;
        let mut l = Lru {
            prev: (0..total as u32).collect(),
            next: (0..total as u32).collect(),
            kind: vec![FREE; n],
            cpu: vec![0; n],
            refs: (0..n).map(|_| AtomicU8::new(0)).collect(),
            sets: (0..nsets)
                .map(|s| {
                    let head = (n + 3 * s) as u32;
                    ListSet {
                        head,
                        counts: [0; 2],
                        next_inactive_rotation: head + u32::from(INACTIVE),
                    }
                })
                .collect(),
            local: (0..if percpu { 0 } else { cpus })
                .map(|c| (n + 3 + 2 * c) as u32)
                .collect(),
            next_steal: (0..cpus).collect(),
            percpu,
            target_free: if percpu {
                PERCPU_TARGET
            } else {
                // Linux 6.16 and later: half a CPU's share, 1 to 128.
                ((n / cpus / 2) as u32).clamp(1, LOCAL_NR_SCANS)
            },
            nr_scans: if percpu {
                PERCPU_TARGET
            } else {
                LOCAL_NR_SCANS
            },
        };
        if percpu {
            // Each CPU's share in turn (the last CPU's may be short).
            let share = (n / cpus).max(1);
            for i in 0..n {
                let c = (i / share).min(cpus - 1);
                l.cpu[i] = c as u16;
                let free = l.sets[c].head + u32::from(FREE);
                l.list_add(i as u32, free);
            }
        } else {
            let free = l.sets[0].head + u32::from(FREE);
            for i in 0..n {
                l.list_add(i as u32, free);
            }
        }
        l
    }

    /// Whether node `i` was referenced since it was last moved.
    fn is_ref(&self, i: u32) -> bool {
        self.refs[i as usize].load(Ordering::Relaxed) != 0
    }

    fn clear_ref(&self, i: u32) {
        self.refs[i as usize].store(0, Ordering::Relaxed);
    }

    /// The reference bits, for lookups that take no lock ([`set_ref`]).
    pub(super) fn refs(&self) -> Arc<[AtomicU8]> {
        self.refs.clone()
    }

    /// Mark node `i` used (an update that replaced an entry).
    pub(super) fn set_ref(&self, i: u32) {
        set_ref(&self.refs, i);
    }

    fn list_del(&mut self, i: u32) {
        let (p, n) = (self.prev[i as usize], self.next[i as usize]);
        self.next[p as usize] = n;
        self.prev[n as usize] = p;
    }

    /// Insert `i` right after `head` (the list's first place).
    fn list_add(&mut self, i: u32, head: u32) {
        let first = self.next[head as usize];
        self.next[i as usize] = first;
        self.prev[first as usize] = i;
        self.prev[i as usize] = head;
        self.next[head as usize] = i;
    }

    fn list_move(&mut self, i: u32, head: u32) {
        self.list_del(i);
        self.list_add(i, head);
    }

    fn list_empty(&self, head: u32) -> bool {
        self.next[head as usize] == head
    }

    fn set_of(&self, i: u32) -> usize {
        if self.percpu {
            self.cpu[i as usize] as usize
        } else {
            0
        }
    }

    fn count_dec(&mut self, s: usize, t: u8) {
        if t < FREE {
            self.sets[s].counts[t as usize] -= 1;
        }
    }

    fn count_inc(&mut self, s: usize, t: u8) {
        if t < FREE {
            self.sets[s].counts[t as usize] += 1;
        }
    }

    /// `__bpf_lru_node_move_to_free`: onto `free_head` as `tgt`.
    fn move_to_free(&mut self, s: usize, i: u32, free_head: u32, tgt: u8) {
        if self.sets[s].next_inactive_rotation == i {
            self.sets[s].next_inactive_rotation = self.prev[i as usize];
        }
        self.count_dec(s, self.kind[i as usize]);
        self.kind[i as usize] = tgt;
        self.list_move(i, free_head);
    }

    /// `__bpf_lru_node_move_in`: from a local list onto list `tgt`.
    fn move_in(&mut self, s: usize, i: u32, tgt: u8) {
        self.count_inc(s, tgt);
        self.kind[i as usize] = tgt;
        self.clear_ref(i);
        let h = self.sets[s].head + u32::from(tgt);
        self.list_move(i, h);
    }

    /// `__bpf_lru_node_move`: between (or within) active and inactive.
    fn move_to(&mut self, s: usize, i: u32, tgt: u8) {
        let t = self.kind[i as usize];
        if t != tgt {
            self.count_dec(s, t);
            self.count_inc(s, tgt);
            self.kind[i as usize] = tgt;
        }
        self.clear_ref(i);
        if self.sets[s].next_inactive_rotation == i {
            self.sets[s].next_inactive_rotation = self.prev[i as usize];
        }
        let h = self.sets[s].head + u32::from(tgt);
        self.list_move(i, h);
    }

    fn rotate_active(&mut self, s: usize) {
        let active = self.sets[s].head + u32::from(ACTIVE);
        let first = self.next[active as usize];
        let mut node = self.prev[active as usize];
        let mut i = 0;
        while node != active {
            let tmp = self.prev[node as usize];
            let tgt = if self.is_ref(node) { ACTIVE } else { INACTIVE };
            self.move_to(s, node, tgt);
            i += 1;
            if i == self.nr_scans || node == first {
                break;
            }
            node = tmp;
        }
    }

    fn rotate_inactive(&mut self, s: usize) {
        let inactive = self.sets[s].head + u32::from(INACTIVE);
        if self.list_empty(inactive) {
            return;
        }
        let mut last = self.next[self.sets[s].next_inactive_rotation as usize];
        if last == inactive {
            last = self.next[last as usize];
        }
        let mut cur = self.sets[s].next_inactive_rotation;
        let mut next = inactive;
        let mut i = 0;
        while i < self.nr_scans {
            if cur == inactive {
                cur = self.prev[cur as usize];
                continue;
            }
            next = self.prev[cur as usize];
            if self.is_ref(cur) {
                self.move_to(s, cur, ACTIVE);
            }
            if cur == last {
                break;
            }
            cur = next;
            i += 1;
        }
        self.sets[s].next_inactive_rotation = next;
    }

    fn rotate(&mut self, s: usize) {
        if self.sets[s].counts[INACTIVE as usize] < self.sets[s].counts[ACTIVE as usize] {
            self.rotate_active(s);
        }
        self.rotate_inactive(s);
    }

    fn shrink_inactive(
        &mut self,
        s: usize,
        target: u32,
        free_head: u32,
        tgt: u8,
        del: &mut dyn FnMut(u32) -> bool,
    ) -> u32 {
        let inactive = self.sets[s].head + u32::from(INACTIVE);
        let (mut shrunk, mut i) = (0, 0);
        let mut node = self.prev[inactive as usize];
        while node != inactive {
            let tmp = self.prev[node as usize];
            if self.is_ref(node) {
                self.move_to(s, node, ACTIVE);
            } else if del(node) {
                self.move_to_free(s, node, free_head, tgt);
                shrunk += 1;
                if shrunk == target {
                    break;
                }
            }
            i += 1;
            if i == self.nr_scans {
                break;
            }
            node = tmp;
        }
        shrunk
    }

    /// `__bpf_lru_list_shrink`: unreferenced inactive nodes, else one
    /// node whatever its bit (inactive first).
    fn shrink(
        &mut self,
        s: usize,
        target: u32,
        free_head: u32,
        tgt: u8,
        del: &mut dyn FnMut(u32) -> bool,
    ) -> u32 {
        let n = self.shrink_inactive(s, target, free_head, tgt, del);
        if n > 0 {
            return n;
        }
        let inactive = self.sets[s].head + u32::from(INACTIVE);
        let list = if self.list_empty(inactive) {
            self.sets[s].head + u32::from(ACTIVE)
        } else {
            inactive
        };
        let mut node = self.prev[list as usize];
        while node != list {
            let tmp = self.prev[node as usize];
            if del(node) {
                self.move_to_free(s, node, free_head, tgt);
                return 1;
            }
            node = tmp;
        }
        0
    }

    fn local_free(&self, cpu: usize) -> u32 {
        self.local[cpu]
    }

    fn local_pending(&self, cpu: usize) -> u32 {
        self.local[cpu] + 1
    }

    fn local_flush(&mut self, cpu: usize) {
        let pending = self.local_pending(cpu);
        let mut node = self.prev[pending as usize];
        while node != pending {
            let tmp = self.prev[node as usize];
            let tgt = if self.is_ref(node) { ACTIVE } else { INACTIVE };
            self.move_in(0, node, tgt);
            node = tmp;
        }
    }

    fn pop_free_to_local(&mut self, cpu: usize, del: &mut dyn FnMut(u32) -> bool) {
        self.local_flush(cpu);
        self.rotate(0);
        let free = self.sets[0].head + u32::from(FREE);
        let lf = self.local_free(cpu);
        let mut nfree = 0;
        let mut node = self.next[free as usize];
        while node != free {
            let tmp = self.next[node as usize];
            self.move_to_free(0, node, lf, LOCAL_FREE);
            nfree += 1;
            if nfree == self.target_free {
                break;
            }
            node = tmp;
        }
        if nfree < self.target_free {
            self.shrink(0, self.target_free - nfree, lf, LOCAL_FREE, del);
        }
    }

    fn local_pop_free(&mut self, cpu: usize) -> Option<u32> {
        let lf = self.local_free(cpu);
        let node = self.next[lf as usize];
        if node == lf {
            return None;
        }
        self.list_del(node);
        Some(node)
    }

    fn local_pop_pending(&mut self, cpu: usize, del: &mut dyn FnMut(u32) -> bool) -> Option<u32> {
        let pending = self.local_pending(cpu);
        for force in [false, true] {
            let mut node = self.prev[pending as usize];
            while node != pending {
                if (!self.is_ref(node) || force) && del(node) {
                    self.list_del(node);
                    return Some(node);
                }
                node = self.prev[node as usize];
            }
        }
        None
    }

    fn add_pending(&mut self, cpu: usize, i: u32) {
        self.cpu[i as usize] = cpu as u16;
        self.kind[i as usize] = LOCAL_PENDING;
        self.clear_ref(i);
        let p = self.local_pending(cpu);
        self.list_add(i, p);
    }

    /// `bpf_lru_pop_free`: a node for a new entry on `cpu`, evicting
    /// entries through `del` (which removes a node's entry from the map
    /// and says whether it held one), or `None` (`-ENOMEM`).
    pub(super) fn pop_free(&mut self, cpu: usize, del: &mut dyn FnMut(u32) -> bool) -> Option<u32> {
        let cpus = self.next_steal.len();
        let cpu = cpu % cpus;
        if self.percpu {
            self.rotate(cpu);
            let free = self.sets[cpu].head + u32::from(FREE);
            if self.list_empty(free) {
                self.shrink(cpu, PERCPU_TARGET, free, FREE, del);
            }
            if self.list_empty(free) {
                return None;
            }
            let node = self.next[free as usize];
            self.clear_ref(node);
            self.move_to(cpu, node, INACTIVE);
            return Some(node);
        }
        let mut node = self.local_pop_free(cpu);
        if node.is_none() {
            self.pop_free_to_local(cpu, del);
            node = self.local_pop_free(cpu);
        }
        if let Some(i) = node {
            self.add_pending(cpu, i);
            return Some(i);
        }
        let first = self.next_steal[cpu];
        let mut steal = first;
        loop {
            node = self.local_pop_free(steal);
            if node.is_none() {
                node = self.local_pop_pending(steal, del);
            }
            steal = (steal + 1) % cpus;
            if node.is_some() || steal == first {
                break;
            }
        }
        self.next_steal[cpu] = steal;
        let i = node?;
        self.add_pending(cpu, i);
        Some(i)
    }

    /// `bpf_lru_push_free`: node `i`'s entry is gone (deleted, replaced,
    /// or its update failed).
    pub(super) fn push_free(&mut self, i: u32) {
        let s = self.set_of(i);
        if !self.percpu && self.kind[i as usize] == LOCAL_PENDING {
            let c = self.cpu[i as usize] as usize;
            self.kind[i as usize] = LOCAL_FREE;
            self.clear_ref(i);
            let lf = self.local_free(c);
            self.list_move(i, lf);
            return;
        }
        self.move_to(s, i, FREE);
    }
}
