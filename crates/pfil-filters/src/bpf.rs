//! `bpf`: tcpdump expressions (pcap-filter(7)) as a filter.
//!
//! The expression is compiled by libpcap itself (through the `pcap`
//! crate, on a dead handle), so it means exactly what it means to
//! tcpdump; the classic-BPF program libpcap produces is validated,
//! converted to eBPF as the kernel's `bpf_convert_filter` does
//! ([`pfil_ebpf::cbpf`]: every packet load bounds-checked, returning 0
//! beyond the bytes at hand as libpcap does) and run by the eBPF engine,
//! JIT-compiled on x86-64; shared by all workers without a lock, each
//! worker with its own engine environment (stack) in a thread-local; no
//! call into C on the datapath. An interpreter of our own (safe Rust)
//! stays as the reference and as the fallback where the engine does not
//! take the program.
//!
//! Config: `ACTION EXPRESSION`, where ACTION says what a frame that
//! *matches* gets: `drop` (`bpf:drop udp port 53`: matching frames are
//! dropped, the rest pass) or `pass` (`bpf:pass tcp port 22`: matching
//! frames pass, the rest are dropped).
//!
//! # Compiling
//!
//! libpcap's compiler is C that recurses over the expression and whose
//! optimizer takes time superlinear in its size, so it never runs in the
//! process that asks: each compile is a child process with a large stack,
//! a memory limit and a time limit ([`CompileLimits`]: by default
//! expressions up to [`MAX_EXPR_BYTES`], [`COMPILE_TIMEOUT`], at most
//! [`MAX_CONCURRENT`] at once). An expression over a limit is a clear
//! error naming it; the process that asked is unaffected.
//!
//! ```
//! use pfil_filters::{Bpf, BpfAction};
//!
//! let f = Bpf::new(BpfAction::Drop, "udp port 53").unwrap();
//! assert_eq!(f.expression(), "udp port 53");
//! let e = Bpf::new(BpfAction::Drop, "udp prot 53").unwrap_err();
//! assert!(e.contains("syntax error"), "{e}");
//! ```

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

mod sandbox;

pub use sandbox::{
    CompileLimits, COMPILE_MEMORY, COMPILE_TIMEOUT, MAX_CONCURRENT, MAX_EXPR_BYTES, STACK_BYTES,
};

use pfil::{Ctx, Filter, Packet, PacketKind, Verdict};

/// What a matching frame gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BpfAction {
    /// Matching frames are dropped; the others pass.
    Drop,
    /// Matching frames pass; the others are dropped.
    Pass,
}

/// One classic-BPF instruction (`struct bpf_insn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    /// Opcode.
    pub code: u16,
    /// Jump offset if true.
    pub jt: u8,
    /// Jump offset if false.
    pub jf: u8,
    /// Constant.
    pub k: u32,
}

/// The link layer a program is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// Ethernet frames (`DLT_EN10MB`), what tcpdump sees on a NIC.
    Ethernet,
    /// Bare IPv4 or IPv6 packets (`DLT_RAW`).
    RawIp,
}

/// A validated classic-BPF program.
#[derive(Clone)]
pub struct Program {
    insns: Box<[Insn]>,
    /// The same, decoded once: what the reference interpreter runs.
    ops: Box<[Op]>,
    /// The same, converted to eBPF and loaded (JIT-compiled on x86-64):
    /// what [`Program::run`] runs. `None` if the engine refused it (a
    /// program whose eBPF form needs jumps too long), then the
    /// interpreter runs it.
    engine: Option<Arc<pfil_ebpf::Program>>,
}

impl PartialEq for Program {
    fn eq(&self, other: &Program) -> bool {
        self.insns == other.insns
    }
}

impl Eq for Program {}

thread_local! {
    /// Each worker's engine environment (its eBPF stack), made on first use.
    static ENV: RefCell<Option<pfil_ebpf::Env>> = const { RefCell::new(None) };
}

/// `f` with this thread's engine environment (made on first use).
#[inline]
fn with_env<R>(f: impl FnOnce(&mut pfil_ebpf::Env) -> R) -> R {
    ENV.with(|env| {
        let mut env = env.borrow_mut();
        f(env.get_or_insert_with(pfil_ebpf::Env::without_regions))
    })
}

