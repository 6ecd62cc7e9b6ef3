//! Planning: the changes that make a running registry equal to a
//! [`Config`], in the order one transaction makes them, and committing
//! them ([`Plan::commit`]).

use super::*;
/// One change of a plan, in the order the transaction makes them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Change {
    /// A hook is built and registered.
    AddHook {
        /// Its name.
        hook: String,
        /// The catalog spec it is built from.
        spec: String,
    },
    /// A hook's filter is replaced by one with a new config, under its
    /// links: derived from the running filter when that can carry over
    /// what it keeps (an acl: the hit counters of the rules both rulesets
    /// have), else built from the catalog.
    SetHook {
        /// Its name.
        hook: String,
        /// The spec it runs now.
        from: String,
        /// The spec it will run.
        to: String,
    },
    /// A hook is unlinked everywhere and unregistered.
    RemoveHook {
        /// Its name.
        hook: String,
    },
    /// A link is removed.
    Unlink {
        /// The head.
        head: String,
        /// `in` or `out`.
        dir: String,
        /// The hook.
        hook: String,
    },
    /// A link is made.
    Link {
        /// The head.
        head: String,
        /// `in` or `out`.
        dir: String,
        /// The hook.
        hook: String,
        /// `first` (in walk order) or `after HOOK`.
        position: String,
        /// `open` or `closed`.
        fail: String,
    },
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::AddHook { hook, spec } => write!(f, "+ hook {hook} ({spec})"),
            Change::SetHook { hook, from, to } => write!(f, "~ hook {hook}: {from} -> {to}"),
            Change::RemoveHook { hook } => write!(f, "- hook {hook}"),
            Change::Unlink { head, dir, hook } => write!(f, "- link {head} {dir} {hook}"),
            Change::Link {
                head,
                dir,
                hook,
                position,
                fail,
            } => {
                write!(f, "+ link {head} {dir} {hook} {position}")?;
                if fail != "open" {
                    write!(f, " (fail {fail})")?;
                }
                Ok(())
            }
        }
    }
}

/// What applying a configuration does to a registry: the changes, and the
/// transaction that makes them, based on one generation.
pub struct Plan {
    base: u64,
    ops: Vec<Op>,
    changes: Vec<Change>,
    /// For each op, where in the file it comes from.
    at: Vec<ConfigError>,
    /// The running filters the plan's derived ones replace
    /// ([`pfil::Derived::from`]): held until the commit's grace period has
    /// passed, then dropped by [`Plan::commit`], so that an old acl's
    /// classifier is freed by the apply itself, on its thread, before it
    /// answers. (The registry would free it on the control plane too, never
    /// on a datapath thread, but at its next drain.)
    retiring: Vec<Arc<dyn pfil::Filter>>,
}

impl fmt::Debug for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plan")
            .field("base", &self.base)
            .field("changes", &self.changes)
            .finish()
    }
}

pub(super) fn fail_text(f: FailMode) -> String {
    match f {
        FailMode::Open => "open".into(),
        FailMode::Closed => "closed".into(),
    }
}

