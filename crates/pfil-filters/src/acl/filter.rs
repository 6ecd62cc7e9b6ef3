//! The [`Acl`] filter: its ruleset swapped in place, counters read and
//! carried over, and the [`Filter`] hooks.

use super::*;

/// Hits of one counted rule (or of the default action).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleHits {
    /// Index of the rule in the ruleset, `None` for the default action.
    pub rule: Option<usize>,
    /// The rule's text (`default pass` for the default action).
    pub text: String,
    /// Packets it decided, summed over workers.
    pub hits: u64,
}

/// How long [`Acl::replace`] waits for batches still on the old ruleset
/// before it returns (and leaves the last of them to free it).
pub(super) const RETIRE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The ACL filter. Clones share the ruleset and the counters: keep one to
/// read counters and to [`replace`](Acl::replace) the rules.
/// [`with_rules`](Acl::with_rules) makes a new filter that shares only
/// the counters of the rules both have.
#[derive(Clone)]
pub struct Acl {
    pub(super) current: Arc<ArcSwap<Version>>,
    pub(super) slab: Arc<Slab>,
    /// Serializes [`Acl::replace`]s (two racing would both carry from
    /// the same old version).
    pub(super) replacing: Arc<std::sync::Mutex<()>>,
    /// The `acl:` config it was built from ([`Filter::spec`]); `None`
    /// once [`Acl::replace`] swapped in rules given as a value.
    pub(super) config: Arc<std::sync::Mutex<Option<String>>>,
    /// Replaced versions a batch still held when [`Acl::replace`] stopped
    /// waiting: freed by a later control-plane call, never by the
    /// datapath thread that lets go last (review L6.4).
    pub(super) retiring: Arc<std::sync::Mutex<Vec<Arc<Version>>>>,
    /// The states of `keep state` rules, made with the first ruleset
    /// that has one and shared with the filters made from this one
    /// ([`Acl::with_rules`]), so states survive a `set` and an `apply`.
    pub(super) states: Arc<std::sync::OnceLock<crate::ct::Table>>,
    /// Its `keep state`'s link to a `ct` hook's table before it (shared
    /// by the filters made from this one, as `states`).
    pub(super) keep: Arc<super::stateful::KeepLink>,
    pub(super) workers: usize,
}

impl Acl {
    /// A filter for `rules`, with counter slots for `max_workers` workers.
    pub fn new(rules: Ruleset, max_workers: usize) -> Acl {
        let slab = Slab::new(max_workers);
        let v = Version::new(rules, &slab, Vec::new(), None);
        let acl = Acl {
            current: Arc::new(ArcSwap::from_pointee(v)),
            slab,
            replacing: Arc::default(),
            config: Arc::new(std::sync::Mutex::new(None)),
            retiring: Arc::default(),
            states: Arc::default(),
            keep: Arc::new(super::stateful::KeepLink::new()),
            workers: max_workers,
        };
        acl.ensure_states();
        acl
    }

    /// Make the state table if the current rules keep state (on the
    /// control thread, before the rules are published).
    /// The table is made for the ruleset's `set limit states`, else
    /// [`crate::ct::DEFAULT_MAX`] flows, and keeps that size: a later
    /// ruleset may lower the limit, not raise it past the table
    /// ([`Acl::check_limit`]).
    pub(super) fn ensure_states_for(&self, rules: &Ruleset) {
        if rules.rules.iter().any(|r| r.keep_state) {
            self.states.get_or_init(|| {
                crate::ct::Table::new(
                    rules.state_limit.unwrap_or(crate::ct::DEFAULT_MAX),
                    self.workers,
                )
            });
        }
    }

    /// Refuse a ruleset whose `set limit states` is over what this
    /// filter's state table was made for (its states would have to go).
    pub(super) fn check_limit(&self, rules: &Ruleset) -> Result<(), String> {
        match (self.states.get(), rules.state_limit) {
            (Some(t), Some(n)) if n > t.built_for() => Err(format!(
                "set limit states: {n} is over the {} states this hook's table was made \
                 for; states are kept only up to that (remove the hook and add it again \
                 for a larger table, losing its states)",
                t.built_for()
            )),
            _ => Ok(()),
        }
    }

    pub(super) fn ensure_states(&self) {
        let v = self.current.load();
        self.ensure_states_for(&v.rules);
    }

