//! What the registry lists: heads, hooks and chains as a control plane
//! reads them ([`HeadInfo`], [`HookInfo`], [`LinkInfo`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::chain::{HookEntry, Link};
use crate::state::{HeadRec, State};
use crate::{Counters, Dir, Dirs, Error, FailMode, Filter, PacketKind, Registry};

impl Registry {
    /// Every head with its chains, in name order.
    pub fn heads(&self) -> Vec<HeadInfo> {
        let w = self.shared.writer.lock();
        w.heads.values().map(head_info).collect()
    }

    /// One head with its chains.
    ///
    /// # Errors
    /// [`Error::NoSuchHead`].
    pub fn head_info(&self, name: &str) -> Result<HeadInfo, Error> {
        let w = self.shared.writer.lock();
        w.heads
            .get(name)
            .map(head_info)
            .ok_or_else(|| Error::NoSuchHead(name.to_owned()))
    }

    /// Every hook, in name order, with the number of links that place it.
    pub fn hooks(&self) -> Vec<HookInfo> {
        let listed: Vec<_> = {
            let w = self.shared.writer.lock();
            w.hooks.values().map(|h| hook_info(&w, h)).collect()
        };
        // `Filter::spec` is user code: asked without the lock.
        listed.into_iter().map(with_spec).collect()
    }

    /// One hook, with the number of links that place it.
    ///
    /// # Errors
    /// [`Error::NoSuchHook`].
    pub fn hook(&self, name: &str) -> Result<HookInfo, Error> {
        let listed = {
            let w = self.shared.writer.lock();
            w.hooks.get(name).map(|h| hook_info(&w, h))
        };
        listed
            .map(with_spec)
            .ok_or_else(|| Error::NoSuchHook(name.to_owned()))
    }

    /// The chain of one head in one direction, in walk order.
    ///
    /// # Errors
    /// [`Error::NoSuchHead`].
    pub fn chain(&self, head: &str, dir: Dir) -> Result<Vec<LinkInfo>, Error> {
        let w = self.shared.writer.lock();
        let rec = w
            .heads
            .get(head)
            .ok_or_else(|| Error::NoSuchHead(head.to_owned()))?;
        Ok(link_infos(&rec.links[dir.index()]))
    }

    /// The names of the hooks linked to `head` in `dir`, in walk order.
    ///
    /// # Errors
    /// [`Error::NoSuchHead`].
    pub fn chain_names(&self, head: &str, dir: Dir) -> Result<Vec<String>, Error> {
        Ok(self.chain(head, dir)?.into_iter().map(|l| l.hook).collect())
    }
}

fn head_info(rec: &HeadRec) -> HeadInfo {
    HeadInfo {
        name: rec.inner.name.clone(),
        kind: rec.inner.kind,
        dirs: rec.inner.dirs,
        chains: [link_infos(&rec.links[0]), link_infos(&rec.links[1])],
    }
}

/// A hook as listed, but for its spec, and its filter to ask for that
/// (outside the writer lock: [`with_spec`]).
fn hook_info(w: &State, h: &Arc<HookEntry>) -> (HookInfo, Arc<dyn Filter>) {
    let info = HookInfo {
        name: h.name.clone(),
        kind: h.kind,
        dirs: h.dirs,
        links: w
            .heads
            .values()
            .flat_map(|r| r.links.iter().flatten())
            .filter(|l| Arc::ptr_eq(&l.hook, h))
            .count(),
        faults: h.faults.load(Ordering::Relaxed),
        spec: None,
    };
    (info, h.filter.clone())
}

fn with_spec((mut info, filter): (HookInfo, Arc<dyn Filter>)) -> HookInfo {
    info.spec = filter.spec();
    info
}

fn link_infos(links: &[Arc<Link>]) -> Vec<LinkInfo> {
    links
        .iter()
        .map(|l| LinkInfo {
            hook: l.hook.name.clone(),
            fail: l.fail,
            quarantined: l.quarantined.load(Ordering::Relaxed),
            counters: l.counters.sum(),
        })
        .collect()
}

/// A head as listed by [`Registry::heads`] and [`Registry::head_info`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct HeadInfo {
    /// Name.
    pub name: String,
    /// Packet kind.
    pub kind: PacketKind,
    /// Supported directions.
    pub dirs: Dirs,
    /// The in and out chains, in walk order.
    pub chains: [Vec<LinkInfo>; 2],
}

/// A hook as listed by [`Registry::hooks`] and [`Registry::hook`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct HookInfo {
    /// Name.
    pub name: String,
    /// Packet kind.
    pub kind: PacketKind,
    /// Declared directions.
    pub dirs: Dirs,
    /// How many links place it.
    pub links: usize,
    /// Panics caught from it over its lifetime (across
    /// [filter replacements](Registry::replace_filter), up to the swap).
    pub faults: u64,
    /// What its filter was built from ([`Filter::spec`](crate::Filter::spec)), `None` for a
    /// filter no catalog can rebuild.
    pub spec: Option<String>,
}

/// A link as listed in a chain.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct LinkInfo {
    /// Hook name.
    pub hook: String,
    /// Fail mode.
    pub fail: FailMode,
    /// Whether the hook panicked: the link no longer calls it. A fail-open
    /// link is skipped until the next writer call unlinks it; a fail-closed
    /// link drops everything it is shown until it is removed on purpose
    /// ([`Registry::reap_quarantine`], [`Registry::reap_link`], an unlink).
    pub quarantined: bool,
    /// Counters summed over workers.
    pub counters: Counters,
}
