//! The control server: a Unix stream socket, an accept thread and one
//! thread per connection, bounded in connections, request size and time.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pfil::Registry;
use pfil_filters::Catalog;

use crate::methods::{Access, Target, WRITE_METHODS};
use crate::rpc::{self, code, RpcError};

mod dir;
mod peer;

use dir::{prepare_dir, LockFile};
use peer::{access_of, admit, peer_cred, peer_groups};

/// Longest accepted request line, in bytes, unless configured otherwise.
pub const DEFAULT_MAX_REQUEST: usize = 1 << 20;
/// Most connections served at once, unless configured otherwise.
pub const DEFAULT_MAX_CONNECTIONS: usize = 32;
/// How long a connection may take to send a complete request line (idle
/// time included), unless configured otherwise.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a write waits for its grace period before answering, unless
/// configured otherwise ([`ControlConfig::grace_timeout`]).
pub const DEFAULT_GRACE_TIMEOUT: Duration = Duration::from_secs(2);

/// How the control server is set up. Build with [`ControlConfig::new`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ControlConfig {
    /// The app's name: the default socket is `<dir>/<app>.sock` and
    /// `version` reports it.
    pub app: String,
    /// The socket path; `None`: [`default_socket_path`] of `app`.
    pub path: Option<PathBuf>,
    /// A group (gid) whose members may use the read methods. The socket
    /// then is mode 0660 and its directory 0710, both of that group.
    pub read_group: Option<u32>,
    /// Longest request line in bytes (default 1 MiB).
    pub max_request: usize,
    /// Most connections at once (default 32).
    pub max_connections: usize,
    /// Time allowed for each request line, idle time included (default 10 s).
    pub read_timeout: Duration,
    /// How long a write waits for the grace period of its change before
    /// it answers (default 2 s): when the answer says `"complete": true`,
    /// no datapath thread runs the previous configuration any more and
    /// the `retired` counters are final. A reader stuck in a batch longer
    /// than this makes the answer say `false`; the change is made anyway.
    pub grace_timeout: Duration,
    /// What the `reload` method runs: the app re-reads its configuration
    /// file and applies it ([`ControlConfig::on_reload`]); `None`: the
    /// method answers that this app has no file to reload.
    pub reload: Option<Reload>,
}

/// An app's reload: re-read its configuration and apply it, answering
/// with what it did (a JSON object) or why it changed nothing.
#[derive(Clone)]
pub struct Reload(pub Arc<dyn Fn() -> Result<serde_json::Value, String> + Send + Sync>);

impl std::fmt::Debug for Reload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reload(..)")
    }
}

impl ControlConfig {
    /// The defaults for the app `app`.
    pub fn new(app: impl Into<String>) -> ControlConfig {
        ControlConfig {
            app: app.into(),
            path: None,
            read_group: None,
            max_request: DEFAULT_MAX_REQUEST,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            read_timeout: DEFAULT_READ_TIMEOUT,
            grace_timeout: DEFAULT_GRACE_TIMEOUT,
            reload: None,
        }
    }

    /// Answer the `reload` method with `f` (run on the connection's
    /// thread; the app serializes it with its own reloads).
    pub fn on_reload(
        mut self,
        f: impl Fn() -> Result<serde_json::Value, String> + Send + Sync + 'static,
    ) -> ControlConfig {
        self.reload = Some(Reload(Arc::new(f)));
        self
    }

    /// Use the socket at `path`.
    pub fn path(mut self, path: impl Into<PathBuf>) -> ControlConfig {
        self.path = Some(path.into());
        self
    }

    /// Let members of group `gid` use the read methods.
    pub fn read_group(mut self, gid: u32) -> ControlConfig {
        self.read_group = Some(gid);
        self
    }

    /// Set the request size limit in bytes.
    pub fn max_request(mut self, bytes: usize) -> ControlConfig {
        self.max_request = bytes;
        self
    }

    /// Set the connection limit.
    pub fn max_connections(mut self, n: usize) -> ControlConfig {
        self.max_connections = n;
        self
    }

