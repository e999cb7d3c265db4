//! Many threads, many objects, random actions: nothing lost, nothing doubled, nobody
//! moving what it does not own.

mod read_then_write;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use read_then_write::ReadThenWrite;

use fsm_runtime::{
    Actor, EntryKind, InFlight, MemoryStore, Runtime, RuntimeError, Store, check_history,
};

const THREADS: usize = 8;
const OBJECTS: usize = 1_000;
const ATTEMPTS_PER_THREAD: usize = 25_000; // 200,000 in all

/// xorshift64*: reproducible per thread, no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

fn id(i: usize) -> String {
    format!("obj-{i}")
}

/// The witness flag of an object's visible or hidden action.
fn slot(index: usize, hidden: bool) -> usize {
    2 * index + hidden as usize
}

#[derive(Default)]
struct Tally {
    attempts: AtomicU64,
    started: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    abandoned: AtomicU64,
    conflicts: AtomicU64,
}

/// Finishes `handle` one of three ways, clearing the object's witness flag first
/// (once the write lands another thread may start at once).
fn finish(handle: InFlight, witness: &[AtomicBool], index: usize, how: usize, tally: &Tally) {
    witness[slot(index, handle.is_hidden())].store(false, Ordering::SeqCst);
    match how {
        0 => {
            tally.abandoned.fetch_add(1, Ordering::Relaxed);
            drop(handle);
        }
        1..=3 => {
            handle.fail().expect("nobody else writes a held object");
            tally.failed.fetch_add(1, Ordering::Relaxed);
        }
        _ => {
            handle.complete().expect("nobody else writes a held object");
            tally.completed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[test]
fn eight_threads_two_hundred_thousand_attempts_every_history_a_valid_path() {
    let machine = fsm_core::spec::load(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../specs/ovc/vm.toml"),
    )
    .unwrap();
    let rt = Runtime::new(machine.clone(), MemoryStore::new()).unwrap();
    let boot = Actor::new("boot");
    for i in 0..OBJECTS {
        rt.create(id(i), &boot).unwrap();
    }
    let actions: Vec<_> = machine.action_ids().collect();
    // Set while an action is held on the object: two actions in flight on one object
    // would find it already set.
    // One flag per object for its visible action, one for its hidden action (the
    // seed's `migrate`, which a user's action may join): see `slot`.
    let witness: Vec<AtomicBool> = (0..2 * OBJECTS).map(|_| AtomicBool::new(false)).collect();
    let tally = Tally::default();

    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (rt, machine, actions, witness, tally) =
                (&rt, &machine, &actions, &witness, &tally);
            s.spawn(move || {
                let me = Actor::new(format!("worker-{t}"));
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((t as u64 + 1) * 0x1234_5678_9abc));
                let mut held: Vec<(usize, InFlight)> = Vec::new();
                for _ in 0..ATTEMPTS_PER_THREAD {
                    // Keep up to three actions in flight, finishing one at random.
                    if held.len() == 3 || (!held.is_empty() && rng.below(2) == 0) {
                        let (index, handle) = held.swap_remove(rng.below(held.len()));
                        finish(handle, witness, index, rng.below(1000), tally);
                    }
                    let index = rng.below(OBJECTS);
                    // Mostly an action of the state last seen, rarely one into a
                    // terminal state (or the objects would all end at once).
                    let action = loop {
                        let seen = rt.state(id(index)).unwrap();
                        let candidates: Vec<_> = if rng.below(10) == 0 {
                            actions.clone()
                        } else {
                            machine.actions_from(seen).collect()
                        };
                        if candidates.is_empty() {
                            break actions[rng.below(actions.len())];
                        }
                        let a = candidates[rng.below(candidates.len())];
                        let terminal = machine
                            .rules_of(a)
                            .all(|r| machine.state(r.target).terminal);
                        if !terminal || rng.below(200) == 0 {
                            break a;
                        }
                    };
                    tally.attempts.fetch_add(1, Ordering::Relaxed);
                    match rt.start(id(index), &me, action) {
                        Ok(handle) => {
                            tally.started.fetch_add(1, Ordering::Relaxed);
                            assert!(
                                !witness[slot(index, handle.is_hidden())]
                                    .swap(true, Ordering::SeqCst),
                                "two actions in flight on {}",
                                id(index)
                            );
                            held.push((index, handle));
                        }
                        Err(RuntimeError::Conflict { .. }) => {
                            tally.conflicts.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(RuntimeError::Busy { .. } | RuntimeError::NoRule { .. }) => {}
                        Err(e) => panic!("unexpected refusal: {e}"),
                    }
                }
                for (index, handle) in held {
                    finish(handle, witness, index, 500, tally);
                }
            });
        }
    });

    // Heal what was abandoned, so that every object ends in a static state.
    let healer = Actor::new("healer");
    let mut healed = 0;
    for i in 0..OBJECTS {
        let record = rt.get(id(i)).unwrap();
        let record = if record.hidden.as_ref().is_some_and(|h| h.abandoned) {
            healed += 1;
            rt.release_hidden(id(i), &record, &healer).unwrap()
        } else {
            record
        };
        if record.in_flight.as_ref().is_some_and(|h| h.abandoned) {
            rt.roll_back(id(i), &record, &healer).unwrap();
            healed += 1;
        }
    }

    let count = |kind| {
        (0..OBJECTS)
            .map(|i| {
                rt.history(id(i))
                    .unwrap()
                    .iter()
                    .filter(|e| e.kind == kind)
                    .count() as u64
            })
            .sum::<u64>()
    };
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    assert_eq!(get(&tally.attempts), (THREADS * ATTEMPTS_PER_THREAD) as u64);
    // Every accepted write is in a history, once.
    assert_eq!(count(EntryKind::Started), get(&tally.started));
    assert_eq!(count(EntryKind::Completed), get(&tally.completed));
    assert_eq!(count(EntryKind::Failed), get(&tally.failed));
    assert_eq!(count(EntryKind::Abandoned), get(&tally.abandoned));
    assert_eq!(count(EntryKind::Healed), healed);
    assert!(
        get(&tally.started) > 50_000,
        "the run exercised the table: {} starts",
        get(&tally.started)
    );

    for i in 0..OBJECTS {
        let history = rt.history(id(i)).unwrap();
        // A valid path: versions 1, 2, 3 ... and one action in flight at a time.
        check_history(&machine, &history).unwrap_or_else(|e| panic!("{}: {e}", id(i)));
        let record = rt.get(id(i)).unwrap();
        let last = history.last().unwrap();
        assert_eq!(
            (record.state, record.version),
            (last.to, last.version),
            "{}",
            id(i)
        );
        assert_eq!((record.in_flight, record.hidden), (None, None));
        assert!(!machine.state(record.state).is_transition());
    }
}

