//! Leaf blocks (8 rules, structure of arrays, tested with lane
//! compares) and the key views the trees and blocks read.

use super::*;

/// Bias that maps unsigned order to signed order (`x ^ BIAS32 as i32`):
/// SSE2 has signed lane compares only.
pub(super) const BIAS32: u32 = 1 << 31;
/// [`BIAS32`] for 16-bit lanes.
pub(super) const BIAS16: u16 = 1 << 15;
/// In [`Block::id`]: the rule has conditions the block does not hold
/// (VLAN, TCP flags, ICMP; any rule of the IPv6 trees): a lane hit is
/// confirmed on the full rule. (A protocol range with ports is marked on
/// its leaf instead: [`LOOSE`].)
pub(super) const EXTRA_ID: u32 = 1 << 31;

/// Eight leaf rules, structure of arrays: each field test is a plain
/// array operation over the 8 lanes, which the compiler turns into SSE2
/// lane compares (two 4-lane vectors for the addresses, one 8-lane vector
/// for each 16-bit field).
///
/// A range `[lo, hi]` is stored as `lo` and `span = hi - lo`, both biased
/// (`lo - 2^(w-1)`, `span ^ 2^(w-1)` as signed), so that the test
/// `lo <= x <= hi` is one wrapping subtraction and one *signed* compare:
/// `(x - lo') as signed <= span'`. The protocol lane holds
/// `proto << 1 | has_ports`, so a rule that needs ports (a port range other
/// than the whole space) and names one protocol is the range
/// `[p << 1 | 1, p << 1 | 1]`, and one that does not need them
/// `[lo << 1, hi << 1 | 1]`.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub(super) struct Block {
    pub(super) src_lo: [u32; BLOCK],
    pub(super) src_span: [i32; BLOCK],
    pub(super) dst_lo: [u32; BLOCK],
    pub(super) dst_span: [i32; BLOCK],
    pub(super) sp_lo: [u16; BLOCK],
    pub(super) sp_span: [i16; BLOCK],
    pub(super) dp_lo: [u16; BLOCK],
    pub(super) dp_span: [i16; BLOCK],
    pub(super) pr_lo: [u16; BLOCK],
    pub(super) pr_span: [i16; BLOCK],
    /// Rule index, [`EXTRA_ID`] set if the full rule must confirm a hit;
    /// [`NONE`] in padding lanes.
    pub(super) id: [u32; BLOCK],
}

/// One leaf rule, before it goes into a lane of a [`Block`] (unbiased).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Lane {
    pub(super) src: (u32, u32),
    pub(super) dst: (u32, u32),
    pub(super) sp: (u16, u16),
    pub(super) dp: (u16, u16),
    /// Range of the protocol lane (`proto << 1 | has_ports`).
    pub(super) pr: (u16, u16),
    pub(super) id: u32,
}

impl Block {
    /// A block of padding: no lane ever hits (the protocol lane of a key
    /// is at most 511).
    pub(super) const PAD: Block = Block {
        src_lo: [0; BLOCK],
        src_span: [0; BLOCK],
        dst_lo: [0; BLOCK],
        dst_span: [0; BLOCK],
        sp_lo: [0; BLOCK],
        sp_span: [0; BLOCK],
        dp_lo: [0; BLOCK],
        dp_span: [0; BLOCK],
        pr_lo: [u16::MAX ^ BIAS16; BLOCK],
        pr_span: [i16::MIN; BLOCK],
        id: [NONE; BLOCK],
    };

    pub(super) fn set(&mut self, j: usize, l: &Lane) {
        self.src_lo[j] = l.src.0 ^ BIAS32;
        self.src_span[j] = ((l.src.1 - l.src.0) ^ BIAS32) as i32;
        self.dst_lo[j] = l.dst.0 ^ BIAS32;
        self.dst_span[j] = ((l.dst.1 - l.dst.0) ^ BIAS32) as i32;
        self.sp_lo[j] = l.sp.0 ^ BIAS16;
        self.sp_span[j] = ((l.sp.1 - l.sp.0) ^ BIAS16) as i16;
        self.dp_lo[j] = l.dp.0 ^ BIAS16;
        self.dp_span[j] = ((l.dp.1 - l.dp.0) ^ BIAS16) as i16;
        self.pr_lo[j] = l.pr.0 ^ BIAS16;
        self.pr_span[j] = ((l.pr.1 - l.pr.0) ^ BIAS16) as i16;
        self.id[j] = l.id;
    }