    /// Set the per-request read timeout.
    pub fn read_timeout(mut self, t: Duration) -> ControlConfig {
        self.read_timeout = t;
        self
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Another live server owns the socket; it was left alone.
    #[error("control socket {} is in use by a running server: stop that process or choose another socket path", .0.display())]
    Busy(PathBuf),
    /// Not root and `$XDG_RUNTIME_DIR` is not set: there is no default.
    #[error("no default control socket path: not root and $XDG_RUNTIME_DIR is not set; give a socket path")]
    NoRuntimeDir,
    /// The app name cannot name a socket file.
    #[error("app name {0:?} cannot name a socket file (use [A-Za-z0-9._-], not empty)")]
    BadAppName(String),
    /// The socket path has no parent directory or is too long.
    #[error("bad control socket path {}: {reason}", path.display())]
    BadPath {
        /// The path.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The socket's directory exists but others could enter it.
    #[error("control socket directory {} is not private ({reason}): use a directory of mode 0700 owned by this user, or let the server create one", path.display())]
    UnsafeDir {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Something that is not a socket is at the socket path.
    #[error("{} exists and is not a socket; not replacing it", .0.display())]
    NotASocket(PathBuf),
    /// A system call failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// On what.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

impl Error {
    /// Is this [`Error::Busy`] (a live server holds the socket)?
    pub fn is_busy(&self) -> bool {
        matches!(self, Error::Busy(_))
    }
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> Error + 'a {
    move |source| Error::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The default socket of `app`: `/run/pfil/<app>.sock` as root,
/// `$XDG_RUNTIME_DIR/pfil/<app>.sock` otherwise.
///
/// # Errors
/// [`Error::BadAppName`], [`Error::NoRuntimeDir`].
pub fn default_socket_path(app: &str) -> Result<PathBuf, Error> {
    if app.is_empty()
        || app.starts_with('.')
        || !app
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(Error::BadAppName(app.to_owned()));
    }
    let base = if euid() == 0 {
        PathBuf::from("/run")
    } else {
        match std::env::var_os("XDG_RUNTIME_DIR") {
            Some(d) if !d.is_empty() => PathBuf::from(d),
            _ => return Err(Error::NoRuntimeDir),
        }
    };
    Ok(base.join("pfil").join(format!("{app}.sock")))
}

/// State shared by the accept thread and the connections.
struct Shared {
    target: Target,
    config: ControlConfig,
    path: PathBuf,
    owner: u32,
    stop: AtomicBool,
    /// Open connections (a clone of each stream, to shut them down) and
    /// what each peer may do.
    conns: Mutex<HashMap<u64, (UnixStream, Access)>>,
    next_id: AtomicU64,
}

/// A running control server. Dropping it stops it: the accept thread and
/// every connection end, and the socket file is removed.
pub struct Server {
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
    ino: (u64, u64),
    _lock: LockFile,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("path", &self.shared.path)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Start serving `registry` on the configured socket: create the
    /// directory (0700), replace a stale socket, never a live one, bind
    /// (socket 0600), and accept on a thread of its own.
    ///
    /// # Errors
    /// [`Error::Busy`] if a live server has the socket; [`Error::NoRuntimeDir`]
    /// without a default path; [`Error::UnsafeDir`], [`Error::NotASocket`],
    /// [`Error::Io`] naming the path.
    pub fn start(
        registry: Registry,
        catalog: Arc<Catalog>,
        config: ControlConfig,
    ) -> Result<Server, Error> {
        let path = match &config.path {
            Some(p) => p.clone(),
            None => default_socket_path(&config.app)?,
        };
        let bad = |reason: &str| Error::BadPath {
            path: path.clone(),
            reason: reason.to_owned(),
        };
        // sun_path holds 108 bytes with the terminating NUL.
        if path.as_os_str().len() > 107 {
            return Err(bad("longer than the 107 bytes a Unix socket path may have"));
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        if path.file_name().is_none() {
            return Err(bad("no file name"));
        }
        prepare_dir(&dir, config.read_group)?;
        let lock = LockFile::take(&path)?;
        match fs::symlink_metadata(&path) {
            Ok(m) if std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()) => {
                match UnixStream::connect(&path) {
                    Ok(_) => return Err(Error::Busy(path)),
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        tracing::info!(target: "pfil_ctl", path = %path.display(), "replacing a stale control socket");
                        fs::remove_file(&path)
                            .map_err(io_err("removing the stale socket", &path))?;
                    }
                    Err(e) => return Err(io_err("probing the existing socket", &path)(e)),
                }
            }
            Ok(_) => return Err(Error::NotASocket(path)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("reading", &path)(e)),
        }
        let listener = UnixListener::bind(&path).map_err(io_err("binding", &path))?;
        let mode = match config.read_group {
            Some(g) => {
                std::os::unix::fs::chown(&path, None, Some(g))
                    .map_err(io_err("giving the read group the socket", &path))?;
                0o660
            }
            None => 0o600,
        };
        fs::set_permissions(&path, fs::Permissions::from_mode(mode))
            .map_err(io_err("setting the mode of", &path))?;
        let m = fs::symlink_metadata(&path).map_err(io_err("reading", &path))?;
        listener
            .set_nonblocking(true)
            .map_err(io_err("configuring", &path))?;
        let shared = Arc::new(Shared {
            target: Target {
                registry,
                catalog,
                app: config.app.clone(),
                grace_timeout: config.grace_timeout,
                reload: config.reload.clone(),
            },
            config,
            path: path.clone(),
            owner: euid(),
            stop: AtomicBool::new(false),
            conns: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
        });
        let s = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("pfil-ctl".into())
            .spawn(move || accept_loop(&s, &listener))
            .map_err(io_err("starting the accept thread for", &path))?;
        tracing::info!(target: "pfil_ctl", path = %path.display(), "control server listening");
        Ok(Server {
            shared,
            acceptor: Some(acceptor),
            ino: (m.dev(), m.ino()),
            _lock: lock,
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        // Remove the socket only if it is still the one we bound.
        if let Ok(m) = fs::symlink_metadata(&self.shared.path) {
            if (m.dev(), m.ino()) == self.ino {
                let _ = fs::remove_file(&self.shared.path);
            }
        }
        tracing::info!(target: "pfil_ctl", path = %self.shared.path.display(), "control server stopped");
    }
}

/// Write one line, with a bound on the time it may take.
pub(crate) fn send_line(s: &mut UnixStream, line: &str) -> io::Result<()> {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    s.write_all(&buf)?;
    s.flush()
}

/// Answer with an error and close.
fn refuse(mut s: UnixStream, e: &RpcError) {
    let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = send_line(&mut s, &rpc::error_response(&rpc::null_id(), e));
    let _ = s.shutdown(std::net::Shutdown::Both);
}

fn wait_readable(fd: i32, ms: i32) {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd and the count says so; poll only
    // writes its `revents`.
    unsafe {
        libc::poll(&mut p, 1, ms);
    }
}

fn accept_loop(shared: &Arc<Shared>, listener: &UnixListener) {
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    while !shared.stop.load(Ordering::Acquire) {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                wait_readable(listener.as_raw_fd(), 100);
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::warn!(target: "pfil_ctl", error = %e, "accept failed");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let _ = stream.set_nonblocking(false);
        workers.retain(|w| !w.is_finished());
        let peer = match peer_cred(&stream) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(target: "pfil_ctl", error = %e, "cannot read the peer's credentials; closing");
                refuse(
                    stream,
                    &RpcError::new(
                        code::PERMISSION_DENIED,
                        "permission_denied",
                        "peer credentials unavailable",
                    ),
                );
                continue;
            }
        };
        let Some(access) = access_of(&peer, shared.owner, shared.config.read_group, || {
            peer_groups(&stream).unwrap_or_else(|e| {
                tracing::warn!(target: "pfil_ctl", error = %e, pid = peer.pid, "cannot read the peer's groups (SO_PEERGROUPS)");
                Vec::new()
            })
        }) else {
            tracing::warn!(target: "pfil_ctl", pid = peer.pid, uid = peer.uid, gid = peer.gid, path = %shared.path.display(), "control connection refused: peer is neither the owner, root nor in the read group");
            refuse(
                stream,
                &RpcError::new(
                    code::PERMISSION_DENIED,
                    "permission_denied",
                    format!(
                        "uid {} may not use this control socket (only uid {}, root{})",
                        peer.uid,
                        shared.owner,
                        match shared.config.read_group {
                            Some(g) => format!(" and, read-only, group {g}"),
                            None => String::new(),
                        }
                    ),
                ),
            );
            continue;
        };
        let admitted = {
            let conns = lock(&shared.conns);
            let open_read = conns.values().filter(|(_, a)| *a == Access::Read).count();
            admit(
                conns.len(),
                open_read,
                access,
                shared.config.max_connections,
            )
        };
        if let Err(why) = admitted {
            tracing::warn!(target: "pfil_ctl", pid = peer.pid, uid = peer.uid, ?access, max = shared.config.max_connections, "control connection refused: too many connections");
            refuse(
                stream,
                &RpcError::new(code::TOO_MANY_CONNECTIONS, "too_many_connections", why),
            );
            continue;
        }
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        let Ok(clone) = stream.try_clone() else {
            refuse(
                stream,
                &RpcError::new(
                    code::TOO_MANY_CONNECTIONS,
                    "too_many_connections",
                    "out of descriptors",
                ),
            );
            continue;
        };
        lock(&shared.conns).insert(id, (clone, access));
        // Frees the slot and closes the connection when the thread ends,
        // however it ends (a panic included), or if it cannot start.
        let slot = ConnSlot {
            shared: shared.clone(),
            id,
        };
        tracing::debug!(target: "pfil_ctl", pid = peer.pid, uid = peer.uid, ?access, "control connection");
        let s = shared.clone();
        match std::thread::Builder::new()
            .name("pfil-ctl-conn".into())
            .spawn(move || {
                let _slot = slot;
                serve(&s, stream, access);
            }) {
            Ok(h) => workers.push(h),
            Err(e) => {
                tracing::warn!(target: "pfil_ctl", error = %e, "cannot start a connection thread");
            }
        }
    }
    // Stop: wake every connection blocked in read, then wait for them.
    for (s, _) in lock(&shared.conns).values() {
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
    for w in workers {
        let _ = w.join();
    }
}

/// A connection's entry in [`Shared::conns`]: removed, and the connection
/// shut down, when this is dropped.
struct ConnSlot {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        if let Some((s, _)) = lock(&self.shared.conns).remove(&self.id) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What reading a request line gave.
enum Line {
    Data(Vec<u8>),
    Eof,
    TooLarge,
    TimedOut,
    Failed,
}

/// Reads newline-terminated lines of at most `max` bytes, each within
/// `timeout` of asking for it.
struct LineReader {
    pending: Vec<u8>,
    scanned: usize,
}

impl LineReader {
    fn next(&mut self, s: &mut UnixStream, max: usize, timeout: Duration) -> Line {
        let deadline = Instant::now() + timeout;
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if let Some(p) = self.pending[self.scanned..]
                .iter()
                .position(|&b| b == b'\n')
            {
                let end = self.scanned + p;
                let line: Vec<u8> = self.pending.drain(..=end).take(end).collect();
                self.scanned = 0;
                if line.len() > max {
                    return Line::TooLarge;
                }
                return Line::Data(line);
            }
            self.scanned = self.pending.len();
            if self.pending.len() > max {
                return Line::TooLarge;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
                return Line::TimedOut;
            }
            match s.read(&mut chunk) {
                Ok(0) if self.pending.is_empty() => return Line::Eof,
                Ok(0) => {
                    self.scanned = 0;
                    return Line::Data(std::mem::take(&mut self.pending));
                }
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Line::TimedOut
                }
                Err(_) => return Line::Failed,
            }
        }
    }
}

/// Serve one connection until it closes, errs or the server stops.
fn serve(shared: &Shared, mut s: UnixStream, access: Access) {
    let cfg = &shared.config;
    let _ = s.set_write_timeout(Some(cfg.read_timeout));
    let mut reader = LineReader {
        pending: Vec::new(),
        scanned: 0,
    };
    loop {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let line = match reader.next(&mut s, cfg.max_request, cfg.read_timeout) {
            Line::Data(l) => l,
            Line::Eof | Line::Failed => return,
            Line::TooLarge => {
                tracing::warn!(target: "pfil_ctl", max = cfg.max_request, "control request too large; closing");
                let e = RpcError::new(
                    code::REQUEST_TOO_LARGE,
                    "request_too_large",
                    format!(
                        "request line longer than {} bytes; closing",
                        cfg.max_request
                    ),
                );
                refuse(s, &e);
                return;
            }
            Line::TimedOut => {
                if shared.stop.load(Ordering::Acquire) {
                    return;
                }
                let e = RpcError::new(
                    code::TIMEOUT,
                    "timeout",
                    format!(
                        "no complete request line within {:?}; closing",
                        cfg.read_timeout
                    ),
                );
                refuse(s, &e);
                return;
            }
        };
        let text = line.strip_suffix(b"\r").unwrap_or(&line);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let reply = match rpc::parse_call(text) {
            Err((id, e)) => Some(rpc::error_response(&id, &e)),
            Ok(call) if call.id.is_none() && WRITE_METHODS.contains(&call.method.as_str()) => {
                // A notification gets no answer: a write's failure (or
                // its success) would go unseen. Refused, and said so.
                tracing::warn!(target: "pfil_ctl", method = %call.method, "control: a write without an id refused");
                Some(rpc::error_response(
                    &rpc::null_id(),
                    &RpcError::request(format!(
                        "`{}` changes the configuration and needs an `id` (a request without one is a notification, which gets no answer); nothing was done",
                        call.method
                    )),
                ))
            }
            Ok(call) if call.method == "capture" || call.method == "trace" => {
                // A streaming session; the connection ends with it.
                let id = call.id.unwrap_or_else(rpc::null_id);
                let what = if call.method == "capture" {
                    "`capture` links a tap"
                } else {
                    "`trace` attaches a packet trace"
                };
                let r = if access != Access::Write {
                    Err(RpcError::new(
                        code::PERMISSION_DENIED,
                        "permission_denied",
                        format!("{what}; this peer may only use the read methods"),
                    ))
                } else {
                    let mut next = |s: &mut UnixStream, t: Duration| match reader.next(
                        s,
                        cfg.max_request,
                        t,
                    ) {
                        Line::Data(_) | Line::TooLarge => Some(true),
                        Line::Eof | Line::Failed => Some(false),
                        Line::TimedOut => None,
                    };
                    let stopping = || shared.stop.load(Ordering::Acquire);
                    let method = call.method.clone();
                    let session = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        let run = if method == "capture" {
                            crate::capture::session
                        } else {
                            crate::trace::session
                        };
                        run(
                            &shared.target,
                            &mut s,
                            &mut next,
                            &stopping,
                            &id,
                            call.params,
                        )
                    }));
                    session.unwrap_or_else(|p| {
                        let why = rpc::panic_text(&*p);
                        tracing::error!(target: "pfil_ctl", method = %method, panic = %why, "control: a streaming session panicked; its tap or trace is removed");
                        Err(RpcError::internal(&method, &why))
                    })
                };
                if let Err(e) = r {
                    let _ = send_line(&mut s, &rpc::error_response(&id, &e));
                }
                return;
            }
            Ok(call) => {
                let method = call.method;
                let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    shared.target.call(access, &method, call.params)
                }));
                match (r, call.id) {
                    (Ok(r), id) => id.map(|id| match r {
                        Ok(v) => rpc::response(&id, v),
                        Err(e) => rpc::error_response(&id, &e),
                    }),
                    (Err(p), id) => {
                        let why = rpc::panic_text(&*p);
                        tracing::error!(target: "pfil_ctl", method = %rpc::clip(&method), panic = %why, "control: a request handler panicked; closing its connection");
                        let id = id.unwrap_or_else(rpc::null_id);
                        let _ = send_line(
                            &mut s,
                            &rpc::error_response(&id, &RpcError::internal(&method, &why)),
                        );
                        return;
                    }
                }
            }
        };
        if let Some(reply) = reply {
            if send_line(&mut s, &reply).is_err() {
                return;
            }
        }
    }
}