/// Converts and loads a validated program on the eBPF engine.
fn engine(insns: &[Insn]) -> Option<Arc<pfil_ebpf::Program>> {
    let classic: Vec<pfil_ebpf::cbpf::CInsn> = insns
        .iter()
        .map(|i| pfil_ebpf::cbpf::CInsn {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect();
    let ebpf = pfil_ebpf::cbpf::convert(&classic).ok()?;
    let mut opts = pfil_ebpf::LoadOptions::default();
    opts.entry_args = 3;
    opts.xdp_ctx = false;
    opts.packet_args = true;
    pfil_ebpf::Program::load(ebpf, &[], &pfil_ebpf::Helpers::new(), &opts)
        .ok()
        .map(Arc::new)
}

/// A validated instruction, decoded: one dense `match` per step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    LdAbsW(u32),
    LdAbsH(u32),
    LdAbsB(u32),
    LdIndW(u32),
    LdIndH(u32),
    LdIndB(u32),
    LdLen,
    LdImm(u32),
    LdMem(u8),
    LdxImm(u32),
    LdxLen,
    LdxMem(u8),
    LdxMsh(u32),
    St(u8),
    Stx(u8),
    Alu(u16, u32),
    AluX(u16),
    Neg,
    Ja(u32),
    /// Conditional jump: operation, constant (or X), targets.
    Jk(u16, u32, u8, u8),
    Jx(u16, u8, u8),
    RetK(u32),
    RetA,
    Tax,
    Txa,
}

fn decode(i: &Insn) -> Op {
    let (c, k) = (i.code, i.k);
    match class(c) {
        LD => match (mode(c), size(c)) {
            (ABS, W) => Op::LdAbsW(k),
            (ABS, H) => Op::LdAbsH(k),
            (ABS, _) => Op::LdAbsB(k),
            (IND, W) => Op::LdIndW(k),
            (IND, H) => Op::LdIndH(k),
            (IND, _) => Op::LdIndB(k),
            (LEN, _) => Op::LdLen,
            (MEM, _) => Op::LdMem(k as u8),
            _ => Op::LdImm(k),
        },
        LDX => match mode(c) {
            LEN => Op::LdxLen,
            MEM => Op::LdxMem(k as u8),
            MSH => Op::LdxMsh(k),
            _ => Op::LdxImm(k),
        },
        ST => Op::St(k as u8),
        STX => Op::Stx(k as u8),
        ALU => match (op(c), src(c)) {
            (NEG, _) => Op::Neg,
            (o, X) => Op::AluX(o),
            (o, _) => Op::Alu(o, k),
        },
        JMP => match (op(c), src(c)) {
            (JA, _) => Op::Ja(k),
            (o, X) => Op::Jx(o, i.jt, i.jf),
            (o, _) => Op::Jk(o, k, i.jt, i.jf),
        },
        RET => {
            if c & RVAL_A != 0 {
                Op::RetA
            } else {
                Op::RetK(k)
            }
        }
        _ => {
            if c & TXA != 0 {
                Op::Txa
            } else {
                Op::Tax
            }
        }
    }
}

#[inline(always)]
fn alu(o: u16, a: u32, v: u32) -> Option<u32> {
    Some(match o {
        ADD => a.wrapping_add(v),
        SUB => a.wrapping_sub(v),
        MUL => a.wrapping_mul(v),
        DIV => a.checked_div(v)?,
        MOD => a.checked_rem(v)?,
        OR => a | v,
        AND => a & v,
        LSH => a.checked_shl(v).unwrap_or(0),
        RSH => a.checked_shr(v).unwrap_or(0),
        _ => a ^ v,
    })
}

#[inline(always)]
fn jump(o: u16, a: u32, v: u32) -> bool {
    match o {
        JEQ => a == v,
        JGT => a > v,
        JGE => a >= v,
        _ => a & v != 0,
    }
}

#[inline(always)]
fn be32(p: &[u8], at: usize) -> Option<u32> {
    let b = p.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

#[inline(always)]
fn be16(p: &[u8], at: usize) -> Option<u32> {
    let b = p.get(at..at.checked_add(2)?)?;
    Some(u32::from(u16::from_be_bytes([b[0], b[1]])))
}

#[inline(always)]
fn byte(p: &[u8], at: usize) -> Option<u32> {
    p.get(at).map(|&b| u32::from(b))
}

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Program({} instructions)", self.insns.len())
    }
}

