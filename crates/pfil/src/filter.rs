//! The hook contract: what a filter implements and what it may do.

use std::sync::Arc;

use crate::{Dir, Packet, Verdict};

/// Where a hook is being run: the head, the direction and the worker.
///
/// More may come: a test or a bench that calls a filter itself builds one
/// with [`Ctx::new`].
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Ctx<'a> {
    /// Name of the head running the chain.
    pub head: &'a str,
    /// Direction of the chain.
    pub dir: Dir,
    /// Index of the calling worker, below [`Registry::max_workers`]. Hooks
    /// that keep statistics index per-worker slots with it, so they never
    /// write a cache line another worker writes.
    ///
    /// [`Registry::max_workers`]: crate::Registry::max_workers
    pub worker: usize,
}

impl<'a> Ctx<'a> {
    /// The context of a run of `head`'s chain for `dir` by worker
    /// `worker`: what the registry gives a hook, for a test or a bench
    /// that calls a filter directly.
    pub fn new(head: &'a str, dir: Dir, worker: usize) -> Ctx<'a> {
        Ctx { head, dir, worker }
    }
}

/// A packet filter: the object behind a hook.
///
/// # Contract
/// - `filter` returns a [`Verdict`] and must not block, sleep or take a lock
///   that a writer holds for long: it runs inline on the datapath.
/// - It may rewrite the frame bytes; it must not hold on to them unless it
///   returns [`Verdict::Consumed`], in which case the driver's frame
///   ownership rules apply.
/// - It must not call registry writer methods ([`Registry::link`] and
///   friends); with the `witness` feature such a call fails with
///   [`Error::WriterInHook`].
/// - It should not panic. If it does, the panic is caught, the link is
///   quarantined (skipped at once, unlinked by the next writer), counted,
///   and the packet gets the link's [`FailMode`] verdict.
/// - It lives as long as its hook is registered, linked or not: unlinking
///   does not drop it, [`Registry::remove_hook`] does, on whatever thread
///   retires the last generation that referenced it (after the grace
///   period): keep `Drop` cheap. It may call the registry.
///
/// [`Registry::remove_hook`]: crate::Registry::remove_hook
///
/// [`Registry::link`]: crate::Registry::link
/// [`Error::WriterInHook`]: crate::Error::WriterInHook
/// [`FailMode`]: crate::FailMode
pub trait Filter: Send + Sync + 'static {
    /// Decide one packet. Only packets whose verdict is still `Pass` are shown.
    fn filter(&self, pkt: &mut Packet<'_>, ctx: &Ctx<'_>) -> Verdict;

    /// Decide a whole batch, writing verdicts with [`Packet::set_verdict`].
    ///
    /// Called instead of [`filter`](Filter::filter) when
    /// [`batched`](Filter::batched) returns `true`. The batch may hold
    /// packets that are already `Dropped`/`Consumed`: skip them and leave
    /// their verdict alone. If it panics, the hook is quarantined and every
    /// packet it was shown keeps its verdict, except under
    /// [`FailMode::Closed`](crate::FailMode::Closed), where they are dropped.
    fn filter_batch(&self, pkts: &mut [Packet<'_>], ctx: &Ctx<'_>) {
        for p in pkts.iter_mut().filter(|p| p.verdict().is_pass()) {
            let v = self.filter(p, ctx);
            p.set_verdict(v);
        }
    }

    /// Whether the runner should call [`filter_batch`](Filter::filter_batch).
    /// Read once, when the hook is added.
    fn batched(&self) -> bool {
        false
    }

    /// The spec this filter was built from, as a filter catalog takes it
    /// (`module` or `module:config`, e.g. `drop-udp:53`), or `None` for a
    /// filter no catalog can rebuild (a closure, an app's own type).
    ///
    /// A control plane lists it ([`HookInfo::spec`](crate::HookInfo::spec))
    /// and writes it into a saved configuration, so building a filter from
    /// the returned spec must give one that behaves the same. Called only
    /// when hooks are listed, never on the datapath.
    fn spec(&self) -> Option<String> {
        None
    }

    /// Take a new configuration (what follows `module:` in its spec) in
    /// place, keeping what the filter keeps across it (an ACL: the hit
    /// counters of rules in both rulesets). `None`: this filter cannot,
    /// and a control plane rebuilds it from its catalog instead
    /// ([`Op::ReplaceFilter`](crate::Op::ReplaceFilter)). `Some(Err)`:
    /// the configuration is bad and nothing changed.
    ///
    /// Called on a control thread through
    /// [`Registry::reconfigure_hook`](crate::Registry::reconfigure_hook),
    /// never on the datapath, without the registry's writer lock. On
    /// `Some(Ok)`, batches that started before the call may finish on the
    /// old configuration; the call returns once none does, so what the old
    /// configuration owned is freed here, not on a datapath thread, and
    /// [`spec`](Filter::spec) reports the new configuration.
    fn reconfigure(&self, config: &str) -> Option<Result<(), String>> {
        let _ = config;
        None
    }

    /// A new filter with configuration `config` (what follows `module:`
    /// in its spec) that carries over what this one keeps across a
    /// change of configuration (an ACL: the hit counters of the rules in
    /// both rulesets, which the two filters then share), for a control
    /// plane to publish in this filter's place with
    /// [`Op::ReplaceFilter`](crate::Op::ReplaceFilter), possibly in a
    /// transaction with other operations: unlike
    /// [`reconfigure`](Filter::reconfigure), the change is all or nothing
    /// with the rest of the transaction. `None`: this filter cannot, and
    /// a control plane builds the new filter from its catalog instead.
    /// `Some(Err)`: the configuration is bad.
    ///
    /// This filter is not changed: it runs as before until the new one is
    /// published, and if that never happens (the transaction failed),
    /// dropping the new one leaves it as it was. Once published, batches
    /// that started before may still run this one during the grace
    /// period, at the same time as the new one runs later batches: what
    /// the two share must stay right under that (an ACL's shared
    /// counters: a hit on either is counted once). The new filter's
    /// [`spec`](Filter::spec) reports `config`.
    ///
    /// Called on a control thread through
    /// [`Registry::derive_filter`](crate::Registry::derive_filter), never
    /// on the datapath, without the registry's writer lock.
    fn derive(&self, config: &str) -> Option<Result<Arc<dyn Filter>, String>> {
        let _ = config;
        None
    }

    /// The filter's own statistics: named counters and gauges beyond the
    /// per-link verdict counters the registry keeps (an ACL's per-rule
    /// hits, a rate limiter's evictions), empty by default.
    ///
    /// Read by [`Registry::hook_stats`](crate::Registry::hook_stats) and
    /// [`Registry::filter_stats`](crate::Registry::filter_stats) on the
    /// caller's thread, only when listed, never on the datapath and never
    /// under a registry lock: a filter keeps the counts however suits its
    /// datapath (per-worker slots) and sums them here.
    fn stats(&self) -> Vec<FilterStat> {
        Vec::new()
    }

    /// The filter as [`Any`](std::any::Any), for a control plane that
    /// asks a filter type it knows for what only that type has (the `ct`
    /// hook's state table for `pfilctl states`): `Some(self)` from a
    /// filter that offers it, `None` by default. Called off the datapath.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// Whether a [`FilterStat`] only goes up or may go both ways.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
#[non_exhaustive]
pub enum StatKind {
    /// Counts up from 0 while the filter lives (hits, evictions).
    Counter,
    /// A current level (table occupancy, sizes).
    Gauge,
}

impl std::fmt::Display for StatKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StatKind::Counter => "counter",
            StatKind::Gauge => "gauge",
        })
    }
}

