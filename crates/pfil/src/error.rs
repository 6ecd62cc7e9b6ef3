//! The control path's error type. The datapath has none: hooks return
//! verdicts and failures become counters.

use crate::{Dir, PacketKind};

/// Why a registry operation failed. A failed operation changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No head is registered under this name.
    #[error("no such head `{0}`")]
    NoSuchHead(String),
    /// No hook is registered under this name.
    #[error("no such hook `{0}`")]
    NoSuchHook(String),
    /// A head with this name is already registered.
    #[error("a head named `{0}` is already registered")]
    DuplicateHead(String),
    /// A hook with this name is already registered.
    #[error("a hook named `{0}` is already registered")]
    DuplicateHook(String),
    /// The name breaks the naming rules.
    #[error("invalid name `{name}`: {reason} (names are 1 to 64 bytes of [A-Za-z0-9._:-])")]
    InvalidName {
        /// The rejected name.
        name: String,
        /// Which rule it broke.
        reason: &'static str,
    },
    /// The hook filters another kind of packet than the head carries.
    #[error("kind mismatch: hook `{hook}` filters {hook_kind} packets, head `{head}` carries {head_kind}")]
    KindMismatch {
        /// The head.
        head: String,
        /// The head's packet kind.
        head_kind: PacketKind,
        /// The hook.
        hook: String,
        /// The hook's packet kind.
        hook_kind: PacketKind,
    },
    /// The head does not run this direction.
    #[error("head `{head}` does not support direction {dir}")]
    DirUnsupportedByHead {
        /// The head.
        head: String,
        /// The direction asked for.
        dir: Dir,
    },
    /// The hook did not declare this direction when it was added.
    #[error("hook `{hook}` does not declare direction {dir}")]
    DirNotDeclaredByHook {
        /// The hook.
        hook: String,
        /// The direction asked for.
        dir: Dir,
    },
    /// The hook is already linked to this head in this direction.
    #[error("hook `{hook}` is already linked to head `{head}` {dir}")]
    AlreadyLinked {
        /// The head.
        head: String,
        /// The direction.
        dir: Dir,
        /// The hook.
        hook: String,
    },
    /// The hook is not linked to this head in this direction.
    #[error("hook `{hook}` is not linked to head `{head}` {dir}")]
    NotLinked {
        /// The head.
        head: String,
        /// The direction.
        dir: Dir,
        /// The hook.
        hook: String,
    },
    /// The hook's filter refused a new configuration
    /// ([`Filter::reconfigure`](crate::Filter::reconfigure),
    /// [`Filter::derive`](crate::Filter::derive)); it keeps the old one.
    #[error("hook `{hook}`: {reason}")]
    FilterConfig {
        /// The hook.
        hook: String,
        /// The filter's reason.
        reason: String,
    },
    /// The configuration changed since the generation the caller expected.
    #[error("generation conflict: expected generation {expected}, current is {current}")]
    GenerationConflict {
        /// The generation the caller based its change on.
        expected: u64,
        /// The generation that is current.
        current: u64,
    },
    /// One operation of a transaction failed; nothing was applied.
    #[error("transaction operation #{index} failed, nothing applied: {source}")]
    Transaction {
        /// Zero-based index of the failing operation.
        index: usize,
        /// Why it failed.
        source: Box<Error>,
    },
    /// Every worker slot of the registry is taken.
    #[error("all {0} worker slots are in use; build the registry with more workers")]
    NoWorkerSlot(usize),
    /// A writer call was made from inside a hook (reported by `witness`).
    #[error(
        "registry writer call made from inside a hook; hooks must not reconfigure the registry"
    )]
    WriterInHook,
    /// Text could not be parsed into a value.
    #[error("cannot parse `{input}` as a {what}: expected {expected}")]
    Parse {
        /// What was being parsed.
        what: &'static str,
        /// The text.
        input: String,
        /// What would have been accepted.
        expected: &'static str,
    },
    /// A packet trace is attached to this head and direction already
    /// (one at a time: [`Registry::trace`](crate::Registry::trace)).
    #[error(
        "head `{head}` {dir} is being traced already; one trace at a time per head and direction"
    )]
    AlreadyTraced {
        /// The head.
        head: String,
        /// The direction.
        dir: Dir,
    },
}
