//! A minimal x86-64 instruction encoder for the JIT: only the forms the
//! JIT emits, memory operands always `[base + disp32]`.

/// x86-64 register numbers.
pub(crate) mod reg {
    pub const RAX: u8 = 0;
    pub const RCX: u8 = 1;
    pub const RDX: u8 = 2;
    pub const RBX: u8 = 3;
    pub const RSP: u8 = 4;
    pub const RBP: u8 = 5;
    pub const RSI: u8 = 6;
    pub const RDI: u8 = 7;
    pub const R8: u8 = 8;
    pub const R9: u8 = 9;
    pub const R10: u8 = 10;
    pub const R11: u8 = 11;
    pub const R12: u8 = 12;
    pub const R13: u8 = 13;
    pub const R14: u8 = 14;
    pub const R15: u8 = 15;
}

/// Condition codes (the low nibble of `0F 8x`).
pub(crate) mod cc {
    pub const B: u8 = 0x2;
    pub const AE: u8 = 0x3;
    pub const E: u8 = 0x4;
    pub const NE: u8 = 0x5;
    pub const BE: u8 = 0x6;
    pub const A: u8 = 0x7;
    pub const L: u8 = 0xc;
    pub const GE: u8 = 0xd;
    pub const LE: u8 = 0xe;
    pub const G: u8 = 0xf;
}

/// Code being assembled.
#[derive(Default)]
pub(crate) struct Asm {
    pub buf: Vec<u8>,
}

impl Asm {
    #[inline]
    pub fn pos(&self) -> usize {
        self.buf.len()
    }

    #[inline]
    fn b(&mut self, x: u8) {
        self.buf.push(x);
    }

    fn d32(&mut self, x: i32) {
        self.buf.extend_from_slice(&x.to_le_bytes());
    }

    /// A REX prefix; emitted when any bit is set or `force` (byte registers).
    fn rex(&mut self, w: bool, r: u8, b: u8, force: bool) {
        let x = 0x40 | (u8::from(w) << 3) | ((r >> 3) << 2) | (b >> 3);
        if x != 0x40 || force {
            self.b(x);
        }
    }

    /// `setcc r8`: the low byte of `r` = 1 if `cc` holds, else 0 (the
    /// rest of `r` unchanged).
    pub fn setcc(&mut self, cc: u8, r: u8) {
        // A REX prefix for r4-r7 selects spl..dil, not ah..bh.
        self.rex(false, 0, r, r >= 4);
        self.b(0x0f);
        self.b(0x90 | cc);
        self.modrm_rr(0, r);
    }

    fn modrm_rr(&mut self, r: u8, rm: u8) {
        self.b(0xc0 | ((r & 7) << 3) | (rm & 7));
    }

    /// ModRM (+SIB) for `[base + disp32]`.
    fn modrm_mem(&mut self, r: u8, base: u8, disp: i32) {
        self.b(0x80 | ((r & 7) << 3) | (base & 7));
        if base & 7 == 4 {
            self.b(0x24);
        }
        self.d32(disp);
    }

    /// `op rm, r` (register form), for 0x01 add, 0x09 or, 0x21 and,
    /// 0x29 sub, 0x31 xor, 0x39 cmp, 0x85 test, 0x89 mov.
    pub fn rr(&mut self, op: u8, w: bool, rm: u8, r: u8) {
        self.rex(w, r, rm, false);
        self.b(op);
        self.modrm_rr(r, rm);
    }

    /// Group-1 `op rm, imm32` (`ext`: 0 add, 1 or, 4 and, 5 sub, 6 xor, 7 cmp).
    pub fn ri(&mut self, ext: u8, w: bool, rm: u8, imm: i32) {
        self.rex(w, 0, rm, false);
        self.b(0x81);
        self.modrm_rr(ext, rm);
        self.d32(imm);
    }

    /// `test rm, imm32`.
    pub fn test_ri(&mut self, w: bool, rm: u8, imm: i32) {
        self.rex(w, 0, rm, false);
        self.b(0xf7);
        self.modrm_rr(0, rm);
        self.d32(imm);
    }