/// Four operators, each owning one state of a ring; anyone may run any action (no
/// roles), so only ownership stands between a rogue and a move.
const RING: &str = r#"
[machine]
name = "ring"
initial = "A"
single_mutator = true

[roles]
op-a = "Owns A"
op-b = "Owns B"
op-c = "Owns C"
op-d = "Owns D"

[states]
A = { owner = "op-a" }
B = { owner = "op-b" }
C = { owner = "op-c" }
D = { owner = "op-d" }
MOVING = { transition = true }

[actions]
ab = { from = "A", via = "MOVING", to = "B" }
bc = { from = "B", to = "C" }
cd = { from = "C", to = "D" }
da = { from = "D", to = "A" }
skip = { from = ["A", "B", "C", "D"], to = "A" }
"#;

#[test]
fn nobody_moves_a_state_it_does_not_own() {
    let machine = fsm_core::spec::load_str("ring.toml", RING).unwrap();
    let rt = Runtime::new(machine.clone(), MemoryStore::new()).unwrap();
    for i in 0..OBJECTS {
        rt.create(id(i), &Actor::new("boot")).unwrap();
    }
    let roles = ["op-a", "op-b", "op-c", "op-d"];
    let owned_by = |role: &str| {
        machine
            .states()
            .iter()
            .position(|s| s.owner.as_deref() == Some(role))
    };
    let rogue_accepted = AtomicU64::new(0);
    let owner_accepted = AtomicU64::new(0);
    let rogue_refusals = AtomicU64::new(0);

    std::thread::scope(|s| {
        for (t, role) in roles.iter().enumerate() {
            for rogue in [false, true] {
                let (rt, machine) = (&rt, &machine);
                let (rogue_accepted, owner_accepted, rogue_refusals) =
                    (&rogue_accepted, &owner_accepted, &rogue_refusals);
                let own = owned_by(role).unwrap();
                s.spawn(move || {
                    let who = if rogue { "rogue" } else { "owner" };
                    let me = Actor::new(format!("{who}-{role}")).with_role(role);
                    let mut rng = Rng(0xdead_beef ^ ((t as u64) << 8) ^ rogue as u64);
                    for _ in 0..ATTEMPTS_PER_THREAD {
                        let index = rng.below(OBJECTS);
                        let Ok(record) = rt.get(id(index)) else {
                            continue;
                        };
                        // An owner acts on its own state; a rogue only on the others.
                        if (record.state.0 == own) == rogue || record.in_flight.is_some() {
                            continue;
                        }
                        // A rogue never picks an action that could start from its own
                        // state, lest the object reach that state before the start.
                        let actions: Vec<_> = machine
                            .actions_from(record.state)
                            .filter(|&a| {
                                !rogue || !machine.action(a).origins.iter().any(|o| o.0 == own)
                            })
                            .collect();
                        let action = actions[rng.below(actions.len())];
                        match rt.start(id(index), &me, action) {
                            Ok(handle) => {
                                let counter = if rogue {
                                    rogue_accepted
                                } else {
                                    owner_accepted
                                };
                                counter.fetch_add(1, Ordering::Relaxed);
                                handle.complete().unwrap();
                            }
                            Err(RuntimeError::NotOwner { owner, .. }) => {
                                assert!(rogue, "{me:?} refused its own state");
                                assert_ne!(owner, *role);
                                rogue_refusals.fetch_add(1, Ordering::Relaxed);
                            }
                            // The object moved since it was read.
                            Err(
                                RuntimeError::Busy { .. }
                                | RuntimeError::Conflict { .. }
                                | RuntimeError::NoRule { .. },
                            ) => {}
                            Err(e) => panic!("unexpected refusal: {e}"),
                        }
                    }
                });
            }
        }
    });

    assert_eq!(rogue_accepted.load(Ordering::Relaxed), 0);
    assert!(rogue_refusals.load(Ordering::Relaxed) > 10_000);
    assert!(
        owner_accepted.load(Ordering::Relaxed) > 1_000,
        "owners moved {owner_accepted:?}, rogues refused {rogue_refusals:?}"
    );
    for i in 0..OBJECTS {
        let history = rt.history(id(i)).unwrap();
        check_history(&machine, &history).unwrap();
        for e in history.iter().filter(|e| e.kind == EntryKind::Started) {
            let owner = machine.state(e.from).owner.as_deref().unwrap();
            assert_eq!(&*e.actor, format!("owner-{owner}"), "moved by a non-owner");
        }
    }
}

