//! Model test: random sequences of registry operations checked against a
//! plain `Vec` model of each chain, including transactions, failed
//! operations, hook removal, and what the datapath actually runs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use parking_lot::Mutex;
use pfil::{Ctx, Dir, Dirs, Error, Packet, PacketKind, Placement, Registry, Verdict};
use proptest::prelude::*;

const HEADS: [(&str, PacketKind, Dirs); 3] = [
    ("h0", PacketKind::Ethernet, Dirs::BOTH),
    ("h1", PacketKind::Ethernet, Dirs::IN),
    ("h2", PacketKind::Ipv4, Dirs::BOTH),
];
const HOOKS: [(&str, PacketKind, Dirs); 6] = [
    ("e:a", PacketKind::Ethernet, Dirs::BOTH),
    ("e:b", PacketKind::Ethernet, Dirs::BOTH),
    ("e:c", PacketKind::Ethernet, Dirs::BOTH),
    ("e:d", PacketKind::Ethernet, Dirs::BOTH),
    ("e:in", PacketKind::Ethernet, Dirs::IN),
    ("v4:a", PacketKind::Ipv4, Dirs::BOTH),
];

#[derive(Clone, Debug)]
enum Place {
    Prepend,
    Append,
    Before(usize),
    After(usize),
}

#[derive(Clone, Debug)]
enum Step {
    Link(usize, Dir, usize, Place),
    Unlink(usize, Dir, usize),
    Remove(usize),
    Add(usize),
    Tx {
        ops: Vec<(bool, usize, Dir, usize, Place)>,
        stale: bool,
        dry: bool,
    },
    Run(usize, Dir),
}

fn dir() -> impl Strategy<Value = Dir> {
    prop_oneof![Just(Dir::In), Just(Dir::Out)]
}

fn place() -> impl Strategy<Value = Place> {
    prop_oneof![
        3 => Just(Place::Prepend),
        3 => Just(Place::Append),
        1 => (0..HOOKS.len()).prop_map(Place::Before),
        1 => (0..HOOKS.len()).prop_map(Place::After),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    let h = 0..HEADS.len();
    let k = 0..HOOKS.len();
    prop_oneof![
        6 => (h.clone(), dir(), k.clone(), place()).prop_map(|(a, d, b, p)| Step::Link(a, d, b, p)),
        4 => (h.clone(), dir(), k.clone()).prop_map(|(a, d, b)| Step::Unlink(a, d, b)),
        1 => k.clone().prop_map(Step::Remove),
        1 => k.clone().prop_map(Step::Add),
        2 => (
            prop::collection::vec((any::<bool>(), h.clone(), dir(), k, place()), 1..5),
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.2)
        )
            .prop_map(|(ops, stale, dry)| Step::Tx { ops, stale, dry }),
        3 => (h, dir()).prop_map(|(a, d)| Step::Run(a, d)),
    ]
}

/// The model: chains as plain vectors, the hook set, the generation.
#[derive(Clone, Default)]
struct Model {
    chains: BTreeMap<(usize, Dir), Vec<usize>>,
    hooks: BTreeSet<usize>,
    generation: u64,
}

impl Model {
    /// Apply link/unlink; `Err(())` where the registry must refuse.
    fn apply(&mut self, link: bool, h: usize, d: Dir, k: usize, p: &Place) -> Result<(), ()> {
        let (_, hkind, hdirs) = HEADS[h];
        let chain = self.chains.entry((h, d)).or_default();
        if !link {
            let at = chain.iter().position(|&x| x == k).ok_or(())?;
            chain.remove(at);
            return Ok(());
        }
        if !self.hooks.contains(&k) {
            return Err(());
        }
        let (_, kkind, kdirs) = HOOKS[k];
        if kkind != hkind || !hdirs.contains(d) || !kdirs.contains(d) || chain.contains(&k) {
            return Err(());
        }
        let find = |o: usize| chain.iter().position(|&x| x == o).ok_or(());
        let at = match (p, d) {
            (Place::Prepend, Dir::In) | (Place::Append, Dir::Out) => 0,
            (Place::Prepend, Dir::Out) | (Place::Append, Dir::In) => chain.len(),
            (Place::Before(o), _) => find(*o)?,
            (Place::After(o), _) => find(*o)? + 1,
        };
        chain.insert(at, k);
        Ok(())
    }
}

fn placement(p: &Place) -> Placement {
    match p {
        Place::Prepend => Placement::Prepend,
        Place::Append => Placement::Append,
        Place::Before(o) => Placement::Before(HOOKS[*o].0.into()),
        Place::After(o) => Placement::After(HOOKS[*o].0.into()),
    }
}

type Log = Arc<Mutex<Vec<&'static str>>>;

fn add(reg: &Registry, k: usize, log: &Log) -> Result<(), Error> {
    let (name, kind, dirs) = HOOKS[k];
    let log = log.clone();
    reg.add_hook(name, kind, dirs, move |_: &mut Packet<'_>, _: &Ctx<'_>| {
        log.lock().push(name);
        Verdict::Pass
    })
}

