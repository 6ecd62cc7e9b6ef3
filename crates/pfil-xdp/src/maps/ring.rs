//! One ring of records, in bytes allocated once: the kernel's layout
//! (a record is an 8-byte header, its length and state, then its bytes,
//! at a position that only grows; it takes what the kernel's takes), so
//! that a record costs the datapath a copy and no allocation.

use std::collections::VecDeque;

/// A record's state, in its header ([`Ring::header`]).
const READY: u32 = 0;
const BUSY: u32 = 1;
const DISCARDED: u32 = 2;

/// A ring of `cap` bytes (a power of 2).
#[derive(Debug)]
pub(crate) struct Ring {
    buf: Box<[u8]>,
    /// The next record's position (the producer's) and the oldest's (the
    /// consumer's).
    pub(crate) prod: u64,
    pub(crate) cons: u64,
    /// Records that could not be written since the last drain.
    pub(crate) lost: u64,
    /// Records reserved and not yet submitted or discarded: position,
    /// worker, offset in the worker's reservation area, length.
    busy: VecDeque<(u64, usize, usize, usize)>,
    /// Each worker's next free byte of its reservation area, and its
    /// records held.
    bump: Vec<usize>,
    held: Vec<u32>,
}

impl Ring {
    /// A ring of `cap` bytes, a power of 2 (zeroed pages, untouched
    /// until used).
    pub(crate) fn new(cap: usize) -> Ring {
        debug_assert!(cap.is_power_of_two());
        Ring {
            buf: vec![0u8; cap].into_boxed_slice(),
            prod: 0,
            cons: 0,
            lost: 0,
            busy: VecDeque::new(),
            bump: Vec::new(),
            held: Vec::new(),
        }
    }

    /// Whether a record of `cost` bytes fits: the producer then less
    /// than the ring's size past the consumer (the kernel's test, both
    /// for a perf ring's `CIRC_SPACE` and a ring buffer's mask).
    pub(crate) fn fits(&self, cost: usize) -> bool {
        cost <= self.buf.len() && (self.prod + cost as u64) - self.cons < self.buf.len() as u64
    }

    fn put(&mut self, at: u64, bytes: &[u8]) {
        let mask = self.buf.len() - 1;
        let off = at as usize & mask;
        let first = bytes.len().min(self.buf.len() - off);
        self.buf[off..off + first].copy_from_slice(&bytes[..first]);
        self.buf[..bytes.len() - first].copy_from_slice(&bytes[first..]);
    }

    fn get(&self, at: u64, out: &mut [u8]) {
        let mask = self.buf.len() - 1;
        let off = at as usize & mask;
        let first = out.len().min(self.buf.len() - off);
        out[..first].copy_from_slice(&self.buf[off..off + first]);
        let rest = out.len() - first;
        out[first..].copy_from_slice(&self.buf[..rest]);
    }

    /// A record's header at `at`, as the kernel's ring buffer writes it
    /// (`struct bpf_ringbuf_hdr`: the length with its busy and discard
    /// bits, then the page of the header from the ring's start, the data
    /// pages following three of the ring's own): a record reserved where
    /// an older one's header lay holds those bytes, as the kernel's does.
    fn header(&mut self, at: u64, len: usize, state: u32) {
        let bits = match state {
            BUSY => 1 << 31,
            DISCARDED => 1 << 30,
            _ => 0,
        };
        let page = 3 + ((at as usize & (self.buf.len() - 1)) >> 12) as u32;
        let mut h = [0u8; 8];
        h[..4].copy_from_slice(&(len as u32 | bits).to_le_bytes());
        h[4..].copy_from_slice(&page.to_le_bytes());
        self.put(at, &h);
    }

    /// Write a record of `parts` (one after the other) taking `cost`
    /// bytes; the caller checked it [`fits`](Self::fits).
    pub(crate) fn push(&mut self, cost: usize, parts: &[&[u8]]) {
        let at = self.prod;
        let len = parts.iter().map(|p| p.len()).sum();
        self.header(at, len, READY);
        let mut pos = at + 8;
        for p in parts {
            self.put(pos, p);
            pos += p.len() as u64;
        }
        self.prod += cost as u64;
    }

