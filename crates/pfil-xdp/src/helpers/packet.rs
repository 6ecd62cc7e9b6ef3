//! The packet helpers of an XDP program: the frame's bounds
//! (`bpf_xdp_adjust_head`, `_meta`, `_tail`), its bytes
//! (`bpf_xdp_get_buff_len`, `_load_bytes`, `_store_bytes`) and
//! `bpf_csum_diff`, each as the kernel computes it (checked against it:
//! `crate::oracle`).

use pfil_ebpf::Env;

use super::{bad, EFAULT, EINVAL};

const EACCES: i64 = -13;

/// `ETH_HLEN`: a frame never shrinks below an Ethernet header.
const ETH_HLEN: u64 = 14;

/// The most metadata bytes (`skb_shared_info::meta_len` is a u8).
const META_MAX: u64 = 255;

/// How far in front of where the packet started `bpf_xdp_adjust_head`
/// and `_meta` may move its start: the kernel's headroom
/// (`XDP_PACKET_HEADROOM`, 256 bytes) less the `struct xdp_frame` (40 on
/// x86-64) it keeps at the headroom's start. Never past the frame's start
/// either (a frame with less headroom gives less).
const XDP_GROWTH: u64 = 256 - 40;

/// The lowest address the packet's metadata or data may start at.
fn floor(env: &Env) -> u64 {
    env.frame()
        .0
        .max(env.run_start().saturating_sub(XDP_GROWTH))
}

/// `bpf_xdp_get_buff_len`: the packet's length (no fragments here).
pub(super) unsafe extern "C" fn xdp_get_buff_len(
    _ctx: u64,
    _: u64,
    _: u64,
    _: u64,
    _: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let (_, data, end) = unsafe { &*env }.packet();
    end - data
}

/// The kernel's `bpf_xdp_pointer` checks for `bpf_xdp_load_bytes` and
/// `_store_bytes`: the packet's address of `[offset, offset + len)`, or
/// the error the helper returns (offset or length over 0xffff: -EFAULT;
/// past the packet: -EINVAL).
fn xdp_span(env: &Env, offset: u64, len: u64) -> Result<u64, u64> {
    let (offset, len) = (offset & 0xffff_ffff, len & 0xffff_ffff);
    if offset > 0xffff || len > 0xffff {
        return Err(EFAULT as u64);
    }
    let (_, data, end) = env.packet();
    if offset + len > end - data {
        return Err(EINVAL as u64);
    }
    Ok(data + offset)
}