    /// The lanes probe `p` misses, all-ones per lane. Branch-free; the
    /// compiler vectorises it (SSE2 `psubd`/`pcmpgtd` on the addresses,
    /// `packssdw`, then `psubw`/`pcmpgtw` on the 16-bit fields).
    #[inline(always)]
    pub(super) fn misses(&self, p: &Probe) -> [i16; BLOCK] {
        // Misses as all-ones lanes, one field at a time, so that each loop
        // is one vector operation.
        let mut m32 = [0i32; BLOCK];
        for (j, m) in m32.iter_mut().enumerate() {
            *m = -i32::from(p.src[j].wrapping_sub(self.src_lo[j]) as i32 > self.src_span[j]);
        }
        for (j, m) in m32.iter_mut().enumerate() {
            *m |= -i32::from(p.dst[j].wrapping_sub(self.dst_lo[j]) as i32 > self.dst_span[j]);
        }
        let mut m16 = [0i16; BLOCK];
        for (j, m) in m16.iter_mut().enumerate() {
            *m = m32[j] as i16
                | -i16::from(p.sp[j].wrapping_sub(self.sp_lo[j]) as i16 > self.sp_span[j])
                | -i16::from(p.dp[j].wrapping_sub(self.dp_lo[j]) as i16 > self.dp_span[j])
                | -i16::from(p.pr[j].wrapping_sub(self.pr_lo[j]) as i16 > self.pr_span[j]);
        }
        m16
    }

    /// The first lane `p` hits, or [`BLOCK`] or more if none: the miss
    /// vector's sign bytes (`pmovmskb`, two bits a lane), inverted, and a
    /// bit scan.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(super) fn first_hit(&self, p: &Probe) -> usize {
        use std::arch::x86_64::{_mm_loadu_si128, _mm_movemask_epi8};
        let m = self.misses(p);
        // SAFETY: `m` is 16 bytes and `_mm_loadu_si128` reads 16 bytes
        // with no alignment requirement; both intrinsics need SSE2 only,
        // which every x86_64 CPU has.
        #[allow(unsafe_code)]
        let mask = unsafe { _mm_movemask_epi8(_mm_loadu_si128(m.as_ptr().cast())) };
        let hits = !(mask as u32) | 1 << 16;
        hits.trailing_zeros() as usize / 2
    }

    /// The first lane `p` hits, or [`BLOCK`] or more if none.
    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    pub(super) fn first_hit(&self, p: &Probe) -> usize {
        // The miss vector goes through memory as two words (without the
        // barrier, LLVM fuses the lane tests with the search and
        // scalarises both); the first hit is the first zero 16-bit group.
        let m = std::hint::black_box(self.misses(p));
        let w = |i: usize| {
            u64::from(m[i] as u16)
                | u64::from(m[i + 1] as u16) << 16
                | u64::from(m[i + 2] as u16) << 32
                | u64::from(m[i + 3] as u16) << 48
        };
        // Branch-free: a 128-bit bit scan is two scans and a select.
        let hits = !(u128::from(w(0)) | u128::from(w(4)) << 64);
        hits.trailing_zeros() as usize / 16
    }

    /// The first lane `p` hits, if any: on x86_64 the miss vector's sign
    /// bytes (`pmovmskb`) compared with all-ones, and only on a hit
    /// inverted and scanned (a block that misses costs a compare and a
    /// branch after the mask, not an inversion, a bit scan and a compare).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(super) fn hit(&self, p: &Probe) -> Option<usize> {
        use std::arch::x86_64::{_mm_loadu_si128, _mm_movemask_epi8};
        let m = self.misses(p);
        // SAFETY: `m` is 16 bytes and `_mm_loadu_si128` reads 16 bytes
        // with no alignment requirement; both intrinsics need SSE2 only,
        // which every x86_64 CPU has.
        #[allow(unsafe_code)]
        let mask = unsafe { _mm_movemask_epi8(_mm_loadu_si128(m.as_ptr().cast())) } as u32;
        (mask != 0xffff).then(|| (!mask).trailing_zeros() as usize / 2)
    }

    /// The first lane `p` hits, if any.
    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    pub(super) fn hit(&self, p: &Probe) -> Option<usize> {
        let j = self.first_hit(p);
        (j < BLOCK).then_some(j)
    }

    /// The lanes `p` hits, as bits (lane 0 = bit 0).
    #[inline(always)]
    pub(super) fn hit_mask(&self, p: &Probe) -> u32 {
        let m16 = self.misses(p);
        let mut h = 0;
        for (j, &m) in m16.iter().enumerate() {
            h |= u32::from(m == 0) << j;
        }
        h
    }
}

