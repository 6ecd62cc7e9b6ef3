//! `bpf_trace_printk` as the kernel does it: the format checked as
//! `bpf_bprintf_prepare` checks it (NUL-terminated within its size,
//! printable ASCII, at most three conversions of `%d %i %u %x %X` with
//! `l`/`ll`, `%c`, `%s`, `%p` and `%pI4 %pi4 %pI6 %pi6`, flags `0 + -
//! space` and a width), then written as the kernel's `vsnprintf` writes
//! it; the helper returns the length written, or `-EINVAL`.

/// Where the formatter reads what `%s` and `%pI4`... point at: the bytes
/// at an address, or `None` where the program may not read.
pub(super) trait Memory {
    /// `len` bytes at `addr`.
    fn bytes(&self, addr: u64, len: u64) -> Option<Vec<u8>>;
}

/// Longest string `%s` copies (the kernel's `MAX_BPRINTF_BUF`).
const MAX_STR: u64 = 512;

/// The widest field the kernel's `vsnprintf` pads to
/// (`FIELD_WIDTH_MAX`; a wider one is clamped to it).
const FIELD_WIDTH_MAX: usize = (1 << 23) - 1;

/// The bytes of a line the kernel keeps (`MAX_BPRINTF_BUF`, with its NUL).
const LINE_MAX: usize = 511;

/// A line being written: its first [`LINE_MAX`] bytes, and its length as
/// `vsnprintf` counts it (what the helper returns), so that a wide field
/// costs no memory.
#[derive(Default)]
pub(super) struct Line {
    bytes: Vec<u8>,
    len: usize,
}

impl Line {
    fn push(&mut self, b: u8) {
        self.extend_from_slice(&[b]);
    }

    fn extend_from_slice(&mut self, s: &[u8]) {
        let room = LINE_MAX.saturating_sub(self.bytes.len());
        self.bytes.extend_from_slice(&s[..s.len().min(room)]);
        self.len += s.len();
    }

    /// `n` bytes `b`.
    fn fill(&mut self, n: usize, b: u8) {
        let room = LINE_MAX.saturating_sub(self.bytes.len());
        self.bytes.resize(self.bytes.len() + n.min(room), b);
        self.len += n;
    }

