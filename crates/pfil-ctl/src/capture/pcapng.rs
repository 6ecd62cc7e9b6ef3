//! The pcapng a capture streams: section header, interface description,
//! enhanced packet blocks, interface statistics.

use std::time::{SystemTime, UNIX_EPOCH};

use super::{Record, TapStats};

fn pad4(b: &mut Vec<u8>) {
    while b.len() % 4 != 0 {
        b.push(0);
    }
}

/// One option; a value longer than an option may be (65535 bytes) is cut
/// to that (review L6.2: the length wrapped).
fn option(b: &mut Vec<u8>, code: u16, value: &[u8]) {
    let len = u16::try_from(value.len()).unwrap_or(u16::MAX);
    let value = &value[..usize::from(len)];
    b.extend_from_slice(&code.to_le_bytes());
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(value);
    pad4(b);
}

fn block(out: &mut Vec<u8>, kind: u32, body: &[u8]) {
    let len = (12 + body.len()) as u32;
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(&len.to_le_bytes());
}

/// The section header and the tap's interface description.
pub fn pcapng_header(out: &mut Vec<u8>, if_name: &str, filter: Option<&str>, snaplen: usize) {
    let mut shb = Vec::new();
    shb.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    option(
        &mut shb,
        4,
        format!("pfil-ctl {}", env!("CARGO_PKG_VERSION")).as_bytes(),
    );
    option(&mut shb, 0, &[]);
    block(out, 0x0A0D_0D0A, &shb);
    let mut idb = Vec::new();
    idb.extend_from_slice(&1u16.to_le_bytes()); // LINKTYPE_ETHERNET
    idb.extend_from_slice(&0u16.to_le_bytes());
    idb.extend_from_slice(&(snaplen as u32).to_le_bytes());
    option(&mut idb, 2, if_name.as_bytes());
    option(&mut idb, 9, &[9]); // if_tsresol: 10^-9 s
    if let Some(f) = filter {
        // A libpcap filter string: a 0 byte, then the text, cut (on a
        // character) to what an option holds.
        let mut end = f.len().min(usize::from(u16::MAX) - 1);
        while !f.is_char_boundary(end) {
            end -= 1;
        }
        let mut v = vec![0u8];
        v.extend_from_slice(&f.as_bytes()[..end]);
        option(&mut idb, 11, &v);
    }
    option(&mut idb, 0, &[]);
    block(out, 1, &idb);
}

/// One enhanced packet block.
pub fn pcapng_packet(out: &mut Vec<u8>, r: &Record) {
    let mut b = Vec::with_capacity(32 + r.len as usize);
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&((r.ts_ns >> 32) as u32).to_le_bytes());
    b.extend_from_slice(&(r.ts_ns as u32).to_le_bytes());
    b.extend_from_slice(&r.len.to_le_bytes());
    b.extend_from_slice(&r.orig_len.to_le_bytes());
    b.extend_from_slice(&r.data[..r.len as usize]);
    pad4(&mut b);
    option(&mut b, 6, &r.queue.to_le_bytes()); // epb_queue
    option(&mut b, 0, &[]);
    block(out, 6, &b);
}

/// The interface statistics block that ends a capture.
pub fn pcapng_stats(out: &mut Vec<u8>, s: &TapStats, written: u64) {
    let ts = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut b = Vec::new();
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
    b.extend_from_slice(&(ts as u32).to_le_bytes());
    option(&mut b, 4, &s.seen.to_le_bytes()); // isb_ifrecv
    option(&mut b, 6, &s.matched.to_le_bytes()); // isb_filteraccept
    option(&mut b, 7, &s.dropped.to_le_bytes()); // isb_osdrop
    option(&mut b, 8, &written.to_le_bytes()); // isb_usrdeliv
    option(&mut b, 0, &[]);
    block(out, 5, &b);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The blocks of a pcapng stream, checked: (type, body).
    fn blocks(b: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < b.len() {
            let kind = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
            let len = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap()) as usize;
            assert!(
                len >= 12 && len % 4 == 0 && at + len <= b.len(),
                "block length {len}"
            );
            let end = u32::from_le_bytes(b[at + len - 4..at + len].try_into().unwrap()) as usize;
            assert_eq!(end, len, "trailing block length");
            out.push((kind, b[at + 8..at + len - 4].to_vec()));
            at += len;
        }
        out
    }

    /// The options of a block body from `from`: (code, value); each must
    /// fit in the body.
    fn options(body: &[u8], from: usize) -> Vec<(u16, Vec<u8>)> {
        let mut out = Vec::new();
        let mut at = from;
        while at + 4 <= body.len() {
            let code = u16::from_le_bytes([body[at], body[at + 1]]);
            let len = usize::from(u16::from_le_bytes([body[at + 2], body[at + 3]]));
            assert!(
                at + 4 + len <= body.len(),
                "option {code} runs past its block"
            );
            out.push((code, body[at + 4..at + 4 + len].to_vec()));
            at += 4 + len.div_ceil(4) * 4;
            if code == 0 {
                break;
            }
        }
        assert_eq!(at, body.len(), "the options fill the block");
        out
    }

    /// Review L6.2: a filter string over 64 KiB made the option length
    /// wrap and the interface description unreadable.
    #[test]
    fn a_filter_over_64_kib_keeps_the_interface_description_valid() {
        for n in [10, 9_362, 9_363, 20_000] {
            let f = "udp or ".repeat(n) + "tcp";
            let mut out = Vec::new();
            pcapng_header(&mut out, "syn0 in at the wire", Some(&f), 128);
            let b = blocks(&out);
            assert_eq!(b.len(), 2);
            assert_eq!(b[1].0, 1, "an interface description");
            let opts = options(&b[1].1, 8);
            let (_, v) = opts.iter().find(|(c, _)| *c == 11).expect("if_filter");
            assert_eq!(v[0], 0, "a libpcap filter string");
            let s = std::str::from_utf8(&v[1..]).expect("cut on a character boundary");
            if f.len() < usize::from(u16::MAX) {
                assert_eq!(s, f);
            } else {
                assert!(
                    f.starts_with(s) && s.len() < usize::from(u16::MAX),
                    "{}",
                    s.len()
                );
            }
        }
    }
}