    /// `mov r64, imm` choosing the shortest exact form.
    pub fn mov_imm64(&mut self, r: u8, v: u64) {
        if v <= u32::MAX as u64 {
            self.rex(false, 0, r, false);
            self.b(0xb8 + (r & 7));
            self.d32(v as u32 as i32);
        } else if v as i64 >= i32::MIN as i64 && v as i64 <= i32::MAX as i64 {
            self.rex(true, 0, r, false);
            self.b(0xc7);
            self.modrm_rr(0, r);
            self.d32(v as i32);
        } else {
            self.rex(true, 0, r, false);
            self.b(0xb8 + (r & 7));
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// `mov rm32, imm32` (zero-extending).
    pub fn mov_imm32(&mut self, r: u8, v: u32) {
        self.mov_imm64(r, v as u64);
    }

    /// Shift `rm` by `cl` (`ext`: 4 shl, 5 shr, 7 sar).
    pub fn shift_cl(&mut self, ext: u8, w: bool, rm: u8) {
        self.rex(w, 0, rm, false);
        self.b(0xd3);
        self.modrm_rr(ext, rm);
    }

    /// Shift `rm` by an immediate.
    pub fn shift_i(&mut self, ext: u8, w: bool, rm: u8, n: u8) {
        self.rex(w, 0, rm, false);
        self.b(0xc1);
        self.modrm_rr(ext, rm);
        self.b(n);
    }

    /// Group-3 unary on `rm` (`ext`: 3 neg, 6 div, 7 idiv).
    pub fn unary(&mut self, ext: u8, w: bool, rm: u8) {
        self.rex(w, 0, rm, false);
        self.b(0xf7);
        self.modrm_rr(ext, rm);
    }

    /// `imul r, rm`.
    pub fn imul(&mut self, w: bool, r: u8, rm: u8) {
        self.rex(w, r, rm, false);
        self.b(0x0f);
        self.b(0xaf);
        self.modrm_rr(r, rm);
    }

    /// `cqo` (w) or `cdq`.
    pub fn cqo(&mut self, w: bool) {
        if w {
            self.b(0x48);
        }
        self.b(0x99);
    }

    /// Sign-extending move from the low `bits` of `src` (8, 16, 32) into
    /// `dst` (64-bit when `w`, else 32-bit, zero-extended).
    pub fn movsx(&mut self, w: bool, dst: u8, src: u8, bits: u8) {
        match bits {
            8 | 16 => {
                self.rex(w, dst, src, bits == 8);
                self.b(0x0f);
                self.b(if bits == 8 { 0xbe } else { 0xbf });
            }
            _ => {
                self.rex(true, dst, src, false);
                self.b(0x63);
            }
        }
        self.modrm_rr(dst, src);
    }

    /// `movzx r32, r/m16`.
    pub fn movzx16(&mut self, dst: u8, src: u8) {
        self.rex(false, dst, src, false);
        self.b(0x0f);
        self.b(0xb7);
        self.modrm_rr(dst, src);
    }

    /// `bswap r` (32 or 64 bits).
    pub fn bswap(&mut self, w: bool, r: u8) {
        self.rex(w, 0, r, false);
        self.b(0x0f);
        self.b(0xc8 + (r & 7));
    }

    /// `rol r16, 8` (swap the two low bytes).
    pub fn rol16_8(&mut self, r: u8) {
        self.b(0x66);
        self.rex(false, 0, r, false);
        self.b(0xc1);
        self.modrm_rr(0, r);
        self.b(8);
    }

    /// Load `size` bytes at `[base + disp]` into `dst`, zero- or
    /// sign-extended to 64 bits.
    pub fn load(&mut self, size: usize, sx: bool, dst: u8, base: u8, disp: i32) {
        match (size, sx) {
            (1, false) => {
                self.rex(false, dst, base, false);
                self.b(0x0f);
                self.b(0xb6);
            }
            (2, false) => {
                self.rex(false, dst, base, false);
                self.b(0x0f);
                self.b(0xb7);
            }
            (4, false) => {
                self.rex(false, dst, base, false);
                self.b(0x8b);
            }
            (1, true) => {
                self.rex(true, dst, base, false);
                self.b(0x0f);
                self.b(0xbe);
            }
            (2, true) => {
                self.rex(true, dst, base, false);
                self.b(0x0f);
                self.b(0xbf);
            }
            (4, true) => {
                self.rex(true, dst, base, false);
                self.b(0x63);
            }
            _ => {
                self.rex(true, dst, base, false);
                self.b(0x8b);
            }
        }
        self.modrm_mem(dst, base, disp);
    }

    /// Store the low `size` bytes of `src` at `[base + disp]`.
    pub fn store(&mut self, size: usize, base: u8, disp: i32, src: u8) {
        if size == 2 {
            self.b(0x66);
        }
        self.rex(size == 8, src, base, size == 1);
        self.b(if size == 1 { 0x88 } else { 0x89 });
        self.modrm_mem(src, base, disp);
    }

    /// Store an immediate (sign-extended for 8 bytes) at `[base + disp]`.
    pub fn store_imm(&mut self, size: usize, base: u8, disp: i32, imm: i32) {
        if size == 2 {
            self.b(0x66);
        }
        self.rex(size == 8, 0, base, false);
        self.b(if size == 1 { 0xc6 } else { 0xc7 });
        self.modrm_mem(0, base, disp);
        match size {
            1 => self.b(imm as u8),
            2 => self.buf.extend_from_slice(&(imm as u16).to_le_bytes()),
            _ => self.d32(imm),
        }
    }

    /// `lock add [base + disp], src` or, with `fetch`, `lock xadd` (the old
    /// value into `src`); 64-bit when `w`, else 32-bit (zero-extended).
    pub fn lock_add(&mut self, w: bool, base: u8, disp: i32, src: u8, fetch: bool) {
        self.b(0xf0);
        self.rex(w, src, base, false);
        if fetch {
            self.b(0x0f);
            self.b(0xc1);
        } else {
            self.b(0x01);
        }
        self.modrm_mem(src, base, disp);
    }

    /// `lea dst, [base + disp]`.
    pub fn lea(&mut self, dst: u8, base: u8, disp: i32) {
        self.rex(true, dst, base, false);
        self.b(0x8d);
        self.modrm_mem(dst, base, disp);
    }

    /// `lea dst, [base + index * scale]` (64-bit; scale 1, 2, 4 or 8;
    /// `base` not rbp nor r13, which need a displacement here).
    pub fn lea_index(&mut self, dst: u8, base: u8, index: u8, scale: u8) {
        debug_assert!(base & 7 != 5 && index & 7 != 4);
        self.b(0x48 | ((dst >> 3) << 2) | ((index >> 3) << 1) | (base >> 3));
        self.b(0x8d);
        self.b(((dst & 7) << 3) | 4);
        self.b((scale.trailing_zeros() as u8) << 6 | ((index & 7) << 3) | (base & 7));
    }

    /// `cmp r, [base + disp]` (64-bit).
    pub fn cmp_mem(&mut self, r: u8, base: u8, disp: i32) {
        self.rex(true, r, base, false);
        self.b(0x3b);
        self.modrm_mem(r, base, disp);
    }

    /// `mov r, [base + disp]` (64-bit).
    pub fn load64(&mut self, r: u8, base: u8, disp: i32) {
        self.load(8, false, r, base, disp);
    }

    /// `add qword [base + disp], src`.
    pub fn add_mem(&mut self, base: u8, disp: i32, src: u8) {
        self.rex(true, src, base, false);
        self.b(0x01);
        self.modrm_mem(src, base, disp);
    }

    /// `add qword [base + disp], imm32` (sign-extended).
    pub fn add_mem_imm(&mut self, base: u8, disp: i32, imm: i32) {
        self.rex(true, 0, base, false);
        self.b(0x81);
        self.modrm_mem(0, base, disp);
        self.d32(imm);
    }

    /// `sub qword [base + disp], imm32`.
    pub fn sub_mem_imm(&mut self, base: u8, disp: i32, imm: i32) {
        self.rex(true, 0, base, false);
        self.b(0x81);
        self.modrm_mem(5, base, disp);
        self.d32(imm);
    }

    /// `cmp byte [base + disp], imm8`.
    pub fn cmp_mem8(&mut self, base: u8, disp: i32, imm: u8) {
        self.rex(false, 0, base, false);
        self.b(0x80);
        self.modrm_mem(7, base, disp);
        self.b(imm);
    }

    pub fn push(&mut self, r: u8) {
        self.rex(false, 0, r, false);
        self.b(0x50 + (r & 7));
    }

    pub fn pop(&mut self, r: u8) {
        self.rex(false, 0, r, false);
        self.b(0x58 + (r & 7));
    }

    /// `call r`.
    pub fn call_r(&mut self, r: u8) {
        self.rex(false, 0, r, false);
        self.b(0xff);
        self.modrm_rr(2, r);
    }

    pub fn ret(&mut self) {
        self.b(0xc3);
    }

    /// `jcc rel32`; returns where the rel32 is, for `patch`.
    pub fn jcc(&mut self, cc: u8) -> usize {
        self.b(0x0f);
        self.b(0x80 | cc);
        self.d32(0);
        self.pos() - 4
    }

    /// `jmp rel32`; returns where the rel32 is.
    pub fn jmp(&mut self) -> usize {
        self.b(0xe9);
        self.d32(0);
        self.pos() - 4
    }

    /// `call rel32`; returns where the rel32 is.
    pub fn call_rel(&mut self) -> usize {
        self.b(0xe8);
        self.d32(0);
        self.pos() - 4
    }

    /// Points the rel32 at `at` to `target`.
    pub fn patch(&mut self, at: usize, target: usize) {
        let rel = (target as i64 - (at as i64 + 4)) as i32;
        self.buf[at..at + 4].copy_from_slice(&rel.to_le_bytes());
    }
}