    /// The line's length as the kernel's helper returns it.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The bytes kept (the first [`LINE_MAX`]), as the kernel logs them.
    pub(super) fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

#[derive(Default, Clone, Copy)]
struct Spec {
    zero: bool,
    left: bool,
    plus: bool,
    space: bool,
    width: usize,
}

fn pad(out: &mut Line, s: &[u8], spec: Spec) {
    let fill = spec.width.saturating_sub(s.len());
    if spec.left {
        out.extend_from_slice(s);
        out.fill(fill, b' ');
    } else {
        out.fill(fill, b' ');
        out.extend_from_slice(s);
    }
}

/// A number: its sign (or `+`/space) before zero padding.
fn number(out: &mut Line, digits: String, negative: bool, signed: bool, spec: Spec) {
    let sign: &[u8] = match (negative, signed && spec.plus, signed && spec.space) {
        (true, _, _) => b"-",
        (false, true, _) => b"+",
        (false, false, true) => b" ",
        _ => b"",
    };
    let len = sign.len() + digits.len();
    if spec.zero && !spec.left && spec.width > len {
        out.extend_from_slice(sign);
        out.fill(spec.width - len, b'0');
        out.extend_from_slice(digits.as_bytes());
    } else {
        let mut s = sign.to_vec();
        s.extend_from_slice(digits.as_bytes());
        pad(out, &s, spec);
    }
}

/// The line `fmt` (its bytes as the program gave them, `size` of them)
/// makes with `args`, or `None` where the kernel returns `-EINVAL`.
pub(super) fn format(fmt: &[u8], args: [u64; 3], mem: &dyn Memory) -> Option<Line> {
    let end = fmt.iter().position(|&b| b == 0)?;
    let fmt = &fmt[..end];
    if fmt
        .iter()
        .any(|&c| !(c.is_ascii_graphic() || c == b' ' || c.is_ascii_whitespace() || c == 0x0b))
    {
        return None;
    }
    let at = |i: usize| fmt.get(i).copied().unwrap_or(0);
    let mut out = Line::default();
    let (mut i, mut n) = (0, 0);
    while i < fmt.len() {
        let c = fmt[i];
        if c != b'%' {
            out.push(c);
            i += 1;
            continue;
        }
        if at(i + 1) == b'%' {
            out.push(b'%');
            i += 2;
            continue;
        }
        if n >= args.len() {
            return None;
        }
        let a = args[n];
        n += 1;
        i += 1;
        let mut spec = Spec::default();
        while let b'0' | b'+' | b'-' | b' ' = at(i) {
            match at(i) {
                b'0' => spec.zero = true,
                b'+' => spec.plus = true,
                b'-' => spec.left = true,
                _ => spec.space = true,
            }
            i += 1;
        }
        while at(i).is_ascii_digit() {
            spec.width = (spec.width * 10 + usize::from(at(i) - b'0')).min(FIELD_WIDTH_MAX);
            i += 1;
        }
        match at(i) {
            b'p' => {
                let (t, v) = (at(i + 1), at(i + 2));
                if (t == b'k' || t == b'u') && v == b's' {
                    i += 3;
                    pad(&mut out, &string(mem, a), spec);
                } else if t == 0 || t.is_ascii_whitespace() || t.is_ascii_punctuation() {
                    i += 1;
                    pointer(&mut out, a, spec);
                } else if matches!(t, b'K' | b'x' | b's' | b'S' | b'B') {
                    i += 2;
                    pointer(&mut out, a, spec);
                } else if matches!(t, b'i' | b'I') && matches!(v, b'4' | b'6') {
                    i += 3;
                    let s = address(mem, a, t == b'I', v == b'4');
                    pad(&mut out, s.as_bytes(), spec);
                } else {
                    return None;
                }
            }
            b's' => {
                i += 1;
                pad(&mut out, &string(mem, a), spec);
            }
            b'c' => {
                i += 1;
                pad(&mut out, &[a as u8], spec);
            }
            _ => {
                let mut long = 0;
                while at(i) == b'l' && long < 2 {
                    long += 1;
                    i += 1;
                }
                let v = if long == 0 { a & 0xffff_ffff } else { a };
                match at(i) {
                    b'd' | b'i' => {
                        let s = if long == 0 {
                            i64::from(v as u32 as i32)
                        } else {
                            v as i64
                        };
                        number(&mut out, s.unsigned_abs().to_string(), s < 0, true, spec);
                    }
                    b'u' => number(&mut out, v.to_string(), false, false, spec),
                    b'x' => number(&mut out, format!("{v:x}"), false, false, spec),
                    b'X' => number(&mut out, format!("{v:X}"), false, false, spec),
                    _ => return None,
                }
                i += 1;
            }
        }
    }
    Some(out)
}

/// `%p` and its kinds: 16 hex digits (the kernel prints a hashed or a
/// raw address, a null one too: its length, not its value).
fn pointer(out: &mut Line, a: u64, spec: Spec) {
    pad(out, format!("{a:016x}").as_bytes(), spec);
}

/// The NUL-terminated string at `a`, at most [`MAX_STR`] bytes; empty
/// where it cannot be read (the kernel's copy fails whole).
fn string(mem: &dyn Memory, a: u64) -> Vec<u8> {
    let mut s = Vec::new();
    for k in 0..MAX_STR - 1 {
        match mem.bytes(a.wrapping_add(k), 1) {
            Some(b) if b[0] != 0 => s.push(b[0]),
            Some(_) => return s,
            None => return Vec::new(),
        }
    }
    s
}

/// `%pI4`/`%pi4` (`I`: plain, `i`: each byte three digits) and
/// `%pI6`/`%pi6` (`I`: eight groups of four hex digits with colons, `i`:
/// 32 hex digits) of the address at `a`; zeros where it cannot be read.
fn address(mem: &dyn Memory, a: u64, plain: bool, v4: bool) -> String {
    let n = if v4 { 4 } else { 16 };
    let b = mem.bytes(a, n).unwrap_or_else(|| vec![0; n as usize]);
    match (v4, plain) {
        (true, true) => format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3]),
        (true, false) => format!("{:03}.{:03}.{:03}.{:03}", b[0], b[1], b[2], b[3]),
        (false, true) => b
            .chunks(2)
            .map(|w| format!("{:02x}{:02x}", w[0], w[1]))
            .collect::<Vec<_>>()
            .join(":"),
        (false, false) => b.iter().map(|x| format!("{x:02x}")).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Mem(Vec<u8>);
    impl Memory for Mem {
        fn bytes(&self, addr: u64, len: u64) -> Option<Vec<u8>> {
            let a = usize::try_from(addr.checked_sub(0x1000)?).ok()?;
            self.0.get(a..a + len as usize).map(<[u8]>::to_vec)
        }
    }

