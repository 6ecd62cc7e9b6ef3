//! dpdk-test-acl, run on a set's rules and trace: its rule for every
//! header, its memory and its rate. `--ipv6` runs it on the sets moved
//! into IPv6 (its `--ipv6` rule and trace formats).

use std::process::Command;

use super::{AclArgs, Set};

fn dpdk(a: &AclArgs, s: &Set, alg: &str, iters: usize, verbose: u32) -> Result<String, String> {
    let mut cmd = Command::new(&a.dpdk);
    cmd.args(a.eal.split_whitespace());
    if verbose >= 2 {
        // The build's memory report, on stderr.
        cmd.arg("--log-level=lib.acl:debug");
    }
    cmd.arg("--")
        .arg(format!("--rulesf={}", s.rules_file.display()))
        .arg(format!("--tracef={}", s.trace_path.display()))
        .arg(format!("--tracenum={}", s.keys.len()))
        .arg(format!("--iter={iters}"))
        .arg(format!("--alg={alg}"))
        .arg(format!("--verbose={verbose}"));
    if a.ipv6 {
        // Addresses as four 32-bit fields (dpdk-test-acl's default IPv6
        // layout, `4B`).
        cmd.arg("--ipv6");
    }
    let o = cmd
        .output()
        .map_err(|e| format!("{}: {e}", a.dpdk.display()))?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(format!("exit {}: {last}", o.status));
    }
    let mut text = String::from_utf8_lossy(&o.stdout).into_owned();
    if verbose >= 2 {
        text.push('\n');
        text.push_str(&String::from_utf8_lossy(&o.stderr));
    }
    Ok(text)
}

/// rte_acl's runtime memory from its build's debug report: the sum of the
/// `... bytes used: N` lines after `runtime memory footprint`.
fn dpdk_memory(text: &str) -> Option<usize> {
    let at = text.find("runtime memory footprint")?;
    let mut sum = 0;
    let mut any = false;
    for l in text[at..].lines().skip(1) {
        let Some((_, n)) = l.split_once("bytes used: ") else {
            break;
        };
        let last = n.rsplit('/').next()?.trim();
        sum += last.parse::<usize>().ok()?;
        any = true;
    }
    any.then_some(sum)
}

/// rte_acl's rule for every header, from `--verbose=2` output
/// (`ipv4_5tuple: N, category: 0, result: R`, `ipv6_5tuple: ...` with
/// `--ipv6`; `R` = rule index or 4294967295 for no match).
#[allow(clippy::type_complexity)]
pub(super) fn dpdk_results(
    a: &AclArgs,
    s: &Set,
    alg: &str,
) -> Result<(Vec<Option<u32>>, Option<usize>), String> {
    let text = dpdk(a, s, alg, 1, 2)?;
    if let Some(raw) = &a.raw {
        let keep: String = text
            .lines()
            .filter(|l| !l.starts_with("ipv4_5tuple:") && !l.starts_with("ipv6_5tuple:"))
            .map(|l| format!("{l}\n"))
            .collect();
        let _ = std::fs::write(raw.join(format!("{}.{alg}.dpdk-check.txt", s.name)), keep);
    }
    let mut res = vec![None; s.keys.len()];
    let mut seen = 0;
    for l in text.lines() {
        let Some(rest) = l
            .strip_prefix("ipv4_5tuple: ")
            .or_else(|| l.strip_prefix("ipv6_5tuple: "))
        else {
            continue;
        };
        let mut f = rest.split(", ");
        let n: usize = f
            .next()
            .and_then(|x| x.parse().ok())
            .ok_or_else(|| format!("bad line `{l}`"))?;
        let r: u32 = f
            .nth(1)
            .and_then(|x| x.strip_prefix("result: "))
            .and_then(|x| x.parse().ok())
            .ok_or_else(|| format!("bad line `{l}`"))?;
        if n == 0 || n > res.len() {
            return Err(format!("header number {n} out of range"));
        }
        res[n - 1] = (r != u32::MAX).then_some(r);
        seen += 1;
    }
    if seen != s.keys.len() {
        return Err(format!("{seen} results for {} headers", s.keys.len()));
    }
    Ok((res, dpdk_memory(&text)))
}

/// ns/packet of one timed dpdk-test-acl run (`... pkt/sec` line).
pub(super) fn dpdk_ns(a: &AclArgs, s: &Set, alg: &str) -> Result<f64, String> {
    let text = dpdk(a, s, alg, a.iters, 0)?;
    if let Some(raw) = &a.raw {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(raw.join(format!("{}.{alg}.dpdk-runs.txt", s.name)))
        {
            let _ = f.write_all(text.as_bytes());
        }
    }
    parse_pps(&text)
        .map(|pps| 1e9 / pps)
        .ok_or_else(|| format!("{} {alg}: no `pkt/sec` in dpdk-test-acl output", s.name))
}

fn parse_pps(text: &str) -> Option<f64> {
    let l = text.lines().find(|l| l.starts_with("search_ip5tuples"))?;
    let v = l.trim_end().strip_suffix(" pkt/sec")?;
    v.rsplit(' ').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_rate_line() {
        let t = "x\nsearch_ip5tuples  @lcore 0: 10 iterations, 1000000 pkts, 1 categories, \
                 117348679 cycles (0.05 sec), 117.35 cycles/pkt, 20877951.25 pkt/sec\n";
        assert_eq!(parse_pps(t), Some(20877951.25));
        assert_eq!(parse_pps("nothing"), None);
    }

    #[test]
    fn reads_the_memory_report() {
        let t = "ACL: x\nruntime memory footprint on socket -1:\n\
                 single nodes/bytes used: 130121/1040968\n\
                 quad nodes/vectors/bytes used: 101622/333230/2665840\n\
                 DFA nodes/group64/bytes used: 107283/375926/192476168\n\
                 match nodes/bytes used: 2000/256000\n\
                 node limit for tree split: 2048\n";
        assert_eq!(dpdk_memory(t), Some(1040968 + 2665840 + 192476168 + 256000));
        assert_eq!(dpdk_memory("nothing"), None);
    }
}