    /// Builds from an `acl:` config: `@PATH` of a rules file, else inline
    /// rules separated by `;`.
    ///
    /// # Errors
    /// What was expected, with the line and column (`RULES ...: line 2,
    /// column 6: expected ...`), or the file's read error.
    pub fn from_config(config: &str, max_workers: usize) -> Result<Acl, String> {
        let acl = Acl::new(parse_config(config)?, max_workers);
        *acl.config.lock().unwrap_or_else(|e| e.into_inner()) = Some(config.to_owned());
        Ok(acl)
    }

    /// Swaps in a new ruleset. Batches already running finish on the old
    /// one; later ones use the new one. Returns once no batch runs on the
    /// old one, which it then frees, or after 2 s, keeping it to be freed
    /// by a later control-plane call ([`Acl::reclaim`]) rather than by the
    /// datapath: call it from a control thread, not from a hook.
    ///
    /// Counted rules that are in both rulesets (the same rule, matched in
    /// order: the first equal counted rule of the old ruleset not matched
    /// yet) keep their hit counter, and so does the default action: not
    /// a copy but the same counter, which batches still running on the
    /// old version and those on the new one both bump, so no hit is lost
    /// or counted twice across the swap. New rules start at 0; the
    /// counts of rules that went are dropped with the last version that
    /// had them.
    pub fn replace(&self, rules: Ruleset) {
        let _one = self.replacing.lock().unwrap_or_else(|e| e.into_inner());
        *self.config.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let old = self.current.load_full();
        let (carried, default) = old.carry(&rules);
        self.ensure_states_for(&rules);
        let new = Version::new(rules, &self.slab, carried, default);
        self.current.store(Arc::new(new));
        // Wait (bounded) until no batch holds the old version, so that it
        // and its classifier are freed here and not by the last datapath
        // thread to let go of it (arc-swap turned every reader's borrow
        // into a strong count when the store replaced the pointer).
        let deadline = std::time::Instant::now() + RETIRE_WAIT;
        while Arc::strong_count(&old) > 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        // A batch still holds it after the wait (a stalled worker): keep
        // a reference, so that the worker's is never the last one, and
        // free it from a later control-plane call ([`Acl::reclaim`]).
        let mut r = self.retiring.lock().unwrap_or_else(|e| e.into_inner());
        if Arc::strong_count(&old) > 1 {
            r.push(old);
        }
        r.retain(|v| Arc::strong_count(v) > 1);
    }

    /// Frees the old rulesets that [`Acl::replace`] could not free
    /// because a batch still ran on them, once no batch does; returns how
    /// many are still held. [`Acl::replace`] and [`Acl::hits`] call it
    /// (both run on the control plane); a control plane may call it too.
    pub fn reclaim(&self) -> usize {
        let mut r = self.retiring.lock().unwrap_or_else(|e| e.into_inner());
        r.retain(|v| Arc::strong_count(v) > 1);
        r.len()
    }

    /// A new filter for `rules` that keeps this one's counters of the
    /// rules both rulesets have, matched as [`Acl::replace`] matches them,
    /// and of the default action: not copies but the same counters, which
    /// both filters then bump, so while this one still runs (batches that
    /// started before the new one was published in its place) no hit is
    /// lost or counted twice. New rules start at 0.
    ///
    /// This filter is not changed: it keeps its ruleset and goes on
    /// counting. Dropping the new filter unpublished frees only the
    /// counters of its new rules; the shared ones live while either
    /// filter has them. When the new filter has replaced this one, drop
    /// this one (its last clone) off the datapath: it frees this ruleset's
    /// classifier and the counters of the rules that went.
    pub fn with_rules(&self, rules: Ruleset) -> Acl {
        let old = self.current.load_full();
        let (carried, default) = old.carry(&rules);
        let v = Version::new(rules, &self.slab, carried, default);
        let acl = Acl {
            current: Arc::new(ArcSwap::from_pointee(v)),
            slab: self.slab.clone(),
            replacing: Arc::default(),
            config: Arc::new(std::sync::Mutex::new(None)),
            retiring: Arc::default(),
            states: self.states.clone(),
            keep: self.keep.clone(),
            workers: self.workers,
        };
        acl.ensure_states();
        acl
    }

