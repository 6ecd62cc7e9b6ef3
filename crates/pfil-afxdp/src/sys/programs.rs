//! The XDP programs pfil loads, hand-assembled: the XSKMAP redirect,
//! the in-kernel generator's redirect and port rotation, the probe's drop.

use std::os::fd::RawFd;

/// Helper number of `bpf_map_lookup_elem`.
const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
const BPF_PSEUDO_MAP_FD: u8 = 1;
/// Helper number of `bpf_redirect_map`.
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `XDP_PASS`, the default action when the map has no socket for a queue.
const XDP_PASS: i32 = 2;
/// `XDP_DROP`.
const XDP_DROP: i32 = 1;
/// Helper number of `bpf_redirect`.
const BPF_FUNC_REDIRECT: i32 = 23;

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BpfInsn {
    code: u8,
    /// dst_reg in the low nibble, src_reg in the high nibble.
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> BpfInsn {
    BpfInsn {
        code,
        regs: (dst & 0xf) | (src << 4),
        off,
        imm,
    }
}

/// The redirect program, hand-assembled:
///
/// ```text
/// r2 = *(u32 *)(r1 + 16)          ; ctx->rx_queue_index
/// r1 = map_fd ll                  ; BPF_PSEUDO_MAP_FD
/// r3 = XDP_PASS                   ; default action if no socket for the queue
/// call bpf_redirect_map           ; helper 51
/// exit                            ; return r0
/// ```
pub(crate) fn redirect_program(map_fd: RawFd) -> [BpfInsn; 6] {
    [
        // BPF_LDX | BPF_MEM | BPF_W
        insn(0x61, 2, 1, 16, 0),
        // BPF_LD | BPF_IMM | BPF_DW, two slots
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        // BPF_ALU64 | BPF_MOV | BPF_K
        insn(0xb7, 3, 0, 0, XDP_PASS),
        // BPF_JMP | BPF_CALL
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        // BPF_JMP | BPF_EXIT
        insn(0x95, 0, 0, 0, 0),
    ]
}

/// The in-kernel generator's program, hand-assembled: every frame the
/// test run injects (its ingress is the namespace's loopback) is
/// redirected out of `ifindex`; a frame that really arrived on `ifindex`
/// passes (so the program may stay attached to `ifindex` itself, which
/// keeps it in the kernel's XDP dispatcher between runs).
///
/// ```text
/// r2 = *(u32 *)(r1 + 12)          ; ctx->ingress_ifindex
/// if r2 == ifindex goto pass
/// r1 = ifindex                    ; target interface
/// r2 = 0                          ; flags
/// call bpf_redirect               ; helper 23, returns XDP_REDIRECT
/// exit
/// pass: r0 = XDP_PASS
/// exit
/// ```
pub(crate) fn live_redirect_program(ifindex: u32) -> [BpfInsn; 8] {
    let target = ifindex as i32;
    [
        // BPF_LDX | BPF_MEM | BPF_W
        insn(0x61, 2, 1, 12, 0),
        // BPF_JMP | BPF_JEQ | BPF_K, to `pass` (4 instructions on)
        insn(0x15, 2, 0, 4, target),
        // BPF_ALU64 | BPF_MOV | BPF_K
        insn(0xb7, 1, 0, 0, target),
        insn(0xb7, 2, 0, 0, 0),
        // BPF_JMP | BPF_CALL
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT),
        // BPF_JMP | BPF_EXIT
        insn(0x95, 0, 0, 0, 0),
        insn(0xb7, 0, 0, 0, XDP_PASS),
        insn(0x95, 0, 0, 0, 0),
    ]
}

