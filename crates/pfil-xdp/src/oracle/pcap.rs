//! Ethernet frames of a capture file, for the oracle: classic pcap
//! (either byte order, micro- or nanosecond) and pcapng (enhanced and
//! simple packet blocks of Ethernet interfaces). A reader of its own: the
//! crate does not link libpcap, and the oracle needs only the frames.

use std::path::Path;

/// The frames of the capture at `path`, as captured, at most `max`.
///
/// # Errors
/// The file unreadable, not a capture, not Ethernet, or cut short,
/// naming the file and where.
pub fn read(path: &Path, max: usize) -> Result<Vec<Vec<u8>>, String> {
    let b = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&b, max).map_err(|e| format!("{}: {e}", path.display()))
}

/// The frames of a capture in memory (see [`read`]).
///
/// # Errors
/// As [`read`].
pub fn parse(b: &[u8], max: usize) -> Result<Vec<Vec<u8>>, String> {
    match b.get(..4) {
        Some([0x0a, 0x0d, 0x0d, 0x0a]) => pcapng(b, max),
        Some(_) => classic(b, max),
        None => Err("not a capture: shorter than a header".into()),
    }
}

fn word(b: &[u8], at: usize, le: bool) -> Option<u32> {
    let w: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    Some(if le {
        u32::from_le_bytes(w)
    } else {
        u32::from_be_bytes(w)
    })
}

fn classic(b: &[u8], max: usize) -> Result<Vec<Vec<u8>>, String> {
    let le = match b[..4] {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
        _ => return Err("not a pcap or pcapng capture (unknown magic)".into()),
    };
    let link = word(b, 20, le).ok_or("pcap header cut short")?;
    if link & 0x0fff_ffff != 1 {
        return Err(format!(
            "link type {}: only Ethernet (1) is run",
            link & 0x0fff_ffff
        ));
    }
    let mut out = Vec::new();
    let mut off = 24;
    while off < b.len() && out.len() < max {
        let cap =
            word(b, off + 8, le).ok_or_else(|| format!("record header at byte {off} cut short"))?;
        let f = b
            .get(off + 16..off + 16 + cap as usize)
            .ok_or_else(|| format!("frame {} at byte {off} cut short", out.len() + 1))?;
        out.push(f.to_vec());
        off += 16 + cap as usize;
    }
    Ok(out)
}

fn pcapng(b: &[u8], max: usize) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    // Per section: its byte order and its interfaces' link types.
    let mut le = true;
    let mut links: Vec<u16> = Vec::new();
    let mut off = 0;
    while off + 12 <= b.len() && out.len() < max {
        let kind = word(b, off, le).ok_or("cut short")?;
        if kind == 0x0a0d_0d0a {
            le = match b.get(off + 8..off + 12) {
                Some([0x4d, 0x3c, 0x2b, 0x1a]) => true,
                Some([0x1a, 0x2b, 0x3c, 0x4d]) => false,
                _ => return Err(format!("section at byte {off}: bad byte-order magic")),
            };
            links.clear();
        }
        let len = word(b, off + 4, le).ok_or("cut short")? as usize;
        if len < 12 || len % 4 != 0 || off + len > b.len() {
            return Err(format!("block at byte {off}: bad length {len}"));
        }
        let body = &b[off + 8..off + len - 4];
        let link_of = |iface: usize| -> Result<(), String> {
            match links.get(iface) {
                Some(1) => Ok(()),
                Some(l) => Err(format!(
                    "interface {iface}: link type {l}: only Ethernet (1) is run"
                )),
                None => Err(format!(
                    "block at byte {off}: interface {iface} not described"
                )),
            }
        };
        match kind {
            // Interface description.
            1 => links.push(
                body.get(..2)
                    .map(|x| {
                        let x = [x[0], x[1]];
                        if le {
                            u16::from_le_bytes(x)
                        } else {
                            u16::from_be_bytes(x)
                        }
                    })
                    .ok_or_else(|| format!("block at byte {off}: interface cut short"))?,
            ),
            // Enhanced packet.
            6 => {
                let iface = word(body, 0, le).ok_or("cut short")? as usize;
                link_of(iface)?;
                let cap = word(body, 12, le).ok_or("cut short")? as usize;
                let f = body
                    .get(20..20 + cap)
                    .ok_or_else(|| format!("block at byte {off}: frame cut short"))?;
                out.push(f.to_vec());
            }
            // Simple packet: interface 0, its snap length caps the data.
            3 => {
                link_of(0)?;
                let orig = word(body, 0, le).ok_or("cut short")? as usize;
                let f = body
                    .get(4..4 + orig.min(body.len() - 4))
                    .ok_or_else(|| format!("block at byte {off}: frame cut short"))?;
                out.push(f.to_vec());
            }
            _ => {}
        }
        off += len;
    }
    Ok(out)
}