impl Config {
    /// Plan making `reg` equal to this configuration, building new hooks
    /// from `catalog`, and hooks whose config changed too unless their
    /// running filter derives its successor ([`Registry::derive_filter`]:
    /// an acl's keeps the hit counters of the rules both rulesets have).
    /// Read-only: nothing changes until [`Plan::commit`] (a derived filter
    /// shares counters with the running one but leaves it alone).
    ///
    /// `expect` is the generation the caller based the file on (e.g. that
    /// of a `show`); `None` plans from the current one.
    ///
    /// # Errors
    /// [`ApplyError::Conflict`] if `expect` is not current;
    /// [`ApplyError::Config`] for an unknown head, a hook that does not
    /// build (unknown module, bad config), a chain naming a hook that is
    /// neither declared nor the app's own, the declaration of an app's own
    /// hook, or a non-empty chain in a direction the head lacks.
    pub fn plan(
        &self,
        reg: &Registry,
        catalog: &Catalog,
        expect: Option<u64>,
    ) -> Result<Plan, ApplyError> {
        let (base, hooks, heads) = snapshot(reg);
        if let Some(e) = expect {
            if e != base {
                return Err(ApplyError::Conflict {
                    expected: e,
                    current: base,
                });
            }
        }
        let sp = &self.spans;
        let ctx = BuildCtx::new(reg.max_workers());
        let running: BTreeMap<&str, &HookInfo> =
            hooks.iter().map(|h| (h.name.as_str(), h)).collect();
        let mut plan = Plan::empty(base);
        let mut removed: BTreeSet<String> = BTreeSet::new();
        let mut adds = Vec::new();
        let mut sets = Vec::new();
        let mut retiring = Vec::new();
        for (name, d) in &self.hooks {
            let (module, _) = check_hook_name(name).map_err(|m| sp.error(sp.hooks.get(name), m))?;
            let spec = match &d.config {
                Some(c) => format!("{module}:{c}"),
                None => module.to_owned(),
            };
            let at = sp.error(
                sp.configs.get(name).or(sp.hooks.get(name)),
                format!("hooks.\"{name}\""),
            );
            let build = || {
                catalog.create(&spec, &ctx).map_err(|e| {
                    ApplyError::Config(sp.error(
                        sp.configs.get(name).or(sp.hooks.get(name)),
                        format!("hooks.\"{name}\": {e}"),
                    ))
                })
            };
            match running.get(name.as_str()) {
                None => adds.push((name.clone(), d, spec.clone(), build()?, at)),
                Some(h) => match managed_config(h) {
                    None => {
                        return Err(sp
                            .error(
                                sp.hooks.get(name),
                                format!(
                                "hooks.\"{name}\": this hook is the app's own (not built from the \
                                     catalog); a configuration may link it but not declare it"
                            ),
                            )
                            .into())
                    }
                    Some(_) if h.kind != d.kind || h.dirs != d.dirs => {
                        removed.insert(name.clone());
                        adds.push((name.clone(), d, spec.clone(), build()?, at));
                    }
                    Some(cfg) if cfg != d.config => {
                        let from = h.spec.clone().unwrap_or_default();
                        let filter = match derive(reg, name, d.config.as_deref()) {
                            Ok(Some(derived)) => {
                                retiring.push(derived.from);
                                derived.filter
                            }
                            Ok(None) => build()?,
                            Err(reason) => {
                                // The catalog's own error for this spec,
                                // as `add` would give it (a refusal is
                                // not a syntax error); the filter's, if
                                // the catalog builds it after all.
                                build()?;
                                let e = pfil_filters::CatalogError::BadConfig {
                                    spec: spec.clone(),
                                    usage: catalog
                                        .get(module)
                                        .map_or_else(|| module.to_owned(), |m| m.usage()),
                                    expected: reason,
                                };
                                return Err(ApplyError::Config(sp.error(
                                    sp.configs.get(name).or(sp.hooks.get(name)),
                                    format!("hooks.\"{name}\": {e}"),
                                )));
                            }
                        };
                        sets.push((name.clone(), from, spec.clone(), filter, at));
                    }
                    Some(_) => {}
                },
            }
        }
        for h in &hooks {
            if managed_config(h).is_some() && !self.hooks.contains_key(&h.name) {
                removed.insert(h.name.clone());
            }
        }
        for name in &removed {
            plan.push(
                Op::RemoveHook { name: name.clone() },
                Change::RemoveHook { hook: name.clone() },
                sp.error(sp.hooks.get(name), format!("removing hook `{name}`")),
            );
        }
        for (name, d, spec, filter, at) in adds {
            plan.push(
                Op::AddHook {
                    name: name.clone(),
                    kind: d.kind,
                    dirs: d.dirs,
                    filter,
                },
                Change::AddHook { hook: name, spec },
                at,
            );
        }
        for (name, from, to, filter, at) in sets {
            plan.push(
                Op::ReplaceFilter {
                    hook: name.clone(),
                    filter,
                },
                Change::SetHook {
                    hook: name,
                    from,
                    to,
                },
                at,
            );
        }
        // Chains: every running head, written or not.
        let known = |hook: &str| {
            self.hooks.contains_key(hook)
                || running
                    .get(hook)
                    .is_some_and(|h| managed_config(h).is_none())
        };
        for name in self.heads.keys() {
            if !heads.iter().any(|h| &h.name == name) {
                let names: Vec<&str> = heads.iter().map(|h| h.name.as_str()).collect();
                return Err(sp
                    .error(
                        sp.heads.get(name),
                        format!(
                            "heads.{}: no such head in this app (heads belong to the app; it has: {})",
                            key(name),
                            if names.is_empty() { "none".into() } else { names.join(", ") }
                        ),
                    )
                    .into());
            }
        }
        let empty = HeadDecl::default();
        let mut unlinks = Plan::empty(base);
        let mut links = Plan::empty(base);
        for head in &heads {
            let want = self.heads.get(&head.name).unwrap_or(&empty);
            for d in Dir::ALL {
                let desired = &want.chains[d.index()];
                if !head.dirs.contains(d) {
                    if let Some(l) = desired.first() {
                        return Err(sp
                            .error(
                                sp.links.get(&(head.name.clone(), d, 0)),
                                format!(
                                    "heads.{}.{d}: head `{}` has no {d} direction (it has {}); \
                                     link `{}` in another",
                                    key(&head.name),
                                    head.name,
                                    head.dirs,
                                    l.hook
                                ),
                            )
                            .into());
                    }
                    continue;
                }
                for (i, l) in desired.iter().enumerate() {
                    if !known(&l.hook) {
                        return Err(sp
                            .error(
                                sp.links.get(&(head.name.clone(), d, i)),
                                format!(
                                    "heads.{}.{d}: hook `{}` is neither declared in [hooks] nor one of the app's own",
                                    key(&head.name),
                                    l.hook
                                ),
                            )
                            .into());
                    }
                }
                sp.diff_chain(head, d, desired, &removed, &mut unlinks, &mut links);
            }
        }
        plan.append(unlinks);
        plan.append(links);
        plan.retiring = retiring;
        Ok(plan)
    }
}

