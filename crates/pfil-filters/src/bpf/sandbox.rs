//! libpcap's compiler, run where it cannot hurt the process that asks.
//!
//! `pcap_compile` is C that recurses over the expression (a 98 KB
//! `udp or udp or …` overflows a 2 MiB thread stack and aborts the whole
//! process) and whose optimizer is superlinear (on this project's test
//! machine `host A or host B or …` takes 1.2 s with 250 hosts, 8.8 s with
//! 500 and 104 s with 1 000). A control request must get an answer in
//! bounded time and must never take the dataplane down, and a thread
//! cannot be stopped from outside. So one compile is:
//!
//! 1. refused above [`CompileLimits::max_len`] bytes, before anything runs;
//! 2. admitted by a semaphore of [`MAX_CONCURRENT`] compiles (a wait for a
//!    slot counts against the time limit);
//! 3. run in a child process forked from a thread with a
//!    [`STACK_BYTES`] stack, with its data size limited to the parent's
//!    plus [`CompileLimits::memory`] and no core dump; it writes the
//!    programs (or libpcap's message) to a pipe and exits;
//! 4. killed (`SIGKILL`) when [`CompileLimits::timeout`] passes, and
//!    reaped in every case.
//!
//! A child that dies (a stack overflow past even the large stack, memory
//! past the limit) is a clear error naming the signal; the parent is
//! unaffected. The child runs only libpcap and this module's own
//! allocation and `write(2)` loop: after `fork` in a threaded process that
//! relies on glibc's `malloc` being fork-safe (it takes its arenas' locks
//! around `fork`) and on nothing else holding a lock the child needs
//! (libpcap's compiler keeps its state per call since 1.8; a host name in
//! the expression is resolved through NSS, which a killed or deadlocked
//! child at worst turns into the time-limit error).

#![allow(unsafe_code)]

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::{Insn, Link, Program};

/// Longest expression compiled by default: 16 KiB, four times the longest
/// tcpdump expression the project has seen in use, and far below what
/// takes libpcap's optimizer seconds.
pub const MAX_EXPR_BYTES: usize = 16 * 1024;
/// Default time for one compile (both link types), the wait for a slot
/// included.
pub const COMPILE_TIMEOUT: Duration = Duration::from_secs(3);
/// Default memory a compile may use above the process's data size.
pub const COMPILE_MEMORY: usize = 512 << 20;
/// Compiles that may run at once in the process; further ones wait (their
/// time counts).
pub const MAX_CONCURRENT: usize = 2;
/// Stack of the thread that forks the compiling child (virtual: only the
/// pages a deep expression touches are ever backed).
pub const STACK_BYTES: usize = 256 << 20;

/// Bounds on compiling one expression with libpcap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompileLimits {
    /// Longest expression, in bytes.
    pub max_len: usize,
    /// Wall-clock time for the whole compile, the wait for a slot included.
    pub timeout: Duration,
    /// Bytes of data the compiler may allocate.
    pub memory: usize,
}

impl Default for CompileLimits {
    fn default() -> Self {
        CompileLimits {
            max_len: MAX_EXPR_BYTES,
            timeout: COMPILE_TIMEOUT,
            memory: COMPILE_MEMORY,
        }
    }
}

impl CompileLimits {
    /// These limits with another time limit.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// These limits with another length limit.
    #[must_use]
    pub fn with_max_len(mut self, max_len: usize) -> Self {
        self.max_len = max_len;
        self
    }
}

/// The semaphore of compiles in flight.
static SLOTS: Mutex<usize> = Mutex::new(0);
static FREED: Condvar = Condvar::new();

struct Slot;

impl Slot {
    fn take(deadline: Instant, limits: &CompileLimits) -> Result<Slot, String> {
        let mut n = SLOTS.lock().unwrap_or_else(|p| p.into_inner());
        while *n >= MAX_CONCURRENT {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "{MAX_CONCURRENT} expressions are being compiled already and none finished within the time limit ({:?}); try again",
                    limits.timeout
                ));
            }
            n = FREED
                .wait_timeout(n, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *n += 1;
        Ok(Slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        *SLOTS.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        FREED.notify_one();
    }
}