/// The frames of every capture (`.pcap`, `.pcapng`) in `dir`, in name
/// order, at most `max` a file, named `FILE#N`; files that are not
/// Ethernet captures are left out (so a corpus such as tcpdump's tests
/// can be given whole).
pub fn dir(dir: &Path, max: usize) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut files: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    files.sort();
    for p in files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng"))
    {
        let Ok(frames) = read(&p, max) else { continue };
        let name = p.file_name().unwrap_or_default().to_string_lossy();
        for (n, f) in frames.into_iter().enumerate() {
            out.push((format!("{name}#{n}"), f));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classic_file(le: bool, link: u32, frames: &[&[u8]]) -> Vec<u8> {
        let w = |v: u32| if le { v.to_le_bytes() } else { v.to_be_bytes() };
        let mut b = Vec::new();
        b.extend(w(0xa1b2_c3d4));
        b.extend([2, 0, 4, 0].map(|x| if le { x } else { 0 }));
        b.extend([0; 8]);
        b.extend(w(65535));
        b.extend(w(link));
        for f in frames {
            b.extend(w(0));
            b.extend(w(0));
            b.extend(w(f.len() as u32));
            b.extend(w(f.len() as u32));
            b.extend_from_slice(f);
        }
        b
    }

    #[test]
    fn classic_pcap_in_both_byte_orders() {
        for le in [true, false] {
            let b = classic_file(le, 1, &[&[1; 60], &[2; 14]]);
            assert_eq!(parse(&b, 10).unwrap(), vec![vec![1; 60], vec![2; 14]]);
            assert_eq!(parse(&b, 1).unwrap().len(), 1);
            assert!(parse(&classic_file(le, 113, &[&[1; 60]]), 10)
                .unwrap_err()
                .contains("link type 113"));
            assert!(parse(&b[..b.len() - 1], 10)
                .unwrap_err()
                .contains("frame 2"));
        }
        assert!(parse(b"abcdefgh", 1).unwrap_err().contains("magic"));
    }

    #[test]
    fn pcapng_enhanced_and_simple_blocks() {
        let mut b = Vec::new();
        let block = |b: &mut Vec<u8>, kind: u32, body: &[u8]| {
            let len = 12 + body.len().div_ceil(4) * 4;
            b.extend(kind.to_le_bytes());
            b.extend((len as u32).to_le_bytes());
            b.extend_from_slice(body);
            b.resize(b.len() + body.len().div_ceil(4) * 4 - body.len(), 0);
            b.extend((len as u32).to_le_bytes());
        };
        block(
            &mut b,
            0x0a0d_0d0a,
            &[
                0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            ],
        );
        block(&mut b, 1, &[1, 0, 0, 0, 0, 0, 0, 0]);
        let mut epb = vec![0u8; 20];
        epb[12] = 15;
        epb[16] = 15;
        epb.extend([7; 15]);
        block(&mut b, 6, &epb);
        let mut spb = 14u32.to_le_bytes().to_vec();
        spb.extend([9; 14]);
        block(&mut b, 3, &spb);
        assert_eq!(parse(&b, 10).unwrap(), vec![vec![7; 15], vec![9; 14]]);
        // An enhanced packet of an interface never described.
        let mut bad = b.clone();
        let mut epb2 = vec![0u8; 20];
        epb2[0] = 3;
        block(&mut bad, 6, &epb2);
        assert!(parse(&bad, 10).unwrap_err().contains("interface 3"));
    }
}
