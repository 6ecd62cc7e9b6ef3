//! The acl's paths for rulesets that use connection state: `ct state` /
//! `ct dir` matches (classified per state) and `keep state` (the acl's
//! own state table).

use pfil::{Ctx, Packet, Verdict};
use pfil_acl::{Classify, CtClassifier, KeyV4};

use super::version::Quick;
use super::{key_of, key_of_reference, key_v4_into, Version, CHUNK};
use crate::ct::Existing;

/// An acl's link to the table of a `ct` hook before it
/// (`ct/keep.rs`): its keep id, shared by its versions (`set`, `apply`),
/// and how many flows its `keep state` rules marked there.
#[derive(Debug)]
pub(crate) struct KeepLink {
    pub(crate) id: u64,
    pub(crate) marked: std::sync::atomic::AtomicU64,
}

impl KeepLink {
    /// A link with a keep id no other acl has had.
    pub(crate) fn new() -> KeepLink {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        KeepLink {
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            marked: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

/// The state limit `rules` keep to in table `t`: their `set limit
/// states`, at most the table's size, else the table's size.
pub(super) fn state_max(rules: &pfil_acl::Ruleset, t: &crate::ct::Table) -> usize {
    rules
        .state_limit
        .map_or(t.built_for(), |n| n.min(t.built_for()))
}

/// The path of a ruleset with `keep state` rules, packet by packet, as
/// pf: a packet of a flow in the state table passes on its state
/// (annotated with it, as the `ct` hook would), or is dropped if it fails
/// the flow's checks (`invalid`: out of window, a reply where none can
/// be); any other packet walks the rules, and if a `keep state` rule
/// passes it, its flow's state is created (a TCP flow only by a SYN: a
/// packet that cannot start a flow passes on the rule without one).
/// Packets of live flows are looked up as the `ct` hook's batch does
/// ([`crate::ct::Table::existing`]: without the shard's lock), and a
/// chunk of [`CHUNK`] packets sweeps the next shard for expired flows.
///
/// After a `ct` hook (`ct/keep.rs`), the packets it annotated need no
/// lookup: a flow with the mark of this acl's `keep state` passes on its
/// state (dropped if the hook found it `invalid`); any other packet
/// walks the rules, and a `keep state` rule that passes it marks its
/// flow in the hook's table. Those packets go first, in a loop of their
/// own whose common case is one compare of the annotation; a batch the
/// hook annotated whole costs no clock read, epoch pin or bias section
/// of the acl's own table (callgrind, the acl after a `ct` hook at 1 000
/// flows: 53 -> 18 instructions a packet).
#[inline(never)]
pub(super) fn filter_batch_keep(
    v: &Version,
    t: &crate::ct::Table,
    link: &KeepLink,
    pkts: &mut [Packet<'_>],
    ctx: &Ctx<'_>,
) {
    // The table of the `ct` hook that ran last on this thread: this acl
    // marks flows there if the packets carry its tag (the hook ran
    // before the acl in this walk) and no other acl marks there (asked
    // at the first such packet of the batch).
    let ct = crate::ct::keep::noted();
    let mut linked = None;
    let mut ct_run = None;
    let mut rest = false;
    // Once this acl marks the hook's table: the annotation's extra bits
    // of a flow it marked; until then a value they never have (four bits).
    let mut kept = u8::MAX;
    for p in pkts.iter_mut().filter(|p| p.verdict().is_pass()) {
        // A flow this acl marked, not `invalid`: passes (the common case,
        // a compare of the annotation).
        if p.ct_ext() == kept && p.ct_state() != pfil::CtState::Invalid {
            continue;
        }
        match ct.as_deref().filter(|c| c.annotated(p)) {
            Some(c) if *linked.get_or_insert_with(|| c.keep_for(link.id)) => {
                kept = c.ext(true);
                keep_in_ct(v, c, link, p, ctx, &mut ct_run);
            }
            _ => rest = true,
        }
    }
    // What the loop above took, the acl's own table leaves alone.
    let took = ct.as_deref().filter(|_| linked == Some(true));
    if rest {
        keep_in_own(v, t, took, pkts, ctx);
    } else if !t.is_empty() {
        // Expired flows go and stop counting against the limit, as if
        // the packets had been looked up there.
        let run = own_run(v, t);
        for chunk in pkts.chunks(CHUNK) {
            t.sweep_in(chunk.len() * crate::ct::table::SWEEP, run);
        }
    }
}

/// The clock and state limit of a batch in the acl's own table.
fn own_run(v: &Version, t: &crate::ct::Table) -> crate::ct::Run {
    crate::ct::Run {
        now: t.now(),
        loose: false,
        max: state_max(&v.rules, t),
    }
}

/// [`filter_batch_keep`]'s packets in the acl's own state table: every
/// packet still passing but those of the `ct` hook's table `took`.
#[inline(never)]
fn keep_in_own(
    v: &Version,
    t: &crate::ct::Table,
    took: Option<&crate::ct::Table>,
    pkts: &mut [Packet<'_>],
    ctx: &Ctx<'_>,
) {
    let run = own_run(v, t);
    // The adaptive timeouts' scale once a batch (the table's size moves
    // by at most the batch's new flows meanwhile), as the `ct` hook.
    let ad = crate::ct::table::Adaptive::at(t.len(), run.max);
    // The state table's indexes are read under an epoch: one pin a batch.
    let g = &crossbeam_epoch::pin();
    // One worker's table updates live entries without their locks.
    let section = t.bias(ctx.worker);
    let b = crate::ct::Batch {
        run,
        ad,
        worker: ctx.worker,
        biased: section.biased(),
    };
    for chunk in pkts.chunks_mut(CHUNK) {
        for p in chunk.iter_mut().filter(|p| p.verdict().is_pass()) {
            if took.is_some_and(|c| c.annotated(p)) {
                continue;
            }
            let len = u32::try_from(p.len()).unwrap_or(u32::MAX);
            let c = match t.existing_in(p, len, &b, g) {
                Existing::Found(st, reply) => {
                    p.set_ct(st, reply);
                    if st == pfil::CtState::Invalid {
                        p.set_verdict(Verdict::Dropped);
                    }
                    continue;
                }
                Existing::Absent(c) => c,
            };
            let (m, verdict) = decide_marked(v, p, ctx);
            if verdict.is_pass() && m.is_some_and(|i| v.rules.rules[i as usize].keep_state) {
                match t.track_why_in(c, len, run, ctx.worker) {
                    Ok((st, reply)) => p.set_ct(st, reply),
                    // The table is full: as pf, the packet that would have
                    // made a state is dropped (counted: invalid, limit).
                    Err(crate::ct::Invalid::Limit) => {
                        p.set_verdict(Verdict::Dropped);
                        continue;
                    }
                    // A packet that cannot start a flow passes on the rule.
                    Err(_) => {}
                }
            }
            p.set_verdict(verdict);
        }
        // Expired flows go and stop counting against the limit: the next
        // shard in turn, as the `ct` hook sweeps once a chunk.
        t.sweep_in(chunk.len() * crate::ct::table::SWEEP, run);
    }
}

/// [`filter_batch_keep`] of a packet the `ct` hook of table `c`
/// annotated (`run`: the hook's clock, read once a batch when needed).
#[inline(always)]
fn keep_in_ct(
    v: &Version,
    c: &crate::ct::Table,
    link: &KeepLink,
    p: &mut Packet<'_>,
    ctx: &Ctx<'_>,
    run: &mut Option<crate::ct::Run>,
) {
    let st = p.ct_state();
    // A flow this acl's `keep state` passed: on its state. The mark as
    // the hook read it, else as the table has it now: a flow marked
    // after the hook annotated this packet (its first packet earlier in
    // this batch, or on another worker meanwhile) is marked all the same.
    if p.ct_ext() & crate::ct::keep::EXT_KEPT != 0 || c.kept_now(p) {
        if st == pfil::CtState::Invalid {
            p.set_verdict(Verdict::Dropped);
        }
        return;
    }
    let (m, verdict) = decide_marked(v, p, ctx);
    if verdict.is_pass()
        && st != pfil::CtState::Invalid
        && m.is_some_and(|i| v.rules.rules[i as usize].keep_state)
    {
        let run = *run.get_or_insert_with(|| crate::ct::Run {
            now: c.now(),
            loose: false,
            max: c.built_for(),
        });
        if c.mark_kept(p, ctx.worker, run) {
            link.marked
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    p.set_verdict(verdict);
}

/// The first rule matching `p` with its connection state and mark (rule
/// by rule if a rule matches a mark), the verdict it gives (counted),
/// and the mark it sets, set on `p`.
#[inline(always)]
fn decide_marked(v: &Version, p: &mut Packet<'_>, ctx: &Ctx<'_>) -> (Option<u32>, Verdict) {
    let mut k = key_of(p);
    k.ct = p.ct_bits();
    k.mark = p.mark();
    let m = v.classify(&k);
    let verdict = v.decide(m, ctx.worker);
    v.set_mark(m, p);
    (m, verdict)
}

/// The path of a ruleset whose rules match or set marks, packet by
/// packet: the key with the packet's connection state and mark, the
/// first matching rule (rule by rule if a rule matches a mark), its
/// verdict and the mark it sets.
#[inline(never)]
pub(super) fn filter_batch_marks(v: &Version, pkts: &mut [Packet<'_>], ctx: &Ctx<'_>) {
    for p in pkts.iter_mut().filter(|p| p.verdict().is_pass()) {
        let (_, verdict) = decide_marked(v, p, ctx);
        p.set_verdict(verdict);
    }
}

/// The batch path of a ruleset with `ct` matches: each packet's
/// connection state (its [`Packet::ct_bits`], set by a `ct` hook earlier
/// in the chain) picks the classifier of the rules that can match in that
/// state. A packet whose part's first rule matches every packet (`pass
/// ct state established,related` leading) is answered without a key;
/// the others of each 64 are classified together ([`classify_ct`]).
/// Not inlined: the stateless path keeps its registers.
#[inline(never)]
pub(super) fn filter_batch_ct(v: &Version, pkts: &mut [Packet<'_>], ctx: &Ctx<'_>) {
    for chunk in pkts.chunks_mut(CHUNK) {
        // Bit i: packet i is left to classify.
        let mut todo = 0u64;
        for (i, p) in chunk.iter_mut().enumerate() {
            if !p.verdict().is_pass() {
                continue;
            }
            let q = v.quick[usize::from(p.ct_bits())];
            if q == Quick::Pass {
                continue;
            }
            match q {
                Quick::Pass => {}
                Quick::Drop => p.set_verdict(Verdict::Dropped),
                Quick::Rule(rule) => {
                    let verdict = v.decide(Some(rule), ctx.worker);
                    p.set_verdict(verdict);
                }
                Quick::Classify => todo |= 1 << i,
            }
        }
        if todo != 0 {
            classify_ct(v, chunk, todo, ctx);
        }
    }
}

/// [`filter_batch_ct`]'s packets `todo` (bit i: packet i) of a chunk of
/// at most [`CHUNK`]: IPv4 keys classified a chunk at a time per
/// classifier, other packets one by one.
#[inline(never)]
fn classify_ct(v: &Version, pkts: &mut [Packet<'_>], todo: u64, ctx: &Ctx<'_>) {
    debug_assert!(pkts.len() <= CHUNK);
    let mut keys = [KeyV4::default(); CHUNK];
    let mut idx = [0usize; CHUNK];
    let mut part = [0u8; CHUNK];
    let mut sub = [KeyV4::default(); CHUNK];
    let mut sub_idx = [0usize; CHUNK];
    let mut res = [None; CHUNK];
    let mut n = 0;
    for (i, p) in pkts.iter_mut().enumerate() {
        if todo & 1 << i == 0 {
            continue;
        }
        let pi = v.classifier.part_of(p.ct_bits());
        if key_v4_into(p, &mut keys[n]) {
            idx[n] = i;
            part[n] = pi as u8;
            n += 1;
        } else {
            let mut k = key_of_reference(p);
            k.ct = p.ct_bits();
            let m = v.classifier.classify(&k);
            let verdict = v.decide(m, ctx.worker);
            p.set_verdict(verdict);
        }
    }
    for pi in 0..v.classifier.parts() {
        let mut m = 0;
        for j in 0..n {
            if usize::from(part[j]) == pi {
                sub[m] = keys[j];
                sub_idx[m] = idx[j];
                m += 1;
            }
        }
        if m == 0 {
            continue;
        }
        let (c, map) = v.classifier.part(pi);
        c.classify_batch_v4(&sub[..m], &mut res[..m]);
        for j in 0..m {
            let verdict = v.decide(CtClassifier::global(map, res[j]), ctx.worker);
            pkts[sub_idx[j]].set_verdict(verdict);
        }
    }
}

impl super::Acl {
    /// How many keep-state flows `expr` matches, and at most `limit` of
    /// them (`None`: no keep-state table).
    pub fn list_matching(
        &self,
        expr: &crate::ct::StateExpr,
        limit: usize,
    ) -> Option<(usize, Vec<crate::ct::StateInfo>)> {
        let t = self.states.get()?;
        Some(t.states_matching(crate::ct::DEFAULT_MAX, limit, |s| expr.matches(s)))
    }

    /// Remove the keep-state flows `expr` matches; how many (`None`: no
    /// keep-state table).
    pub fn kill_states(&self, expr: &crate::ct::StateExpr) -> Option<usize> {
        let t = self.states.get()?;
        Some(t.kill(crate::ct::DEFAULT_MAX, |s| expr.matches(s)))
    }
}
