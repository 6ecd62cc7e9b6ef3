//! Documentation only: how pfil-rs works and why.
//!
//! - [`design`]: what we took from pfil(9) and what we changed.
//! - [`locking`]: the one invariant every `unsafe` block and every ordering
//!   relies on.
//! - [`performance`]: guarantees first, then measured numbers.
//! - [`limitations`]: what it does not do (yet).

pub mod design;
pub mod limitations;
pub mod locking;
pub mod performance;
