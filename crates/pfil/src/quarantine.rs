//! Quarantined links and how they leave their chains.
//!
//! A link whose hook panicked is quarantined by the worker that caught the
//! panic (chain.rs): from then on a fail-open link is skipped and a
//! fail-closed link drops everything it is shown, without calling the hook.
//! What happens to the link after that depends on its fail mode:
//!
//! - **Fail-open** links are unlinked by the next successful writer call
//!   of any kind (they let traffic through either way, so unlinking them
//!   changes no verdict). The writer call reports them: in
//!   [`Commit::reaped`](crate::Commit::reaped) for the calls that return a
//!   [`Commit`](crate::Commit); otherwise they are kept (at most
//!   [`MAX_KEPT_REAPED`]) for [`Registry::take_reaped`] and
//!   [`Registry::reap_quarantine`].
//! - **Fail-closed** links stay in place, dropping, until removed on
//!   purpose: [`Registry::reap_quarantine`], [`Registry::reap_link`], an
//!   unlink of that link, the removal of its hook or head, or a
//!   replacement of its hook's filter (which gives the link the new filter
//!   and a fresh start). No unrelated write opens a fail-closed chain.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::chain::{Link, Quarantined};
use crate::retire::Retirement;
use crate::state::{removed, State};
use crate::{Dir, Error, FailMode, Registry};

/// How many reaped links a registry keeps for [`Registry::take_reaped`]
/// and [`Registry::reap_quarantine`] when nobody asks for them (the oldest
/// are dropped, with a warning in the log, beyond that). Links reaped by a
/// call that returns a [`Commit`](crate::Commit) are handed out there and
/// not kept.
pub const MAX_KEPT_REAPED: usize = 64;

/// A quarantined link that was unlinked, handed out once: in the
/// [`Commit`](crate::Commit) of the writer call that reaped it, or by
/// [`Registry::take_reaped`], [`Registry::reap_quarantine`] or
/// [`Registry::reap_link`].
#[derive(Debug)]
#[non_exhaustive]
pub struct Reaped {
    /// Head name.
    pub head: String,
    /// Direction.
    pub dir: Dir,
    /// Hook name.
    pub hook: String,
    /// The link's fail mode.
    pub fail: FailMode,
    /// The first generation without the link.
    pub generation: u64,
    /// Completes when no reader can still run the link; its
    /// [`counters`](Retirement::counters) are then the link's final counts.
    pub retirement: Retirement,
}

/// Which quarantined links an explicit reap removes.
pub(crate) enum Which<'a> {
    All,
    One {
        head: &'a str,
        dir: Dir,
        hook: &'a str,
    },
}

/// A link a change unlinked because it was quarantined: where it was.
pub(crate) struct Unlinked {
    pub(crate) head: String,
    pub(crate) dir: Dir,
    pub(crate) link: Arc<Link>,
}

/// The implicit reap of every writer: unlink the quarantined fail-open
/// links of `pending` still in `s`. Fail-closed ones stay linked.
pub(crate) fn reap_open(s: &mut State, pending: &[Quarantined]) -> Vec<Unlinked> {
    let mut out = Vec::new();
    for q in pending {
        let Some(rec) = s.heads.get_mut(&q.head) else {
            continue;
        };
        let links = &mut rec.links[q.dir.index()];
        if let Some(at) = links
            .iter()
            .position(|l| std::ptr::eq(Arc::as_ptr(l), q.link.as_ptr()) && l.fail == FailMode::Open)
        {
            out.push(Unlinked {
                head: q.head.clone(),
                dir: q.dir,
                link: links.remove(at),
            });
        }
    }
    out
}

/// What of `pending` is still to be reaped after a change published `s`:
/// the fail-closed links still linked (the rest left the chains).
pub(crate) fn still_pending(s: &State, pending: Vec<Quarantined>) -> Vec<Quarantined> {
    pending
        .into_iter()
        .filter(|q| {
            s.heads.get(&q.head).is_some_and(|rec| {
                rec.links[q.dir.index()]
                    .iter()
                    .any(|l| std::ptr::eq(Arc::as_ptr(l), q.link.as_ptr()))
            })
        })
        .collect()
}

