//! # pfil-ctl: the control plane of a pfil dataplane
//!
//! A control server that any app embeds in a few lines, and `pfilctl`,
//! the operator's tool. The server listens on a Unix stream socket and
//! speaks JSON-RPC 2.0, one message per line (the protocol is specified in
//! `PROTOCOL.md`, whose examples are run by the tests). It changes the
//! dataplane only through the [`Registry`](pfil::Registry)'s writer API,
//! on its own threads, never on the datapath; filters are built by name
//! from a [`Catalog`](pfil_filters::Catalog).
//!
//! ```no_run
//! use std::sync::Arc;
//! use pfil::Registry;
//! use pfil_ctl::{ControlConfig, Server};
//! use pfil_filters::Catalog;
//!
//! let reg = Registry::new();
//! let server = Server::start(reg.clone(), Arc::new(Catalog::builtin()), ControlConfig::new("myapp"))?;
//! println!("control socket: {}", server.path().display());
//! // ... run the dataplane; dropping `server` stops it and removes the socket.
//! # Ok::<(), pfil_ctl::Error>(())
//! ```
//!
//! Security: the socket is mode 0600 in a directory of mode 0700; every
//! connection's peer credentials are checked (`SO_PEERCRED`): the server's
//! uid and root may change things, an optional read-only group may use the
//! read methods, anyone else is refused and logged. Bounded: request lines
//! (1 MiB), connections (32), time per request line (10 s).

#![warn(missing_docs)]

pub mod capture;
pub mod cli;
pub mod client;
pub mod config;
pub mod generate;
mod methods;
pub mod metrics;
pub mod rpc;
mod server;
pub mod trace;
mod xdpevents;
mod xdpmaps;

pub use client::{Client, ClientError};
pub use methods::{committed_json, filter_stats, stats, READ_METHODS, WRITE_METHODS};
pub use rpc::RpcError;
pub use server::{
    default_socket_path, ControlConfig, Error, Reload, Server, DEFAULT_GRACE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_REQUEST, DEFAULT_READ_TIMEOUT,
};

/// The protocol version `version` reports. It changes only when a method
/// or a result changes incompatibly; additions keep it.
pub const PROTOCOL_VERSION: u32 = 1;
