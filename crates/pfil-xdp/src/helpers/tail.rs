//! `bpf_tail_call`: the program ends and another of its object runs on
//! the packet as it is, as the kernel's tail call jumps into it.

use pfil_ebpf::{Env, Fault};

use super::{bad, state, RunState};
use crate::maps::MapType;

/// The kernel's `MAX_TAIL_CALL_CNT`: a run takes at most 33 tail calls;
/// the 34th fails (the program goes on after it).
pub const MAX_TAIL_CALLS: u32 = 33;

/// `bpf_tail_call(ctx, prog_array, index)`. As the x86-64 JIT of the
/// kernel the oracle runs (6.18) does it: an index past the array fails,
/// an empty slot fails, then the run's count of tail calls goes up (at
/// the limit, 33 taken, it fails): a call into an empty slot is not
/// counted. A tail call that fails returns and the program goes on (the
/// verifier leaves r0 unset after it). One that succeeds stops the
/// program ([`Fault::TailCall`], which is no fault: the loader runs the
/// target next, [`crate::XdpProgram`]).
pub(super) unsafe extern "C" fn tail_call(
    _ctx: u64,
    map: u64,
    index: u64,
    _: u64,
    _: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    let st = state(env) as *mut RunState;
    // SAFETY: RunState is not the Env (the loader's, behind `Env::user`);
    // the borrow lasts this call.
    let st = unsafe { &mut *st };
    let Some(m) = st.map(map) else {
        return bad(env, "not a map of this program");
    };
    if m.kind() != MapType::ProgArray {
        return bad(env, "bpf_tail_call on a map that is not a prog_array");
    }
    // The index is a u32 (the kernel compares its low 32 bits).
    let Some(target) = m.tail_target(index as u32) else {
        return 0;
    };
    // An empty slot (a program that did not load is never set).
    let runnable = target
        .checked_sub(1)
        .is_some_and(|t| st.tail_targets.get(t as usize) == Some(&true));
    if !runnable || st.tail_calls >= MAX_TAIL_CALLS {
        return 0;
    }
    st.tail_calls += 1;
    // The run ends Full, where the loader runs the target and sets the
    // count back to 0 for the next run.
    env.fault(Fault::TailCall {
        pc: 0,
        target: target - 1,
    });
    0
}