// Opcode fields (bpf.h).
const fn class(c: u16) -> u16 {
    c & 0x07
}
const fn size(c: u16) -> u16 {
    c & 0x18
}
const fn mode(c: u16) -> u16 {
    c & 0xe0
}
const fn op(c: u16) -> u16 {
    c & 0xf0
}
const fn src(c: u16) -> u16 {
    c & 0x08
}
const LD: u16 = 0x00;
const LDX: u16 = 0x01;
const ST: u16 = 0x02;
const STX: u16 = 0x03;
const ALU: u16 = 0x04;
const JMP: u16 = 0x05;
const RET: u16 = 0x06;
const W: u16 = 0x00;
const H: u16 = 0x08;
const B: u16 = 0x10;
const IMM: u16 = 0x00;
const ABS: u16 = 0x20;
const IND: u16 = 0x40;
const MEM: u16 = 0x60;
const LEN: u16 = 0x80;
const MSH: u16 = 0xa0;
const ADD: u16 = 0x00;
const SUB: u16 = 0x10;
const MUL: u16 = 0x20;
const DIV: u16 = 0x30;
const OR: u16 = 0x40;
const AND: u16 = 0x50;
const LSH: u16 = 0x60;
const RSH: u16 = 0x70;
const NEG: u16 = 0x80;
const MOD: u16 = 0x90;
const XOR: u16 = 0xa0;
const JA: u16 = 0x00;
const JEQ: u16 = 0x10;
const JGT: u16 = 0x20;
const JGE: u16 = 0x30;
const JSET: u16 = 0x40;
const K: u16 = 0x00;
const X: u16 = 0x08;
const RVAL_A: u16 = 0x10;
const TAX: u16 = 0x00;
const TXA: u16 = 0x80;
/// Scratch memory words.
const MEMWORDS: usize = 16;
/// Longest program accepted (the kernel's BPF_MAXINSNS).
pub const MAX_INSNS: usize = 4096;

impl Program {
    /// Compile a pcap-filter(7) expression with libpcap for `link`, under
    /// the default [`CompileLimits`] (in a child process: see
    /// [compiling](crate::bpf#compiling)).
    ///
    /// # Errors
    /// libpcap's message as it gives it (e.g. `syntax error`), a program
    /// that does not validate, or a limit that was reached (the length,
    /// the time, the compiler's memory or stack), named.
    pub fn compile(expr: &str, link: Link) -> Result<Program, String> {
        Program::compile_with(expr, link, &CompileLimits::default())
    }

    /// [`Program::compile`] under other limits.
    ///
    /// # Errors
    /// As [`Program::compile`].
    pub fn compile_with(expr: &str, link: Link, limits: &CompileLimits) -> Result<Program, String> {
        sandbox::compile(expr, &[link], limits)?
            .pop()
            .unwrap_or_else(|| Err("the compiler gave no program".into()))
    }

