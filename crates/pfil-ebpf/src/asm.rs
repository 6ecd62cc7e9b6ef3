//! A small assembler for the text syntax of ubpf and the `bpf_conformance`
//! suite (`mov %r0, 1`, `ldxw %r2, [%r1+4]`, `jeq %r1, 0x10, +2`,
//! `lock fetch add [%r10-8], %r1`, labels `name:`, comments `# ...`).
//!
//! It exists for tests and for writing small programs by hand.

use crate::insn::*;

/// An assembly error: the line (1-based) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct AsmError {
    /// The line, counting from 1.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

fn num(s: &str) -> Option<i64> {
    let (neg, t) = match s.strip_prefix('-') {
        Some(t) => (true, t),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok()? as i64,
        None => t.parse::<u64>().ok()? as i64,
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

fn imm32(s: &str) -> Result<i32, String> {
    let v = num(s).ok_or_else(|| format!("bad number {s:?}"))?;
    if v < i32::MIN as i64 || v > u32::MAX as i64 {
        return Err(format!("immediate {s} out of 32-bit range"));
    }
    Ok(v as i32)
}

fn reg(s: &str) -> Result<u8, String> {
    s.strip_prefix("%r")
        .and_then(|n| n.parse::<u8>().ok())
        .filter(|&r| r <= 10)
        .ok_or_else(|| format!("bad register {s:?}"))
}

/// `[%rN+off]` or `[%rN-off]` or `[%rN]`.
fn mem(s: &str) -> Result<(u8, i16), String> {
    let inner = s
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .ok_or_else(|| format!("bad memory operand {s:?}"))?;
    match inner.find(['+', '-']) {
        None => Ok((reg(inner)?, 0)),
        Some(i) => {
            let off = num(&inner[i..]).filter(|v| *v >= i16::MIN as i64 && *v <= i16::MAX as i64);
            Ok((
                reg(&inner[..i])?,
                off.ok_or_else(|| format!("bad offset in {s:?}"))? as i16,
            ))
        }
    }
}

const ALU: &[(&str, u8)] = &[
    ("add", BPF_ADD),
    ("sub", BPF_SUB),
    ("mul", BPF_MUL),
    ("div", BPF_DIV),
    ("sdiv", BPF_DIV),
    ("or", BPF_OR),
    ("and", BPF_AND),
    ("lsh", BPF_LSH),
    ("rsh", BPF_RSH),
    ("neg", BPF_NEG),
    ("mod", BPF_MOD),
    ("smod", BPF_MOD),
    ("xor", BPF_XOR),
    ("mov", BPF_MOV),
    ("arsh", BPF_ARSH),
];

const JMP: &[(&str, u8)] = &[
    ("jeq", BPF_JEQ),
    ("jgt", BPF_JGT),
    ("jge", BPF_JGE),
    ("jset", BPF_JSET),
    ("jne", BPF_JNE),
    ("jsgt", BPF_JSGT),
    ("jsge", BPF_JSGE),
    ("jlt", BPF_JLT),
    ("jle", BPF_JLE),
    ("jslt", BPF_JSLT),
    ("jsle", BPF_JSLE),
];

fn size_of(suffix: &str) -> Option<u8> {
    Some(match suffix {
        "b" => BPF_B,
        "h" => BPF_H,
        "w" => BPF_W,
        "dw" => BPF_DW,
        _ => return None,
    })
}

/// A jump target still to be resolved: (instruction index, label, whether
/// it goes into `imm` rather than `off`).
type Fixup = (usize, String, bool, usize);

/// Assembles `text` into instructions.
///
/// # Errors
///
/// The first line that does not assemble, and why.
pub fn assemble(text: &str) -> Result<Vec<Insn>, AsmError> {
    let mut out: Vec<Insn> = Vec::new();
    let mut labels: Vec<(String, usize)> = Vec::new();
    let mut fixups: Vec<Fixup> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let err = |reason: String| AsmError {
            line: n + 1,
            reason,
        };
        let mut words = line.splitn(2, char::is_whitespace);
        let mn = words.next().unwrap_or("");
        if let Some(label) = mn.strip_suffix(':') {
            labels.push((label.to_string(), out.len()));
            continue;
        }
        if mn == "exit" && !labels.iter().any(|(l, _)| l == "exit") {
            labels.push(("exit".into(), out.len()));
        }
        let ops: Vec<&str> = words
            .next()
            .unwrap_or("")
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .collect();
        let at = out.len();
        let mut target = |s: &str, imm: bool| -> Result<i32, String> {
            match num(s) {
                Some(v) => Ok(v as i32),
                None => {
                    fixups.push((at, s.to_string(), imm, n + 1));
                    Ok(0)
                }
            }
        };
        let insn = (|| -> Result<Vec<Insn>, String> {
            let op = |i: usize| {
                ops.get(i)
                    .copied()
                    .ok_or_else(|| format!("{mn}: missing operand {}", i + 1))
            };
            if mn == "exit" {
                return Ok(vec![Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)]);
            }
            if mn == "lddw" {
                let v = num(op(1)?).ok_or("bad 64-bit immediate")? as u64;
                return Ok(vec![
                    Insn::new(LDDW, reg(op(0)?)?, 0, 0, v as u32 as i32),
                    Insn::new(0, 0, 0, 0, (v >> 32) as u32 as i32),
                ]);
            }
            if mn == "ja" || mn == "ja32" {
                return Ok(vec![if mn == "ja" {
                    Insn::new(BPF_JMP | BPF_JA, 0, 0, target(op(0)?, false)? as i16, 0)
                } else {
                    Insn::new(BPF_JMP32 | BPF_JA, 0, 0, 0, target(op(0)?, true)?)
                }]);
            }
            if mn == "call" {
                return Ok(vec![match (op(0)?, ops.get(1).copied()) {
                    ("local", Some(t)) => {
                        Insn::new(BPF_JMP | BPF_CALL, 0, PSEUDO_CALL, 0, target(t, true)?)
                    }
                    ("helper", Some(t)) | (t, None) if !t.starts_with('%') => {
                        Insn::new(BPF_JMP | BPF_CALL, 0, 0, 0, imm32(t)?)
                    }
                    (t, None) => Insn::new(BPF_JMP | BPF_CALL | BPF_X, reg(t)?, 0, 0, 0),
                    _ => return Err("bad call".into()),
                }]);
            }
            if mn == "lock" {
                let (fetch, rest) = if op(0)? == "fetch" {
                    (BPF_FETCH, &ops[1..])
                } else {
                    (0, &ops[..])
                };
                let name = rest.first().ok_or("lock: missing operation")?;
                let (base, size) = match name.strip_suffix("32") {
                    Some(b) => (b, BPF_W),
                    None => (*name, BPF_DW),
                };
                let imm = match base {
                    "add" => BPF_ADD as i32 | fetch,
                    "or" => BPF_OR as i32 | fetch,
                    "and" => BPF_AND as i32 | fetch,
                    "xor" => BPF_XOR as i32 | fetch,
                    "xchg" => BPF_XCHG,
                    "cmpxchg" => BPF_CMPXCHG,
                    _ => return Err(format!("unknown atomic {base}")),
                };
                let (d, off) = mem(rest.get(1).ok_or("lock: missing memory operand")?)?;
                let s = reg(rest.get(2).ok_or("lock: missing register")?)?;
                return Ok(vec![Insn::new(BPF_STX | BPF_ATOMIC | size, d, s, off, imm)]);
            }
            for (cls, pfx) in [(BPF_LDX | BPF_MEMSX, "ldxs"), (BPF_LDX | BPF_MEM, "ldx")] {
                if let Some(sz) = mn.strip_prefix(pfx).and_then(size_of) {
                    let (s, off) = mem(op(1)?)?;
                    return Ok(vec![Insn::new(cls | sz, reg(op(0)?)?, s, off, 0)]);
                }
            }
            if let Some(sz) = mn.strip_prefix("stx").and_then(size_of) {
                let (d, off) = mem(op(0)?)?;
                return Ok(vec![Insn::new(
                    BPF_STX | BPF_MEM | sz,
                    d,
                    reg(op(1)?)?,
                    off,
                    0,
                )]);
            }
            if let Some(sz) = mn.strip_prefix("st").and_then(size_of) {
                let (d, off) = mem(op(0)?)?;
                return Ok(vec![Insn::new(
                    BPF_ST | BPF_MEM | sz,
                    d,
                    0,
                    off,
                    imm32(op(1)?)?,
                )]);
            }
            for (pfx, class, src) in [
                ("be", BPF_ALU, BPF_X),
                ("le", BPF_ALU, BPF_K),
                ("bswap", BPF_ALU64, BPF_K),
                ("swap", BPF_ALU64, BPF_K),
            ] {
                if let Some(w) = mn.strip_prefix(pfx).and_then(|w| w.parse::<i32>().ok()) {
                    return Ok(vec![Insn::new(
                        class | BPF_END | src,
                        reg(op(0)?)?,
                        0,
                        0,
                        w,
                    )]);
                }
            }
            if let Some(w) = mn.strip_prefix("movsx") {
                let (from, class) = match w {
                    "832" => (8, BPF_ALU),
                    "1632" => (16, BPF_ALU),
                    "864" => (8, BPF_ALU64),
                    "1664" => (16, BPF_ALU64),
                    "3264" => (32, BPF_ALU64),
                    _ => return Err(format!("unknown {mn}")),
                };
                return Ok(vec![Insn::new(
                    class | BPF_MOV | BPF_X,
                    reg(op(0)?)?,
                    reg(op(1)?)?,
                    from,
                    0,
                )]);
            }
            let (base, wide) = match mn.strip_suffix("32") {
                Some(b) => (b, false),
                None => (mn.strip_suffix("64").unwrap_or(mn), true),
            };
            if let Some(&(_, code)) = ALU.iter().find(|(n, _)| *n == base) {
                let class = if wide { BPF_ALU64 } else { BPF_ALU };
                let off = i16::from(base == "sdiv" || base == "smod");
                let d = reg(op(0)?)?;
                return Ok(vec![match ops.get(1) {
                    None => Insn::new(class | code, d, 0, off, 0),
                    Some(s) if s.starts_with('%') => {
                        Insn::new(class | code | BPF_X, d, reg(s)?, off, 0)
                    }
                    Some(s) => Insn::new(class | code | BPF_K, d, 0, off, imm32(s)?),
                }]);
            }
            if let Some(&(_, code)) = JMP.iter().find(|(n, _)| *n == base) {
                let class = if wide { BPF_JMP } else { BPF_JMP32 };
                let d = reg(op(0)?)?;
                let t = target(op(2)?, false)? as i16;
                let b = op(1)?;
                return Ok(vec![if b.starts_with('%') {
                    Insn::new(class | code | BPF_X, d, reg(b)?, t, 0)
                } else {
                    Insn::new(class | code | BPF_K, d, 0, t, imm32(b)?)
                }]);
            }
            Err(format!("unknown mnemonic {mn:?}"))
        })()
        .map_err(err)?;
        out.extend(insn);
    }
    for (at, label, imm, line) in fixups {
        let to = labels
            .iter()
            .find(|(l, _)| *l == label)
            .map(|(_, t)| *t)
            .ok_or_else(|| AsmError {
                line,
                reason: format!("unknown label {label:?}"),
            })?;
        let rel = to as i64 - at as i64 - 1;
        if imm {
            out[at].imm = rel as i32;
        } else {
            out[at].off = i16::try_from(rel).map_err(|_| AsmError {
                line,
                reason: "jump too far".into(),
            })?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembles_every_form() {
        let p = assemble(
            "mov %r0, 1\nadd32 %r0, %r1\nlddw %r2, 0x1122334455667788\nldxh %r3, [%r1+4]\n\
             stxdw [%r10-8], %r3\nstw [%r10-16], -1\nlock fetch add32 [%r10-8], %r1\n\
             jeq %r1, 0x10, done\nbe16 %r0\nbswap64 %r0\nmovsx832 %r0, %r1\nsdiv %r0, 3\ncall local f\ndone:\nexit\nf:\nexit",
        )
        .unwrap();
        assert_eq!(p[0], Insn::new(0xb7, 0, 0, 0, 1));
        assert_eq!(p[1], Insn::new(0x0c, 0, 1, 0, 0));
        assert_eq!(
            (p[2].code, p[2].imm, p[3].imm),
            (0x18, 0x55667788, 0x11223344)
        );
        assert_eq!(p[4], Insn::new(0x69, 3, 1, 4, 0));
        assert_eq!(p[5], Insn::new(0x7b, 10, 3, -8, 0));
        assert_eq!(p[6], Insn::new(0x62, 10, 0, -16, -1));
        assert_eq!(p[7], Insn::new(0xc3, 10, 1, -8, 1));
        assert_eq!(p[8], Insn::new(0x15, 1, 0, 5, 0x10));
        assert_eq!(p[9], Insn::new(0xdc, 0, 0, 0, 16));
        assert_eq!(p[10], Insn::new(0xd7, 0, 0, 0, 64));
        assert_eq!(p[11], Insn::new(0xbc, 0, 1, 8, 0));
        assert_eq!(p[12], Insn::new(0x37, 0, 0, 1, 3));
        assert_eq!(p[13], Insn::new(0x85, 0, 1, 0, 1));
    }

    #[test]
    fn errors_name_the_line() {
        let e = assemble("mov %r0, 1\nfrob %r1\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(assemble("ja nowhere").is_err());
        assert!(assemble("mov %r11, 1").is_err());
    }
}