/// Compile `expr` for each of `links` under `limits`: one result per link,
/// in order (libpcap's message for an expression one link type does not
/// take), or one error for the whole compile (too long, out of time, the
/// compiler died).
pub(super) fn compile(
    expr: &str,
    links: &[Link],
    limits: &CompileLimits,
) -> Result<Vec<Result<Program, String>>, String> {
    if expr.len() > limits.max_len {
        return Err(format!(
            "the expression is {} bytes, over the limit of {} bytes",
            expr.len(),
            limits.max_len
        ));
    }
    if expr.contains('\0') {
        return Err("the expression contains a NUL byte".into());
    }
    let deadline = Instant::now() + limits.timeout;
    let _slot = Slot::take(deadline, limits)?;
    let expr = expr.to_owned();
    let links = links.to_vec();
    let limits = *limits;
    let forker = std::thread::Builder::new()
        .name("pfil-bpf-compile".into())
        .stack_size(STACK_BYTES)
        .spawn(move || run_child(&expr, &links, &limits, deadline))
        .map_err(|e| format!("cannot start the compiler's thread: {e}"))?;
    let raw = forker
        .join()
        .map_err(|_| "the compiler's thread panicked".to_string())??;
    decode(&raw, limits.memory >> 20)
}

/// Fork, compile in the child, collect its output within the deadline.
fn run_child(
    expr: &str,
    links: &[Link],
    limits: &CompileLimits,
    deadline: Instant,
) -> Result<Vec<u8>, String> {
    let data_limit = data_size().saturating_add(limits.memory as u64);
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!(
            "cannot make a pipe for the compiler: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: pipe2 succeeded: both fds are open and owned by nobody else.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fork has no memory-safety preconditions of its own; what the
    // child may do afterwards is argued in `child` and the module docs.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!(
            "cannot fork the compiler: {}",
            std::io::Error::last_os_error()
        ));
    }
    if pid == 0 {
        drop(rd);
        child(expr, links, data_limit, wr);
    }
    drop(wr);
    let out = collect(rd, deadline, limits.timeout);
    if out.is_err() {
        // SAFETY: `pid` is our own child, not yet reaped: the signal
        // reaches it and no other process.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let status = reap(pid);
    let out = out?;
    match status {
        Some(s) if libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == 0 => Ok(out),
        Some(s) if libc::WIFSIGNALED(s) => Err(format!(
            "libpcap's compiler died of signal {} ({}) on this expression{}",
            libc::WTERMSIG(s),
            signal_name(libc::WTERMSIG(s)),
            if libc::WTERMSIG(s) == libc::SIGSEGV {
                ": nested or repeated too deeply"
            } else {
                ""
            }
        )),
        Some(s) => Err(format!(
            "libpcap's compiler failed (exit status {}): out of memory (limit {} MiB)?",
            libc::WEXITSTATUS(s),
            limits.memory >> 20
        )),
        // Someone else reaped it (SIGCHLD ignored): trust a complete output.
        None => Ok(out),
    }
}

/// The child: compile, write, `_exit`. Never returns, never unwinds into
/// the parent's code.
fn child(expr: &str, links: &[Link], data_limit: u64, wr: OwnedFd) -> ! {
    let lim = libc::rlimit {
        rlim_cur: data_limit,
        rlim_max: data_limit,
    };
    let none = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: setrlimit reads the two valid structs; failure only leaves
    // the limit as it was.
    unsafe {
        libc::setrlimit(libc::RLIMIT_DATA, &lim);
        libc::setrlimit(libc::RLIMIT_CORE, &none);
    }
    let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut out = Vec::new();
        for &link in links {
            match compile_here(expr, link) {
                Ok(insns) => {
                    out.push(0u8);
                    out.extend_from_slice(&(insns.len() as u32).to_le_bytes());
                    for i in insns {
                        out.extend_from_slice(&i.code.to_le_bytes());
                        out.push(i.jt);
                        out.push(i.jf);
                        out.extend_from_slice(&i.k.to_le_bytes());
                    }
                }
                Err(m) => {
                    let m = m.as_bytes();
                    out.push(1u8);
                    out.extend_from_slice(&(m.len() as u32).to_le_bytes());
                    out.extend_from_slice(m);
                }
            }
        }
        write_all(&wr, &out)
    }));
    let code = if matches!(ok, Ok(true)) { 0 } else { 1 };
    // SAFETY: _exit ends the child at once, without running the parent's
    // atexit handlers or destructors (which belong to the parent).
    unsafe { libc::_exit(code) }
}

