//! The biased table ([`super::bias`]): one worker's batches update live
//! entries without their locks, a second worker or the control plane
//! takes that away first, and no count is lost, no removed entry comes
//! back.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

use pfil::{CtState, Ctx, Dir, Filter, Packet};

use super::tests_filter::{
    assert_counted, assert_kills_left_no_trace, established, flow_frame, padded_frame,
};
use super::*;

/// Worker `w`'s batch of one frame a flow of `flows`, round `r` (half
/// the flows in each direction, the other half next round).
fn batch(ct: &Ct, flows: u16, r: usize, w: usize) {
    let ctx = Ctx::new("h", Dir::In, w);
    let mut frames: Vec<Vec<u8>> = (0..flows)
        .map(|f| flow_frame(f, (usize::from(f) + r + w) % 2 == 1))
        .collect();
    let mut pkts: Vec<Packet<'_>> = frames.iter_mut().map(|f| Packet::new(f)).collect();
    ct.filter_batch(&mut pkts, &ctx);
    assert!(pkts.iter().all(|p| p.ct().0 == CtState::Established));
}

/// The first worker to run a batch owns the table and updates entries
/// without their locks; a second worker's batch makes it shared for
/// good; a listing in between holds the bias only while it reads.
#[test]
fn one_worker_is_biased_until_a_second_shares_the_table() {
    let ct = established(8);
    let bias = &ct.table().bias;
    assert!(bias.enter(0).biased(), "worker 0 ran the set-up: the owner");
    assert!(!bias.enter(1).biased(), "a second worker is never biased");
    assert!(bias.is_shared());
    assert!(!bias.enter(0).biased(), "shared for good");
    let fresh = established(8);
    let hold = fresh.table().bias.hold();
    assert!(!fresh.table().bias.enter(0).biased(), "held: locks");
    drop(hold);
    assert!(
        fresh.table().bias.enter(0).biased(),
        "released: biased again"
    );
    assert!(!fresh.table().bias.is_shared());
}

/// The handshake itself: while the owner is in a biased batch, a holder
/// (the control plane), a second worker and a third (the table already
/// shared) all wait for it to end before they go on; the owner's next batch is not biased while the
/// hold lasts. Without the wait either would touch entries the owner is
/// writing without their locks.
#[test]
fn a_holder_and_a_second_worker_wait_for_the_owners_batch() {
    use std::time::Duration;
    let bias = bias::Bias::default();
    let in_batch = AtomicBool::new(false);
    std::thread::scope(|s| {
        let section = bias.enter(0);
        assert!(section.biased());
        in_batch.store(true, Relaxed);
        let (bias, in_batch) = (&bias, &in_batch);
        let holder = s.spawn(move || {
            let hold = bias.hold();
            assert!(!in_batch.load(Relaxed), "held while the owner's batch ran");
            drop(hold);
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(!holder.is_finished(), "the holder waits for the batch");
        in_batch.store(false, Relaxed);
        drop(section);
        holder.join().unwrap();
        let section = bias.enter(0);
        assert!(section.biased(), "no hold left: biased again");
        in_batch.store(true, Relaxed);
        let second = s.spawn(move || {
            let section = bias.enter(1);
            assert!(!section.biased());
            assert!(
                !in_batch.load(Relaxed),
                "shared while the owner's batch ran"
            );
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !second.is_finished(),
            "the second worker waits for the batch"
        );
        // A third worker, the table already shared: it waits too.
        let third = s.spawn(move || {
            let section = bias.enter(2);
            assert!(!section.biased());
            assert!(
                !in_batch.load(Relaxed),
                "a third ran during the owner's batch"
            );
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(!third.is_finished(), "the third worker waits for the batch");
        in_batch.store(false, Relaxed);
        drop(section);
        second.join().unwrap();
        third.join().unwrap();
        assert!(bias.is_shared());
    });
}

/// The owner streams both directions of 64 flows through batches (no
/// entry locks) while a second worker joins a quarter of the way in:
/// every packet of both is counted on its flow and direction. Without
/// the hand-over waiting for the owner's batch in progress (or without
/// the owner reading `owner` after marking itself busy), the two write
/// one counter at once and the totals come out short.
#[test]
fn a_second_worker_joining_the_owner_loses_no_count() {
    const FLOWS: u16 = 64;
    const ROUNDS: usize = 4000;
    let ct = established(FLOWS);
    let done = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let (ct, done) = (&ct, &done);
        s.spawn(move || {
            for r in 0..ROUNDS {
                batch(ct, FLOWS, r, 0);
                done.store(r + 1, Relaxed);
            }
        });
        s.spawn(move || {
            while done.load(Relaxed) < ROUNDS / 4 {
                std::hint::spin_loop();
            }
            for r in 0..ROUNDS {
                batch(ct, FLOWS, r, 1);
            }
        });
    });
    assert!(ct.table().bias.is_shared());
    assert_counted(&ct, FLOWS, 1 + ROUNDS as u64);
}

/// The owner alone (biased: no entry locks) sends 200 flows both ways,
/// new ones made again as they go, while the control plane kills every
/// flow over and over and lists them: nothing leaks, the count is the
/// live entries, and no flow carries another's bytes. Without the
/// control plane holding the bias (the owner's lock-free writes then
/// land on entries being removed and reused) a removed entry is written
/// live again or a reused one gets the old flow's counts.
#[test]
fn the_control_plane_holds_the_owners_bias_to_kill() {
    const FLOWS: u16 = 200;
    const ROUNDS: usize = 2000;
    let ct = Ct::from_config("max 10000", 2).unwrap();
    let stop = AtomicBool::new(false);
    let frame = padded_frame;
    std::thread::scope(|s| {
        let (ct, stop) = (&ct, &stop);
        s.spawn(move || {
            let ctx = Ctx::new("h", Dir::In, 0);
            for r in 0..ROUNDS {
                let mut frames: Vec<Vec<u8>> = (0..FLOWS)
                    .map(|f| frame(f, (usize::from(f) + r) % 2 == 1))
                    .collect();
                let mut pkts: Vec<Packet<'_>> = frames.iter_mut().map(|f| Packet::new(f)).collect();
                ct.filter_batch(&mut pkts, &ctx);
            }
            stop.store(true, Relaxed);
        });
        s.spawn(move || {
            let all = StateExpr::parse("all").unwrap();
            while !stop.load(Relaxed) {
                ct.kill_states(&all);
                let _ = ct.list_states(16);
            }
        });
    });
    assert!(
        !ct.table().bias.is_shared(),
        "one worker: the owner throughout"
    );
    assert_kills_left_no_trace(&ct, ROUNDS as u64);
}
