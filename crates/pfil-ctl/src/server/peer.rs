//! Who is at the other end of a connection, and may it have a slot
//! (review L3).

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

use crate::methods::Access;

/// A peer's credentials from `SO_PEERCRED`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Peer {
    pub(super) pid: i32,
    pub(super) uid: u32,
    pub(super) gid: u32,
}

pub(super) fn peer_cred(s: &UnixStream) -> io::Result<Peer> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: the descriptor is an open socket owned by `s`; `cred` is a
    // valid, writable `ucred` and `len` holds its size, which is what
    // SO_PEERCRED writes (at most `len` bytes).
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast::<libc::c_void>(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Peer {
        pid: cred.pid,
        uid: cred.uid,
        gid: cred.gid,
    })
}

/// `SO_PEERGROUPS` (Linux 4.13): the peer's supplementary groups as they
/// were when it connected.
#[cfg(any(target_arch = "sparc", target_arch = "sparc64"))]
const SO_PEERGROUPS: libc::c_int = 0x3d;
#[cfg(not(any(target_arch = "sparc", target_arch = "sparc64")))]
const SO_PEERGROUPS: libc::c_int = 59;

/// The peer's supplementary groups from `SO_PEERGROUPS`: taken by the
/// kernel at connect time, unlike `/proc/<pid>/status`, whose pid may
/// have been reused by another process since (review L3).
pub(super) fn peer_groups(s: &UnixStream) -> io::Result<Vec<u32>> {
    const GID: usize = std::mem::size_of::<libc::gid_t>();
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut len = (groups.len() * GID) as libc::socklen_t;
        // SAFETY: the descriptor is an open socket owned by `s`; the
        // buffer holds `len` bytes of gid_t, which is at most what
        // SO_PEERGROUPS writes (it fails with ERANGE, writing the size
        // it needs to `len`, when the buffer is too small).
        let r = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                SO_PEERGROUPS,
                groups.as_mut_ptr().cast::<libc::c_void>(),
                &mut len,
            )
        };
        let n = len as usize / GID;
        if r == 0 {
            groups.truncate(n.min(groups.len()));
            return Ok(groups);
        }
        let e = io::Error::last_os_error();
        // NGROUPS_MAX is 65536.
        if e.raw_os_error() == Some(libc::ERANGE) && n > groups.len() && n <= 65536 {
            groups.resize(n, 0);
            continue;
        }
        return Err(e);
    }
}

pub(super) fn access_of(
    peer: &Peer,
    owner: u32,
    read_group: Option<u32>,
    groups: impl FnOnce() -> Vec<u32>,
) -> Option<Access> {
    if peer.uid == owner || peer.uid == 0 {
        return Some(Access::Write);
    }
    let g = read_group?;
    (peer.gid == g || groups().contains(&g)).then_some(Access::Read)
}

/// Connection slots kept for peers with write access out of `max`: the
/// read-only peers may hold at most `max - reserved_slots(max)` at once,
/// so that they cannot lock the owner out (review L3).
pub(crate) fn reserved_slots(max: usize) -> usize {
    if max < 2 {
        0
    } else {
        (max / 4).max(1)
    }
}

/// May a peer with `access` connect while `open` connections are served,
/// `open_read` of them read-only? The refusal's message if not.
pub(super) fn admit(
    open: usize,
    open_read: usize,
    access: Access,
    max: usize,
) -> Result<(), String> {
    if open >= max {
        return Err(format!(
            "the server has its maximum of {max} connections; try again later"
        ));
    }
    let for_read = max - reserved_slots(max);
    if access == Access::Read && open_read >= for_read {
        return Err(format!(
            "the read-only peers have their maximum of {for_read} connections (of {max}; the others are kept for peers that may write); try again later"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Review L3: read-only peers cannot take the slots kept for the
    /// peers that may write.
    #[test]
    fn read_only_peers_leave_slots_for_the_writers() {
        assert_eq!(reserved_slots(32), 8);
        assert_eq!(reserved_slots(2), 1);
        assert_eq!(reserved_slots(1), 0);
        for open in 0..24 {
            admit(open, open, Access::Read, 32).unwrap();
        }
        let e = admit(24, 24, Access::Read, 32).unwrap_err();
        assert!(e.contains("read-only") && e.contains("24"), "{e}");
        for open in 24..32 {
            admit(open, 24, Access::Write, 32).unwrap();
        }
        assert!(admit(32, 24, Access::Write, 32)
            .unwrap_err()
            .contains("maximum of 32"));
        // Writers may use every slot; readers still get theirs back
        // only as reads close.
        admit(31, 0, Access::Read, 32).unwrap();
        assert!(admit(32, 0, Access::Read, 32).is_err());
    }

    /// Review L3: the peer's groups come from the kernel (SO_PEERGROUPS),
    /// as getgroups(2) gives them for this process.
    #[test]
    fn peer_groups_are_the_kernels() {
        let (a, _b) = UnixStream::pair().unwrap();
        let mut got = peer_groups(&a).unwrap();
        // SAFETY: a null list with size 0 asks for the count only.
        let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
        let mut want = vec![0 as libc::gid_t; usize::try_from(n).unwrap()];
        // SAFETY: `want` holds `n` gid_t, the size given.
        let n = unsafe { libc::getgroups(n, want.as_mut_ptr()) };
        want.truncate(usize::try_from(n).unwrap());
        got.sort_unstable();
        want.sort_unstable();
        want.dedup();
        got.dedup();
        assert_eq!(got, want);
    }
}
