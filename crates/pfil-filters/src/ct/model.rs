//! The tracker against a reference model: random conversations (TCP
//! that follows the protocol, with sequence numbers a real stack would
//! send, plus segments far outside the window; UDP and ICMP echo either
//! way; clock jumps that expire flows) give every packet the state and
//! direction a plain model of the state machines says.

use pfil::{CtState, Packet};
use proptest::prelude::*;

use super::tcp::{ACK, FIN, PSH, RST, SYN};
use super::*;

const CLIENT: [u8; 4] = [198, 18, 0, 1];
const SERVER: [u8; 4] = [198, 18, 0, 2];

/// One side of a modelled TCP connection.
#[derive(Clone, Copy, Debug, Default)]
struct Side {
    /// pf's state number (0 closed, 2 syn sent, 4 established, 7
    /// closing, 9 fin wait 2, 10 time wait).
    state: u8,
}

/// A modelled flow.
#[derive(Clone, Copy, Debug)]
struct MFlow {
    /// The client opened it.
    orig_client: bool,
    reply_seen: bool,
    orig_more: bool,
    last: u32,
    timeout: u32,
    /// TCP sides: 0 the opener.
    sides: [Side; 2],
}

/// What an event sends.
#[derive(Clone, Copy, Debug)]
enum Ev {
    /// A TCP segment with these flags and payload, from the client or
    /// the server; `far`: its sequence is 1 GB off.
    Tcp {
        pick: u8,
        len: u32,
        far: bool,
    },
    Udp {
        client: bool,
    },
    Echo {
        client: bool,
        reply: bool,
    },
}

fn ev() -> impl Strategy<Value = (u8, Ev, u32)> {
    let e = prop_oneof![
        4 => (any::<u8>(), 0u32..3, prop::bool::weighted(0.05)).prop_map(|(pick, len, far)| Ev::Tcp {
            pick,
            len: len * 100,
            far,
        }),
        1 => any::<bool>().prop_map(|client| Ev::Udp { client }),
        1 => (any::<bool>(), any::<bool>()).prop_map(|(client, reply)| Ev::Echo { client, reply }),
    ];
    (0u8..2, e, prop_oneof![6 => Just(0u32), 1 => 1u32..200])
}

const T: [u32; 14] = PF_TIMEOUTS;

/// The model's TCP timeout for these side states.
fn tcp_timeout(s: &[Side; 2]) -> u32 {
    let (a, b) = (s[0].state, s[1].state);
    if a >= 9 && b >= 9 {
        T[Timeout::TcpClosed as usize]
    } else if a >= 7 && b >= 7 {
        T[Timeout::TcpFinWait as usize]
    } else if a < 4 || b < 4 {
        T[Timeout::TcpOpening as usize]
    } else if a >= 7 || b >= 7 {
        T[Timeout::TcpClosing as usize]
    } else {
        T[Timeout::TcpEstablished as usize]
    }
}

/// Whether a real stack in these states would send `flags`: the
/// generator only keeps such segments (besides the `far` ones), so that
/// strict tracking must accept them.
fn plausible(f: &Option<MFlow>, client: bool, flags: u8) -> bool {
    let Some(f) = f else {
        return flags == SYN && client;
    };
    let me = usize::from(client != f.orig_client);
    let (s, o) = (f.sides[me], f.sides[1 - me]);
    match flags {
        SYN => me == 0 && o.state == 0 || s.state >= 9 && o.state >= 9,
        x if x == SYN | ACK => me == 1 && s.state <= 2 && f.sides[0].state == 2,
        x if x & RST != 0 => s.state >= 2 && o.state >= 2 && s.state < 10,
        _ => {
            s.state >= 2 && o.state >= 2 && o.state != 2
                || (me == 0 && s.state == 2 && o.state == 2)
        }
    }
}

/// The model's answer for a TCP segment, updating `m`.
fn model_tcp(
    m: &mut Option<MFlow>,
    client: bool,
    flags: u8,
    far: bool,
    now: u32,
) -> (CtState, bool) {
    let bad = super::tcp::bad_flags(flags);
    if let Some(f) = m.as_mut() {
        let me = usize::from(client != f.orig_client);
        let reply = me == 1;
        if bad || far {
            return (CtState::Invalid, false);
        }
        if flags & (SYN | ACK) == SYN && f.sides[me].state >= 9 && f.sides[1 - me].state >= 9 {
            *m = None;
            return model_tcp(m, client, flags, far, now);
        }
        let (s, d) = (me, 1 - me);
        if f.sides[s].state < 2 {
            f.sides[s].state = 2;
        }
        if flags & FIN != 0 && f.sides[s].state < 7 {
            f.sides[s].state = 7;
        }
        if flags & ACK != 0 {
            if f.sides[d].state == 2 {
                f.sides[d].state = 4;
            } else if f.sides[d].state == 7 {
                f.sides[d].state = 9;
            }
        }
        if flags & RST != 0 {
            f.sides[s].state = 10;
            f.sides[d].state = 10;
        }
        f.timeout = tcp_timeout(&f.sides);
        f.last = now;
        if reply {
            f.reply_seen = true;
        }
        let st = if f.reply_seen {
            CtState::Established
        } else {
            CtState::New
        };
        return (st, reply);
    }
    if bad || flags & (SYN | ACK) != SYN {
        return (CtState::Invalid, false);
    }
    let mut sides = [Side::default(); 2];
    sides[0].state = 2;
    *m = Some(MFlow {
        orig_client: client,
        reply_seen: false,
        orig_more: false,
        last: now,
        timeout: T[Timeout::TcpFirst as usize],
        sides,
    });
    (CtState::New, false)
}

