//! Raw system calls: bpf(2) and the programs it loads, the ethtool
//! ioctls, generic netlink, threads, privileges and network namespaces,
//! anonymous memory for the UMEM, and the AF_XDP socket calls. Every
//! `unsafe` block of the crate outside the UMEM wrapper lives here, one
//! file per concept.

mod bpf;
mod ethtool;
mod mem;
mod netlink;
mod process;
mod programs;
mod xsk;

pub(crate) use bpf::*;
pub(crate) use ethtool::*;
pub(crate) use mem::*;
pub(crate) use netlink::*;
pub(crate) use process::*;
pub(crate) use programs::*;
pub use xsk::XdpStats;
pub(crate) use xsk::*;