/// Copy `len` bytes from `from` to `to`, both checked (`to` writable);
/// the ranges may overlap.
fn copy_checked(env: &mut Env, from: u64, to: u64, len: u64, what: [&'static str; 2]) -> u64 {
    let Ok(src) = env.check(from, len) else {
        return bad(env, what[0]);
    };
    let src = src.as_ptr();
    let Ok(dst) = env.check_mut(to, len) else {
        return bad(env, what[1]);
    };
    // SAFETY: both ranges were checked inside the program's memory
    // (regions that live for the run, `to`'s writable); memmove semantics.
    unsafe { std::ptr::copy(src, dst.as_mut_ptr(), len as usize) };
    0
}

/// `bpf_xdp_load_bytes(ctx, offset, buf, len)`: `len` packet bytes from
/// `offset` into `buf`.
pub(super) unsafe extern "C" fn xdp_load_bytes(
    _ctx: u64,
    offset: u64,
    buf: u64,
    len: u64,
    _: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    match xdp_span(env, offset, len) {
        Ok(from) => copy_checked(
            env,
            from,
            buf,
            len & 0xffff,
            [
                "xdp_load_bytes: packet bytes out of reach",
                "xdp_load_bytes: `buf` outside the program's writable memory",
            ],
        ),
        Err(e) => e,
    }
}

/// `bpf_xdp_store_bytes(ctx, offset, buf, len)`: `len` bytes of `buf`
/// into the packet at `offset`.
pub(super) unsafe extern "C" fn xdp_store_bytes(
    _ctx: u64,
    offset: u64,
    buf: u64,
    len: u64,
    _: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    match xdp_span(env, offset, len) {
        Ok(to) => copy_checked(
            env,
            buf,
            to,
            len & 0xffff,
            [
                "xdp_store_bytes: `buf` outside the program's memory",
                "xdp_store_bytes: packet bytes out of reach",
            ],
        ),
        Err(e) => e,
    }
}

/// x86-64's `csum_partial`: the one's-complement sum of `seed` and of
/// `bytes` as little-endian 32-bit words (the last one zero-padded),
/// folded to 32 bits with end-around carry.
fn csum_partial(bytes: &[u8], seed: u32) -> u32 {
    let mut sum = u64::from(seed);
    let mut words = bytes.chunks_exact(4);
    for w in &mut words {
        sum += u64::from(u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 4];
        w[..rest.len()].copy_from_slice(rest);
        sum += u64::from(u32::from_le_bytes(w));
    }
    while sum >> 32 != 0 {
        sum = (sum & 0xffff_ffff) + (sum >> 32);
    }
    sum as u32
}

/// The kernel's `csum_sub`: `a` plus the complement of `b`, end-around.
fn csum_sub(a: u32, b: u32) -> u32 {
    let (r, carry) = a.overflowing_add(!b);
    r + u32::from(carry)
}

/// The kernel's `csum_from32to16`: a 32-bit sum folded to 16 bits (not
/// complemented).
fn from32to16(x: u32) -> u64 {
    let x = (x & 0xffff) + (x >> 16);
    u64::from((x & 0xffff) + (x >> 16))
}

/// `bpf_csum_diff` as Linux computes it since 6.13 (the kernel this was
/// checked against, 6.18): `to`'s sum minus `from`'s, seeded, folded to
/// 16 bits; sizes need not be multiples of 4 and are bounded only by the
/// memory they name. (Earlier kernels returned x86's unfolded 32-bit sum
/// and refused other sizes, or more than 512 bytes, with `-EINVAL`.)
pub(super) unsafe extern "C" fn csum_diff(
    from: u64,
    from_size: u64,
    to: u64,
    to_size: u64,
    seed: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    let seed = seed as u32;
    let sum_of = |env: &mut Env, at: u64, size: u64, seed: u32| {
        env.check(at, size).map(|b| csum_partial(b, seed)).ok()
    };
    let ret = match (from_size, to_size) {
        (0, 0) => seed,
        (0, _) => match sum_of(env, to, to_size, seed) {
            Some(t) => t,
            None => return bad(env, "csum_diff: `to` outside the program's memory"),
        },
        (_, 0) => match sum_of(env, from, from_size, !seed) {
            Some(f) => !f,
            None => return bad(env, "csum_diff: `from` outside the program's memory"),
        },
        _ => {
            let Some(t) = sum_of(env, to, to_size, seed) else {
                return bad(env, "csum_diff: `to` outside the program's memory");
            };
            let Some(f) = sum_of(env, from, from_size, 0) else {
                return bad(env, "csum_diff: `from` outside the program's memory");
            };
            csum_sub(t, f)
        }
    };
    from32to16(ret)
}

pub(super) unsafe extern "C" fn xdp_adjust_head(
    _ctx: u64,
    delta: u64,
    _: u64,
    _: u64,
    _: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    let (meta, data, end) = env.packet();
    let delta = delta as i32 as i64;
    let metalen = data - meta;
    let new_data = (data as i64).wrapping_add(delta) as u64;
    if new_data < floor(env) + metalen || new_data > end.saturating_sub(ETH_HLEN) {
        return EINVAL as u64;
    }
    let new_meta = new_data - metalen;
    if metalen > 0 {
        // SAFETY: both ranges lie in the frame (checked above: new_meta >=
        // start, and new_data <= end); memmove semantics.
        unsafe { std::ptr::copy(meta as *const u8, new_meta as *mut u8, metalen as usize) };
    }
    match env.set_packet(new_data, new_meta, end) {
        Ok(()) => 0,
        Err(_) => EINVAL as u64,
    }
}

pub(super) unsafe extern "C" fn xdp_adjust_meta(
    _ctx: u64,
    delta: u64,
    _: u64,
    _: u64,
    _: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    let (meta, data, end) = env.packet();
    let new_meta = (meta as i64).wrapping_add(delta as i32 as i64) as u64;
    if new_meta < floor(env) || new_meta > data {
        return EINVAL as u64;
    }
    let metalen = data - new_meta;
    if metalen & 3 != 0 || metalen > META_MAX {
        return EACCES as u64;
    }
    match env.set_packet(data, new_meta, end) {
        Ok(()) => 0,
        Err(_) => EINVAL as u64,
    }
}

pub(super) unsafe extern "C" fn xdp_adjust_tail(
    _ctx: u64,
    delta: u64,
    _: u64,
    _: u64,
    _: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    let (meta, data, end) = env.packet();
    let (_, frame_end) = env.frame();
    let delta = delta as i32 as i64;
    let new_end = (end as i64).wrapping_add(delta) as u64;
    if new_end > frame_end || new_end < data + ETH_HLEN {
        return EINVAL as u64;
    }
    if new_end > end {
        // SAFETY: [end, new_end) lies in the frame's tailroom (new_end <=
        // frame_end); the kernel clears grown tail bytes too.
        unsafe { std::ptr::write_bytes(end as *mut u8, 0, (new_end - end) as usize) };
    }
    match env.set_packet(data, meta, new_end) {
        Ok(()) => 0,
        Err(_) => EINVAL as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csum_folds_with_end_around_carry() {
        assert_eq!(csum_partial(&[0xff; 8], 0), 0xffff_ffff);
        assert_eq!(csum_partial(&[1, 0, 0, 0], 0xffff_ffff), 1);
        // A trailing part word is zero-padded (little-endian).
        assert_eq!(csum_partial(&[1, 2, 3], 0), 0x0003_0201);
        assert_eq!(csum_partial(&[], 0), 0);
        assert_eq!(csum_sub(0, 0), 0xffff_ffff);
        assert_eq!(from32to16(0xffff_ffff), 0xffff);
        assert_eq!(from32to16(0x0001_fffe), 0xffff);
    }
}
