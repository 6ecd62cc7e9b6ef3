//! The acl filter: derived filters, stats, configs and reclaiming old
//! rulesets.

use super::tests::*;
use super::*;
use pfil::{Dir, Dirs, Placement, Registry};

/// `rule_hits` of a filter as (rule, hits).
fn rule_hits(f: &dyn Filter) -> Vec<(String, u64)> {
    f.stats()[0]
        .samples
        .iter()
        .map(|x| (x.label("rule").unwrap().to_owned(), x.value))
        .collect()
}

fn rows(r: &[(&str, u64)]) -> Vec<(String, u64)> {
    r.iter().map(|(a, b)| ((*a).to_owned(), *b)).collect()
}

/// `derive` changes nothing in the running acl: it decides and counts
/// as before until its successor is published, and the two count the
/// rules they both have (and the default action) into the same
/// counters: hits on the old one after the derive, and after the
/// swap (a batch that started before it), show in the new one's
/// counters, each once. The new rule starts at 0, the removed one is
/// not in the new filter.
#[test]
fn derive_leaves_the_running_acl_alone_and_shares_the_kept_counters() {
    let reg = Registry::with_max_workers(2);
    let head = reg
        .register_head("h", PacketKind::Ethernet, Dirs::IN)
        .unwrap();
    let old_cfg = "drop count proto udp to any port 53; pass count proto udp; default pass";
    let acl = Acl::from_config(old_cfg, reg.max_workers()).unwrap();
    let old_rules = acl.rules();
    reg.add_hook("acl:edge", PacketKind::Ethernet, Dirs::IN, acl.clone())
        .unwrap();
    reg.link("h", Dir::In, "acl:edge", Placement::Prepend)
        .unwrap();
    let mut w = reg.worker().unwrap();
    let mut send = |port: u16| {
        let mut f = udp4([1; 4], [2; 4], 1000, port);
        head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f))
    };
    for port in [53, 53, 80] {
        send(port);
    }
    let new_cfg = "pass count proto tcp; drop count proto udp to any port 53; default drop";
    let g = reg.generation();
    let d = reg.derive_filter("acl:edge", new_cfg).unwrap().unwrap();
    assert!(d.filter.batched());
    assert_eq!(d.filter.spec(), Some(format!("acl:{new_cfg}")));
    // The running acl: same rules, spec, generation, verdicts (UDP to
    // port 80 passes by rule 1, which the new ruleset does not have).
    assert_eq!(reg.generation(), g);
    assert_eq!(acl.rules(), old_rules);
    assert_eq!(acl.spec(), Some(format!("acl:{old_cfg}")));
    assert_eq!(reg.hook("acl:edge").unwrap().spec, acl.spec());
    assert_eq!((send(80), send(53)), (Verdict::Pass, Verdict::Dropped));
    assert_eq!(rule_hits(&acl), rows(&[("0", 3), ("1", 2), ("default", 0)]));
    // Shared: the port 53 rule (now rule 1) and the default.
    assert_eq!(
        rule_hits(&*d.filter),
        rows(&[("0", 0), ("1", 3), ("default", 0)])
    );
    let c = reg
        .replace_filter_shared("acl:edge", d.filter.clone())
        .unwrap();
    assert_eq!((send(80), send(53)), (Verdict::Dropped, Verdict::Dropped));
    // A batch that started on the old filter before the swap, on the
    // other worker.
    let mut late = udp4([1; 4], [2; 4], 1000, 53);
    assert_eq!(
        acl.filter(&mut Packet::new(&mut late), &ctx(1)),
        Verdict::Dropped
    );
    // 3 + 1 + 1 hits on the port 53 rule, seen alike by both; the
    // default's one hit (port 80 on the new filter) too.
    assert_eq!(
        rule_hits(&*d.filter),
        rows(&[("0", 0), ("1", 5), ("default", 1)])
    );
    assert_eq!(rule_hits(&acl), rows(&[("0", 5), ("1", 2), ("default", 1)]));
    assert!(c.wait_timeout(std::time::Duration::from_secs(10)));
    // The registry let go of the old filter: `from` (and our clone of
    // the acl) hold it, and dropping them frees it here, not on the
    // datapath.
    assert_eq!(Arc::strong_count(&d.from), 1);
    drop((d.from, acl));
    assert_eq!(
        reg.hook_stats("acl:edge").unwrap()[0].samples[1].value,
        5,
        "the kept counter outlives the old filter"
    );
}

