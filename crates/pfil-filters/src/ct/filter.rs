//! The `ct` filter: the hook over a [`Table`], its config in force,
//! and what it keeps across `set` and `apply`.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use crossbeam_epoch::Guard;
use pfil::{CtState, Ctx, Filter, FilterStat, Packet, StatKind, Verdict};

use super::table::{Adaptive, Slot};
use super::{flow, CtConfig, Invalid, Run, StateInfo, Table, TcpMode};

/// The `ct` filter. Filters derived from one another
/// ([`Filter::derive`]) share the table.
pub struct Ct {
    table: Arc<Table>,
    max: AtomicUsize,
    loose: AtomicBool,
    drop_invalid: AtomicBool,
    config: Mutex<CtConfig>,
    /// Whether the spec had a config (`ct` or `ct:...`).
    bare: AtomicBool,
}

impl Ct {
    /// A tracker with its own table, for a registry with `max_workers`
    /// worker slots.
    pub fn new(cfg: CtConfig, max_workers: usize) -> Ct {
        Ct::with_table(Arc::new(Table::new(cfg.max, max_workers)), cfg)
    }

    fn with_table(table: Arc<Table>, cfg: CtConfig) -> Ct {
        Ct {
            table,
            max: AtomicUsize::new(cfg.max),
            loose: AtomicBool::new(cfg.tcp == TcpMode::Loose),
            drop_invalid: AtomicBool::new(cfg.drop_invalid),
            config: Mutex::new(cfg),
            bare: AtomicBool::new(false),
        }
    }

    /// Builds from the text after `ct:` (empty: the defaults).
    ///
    /// # Errors
    /// What is wrong with the config.
    pub fn from_config(config: &str, max_workers: usize) -> Result<Ct, String> {
        let ct = Ct::new(CtConfig::parse(config)?, max_workers);
        ct.bare.store(config.trim().is_empty(), Relaxed);
        Ok(ct)
    }

    /// The table.
    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// The config in force.
    pub fn config(&self) -> CtConfig {
        *self.config.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every tracked flow.
    pub fn states(&self) -> Vec<StateInfo> {
        self.table.states(self.max.load(Relaxed))
    }

    /// How many flows are tracked, and at most `limit` of them.
    pub fn list_states(&self, limit: usize) -> (usize, Vec<StateInfo>) {
        let t = &self.table;
        (t.len(), t.states_limited(self.max.load(Relaxed), limit))
    }

    /// How many flows `expr` matches, and at most `limit` of them.
    pub fn list_matching(&self, expr: &super::StateExpr, limit: usize) -> (usize, Vec<StateInfo>) {
        self.table
            .states_matching(self.max.load(Relaxed), limit, |s| expr.matches(s))
    }

    /// Remove the flows `expr` matches; how many.
    pub fn kill_states(&self, expr: &super::StateExpr) -> usize {
        self.table.kill(self.max.load(Relaxed), |s| expr.matches(s))
    }

    /// `config` for this hook's table (`set`, `apply`): parsed, with
    /// `max` the table's size when the config does not give one (a
    /// `set ct:fw --set "tcp loose"` on a hook built with `max 1000`
    /// keeps 1000, where the default, 100 000, would be refused), and
    /// refused when it gives more than the table was built for.
    pub fn parse_keeping(&self, config: &str) -> Result<CtConfig, String> {
        let mut c = CtConfig::parse(config)?;
        if !config.split_whitespace().any(|w| w == "max") {
            c.max = self.table.built_for;
        }
        self.check(&c)?;
        Ok(c)
    }

    fn check(&self, cfg: &CtConfig) -> Result<(), String> {
        if cfg.max > self.table.built_for {
            return Err(format!(
                "max: {} is over the {} flows this hook's table was built for; \
                 states are kept only up to that (remove the hook and add it again \
                 for a larger table, losing its states)",
                cfg.max, self.table.built_for
            ));
        }
        Ok(())
    }

    fn run(&self) -> Run {
        Run {
            now: self.table.now(),
            loose: self.loose.load(Relaxed),
            max: self.max.load(Relaxed),
        }
    }
}

impl fmt::Debug for Ct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ct")
            .field("config", &self.config())
            .field("entries", &self.table.len())
            .finish()
    }
}