    /// The flows of the keep-state table (`None`: no ruleset of this
    /// filter had a `keep state` rule, there is no table).
    pub fn states(&self) -> Option<Vec<crate::ct::StateInfo>> {
        let v = self.current.load();
        self.states
            .get()
            .map(|t| t.states(super::stateful::state_max(&v.rules, t)))
    }

    /// How many keep-state flows there are, and at most `limit` of them
    /// (`None`: no keep-state table).
    pub fn list_states(&self, limit: usize) -> Option<(usize, Vec<crate::ct::StateInfo>)> {
        let v = self.current.load();
        self.states.get().map(|t| {
            let max = super::stateful::state_max(&v.rules, t);
            (t.len(), t.states_limited(max, limit))
        })
    }

    /// The current ruleset.
    pub fn rules(&self) -> Ruleset {
        self.current.load().rules.clone()
    }

    /// Hits of every rule marked `count`, then of the default action.
    pub fn hits(&self) -> Vec<RuleHits> {
        self.reclaim();
        let v = self.current.load();
        let mut out = Vec::new();
        for (i, r) in v.rules.rules.iter().enumerate() {
            let c = v.counter_of[i];
            if c != NO_COUNTER {
                out.push(RuleHits {
                    rule: Some(i),
                    text: rule_text(r),
                    hits: v.total(c),
                });
            }
        }
        out.push(RuleHits {
            rule: None,
            text: format!("default {}", v.rules.default),
            hits: v.total(v.default_counter),
        });
        out
    }
}

pub(super) fn rule_text(r: &Rule) -> String {
    let rs = Ruleset {
        rules: vec![*r],
        default: Action::Pass,
        state_limit: None,
    };
    text::to_text(&rs).lines().next().unwrap_or("").to_owned()
}

impl Filter for Acl {
    #[inline]
    fn filter(&self, pkt: &mut Packet<'_>, ctx: &Ctx<'_>) -> Verdict {
        let v = self.current.load();
        if v.keep {
            if let Some(t) = self.states.get() {
                filter_batch_keep(&v, t, &self.keep, std::slice::from_mut(pkt), ctx);
                return pkt.verdict();
            }
        }
        if v.marks {
            filter_batch_marks(&v, std::slice::from_mut(pkt), ctx);
            return pkt.verdict();
        }
        let mut k = key_of(pkt);
        k.ct = pkt.ct_bits();
        let m = v.classifier.classify(&k);
        v.decide(m, ctx.worker)
    }

