//! Errors of the loops and spawners. Each names the cause and the fix.

/// What went wrong in a worker loop or while starting workers. A port's
/// own error type converts from it ([`crate::Port::Error`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A loop made no progress for too long and stopped instead of
    /// waiting forever.
    #[error("`{ifname}` queue {queue}: no progress for {ms} ms waiting for {what}; the link may be down or the peer not reading")]
    Stalled {
        /// What the loop waited for.
        what: &'static str,
        /// Interface.
        ifname: String,
        /// Queue.
        queue: u32,
        /// The bound, in milliseconds.
        ms: u64,
    },
    /// A pfil call failed (registering a head, taking a worker).
    #[error(transparent)]
    Pfil(#[from] pfil::Error),
    /// A system call failed (spawning a thread).
    #[error("{what} failed: {source}")]
    Io {
        /// The call.
        what: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Shorthand.
pub type Result<T, E = Error> = std::result::Result<T, E>;