/// Workers run traffic through a registry while the hook's acl is
/// replaced again and again by one derived from it (the way `apply`
/// does), alternating two rulesets that send every packet to a
/// counted rule both have: during each grace period the old and the
/// new filter run at once, and every hit must survive, exactly.
#[test]
fn derived_replacements_under_traffic_lose_and_double_no_hit() {
    const THREADS: usize = 2;
    let a = "pass count proto udp to any port 53; drop count proto udp; default pass";
    let b = "drop count proto tcp; pass count proto udp to any port 53; \
             drop count proto udp; pass count all; default pass";
    let reg = Registry::with_max_workers(THREADS);
    let head = reg
        .register_head("h", PacketKind::Ethernet, Dirs::IN)
        .unwrap();
    let acl = Acl::from_config(a, THREADS).unwrap();
    reg.add_hook("acl:edge", PacketKind::Ethernet, Dirs::IN, acl)
        .unwrap();
    reg.link("h", Dir::In, "acl:edge", Placement::Prepend)
        .unwrap();
    let (sent, swaps, batches) = swaps_under_traffic(
        THREADS,
        200,
        |_| reg.worker().unwrap(),
        |w, _, pkts| head.run(Dir::In, w, pkts),
        |n| {
            let cfg = if n % 2 == 0 { b } else { a };
            let d = reg.derive_filter("acl:edge", cfg).unwrap().unwrap();
            let c = reg.replace_filter_shared("acl:edge", d.filter).unwrap();
            assert!(c.wait_timeout(std::time::Duration::from_secs(10)));
            drop(d.from);
        },
    );
    assert_eq!(swaps % 2, 0, "the last swap put `a` back");
    assert_eq!(reg.hook("acl:edge").unwrap().spec, Some(format!("acl:{a}")));
    let hits: Vec<u64> = reg.hook_stats("acl:edge").unwrap()[0]
        .samples
        .iter()
        .map(|x| x.value)
        .collect();
    assert_eq!(
        hits,
        [sent.0, sent.1, 0],
        "after {swaps} swaps, {batches} batches"
    );
    assert_eq!(sent.0 + sent.1, batches * 64);
}

/// A derived acl that is never published (its transaction failed) is
/// dropped and leaves the running one as it was: its counters, also
/// those it shared, are not freed nor zeroed; only its new rules'
/// counters go back to the slab (and start at 0 when reused). A bad
/// config is refused with where it is wrong.
#[test]
fn a_derived_acl_never_published_leaves_the_running_one_as_it_was() {
    let acl = Acl::from_config("drop count proto udp to any port 53; pass count all", 1).unwrap();
    let mut dns = udp4([1; 4], [2; 4], 1, 53);
    for _ in 0..3 {
        verdict(&acl, &mut dns);
    }
    let cfg = "pass count proto tcp; drop count proto udp to any port 53; pass count all";
    for _ in 0..100 {
        let d = acl.derive(cfg).unwrap().unwrap();
        // As if it had run: the new rule and a shared one count.
        let mut syn = tcp4([2; 4], 22, true, false);
        d.filter(&mut Packet::new(&mut syn), &ctx(0));
        // A reused counter is zeroed: 1, not one more each time.
        assert_eq!(rule_hits(&*d)[0], ("0".to_owned(), 1));
        drop(d);
    }
    // The tcp packets of the derived filters went to its new rule, not
    // to `pass count all`, which the running acl shares.
    assert_eq!(rule_hits(&acl), rows(&[("0", 3), ("1", 0), ("default", 0)]));
    assert_eq!(acl.slab.inner.lock().unwrap().segments.len(), 1);
    let Some(Err(e)) = acl.derive("pass all; pass frm any") else {
        panic!("a bad config derives nothing");
    };
    assert!(e.contains("line 2, column 7: expected"), "{e}");
    assert_eq!(verdict(&acl, &mut dns), Verdict::Dropped);
    assert_eq!(acl.hits()[0].hits, 4);
}

#[test]
fn stats_list_every_counted_rule_and_the_default() {
    let acl = Acl::from_config(
        "drop count proto udp to any port 53; pass proto udp; pass count proto tcp; default drop",
        1,
    )
    .unwrap();
    for port in [53, 53, 80] {
        verdict(&acl, &mut udp4([1; 4], [2; 4], 1, port));
    }
    verdict(&acl, &mut tcp4([2; 4], 22, true, false));
    verdict(&acl, &mut [0u8; 5]);
    let s = acl.stats();
    assert_eq!(s.len(), 1);
    assert_eq!(
        (s[0].name.as_str(), s[0].kind),
        ("rule_hits", StatKind::Counter)
    );
    let rows: Vec<(&str, &str, u64)> = s[0]
        .samples
        .iter()
        .map(|x| (x.label("rule").unwrap(), x.label("text").unwrap(), x.value))
        .collect();
    assert_eq!(
        rows,
        [
            ("0", "drop count proto 17 from any to any port 53:53", 2),
            ("2", "pass count proto 6 from any to any", 1),
            ("default", "default drop", 1),
        ]
    );
}