/// A key's block fields, each repeated over a block's lanes: the tests
/// of a leaf's blocks read the blocks' arrays as memory operands against
/// these vectors, which the compiler keeps in registers from block to
/// block (the broadcasts hoisted out of the leaf's loop; with the key's
/// fields read in each test, they were done again for every block).
#[derive(Clone, Copy)]
pub(super) struct Probe {
    pub(super) src: [u32; BLOCK],
    pub(super) dst: [u32; BLOCK],
    pub(super) sp: [u16; BLOCK],
    pub(super) dp: [u16; BLOCK],
    pub(super) pr: [u16; BLOCK],
}

impl Probe {
    /// The probe of key view `k`.
    #[inline(always)]
    pub(super) fn of(k: &K4) -> Probe {
        Probe {
            src: [k.f[0]; BLOCK],
            dst: [k.f[1]; BLOCK],
            sp: [k.sp(); BLOCK],
            dp: [k.dp(); BLOCK],
            pr: [k.pr(); BLOCK],
        }
    }
}

/// An IPv4 key as the trees see it: 32 bytes, two vector stores.
#[derive(Clone, Copy, Default)]
pub(super) struct K4 {
    /// The cut fields src, dst, sport, dport and the protocol lane
    /// (`proto << 1 | has_ports`), then at [`PR`] the same protocol lane
    /// of the blocks, and zeros (at [`ZERO`]: a one-field node's second
    /// field); 8 slots so that a field number masked with 7 needs no
    /// bounds check.
    pub(super) f: [u32; 8],
}

/// In [`K4::f`]: the protocol lane (not a cut field).
pub(super) const PR: usize = 5;
/// In [`K4::f`]: always zero, the second field of a node cut on one
/// ([`child_index`]).
pub(super) const ZERO: usize = 6;

/// What a leaf's rules with conditions beyond the block's lanes (VLAN, TCP
/// flags, ICMP) are checked against: the whole key, built only then.
pub(super) trait FullKey {
    fn full(&self) -> Key;
}

impl FullKey for Key {
    #[inline]
    fn full(&self) -> Key {
        *self
    }
}

impl FullKey for KeyV4 {
    #[inline]
    fn full(&self) -> Key {
        self.key()
    }
}

/// The fields of an IPv4 packet a [`Key`] holds, in plain integers: what
/// [`Classifier::classify_batch_v4`] classifies. Addresses are host order
/// (`u32::from(Ipv4Addr)`); `has` holds the [`has`] bits other than
/// [`has::IP`] (which an IPv4 key always has).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct KeyV4 {
    /// Source address.
    pub src: u32,
    /// Destination address.
    pub dst: u32,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// The (outer) VLAN id, if the frame is tagged.
    pub vlan: Option<u16>,
    /// IP protocol.
    pub proto: u8,
    /// TCP flags byte.
    pub tcp_flags: u8,
    /// ICMP type.
    pub icmp_type: u8,
    /// ICMP code.
    pub icmp_code: u8,
    /// Which of ports, TCP flags and ICMP are valid: bits of [`has`].
    pub has: u8,
}

impl KeyV4 {
    /// The same key as a [`Key`] (EtherType IPv4, [`has::IP`] set).
    pub fn key(&self) -> Key {
        Key {
            src: u128::from(self.src),
            dst: u128::from(self.dst),
            ethertype: ETHERTYPE_IPV4,
            vlan: self.vlan,
            sport: self.sport,
            dport: self.dport,
            proto: self.proto,
            tcp_flags: self.tcp_flags,
            icmp_type: self.icmp_type,
            icmp_code: self.icmp_code,
            has: self.has | has::IP,
            ct: 0,
            mark: 0,
        }
    }

    /// `k` as an IPv4 key, if it is one (EtherType IPv4, [`has::IP`],
    /// addresses within 32 bits).
    pub fn of(k: &Key) -> Option<KeyV4> {
        let ipv4 =
            k.ethertype == ETHERTYPE_IPV4 && k.has & has::IP != 0 && (k.src | k.dst) >> 32 == 0;
        ipv4.then_some(KeyV4 {
            src: k.src as u32,
            dst: k.dst as u32,
            sport: k.sport,
            dport: k.dport,
            vlan: k.vlan,
            proto: k.proto,
            tcp_flags: k.tcp_flags,
            icmp_type: k.icmp_type,
            icmp_code: k.icmp_code,
            has: k.has & !has::IP,
        })
    }
}

impl K4 {
    #[inline(always)]
    pub(super) fn sp(&self) -> u16 {
        self.f[2] as u16
    }

    #[inline(always)]
    pub(super) fn dp(&self) -> u16 {
        self.f[3] as u16
    }