/// Packets a batch stages before it tracks them, and tracks between two
/// sweeps of a shard (`SWEEP` entries each; a port's whole batch).
const PIPE: usize = 64;
/// Entries from which a batch prefetches: below, the table (96 bytes
/// an entry and its index) fits in a core's L2 cache (1 MiB here) and
/// the prefetches are instructions for nothing.
const PREFETCH_FROM: usize = 8192;

impl Ct {
    /// The batch path, in passes over each [`PIPE`] packets (VPP's way
    /// with a burst). The first hashes each plain IPv4 UDP or TCP packet
    /// by its key's words ([`flow::plain_v4_key`]); then the entry each
    /// packet's index slot names is read, a hint for its lookup; the last
    /// pass tracks each packet, a plain one by its staged words on its
    /// hint ([`Table::track_words`]). A lookup is a chain of dependent
    /// loads (the shard's view, its index, the slot, the chunk, the
    /// entry): in a pass of lookups alone the chains of many packets
    /// overlap, where tracking one packet at a time left each exposed.
    ///
    /// `FAR` (a table past [`PREFETCH_FROM`] entries, larger than the
    /// caches): the first pass also prefetches each index slot, and the
    /// second each entry, so that a chunk's misses overlap; a packet that
    /// is not plain is classified and hashed in the first pass too (its
    /// class kept beside). Near, the hint is read in the first pass and a
    /// packet that is not plain is classified when it is tracked.
    pub(super) fn batch<const BIASED: bool, const FAR: bool>(
        &self,
        pkts: &mut [Packet<'_>],
        ctx: &Ctx<'_>,
        run: Run,
        ad: Adaptive,
        g: &Guard,
    ) {
        let drop_invalid = self.drop_invalid.load(Relaxed);
        let t = &*self.table;
        let b = super::Batch {
            run,
            ad,
            worker: ctx.worker,
            biased: BIASED,
        };
        for chunk in pkts.chunks_mut(PIPE) {
            // What the passes found of each packet (4 KiB, cleared a
            // chunk: two stores a packet), and the class of each staged
            // as `Other` or `Unhashed` (written only for those).
            let mut ahead = [Ahead::default(); PIPE];
            let mut classes = [flow::Class::Untracked; PIPE];
            for ((p, a), c) in chunk.iter().zip(ahead.iter_mut()).zip(classes.iter_mut()) {
                if !p.verdict().is_pass() {
                    continue;
                }
                if let Some((w, side, proto)) = flow::plain_v4_key(p) {
                    let h = t.hash_words(&w);
                    *a = Ahead {
                        w,
                        h,
                        hint: None,
                        side,
                        proto,
                        how: How::Plain,
                    };
                    if FAR {
                        t.prefetch(h, false, g);
                    } else {
                        a.hint = t.peek_entry(h, g);
                    }
                } else if FAR {
                    if let Some(h) = stage_other(a, c, p, t) {
                        t.prefetch(h, false, g);
                    }
                } else {
                    a.how = How::Cold;
                }
            }
            if FAR {
                for a in ahead.iter_mut().take(chunk.len()) {
                    if matches!(a.how, How::Plain | How::Other) {
                        a.hint = t.prefetch_entry(a.h, g);
                    }
                }
            }
            for ((p, a), c) in chunk.iter_mut().zip(&ahead).zip(&classes) {
                let len = u32::try_from(p.len()).unwrap_or(u32::MAX);
                let (s, reply, kept) = match a.how {
                    How::Skip => continue,
                    // The live flow's way inline; anything else (a miss,
                    // a segment the plain parse refuses) out of line, from
                    // the packet again, so that the loop keeps nothing
                    // for it.
                    How::Plain => match flow::plain_v4_kind(p, a.proto) {
                        Some(kind) => t.track_words(a.hint, &a.w, a.h, a.side, kind, len, &b, g),
                        None => t.track_cold(p, len, &b, g),
                    },
                    How::Other => track_other(t, c, Some(a.h), len, &b, g),
                    How::Unhashed => track_other(t, c, None, len, &b, g),
                    How::Cold => t.track_cold(p, len, &b, g),
                };
                p.set_ct_ext(s, reply, t.ext(kept));
                if drop_invalid && s == CtState::Invalid {
                    p.set_verdict(Verdict::Dropped);
                }
            }
            t.sweep_in(chunk.len() * super::table::SWEEP, run);
        }
    }
}

/// [`Table::track_batch`] of a packet that is not plain, out of line
/// (the plain packets' loop keeps its registers).
#[cold]
#[inline(never)]
fn track_other(
    t: &Table,
    c: &flow::Class,
    h: Option<u64>,
    len: u32,
    b: &super::Batch,
    g: &Guard,
) -> (CtState, bool, bool) {
    t.track_batch(c, h, len, b, g)
}

/// Stage a packet that is not plain in [`Ct::batch`]'s first pass (far):
/// its class into `class`, its hash (if it has one) into `a`. Out of
/// line, so that the plain packets' loop keeps its registers.
#[cold]
#[inline(never)]
fn stage_other(
    a: &mut Ahead<'_>,
    class: &mut flow::Class,
    p: &Packet<'_>,
    t: &Table,
) -> Option<u64> {
    *class = flow::classify(p);
    let h = t.hash_of(class);
    a.how = match h {
        Some(h) => {
            a.h = h;
            How::Other
        }
        None => How::Unhashed,
    };
    h
}

/// A packet as [`Ct::batch`]'s passes leave it: how it is tracked; a
/// plain IPv4 UDP or TCP packet's key words `w` and side (`side`: its
/// source is the key's `a`) and protocol; its hash `h` (an ICMP error's:
/// the quoted flow's) and the entry its index slot names (`hint`).
#[derive(Clone, Copy, Default)]
struct Ahead<'t> {
    w: [u64; 5],
    h: u64,
    hint: Option<&'t Slot>,
    side: bool,
    proto: u8,
    how: How,
}

