//! The socket's directory and lock file: made or checked private
//! without following symlinks (review M1).

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::{euid, io_err, Error};

/// Create the socket's directory (mode 0700, or 0710 of the read group), or
/// check that an existing one is private.
pub(super) fn prepare_dir(dir: &Path, read_group: Option<u32>) -> Result<(), Error> {
    match fs::symlink_metadata(dir) {
        Ok(m) => check_existing_dir(dir, &m, read_group),
        Err(e) if e.kind() == io::ErrorKind::NotFound => create_private_dir(dir, read_group),
        Err(e) => Err(io_err("reading", dir)(e)),
    }
}

/// An existing directory (as `lstat` found it: a symlink is refused) must
/// be ours and closed to others (the read group may only enter it).
fn check_existing_dir(dir: &Path, m: &fs::Metadata, read_group: Option<u32>) -> Result<(), Error> {
    let unsafe_dir = |reason: String| Error::UnsafeDir {
        path: dir.to_owned(),
        reason,
    };
    if !m.is_dir() {
        return Err(unsafe_dir("not a directory".into()));
    }
    if m.uid() != euid() {
        return Err(unsafe_dir(format!(
            "owned by uid {}, not {}",
            m.uid(),
            euid()
        )));
    }
    let mode = m.mode() & 0o777;
    let group_ok = match read_group {
        Some(g) => m.gid() == g && mode & 0o020 == 0,
        None => mode & 0o070 == 0,
    };
    if mode & 0o007 != 0 || !group_ok {
        return Err(unsafe_dir(format!("mode {mode:04o}, group {}", m.gid())));
    }
    Ok(())
}

/// Create `dir`, found missing, private to this user, without following
/// a symlink anyone plants meanwhile (review M1): missing parents are made
/// as by `mkdir -p`, but a parent that someone else could rename the
/// directory out of (world-writable without the sticky bit, or owned by
/// another user than this one or root) is refused; the directory itself
/// is made by one `mkdir` (which never follows a symlink), an existing
/// one found there instead is checked as any existing one, and the mode
/// and group are set through a descriptor opened with `O_NOFOLLOW` and
/// checked with `fstat`, never by path.
fn create_private_dir(dir: &Path, read_group: Option<u32>) -> Result<(), Error> {
    let unsafe_dir = |reason: String| Error::UnsafeDir {
        path: dir.to_owned(),
        reason,
    };
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(io_err("creating the parent directory of", dir))?;
        let m = fs::metadata(parent).map_err(io_err("reading", parent))?;
        if m.mode() & 0o002 != 0 && m.mode() & 0o1000 == 0 {
            return Err(unsafe_dir(format!(
                "its parent {} is writable by anyone and not sticky (mode {:04o})",
                parent.display(),
                m.mode() & 0o7777
            )));
        }
        if m.uid() != euid() && m.uid() != 0 && m.mode() & 0o1000 == 0 {
            return Err(unsafe_dir(format!(
                "its parent {} is owned by uid {}",
                parent.display(),
                m.uid()
            )));
        }
    }
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            // Made (or planted) by someone else since we looked.
            let m = fs::symlink_metadata(dir).map_err(io_err("reading", dir))?;
            return check_existing_dir(dir, &m, read_group);
        }
        Err(e) => return Err(io_err("creating the control socket directory", dir)(e)),
    }
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP | libc::ENOTDIR) => {
                unsafe_dir("replaced by something else while it was being created".into())
            }
            _ => io_err("opening the new directory", dir)(e),
        })?;
    let m = f.metadata().map_err(io_err("reading", dir))?;
    if !m.is_dir() || m.uid() != euid() {
        return Err(unsafe_dir(
            "replaced by another's directory while it was being created".into(),
        ));
    }
    // The mode given to mkdir is masked by the umask: set it.
    let mode = if let Some(g) = read_group {
        std::os::unix::fs::fchown(&f, None, Some(g))
            .map_err(io_err("giving the read group the directory", dir))?;
        0o710
    } else {
        0o700
    };
    f.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(io_err("setting the mode of", dir))
}

/// An exclusive `flock` on `<socket>.lock`, held while the server lives: a
/// second server (another process, or this one) finds it taken.
pub(super) struct LockFile {
    file: File,
    path: PathBuf,
}

impl LockFile {
    pub(super) fn take(socket: &Path) -> Result<LockFile, Error> {
        let mut name = socket.as_os_str().to_owned();
        name.push(".lock");
        let path = PathBuf::from(name);
        loop {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
                .open(&path)
                .map_err(io_err("opening the lock file", &path))?;
            // SAFETY: the descriptor is open and owned by `file`; flock
            // only reads its arguments.
            let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if r != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                    return Err(Error::Busy(socket.to_owned()));
                }
                return Err(io_err("locking", &path)(e));
            }
            // A server that stopped between our open and our flock removed
            // the file we locked: lock the one at the path instead.
            let ours = file.metadata().map_err(io_err("reading", &path))?;
            match fs::symlink_metadata(&path) {
                Ok(m) if m.ino() == ours.ino() && m.dev() == ours.dev() => {
                    return Ok(LockFile { file, path })
                }
                _ => continue,
            }
        }
    }
}

impl Drop for LockFile {
    fn drop(&mut self) {
        // Removed while still locked; the lock goes with the descriptor.
        let _ = fs::remove_file(&self.path);
        let _ = &self.file;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A private temporary directory, removed on drop.
    struct Tmp(PathBuf);

    impl Tmp {
        fn new(tag: &str) -> Tmp {
            let p =
                std::env::temp_dir().join(format!("pfil-ctl-unit-{tag}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir_all(&p).unwrap();
            Tmp(p)
        }
    }

    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// Review M1: a symlink planted between the check that found nothing
    /// and the creation (the race, made deterministic by planting it
    /// before the creation step runs) is neither followed nor changed.
    #[test]
    fn creating_the_directory_never_follows_a_symlink_planted_in_the_race() {
        let t = Tmp::new("race");
        let victim = t.0.join("victim");
        fs::create_dir(&victim).unwrap();
        fs::set_permissions(&victim, fs::Permissions::from_mode(0o755)).unwrap();
        let dir = t.0.join("ctl");
        std::os::unix::fs::symlink(&victim, &dir).unwrap();
        for group in [None, Some(euid())] {
            let e = create_private_dir(&dir, group).unwrap_err();
            assert!(matches!(e, Error::UnsafeDir { .. }), "{e}");
            let m = fs::metadata(&victim).unwrap();
            assert_eq!(m.mode() & 0o777, 0o755, "the symlink's target was changed");
        }
        // A directory someone else made in the race is checked as an
        // existing one: refused when it is open to others.
        fs::remove_file(&dir).unwrap();
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let e = create_private_dir(&dir, None).unwrap_err();
        assert!(matches!(e, Error::UnsafeDir { .. }), "{e}");
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o777);
        // Created when missing (missing parents too), private whatever
        // the umask.
        let fresh = t.0.join("a").join("fresh");
        create_private_dir(&fresh, None).unwrap();
        let m = fs::symlink_metadata(&fresh).unwrap();
        assert!(m.is_dir());
        assert_eq!(m.mode() & 0o777, 0o700);
        // Under a parent others may write to (no sticky bit), anyone could
        // rename the directory away and put theirs in its place: refused.
        let open = t.0.join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let e = create_private_dir(&open.join("ctl"), None).unwrap_err();
        assert!(e.to_string().contains("parent"), "{e}");
        fs::set_permissions(&open, fs::Permissions::from_mode(0o1777)).unwrap();
        create_private_dir(&open.join("ctl"), None).unwrap();
    }
}