/// Is `l`, in `head`'s chain for `dir`, a quarantined link `which` names?
fn marked(head: &str, dir: Dir, l: &Link, which: &Which<'_>) -> bool {
    l.quarantined.load(Ordering::Relaxed)
        && match which {
            Which::All => true,
            Which::One {
                head: h,
                dir: d,
                hook,
            } => head == *h && dir == *d && l.hook.name == *hook,
        }
}

/// The explicit reap: unlink the quarantined links `which` names, of
/// either fail mode.
fn reap_marked(s: &mut State, which: &Which<'_>) -> Vec<Unlinked> {
    let mut out = Vec::new();
    for rec in s.heads.values_mut() {
        for dir in Dir::ALL {
            rec.links[dir.index()].retain(|l| {
                let hit = marked(&rec.inner.name, dir, l, which);
                if hit {
                    out.push(Unlinked {
                        head: rec.inner.name.clone(),
                        dir,
                        link: l.clone(),
                    });
                }
                !hit
            });
        }
    }
    out
}

/// Report `unlinked` as published in `generation`, with tickets that
/// complete with `ticket`.
pub(crate) fn report(unlinked: Vec<Unlinked>, generation: u64, ticket: &Retirement) -> Vec<Reaped> {
    unlinked
        .into_iter()
        .map(|u| {
            tracing::warn!(target: "pfil", head = %u.head, dir = %u.dir, hook = %u.link.hook.name, fail = %u.link.fail, generation, "quarantined link unlinked");
            Reaped {
                hook: u.link.hook.name.clone(),
                fail: u.link.fail,
                generation,
                retirement: ticket
                    .sibling()
                    .with_removed(vec![removed(&u.head, u.dir, &u.link)]),
                head: u.head,
                dir: u.dir,
            }
        })
        .collect()
}

impl Registry {
    /// Unlink every quarantined link, fail-closed ones included, and hand
    /// out those and every link reaped by a writer call and not handed out
    /// yet ([`take_reaped`](Self::take_reaped)).
    ///
    /// A quarantined fail-open link is unlinked by any writer call (and
    /// handed out by it, see [`Commit::reaped`](crate::Commit::reaped)); a
    /// quarantined fail-closed link drops everything it is shown until it
    /// is removed on purpose: by this call, [`reap_link`](Self::reap_link),
    /// an unlink of it, or the removal of its hook or head. Each reaped
    /// link is handed out exactly once, with a [`Retirement`] whose
    /// [`counters`](Retirement::counters) are the link's final counts once
    /// it [completes](Retirement::is_complete). An operator's "reap" verb
    /// calls this; a dataplane that wants fail-closed links to stay until
    /// an operator decides does not call it from housekeeping (it calls
    /// [`take_reaped`](Self::take_reaped) there).
    ///
    /// # Examples
    /// ```
    /// use pfil::{Ctx, Dir, Dirs, FailMode, LinkOptions, Packet, PacketKind, Placement, Registry, Verdict};
    ///
    /// let reg = Registry::new();
    /// let head = reg.register_head("h", PacketKind::Ethernet, Dirs::IN)?;
    /// reg.add_hook("bad:hook", PacketKind::Ethernet, Dirs::IN, |_: &mut Packet<'_>, _: &Ctx<'_>| -> Verdict {
    ///     panic!("a bug")
    /// })?;
    /// let closed = LinkOptions { placement: Placement::Prepend, fail: FailMode::Closed };
    /// reg.link("h", Dir::In, "bad:hook", closed)?;
    /// let mut w = reg.worker()?;
    /// let mut f = [0u8; 60];
    /// head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f)); // quarantined
    /// // An unrelated write leaves the fail-closed link in place, dropping.
    /// reg.register_head("other", PacketKind::Ethernet, Dirs::IN)?;
    /// assert_eq!(head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f)), Verdict::Dropped);
    /// let reaped = reg.reap_quarantine();
    /// assert_eq!(reaped.len(), 1);
    /// assert_eq!((reaped[0].head.as_str(), reaped[0].hook.as_str()), ("h", "bad:hook"));
    /// assert!(reaped[0].retirement.wait_timeout(std::time::Duration::from_secs(10)));
    /// assert_eq!(reaped[0].retirement.counters().faults, 1);
    /// assert_eq!(reaped[0].retirement.counters().dropped, 2);
    /// assert!(reg.reap_quarantine().is_empty());
    /// # Ok::<(), pfil::Error>(())
    /// ```
    pub fn reap_quarantine(&self) -> Vec<Reaped> {
        // Fails only with the `witness` feature, inside a hook; what was
        // reaped before is still handed out.
        let mut out = self.reap(&Which::All).unwrap_or_default();
        let mut kept = self.take_reaped();
        kept.append(&mut out);
        kept
    }