    /// Loads the ruleset once for the whole batch, extracts the keys of
    /// the packets still passing, classifies them with the batch lookup
    /// (64 at a time, on the stack) and sets the verdicts.
    fn filter_batch(&self, pkts: &mut [Packet<'_>], ctx: &Ctx<'_>) {
        let v = self.current.load();
        if v.keep {
            if let Some(t) = self.states.get() {
                return filter_batch_keep(&v, t, &self.keep, pkts, ctx);
            }
        }
        if v.marks {
            return filter_batch_marks(&v, pkts, ctx);
        }
        if v.classifier.uses_ct() {
            return filter_batch_ct(&v, pkts, ctx);
        }
        let base = v.classifier.base();
        // IPv4 packets are classified a chunk at a time through the IPv4
        // batch API; the others (IPv6, ARP, non-IP) after them, a chunk at
        // a time through the batch API of full keys (out of line: an
        // IPv4 chunk sets up no array of full keys).
        let mut keys = [KeyV4::default(); CHUNK];
        let mut idx = [0usize; CHUNK];
        let mut others = [0usize; CHUNK];
        let mut res = [None; CHUNK];
        let mut i = 0;
        while i < pkts.len() {
            let (mut n, mut no) = (0, 0);
            // (The loop's condition is the IPv4 chunk's alone: its
            // indices need no other bound check; a full chunk of others
            // ends the chunk from inside.)
            while i < pkts.len() && n < CHUNK {
                if pkts[i].verdict().is_pass() {
                    if key_v4_into(&pkts[i], &mut keys[n]) {
                        idx[n] = i;
                        n += 1;
                    } else if no < CHUNK {
                        others[no] = i;
                        no += 1;
                    } else {
                        break;
                    }
                }
                i += 1;
            }
            base.classify_batch_v4(&keys[..n], &mut res[..n]);
            for j in 0..n {
                let verdict = v.decide(res[j], ctx.worker);
                pkts[idx[j]].set_verdict(verdict);
            }
            if no > 0 {
                classify_others(&v, base, pkts, &others[..no], ctx);
            }
        }
    }

    fn batched(&self) -> bool {
        true
    }

    fn spec(&self) -> Option<String> {
        let c = self.config.lock().unwrap_or_else(|e| e.into_inner());
        c.as_ref().map(|c| format!("acl:{c}"))
    }

    /// A new `acl:` config through [`Acl::replace`]: the hit counters of
    /// counted rules in both rulesets carry over.
    fn reconfigure(&self, config: &str) -> Option<Result<(), String>> {
        let rules = match parse_config(config).and_then(|r| self.check_limit(&r).map(|()| r)) {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        self.replace(rules);
        *self.config.lock().unwrap_or_else(|e| e.into_inner()) = Some(config.to_owned());
        Some(Ok(()))
    }

    /// A new acl with this `acl:` config through [`Acl::with_rules`]: it
    /// shares the hit counters of the counted rules both rulesets have
    /// (and the default action's) with this one, which is not changed.
    fn derive(&self, config: &str) -> Option<Result<Arc<dyn Filter>, String>> {
        Some(
            parse_config(config)
                .and_then(|r| self.check_limit(&r).map(|()| r))
                .map(|rules| {
                    let next = self.with_rules(rules);
                    *next.config.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(config.to_owned());
                    Arc::new(next) as Arc<dyn Filter>
                }),
        )
    }

    /// `Some(self)`: a control plane lists the keep-state flows
    /// ([`Acl::states`]).
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    /// `rule_hits` (counter): one sample per rule marked `count`, labelled
    /// `rule` (its index in the ruleset) and `text`, then the default
    /// action's (`rule` = `default`): [`Acl::hits`].
    fn stats(&self) -> Vec<FilterStat> {
        let mut s = FilterStat::new(
            "rule_hits",
            StatKind::Counter,
            "Packets each counted rule (and the default action) decided.",
        );
        for h in self.hits() {
            let rule = h
                .rule
                .map_or_else(|| "default".to_owned(), |i| i.to_string());
            s = s.sample(&[("rule", &rule), ("text", &h.text)], h.hits);
        }
        let mut out = vec![s];
        if let Some(t) = self.states.get() {
            let (ins, exp, _) = t.counts();
            out.push(FilterStat::gauge(
                "states",
                "Flows in the keep-state table.",
                t.len() as u64,
            ));
            out.push(FilterStat::counter(
                "state_inserts",
                "Flows keep state rules created.",
                ins,
            ));
            out.push(FilterStat::counter(
                "state_expiries",
                "Keep-state flows removed on expiry.",
                exp,
            ));
            out.push(FilterStat::counter(
                "states_in_ct",
                "Flows keep state rules marked in the table of a ct hook before the acl.",
                self.keep.marked.load(std::sync::atomic::Ordering::Relaxed),
            ));
        }
        out
    }
}

impl std::fmt::Debug for Acl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.current.load();
        f.debug_struct("Acl")
            .field("rules", &v.rules.rules.len())
            .field("default", &v.rules.default)
            .field("stats", &v.classifier.base().stats())
            .field("ct_parts", &v.classifier.parts())
            .finish()
    }
}

/// The packets `at` of a batch that are not IPv4 (IPv6, ARP, non-IP),
/// classified as full keys in one batch call ([`Classify::classify_batch`]:
/// IPv6 keys walk the IPv6 trees breadth first) and given their verdicts.
#[inline(never)]
fn classify_others(
    v: &Version,
    base: &pfil_acl::Classifier,
    pkts: &mut [Packet<'_>],
    at: &[usize],
    ctx: &Ctx<'_>,
) {
    let mut keys = [Key::default(); CHUNK];
    let mut res = [None; CHUNK];
    let n = at.len().min(CHUNK);
    for (k, &i) in keys.iter_mut().zip(&at[..n]) {
        *k = key_of_reference(&pkts[i]);
    }
    base.classify_batch(&keys[..n], &mut res[..n]);
    for (r, &i) in res.iter().zip(&at[..n]) {
        let verdict = v.decide(*r, ctx.worker);
        pkts[i].set_verdict(verdict);
    }
}
