//! The JIT's executable code: an anonymous mapping, written once and
//! made read-execute, and the call into it.

use crate::env::Env;
use crate::Fault;

/// Executable code: mapped read-write, filled, then made read-execute.
pub(crate) struct JitCode {
    ptr: *mut u8,
    len: usize,
    /// Whether a run needs nothing but the packet (`Program::run_xdp`'s
    /// short path): no budget, no `Env::last`, no context field. The
    /// only `bool`: an `Option<JitCode>` holding plain code is one byte
    /// test.
    pub(crate) plain: bool,
}

// SAFETY: the mapping is immutable (read-execute) once built and owned by
// this value alone; running it from several threads at once is fine (each
// run has its own Env).
unsafe impl Send for JitCode {}
// SAFETY: as above.
unsafe impl Sync for JitCode {}

impl Drop for JitCode {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are the mapping made in `JitCode::new`,
        // unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

impl JitCode {
    pub(super) fn new(code: &[u8]) -> Result<JitCode, String> {
        let len = code.len().max(1);
        // SAFETY: an anonymous private mapping; the result is checked.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!(
                "mmap of {len} bytes for the JIT failed: {}",
                std::io::Error::last_os_error()
            ));
        }
        let jit = JitCode {
            ptr: p.cast(),
            len,
            plain: false,
        };
        // SAFETY: the mapping is `len >= code.len()` bytes, writable, ours.
        unsafe { core::ptr::copy_nonoverlapping(code.as_ptr(), jit.ptr, code.len()) };
        // SAFETY: the same mapping, now made read-execute (W^X).
        if unsafe { libc::mprotect(p, len, libc::PROT_READ | libc::PROT_EXEC) } != 0 {
            return Err(format!(
                "mprotect of the JIT code failed: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(jit)
    }

    /// The machine code.
    pub(crate) fn code(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes, alive with `self`,
        // never written after `new`.
        unsafe { core::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Calls the code with r1-r3 = `args`, returning r0; a fault it
    /// met is left pending in the `Env` (`Env::take_fault`). Code with
    /// loops needs the budget written first.
    #[inline]
    pub(crate) fn call(&self, env: &mut Env, args: [u64; 3]) -> u64 {
        let top = env.stack_top();
        self.call_at(env, top, args)
    }

    /// [`JitCode::call`] with the stack top already read from `env`
    /// (`top` must be `env.stack_top()`).
    #[inline(always)]
    pub(crate) fn call_at(&self, env: &mut Env, top: u64, args: [u64; 3]) -> u64 {
        debug_assert_eq!(top, env.stack_top());
        let env: *mut Env = env;
        let r0: u64;
        // SAFETY: `ptr` is the start of code built by `compile`: the SysV
        // convention for (r1, r2, r3, stack top in r8) -> r0 with the Env
        // in r12, except that it may change r12, r13 and r14 (r7, r8): declared
        // clobbered here, the caller saves them once instead of the code
        // every run (r15, r9, is saved by code that uses it, leaving the
        // caller a third register kept across the call). The code
        // only touches memory the verifier or the inline and slow-path
        // checks proved inside the run's regions, calls only the
        // program's helpers with the Env pointer, and returns; a loop's
        // budget stops it (written by `run` for such code). The stack is
        // ABI-aligned at the call (no `nostack`).
        unsafe {
            core::arch::asm!(
                "call {f}",
                f = in(reg) self.ptr,
                in("rdi") args[0],
                in("rsi") args[1],
                in("rdx") args[2],
                in("r8") top,
                inout("r12") env => _,
                lateout("rax") r0,
                out("r13") _,
                out("r14") _,
                clobber_abi("C"),
            );
        }
        r0
    }

    /// Size of the machine code in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Runs the code with r1-r3 = `args`; `budget` is charged at loop
    /// heads (`None`: code without any).
    #[inline]
    pub(crate) fn run(
        &self,
        env: &mut Env,
        args: [u64; 3],
        budget: Option<u64>,
    ) -> Result<u64, Fault> {
        if let Some(b) = budget {
            env.budget = b;
        }
        let r0 = self.call(env, args);
        if env.flags[crate::env::FAULT] == 0 {
            return Ok(r0);
        }
        match env.take_fault() {
            Some(f) => Err(f),
            None => Ok(r0),
        }
    }
}