    #[inline(always)]
    pub(super) fn pr(&self) -> u16 {
        self.f[PR] as u16
    }

    /// The tree view of an IPv4 key.
    #[inline(always)]
    pub(super) fn of_v4(k: &KeyV4) -> K4 {
        K4::new(k.src, k.dst, k.sport, k.dport, k.proto, k.has)
    }

    /// The view of the address fields `src` and `dst` (32 bits of each)
    /// and the rest of a key, `has` its [`has`] bits.
    #[inline(always)]
    pub(super) fn new(src: u32, dst: u32, sport: u16, dport: u16, proto: u8, has: u8) -> K4 {
        K4 {
            f: [
                src,
                dst,
                u32::from(sport),
                u32::from(dport),
                u32::from(proto) << 1 | u32::from(has & has::PORTS != 0),
                u32::from(proto) << 1 | u32::from(has & has::PORTS != 0),
                0,
                0,
            ],
        }
    }

    /// The tree view of `k`, if it takes the IPv4 path.
    #[inline(always)]
    pub(super) fn of(k: &Key) -> Option<K4> {
        KeyV4::of(k).map(|v| K4::of_v4(&v))
    }

    /// Whether the key has ports: the blocks' lanes are exact for it
    /// but for [`EXTRA`] rules; a key without ports also confirms the
    /// hits of [`LOOSE`] leaves ([`Classifier::lookup_loose`]).
    #[inline(always)]
    pub(super) fn has_ports(&self) -> bool {
        self.f[PR] & 1 != 0
    }
}

/// Which 32-bit word of the source and of the destination address (0:
/// the top one) the IPv6 tree cuts and its blocks test: for each, the word
/// where the IPv6 rules' prefixes differ most; and the words above it
/// that most rules name (`2001:db8` of rules under `2001:db8::/32` that
/// differ in the second word), so that a key under them is told apart
/// by the lanes alone ([`V6Words::exact`], [`V6Words::under`]).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct V6Words {
    pub(super) src: u8,
    pub(super) dst: u8,
    /// The source's words above `src`, the rest 0.
    src_above: u128,
    /// The destination's words above `dst`, the rest 0.
    dst_above: u128,
}

/// The bits of the 32-bit words above word `w` (0 for the top word).
fn above_mask(w: u8) -> u128 {
    match w {
        0 => 0,
        w => u128::MAX << (128 - 32 * u32::from(w)),
    }
}

/// The value most of `addrs` give the words above word `w` (among those
/// whose prefix covers them whole), or 0 if none does.
fn most_common_above(addrs: impl Iterator<Item = crate::Addr>, w: u8) -> u128 {
    let mask = above_mask(w);
    let mut seen: Vec<u128> = addrs
        .filter_map(|a| match a {
            crate::Addr::V6(p, len) if w > 0 && u32::from(len) >= 32 * u32::from(w) => {
                Some(p & mask)
            }
            _ => None,
        })
        .collect();
    seen.sort_unstable();
    let mut best = (0, 0u128);
    for run in seen.chunk_by(|a, b| a == b) {
        if run.len() > best.0 {
            best = (run.len(), run[0]);
        }
    }
    best.1
}

impl V6Words {
    /// The words that tell the rules `ids` apart best: per address, the
    /// word with the most distinct projections (the lowest on a tie).
    pub(super) fn choose(rules: &[Rule], ids: &[u32]) -> V6Words {
        let best = |addr: fn(&Rule) -> crate::Addr| {
            (0..4u8)
                .map(|w| {
                    let mut seen: Vec<(u32, u32)> = ids
                        .iter()
                        .map(|&i| v6_word_range(addr(&rules[i as usize]), w))
                        .collect();
                    seen.sort_unstable();
                    seen.dedup();
                    (seen.len(), std::cmp::Reverse(w))
                })
                .max()
                .map_or(0, |(_, std::cmp::Reverse(w))| w)
        };
        let (src, dst) = (best(|r| r.src), best(|r| r.dst));
        let addrs =
            |addr: fn(&Rule) -> crate::Addr| ids.iter().map(move |&i| addr(&rules[i as usize]));
        V6Words {
            src,
            dst,
            src_above: most_common_above(addrs(|r| r.src), src),
            dst_above: most_common_above(addrs(|r| r.dst), dst),
        }
    }