    fn f(fmt: &[u8], args: [u64; 3]) -> Option<String> {
        let mem = Mem(b"abcdefg\0\xc6\x12\x00\x01".to_vec());
        format(fmt, args, &mem).map(|v| String::from_utf8_lossy(v.bytes()).into_owned())
    }

    #[test]
    fn formats_like_the_kernels_vsnprintf() {
        assert_eq!(
            f(b"len %d port %u x=%x %%\0", [u64::MAX, 53, 255]).unwrap(),
            "len -1 port 53 x=ff %"
        );
        assert_eq!(
            f(b"%llu %lx\0", [1 << 40, 16, 0]).unwrap(),
            "1099511627776 10"
        );
        assert_eq!(
            f(b"w=%8d|%-8x|%08x|\0", [5, 255, 255]).unwrap(),
            "w=       5|ff      |000000ff|"
        );
        assert_eq!(
            f(b"%+d % d %05d\0", [5, 5, u64::MAX]).unwrap(),
            "+5  5 -0001"
        );
        assert_eq!(
            f(b"s=%s ip=%pI4 %pi4\0", [0x1000, 0x1008, 0x1008]).unwrap(),
            "s=abcdefg ip=198.18.0.1 198.018.000.001"
        );
        assert_eq!(
            f(b"%s|%p|\0", [0x9999, 0, 0]).unwrap(),
            "|0000000000000000|"
        );
        // A %c of a high byte is one byte.
        assert_eq!(
            format(b"%c\0", [0x80, 0, 0], &Mem(Vec::new()))
                .unwrap()
                .bytes(),
            [0x80]
        );
    }

    #[test]
    fn a_wide_field_is_counted_not_written() {
        // (A red team's `%99999999999d` had pfild allocate 100 GB.)
        let l = format(b"%99999999999d\0", [7, 0, 0], &Mem(Vec::new())).unwrap();
        assert_eq!(
            l.len(),
            FIELD_WIDTH_MAX,
            "clamped as the kernel's vsnprintf"
        );
        assert_eq!(l.bytes().len(), LINE_MAX, "the kernel's buffer");
        let l = format(b"%-600d|\0", [7, 0, 0], &Mem(Vec::new())).unwrap();
        assert_eq!(l.len(), 601);
        assert_eq!(&l.bytes()[..2], b"7 ");
    }

    #[test]
    fn refuses_what_the_kernel_refuses() {
        assert!(f(b"bad=%q\0", [0; 3]).is_none(), "an unknown conversion");
        assert!(f(b"ctl=\x01\0", [0; 3]).is_none(), "a control character");
        assert!(f(b"nonul", [0; 3]).is_none(), "no NUL in the size");
        assert!(f(b"%d %d %d %d\0", [0; 3]).is_none(), "four conversions");
        assert!(f(b"%pZ\0", [0; 3]).is_none(), "an unknown pointer kind");
        assert!(f(b"%.3d\0", [0; 3]).is_none(), "a precision");
    }
}
