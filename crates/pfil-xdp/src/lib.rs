//! Run the XDP programs people already have as pfil hooks: load a
//! clang-compiled BPF ELF object (programs, maps, global data), keep its
//! maps, and, as root, run the same object in the kernel as the reference.
//!
//! - [`Object::parse`] reads an object: XDP program sections (`xdp`,
//!   `xdp/*`, `xdp.frags`; a function of an untyped section when named)
//!   linked with the `.text` subprograms they call, CO-RE relocations of
//!   the context applied (`co_re.rs`),
//!   legacy (`maps`) and BTF-defined (`.maps`) map definitions, global
//!   data (`.data`, `.rodata`, `.bss`, `.rodata.*`) as single-entry arrays,
//!   and `license`. Anything it cannot do as libbpf would is refused with
//!   an error naming it.
//! - [`Map`] holds a map's values in a fixed arena shared by the hook's
//!   workers the way the kernel shares a map between CPUs.
//! - [`kernel`] loads the same object into the kernel with bpf(2) and runs
//!   `BPF_PROG_TEST_RUN`; [`oracle`] compares it with pfil's JIT and
//!   interpreter frame for frame (the tests' oracle, and the
//!   `xdp-oracle` command's for any object).
//!
//! The ELF reader is this crate's own ([`elf`]): a BPF object is a narrow
//! format (ELF64, little-endian, `ET_REL`, `EM_BPF`, `SHT_REL` only), the
//! reader is two hundred lines with every offset checked, and it keeps the
//! dependency tree and the build of pfild as they were (`object` would
//! have served; `aya-obj` brings its own map/program model, `log`, and
//! more than this needs).

pub mod btf;
mod callbacks;
mod co_re;
pub mod config;
pub mod elf;
pub mod filter;
pub mod helpers;
pub mod kernel;
mod link;
pub mod maps;
pub mod object;
pub mod oracle;
pub mod program;
mod tails;

pub use config::XdpConfig;
pub use filter::{BuildError, XdpFault, XdpFilter};
pub use maps::{Map, MapError, MapType};
pub use object::{MapDef, MapOrigin, Object, Program};
pub use program::{Claim, Engine, Quick, Redirect, RunError, RunResult, XdpProgram};

use thiserror::Error;

/// Why an object could not be loaded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadError {
    /// The ELF container is bad.
    #[error(transparent)]
    Elf(#[from] elf::ElfError),
    /// `.BTF` is bad or lacks what a `.maps` definition needs.
    #[error("BTF: {0}")]
    Btf(String),
    /// A map definition is bad.
    #[error("map: {0}")]
    Map(String),
    /// The object is inconsistent (relocation outside its section...).
    #[error("malformed object: {0}")]
    Malformed(String),
    /// The object uses something this loader does not do, named.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The engine's verifier refused the program (or a helper it calls).
    #[error("verifier: {0}")]
    Verify(String),
    /// The program asked for is not there.
    #[error("{0}")]
    NoProgram(String),
}