    /// Unlink the link of `hook` on `head` in `dir` if it is quarantined
    /// (of either fail mode), as [`reap_quarantine`](Self::reap_quarantine)
    /// does for all of them. `Ok(None)` if it is linked and not
    /// quarantined (nothing changes then). What the same change reaped
    /// implicitly (other fail-open links) is kept for
    /// [`take_reaped`](Self::take_reaped).
    ///
    /// # Errors
    /// [`Error::NoSuchHead`], [`Error::NoSuchHook`], [`Error::NotLinked`].
    pub fn reap_link(&self, head: &str, dir: Dir, hook: &str) -> Result<Option<Reaped>, Error> {
        let one = Which::One { head, dir, hook };
        {
            let w = self.shared.writer.lock();
            let rec = w
                .heads
                .get(head)
                .ok_or_else(|| Error::NoSuchHead(head.to_owned()))?;
            if !w.hooks.contains_key(hook) {
                return Err(Error::NoSuchHook(hook.to_owned()));
            }
            if !rec.links[dir.index()].iter().any(|l| l.hook.name == hook) {
                return Err(Error::NotLinked {
                    head: head.to_owned(),
                    dir,
                    hook: hook.to_owned(),
                });
            }
        }
        let mut got = self.reap(&one)?;
        let found = got.pop();
        self.keep_reaped(got);
        Ok(found)
    }

    /// Hand out the links that writer calls reaped (quarantined fail-open
    /// links, see [`reap_quarantine`](Self::reap_quarantine)) and did not
    /// hand out in a [`Commit`](crate::Commit): those of
    /// [`register_head`](Self::register_head),
    /// [`add_hook`](Self::add_hook),
    /// [`reconfigure_hook`](Self::reconfigure_hook), scoped links and the
    /// like. Reaps nothing itself, so it is what a dataplane's housekeeping
    /// calls to log them. At most [`MAX_KEPT_REAPED`] are kept between
    /// calls.
    pub fn take_reaped(&self) -> Vec<Reaped> {
        std::mem::take(&mut *self.shared.reaped.lock())
    }

    /// Keep `reaped` for [`take_reaped`](Self::take_reaped), at most
    /// [`MAX_KEPT_REAPED`] of them.
    pub(crate) fn keep_reaped(&self, reaped: Vec<Reaped>) {
        if reaped.is_empty() {
            return;
        }
        let mut kept = self.shared.reaped.lock();
        kept.extend(reaped);
        if let Some(over) = kept.len().checked_sub(MAX_KEPT_REAPED) {
            if over > 0 {
                for r in kept.drain(..over) {
                    tracing::warn!(target: "pfil", head = %r.head, dir = %r.dir, hook = %r.hook, "reaped link not handed out: more than MAX_KEPT_REAPED kept");
                }
            }
        }
    }

    /// Publish a change that unlinks the quarantined links `which` names
    /// (nothing if none is quarantined); returns them, and the fail-open
    /// links the same change reaped implicitly.
    fn reap(&self, which: &Which<'_>) -> Result<Vec<Reaped>, Error> {
        let any = {
            let w = self.shared.writer.lock();
            w.heads.values().any(|rec| {
                Dir::ALL.into_iter().any(|d| {
                    rec.links[d.index()]
                        .iter()
                        .any(|l| marked(&rec.inner.name, d, l, which))
                })
            })
        };
        if !any {
            return Ok(Vec::new());
        }
        let changed = self.change_inner(false, |next| Ok(reap_marked(next, which)))?;
        let mut out = changed.reaped;
        out.extend(report(changed.value, changed.number, &changed.retirement));
        Ok(out)
    }
}
