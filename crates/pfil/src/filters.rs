//! A hook's filter as the control plane reaches it: its own statistics,
//! a new configuration in place, a filter derived from it.

use std::sync::Arc;

use crate::{Error, Filter, FilterStat, Registry};

impl Registry {
    /// The filter of hook `name`, for a control plane to ask it what the
    /// registry does not know (with [`Filter::as_any`]). The writer lock
    /// is held only to look it up: the caller calls the filter without
    /// it. Keep the `Arc` briefly: a removed hook's filter is dropped when
    /// the last reference goes.
    ///
    /// # Errors
    /// [`Error::NoSuchHook`].
    pub fn hook_filter(&self, name: &str) -> Result<Arc<dyn Filter>, Error> {
        self.hook_filter_at(name).map(|(f, _)| f)
    }

    /// [`hook_filter`](Self::hook_filter) and the generation it was read at.
    fn hook_filter_at(&self, name: &str) -> Result<(Arc<dyn Filter>, u64), Error> {
        let w = self.shared.writer.lock();
        w.hooks
            .get(name)
            .map(|h| (h.filter.clone(), w.number))
            .ok_or_else(|| Error::NoSuchHook(name.to_owned()))
    }

    /// The filter's own statistics of hook `name` ([`Filter::stats`]):
    /// an ACL's per-rule hits, a rate limiter's evictions. Empty for a
    /// filter that keeps none. The filter is asked on this thread after
    /// the registry's lock is released; the datapath is not involved.
    ///
    /// # Examples
    /// ```
    /// use pfil::{Ctx, Dirs, Filter, FilterStat, Packet, PacketKind, Registry, Verdict};
    ///
    /// struct Seen(std::sync::atomic::AtomicU64);
    /// impl Filter for Seen {
    ///     fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
    ///         self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    ///         Verdict::Pass
    ///     }
    ///     fn stats(&self) -> Vec<FilterStat> {
    ///         let n = self.0.load(std::sync::atomic::Ordering::Relaxed);
    ///         vec![FilterStat::counter("seen", "Packets seen.", n)]
    ///     }
    /// }
    /// let reg = Registry::new();
    /// reg.add_hook("seen:x", PacketKind::Ethernet, Dirs::IN, Seen(Default::default()))?;
    /// assert_eq!(reg.hook_stats("seen:x")?[0].value(), Some(0));
    /// assert!(matches!(reg.hook_stats("nope:x"), Err(pfil::Error::NoSuchHook(h)) if h == "nope:x"));
    /// # Ok::<(), pfil::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::NoSuchHook`].
    pub fn hook_stats(&self, name: &str) -> Result<Vec<FilterStat>, Error> {
        let filter = self.hook_filter(name)?;
        Ok(filter.stats())
    }

    /// Give the filter of hook `name` a new configuration in place
    /// ([`Filter::reconfigure`]): links, counters and what the filter keeps
    /// across it (an ACL's rule hits) stay. Returns `Ok(false)` if the
    /// filter cannot (rebuild it and [`replace_filter`](Self::replace_filter)
    /// instead), `Ok(true)` once the new configuration is in force and no
    /// batch runs on the old one.
    ///
    /// Then it publishes one generation with the same chains: the
    /// configuration changed (a hook's config, as a `show` lists it), so
    /// its number does too, and a transaction based on the generation
    /// before ([`Transaction::expect_generation`](crate::Transaction::expect_generation),
    /// e.g. a plan derived from the old configuration) is refused rather
    /// than undoing this change.
    ///
    /// The filter is called without the writer lock (it may take as long
    /// as building its new state takes); a filter replaced or removed
    /// meanwhile by another writer wins over this call, which then says so.
    ///
    /// # Errors
    /// [`Error::NoSuchHook`]; [`Error::FilterConfig`] with the filter's
    /// reason when it refuses the configuration (nothing changed);
    /// [`Error::GenerationConflict`] if another writer replaced or removed
    /// the hook's filter meanwhile (the new configuration went to the
    /// filter that no longer runs).
    pub fn reconfigure_hook(&self, name: &str, config: &str) -> Result<bool, Error> {
        let (filter, base) = self.hook_filter_at(name)?;
        match filter.reconfigure(config) {
            None => Ok(false),
            Some(Ok(())) => {
                // The generation before is retired like any other; nothing
                // is unlinked or removed, so there is nothing to wait for.
                let (_, _, nothing) = self.change(|s| match s.hooks.get(name) {
                    Some(h) if Arc::ptr_eq(&h.filter, &filter) => Ok(()),
                    _ => Err(Error::GenerationConflict {
                        expected: base,
                        current: s.number,
                    }),
                })?;
                drop(nothing);
                Ok(true)
            }
            Some(Err(reason)) => Err(Error::FilterConfig {
                hook: name.to_owned(),
                reason,
            }),
        }
    }