/// How the races of [`race_on_three_objects`] ended.
#[derive(Debug)]
struct Races {
    won: u64,
    busy: u64,
    conflicts: u64,
}

/// Threads released together by a barrier, every one on the same three objects:
/// the races the runtime exists for happen. Each thread starts `reboot` on a
/// running VM, in rounds; a lost race is a busy refusal (the other thread's
/// action is in flight) or a conflict (it wrote between this thread's read and
/// write). Rounds go on until `enough` says the races seen are the ones sought.
/// Nothing else may go wrong, no two actions may be in flight on one object, and
/// every history must be a path.
fn race_on_three_objects<S: Store>(store: S, enough: impl Fn(&Races) -> bool) -> Races {
    use std::sync::{Barrier, atomic::AtomicUsize};
    const RACERS: usize = 4;
    const HOT: usize = 3;
    const ROUNDS: usize = 2_000;
    const MAX_BATCHES: usize = 50;
    let machine = fsm_core::spec::load(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../specs/ovc/vm.toml"),
    )
    .unwrap();
    let rt = Runtime::new(machine.clone(), store).unwrap();
    let ops = Actor::new("ops");
    for i in 0..HOT {
        rt.create(id(i), &ops).unwrap();
        rt.run(id(i), &ops, "deploy").unwrap();
    }
    let barrier = Barrier::new(RACERS);
    let in_flight: Vec<AtomicUsize> = (0..HOT).map(|_| AtomicUsize::new(0)).collect();
    let (busy, conflicts, won) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let seen = || Races {
        won: won.load(Ordering::Relaxed),
        busy: busy.load(Ordering::Relaxed),
        conflicts: conflicts.load(Ordering::Relaxed),
    };
    let mut batches = 0;
    while batches < MAX_BATCHES && (batches == 0 || !enough(&seen())) {
        batches += 1;
        std::thread::scope(|s| {
            for t in 0..RACERS {
                let (rt, barrier, in_flight) = (&rt, &barrier, &in_flight);
                let (busy, conflicts, won) = (&busy, &conflicts, &won);
                s.spawn(move || {
                    let me = Actor::new(format!("racer-{t}"));
                    for round in 0..ROUNDS {
                        // Everyone goes at the same object at the same moment.
                        if round % 64 == 0 {
                            barrier.wait();
                        }
                        let index = round % HOT;
                        match rt.start(id(index), &me, "reboot") {
                            Ok(handle) => {
                                let others = in_flight[index].fetch_add(1, Ordering::SeqCst);
                                assert_eq!(others, 0, "two actions in flight on {}", id(index));
                                std::thread::yield_now();
                                in_flight[index].fetch_sub(1, Ordering::SeqCst);
                                handle.complete().expect("the holder alone writes");
                                won.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(RuntimeError::Busy { .. }) => {
                                busy.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(RuntimeError::Conflict { .. }) => {
                                conflicts.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("racer-{t}: {e}"),
                        }
                    }
                });
            }
        });
    }
    let races = seen();
    assert_eq!(
        races.busy + races.conflicts + races.won,
        (RACERS * ROUNDS * batches) as u64
    );
    for i in 0..HOT {
        let history = rt.history(id(i)).unwrap();
        check_history(&machine, &history).unwrap_or_else(|e| panic!("{}: {e}", id(i)));
        // Each write is stamped no earlier than the write before it.
        for pair in history.windows(2) {
            assert!(
                pair[0].at <= pair[1].at,
                "{}: version {} stamped before version {}",
                id(i),
                pair[1].version,
                pair[0].version
            );
        }
        let reboots = history
            .iter()
            .filter(|e| e.kind == EntryKind::Completed)
            .count()
            - 1;
        assert_eq!(history.len(), 3 + 2 * reboots);
    }
    let total_reboots: usize = (0..HOT)
        .map(|i| rt.history(id(i)).unwrap().len().saturating_sub(3) / 2)
        .sum();
    assert_eq!(
        total_reboots as u64, races.won,
        "every win is one reboot in a history"
    );
    eprintln!("4 racers on 3 objects, {batches} batches: {races:?}");
    races
}

/// On the memory store a start reads, checks and writes under one shard lock,
/// so a racer that loses always finds the winner's action in flight: every lost
/// race is a busy refusal, never a conflict.
#[test]
fn racers_on_the_memory_store_lose_to_a_busy_refusal() {
    // Races enough that the read-then-write store below sees a thousand
    // conflicts or more in as many.
    let races = race_on_three_objects(MemoryStore::new(), |r| {
        r.busy > 0 && r.won + r.busy >= 100_000
    });
    assert!(races.busy > 0, "the threads never met: {races:?}");
    assert_eq!(
        races.conflicts, 0,
        "a start read and wrote apart: {races:?}"
    );
}

/// On a store that reads, decides and then writes, two racers can read one
/// version before either writes: the second write loses its compare-and-set.
/// Both kinds of lost race happen, and both are refused.
#[test]
fn racers_on_a_read_then_write_store_lose_both_ways() {
    let races = race_on_three_objects(ReadThenWrite(MemoryStore::new()), |r| {
        r.busy > 0 && r.conflicts > 0
    });
    assert!(
        races.busy > 0,
        "no busy refusal: the threads never met: {races:?}"
    );
    assert!(
        races.conflicts > 0,
        "no conflict: no write ever raced another: {races:?}"
    );
}