    /// A program from instructions, validated as libpcap's
    /// `bpf_validate` and the kernel do: every opcode known, jumps
    /// forward and inside the program, scratch memory indexes below 16,
    /// no division by a constant zero, and a return at the end.
    ///
    /// # Errors
    /// What is wrong and at which instruction.
    pub fn new(insns: Vec<Insn>) -> Result<Program, String> {
        let n = insns.len();
        if n == 0 || n > MAX_INSNS {
            return Err(format!(
                "a program has 1 to {MAX_INSNS} instructions, not {n}"
            ));
        }
        for (pc, i) in insns.iter().enumerate() {
            let bad = |what: &str| Err(format!("instruction {pc} ({:#06x}): {what}", i.code));
            let c = i.code;
            let rest = (n - pc - 1) as u64;
            match class(c) {
                LD | LDX => {
                    let known = matches!(
                        (class(c), mode(c), size(c)),
                        (LD, ABS | IND, W | H | B) | (LD | LDX, IMM | LEN | MEM, W) | (LDX, MSH, B)
                    );
                    if !known || c & 0xff00 != 0 {
                        return bad("unknown load");
                    }
                    if mode(c) == MEM && i.k as usize >= MEMWORDS {
                        return bad("scratch index out of range");
                    }
                }
                ST | STX => {
                    if c & !0x07 != 0 {
                        return bad("unknown store");
                    }
                    if i.k as usize >= MEMWORDS {
                        return bad("scratch index out of range");
                    }
                }
                ALU => {
                    if !matches!(
                        op(c),
                        ADD | SUB | MUL | DIV | OR | AND | LSH | RSH | NEG | MOD | XOR
                    ) || c & 0xff00 != 0
                    {
                        return bad("unknown ALU operation");
                    }
                    if src(c) == K && matches!(op(c), DIV | MOD) && i.k == 0 {
                        return bad("division by a constant zero");
                    }
                }
                JMP => match op(c) {
                    JA if (i.k as u64) < rest => {}
                    JEQ | JGT | JGE | JSET if u64::from(i.jt) < rest && u64::from(i.jf) < rest => {}
                    JA | JEQ | JGT | JGE | JSET => return bad("jump out of the program"),
                    _ => return bad("unknown jump"),
                },
                RET => {
                    if !matches!(c & !0x07, K | RVAL_A) {
                        return bad("unknown return");
                    }
                }
                _ => {
                    if !matches!(c & !0x07, TAX | TXA) {
                        return bad("unknown instruction");
                    }
                }
            }
        }
        if class(insns[n - 1].code) != RET {
            return Err(format!(
                "instruction {}: a program ends with a return",
                n - 1
            ));
        }
        Ok(Program {
            ops: insns.iter().map(decode).collect(),
            engine: engine(&insns),
            insns: insns.into_boxed_slice(),
        })
    }

    /// The instructions.
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// Run on a frame whose first `pkt.len()` bytes are at hand and
    /// whose length on the wire is `wirelen`: the program's return value
    /// (0: no match; tcpdump keeps frames with a nonzero value). A load
    /// beyond the bytes at hand, or a division by zero, returns 0, as in
    /// libpcap.
    #[inline]
    pub fn run(&self, pkt: &[u8], wirelen: u32) -> u32 {
        with_env(|env| self.run_in(env, pkt, wirelen))
    }

    /// [`run`](Self::run) in the engine environment `env` (the worker's:
    /// [`Bpf`]'s batch path takes it once a batch).
    #[inline]
    fn run_in(&self, env: &mut pfil_ebpf::Env, pkt: &[u8], wirelen: u32) -> u32 {
        if let Some(engine) = &self.engine {
            // The converted program checks its own loads; a fault would be
            // an engine bug, so the reference decides then.
            if let Ok(v) = engine.run_packet(env, pkt, u64::from(wirelen)) {
                return v as u32;
            }
        }
        self.run_interpreted(pkt, wirelen)
    }

    /// [`Program::run`] on the reference interpreter (not the engine).
    pub fn run_interpreted(&self, pkt: &[u8], wirelen: u32) -> u32 {
        self.exec(pkt, wirelen).unwrap_or(0)
    }

    /// The engine's machine code for this program (x86-64), for
    /// inspection (`objdump -D -b binary -m i386:x86-64`); `None` when
    /// the interpreter runs it.
    pub fn machine_code(&self) -> Option<&[u8]> {
        self.engine.as_deref().and_then(|e| e.machine_code())
    }

    /// Whether the program runs on the eBPF engine (else the interpreter).
    pub fn on_engine(&self) -> bool {
        self.engine.is_some()
    }

