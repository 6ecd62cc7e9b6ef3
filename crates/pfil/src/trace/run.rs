//! The datapath of a traced chain: the match at entry, the links one by
//! one for the chunks with traced packets, the records pushed at the end.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::{Hop, HopNote, Trace, TraceRecord, TRACE_CHUNK};
use crate::chain::{run_link, Chain, Env, Link, Prefix};
use crate::{Ctx, Packet};

/// A traced chain in a generation.
pub(crate) struct Traced {
    pub(crate) trace: Arc<Trace>,
    pub(crate) inner: Chain,
    pub(crate) generation: u64,
}

/// Run a traced chain over a batch: chunks without a match run as usual.
#[cold]
#[inline(never)]
pub(crate) fn run_traced(t: &Traced, pkts: &mut [Packet<'_>], ctx: &Ctx<'_>, env: &Env<'_>) {
    for chunk in pkts.chunks_mut(TRACE_CHUNK) {
        let mut mask = 0u64;
        if !t.trace.done() {
            for (i, p) in chunk.iter().enumerate() {
                if p.verdict().is_pass() && t.trace.matches(p) {
                    mask |= 1 << i;
                }
            }
        }
        if mask != 0 {
            // Within the count asked for: the first `granted` matches.
            let granted = t.trace.take(u64::from(mask.count_ones()));
            for _ in granted..u64::from(mask.count_ones()) {
                mask &= !(1u64 << (63 - mask.leading_zeros()));
            }
        }
        if mask == 0 {
            t.inner.run(chunk, ctx, env);
        } else {
            run_chunk(t, chunk, mask, ctx, env);
        }
    }
}

/// The packets of `chunk` whose bit is set in `mask`, in order.
fn bits(mask: u64) -> impl Iterator<Item = usize> {
    let mut m = mask;
    std::iter::from_fn(move || {
        (m != 0).then(|| {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            i
        })
    })
}

fn call(first: bool, link: &Arc<Link>, pkts: &mut [Packet<'_>], ctx: &Ctx<'_>, env: &Env<'_>) {
    if pkts.is_empty() {
        return;
    }
    if first {
        run_link::<true>(link, pkts, ctx, env);
    } else {
        run_link::<false>(link, pkts, ctx, env);
    }
}

fn nanos(t0: Instant) -> u32 {
    u32::try_from(t0.elapsed().as_nanos()).unwrap_or(u32::MAX)
}

/// A chunk with traced packets (`mask`): the links one by one, recording
/// each traced packet's hop.
#[cold]
#[inline(never)]
fn run_chunk(t: &Traced, chunk: &mut [Packet<'_>], mask: u64, ctx: &Ctx<'_>, env: &Env<'_>) {
    let ts_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let mut buf = std::mem::MaybeUninit::uninit();
    let mut recs = Prefix::<TraceRecord, TRACE_CHUNK>::new(&mut buf);
    for i in bits(mask) {
        recs.push(TraceRecord::enter(&chunk[i], ctx, ts_ns, t.generation));
    }
    let recs = recs.into_mut_slice();
    // Split calls are not sampled (they would count as batches).
    let env = Env {
        kind: env.kind,
        quarantine: env.quarantine,
        refused: env.refused,
        sample: false,
    };
    for (li, link) in t.inner.links().iter().enumerate() {
        let first = li == 0;
        let index = u16::try_from(li).unwrap_or(u16::MAX);
        // A note for a packet that was `Pass` before the call; `q0`: the
        // link was quarantined before it.
        let note = |p: &Packet<'_>, q0: bool, batch: bool| {
            if first && p.kind() != env.kind {
                HopNote::RefusedKind
            } else if q0 {
                HopNote::Quarantined
            } else if link.quarantined.load(Relaxed) {
                HopNote::Fault
            } else if batch {
                HopNote::Batch
            } else {
                HopNote::Called
            }
        };
        let q0 = link.quarantined.load(Relaxed);
        if link.hook.batched {
            // One call on the chunk, timed as a whole.
            let mut shown = 0u64;
            let mut was_pass = 0u64;
            for (i, p) in chunk.iter().enumerate() {
                if p.verdict().is_pass() {
                    shown += 1;
                    was_pass |= 1 << i;
                }
            }
            let t0 = Instant::now();
            call(first, link, chunk, ctx, &env);
            let ns = nanos(t0);
            for (r, i) in recs.iter_mut().zip(bits(mask)) {
                if was_pass & (1 << i) != 0 {
                    let p = &chunk[i];
                    r.push(Hop {
                        index,
                        verdict: p.verdict(),
                        note: note(p, q0, true),
                        ns,
                        batch: u16::try_from(shown).unwrap_or(u16::MAX),
                    });
                }
            }
            continue;
        }
        // A per-packet hook: the untraced runs between traced packets in
        // one call each, every traced packet alone.
        let mut start = 0;
        for (r, i) in recs.iter_mut().zip(bits(mask)) {
            call(first, link, &mut chunk[start..i], ctx, &env);
            start = i + 1;
            if !chunk[i].verdict().is_pass() {
                continue;
            }
            let q0 = link.quarantined.load(Relaxed);
            let t0 = Instant::now();
            call(first, link, &mut chunk[i..=i], ctx, &env);
            let ns = nanos(t0);
            let p = &chunk[i];
            r.push(Hop {
                index,
                verdict: p.verdict(),
                note: note(p, q0, false),
                ns,
                batch: 1,
            });
        }
        call(first, link, &mut chunk[start..], ctx, &env);
    }
    let mut dropped = 0;
    for (r, i) in recs.iter_mut().zip(bits(mask)) {
        r.verdict = chunk[i].verdict();
        if t.trace.queue.push(*r).is_err() {
            dropped += 1;
        }
    }
    t.trace.traced.fetch_add(recs.len() as u64, Relaxed);
    if dropped != 0 {
        t.trace.dropped.fetch_add(dropped, Relaxed);
    }
}