/// The successor of hook `name`'s running filter with `config`
/// ([`Registry::derive_filter`]), carrying over what it keeps (an acl:
/// the hit counters of the rules both rulesets have); `Ok(None)` when it
/// cannot (or has no config to derive with, or was removed since the
/// plan's snapshot, which the commit's generation check refuses), for the
/// catalog to build it. `Err`: the filter's reason for refusing `config`.
fn derive(
    reg: &Registry,
    name: &str,
    config: Option<&str>,
) -> Result<Option<pfil::Derived>, String> {
    let Some(config) = config else {
        return Ok(None);
    };
    match reg.derive_filter(name, config) {
        Ok(d) => Ok(d),
        Err(pfil::Error::FilterConfig { reason, .. }) => Err(reason),
        Err(_) => Ok(None),
    }
}

impl Spans {
    /// The unlinks and links that turn the running chain of `head` in `d`
    /// into `desired`: the longest common subsequence stays linked (with
    /// its counters); hooks in `removed` are unlinked by their removal
    /// already; quarantined links are never kept (they are on their way
    /// out).
    fn diff_chain(
        &self,
        head: &pfil::HeadInfo,
        d: Dir,
        desired: &[LinkDecl],
        removed: &BTreeSet<String>,
        unlinks: &mut Plan,
        links: &mut Plan,
    ) {
        // Captures stay where they are, whatever the file says.
        let current: Vec<&pfil::LinkInfo> = head.chains[d.index()]
            .iter()
            .filter(|l| !removed.contains(&l.hook) && !crate::capture::is_tap(&l.hook))
            .collect();
        let cur: Vec<Option<(&str, FailMode)>> = current
            .iter()
            .map(|l| (!l.quarantined).then_some((l.hook.as_str(), l.fail)))
            .collect();
        let des: Vec<Option<(&str, FailMode)>> = desired
            .iter()
            .map(|l| Some((l.hook.as_str(), l.fail)))
            .collect();
        let (keep_cur, keep_des) = diff::lcs_keep(&cur, &des);
        let name = &head.name;
        for (l, _) in current.iter().zip(keep_cur).filter(|(_, keep)| !keep) {
            unlinks.push(
                Op::Unlink {
                    head: name.clone(),
                    dir: d,
                    hook: l.hook.clone(),
                },
                Change::Unlink {
                    head: name.clone(),
                    dir: d.to_string(),
                    hook: l.hook.clone(),
                },
                self.error(
                    self.heads.get(name),
                    format!("unlinking `{}` from heads.{}.{d}", l.hook, key(name)),
                ),
            );
        }
        for (i, (l, _)) in desired
            .iter()
            .zip(keep_des)
            .enumerate()
            .filter(|(_, (_, keep))| !keep)
        {
            let (placement, position) = match (i, d) {
                (0, Dir::In) => (Placement::Prepend, "first".to_owned()),
                (0, Dir::Out) => (Placement::Append, "first".to_owned()),
                _ => {
                    let prev = &desired[i - 1].hook;
                    (Placement::After(prev.clone()), format!("after {prev}"))
                }
            };
            links.push(
                Op::Link {
                    head: name.clone(),
                    dir: d,
                    hook: l.hook.clone(),
                    options: LinkOptions {
                        placement,
                        fail: l.fail,
                    },
                },
                Change::Link {
                    head: name.clone(),
                    dir: d.to_string(),
                    hook: l.hook.clone(),
                    position,
                    fail: fail_text(l.fail),
                },
                self.error(
                    self.links.get(&(name.clone(), d, i)),
                    format!("heads.{}.{d}[{i}] (`{}`)", key(name), l.hook),
                ),
            );
        }
    }
}