    /// The interpreter: `None` where libpcap returns 0 (a load beyond
    /// the bytes at hand, a division by zero).
    #[inline]
    fn exec(&self, pkt: &[u8], wirelen: u32) -> Option<u32> {
        let (mut a, mut x) = (0u32, 0u32);
        let mut m = [0u32; MEMWORDS];
        let mut pc = 0usize;
        let ind = |x: u32, k: u32| x.checked_add(k).map(|v| v as usize);
        // Validation made every jump land inside the program and every
        // program end with a return: `get` never misses (and returns 0
        // if it did).
        loop {
            let op = *self.ops.get(pc)?;
            pc += 1;
            match op {
                Op::LdAbsW(k) => a = be32(pkt, k as usize)?,
                Op::LdAbsH(k) => a = be16(pkt, k as usize)?,
                Op::LdAbsB(k) => a = byte(pkt, k as usize)?,
                Op::LdIndW(k) => a = be32(pkt, ind(x, k)?)?,
                Op::LdIndH(k) => a = be16(pkt, ind(x, k)?)?,
                Op::LdIndB(k) => a = byte(pkt, ind(x, k)?)?,
                Op::LdLen => a = wirelen,
                Op::LdImm(k) => a = k,
                Op::LdMem(i) => a = m[usize::from(i) % MEMWORDS],
                Op::LdxImm(k) => x = k,
                Op::LdxLen => x = wirelen,
                Op::LdxMem(i) => x = m[usize::from(i) % MEMWORDS],
                Op::LdxMsh(k) => x = (byte(pkt, k as usize)? & 0xf) << 2,
                Op::St(i) => m[usize::from(i) % MEMWORDS] = a,
                Op::Stx(i) => m[usize::from(i) % MEMWORDS] = x,
                Op::Alu(o, k) => a = alu(o, a, k)?,
                Op::AluX(o) => a = alu(o, a, x)?,
                Op::Neg => a = a.wrapping_neg(),
                Op::Ja(k) => pc += k as usize,
                Op::Jk(o, k, jt, jf) => pc += usize::from(if jump(o, a, k) { jt } else { jf }),
                Op::Jx(o, jt, jf) => pc += usize::from(if jump(o, a, x) { jt } else { jf }),
                Op::RetK(k) => return Some(k),
                Op::RetA => return Some(a),
                Op::Tax => x = a,
                Op::Txa => a = x,
            }
        }
    }

    /// Does the program keep this whole frame?
    pub fn matches(&self, frame: &[u8]) -> bool {
        self.run(frame, frame.len() as u32) != 0
    }
}

/// The `bpf` filter: a tcpdump expression and what matching frames get.
pub struct Bpf {
    action: BpfAction,
    expr: String,
    ethernet: Program,
    /// For IPv4/IPv6 heads; `None` when the expression needs a link
    /// layer (`ether host ...`): such packets then never match.
    raw: Option<Program>,
}

impl Bpf {
    /// Compile `expr` for Ethernet heads (and, if it can be, for bare IP
    /// heads).
    ///
    /// # Errors
    /// libpcap's message for an expression it does not take.
    pub fn new(action: BpfAction, expr: &str) -> Result<Bpf, String> {
        Bpf::with_limits(action, expr, &CompileLimits::default())
    }

    /// [`Bpf::new`] under other compile limits (both link types are
    /// compiled by one child process, within one time limit).
    ///
    /// # Errors
    /// As [`Program::compile`].
    pub fn with_limits(
        action: BpfAction,
        expr: &str,
        limits: &CompileLimits,
    ) -> Result<Bpf, String> {
        let mut both = sandbox::compile(expr, &[Link::Ethernet, Link::RawIp], limits)?.into_iter();
        let ethernet = both
            .next()
            .unwrap_or_else(|| Err("the compiler gave no program".into()))?;
        let raw = both.next().and_then(Result::ok);
        Ok(Bpf {
            action,
            expr: expr.to_owned(),
            ethernet,
            raw,
        })
    }

    /// Build from a config `drop EXPR` or `pass EXPR`.
    ///
    /// # Errors
    /// What was expected, or libpcap's message.
    pub fn from_config(cfg: &str) -> Result<Bpf, String> {
        let cfg = cfg.trim();
        let (word, expr) = cfg.split_once(char::is_whitespace).unwrap_or((cfg, ""));
        let action = match word {
            "drop" => BpfAction::Drop,
            "pass" => BpfAction::Pass,
            _ => {
                return Err(format!(
                    "ACTION EXPRESSION, ACTION `drop` or `pass` (what a matching frame gets), not {word:?}"
                ))
            }
        };
        let expr = expr.trim();
        if expr.is_empty() {
            return Err(
                "an expression after the action (tcpdump's syntax, e.g. `drop udp port 53`)".into(),
            );
        }
        Bpf::new(action, expr)
            .map_err(|e| format!("EXPRESSION as tcpdump takes it; libpcap says: {e}"))
    }

    /// The expression.
    pub fn expression(&self) -> &str {
        &self.expr
    }

    /// What matching frames get.
    pub fn action(&self) -> BpfAction {
        self.action
    }

