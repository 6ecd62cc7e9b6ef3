//! The value parsers of pfild's options: each error is what the option
//! expected; clap adds the option and the value ("invalid value 'x' for
//! '--queues <N|all>': ...").

use pfil_afxdp::run::UmemMode;
use pfil_afxdp::{BindMode, XdpMode};

use super::{parse_mac, Engine, Queues};

pub(super) fn queues(v: &str) -> Result<Queues, String> {
    if v == "all" {
        return Ok(Queues::All);
    }
    match v.parse::<u32>() {
        Ok(0) => Err("must be at least 1 (or `all`)".into()),
        Ok(n) => Ok(Queues::Count(n)),
        Err(_) => Err("expected a queue count or `all`".into()),
    }
}

pub(super) fn xdp_mode(v: &str) -> Result<XdpMode, String> {
    match v {
        "auto" => Ok(XdpMode::Auto),
        "native" | "drv" => Ok(XdpMode::Native),
        "generic" | "skb" => Ok(XdpMode::Generic),
        _ => Err("expected auto, native or generic".into()),
    }
}

pub(super) fn bind_mode(v: &str) -> Result<BindMode, String> {
    match v {
        "auto" => Ok(BindMode::Auto),
        "copy" => Ok(BindMode::Copy),
        "zerocopy" | "zero-copy" | "zc" => Ok(BindMode::ZeroCopy),
        _ => Err("expected auto, copy or zerocopy".into()),
    }
}

pub(super) fn umem_mode(v: &str) -> Result<UmemMode, String> {
    match v {
        "shared" => Ok(UmemMode::Shared),
        "per-queue" | "perqueue" => Ok(UmemMode::PerQueue),
        _ => Err("expected shared or per-queue".into()),
    }
}

pub(super) fn seconds(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        Ok(_) => Err("must be a positive number".into()),
        Err(_) => Err("expected a number of seconds".into()),
    }
}

pub(super) fn frame_count(v: &str) -> Result<u64, String> {
    match v.parse::<u64>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err("expected a frame count".into()),
    }
}

pub(super) fn ring(v: &str) -> Result<u32, String> {
    match v.parse::<u32>() {
        Ok(n) if n.is_power_of_two() && (64..=32768).contains(&n) => Ok(n),
        _ => Err("must be a power of two from 64 to 32768".into()),
    }
}

pub(super) fn umem_frames(v: &str) -> Result<u32, String> {
    match v.parse::<u32>() {
        Ok(n) if n >= 64 => Ok(n),
        Ok(_) => Err("must be at least 64".into()),
        Err(_) => Err("expected a frame count".into()),
    }
}

pub(super) fn frame_size(v: &str) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(n) if (60..=2048).contains(&n) => Ok(n),
        Ok(_) => Err("must be from 60 to 2048 bytes".into()),
        Err(_) => Err("expected a frame size in bytes".into()),
    }
}

pub(super) fn engine(v: &str) -> Result<Engine, String> {
    match v {
        "afxdp" | "af-xdp" | "af_xdp" => Ok(Engine::AfXdp),
        "xdp-live" | "live" => Ok(Engine::XdpLive),
        _ => Err("expected afxdp or xdp-live".into()),
    }
}

pub(super) fn positive_u32(v: &str) -> Result<u32, String> {
    match v.parse::<u32>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err("expected a positive number".into()),
    }
}

pub(super) fn batch_size(v: &str) -> Result<u32, String> {
    let max = pfil_afxdp::live::MAX_BATCH_SIZE;
    match v.parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("must be from 1 to {max} (the kernel's limit)")),
    }
}

pub(super) fn mac(v: &str) -> Result<[u8; 6], String> {
    parse_mac(v).ok_or_else(|| "expected a MAC like 02:00:00:00:00:01".into())
}

/// `--dst-port`'s value: one or more ports (a single value, so a repeated
/// option replaces the list, as every other option does).
#[derive(Clone, Debug)]
pub(super) struct Ports(pub(super) Vec<u16>);

/// `--cpus`' value: CPU numbers and ranges (`1`, `0,2`, `2-5`).
#[derive(Clone, Debug)]
pub(super) struct Cpus(pub(super) Vec<usize>);

pub(super) fn cpus(v: &str) -> Result<Cpus, String> {
    let bad =
        || format!("expected CPU numbers or ranges separated by commas (e.g. 1,3-5), found `{v}`");
    let mut out = Vec::new();
    for part in v.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<usize>(), b.parse::<usize>()),
            None => (part.parse::<usize>(), part.parse::<usize>()),
        };
        let (lo, hi) = (lo.map_err(|_| bad())?, hi.map_err(|_| bad())?);
        if lo > hi || hi >= 1024 {
            return Err(bad());
        }
        out.extend(lo..=hi);
    }
    Ok(Cpus(out))
}

pub(super) fn ports(v: &str) -> Result<Ports, String> {
    v.split(',')
        .map(|p| p.parse::<u16>())
        .collect::<Result<_, _>>()
        .map(Ports)
        .map_err(|_| "expected UDP ports separated by commas".into())
}

/// `--flow-proto`: udp or tcp.
pub(super) fn flow_proto(v: &str) -> Result<pfil_port::flows::FlowProto, String> {
    v.parse()
}
