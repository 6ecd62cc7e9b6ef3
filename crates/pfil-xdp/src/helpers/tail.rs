//! `bpf_tail_call`: the program ends and another of its object runs on
//! the packet as it is, as the kernel's tail call jumps into it.

use pfil_ebpf::{Env, Fault};

use super::{bad, state, RunState};
use crate::maps::MapType;

/// The kernel's `MAX_TAIL_CALL_CNT`: a run takes at most 33 tail calls;
/// the 34th fails (the program goes on after it).
pub const MAX_TAIL_CALLS: u32 = 33;

/// `bpf_tail_call(ctx, prog_array, index)`. As the kernel's x86-64 JIT
/// does it: an index past the array fails; else the run's count of tail
/// calls goes up (at the limit it fails), then an empty slot fails. A
/// tail call that fails returns and the program goes on (the verifier
/// leaves r0 unset after it). One that succeeds stops the program
/// ([`Fault::TailCall`], which is no fault: the loader runs the target
/// next, [`crate::XdpProgram`]).
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
    if st.tail_calls >= MAX_TAIL_CALLS {
        return 0;
    }
    st.tail_calls += 1;
    let runnable = target
        .checked_sub(1)
        .is_some_and(|t| st.tail_targets.get(t as usize) == Some(&true));
    // The count went up: the run ends Full, where the loader sets it back
    // to 0 for the next.
    env.read_back();
    if runnable {
        env.fault(Fault::TailCall {
            pc: 0,
            target: target - 1,
        });
    }
    0
}
