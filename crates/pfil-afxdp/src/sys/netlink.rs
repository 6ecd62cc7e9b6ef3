//! Generic netlink: the netdev family's XDP features of an interface.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

// ---- generic netlink: the netdev family's XDP features --------------------

const NETLINK_GENERIC: i32 = 16;
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NETDEV_CMD_DEV_GET: u8 = 1;
const NETDEV_A_DEV_IFINDEX: u16 = 1;
const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_ERROR: u16 = 2;
/// `NETDEV_XDP_ACT_NDO_XMIT`: the device takes frames redirected to it.
pub(crate) const NETDEV_XDP_ACT_NDO_XMIT: u64 = 1 << 2;

fn nla_put(msg: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    msg.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    msg.extend_from_slice(&ty.to_ne_bytes());
    msg.extend_from_slice(payload);
    while msg.len() % 4 != 0 {
        msg.push(0);
    }
}

/// One generic netlink request/answer on `sock`: the attributes of the
/// first answer, or its error.
fn genl_call(
    sock: &OwnedFd,
    family: u16,
    cmd: u8,
    attrs: &[u8],
) -> io::Result<Vec<(u16, Vec<u8>)>> {
    let mut msg = Vec::with_capacity(20 + attrs.len());
    msg.extend_from_slice(&((20 + attrs.len()) as u32).to_ne_bytes());
    msg.extend_from_slice(&family.to_ne_bytes());
    msg.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // seq
    msg.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel
    msg.extend_from_slice(&[cmd, 1, 0, 0]); // genlmsghdr: cmd, version
    msg.extend_from_slice(attrs);
    // SAFETY: `msg` is a live buffer of `msg.len()` bytes; send(2) only reads it.
    let r = unsafe {
        libc::send(
            sock.as_raw_fd(),
            msg.as_ptr() as *const libc::c_void,
            msg.len(),
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 16384];
    // SAFETY: `buf` is writable for `buf.len()` bytes; recv(2) writes at most that.
    let r = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let buf = &buf[..r as usize];
    let bad = || io::Error::from_raw_os_error(libc::EPROTO);
    if buf.len() < 16 {
        return Err(bad());
    }
    let len =
        (u32::from_ne_bytes(buf[0..4].try_into().map_err(|_| bad())?) as usize).min(buf.len());
    let ty = u16::from_ne_bytes([buf[4], buf[5]]);
    if ty == NLMSG_ERROR {
        let e = i32::from_ne_bytes(
            buf.get(16..20)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?,
        );
        return Err(io::Error::from_raw_os_error(-e));
    }
    let mut out = Vec::new();
    let mut at = 20;
    while at + 4 <= len {
        let alen = u16::from_ne_bytes([buf[at], buf[at + 1]]) as usize;
        let aty = u16::from_ne_bytes([buf[at + 2], buf[at + 3]]) & 0x3fff;
        if alen < 4 || at + alen > len {
            break;
        }
        out.push((aty, buf[at + 4..at + alen].to_vec()));
        at += (alen + 3) & !3;
    }
    Ok(out)
}

/// The XDP features (`NETDEV_XDP_ACT_*`) of `ifindex`, from the netdev
/// generic netlink family, in the calling thread's namespace. `Ok(None)`:
/// the kernel has no netdev family (before 6.3), so nothing is known.
pub(crate) fn xdp_features(ifindex: u32) -> io::Result<Option<u64>> {
    // SAFETY: plain socket(2) call; the result is checked below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_GENERIC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let tv = libc::timeval {
        tv_sec: 2,
        tv_usec: 0,
    };
    // SAFETY: `tv` is a valid timeval of the size passed; the kernel only reads it.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const libc::timeval as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
    }
    let mut attrs = Vec::new();
    nla_put(&mut attrs, CTRL_ATTR_FAMILY_NAME, b"netdev\0");
    let family = match genl_call(&sock, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, &attrs) {
        Ok(a) => a,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some(id) = family
        .iter()
        .find(|(t, v)| *t == CTRL_ATTR_FAMILY_ID && v.len() >= 2)
        .map(|(_, v)| u16::from_ne_bytes([v[0], v[1]]))
    else {
        return Ok(None);
    };
    let mut attrs = Vec::new();
    nla_put(&mut attrs, NETDEV_A_DEV_IFINDEX, &ifindex.to_ne_bytes());
    let dev = genl_call(&sock, id, NETDEV_CMD_DEV_GET, &attrs)?;
    Ok(dev
        .iter()
        .find(|(t, v)| *t == NETDEV_A_DEV_XDP_FEATURES && v.len() >= 8)
        .map(|(_, v)| u64::from_ne_bytes(v[..8].try_into().unwrap_or([0; 8]))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netlink_attributes_are_padded() {
        let mut m = Vec::new();
        nla_put(&mut m, CTRL_ATTR_FAMILY_NAME, b"netdev\0");
        assert_eq!(m.len(), 12);
        assert_eq!(u16::from_ne_bytes([m[0], m[1]]), 11);
        assert_eq!(u16::from_ne_bytes([m[2], m[3]]), 2);
    }
}