impl Plan {
    fn empty(base: u64) -> Plan {
        Plan {
            base,
            ops: Vec::new(),
            changes: Vec::new(),
            at: Vec::new(),
            retiring: Vec::new(),
        }
    }

    fn append(&mut self, other: Plan) {
        self.ops.extend(other.ops);
        self.changes.extend(other.changes);
        self.at.extend(other.at);
        self.retiring.extend(other.retiring);
    }

    fn push(&mut self, op: Op, change: Change, at: ConfigError) {
        self.ops.push(op);
        self.changes.push(change);
        self.at.push(at);
    }

    /// The generation the plan was made from.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The changes, in the order the transaction makes them; empty when
    /// the registry already equals the configuration.
    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// Make the changes in one transaction based on [`Plan::base`] (with
    /// `dry_run`, only check that the registry would take them). Returns
    /// the generation published (the base when there was nothing to do or
    /// for a dry run) and the commit, if one was made.
    ///
    /// A plan that replaces filters with ones derived from them (an acl
    /// whose rules changed) returns once the registry has let go of the
    /// old filters (the commit's grace period, at most 2 s), which it then
    /// drops: what they do not share with their successors (an old
    /// ruleset's classifier) is freed on this thread, not on the datapath.
    /// After 2 s they are left to the registry, which drops them with the
    /// last generation that ran them.
    ///
    /// # Errors
    /// [`ApplyError::Conflict`] if the registry changed since the plan;
    /// [`ApplyError::Registry`] naming where in the file the refused
    /// operation comes from. Nothing changes in either case.
    pub fn commit(self, reg: &Registry, dry_run: bool) -> Result<Option<pfil::Commit>, ApplyError> {
        if self.ops.is_empty() {
            let current = reg.generation();
            if current != self.base {
                return Err(ApplyError::Conflict {
                    expected: self.base,
                    current,
                });
            }
            return Ok(None);
        }
        let Plan {
            base,
            ops,
            at,
            retiring,
            ..
        } = self;
        let mut t = reg.transaction().expect_generation(base);
        if dry_run {
            t = t.dry_run();
        }
        for op in ops {
            t = t.op(op);
        }
        let committed = t.commit();
        if let Ok(c) = &committed {
            if !dry_run && !retiring.is_empty() {
                // Bounded, like `Acl::replace`: a datapath thread stuck in
                // a batch must not hold the apply forever.
                c.wait_timeout(RETIRE_WAIT);
            }
        }
        // Dropped here in every case: after a commit, as the old filters'
        // last owner once the grace period is over (unless the wait timed
        // out); after a failure, one reference of filters that still run.
        drop(retiring);
        committed.map(Some).map_err(|e| match e {
            pfil::Error::GenerationConflict { expected, current } => {
                ApplyError::Conflict { expected, current }
            }
            pfil::Error::Transaction { index, source } => {
                let mut at = at.get(index).cloned().unwrap_or(ConfigError {
                    line: None,
                    column: None,
                    message: format!("operation #{index}"),
                });
                at.message = format!("{}: {source}", at.message);
                ApplyError::Registry { at, error: *source }
            }
            error => ApplyError::Registry {
                at: ConfigError {
                    line: None,
                    column: None,
                    message: error.to_string(),
                },
                error,
            },
        })
    }
}