#[test]
fn configs_are_files_or_inline_rules_and_errors_say_where() {
    let dir = std::env::temp_dir().join(format!("pfil-acl-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text_file = dir.join("rules.txt");
    std::fs::write(&text_file, "# file\ndrop proto udp\n").unwrap();
    let cb = dir.join("rules.cb");
    std::fs::write(
        &cb,
        "@0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t53 : 53\t0x11/0xFF\t0x0000/0x0000\n",
    )
    .unwrap();
    let a = Acl::from_config(&format!("@{}", text_file.display()), 1).unwrap();
    assert_eq!(
        verdict(&a, &mut udp4([1; 4], [2; 4], 1, 2)),
        Verdict::Dropped
    );
    let b = Acl::from_config(&format!("@{}", cb.display()), 1).unwrap();
    assert_eq!(
        verdict(&b, &mut udp4([1; 4], [2; 4], 1, 53)),
        Verdict::Dropped
    );
    assert_eq!(verdict(&b, &mut udp4([1; 4], [2; 4], 1, 54)), Verdict::Pass);
    let e = Acl::from_config("pass all; drop proto tcp from any port http", 1).unwrap_err();
    assert!(e.contains("line 2, column 31: expected a port"), "{e}");
    std::fs::write(&text_file, "pass all\npass frm any\n").unwrap();
    let e = Acl::from_config(&format!("@{}", text_file.display()), 1).unwrap_err();
    assert!(e.contains("line 2, column 6"), "{e}");
    dir_and_caps(&dir, &text_file);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Review L2: a path is read only when written `@PATH` (a bare path is
/// inline rules, an error that says how to name a file); a file's
/// parse error does not echo its text; directories, huge files and
/// too many rules are refused naming the limit; echoed input is cut.
fn dir_and_caps(dir: &std::path::Path, text_file: &std::path::Path) {
    let secret = dir.join("secret");
    std::fs::write(&secret, "root:$6$SECRETHASH:19000:0:99999:7:::\n").unwrap();
    let e = Acl::from_config(secret.to_str().unwrap(), 1).unwrap_err();
    assert!(e.contains("a rules file is `acl:@PATH`"), "{e}");
    let e = Acl::from_config(&format!("@{}", secret.display()), 1).unwrap_err();
    assert!(e.contains("line 1, column 1: expected"), "{e}");
    assert!(!e.contains("SECRETHASH") && !e.contains("root"), "{e}");
    let e = Acl::from_config(&format!("@{}", dir.display()), 1).unwrap_err();
    assert!(e.contains("not a regular file"), "{e}");
    let e = Acl::from_config("@", 1).unwrap_err();
    assert!(e.contains("needs the path"), "{e}");
    let big = std::fs::File::create(text_file).unwrap();
    big.set_len(MAX_RULES_FILE_BYTES + 1).unwrap();
    let e = Acl::from_config(&format!("@{}", text_file.display()), 1).unwrap_err();
    assert!(e.contains("over the limit of 16777216 bytes"), "{e}");
    let many = "drop proto udp\n".repeat(MAX_RULES + 1);
    std::fs::write(text_file, many).unwrap();
    let e = Acl::from_config(&format!("@{}", text_file.display()), 1).unwrap_err();
    assert!(e.contains("65537 rules, over the limit of 65536"), "{e}");
    let long = format!("pass {}", "x".repeat(1 << 20));
    let e = Acl::from_config(&long, 1).unwrap_err();
    assert!(e.len() < 512, "{} bytes", e.len());
    let e = Acl::from_config(&format!("@/nonexistent/{}", "y".repeat(1 << 20)), 1).unwrap_err();
    assert!(e.len() < 512, "{} bytes", e.len());
}

/// Review L6.4: a ruleset a stalled batch still holds when
/// [`Acl::replace`] stops waiting is not freed by that batch's thread
/// when it lets go (a whole classifier and a lock per counted rule on
/// a datapath thread) but by the next control-plane call.
#[test]
fn a_replaced_ruleset_is_never_freed_by_the_datapath() {
    let acl = Acl::from_config("drop count proto udp; pass all", 2).unwrap();
    let held = acl.current.load_full(); // a batch that stalls
    let weak = Arc::downgrade(&held);
    acl.replace(text::parse("pass proto udp").unwrap());
    assert_eq!(acl.retiring.lock().unwrap().len(), 1);
    std::thread::spawn(move || drop(held)).join().unwrap();
    assert!(weak.upgrade().is_some(), "freed by the batch's thread");
    assert_eq!(acl.reclaim(), 0);
    assert!(weak.upgrade().is_none(), "freed by reclaim");
}