/// A tiny assembler for the programs below: instructions plus jumps to
/// named labels, resolved by [`Asm::finish`].
struct Asm {
    insns: Vec<BpfInsn>,
    labels: Vec<(&'static str, usize)>,
    jumps: Vec<(usize, &'static str)>,
}

impl Asm {
    fn new() -> Asm {
        Asm {
            insns: Vec::new(),
            labels: Vec::new(),
            jumps: Vec::new(),
        }
    }

    fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) -> &mut Asm {
        self.insns.push(insn(code, dst, src, off, imm));
        self
    }

    /// A conditional or unconditional jump to `label`.
    fn jmp(&mut self, code: u8, dst: u8, src: u8, imm: i32, label: &'static str) -> &mut Asm {
        self.jumps.push((self.insns.len(), label));
        self.op(code, dst, src, 0, imm)
    }

    fn label(&mut self, name: &'static str) -> &mut Asm {
        self.labels.push((name, self.insns.len()));
        self
    }

    /// `dst = map fd` (two slots, BPF_PSEUDO_MAP_FD).
    fn map_fd(&mut self, dst: u8, fd: RawFd) -> &mut Asm {
        self.op(0x18, dst, BPF_PSEUDO_MAP_FD, 0, fd)
            .op(0, 0, 0, 0, 0)
    }

    fn finish(mut self) -> Vec<BpfInsn> {
        for &(at, label) in &self.jumps {
            let target = self
                .labels
                .iter()
                .find(|(n, _)| *n == label)
                .map(|&(_, i)| i)
                .expect("jump to a defined label");
            self.insns[at].off = (target as isize - at as isize - 1) as i16;
        }
        self.insns
    }
}

/// The in-kernel generator's program when destination ports rotate per
/// frame, hand-assembled. Like [`live_redirect_program`], plus: a per-CPU
/// counter (`counter`, one u32) picks the next entry of `ports` (`n`
/// u32 values, each a port's two network-order bytes as stored in a u16),
/// the program writes it into the UDP header of an Ethernet + IPv4
/// (20-byte header) frame and updates the UDP checksum incrementally
/// (RFC 1624) from the port and checksum the frame holds now: the kernel
/// keeps a frame's page, with what the program wrote, between runs, so
/// nothing may assume the template's values.
///
/// ```text
///     r2 = ctx->ingress_ifindex; if r2 == ifindex goto pass
///     r7 = ctx->data; r3 = ctx->data_end
///     if r7 + 42 > r3 goto redirect          ; too short: send as is
///     r8 = lookup(counter, 0); if !r8 goto redirect
///     r9 = *r8; r1 = r9 + 1; if r1 >= n: r1 = 0; *r8 = r1
///     r0 = lookup(ports, r9); if !r0 goto redirect
///     r1 = *(u32 *)r0                       ; new port (network order)
///     r2 = *(u16 *)(r7 + 36)                ; old port
///     if r2 == r1 goto redirect
///     *(u16 *)(r7 + 36) = r1
///     r3 = *(u16 *)(r7 + 40); if r3 == 0 goto redirect   ; no checksum
///     r3 = ~r3 + ~r2 + r1, folded twice, complemented (0 -> 0xffff)
///     *(u16 *)(r7 + 40) = r3
/// redirect: return bpf_redirect(ifindex, 0)
/// pass: return XDP_PASS
/// ```
pub(crate) fn live_rotate_program(
    ifindex: u32,
    counter: RawFd,
    ports: RawFd,
    n: u32,
) -> Vec<BpfInsn> {
    let target = ifindex as i32;
    let mut a = Asm::new();
    // Frames that really arrived on the target pass.
    a.op(0x61, 2, 1, 12, 0) // r2 = ctx->ingress_ifindex
        .jmp(0x15, 2, 0, target, "pass") // if r2 == ifindex
        .op(0x61, 7, 1, 0, 0) // r7 = ctx->data
        .op(0x61, 3, 1, 4, 0) // r3 = ctx->data_end
        .op(0xbf, 4, 7, 0, 0) // r4 = r7
        .op(0x07, 4, 0, 0, 42) // r4 += 42
        .jmp(0x2d, 4, 3, 0, "redirect") // if r4 > r3
        // The counter: key 0 on the stack.
        .op(0x62, 10, 0, -4, 0) // *(u32 *)(r10 - 4) = 0
        .op(0xbf, 2, 10, 0, 0) // r2 = r10
        .op(0x07, 2, 0, 0, -4) // r2 += -4
        .map_fd(1, counter)
        .op(0x85, 0, 0, 0, BPF_FUNC_MAP_LOOKUP_ELEM)
        .jmp(0x15, 0, 0, 0, "redirect") // if r0 == NULL
        .op(0xbf, 8, 0, 0, 0) // r8 = r0
        .op(0x61, 9, 8, 0, 0) // r9 = *(u32 *)r8
        .op(0xbf, 1, 9, 0, 0) // r1 = r9
        .op(0x07, 1, 0, 0, 1) // r1 += 1
        .jmp(0xa5, 1, 0, n as i32, "store") // if r1 < n
        .op(0xb7, 1, 0, 0, 0) // r1 = 0
        .label("store")
        .op(0x63, 8, 1, 0, 0) // *(u32 *)r8 = r1
        // The port: key r9.
        .op(0x63, 10, 9, -8, 0) // *(u32 *)(r10 - 8) = r9
        .op(0xbf, 2, 10, 0, 0) // r2 = r10
        .op(0x07, 2, 0, 0, -8) // r2 += -8
        .map_fd(1, ports)
        .op(0x85, 0, 0, 0, BPF_FUNC_MAP_LOOKUP_ELEM)
        .jmp(0x15, 0, 0, 0, "redirect") // if r0 == NULL
        .op(0x61, 1, 0, 0, 0) // r1 = *(u32 *)r0
        .op(0x57, 1, 0, 0, 0xffff) // r1 &= 0xffff
        .op(0x69, 2, 7, 36, 0) // r2 = *(u16 *)(r7 + 36): UDP dst port
        .jmp(0x1d, 2, 1, 0, "redirect") // if r2 == r1
        .op(0x6b, 7, 1, 36, 0) // *(u16 *)(r7 + 36) = r1
        .op(0x69, 3, 7, 40, 0) // r3 = *(u16 *)(r7 + 40): UDP checksum
        .jmp(0x15, 3, 0, 0, "redirect") // if r3 == 0: none
        .op(0xa7, 3, 0, 0, 0xffff) // r3 ^= 0xffff (~HC)
        .op(0xa7, 2, 0, 0, 0xffff) // r2 ^= 0xffff (~m)
        .op(0x0f, 3, 2, 0, 0) // r3 += r2
        .op(0x0f, 3, 1, 0, 0) // r3 += r1 (m')
        .op(0xbf, 2, 3, 0, 0) // fold: r2 = r3
        .op(0x77, 2, 0, 0, 16) // r2 >>= 16
        .op(0x57, 3, 0, 0, 0xffff) // r3 &= 0xffff
        .op(0x0f, 3, 2, 0, 0) // r3 += r2
        .op(0xbf, 2, 3, 0, 0) // fold again
        .op(0x77, 2, 0, 0, 16)
        .op(0x57, 3, 0, 0, 0xffff)
        .op(0x0f, 3, 2, 0, 0)
        .op(0xa7, 3, 0, 0, 0xffff) // r3 ^= 0xffff (HC')
        .jmp(0x55, 3, 0, 0, "csum") // if r3 != 0
        .op(0xb7, 3, 0, 0, 0xffff) // 0 means "no checksum": send 0xffff
        .label("csum")
        .op(0x6b, 7, 3, 40, 0) // *(u16 *)(r7 + 40) = r3
        .label("redirect")
        .op(0xb7, 1, 0, 0, target) // r1 = ifindex
        .op(0xb7, 2, 0, 0, 0) // r2 = 0
        .op(0x85, 0, 0, 0, BPF_FUNC_REDIRECT)
        .op(0x95, 0, 0, 0, 0)
        .label("pass")
        .op(0xb7, 0, 0, 0, XDP_PASS)
        .op(0x95, 0, 0, 0, 0);
    a.finish()
}

/// The same incremental UDP checksum update as [`live_rotate_program`],
/// in Rust, for the tests: `csum` and the ports are the raw u16s as
/// loaded from the frame.
#[cfg(test)]
pub(crate) fn csum_replace(csum: u16, old: u16, new: u16) -> u16 {
    let mut s = u32::from(!csum) + u32::from(!old) + u32::from(new);
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    match !(s as u16) {
        0 => 0xffff,
        c => c,
    }
}

/// `r0 = XDP_DROP; exit`: what the live-frames probe runs (no frame
/// leaves the machine).
pub(crate) fn drop_program() -> [BpfInsn; 2] {
    [insn(0xb7, 0, 0, 0, XDP_DROP), insn(0x95, 0, 0, 0, 0)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_encoding() {
        let p = redirect_program(7);
        // ldxw r2, [r1+16]
        assert_eq!((p[0].code, p[0].regs, p[0].off), (0x61, 0x12, 16));
        // lddw r1, map fd (src = pseudo map fd)
        assert_eq!((p[1].code, p[1].regs, p[1].imm), (0x18, 0x11, 7));
        assert_eq!((p[3].code, p[3].regs, p[3].imm), (0xb7, 0x03, 2));
        assert_eq!((p[4].code, p[4].imm), (0x85, 51));
        assert_eq!(p[5].code, 0x95);
        assert_eq!(std::mem::size_of::<BpfInsn>(), 8);
        let p = live_redirect_program(42);
        assert_eq!((p[0].code, p[0].regs, p[0].off), (0x61, 0x12, 12));
        assert_eq!(
            (p[1].code, p[1].regs, p[1].off, p[1].imm),
            (0x15, 0x02, 4, 42)
        );
        assert_eq!((p[2].code, p[2].regs, p[2].imm), (0xb7, 0x01, 42));
        assert_eq!((p[3].code, p[3].regs, p[3].imm), (0xb7, 0x02, 0));
        assert_eq!((p[4].code, p[4].imm), (0x85, 23));
        assert_eq!(p[5].code, 0x95);
        // The jump lands on `r0 = XDP_PASS`.
        assert_eq!((p[1 + 1 + 4].code, p[6].imm), (0xb7, 2));
        assert_eq!(p[7].code, 0x95);
        let d = drop_program();
        assert_eq!((d[0].code, d[0].imm, d[1].code), (0xb7, 1, 0x95));
    }

    #[test]
    fn rotate_program_jumps_land_on_their_labels() {
        let p = live_rotate_program(7, 3, 4, 5);
        // The last two instructions are `pass`; the four before, `redirect`.
        let n = p.len();
        assert_eq!(n, 57);
        assert_eq!(
            (p[n - 2].code, p[n - 2].imm, p[n - 1].code),
            (0xb7, 2, 0x95)
        );
        assert_eq!((p[n - 6].code, p[n - 6].imm), (0xb7, 7));
        assert_eq!((p[n - 4].code, p[n - 4].imm), (0x85, 23));
        // The first jump goes to `pass`.
        assert_eq!(1 + 1 + p[1].off as usize, n - 2);
        // Every jump stays inside the program.
        for (i, x) in p.iter().enumerate() {
            if x.code & 0x07 == 0x05 && x.code != 0x85 && x.code != 0x95 {
                let t = i as isize + 1 + x.off as isize;
                assert!(t > i as isize && (t as usize) < n, "jump at {i} to {t}");
            }
        }
        // Two map loads (two slots each).
        assert_eq!(p.iter().filter(|x| x.code == 0x18).count(), 2);
    }

    #[test]
    fn the_incremental_checksum_matches_a_full_one() {
        // A UDP/IPv4 frame's checksum from scratch (etherparse) against
        // the incremental update for a new destination port.
        let build = |dport: u16| {
            let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
                .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
                .udp(9, dport);
            let mut v = Vec::new();
            b.write(&mut v, &[0xa5; 18]).unwrap();
            v
        };
        let ld = |f: &[u8], at: usize| u16::from_ne_bytes([f[at], f[at + 1]]);
        for (a, b) in [(53u16, 80u16), (9, 65535), (443, 8080), (1, 0), (0xfffe, 1)] {
            let (fa, fb) = (build(a), build(b));
            assert_eq!(
                csum_replace(ld(&fa, 40), ld(&fa, 36), ld(&fb, 36)),
                ld(&fb, 40),
                "{a} -> {b}"
            );
        }
    }
}