    /// Reserve a record of `len` bytes taking `cost` for `worker`, whose
    /// reservation area has `area` bytes: its offset in that area, or
    /// `None` when the area is full. The caller checked it fits. `fill`
    /// gives the record's bytes in the area for its offset: they get what
    /// the kernel's record holds before the program writes it, the ring's
    /// bytes there (zero, or an older record's where positions wrapped).
    pub(crate) fn reserve<'a>(
        &mut self,
        worker: usize,
        len: usize,
        cost: usize,
        area: usize,
        fill: impl FnOnce(usize) -> Option<&'a mut [u8]>,
    ) -> Option<usize> {
        if self.bump.len() <= worker {
            self.bump.resize(worker + 1, 0);
            self.held.resize(worker + 1, 0);
        }
        let off = self.bump[worker];
        // (A record of 0 bytes takes 8 of the area too: each has its own
        // address, which its submit or discard names.)
        let end = off + len.div_ceil(8).max(1) * 8;
        if end > area {
            return None;
        }
        self.bump[worker] = end;
        self.held[worker] += 1;
        let at = self.prod;
        if let Some(out) = fill(off) {
            let n = out.len().min(len);
            self.get(at + 8, &mut out[..n]);
        }
        self.header(at, len, BUSY);
        self.busy.push_back((at, worker, off, len));
        self.prod += cost as u64;
        Some(off)
    }

    /// The length of `worker`'s reserved record at `off`, if it holds one.
    #[cfg(test)]
    fn held_len(&self, worker: usize, off: usize) -> Option<usize> {
        self.busy
            .iter()
            .find(|b| b.1 == worker && b.2 == off)
            .map(|b| b.3)
    }

    /// Give back `worker`'s record at `off`, submitted or `discard`ed:
    /// `bytes` gives what the program left in it for its length, which
    /// stays in the ring either way, as in the kernel's, whose record is
    /// the ring's memory (`None`: nothing to keep, a faulted run's).
    /// Whether it held one.
    pub(crate) fn commit<'a>(
        &mut self,
        worker: usize,
        off: usize,
        discard: bool,
        bytes: impl FnOnce(usize) -> Option<&'a [u8]>,
    ) -> bool {
        let Some(i) = self.busy.iter().position(|b| b.1 == worker && b.2 == off) else {
            return false;
        };
        let Some((at, _, _, len)) = self.busy.remove(i) else {
            return false;
        };
        let kept = match bytes(len) {
            Some(b) if b.len() == len => {
                self.put(at + 8, b);
                true
            }
            _ => false,
        };
        self.header(at, len, if kept && !discard { READY } else { DISCARDED });
        self.held[worker] -= 1;
        if self.held[worker] == 0 {
            self.bump[worker] = 0;
        }
        true
    }

    /// Discard every record `worker` holds.
    pub(crate) fn abandon(&mut self, worker: usize) {
        while let Some(i) = self.busy.iter().position(|b| b.1 == worker) {
            let off = self.busy[i].2;
            self.commit(worker, off, true, |_| None);
        }
    }

    /// Take up to `max` records out, oldest first, up to the first one
    /// still reserved (a reader waits on it, as the kernel's): each
    /// record's bytes to `out`; `cost` what a record of a length takes.
    pub(crate) fn drain(
        &mut self,
        max: usize,
        cost: fn(usize) -> usize,
        mut out: impl FnMut(Vec<u8>),
    ) {
        let mut taken = 0;
        while self.cons < self.prod && taken < max {
            let mut h = [0u8; 8];
            self.get(self.cons, &mut h);
            let word = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
            let len = (word & !(3 << 30)) as usize;
            if word & (1 << 31) != 0 {
                break;
            }
            if word & (1 << 30) == 0 {
                let mut b = vec![0u8; len];
                self.get(self.cons + 8, &mut b);
                out(b);
                taken += 1;
            }
            self.cons += cost(len) as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(len: usize) -> usize {
        (len + 8).div_ceil(8) * 8
    }

    #[test]
    fn records_wrap_round_the_end_and_wait_on_a_reserved_one() {
        let mut r = Ring::new(64);
        let mut got = Vec::new();
        for i in 0..20u8 {
            // 13 bytes: 24 a record; the positions wrap round 64.
            let b = [i; 13];
            assert!(r.fits(cost(13)));
            r.push(cost(13), &[&b[..5], &b[5..]]);
            r.drain(10, cost, |v| got.push(v));
        }
        assert_eq!(got.len(), 20);
        assert!(got.iter().enumerate().all(|(i, v)| v == &vec![i as u8; 13]));
        let off = r.reserve(1, 9, cost(9), 64, |_| None).unwrap();
        r.push(cost(3), &[&[7, 8, 9]]);
        assert!(!r.fits(cost(40)), "24 + 16 + 48 bytes pass 63");
        let mut after = Vec::new();
        r.drain(10, cost, |v| after.push(v));
        assert!(after.is_empty(), "the reserved record holds the reader");
        assert_eq!(r.held_len(1, off), Some(9));
        assert!(r.commit(1, off, false, |_| Some(&[1; 9])));
        assert!(
            !r.commit(1, off, false, |_| Some(&[1; 9])),
            "given back already"
        );
        r.drain(10, cost, |v| after.push(v));
        assert_eq!(after, vec![vec![1; 9], vec![7, 8, 9]]);
        let off = r.reserve(0, 4, cost(4), 64, |_| None).unwrap();
        r.abandon(0);
        assert_eq!(r.held_len(0, off), None);
        r.drain(10, cost, |v| after.push(v));
        assert_eq!(after.len(), 2, "discarded: nothing delivered");
        assert_eq!(r.cons, r.prod);
    }
}