/// One value of a [`FilterStat`], told apart from the stat's other
/// values by its labels (an ACL's `rule` = `3`), or the only value, with
/// no labels.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct StatSample {
    /// Label names and values, in the filter's order.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: u64,
}

/// One of a filter's own statistics ([`Filter::stats`]): a named counter
/// or gauge with one value, or a table of values told apart by labels
/// (what OpenMetrics calls a metric family).
///
/// Names are lowercase words joined by `_` (`rule_hits`, `evictions`,
/// `table_used`), without a unit or `_total` suffix: exporters add their
/// own prefix and suffix (`pfil_filter_rule_hits_total`). Label names
/// follow the same rule; `hook` is taken by exporters for the hook name.
///
/// # Examples
/// ```
/// use pfil::{FilterStat, StatKind};
///
/// let evictions = FilterStat::counter("evictions", "Buckets evicted.", 3);
/// assert_eq!((evictions.kind, evictions.value()), (StatKind::Counter, Some(3)));
/// let hits = FilterStat::new("rule_hits", StatKind::Counter, "Packets each rule decided.")
///     .sample(&[("rule", "0"), ("text", "drop proto udp")], 7)
///     .sample(&[("rule", "default"), ("text", "default pass")], 2);
/// assert_eq!(hits.samples.len(), 2);
/// assert_eq!(hits.samples[0].label("rule"), Some("0"));
/// assert_eq!(hits.value(), None); // a table, not one value
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct FilterStat {
    /// Name (`rule_hits`).
    pub name: String,
    /// Counter or gauge.
    pub kind: StatKind,
    /// One line saying what it counts.
    pub help: String,
    /// Its values: one without labels, or one per row.
    pub samples: Vec<StatSample>,
}

impl FilterStat {
    /// A stat with no values yet; add them with [`sample`](Self::sample).
    pub fn new(name: &str, kind: StatKind, help: &str) -> FilterStat {
        FilterStat {
            name: name.to_owned(),
            kind,
            help: help.to_owned(),
            samples: Vec::new(),
        }
    }

    /// A counter with one value.
    pub fn counter(name: &str, help: &str, value: u64) -> FilterStat {
        FilterStat::new(name, StatKind::Counter, help).sample(&[], value)
    }

    /// A gauge with one value.
    pub fn gauge(name: &str, help: &str, value: u64) -> FilterStat {
        FilterStat::new(name, StatKind::Gauge, help).sample(&[], value)
    }

    /// This stat with one more value, labelled `labels`.
    #[must_use]
    pub fn sample(mut self, labels: &[(&str, &str)], value: u64) -> FilterStat {
        self.samples.push(StatSample {
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            value,
        });
        self
    }

    /// The value of a stat with exactly one sample and no labels, else
    /// `None`.
    pub fn value(&self) -> Option<u64> {
        match self.samples.as_slice() {
            [s] if s.labels.is_empty() => Some(s.value),
            _ => None,
        }
    }
}

impl StatSample {
    /// The value of label `name`, if it has one.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Closures are filters, which keeps tests and small programs short.
impl<F> Filter for F
where
    F: Fn(&mut Packet<'_>, &Ctx<'_>) -> Verdict + Send + Sync + 'static,
{
    #[inline]
    fn filter(&self, pkt: &mut Packet<'_>, ctx: &Ctx<'_>) -> Verdict {
        self(pkt, ctx)
    }
}