    /// The program run on frames of `kind` heads (`None`: the expression
    /// has no meaning without a link layer).
    pub fn program(&self, kind: PacketKind) -> Option<&Program> {
        match kind {
            PacketKind::Ethernet => Some(&self.ethernet),
            _ => self.raw.as_ref(),
        }
    }
}

impl fmt::Debug for Bpf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bpf")
            .field("action", &self.action)
            .field("expr", &self.expr)
            .field("ethernet", &self.ethernet)
            .finish()
    }
}

impl Bpf {
    /// The verdict of a packet whose program (if any) matched (`hit`).
    #[inline(always)]
    fn verdict(&self, hit: bool) -> Verdict {
        match (hit, self.action) {
            (true, BpfAction::Drop) | (false, BpfAction::Pass) => Verdict::Dropped,
            _ => Verdict::Pass,
        }
    }
}

impl Filter for Bpf {
    #[inline]
    fn filter(&self, pkt: &mut Packet<'_>, _ctx: &Ctx<'_>) -> Verdict {
        let hit = self
            .program(pkt.kind())
            .is_some_and(|p| p.matches(pkt.frame()));
        self.verdict(hit)
    }

    /// The worker's engine environment taken once for the batch, then
    /// each packet still passing run as [`filter`](Filter::filter) runs
    /// it.
    fn filter_batch(&self, pkts: &mut [Packet<'_>], _ctx: &Ctx<'_>) {
        // The action read once: a match drops under `drop`, a miss under
        // `pass`.
        let drop_on_match = matches!(self.action, BpfAction::Drop);
        let verdict = |hit: bool| {
            if hit == drop_on_match {
                Verdict::Dropped
            } else {
                Verdict::Pass
            }
        };
        with_env(|env| {
            // Ethernet frames through a runner where the engine sealed the
            // program (its checks made once a batch), others as `filter`.
            let ethernet = self.ethernet.engine.as_deref();
            if let Some(mut r) = ethernet.and_then(|e| e.packet_runner(&mut *env)) {
                for p in pkts.iter_mut().filter(|p| p.verdict().is_pass()) {
                    let f = p.frame();
                    let hit = match p.kind() {
                        PacketKind::Ethernet => r.run(f, u64::from(f.len() as u32)) as u32 != 0,
                        kind => self
                            .program(kind)
                            .is_some_and(|prog| prog.run_in(r.env(), f, f.len() as u32) != 0),
                    };
                    p.set_verdict(verdict(hit));
                }
                return;
            }
            for p in pkts.iter_mut().filter(|p| p.verdict().is_pass()) {
                let hit = self.program(p.kind()).is_some_and(|prog| {
                    let f = p.frame();
                    prog.run_in(env, f, f.len() as u32) != 0
                });
                p.set_verdict(verdict(hit));
            }
        })
    }

    fn batched(&self) -> bool {
        true
    }

    fn spec(&self) -> Option<String> {
        let a = match self.action {
            BpfAction::Drop => "drop",
            BpfAction::Pass => "pass",
        };
        Some(format!("bpf:{a} {}", self.expr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insn(code: u16, jt: u8, jf: u8, k: u32) -> Insn {
        Insn { code, jt, jf, k }
    }

    #[test]
    fn validation_names_the_instruction() {
        let cases = [
            (vec![], "1 to 4096 instructions"),
            (vec![insn(LD | W | ABS, 0, 0, 0)], "ends with a return"),
            (
                vec![insn(JMP | JA, 0, 0, 5), insn(RET, 0, 0, 0)],
                "instruction 0 (0x0005): jump out",
            ),
            (
                vec![insn(JMP | JEQ, 1, 0, 5), insn(RET, 0, 0, 0)],
                "jump out",
            ),
            (
                vec![insn(ST, 0, 0, 16), insn(RET, 0, 0, 0)],
                "scratch index",
            ),
            (
                vec![insn(LD | MEM, 0, 0, 99), insn(RET, 0, 0, 0)],
                "scratch index",
            ),
            (
                vec![insn(ALU | DIV | K, 0, 0, 0), insn(RET, 0, 0, 0)],
                "constant zero",
            ),
            (vec![insn(0xffff, 0, 0, 0), insn(RET, 0, 0, 0)], "unknown"),
        ];
        for (p, want) in cases {
            let e = Program::new(p.clone()).unwrap_err();
            assert!(e.contains(want), "{p:?}: {e}");
        }
    }

    #[test]
    fn loads_out_of_the_frame_and_division_by_zero_reject() {
        // ld [k]; ret a
        let p = Program::new(vec![
            insn(LD | W | ABS, 0, 0, 8),
            insn(RET | RVAL_A, 0, 0, 0),
        ])
        .unwrap();
        assert_eq!(p.run(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7], 12), 7);
        assert_eq!(p.run(&[0; 11], 11), 0, "one byte short");
        // ldx #0; ld #5; div x; ret #1
        let p = Program::new(vec![
            insn(LDX | IMM, 0, 0, 0),
            insn(LD | IMM, 0, 0, 5),
            insn(ALU | DIV | X, 0, 0, 0),
            insn(RET, 0, 0, 1),
        ])
        .unwrap();
        assert_eq!(p.run(&[], 0), 0);
        // ld ind with x + k overflowing
        let p = Program::new(vec![
            insn(LDX | IMM, 0, 0, u32::MAX),
            insn(LD | B | IND, 0, 0, 2),
            insn(RET, 0, 0, 1),
        ])
        .unwrap();
        assert_eq!(p.run(&[1, 2, 3], 3), 0);
    }

    #[test]
    fn configs_say_what_was_expected() {
        for (cfg, want) in [
            ("udp port 53", "ACTION EXPRESSION"),
            ("drop", "an expression after the action"),
            ("drop udp prot 53", "syntax error"),
            ("pass ether host 1:2:3", "libpcap says"),
        ] {
            let e = Bpf::from_config(cfg).unwrap_err();
            assert!(e.contains(want), "{cfg}: {e}");
        }
        let f = Bpf::from_config("  drop   udp port 53 ").unwrap();
        assert_eq!(f.spec().as_deref(), Some("bpf:drop udp port 53"));
        assert!(f.program(PacketKind::Ipv4).is_some());
        let f = Bpf::from_config("pass ether broadcast").unwrap();
        assert!(
            f.program(PacketKind::Ipv4).is_none(),
            "no link layer on IP heads"
        );
    }

    /// The batch path gives every packet the verdict the packet-by-packet
    /// path gives (matching, not matching, another protocol, a frame cut
    /// short), for both actions, and leaves a packet an earlier hook
    /// dropped alone (under `pass`, its frame matches: were it run, it
    /// would pass).
    #[test]
    fn a_batch_agrees_with_packet_by_packet() {
        use etherparse::PacketBuilder;
        let eth = || PacketBuilder::ethernet2([2; 6], [4; 6]);
        let udp = |dport: u16| {
            let mut v = Vec::new();
            eth()
                .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
                .udp(1000, dport)
                .write(&mut v, &[1; 8])
                .unwrap();
            v
        };
        let (udp53, udp54) = (udp(53), udp(54));
        let mut tcp53 = Vec::new();
        eth()
            .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .tcp(1000, 53, 1, 1000)
            .write(&mut tcp53, &[])
            .unwrap();
        let cut = udp53[..30].to_vec();
        let frames = [udp53.clone(), udp54, tcp53, cut, udp53];
        let ctx = Ctx::new("h", pfil::Dir::In, 0);
        for action in [BpfAction::Drop, BpfAction::Pass] {
            let f = Bpf::new(action, "udp port 53").unwrap();
            let mut one: Vec<Vec<u8>> = frames.to_vec();
            let want: Vec<Verdict> = one
                .iter_mut()
                .map(|b| f.filter(&mut Packet::new(b), &ctx))
                .collect();
            let mut many: Vec<Vec<u8>> = frames.to_vec();
            let mut batch: Vec<Packet<'_>> = many.iter_mut().map(|b| Packet::new(b)).collect();
            batch[4].set_verdict(Verdict::Dropped);
            f.filter_batch(&mut batch, &ctx);
            let got: Vec<Verdict> = batch.iter().map(|p| p.verdict()).collect();
            assert_eq!(got[..4], want[..4], "{action:?}");
            assert_eq!(got[4], Verdict::Dropped, "{action:?}: left alone");
            let hits = usize::from(action == BpfAction::Drop);
            assert_eq!(
                want.iter().filter(|v| **v == Verdict::Dropped).count(),
                if hits == 1 { 2 } else { 3 },
                "{action:?}: {want:?}"
            );
        }
    }
}