    /// A new filter for hook `name` with configuration `config`, derived
    /// from its running filter ([`Filter::derive`]: an ACL's keeps the hit
    /// counters of the rules both rulesets have, shared with the running
    /// one), to publish with [`Op::ReplaceFilter`](crate::Op::ReplaceFilter) in a transaction.
    /// Nothing changes here: the hook runs its filter until that
    /// transaction commits. `Ok(None)` if the filter cannot derive (build
    /// the new one from a catalog instead).
    ///
    /// The filter is called without the writer lock. If another writer
    /// replaces or removes the hook's filter before the transaction that
    /// publishes the result, the result carries over from a filter that no
    /// longer runs; a transaction based on the generation read before the
    /// call ([`Transaction::expect_generation`](crate::Transaction::expect_generation))
    /// is refused then, and so it is after a
    /// [`reconfigure_hook`](Self::reconfigure_hook) in between (which
    /// publishes a generation for that): the result would carry over from
    /// the configuration the filter had when it was derived.
    ///
    /// # Examples
    /// ```
    /// use pfil::{Ctx, Dirs, Packet, PacketKind, Registry, Verdict};
    ///
    /// let reg = Registry::new();
    /// reg.add_hook("a:x", PacketKind::Ethernet, Dirs::IN, |_: &mut Packet<'_>, _: &Ctx<'_>| Verdict::Pass)?;
    /// // A closure keeps nothing across a change: it cannot derive.
    /// assert!(reg.derive_filter("a:x", "anything")?.is_none());
    /// # Ok::<(), pfil::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::NoSuchHook`]; [`Error::FilterConfig`] with the filter's
    /// reason when it refuses the configuration.
    pub fn derive_filter(&self, name: &str, config: &str) -> Result<Option<Derived>, Error> {
        let from = self.hook_filter(name)?;
        match from.derive(config) {
            None => Ok(None),
            Some(Ok(filter)) => Ok(Some(Derived { filter, from })),
            Some(Err(reason)) => Err(Error::FilterConfig {
                hook: name.to_owned(),
                reason,
            }),
        }
    }

    /// [`hook_stats`](Self::hook_stats) of every hook whose filter keeps
    /// statistics, in hook name order, with the generation the hooks were
    /// read at.
    pub fn filter_stats(&self) -> (u64, Vec<(String, Vec<FilterStat>)>) {
        let (generation, filters) = {
            let w = self.shared.writer.lock();
            let filters: Vec<(String, Arc<dyn Filter>)> = w
                .hooks
                .values()
                .map(|h| (h.name.clone(), h.filter.clone()))
                .collect();
            (w.number, filters)
        };
        let stats = filters
            .into_iter()
            .map(|(name, f)| (name, f.stats()))
            .filter(|(_, s)| !s.is_empty())
            .collect();
        (generation, stats)
    }
}

/// A filter [derived](Filter::derive) from a hook's running filter, and
/// that running filter ([`Registry::derive_filter`]).
#[non_exhaustive]
pub struct Derived {
    /// The new filter, to publish with [`Op::ReplaceFilter`](crate::Op::ReplaceFilter).
    pub filter: Arc<dyn Filter>,
    /// The filter it was derived from, the one the hook ran when it was
    /// derived. Once the replacement is published, the registry drops its
    /// reference with the last generation that ran it, on the control
    /// plane (see [`Registry::reclaim`]), never on a datapath thread;
    /// whoever holds this until the replacement's [`Retirement`](crate::Retirement) completes
    /// frees the old filter on its own thread, at a moment of its choosing.
    pub from: Arc<dyn Filter>,
}

impl std::fmt::Debug for Derived {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Derived")
            .field("filter", &self.filter.spec())
            .field("from", &self.from.spec())
            .finish()
    }
}