fn model_simple(m: &mut Option<MFlow>, client: bool, e: Ev, now: u32) -> (CtState, bool) {
    let Some(f) = m.as_mut() else {
        if let Ev::Echo { reply: true, .. } = e {
            return (CtState::Invalid, false);
        }
        let timeout = if let Ev::Udp { .. } = e {
            T[Timeout::UdpFirst as usize]
        } else {
            T[Timeout::IcmpFirst as usize]
        };
        *m = Some(MFlow {
            orig_client: client,
            reply_seen: false,
            orig_more: false,
            last: now,
            timeout,
            sides: [Side::default(); 2],
        });
        return (CtState::New, false);
    };
    let reply = client != f.orig_client;
    match e {
        Ev::Udp { .. } => {
            if reply {
                f.reply_seen = true;
            } else {
                f.orig_more = true;
            }
            f.timeout = T[if f.reply_seen {
                Timeout::UdpMultiple
            } else {
                Timeout::UdpSingle
            } as usize];
        }
        Ev::Echo { reply: true, .. } if !reply => return (CtState::Invalid, false),
        Ev::Echo { reply: true, .. } => f.timeout = T[Timeout::IcmpError as usize],
        _ => {}
    }
    if reply {
        f.reply_seen = true;
    }
    f.last = now;
    (
        if f.reply_seen {
            CtState::Established
        } else {
            CtState::New
        },
        reply,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn the_tracker_follows_the_model(evs in prop::collection::vec(ev(), 1..120)) {
        let table = Table::new(1000, 1);
        // Per flow index: TCP, UDP, echo models (the echo flows of the
        // client's requests and of the server's: two hosts pinging each
        // other with one identifier are two flows); and the real stacks'
        // sequence numbers (client, server) per TCP flow.
        let mut models: Vec<[Option<MFlow>; 4]> = vec![[None; 4]; 2];
        let mut seqs = [[0u32; 2]; 2];
        let mut isn = 1000u32;
        let mut now = 0u32;
        for (i, &(fi, e, dt)) in evs.iter().enumerate() {
            now += dt;
            let fi = usize::from(fi);
            // Expiry in the model.
            for m in models[fi].iter_mut() {
                if m.is_some_and(|f| now.saturating_sub(f.last) > f.timeout) {
                    *m = None;
                }
            }
            let (port_c, port_s) = (1000 + fi as u16, 80);
            let (frame, want) = match e {
                Ev::Tcp { pick, len, far } => {
                    let m = &mut models[fi][0];
                    // What a real stack on either side could send now
                    // (RSTs rarely), one of them picked.
                    let all = [SYN, SYN | ACK, ACK, ACK | PSH, FIN | ACK, RST, RST | ACK];
                    let cands: Vec<(bool, u8)> = [true, false]
                        .into_iter()
                        .flat_map(|c| all.into_iter().map(move |f| (c, f)))
                        .filter(|&(c, f)| plausible(m, c, f) && (f & RST == 0 || pick % 8 == 0))
                        .collect();
                    let Some(&(client, flags)) = cands.get(usize::from(pick) % cands.len().max(1)) else {
                        continue;
                    };
                    // Far segments: data or ACKs from a side that has
                    // sent before (a side's first segment sets its
                    // sequence, wherever it is).
                    let far = far && flags & (SYN | RST | FIN) == 0;
                    // (A far segment carries data: a segment without data
                    // only has its acknowledgement checked, as in pf.)
                    let len = if flags & (SYN | RST) != 0 { 0 } else if far { len + 100 } else { len };
                    if flags & SYN != 0 && flags & ACK == 0 && (m.is_none() || m.is_some_and(|f| f.sides[0].state >= 9 && f.sides[1].state >= 9)) {
                        // A new connection: new initial sequence numbers.
                        isn = isn.wrapping_add(1_000_003);
                        seqs[fi] = [isn, isn.wrapping_add(77_777)];
                    }
                    let me = usize::from(!client);
                    let seq = seqs[fi][me].wrapping_add(if far { 1 << 30 } else { 0 });
                    let ack = seqs[fi][1 - me];
                    let frame = super::tests::tcp_frame(
                        if client { CLIENT } else { SERVER }, if client { port_c } else { port_s },
                        if client { SERVER } else { CLIENT }, if client { port_s } else { port_c },
                        flags, seq, ack, len as usize,
                    );
                    let want = model_tcp(m, client, flags, far, now);
                    if !far && want.0 != CtState::Invalid {
                        let adv = len + u32::from(flags & SYN != 0) + u32::from(flags & FIN != 0);
                        seqs[fi][me] = seqs[fi][me].wrapping_add(adv);
                    }
                    (frame, want)
                }
                Ev::Udp { client } => {
                    let f = super::tests::udp_frame(
                        if client { CLIENT } else { SERVER }, if client { port_c } else { 53 },
                        if client { SERVER } else { CLIENT }, if client { 53 } else { port_c },
                    );
                    (f, model_simple(&mut models[fi][1], client, e, now))
                }
                Ev::Echo { client, reply } => {
                    let f = super::tests::echo_frame(
                        if client { CLIENT } else { SERVER }, if client { SERVER } else { CLIENT }, reply, 100 + fi as u16,
                    );
                    let server_asks = client == reply;
                    (f, model_simple(&mut models[fi][2 + usize::from(server_asks)], client, e, now))
                }
            };
            let mut frame = frame;
            let p = Packet::new(&mut frame);
            let c = flow::classify(&p);
            let got = table.track(c, p.len() as u32, Run { now, loose: false, max: 1000 }, 0);
            prop_assert_eq!(got, want, "event {} {:?} at {}s; models {:?}", i, e, now, models[fi]);
        }
    }
}