fn check(reg: &Registry, m: &Model) {
    assert_eq!(reg.generation(), m.generation, "generation");
    for (h, (hn, _, _)) in HEADS.iter().enumerate() {
        for d in Dir::ALL {
            let want: Vec<&str> = m
                .chains
                .get(&(h, d))
                .map(|c| c.iter().map(|&k| HOOKS[k].0).collect())
                .unwrap_or_default();
            assert_eq!(reg.chain_names(hn, d).unwrap(), want, "chain {hn} {d}");
        }
    }
    let hooks: Vec<String> = reg.hooks().into_iter().map(|h| h.name).collect();
    let mut want: Vec<&str> = m.hooks.iter().map(|&k| HOOKS[k].0).collect();
    want.sort();
    assert_eq!(hooks, want, "hooks");
}

fn run_case(steps: Vec<Step>) {
    let reg = Registry::with_max_workers(2);
    let log: Log = Arc::default();
    let heads: Vec<_> = HEADS
        .iter()
        .map(|(n, k, d)| reg.register_head(n, *k, *d).unwrap())
        .collect();
    let mut m = Model {
        generation: (HEADS.len() + HOOKS.len()) as u64,
        ..Model::default()
    };
    for k in 0..HOOKS.len() {
        add(&reg, k, &log).unwrap();
        m.hooks.insert(k);
    }
    let mut worker = reg.worker().unwrap();
    for s in steps {
        match s {
            Step::Link(h, d, k, p) => {
                let r = reg.link(HEADS[h].0, d, HOOKS[k].0, placement(&p));
                let mr = m.apply(true, h, d, k, &p);
                assert_eq!(r.is_ok(), mr.is_ok(), "link {h} {d} {k} {p:?}: {r:?}");
                if mr.is_ok() {
                    m.generation += 1;
                }
            }
            Step::Unlink(h, d, k) => {
                let r = reg.unlink(HEADS[h].0, d, HOOKS[k].0);
                let mr = m.apply(false, h, d, k, &Place::Prepend);
                assert_eq!(r.is_ok(), mr.is_ok(), "unlink {h} {d} {k}: {r:?}");
                if mr.is_ok() {
                    m.generation += 1;
                }
            }
            Step::Remove(k) => {
                let r = reg.remove_hook(HOOKS[k].0);
                assert_eq!(r.is_ok(), m.hooks.remove(&k));
                if r.is_ok() {
                    m.generation += 1;
                    for c in m.chains.values_mut() {
                        c.retain(|&x| x != k);
                    }
                }
            }
            Step::Add(k) => {
                let r = add(&reg, k, &log);
                assert_eq!(r.is_ok(), m.hooks.insert(k), "add {k}: {r:?}");
                if r.is_ok() {
                    m.generation += 1;
                }
            }
            Step::Tx { ops, stale, dry } => {
                let mut tx = reg.transaction();
                if stale {
                    tx = tx.expect_generation(m.generation.wrapping_sub(1));
                }
                if dry {
                    tx = tx.dry_run();
                }
                for (link, h, d, k, p) in &ops {
                    tx = if *link {
                        tx.link(HEADS[*h].0, *d, HOOKS[*k].0, placement(p))
                    } else {
                        tx.unlink(HEADS[*h].0, *d, HOOKS[*k].0)
                    };
                }
                let mut next = m.clone();
                let ok = !stale
                    && ops
                        .iter()
                        .all(|(link, h, d, k, p)| next.apply(*link, *h, *d, *k, p).is_ok());
                let r = tx.commit();
                assert_eq!(r.is_ok(), ok, "tx {ops:?} stale={stale} dry={dry}: {r:?}");
                if stale {
                    assert!(matches!(r, Err(Error::GenerationConflict { .. })));
                }
                if ok && !dry {
                    next.generation += 1;
                    m = next;
                }
            }
            Step::Run(h, d) => {
                log.lock().clear();
                let mut f = [0u8; 64];
                if HEADS[h].2.contains(d) {
                    let v = heads[h].run_one(
                        d,
                        &mut worker,
                        &mut Packet::with_kind(&mut f, HEADS[h].1),
                    );
                    assert_eq!(v, Verdict::Pass);
                }
                let want: Vec<&str> = if HEADS[h].2.contains(d) {
                    m.chains
                        .get(&(h, d))
                        .map(|c| c.iter().map(|&k| HOOKS[k].0).collect())
                        .unwrap_or_default()
                } else {
                    vec![]
                };
                assert_eq!(*log.lock(), want, "datapath order on {} {d}", HEADS[h].0);
                assert_eq!(heads[h].is_hooked(d), !want.is_empty());
            }
        }
        check(&reg, &m);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn registry_matches_the_vec_model(steps in prop::collection::vec(step(), 1..60)) {
        run_case(steps);
    }
}