/// How an [`Ahead`] packet is tracked.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum How {
    /// Not at all: an earlier hook did not pass it.
    #[default]
    Skip,
    /// A plain IPv4 UDP or TCP packet ([`flow::plain_v4`]), by its words.
    Plain,
    /// Any other, by the class kept beside (far).
    Other,
    /// Any other without a hash (nothing to look up), the same.
    Unhashed,
    /// Any other, classified when it is tracked (near).
    Cold,
}

impl Filter for Ct {
    fn filter(&self, pkt: &mut Packet<'_>, ctx: &Ctx<'_>) -> Verdict {
        self.filter_batch(std::slice::from_mut(pkt), ctx);
        pkt.verdict()
    }

    /// One clock read for the batch; each packet of a live flow looked
    /// up and updated under its entry's lock alone (no lock at all in a
    /// batch of the table's only worker: `bias.rs`), any other under its
    /// shard's lock; in passes over each 64 packets (`Ct::batch`): the
    /// packets hashed and their entries found first, then tracked; from
    /// 8 192 entries (a smaller table is in the caches) with their index
    /// slots, then their entries, prefetched a chunk at a time (as VPP
    /// does with a burst), so that the misses overlap. A chunk of 64
    /// packets also sweeps the next shard in turn for expired flows.
    fn filter_batch(&self, pkts: &mut [Packet<'_>], ctx: &Ctx<'_>) {
        let run = self.run();
        let n = self.table.len();
        // The adaptive timeouts' scale, once a batch (the table's size
        // moves by at most a batch's new flows meanwhile).
        let ad = Adaptive::at(n, run.max);
        // The shards' indexes are read under an epoch (a shard that grows
        // replaces its index): one pin a batch, nested in the datapath's.
        let g = &crossbeam_epoch::pin();
        // One worker's table updates live entries without their locks
        // (see `bias`); the monomorphised loops keep the test out of them.
        let section = self.table.bias.enter(ctx.worker);
        // For an acl's `keep state` later in the walk (`keep.rs`).
        super::keep::note(&self.table);
        match (section.biased(), n > PREFETCH_FROM) {
            (true, true) => self.batch::<true, true>(pkts, ctx, run, ad, g),
            (true, false) => self.batch::<true, false>(pkts, ctx, run, ad, g),
            (false, true) => self.batch::<false, true>(pkts, ctx, run, ad, g),
            (false, false) => self.batch::<false, false>(pkts, ctx, run, ad, g),
        }
    }

    fn batched(&self) -> bool {
        true
    }

    fn spec(&self) -> Option<String> {
        if self.bare.load(Relaxed) {
            return Some("ct".into());
        }
        Some(format!("ct:{}", self.config()))
    }

    /// A new config in place; the states stay. A config without `max`
    /// keeps the table's size (the `max` it was built with), not the
    /// default: see [`Ct::parse_keeping`].
    fn reconfigure(&self, config: &str) -> Option<Result<(), String>> {
        let cfg = match self.parse_keeping(config) {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        self.max.store(cfg.max, Relaxed);
        self.loose.store(cfg.tcp == TcpMode::Loose, Relaxed);
        self.drop_invalid.store(cfg.drop_invalid, Relaxed);
        self.bare.store(
            config.trim().is_empty() && cfg == CtConfig::default(),
            Relaxed,
        );
        *self.config.lock().unwrap_or_else(|e| e.into_inner()) = cfg;
        Some(Ok(()))
    }

    /// A new filter with this config sharing this one's table (and so
    /// every state); this one is unchanged.
    fn derive(&self, config: &str) -> Option<Result<Arc<dyn Filter>, String>> {
        Some(self.parse_keeping(config).map(|c| {
            let ct = Ct::with_table(self.table.clone(), c);
            ct.bare.store(
                config.trim().is_empty() && c == CtConfig::default(),
                Relaxed,
            );
            Arc::new(ct) as Arc<dyn Filter>
        }))
    }

    /// `Some(self)`: a control plane lists the states
    /// ([`Ct::states`]).
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    /// `entries`, `max`, `table_bytes` (gauges); `inserts`, `expiries`,
    /// `refused` and `invalid` by `reason` (counters).
    fn stats(&self) -> Vec<FilterStat> {
        let (ins, exp, inv) = self.table.counts();
        let mut invalid = FilterStat::new(
            "invalid",
            StatKind::Counter,
            "Packets annotated invalid, by reason.",
        );
        for r in Invalid::ALL {
            invalid = invalid.sample(&[("reason", r.name())], inv[r as usize]);
        }
        vec![
            FilterStat::gauge("entries", "Flows in the table.", self.table.len() as u64),
            FilterStat::gauge(
                "max",
                "Most flows the table takes.",
                self.max.load(Relaxed) as u64,
            ),
            FilterStat::gauge(
                "table_bytes",
                "Bytes the table has allocated.",
                self.table.bytes() as u64,
            ),
            FilterStat::counter("inserts", "Flows created.", ins),
            FilterStat::counter("expiries", "Flows removed on expiry.", exp),
            FilterStat::counter(
                "killed",
                "Flows removed by an operator (pfilctl states --kill).",
                self.table.killed(),
            ),
            FilterStat::counter(
                "refused",
                "New flows refused at the limit (their packets are invalid, reason limit).",
                inv[Invalid::Limit as usize],
            ),
            invalid,
        ]
    }
}