fn write_all(fd: &OwnedFd, mut b: &[u8]) -> bool {
    use std::os::fd::AsRawFd;
    while !b.is_empty() {
        // SAFETY: `b` is a valid readable slice of `b.len()` bytes.
        let n = unsafe { libc::write(fd.as_raw_fd(), b.as_ptr().cast(), b.len()) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        b = &b[n as usize..];
    }
    true
}

/// Compile in this process (the child's body).
fn compile_here(expr: &str, link: Link) -> Result<Vec<Insn>, String> {
    let lt = match link {
        Link::Ethernet => pcap::Linktype::ETHERNET,
        // DLT_RAW as Linux's libpcap numbers it.
        Link::RawIp => pcap::Linktype(12),
    };
    let cap = pcap::Capture::dead(lt).map_err(|e| format!("libpcap: {e}"))?;
    let prog = cap.compile(expr, true).map_err(|e| match e {
        pcap::Error::PcapError(m) => m,
        e => e.to_string(),
    })?;
    // The pcap crate shows an instruction only as "code jt jf k".
    prog.get_instructions()
        .iter()
        .map(|i| {
            let s = i.to_string();
            let f: Vec<u64> = s.split(' ').filter_map(|x| x.parse().ok()).collect();
            match f[..] {
                [code, jt, jf, k]
                    if code <= 0xffff && jt <= 0xff && jf <= 0xff && k <= 0xffff_ffff =>
                {
                    Ok(Insn {
                        code: code as u16,
                        jt: jt as u8,
                        jf: jf as u8,
                        k: k as u32,
                    })
                }
                _ => Err(format!(
                    "libpcap gave an instruction this build cannot read: {s:?}"
                )),
            }
        })
        .collect()
}

/// Read the child's output until EOF or the deadline.
fn collect(rd: OwnedFd, deadline: Instant, timeout: Duration) -> Result<Vec<u8>, String> {
    use std::os::fd::AsRawFd;
    let fd = rd.as_raw_fd();
    let mut file = std::fs::File::from(rd);
    let mut out = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "compiling took longer than the time limit ({timeout:?}): libpcap's optimizer is superlinear in the expression's size; shorten or split the expression"
            ));
        }
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd for the duration of the call.
        let r = unsafe { libc::poll(&mut p, 1, ms) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("waiting for the compiler: {e}"));
        }
        if r == 0 {
            continue;
        }
        match file.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => {
                if out.len() + n > 16 << 20 {
                    return Err("the compiler's output is over 16 MiB".into());
                }
                out.extend_from_slice(&buf[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading the compiler's output: {e}")),
        }
    }
}

/// Wait for the child; `None` when it was reaped elsewhere.
fn reap(pid: libc::pid_t) -> Option<i32> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid int for waitpid to write.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Some(status);
        }
        if r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return None;
    }
}

/// The process's data size now (`VmData`), what the child starts from.
fn data_size() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmData:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGKILL => "SIGKILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        _ => "signal",
    }
}

/// The child's output, one result per link.
fn decode(mut b: &[u8], memory_mib: usize) -> Result<Vec<Result<Program, String>>, String> {
    let bad = || "the compiler's output is cut short".to_string();
    let mut out = Vec::new();
    while let Some((&tag, rest)) = b.split_first() {
        let n = rest.get(..4).ok_or_else(bad)?;
        let n = u32::from_le_bytes(n.try_into().map_err(|_| bad())?) as usize;
        b = &rest[4..];
        if tag == 0 {
            let bytes = b.get(..n.checked_mul(8).ok_or_else(bad)?).ok_or_else(bad)?;
            let insns = bytes
                .chunks_exact(8)
                .map(|c| Insn {
                    code: u16::from_le_bytes([c[0], c[1]]),
                    jt: c[2],
                    jf: c[3],
                    k: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
                })
                .collect();
            b = &b[n * 8..];
            out.push(Program::new(insns));
        } else {
            let m = String::from_utf8_lossy(b.get(..n).ok_or_else(bad)?).into_owned();
            out.push(Err(if m.contains("malloc") || m.contains("memory") {
                format!("{m}: the compiler ran out of memory (its limit is {memory_mib} MiB above the process's own)")
            } else {
                m
            }));
            b = &b[n..];
        }
    }
    Ok(out)
}
