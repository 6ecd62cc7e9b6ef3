//! Tail calls (`bpf_tail_call`): the object's programs a prog array
//! entry may name, loaded beside the hook's program, the entries the
//! object sets, and the runs of a chain.

use std::sync::Arc;

use pfil_ebpf::{Env, Fault, Insn, LoadOptions, MapRef, RunOutcome, XdpEnd};

use crate::helpers::xdp_helpers;
use crate::object::Object;
use crate::program::used_maps;
use crate::{LoadError, Map, XdpProgram};

impl XdpProgram {
    /// The programs a tail call may run (the object's, when it has a prog
    /// array; else none): name, and whether it loaded (why not). A prog
    /// array entry `n` names the `n`-th.
    pub fn tail_programs(&self) -> impl Iterator<Item = (&str, Result<(), &str>)> {
        self.tails
            .iter()
            .map(|(n, t)| (n.as_str(), t.as_ref().map(|_| ()).map_err(String::as_str)))
    }

    /// The number a prog array entry gives program `name` (see
    /// [`tail_programs`](Self::tail_programs)).
    ///
    /// # Errors
    /// No such program, one that did not load, or an object without a
    /// prog array.
    pub fn tail_number(&self, name: &str) -> Result<u32, String> {
        if self.tails.is_empty() {
            return Err(format!(
                "the object of program {:?} has no prog_array: no tail call runs",
                self.name()
            ));
        }
        number(&self.tails, name)
    }

    /// Whether `value` (a prog array entry's 4 bytes) names a program a
    /// tail call may run.
    ///
    /// # Errors
    /// What it names instead.
    pub fn check_tail_value(&self, value: &[u8]) -> Result<(), String> {
        let n = <[u8; 4]>::try_from(value)
            .map(u32::from_le_bytes)
            .map_err(|_| format!("a prog_array value is 4 bytes, not {}", value.len()))?;
        let (name, t) = n
            .checked_sub(1)
            .and_then(|i| self.tails.get(i as usize))
            .ok_or_else(|| {
                format!(
                    "a prog_array value names a program 1-{} of the object, not {n}",
                    self.tails.len()
                )
            })?;
        t.as_ref()
            .map(|_| ())
            .map_err(|e| format!("program {n} ({name:?}) cannot be a tail call's target: {e}"))
    }

    /// The programs of a tail call chain after the first run ended in
    /// one (`o.tail_call`): each on the packet as the last left it, until
    /// one ends otherwise (the helper's count stops a chain at 33).
    pub(crate) fn run_tails(
        &self,
        env: &mut Env,
        frame: &mut [u8],
        start: usize,
        mut o: RunOutcome,
        ifindex: u32,
        queue: u32,
    ) -> Result<RunOutcome, Fault> {
        while let Some(t) = o.tail_call {
            // The helper names only programs that loaded (`tail_targets`).
            let Some((_, Ok(p))) = self.tails.get(t as usize) else {
                return Err(Fault::Helper {
                    pc: 0,
                    reason: "tail call to a program that did not load",
                });
            };
            let (meta, data, end) = (o.data_meta, o.data, o.data_end);
            if meta == data && data == start {
                // The packet where the chain found it: the target's own
                // short path (for contained code, its action alone).
                o = match p.run_xdp_quick(env, frame, data, end - data, ifindex, queue) {
                    XdpEnd::Quiet(action) => {
                        return Ok(RunOutcome {
                            action,
                            data_meta: data,
                            data,
                            data_end: end,
                            tail_call: None,
                        })
                    }
                    XdpEnd::Full(r) => r?,
                };
                continue;
            }
            o = p.run_xdp_tail(env, frame, start, (meta, data, end), ifindex, queue)?;
        }
        Ok(o)
    }
}

/// The entries `obj` sets in its prog arrays (`MapDef::tails`), each the
/// number of the program it names. One naming a program that did not
/// load is left empty, or refused if the program uses that prog array.
pub(crate) fn init_prog_arrays(
    obj: &Object,
    maps: &[Arc<Map>],
    used: &[bool],
    tails: &[(String, Result<pfil_ebpf::Program, String>)],
) -> Result<(), LoadError> {
    for ((d, m), &used) in obj.maps.iter().zip(maps).zip(used) {
        for (slot, name) in &d.tails {
            match number(tails, name) {
                Ok(n) => m
                    .update(&slot.to_le_bytes(), &n.to_le_bytes(), 0)
                    .map_err(|e| LoadError::Map(format!("map {:?}: {e}", d.name)))?,
                Err(why) if used => {
                    return Err(LoadError::Map(format!(
                        "map {:?}: slot {slot}: {why}",
                        d.name
                    )))
                }
                Err(_) => {}
            }
        }
    }
    Ok(())
}

/// The number a prog array entry gives program `name` of `tails`
/// (`XdpProgram::tails`), or why none can.
fn number(
    tails: &[(String, Result<pfil_ebpf::Program, String>)],
    name: &str,
) -> Result<u32, String> {
    match tails.iter().position(|(n, _)| n == name) {
        Some(i) => match &tails[i].1 {
            Ok(_) => Ok(i as u32 + 1),
            Err(e) => Err(format!(
                "program {name:?} cannot be a tail call's target: {e}"
            )),
        },
        None => {
            let names: Vec<&str> = tails.iter().map(|(n, _)| n.as_str()).collect();
            Err(format!(
                "no XDP program {name:?} in the object (its programs: {})",
                names.join(", ")
            ))
        }
    }
}

/// Tail call target `t` of `obj` (see `XdpProgram::tails`), verified
/// and compiled against the entry program's maps; `frags`: the entry's
/// (the kernel's prog array takes only programs alike in it).
pub(crate) fn load(
    obj: &Object,
    t: &crate::object::Program,
    frags: bool,
    (maps, refs): (&[Arc<Map>], &[MapRef]),
    opts: &LoadOptions,
) -> Result<pfil_ebpf::Program, String> {
    if t.frags != frags {
        return Err(format!(
            "{} program beside {} one: a prog array takes programs alike in \
             multi-buffer support (the kernel refuses it)",
            if t.frags {
                "an xdp.frags"
            } else {
                "a plain xdp"
            },
            if frags { "an xdp.frags" } else { "a plain xdp" },
        ));
    }
    let insns = Insn::decode_all(&t.insns).map_err(|e| e.to_string())?;
    let used = used_maps(obj, &t.name, &insns).map_err(|e| e.to_string())?;
    if let Some(m) = maps
        .iter()
        .zip(&used)
        .find_map(|(m, &u)| u.then(|| m.not_made()).flatten())
    {
        return Err(format!("a map it uses could not be made: {m}"));
    }
    let mut opts = opts.clone();
    opts.callbacks.clone_from(&t.callbacks);
    pfil_ebpf::Program::load(insns, refs, &xdp_helpers(), &opts).map_err(|e| e.to_string())
}