    /// Whether the lanes of a rule with these addresses are exact for a
    /// key [`under`](Self::under) the chosen words: each prefix ends
    /// within its chosen word, and what it names above that word is what
    /// the key has there. Otherwise a lane hit is confirmed on the rule.
    pub(super) fn exact(&self, src: crate::Addr, dst: crate::Addr) -> bool {
        let one = |a: crate::Addr, w: u8, above: u128| match a {
            crate::Addr::Any => true,
            crate::Addr::V6(p, len) => {
                let len = u32::from(len);
                let start = 32 * u32::from(w);
                // The bits the prefix names above its word.
                let named = above_mask(w) & prefix_mask(len.min(start));
                len <= start + 32 && (p ^ above) & named == 0
            }
            crate::Addr::V4(..) => false,
        };
        one(src, self.src, self.src_above) && one(dst, self.dst, self.dst_above)
    }

    /// Whether a prefix of these addresses names bits above its chosen
    /// word: its lanes are then exact only for the keys
    /// [`under`](Self::under) the upper words.
    pub(super) fn names_above(&self, src: crate::Addr, dst: crate::Addr) -> bool {
        let one = |a: crate::Addr, w: u8| match a {
            crate::Addr::V6(_, len) => w > 0 && len > 0,
            _ => false,
        };
        one(src, self.src) || one(dst, self.dst)
    }

    /// Whether IPv6 key `k` has, above the chosen words, what the exact
    /// rules name there: then the lanes decide those rules alone.
    #[inline(always)]
    pub(super) fn under(&self, k: &Key) -> bool {
        ((k.src ^ self.src_above) & above_mask(self.src)) == 0
            && ((k.dst ^ self.dst_above) & above_mask(self.dst)) == 0
    }

    /// The tree view of an IPv6 key: the chosen words of its addresses,
    /// then ports and protocol as for IPv4.
    #[inline]
    pub(super) fn view(&self, k: &Key) -> K4 {
        let word = |a: u128, w: u8| (a >> (96 - 32 * u32::from(w))) as u32;
        K4::new(
            word(k.src, self.src),
            word(k.dst, self.dst),
            k.sport,
            k.dport,
            k.proto,
            k.has,
        )
    }
}

/// The range of 32-bit word `w` (0: the top one) of the IPv6 addresses
/// `a` matches: a superset of `a` on that word (everything for an address
/// that is not an IPv6 prefix, which an IPv6 key's rule can only be
/// `Any`).
pub(super) fn v6_word_range(a: crate::Addr, w: u8) -> (u32, u32) {
    match a {
        crate::Addr::V6(p, len) => {
            let start = 32 * u32::from(w);
            let bits = u32::from(len).saturating_sub(start).min(32);
            let v = (p >> (96 - start)) as u32;
            let m = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits)
            };
            (v & m, v | !m)
        }
        _ => (0, u32::MAX),
    }
}

/// The top `len` bits of an IPv6 address.
fn prefix_mask(len: u32) -> u128 {
    match len {
        0 => 0,
        l => u128::MAX << (128 - l.min(128)),
    }
}

/// Keeps a block at four cache lines (32 bytes a rule).
const _: () = assert!(std::mem::size_of::<Block>() == 256);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_hit_is_the_first_lane_that_matches_and_a_miss_is_none() {
        // Lanes 2 and 5 take port 80, lane 7 anything: a key on port 80
        // hits lane 2, one on port 81 lane 7, and with lane 7 padding
        // nothing ([`Block::hit`] against [`Block::first_hit`] and
        // [`Block::hit_mask`]).
        let any = Lane {
            src: (0, u32::MAX),
            dst: (0, u32::MAX),
            sp: (0, u16::MAX),
            dp: (0, u16::MAX),
            pr: (0, 511),
            id: 0,
        };
        let mut blk = Block::PAD;
        for j in 0..BLOCK - 1 {
            let port = if j == 2 || j == 5 {
                80
            } else {
                1000 + j as u16
            };
            blk.set(
                j,
                &Lane {
                    dp: (port, port),
                    id: j as u32,
                    ..any
                },
            );
        }
        let k80 = Probe::of(&K4::new(1, 2, 3, 80, 6, has::PORTS));
        let k81 = Probe::of(&K4::new(1, 2, 3, 81, 6, has::PORTS));
        assert_eq!(blk.hit(&k80), Some(2));
        assert_eq!(blk.first_hit(&k80), 2);
        assert_eq!(blk.hit_mask(&k80), 1 << 2 | 1 << 5);
        assert_eq!(blk.hit(&k81), None);
        assert!(blk.first_hit(&k81) >= BLOCK);
        blk.set(BLOCK - 1, &Lane { id: 7, ..any });
        assert_eq!(blk.hit(&k81), Some(BLOCK - 1));
        assert_eq!(blk.hit_mask(&k81), 1 << (BLOCK - 1));
    }
}
