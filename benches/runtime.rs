//! Completed actions per second through the in-memory runtime, against a raw
//! `AtomicU64` compare-and-set loop, a hand-written sharded store (`DashMap`) and
//! a `Mutex<HashMap>` doing the same work, and the runtime's own work written by
//! hand (string ids, named holders and entries: a floor, see `floor`), and
//! the same with the runtime's checks and records put back (the checked floor,
//! see `checked`: in the paired rounds and counted, not in criterion's
//! groups), on each number of threads in
//! `FSM_BENCH_THREADS` (default `1,2`), each thread on its own objects ("own") or
//! every thread on the same 64 ("hot").
//!
//! `FSM_BENCH_THREADS=1,2,4,8,16 cargo bench --bench runtime`: criterion's report,
//! then ns per completed action and each ratio to the first case of its group,
//! then the table of throughput ratios (fsm ÷ baseline) by thread count, from
//! the cases this run measured (a case a filter left out is not printed).
//!
//! Then the same ratios in paired rounds (`paired`): the runtime, its
//! baselines and its floor, or the queuer and the direct run, one after the
//! other in each round, in a rotated order, so that both sides of a ratio
//! meet the same minute of a machine whose speed changes from minute to
//! minute; the median ratio over the rounds, its middle half and its
//! extremes. The floor's rounds say how near the runtime's work could come
//! to a baseline written lean (the floor ÷ the DashMap store) and what the
//! runtime's own checks and plumbing cost (fsm ÷ the floor); the checked
//! floor's, how near it could come keeping every check and record (the
//! checked floor ÷ the DashMap store), and so what its plumbing alone costs
//! (fsm ÷ the checked floor).
//! `FSM_BENCH_ROUNDS` (default 21; 0: none) sets how many.
//!
//! `FSM_BENCH_COUNT=CASE,N` measures nothing: it runs one case on one thread
//! and its own objects for N actions (`count`), for callgrind to count the
//! case's instructions; `scripts/instructions --baselines` does so for each.
//!
//! One completed action is two compare-and-sets on one object: into the action's
//! transition state, then to its target (HALTED → STARTING → RUNNING, then RUNNING →
//! STOPPING → HALTED, and so on). Each thread works on its own 512 objects, in turn,
//! so threads contend on the store, not on objects. The runtime also checks the
//! table, keeps the holder and writes a history entry per move (bounded to the last
//! 16 per object here, as the mutex version keeps them, so memory stays flat).
//! On the hot objects the runtime and the stores read the object's state
//! first and pass over an object another thread holds, as a caller that
//! lists before it acts would; a start that loses the race after the read is
//! refused (the runtime's refusal is an error built with its names, as a
//! caller gets it).
//!
//! The runtime reads its default clock ([`fsm_runtime::CounterClock`]: the wall
//! clock through the processor's counter), and so does the floor; the other
//! baselines read `SystemTime::now()`, as a hand-written store would. The case
//! `fsm runtime, SystemClock` is the runtime reading that clock too.
//!
//! The queuer (groups `queue` and `queue-latency`) is measured against running
//! the same actions directly (each started, then completed: [`run_directly`]),
//! and against the bare hand-off of each started
//! action to two worker threads (a floor, see `handoff`); its own path, with
//! nothing crossing cores (group `queue-own-path`: each request run by the
//! thread waiting for it, the only worker held), against a direct run. The
//! cases `no spin` are a queuer built with `spin(Duration::ZERO)`: its idle
//! workers park at once, and its tickets block at once.
//!
//! Every queued request sends cache lines from the caller's core to a
//! worker's and back, so the bench measures that round trip too (one line
//! written in turn by two threads): before and after criterion's queue cases,
//! and in each paired round of the queue, whose slowdown it then prints
//! again for the rounds with the shorter round trips and for the others.
//! Each paired round of the queue hands the same actions off by hand too
//! (the floor), so that the queuer's slowdown is printed beside the least a
//! hand-off costs on the same cores in the same minute. On
//! a virtual machine the round trip is where the host puts its cores, and it
//! changes from one minute to the next (BENCHMARKS.md, thirtieth session).
//! Contention on hot objects pays it too, so it is printed before and after
//! each of criterion's groups of several threads as well.

use std::collections::{HashMap, VecDeque};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use criterion::{Criterion, Throughput};
use dashmap::DashMap;
use fsm::ActionId;
use fsm_runtime::{Actor, MemoryStore, ObjectId, Queuer, Record, Runtime, SystemClock};

mod report;
use report::spread::spread;

const OBJECTS_PER_THREAD: usize = 512;
/// The objects every thread works on in the "hot" cases.
const HOT: usize = 64;
const KEEP: usize = 16;

const SPEC: &str = include_str!("server.toml");

// State ids in SPEC.
const HALTED: u64 = 0;
const STARTING: u64 = 1;
const RUNNING: u64 = 2;
const STOPPING: u64 = 3;

/// Runs `work(thread, iterations)` on `threads` threads and returns the wall time.
fn on_threads(threads: usize, iters: u64, work: impl Fn(usize, u64) + Sync) -> Duration {
    let per = iters.div_ceil(threads as u64);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let work = &work;
            s.spawn(move || work(t, per));
        }
    });
    start.elapsed()
}

/// The next move of an object in `state`: (transition state, target).
fn next(state: u64) -> (u64, u64) {
    if state == HALTED {
        (STARTING, RUNNING)
    } else {
        (STOPPING, HALTED)
    }
}

/// The baseline: a word per object, state in the high half, version in the low.
fn raw_atomic(objects: &[AtomicU64], t: usize, iters: u64) {
    let mine = &objects[t * OBJECTS_PER_THREAD..(t + 1) * OBJECTS_PER_THREAD];
    for i in 0..iters as usize {
        let cell = &mine[i % OBJECTS_PER_THREAD];
        let mut current = cell.load(Ordering::Acquire);
        loop {
            let (state, version) = (current >> 32, current & 0xffff_ffff);
            let (via, target) = next(state);
            let held = via << 32 | (version + 1);
            match cell.compare_exchange(current, held, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    let done = target << 32 | (version + 2);
                    cell.compare_exchange(held, done, Ordering::AcqRel, Ordering::Acquire)
                        .unwrap();
                    break;
                }
                Err(found) => current = found,
            }
        }
    }
}

/// What the mutex version keeps per object: the runtime's record and history.
struct Slot {
    state: u64,
    version: u64,
    holder: Option<(u64, &'static str)>,
    history: VecDeque<(u64, u64, u64, SystemTime)>,
}

/// Which object a thread works on at its `i`th action: its own, in turn, or one
/// of the `HOT` objects every thread shares.
#[derive(Clone, Copy)]
enum Objects {
    Own,
    Hot,
}

impl Objects {
    fn pick(self, t: usize, i: usize) -> usize {
        match self {
            Objects::Own => t * OBJECTS_PER_THREAD + i % OBJECTS_PER_THREAD,
            // Threads start apart and walk the same objects.
            Objects::Hot => (t * 7 + i) % HOT,
        }
    }

    fn count(self, threads: usize) -> usize {
        match self {
            Objects::Own => threads * OBJECTS_PER_THREAD,
            Objects::Hot => HOT,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Objects::Own => "own",
            Objects::Hot => "hot",
        }
    }
}

fn new_slot() -> Slot {
    Slot {
        state: HALTED,
        version: 1,
        holder: None,
        history: VecDeque::new(),
    }
}

/// One write to a slot, as the runtime makes it: compare state and version, set
/// the state and the holder, push a timestamped entry into the bounded history.
/// `None` when the slot changed since it was read (a lost race: read again).
fn write_slot(
    slot: &mut Slot,
    expect: (u64, u64),
    to: u64,
    holder: Option<(u64, &'static str)>,
) -> Option<u64> {
    if (slot.state, slot.version) != expect || (holder.is_some() && slot.holder.is_some()) {
        return None;
    }
    slot.state = to;
    slot.version += 1;
    slot.holder = holder;
    if slot.history.len() == KEEP {
        slot.history.pop_front();
    }
    slot.history
        .push_back((expect.0, to, slot.version, SystemTime::now()));
    Some(slot.version)
}

/// `iters` completed actions (start, then complete) through a store whose
/// `read` gives an object's (state, version) and whose `write` applies
/// `write_slot` to it; a lost race reads again.
fn store_work(
    objects: Objects,
    t: usize,
    iters: u64,
    read: impl Fn(usize) -> (u64, u64),
    write: impl Fn(usize, (u64, u64), u64, Option<(u64, &'static str)>) -> Option<u64>,
) {
    let mut i = 0;
    let mut done = 0;
    while done < iters {
        let id = objects.pick(t, i);
        i += 1;
        let (state, version) = read(id);
        if state == STARTING || state == STOPPING {
            continue; // held by another thread
        }
        let (via, target) = next(state);
        let Some(v) = write(id, (state, version), via, Some((state, "bench"))) else {
            continue;
        };
        write(id, (via, v), target, None).expect("the holder completes its own action");
        done += 1;
    }
}

#[inline(never)] // `count` runs it for callgrind, which names it
fn mutex_map(map: &Mutex<HashMap<usize, Slot>>, objects: Objects, t: usize, iters: u64) {
    store_work(
        objects,
        t,
        iters,
        |id| {
            let map = map.lock().unwrap();
            let slot = &map[&id];
            (slot.state, slot.version)
        },
        |id, expect, to, holder| {
            write_slot(
                map.lock().unwrap().get_mut(&id).unwrap(),
                expect,
                to,
                holder,
            )
        },
    );
}

/// The hand-written sharded store: the same work on a `DashMap`, one shard lock
/// per access.
#[inline(never)] // `count` runs it for callgrind, which names it
fn dash_map(map: &DashMap<usize, Slot>, objects: Objects, t: usize, iters: u64) {
    store_work(
        objects,
        t,
        iters,
        |id| {
            let slot = map.get(&id).unwrap();
            (slot.state, slot.version)
        },
        |id, expect, to, holder| write_slot(&mut map.get_mut(&id).unwrap(), expect, to, holder),
    );
}

#[inline(never)] // `count` runs it for callgrind, which names it
fn runtime_work(rt: &Runtime, ids: &[ObjectId], objects: Objects, t: usize, iters: u64) {
    let actor = &Actor::new(format!("worker-{t}"));
    act_on(
        ids,
        objects,
        t,
        iters,
        |id| rt.state(id).unwrap().0 as u64,
        |id, action| {
            let held = rt.start(id, actor, action).map_err(|e| e.to_string())?;
            black_box(held.complete().unwrap());
            Ok(())
        },
    );
}

/// `iters` completed actions on `ids` through `act` (a start, then its
/// completion: an error when the start is refused), each the action that
/// moves its object on. Objects of this thread alternate start and stop in
/// lockstep; a hot object's state is read first (`state`), and one another
/// thread holds is passed over, as `store_work` passes it over, rather than
/// refused by a start that builds its error. A start refused on a hot object
/// lost a race (another thread held it or moved it first); on its own
/// objects, it is a failure.
#[inline(always)]
fn act_on(
    ids: &[ObjectId],
    objects: Objects,
    t: usize,
    iters: u64,
    state: impl Fn(&ObjectId) -> u64,
    mut act: impl FnMut(&ObjectId, ActionId) -> Result<(), String>,
) {
    let (start, stop) = (ActionId(0), ActionId(1));
    let mut i = 0;
    let mut done = 0;
    while done < iters {
        let id = &ids[objects.pick(t, i)];
        i += 1;
        let state = match objects {
            Objects::Own => {
                if ((i - 1) / OBJECTS_PER_THREAD).is_multiple_of(2) {
                    HALTED
                } else {
                    RUNNING
                }
            }
            Objects::Hot => state(id),
        };
        if state == STARTING || state == STOPPING {
            continue;
        }
        let action = if state == HALTED { start } else { stop };
        match act(id, action) {
            Ok(()) => done += 1,
            Err(_) if matches!(objects, Objects::Hot) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

/// A floor for the runtime's own work: what the runtime keeps, hand-written
/// lean, reading the runtime's clock. String ids hashed once (foldhash) into 16 shards, each a
/// `Mutex<HashTable>`; a start checks that no holder is in the slot, stamps the
/// clock, boxes the holder (with the actor's interned name; in the box the
/// object's last holder left) and pushes a named entry into the bounded
/// history; a completion checks the holder's version, stamps the clock, keeps
/// the holder's box for the next start and pushes an entry. No
/// table lookup beyond the move, no roles, owners, guards, watchers, tracing or
/// errors with messages: what is left between it and the runtime is plumbing.
mod floor {
    use std::collections::VecDeque;
    use std::hash::BuildHasher;
    use std::sync::{Arc, Mutex};
    use std::time::SystemTime;

    use fsm_runtime::{ActorName, Clock, CounterClock};

    use super::{KEEP, Objects, black_box, next};

    const SHARDS: usize = 16;

    struct Holder {
        actor: ActorName,
        since: SystemTime,
        version: u64,
    }

    /// What the runtime's `Entry` holds, with ids the width of the runtime's.
    #[allow(dead_code)] // written, never read back
    struct Entry {
        version: u64,
        at: SystemTime,
        actor: ActorName,
        action: usize,
        from: usize,
        to: usize,
    }

    struct Slot {
        state: u64,
        version: u64,
        changed_at: SystemTime,
        in_flight: Option<Box<Holder>>,
        spare: Option<Box<Holder>>,
        history: VecDeque<Entry>,
    }

    type Shard = Mutex<hashbrown::HashTable<(Arc<str>, Slot)>>;

    pub struct Store {
        shards: Box<[Shard]>,
        hasher: foldhash::fast::RandomState,
    }

    /// A started action: its object, the version its start wrote, its target.
    pub struct Held(Arc<str>, u64, u64);

    /// The ids of `n` objects for the floor, as the runtime's cases name
    /// theirs (`s-{i}`).
    pub fn texts(n: usize) -> Vec<Arc<str>> {
        (0..n).map(|i| format!("s-{i}").into()).collect()
    }

    impl Store {
        pub fn new(ids: &[Arc<str>]) -> Store {
            let store = Store {
                shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
                hasher: Default::default(),
            };
            for id in ids {
                let slot = Slot {
                    state: super::HALTED,
                    version: 1,
                    changed_at: SystemTime::now(),
                    in_flight: None,
                    spare: None,
                    history: VecDeque::new(),
                };
                let hash = store.hasher.hash_one(&**id);
                store.shards[(hash >> 32) as usize % SHARDS]
                    .lock()
                    .unwrap()
                    .insert_unique(hash, (id.clone(), slot), |(k, _)| {
                        store.hasher.hash_one(&**k)
                    });
            }
            store
        }

        fn with<T>(&self, id: &Arc<str>, f: impl FnOnce(&mut Slot) -> T) -> T {
            let hash = self.hasher.hash_one(&**id);
            let mut shard = self.shards[(hash >> 32) as usize % SHARDS].lock().unwrap();
            let (_, slot) = shard
                .find_mut(hash, |(k, _)| Arc::ptr_eq(k, id) || k == id)
                .unwrap();
            f(slot)
        }

        fn push(slot: &mut Slot, entry: Entry) {
            if slot.history.len() == KEEP {
                slot.history.pop_front();
            }
            slot.history.push_back(entry);
        }

        /// `None`: held already.
        pub fn start(&self, id: &Arc<str>, actor: ActorName) -> Option<Held> {
            self.with(id, |slot| {
                if slot.in_flight.is_some() {
                    return None;
                }
                let (via, target) = next(slot.state);
                let at = CounterClock.now();
                let from = slot.state;
                slot.version += 1;
                slot.state = via;
                slot.changed_at = at;
                let holder = Holder {
                    actor,
                    since: at,
                    version: slot.version,
                };
                slot.in_flight = Some(match slot.spare.take() {
                    Some(mut kept) => {
                        *kept = holder;
                        kept
                    }
                    None => Box::new(holder),
                });
                let entry = Entry {
                    version: slot.version,
                    at,
                    actor,
                    action: 0,
                    from: from as usize,
                    to: via as usize,
                };
                Self::push(slot, entry);
                Some(Held(id.clone(), slot.version, target))
            })
        }

        pub fn complete(&self, Held(id, version, target): Held) -> u64 {
            self.with(&id, |slot| {
                let holder = slot.in_flight.take().filter(|h| h.version == version);
                let holder = holder.expect("the holder completes its own action");
                let at = CounterClock.now();
                let from = slot.state;
                slot.version += 1;
                slot.state = target;
                slot.changed_at = at;
                let entry = Entry {
                    version: slot.version,
                    at,
                    actor: holder.actor,
                    action: 0,
                    from: from as usize,
                    to: target as usize,
                };
                black_box(holder.since);
                slot.spare = Some(holder);
                Self::push(slot, entry);
                slot.version
            })
        }
    }

    #[inline(never)] // `count` runs it for callgrind, which names it
    pub fn work(store: &Store, ids: &[Arc<str>], objects: Objects, t: usize, iters: u64) {
        let actor = ActorName::new(format!("worker-{t}"));
        let (mut i, mut done) = (0, 0);
        while done < iters {
            let id = &ids[objects.pick(t, i)];
            i += 1;
            if let Some(held) = store.start(id, actor) {
                black_box(store.complete(held));
                done += 1;
            }
        }
    }
}

/// The floor with the runtime's checks and records: what the runtime does for
/// an action, written lean by hand on the runtime's ids, actors, machine,
/// clock and publisher, with its `Record`, `Holder` and `Entry` copied field
/// for field, to tell how much of the gap between the runtime and the floor
/// is its checks and how much its plumbing. Beside the floor's work it checks
/// what the runtime checks (a holder in the action's slot, visible or hidden;
/// the table's rule for the action from the state, through `Machine::rule`;
/// the actor's roles; the state's owner; that the action has no guard: the
/// runtime runs guards before it takes its lock, and the bench's actions have
/// none), stamps no earlier than the object's last write (the clock behind a
/// `Box<dyn Clock>`, as the runtime's), keeps every field of the record and
/// the holder (the holder's box kept from one action to the next), checks the
/// holder's fence at the completion, asks the watchers' `Publisher` before
/// each entry, logs each step through `tracing` (no subscriber listens) and
/// hands back a copy of the record at the completion, as `InFlight::complete`
/// does. A refusal is an enum of ids, as the runtime's is before it names
/// them. Left out: the `Store` trait between the runtime and its store, and
/// the errors' messages. Where it differs otherwise it does more: it hashes
/// the id's text at each call (an `ObjectId` carries its hash) and locks a
/// `std::sync::Mutex` (the memory store, a spin lock).
mod checked {
    use std::hash::BuildHasher;
    use std::sync::{Arc, Mutex};
    use std::time::SystemTime;

    use fsm::{ActionId, StateId};
    use fsm_core::{Machine, Rule};
    use fsm_runtime::{Actor, ActorName, Clock, CounterClock, EntryKind, ObjectId, Publisher};

    use super::{KEEP, Objects, act_on, black_box};

    const SHARDS: usize = 16;

    /// A history entry with its ids in 32 bits, as the memory store keeps it.
    #[allow(dead_code)] // written, never read back
    struct Packed {
        version: u64,
        at: SystemTime,
        actor: ActorName,
        action: u32,
        from: u32,
        to: u32,
        kind: EntryKind,
    }

    /// The runtime's `Holder`, field for field.
    #[derive(Clone)]
    #[allow(dead_code)] // written, never read back
    struct Holder {
        action: ActionId,
        origin: StateId,
        actor: ActorName,
        since: SystemTime,
        abandoned: bool,
        version: u64,
        session: Option<i64>,
        proposed: Option<Arc<str>>,
    }

    /// The runtime's `Record`, field for field, copied as it copies one.
    #[derive(Clone)]
    #[allow(dead_code)] // copied, never read back
    pub struct Record {
        state: StateId,
        version: u64,
        changed_at: SystemTime,
        in_flight: Option<Box<Holder>>,
        hidden: Option<Box<Holder>>,
        data: Option<Arc<str>>,
    }

    /// The runtime's `Entry`, field for field.
    struct Entry {
        version: u64,
        at: SystemTime,
        actor: ActorName,
        kind: EntryKind,
        action: Option<ActionId>,
        from: StateId,
        to: StateId,
    }

    struct Slot {
        record: Record,
        spare: Option<Box<Holder>>,
        history: Vec<Packed>,
        next: usize,
    }

    type Shard = Mutex<hashbrown::HashTable<(ObjectId, Box<Slot>)>>;

    pub struct Store {
        shards: Box<[Shard]>,
        hasher: foldhash::fast::RandomState,
        machine: Machine,
        clock: Box<dyn Clock>,
        publisher: Publisher,
    }

    /// Why a start or a completion was refused: ids, no names.
    #[derive(Debug)]
    #[allow(dead_code)] // read by `Debug` only
    pub enum Refused {
        NotFound,
        Busy { holder: ActorName },
        NoRule { state: StateId },
        MissingRole,
        NotOwner { state: StateId },
        Guarded,
        Lost,
    }

    /// A started action: its object, the rule it took, the version its start
    /// wrote and whether it is hidden.
    pub struct Held<'a> {
        id: &'a ObjectId,
        hash: u64,
        rule: Rule,
        version: u64,
        hidden: bool,
    }

    impl Store {
        pub fn new(machine: Machine, ids: &[ObjectId]) -> Store {
            let store = Store {
                shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
                hasher: Default::default(),
                machine,
                clock: Box::new(CounterClock),
                publisher: Publisher::new(16),
            };
            let initial = store.machine.initial();
            for id in ids {
                let slot = Slot {
                    record: Record {
                        state: initial,
                        version: 1,
                        changed_at: SystemTime::now(),
                        in_flight: None,
                        hidden: None,
                        data: None,
                    },
                    spare: None,
                    history: Vec::with_capacity(KEEP),
                    next: 0,
                };
                let hash = store.hasher.hash_one(id.as_str());
                store.shards[(hash >> 32) as usize % SHARDS]
                    .lock()
                    .unwrap()
                    .insert_unique(hash, (id.clone(), Box::new(slot)), |(k, _)| {
                        store.hasher.hash_one(k.as_str())
                    });
            }
            store
        }

        fn with<T>(
            &self,
            id: &ObjectId,
            hash: u64,
            f: impl FnOnce(&mut Slot) -> Result<T, Refused>,
        ) -> Result<T, Refused> {
            let mut shard = self.shards[(hash >> 32) as usize % SHARDS].lock().unwrap();
            match shard.find_mut(hash, |(k, _)| k == id) {
                Some((_, slot)) => f(slot),
                None => Err(Refused::NotFound),
            }
        }

        /// Publishes the entry to any watcher, then keeps it in the bounded history.
        fn append(&self, id: &ObjectId, slot: &mut Slot, entry: Entry) {
            // Nobody watches in the bench: the runtime's cost then is this load.
            if self.publisher.is_watched() {
                black_box(id);
            }
            let packed = Packed {
                version: entry.version,
                at: entry.at,
                actor: entry.actor,
                action: entry.action.map_or(u32::MAX, |a| a.0 as u32),
                from: entry.from.0 as u32,
                to: entry.to.0 as u32,
                kind: entry.kind,
            };
            if slot.history.len() < KEEP {
                slot.history.push(packed);
            } else {
                slot.history[slot.next] = packed;
                slot.next = (slot.next + 1) % KEEP;
            }
        }

        pub fn start<'a>(
            &self,
            id: &'a ObjectId,
            actor: &Actor,
            action: ActionId,
        ) -> Result<Held<'a>, Refused> {
            let hash = self.hasher.hash_one(id.as_str());
            let held = self.with(id, hash, |slot| {
                let record = &mut slot.record;
                let def = self.machine.action(action);
                let hidden_holder = if def.hidden {
                    record.hidden.as_ref()
                } else {
                    None
                };
                if let Some(holder) = record.in_flight.as_ref().or(hidden_holder) {
                    return Err(Refused::Busy {
                        holder: holder.actor,
                    });
                }
                let state = record.state;
                let rule = (self.machine.rule(action, state)).ok_or(Refused::NoRule { state })?;
                if !def.roles.is_empty() && !def.roles.iter().any(|r| actor.has_role(r)) {
                    return Err(Refused::MissingRole);
                }
                if rule.changes_state
                    && let Some(owner) = &self.machine.state(state).owner
                    && !actor.has_role(owner)
                {
                    return Err(Refused::NotOwner { state });
                }
                if !def.guards.is_empty() {
                    return Err(Refused::Guarded);
                }
                let at = self.clock.now().max(record.changed_at);
                let to = rule.via.unwrap_or(state);
                record.state = to;
                record.version += 1;
                record.changed_at = at;
                let version = record.version;
                let holder = Holder {
                    action,
                    origin: state,
                    actor: actor.actor_name(),
                    since: at,
                    abandoned: false,
                    version,
                    session: None,
                    proposed: None,
                };
                let boxed = match slot.spare.take() {
                    Some(mut kept) => {
                        *kept = holder;
                        kept
                    }
                    None => Box::new(holder),
                };
                if def.hidden {
                    record.hidden = Some(boxed);
                } else {
                    record.in_flight = Some(boxed);
                }
                let entry = Entry {
                    version,
                    at,
                    actor: actor.actor_name(),
                    kind: EntryKind::Started,
                    action: Some(action),
                    from: state,
                    to,
                };
                self.append(id, slot, entry);
                Ok(Held {
                    id,
                    hash,
                    rule,
                    version,
                    hidden: def.hidden,
                })
            })?;
            tracing::debug!(version = held.version, "started");
            Ok(held)
        }

        pub fn complete(&self, held: Held<'_>) -> Result<Record, Refused> {
            let Held {
                id,
                hash,
                rule,
                version,
                hidden,
            } = held;
            let done = self.with(id, hash, |slot| {
                let record = &mut slot.record;
                let holder = match hidden {
                    true => &mut record.hidden,
                    false => &mut record.in_flight,
                };
                // The fence: the hold is still the one this start wrote.
                let Some(mut ended) = holder.take_if(|h| h.version == version) else {
                    return Err(Refused::Lost);
                };
                let at = self.clock.now().max(record.changed_at);
                let from = record.state;
                record.state = rule.target;
                record.version += 1;
                record.changed_at = at;
                let entry = Entry {
                    version: record.version,
                    at,
                    actor: ended.actor,
                    kind: EntryKind::Completed,
                    action: Some(rule.action),
                    from,
                    to: rule.target,
                };
                ended.proposed = None;
                slot.spare = Some(ended);
                self.append(id, slot, entry);
                Ok(slot.record.clone())
            });
            tracing::debug!(object = %id, ok = done.is_ok(), "finished");
            done
        }
    }

    impl Store {
        /// The object's state, read under its shard's lock.
        pub fn state(&self, id: &ObjectId) -> Result<StateId, Refused> {
            let hash = self.hasher.hash_one(id.as_str());
            self.with(id, hash, |slot| Ok(slot.record.state))
        }
    }

    /// As `runtime_work`, on the checked floor.
    #[inline(never)] // `count` runs it for callgrind, which names it
    pub fn work(store: &Store, ids: &[ObjectId], objects: Objects, t: usize, iters: u64) {
        let actor = &Actor::new(format!("worker-{t}"));
        act_on(
            ids,
            objects,
            t,
            iters,
            |id| store.state(id).unwrap().0 as u64,
            |id, action| {
                let held = store
                    .start(id, actor, action)
                    .map_err(|e| format!("{e:?}"))?;
                black_box(store.complete(held).unwrap());
                Ok(())
            },
        );
    }
}

/// The checked floor's name in the paired rounds' report (`checked`).
const CHECKED: &str = "runtime work by hand, checked (checked floor)";

const CASES: [&str; 6] = [
    "raw AtomicU64 compare-and-set",
    "DashMap store",
    "Mutex around a HashMap",
    "fsm runtime (MemoryStore)",
    "runtime work by hand (floor)",
    "fsm runtime, SystemClock",
];

/// The thread counts to measure: `FSM_BENCH_THREADS` (`1,2,4,8,16`), else 1 and 2.
fn thread_counts() -> Vec<usize> {
    std::env::var("FSM_BENCH_THREADS")
        .ok()
        .map(|list| {
            list.split(',')
                .map(|n| {
                    n.trim()
                        .parse()
                        .expect("FSM_BENCH_THREADS: numbers, comma-separated")
                })
                .collect()
        })
        .unwrap_or_else(|| vec![1, 2])
}

fn group(threads: usize, objects: Objects) -> String {
    format!("runtime-{threads}-threads-{}", objects.name())
}

fn bench(c: &mut Criterion, threads_list: &[usize]) -> Vec<(String, Duration, Duration)> {
    let machine = fsm::spec::load_str("server.toml", SPEC).unwrap();
    assert_eq!(machine.find_state("STOPPING").unwrap().0 as u64, STOPPING);
    let mut round_trips = Vec::new();
    for &threads in threads_list {
        for objects in [Objects::Own, Objects::Hot] {
            let n = objects.count(threads);
            // The machine's cores on either side of a group of several
            // threads (see `line_round_trip`): where the host put them decides
            // what contention costs, and it moves from one minute to the next.
            let before = (threads > 1).then(line_round_trip);
            let mut g = c.benchmark_group(group(threads, objects));
            g.throughput(Throughput::Elements(1));

            if matches!(objects, Objects::Own) {
                let atomics: Vec<AtomicU64> =
                    (0..n).map(|_| AtomicU64::new(HALTED << 32 | 1)).collect();
                g.bench_function(CASES[0], |b| {
                    b.iter_custom(|iters| {
                        on_threads(threads, iters, |t, k| raw_atomic(&atomics, t, k))
                    })
                });
            }

            let dash: DashMap<usize, Slot> = (0..n).map(|i| (i, new_slot())).collect();
            g.bench_function(CASES[1], |b| {
                b.iter_custom(|iters| {
                    on_threads(threads, iters, |t, k| dash_map(&dash, objects, t, k))
                })
            });

            let map: Mutex<HashMap<usize, Slot>> =
                Mutex::new((0..n).map(|i| (i, new_slot())).collect());
            g.bench_function(CASES[2], |b| {
                b.iter_custom(|iters| {
                    on_threads(threads, iters, |t, k| mutex_map(&map, objects, t, k))
                })
            });

            let texts = floor::texts(n);
            let by_hand = floor::Store::new(&texts);
            g.bench_function(CASES[4], |b| {
                b.iter_custom(|iters| {
                    on_threads(threads, iters, |t, k| {
                        floor::work(&by_hand, &texts, objects, t, k)
                    })
                })
            });

            // The runtime with its default clock, then with the system clock the
            // baselines read: what the runtime owes to its clock.
            for (case, system_clock) in [(CASES[3], false), (CASES[5], true)] {
                let store = MemoryStore::new().keep_history(KEEP);
                let builder = Runtime::builder(machine.clone(), store);
                let builder = if system_clock {
                    builder.clock(SystemClock)
                } else {
                    builder
                };
                let rt = builder.build().unwrap();
                let actor = Actor::new("bench");
                let ids = created(&rt, &actor, "s", n);
                // On its own objects, every object must be HALTED when a sample
                // starts at an even round; keep each thread's iteration count a
                // multiple of two rounds.
                let round = 2 * OBJECTS_PER_THREAD as u64 * threads as u64;
                g.bench_function(case, |b| {
                    b.iter_custom(|iters| {
                        let iters = match objects {
                            Objects::Own => iters.div_ceil(round) * round,
                            Objects::Hot => iters,
                        };
                        on_threads(threads, iters, |t, k| {
                            runtime_work(&rt, &ids, objects, t, k)
                        })
                    })
                });
            }
            g.finish();
            if let Some(before) = before {
                round_trips.push((group(threads, objects), before, line_round_trip()));
            }
        }
    }
    round_trips
}

/// The table the goals are written in: throughput of the runtime over
/// each baseline's (above 1.0, the runtime is faster), by thread count.
fn print_table(threads_list: &[usize]) {
    let (fsm, system) = (CASES[3], CASES[5]);
    let rows = [
        (
            "fsm ÷ DashMap store, own objects",
            Objects::Own,
            CASES[1],
            fsm,
        ),
        (
            "fsm ÷ DashMap store, hot objects",
            Objects::Hot,
            CASES[1],
            fsm,
        ),
        (
            "fsm ÷ Mutex<HashMap>, own objects",
            Objects::Own,
            CASES[2],
            fsm,
        ),
        (
            "fsm ÷ Mutex<HashMap>, hot objects",
            Objects::Hot,
            CASES[2],
            fsm,
        ),
        (
            "fsm ÷ its work by hand (floor), own",
            Objects::Own,
            CASES[4],
            fsm,
        ),
        (
            "fsm ÷ its work by hand (floor), hot",
            Objects::Hot,
            CASES[4],
            fsm,
        ),
        (
            "fsm, SystemClock ÷ DashMap, own",
            Objects::Own,
            CASES[1],
            system,
        ),
        (
            "fsm, SystemClock ÷ DashMap, hot",
            Objects::Hot,
            CASES[1],
            system,
        ),
        (
            "fsm, SystemClock ÷ Mutex, own",
            Objects::Own,
            CASES[2],
            system,
        ),
    ];
    print!("\n{:<36}", "throughput ratio, threads:");
    for t in threads_list {
        print!(" {t:>7}");
    }
    println!();
    for (label, objects, baseline, case) in rows {
        print!("{label:<36}");
        for &t in threads_list {
            let g = group(t, objects);
            match (report::mean(&g, baseline), report::mean(&g, case)) {
                (Some(base), Some(fsm)) => print!(" {:>7.2}", base / fsm),
                _ => print!(" {:>7}", "-"),
            }
        }
        println!();
    }
}

/// A floor for the queuer: the least a queued request can cost on this machine.
/// The caller starts the action through the runtime and pushes the handle on a
/// lock-free list (`crossbeam_deque::Injector`); two workers that never park
/// take handles off it, complete them and leave each record in a slot of its
/// object's, allocated once and reused, which the caller polls. No per-object
/// queues, order, steps, fence checks, panics caught, wake-ups or allocation per
/// request: what is left is the start, the completion, and each request's cache
/// lines (the object's, its holder's, its slot's) crossing between the caller's
/// core and a worker's.
///
/// The same floor takes two of the queuer's duties, one after the other, to
/// see what each costs: a [`Task`](handoff::Task) allocated for each request
/// and shared by the caller and the worker (the queuer's holds the job and
/// the outcome), and then an order per object (`ordered`), kept as the
/// queuer keeps it: each request's key put in a map of its stripe's (one of
/// 256, under a lock) and taken out by the worker that ends it. The queuer's
/// other duties (its intake lock, tickets, spares, steps, panics caught,
/// wake-ups, stop and retries) are what is left between those and the queuer
/// itself.
mod handoff {
    use std::hash::BuildHasher;
    use std::ops::Deref;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use fsm_runtime::{InFlight, ObjectId, Record};

    /// Where a worker leaves a request's record.
    #[derive(Default)]
    pub struct Slot {
        done: AtomicBool,
        record: Mutex<Option<Record>>,
    }

    impl Slot {
        /// Spins until the record is there, and takes it.
        pub fn take(&self) -> Record {
            while !self.done.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            self.done.store(false, Ordering::Relaxed);
            self.record.lock().unwrap().take().unwrap()
        }

        fn give(&self, record: Record) {
            *self.record.lock().unwrap() = Some(record);
            self.done.store(true, Ordering::Release);
        }
    }

    /// A request's own task: its slot, on lines of its own, about the size
    /// of the queuer's task.
    #[derive(Default)]
    pub struct Task {
        slot: Slot,
        _job: [u64; 24],
    }

    impl Deref for Task {
        type Target = Slot;

        fn deref(&self) -> &Slot {
            &self.slot
        }
    }

    /// Where a worker leaves a record: an object's slot, or a request's task.
    pub trait Place: Send {
        fn slot(&self) -> &Slot;
    }

    impl Place for &Slot {
        fn slot(&self) -> &Slot {
            self
        }
    }

    impl Place for std::sync::Arc<Task> {
        fn slot(&self) -> &Slot {
            &self.slot
        }
    }

    type Map = std::collections::HashMap<ObjectId, (), foldhash::fast::RandomState>;

    /// One stripe's keys with work, on lines of its own.
    #[repr(align(128))]
    #[derive(Default)]
    struct Stripe(Mutex<Map>);

    /// The handles started and not yet taken by a worker, each with where its
    /// record goes; and, when ordered, the keys with work.
    pub struct Floor<'r, S> {
        jobs: crossbeam_deque::Injector<(InFlight<'r>, S)>,
        stripes: Option<Vec<Stripe>>,
        stop: AtomicBool,
    }

    impl<'r, S: Place> Floor<'r, S> {
        pub fn new(ordered: bool) -> Self {
            Floor {
                jobs: Default::default(),
                stripes: ordered.then(|| (0..256).map(|_| Stripe::default()).collect()),
                stop: AtomicBool::new(false),
            }
        }

        fn stripe(&self, id: &ObjectId) -> Option<&Stripe> {
            let stripes = self.stripes.as_ref()?;
            let hash = foldhash::fast::FixedState::with_seed(1).hash_one(id.as_str());
            Some(&stripes[hash as usize % stripes.len()])
        }

        pub fn push(&self, handle: InFlight<'r>, slot: S) {
            if let Some(stripe) = self.stripe(handle.id()) {
                stripe.0.lock().unwrap().insert(handle.id().clone(), ());
            }
            self.jobs.push((handle, slot));
        }

        /// Bursts of requests, one on each object (`burst`, given the
        /// floor), timed while two threads work: the time per request,
        /// scaled to `iters`.
        pub fn time(&self, iters: u64, mut burst: impl FnMut(&Self)) -> Duration {
            let rounds = iters.div_ceil(super::OBJECTS_PER_THREAD as u64);
            std::thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| self.work());
                }
                let start = Instant::now();
                for _ in 0..rounds {
                    burst(self);
                }
                let took = start.elapsed();
                self.stop.store(true, Ordering::Release);
                took.mul_f64(iters as f64 / (rounds * super::OBJECTS_PER_THREAD as u64) as f64)
            })
        }

        /// A worker: completes every handle it takes, takes its key out of
        /// the map when ordered, and leaves the record in its slot, until
        /// stopped.
        fn work(&self) {
            loop {
                match self.jobs.steal().success() {
                    Some((handle, slot)) => {
                        let id = handle.id().clone();
                        let record = handle.complete().unwrap();
                        if let Some(stripe) = self.stripe(&id) {
                            stripe.0.lock().unwrap().remove(&id);
                        }
                        slot.slot().give(record);
                    }
                    None if self.stop.load(Ordering::Acquire) => return,
                    None => std::thread::yield_now(),
                }
            }
        }
    }
}

const QUEUE_CASES: [&str; 3] = [
    "direct runtime",
    "queued (2 workers)",
    "handoff by hand (floor, 2 workers)",
];
/// The floor with the queuer's duties added one after the other ([`handoff`]).
const DUTY_CASES: [&str; 2] = [
    "handoff + task per request",
    "handoff + task + order per object",
];
const LATENCY_CASES: [&str; 2] = ["direct run", "queued request + wait"];
const NO_SPIN_CASES: [&str; 3] = [
    "direct run",
    "queued (2 workers, no spin)",
    "queued request + wait (no spin)",
];
const OWN_PATH_CASES: [&str; 2] = ["direct run", "queued, run by its waiter"];

/// One request for `action` on `id`, queued on `queuer` and waited for.
fn round_trip(
    queuer: &Queuer,
    rt: &Runtime,
    id: &ObjectId,
    actor: &Actor,
    action: ActionId,
) -> Record {
    let ticket = queuer.request(rt, id, actor, action).run(|_| Ok(()));
    ticket.unwrap().wait().unwrap()
}

/// `n` objects made on `rt`, named `{prefix}-{i}`.
fn created(rt: &Runtime, actor: &Actor, prefix: &str, n: usize) -> Vec<ObjectId> {
    let ids: Vec<ObjectId> = (0..n)
        .map(|i| ObjectId::from(format!("{prefix}-{i}")))
        .collect();
    for id in &ids {
        rt.create(id, actor).unwrap();
    }
    ids
}

/// Start, then stop, then start...: each call the action of the next round,
/// for objects that all move together.
fn alternating() -> impl FnMut() -> ActionId {
    let mut round = 0usize;
    move || {
        round += 1;
        ActionId((round + 1) % 2)
    }
}

/// `iters` units of work done a lap of `n` at a time, each lap's action from
/// `action` (`lap` does one): the time, scaled to `iters`.
fn in_laps(
    n: usize,
    iters: u64,
    action: &mut impl FnMut() -> ActionId,
    mut lap: impl FnMut(ActionId),
) -> Duration {
    let laps = iters.div_ceil(n as u64);
    let start = Instant::now();
    for _ in 0..laps {
        lap(action());
    }
    start
        .elapsed()
        .mul_f64(iters as f64 / (laps * n as u64) as f64)
}

/// A queued request's work done directly: the start, then the completion, which
/// reads the clock again, as a request's does after its job. (`Runtime::run`
/// reads it once, its completion stamped with its start's time: a request,
/// whose job runs between, cannot.)
#[inline]
fn run_directly(rt: &Runtime, id: &ObjectId, actor: &Actor, action: ActionId) -> Record {
    rt.start(id, actor, action).unwrap().complete().unwrap()
}

/// `iters` actions run directly ([`run_directly`]), a lap over `ids` at a time
/// (each lap's action from `action`): the time, scaled to `iters`.
fn direct(
    rt: &Runtime,
    ids: &[ObjectId],
    actor: &Actor,
    iters: u64,
    action: &mut impl FnMut() -> ActionId,
) -> Duration {
    in_laps(ids.len(), iters, action, |a| {
        for id in ids {
            black_box(run_directly(rt, id, actor, a));
        }
    })
}

/// `iters` requests queued on `queuer` in bursts, one on each of `ids` (each
/// burst's action from `action`), every ticket then waited for: the time,
/// scaled to `iters`.
fn bursts(
    queuer: &Queuer,
    rt: &Runtime,
    ids: &[ObjectId],
    actor: &Actor,
    iters: u64,
    action: &mut impl FnMut() -> ActionId,
) -> Duration {
    in_laps(ids.len(), iters, action, |a| {
        let tickets: Vec<_> = ids
            .iter()
            .map(|id| queuer.request(rt, id, actor, a).run(|_| Ok(())).unwrap())
            .collect();
        for t in tickets {
            black_box(t.wait().unwrap());
        }
    })
}

/// `iters` actions handed off by hand ([`handoff::Floor`], the queuer's
/// floor), in bursts over `ids` as [`bursts`] queues them: the time, scaled
/// to `iters`.
fn handed_off(
    rt: &Runtime,
    ids: &[ObjectId],
    actor: &Actor,
    iters: u64,
    action: &mut impl FnMut() -> ActionId,
) -> Duration {
    let slots: Vec<handoff::Slot> = ids.iter().map(|_| Default::default()).collect();
    handoff::Floor::new(false).time(iters, |floor| {
        let a = action();
        for (id, slot) in ids.iter().zip(&slots) {
            floor.push(rt.start(id, actor, a).unwrap(), slot);
        }
        for slot in &slots {
            black_box(slot.take());
        }
    })
}

/// The queuer against calling the runtime directly: throughput over 512 objects
/// (a request on each, then every ticket awaited), and the round trip of one
/// request on an idle queuer.
fn bench_queue(c: &mut Criterion) {
    let machine = fsm::spec::load_str("server.toml", SPEC).unwrap();
    let actor = Actor::new("bench");
    let rt = Runtime::new(machine, MemoryStore::new().keep_history(KEEP)).unwrap();
    let ids = created(&rt, &actor, "q", OBJECTS_PER_THREAD);
    let queuer = Queuer::new(2);
    let mut action = alternating();
    let mut g = c.benchmark_group("queue");
    g.throughput(Throughput::Elements(1));
    g.bench_function(QUEUE_CASES[0], |b| {
        b.iter_custom(|iters| direct(&rt, &ids, &actor, iters, &mut action))
    });
    g.bench_function(QUEUE_CASES[1], |b| {
        b.iter_custom(|iters| bursts(&queuer, &rt, &ids, &actor, iters, &mut action))
    });
    g.bench_function(QUEUE_CASES[2], |b| {
        b.iter_custom(|iters| handed_off(&rt, &ids, &actor, iters, &mut action))
    });
    for (name, ordered) in [(DUTY_CASES[0], false), (DUTY_CASES[1], true)] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                handoff::Floor::new(ordered).time(iters, |floor| {
                    let a = action();
                    let tasks: Vec<_> = ids
                        .iter()
                        .map(|id| {
                            let task = Arc::new(handoff::Task::default());
                            floor.push(rt.start(id, &actor, a).unwrap(), task.clone());
                            task
                        })
                        .collect();
                    for task in tasks {
                        black_box(task.take());
                    }
                })
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("queue-latency");
    let id = &ids[0];
    g.bench_function(LATENCY_CASES[0], |b| {
        b.iter(|| black_box(run_directly(&rt, id, &actor, action())))
    });
    g.bench_function(LATENCY_CASES[1], |b| {
        b.iter(|| black_box(round_trip(&queuer, &rt, id, &actor, action())))
    });
    g.finish();

    // The queuer's own path on one core: its only worker held by a job on
    // another object, each request is run by the thread that waits for it
    // (its entry left in the ready list, and swept out with a thousand
    // others now and then).
    let held = Queuer::new(1);
    let gate = ObjectId::from("q-held");
    rt.create(&gate, &actor).unwrap();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let (started, busy) = std::sync::mpsc::channel::<()>();
    let holding = held
        .request(&rt, &gate, &actor, ActionId(0))
        .run(move |_| {
            started.send(()).map_err(|e| e.to_string())?;
            released.recv().map_err(|e| e.to_string())
        })
        .unwrap();
    busy.recv().unwrap();
    let mut g = c.benchmark_group("queue-own-path");
    g.bench_function(OWN_PATH_CASES[0], |b| {
        b.iter(|| black_box(run_directly(&rt, id, &actor, action())))
    });
    g.bench_function(OWN_PATH_CASES[1], |b| {
        b.iter(|| black_box(round_trip(&held, &rt, id, &actor, action())))
    });
    g.finish();
    release.send(()).unwrap();
    holding.wait().unwrap();
    held.terminate();
    queuer.terminate();

    // Workers that park as soon as they are idle, and tickets that block at
    // once: what spinning saves. Last: a machine whose cores went idle may
    // run slower for a while after (BENCHMARKS.md, eighteenth session).
    let parking = Queuer::builder().workers(2).spin(Duration::ZERO).build();
    // Objects of its own, each alternating start and stop in step with
    // `turn` (the objects above moved out of step with `action` when the
    // latency cases moved only the first).
    let parked = created(&rt, &actor, "p", OBJECTS_PER_THREAD);
    let mut turn = alternating();
    let mut g = c.benchmark_group("queue-no-spin");
    g.throughput(Throughput::Elements(1));
    g.bench_function(NO_SPIN_CASES[0], |b| {
        b.iter(|| black_box(run_directly(&rt, id, &actor, action())))
    });
    g.bench_function(NO_SPIN_CASES[1], |b| {
        b.iter_custom(|iters| bursts(&parking, &rt, &parked, &actor, iters, &mut turn))
    });
    g.bench_function(NO_SPIN_CASES[2], |b| {
        b.iter(|| black_box(round_trip(&parking, &rt, id, &actor, action())))
    });
    g.finish();
    parking.terminate();
}

/// Round trips in one measure of a cache line's round trip between two threads.
const ROUND_TRIPS: u32 = 20_000;

/// A cache line of its own.
#[repr(align(128))]
struct Line(AtomicU64);

/// How long a cache line takes to go from this thread to another and back:
/// each thread writes it in turn and waits to read the other's write,
/// `ROUND_TRIPS` times (after one not counted, which waits for the other
/// thread to start). Every request through the queuer pays such round trips
/// (its task, its object's record and its shard go from the caller's core to a
/// worker's and back), and how long they take is the machine's, not the
/// queuer's: on a virtual machine it changes with where the host puts its
/// cores, from one minute to the next (BENCHMARKS.md, thirtieth session).
fn line_round_trip() -> Duration {
    fn await_value(line: &Line, value: u64) {
        let mut spins = 0u32;
        while line.0.load(Ordering::Acquire) != value {
            spins += 1;
            // Never forever on a core the other thread waits for.
            if spins.is_multiple_of(1024) {
                std::thread::yield_now();
            }
            std::hint::spin_loop();
        }
    }
    // The line's writes count up: odd ones from this thread, even ones from
    // the other.
    let line = Line(AtomicU64::new(0));
    std::thread::scope(|s| {
        s.spawn(|| {
            for k in 0..=u64::from(ROUND_TRIPS) {
                await_value(&line, 2 * k + 1);
                line.0.store(2 * k + 2, Ordering::Release);
            }
        });
        let mut start = Instant::now();
        for k in 0..=u64::from(ROUND_TRIPS) {
            if k == 1 {
                start = Instant::now();
            }
            line.0.store(2 * k + 1, Ordering::Release);
            await_value(&line, 2 * k + 2);
        }
        start.elapsed() / ROUND_TRIPS
    })
}

/// Actions per thread in one case of one paired round: whole double rounds
/// over a thread's own objects (see `bench`), 256 × 1,024.
const PAIRED_ACTIONS: u64 = 256 * 2 * OBJECTS_PER_THREAD as u64;

/// Requests in one case of one paired round of the queue: 128 bursts of 512.
const PAIRED_REQUESTS: u64 = 128 * OBJECTS_PER_THREAD as u64;

/// The goals' ratios measured again in paired rounds: in each round the
/// runtime and its baselines run one after the other, in a rotated order, so
/// that both sides of a ratio see the same minute of the machine (whose speed
/// changes from one minute to the next, BENCHMARKS.md); each round gives one
/// ratio, and the report prints their median, middle half and extremes.
/// Criterion's table above takes each case in its own stretch of seconds.
fn paired(threads_list: &[usize], rounds: usize) {
    let machine = fsm::spec::load_str("server.toml", SPEC).unwrap();
    let actor = Actor::new("bench");
    println!(
        "\npaired rounds ({rounds}, the cases of each in a rotated order): \
         throughput ratio, median (middle half; all rounds)"
    );
    for &threads in threads_list {
        for objects in [Objects::Own, Objects::Hot] {
            let n = objects.count(threads);
            let dash: DashMap<usize, Slot> = (0..n).map(|i| (i, new_slot())).collect();
            let map: Mutex<HashMap<usize, Slot>> =
                Mutex::new((0..n).map(|i| (i, new_slot())).collect());
            let rt = Runtime::new(machine.clone(), MemoryStore::new().keep_history(KEEP)).unwrap();
            let ids = created(&rt, &actor, "s", n);
            let texts = floor::texts(n);
            let by_hand = floor::Store::new(&texts);
            let checked_by_hand = checked::Store::new(machine.clone(), &ids);
            let iters = PAIRED_ACTIONS * threads as u64;
            let case = |c: usize| match c {
                0 => on_threads(threads, iters, |t, k| dash_map(&dash, objects, t, k)),
                1 => on_threads(threads, iters, |t, k| mutex_map(&map, objects, t, k)),
                2 => on_threads(threads, iters, |t, k| {
                    runtime_work(&rt, &ids, objects, t, k)
                }),
                3 => on_threads(threads, iters, |t, k| {
                    floor::work(&by_hand, &texts, objects, t, k)
                }),
                _ => on_threads(threads, iters, |t, k| {
                    checked::work(&checked_by_hand, &ids, objects, t, k)
                }),
            };
            let took = in_rounds(rounds, 5, case);
            let threads_named = format!(
                "{} objects, {threads} thread{}",
                objects.name(),
                if threads == 1 { "" } else { "s" }
            );
            // Each line: the throughput of `case` over that of `against`
            // (their times the other way round).
            for (name, case, against) in [
                (format!("fsm ÷ {}", CASES[1]), 2, 0),
                (format!("fsm ÷ {}", CASES[2]), 2, 1),
                // What the runtime's bookkeeping costs written lean, against
                // the same baseline in the same minute: how near the
                // runtime could come with its checks taken out.
                (format!("{} ÷ {}", CASES[4], CASES[1]), 3, 0),
                (format!("fsm ÷ {}", CASES[4]), 2, 3),
                // The same with the runtime's checks and records put back:
                // how near the runtime could come keeping all it does.
                (format!("{CHECKED} ÷ {}", CASES[1]), 4, 0),
                (format!("fsm ÷ {CHECKED}"), 2, 4),
            ] {
                let mut ratios: Vec<f64> = (took.iter())
                    .map(|round| round[against] / round[case])
                    .collect();
                println!("{name}, {threads_named}: {}", spread(&mut ratios));
            }
        }
    }

    // The queue: 512 objects, each round's requests one on each in bursts,
    // against the same actions run directly.
    let rt = Runtime::new(machine, MemoryStore::new().keep_history(KEEP)).unwrap();
    let ids = created(&rt, &actor, "q", OBJECTS_PER_THREAD);
    let queuer = Queuer::new(2);
    let mut action = alternating();
    // Each round also hands the same actions off by hand (the floor: the
    // least any hand-off to another thread costs on these cores, so that the
    // queuer's slowdown sits beside the one no queuer can go under), and
    // measures a cache line's round trip between two threads (a fourth
    // case), so that each round's slowdown sits beside the machine's cores
    // as they were in that round.
    let took = in_rounds(rounds, 4, |c| match c {
        0 => direct(&rt, &ids, &actor, PAIRED_REQUESTS, &mut action),
        1 => bursts(&queuer, &rt, &ids, &actor, PAIRED_REQUESTS, &mut action),
        2 => handed_off(&rt, &ids, &actor, PAIRED_REQUESTS, &mut action),
        _ => line_round_trip(),
    });
    let slowdowns: Vec<f64> = took.iter().map(|round| round[1] / round[0]).collect();
    let slowdown = spread(&mut slowdowns.clone());
    println!("queue: {} ÷ {}: {slowdown}", QUEUE_CASES[1], QUEUE_CASES[0]);
    // What queuing adds over the direct run, in the same rounds: one less.
    println!(
        "queue: what queuing adds ÷ {}: {}",
        QUEUE_CASES[0],
        slowdown.less_one()
    );
    for (case, against) in [(2, 0), (1, 2)] {
        let mut ratios: Vec<f64> = (took.iter())
            .map(|round| round[case] / round[against])
            .collect();
        println!(
            "queue: {} ÷ {}: {}",
            QUEUE_CASES[case],
            QUEUE_CASES[against],
            spread(&mut ratios)
        );
    }
    let trips: Vec<f64> = took.iter().map(|round| round[3] * 1e9).collect();
    let trip = spread(&mut trips.clone());
    println!("queue: a cache line's round trip between two threads, ns: {trip:.0}");
    let (shorter, longer) = report::spread::split_by(&trips, &slowdowns, trip.median);
    for (half, mut slowdowns, bound) in [("shorter", shorter, "≤"), ("longer", longer, ">")] {
        if !slowdowns.is_empty() {
            println!(
                "queue: {} ÷ {} in the {} round{} with the {half} round trips ({bound} {:.0} ns): {}",
                QUEUE_CASES[1],
                QUEUE_CASES[0],
                slowdowns.len(),
                if slowdowns.len() == 1 { "" } else { "s" },
                trip.median,
                spread(&mut slowdowns)
            );
        }
    }
    queuer.terminate();
}

/// Runs `cases` cases (`case(c)` times one) in `rounds` rounds, each round in
/// an order rotated by one from the last, after a round not counted: each
/// round's times in seconds, by case.
fn in_rounds(
    rounds: usize,
    cases: usize,
    mut case: impl FnMut(usize) -> Duration,
) -> Vec<Vec<f64>> {
    for c in 0..cases {
        case(c);
    }
    (0..rounds)
        .map(|round| {
            let mut took = vec![0.0; cases];
            for k in 0..cases {
                let c = (round + k) % cases;
                took[c] = case(c).as_secs_f64();
            }
            took
        })
        .collect()
}

/// The cases `count` runs (`FSM_BENCH_COUNT=CASE,N`), each with the function
/// its work runs in, by the name callgrind gives it (`FSM_BENCH_COUNT=cases`
/// lists them, for `scripts/instructions --baselines`).
const COUNTED: [(&str, &str); 6] = [
    ("dashmap", "runtime::dash_map"),
    ("mutex", "runtime::mutex_map"),
    ("floor", "runtime::floor::work"),
    ("checked-floor", "runtime::checked::work"),
    ("fsm", "runtime::runtime_work"),
    ("fsm-system-clock", "runtime::runtime_work"),
];

/// No measurement: one case's work (`COUNTED`), on this thread and its own
/// objects, for `actions` completed actions, for callgrind to count its
/// instructions (`scripts/instructions --baselines`), a figure no machine's
/// speed moves. Everything else the process does (the objects made, the
/// counter clock calibrated) comes before the case's function and stays out
/// of its count.
fn count(case: &str, actions: u64) {
    let n = Objects::Own.count(1);
    // The clock's calibration happens at its first read: here, not in the case.
    black_box(fsm_runtime::Clock::now(&fsm_runtime::CounterClock));
    match case {
        "dashmap" => {
            let dash: DashMap<usize, Slot> = (0..n).map(|i| (i, new_slot())).collect();
            dash_map(&dash, Objects::Own, 0, actions);
        }
        "mutex" => {
            let map = Mutex::new((0..n).map(|i| (i, new_slot())).collect());
            mutex_map(&map, Objects::Own, 0, actions);
        }
        "floor" => {
            let texts = floor::texts(n);
            let by_hand = floor::Store::new(&texts);
            floor::work(&by_hand, &texts, Objects::Own, 0, actions);
        }
        "checked-floor" => {
            let machine = fsm::spec::load_str("server.toml", SPEC).unwrap();
            let ids: Vec<ObjectId> = (0..n).map(|i| ObjectId::from(format!("s-{i}"))).collect();
            let by_hand = checked::Store::new(machine, &ids);
            checked::work(&by_hand, &ids, Objects::Own, 0, actions);
        }
        "fsm" | "fsm-system-clock" => {
            let machine = fsm::spec::load_str("server.toml", SPEC).unwrap();
            let builder = Runtime::builder(machine, MemoryStore::new().keep_history(KEEP));
            let rt = match case {
                "fsm" => builder.build(),
                _ => builder.clock(SystemClock).build(),
            };
            let rt = rt.unwrap();
            let ids = created(&rt, &Actor::new("bench"), "s", n);
            runtime_work(&rt, &ids, Objects::Own, 0, actions);
        }
        other => {
            let cases: Vec<&str> = COUNTED.iter().map(|(case, _)| *case).collect();
            panic!(
                "FSM_BENCH_COUNT: no case `{other}` (cases: {})",
                cases.join(", ")
            )
        }
    }
}

fn main() {
    // `FSM_BENCH_COUNT=CASE,N`: count a case's instructions instead (`count`);
    // `FSM_BENCH_COUNT=cases`: the cases, `CASE|FUNCTION` a line.
    if let Ok(counted) = std::env::var("FSM_BENCH_COUNT") {
        if counted == "cases" {
            for (case, function) in COUNTED {
                println!("{case}|{function}");
            }
            return;
        }
        let parsed = counted
            .split_once(',')
            .and_then(|(case, n)| Some((case, n.trim().parse().ok()?)));
        let (case, actions) =
            parsed.expect("FSM_BENCH_COUNT: CASE,N (a case of `COUNTED`, a number of actions)");
        count(case, actions);
        return;
    }
    report::start();
    let threads = thread_counts();
    let mut c = Criterion::default().configure_from_args();
    let round_trips = bench(&mut c, &threads);
    // The machine's cores on either side of the queue's cases (see
    // `line_round_trip`).
    let before = line_round_trip();
    bench_queue(&mut c);
    let after = line_round_trip();
    c.final_summary();
    for &t in &threads {
        report::print_ratios(&group(t, Objects::Own), "action", 1.0, &CASES);
        report::print_ratios(&group(t, Objects::Hot), "action", 1.0, &CASES[1..]);
    }
    for (group, before, after) in &round_trips {
        if report::mean(group, CASES[3]).is_some() {
            println!(
                "{group}: a cache line's round trip between two threads, \
                 before and after the group's cases: {} and {} ns",
                before.as_nanos(),
                after.as_nanos()
            );
        }
    }
    report::print_ratios("queue", "action", 1.0, &QUEUE_CASES);
    // What a queued request adds to a direct run (issue #18's "throughput
    // overhead"), beside the ratio above.
    report::print_overhead("queue", "action", QUEUE_CASES[0], QUEUE_CASES[1]);
    if report::mean("queue", QUEUE_CASES[1]).is_some() {
        println!(
            "queue: a cache line's round trip between two threads, \
             before and after the queue's cases: {} and {} ns",
            before.as_nanos(),
            after.as_nanos()
        );
    }
    // The queuer against the bare hand-off: what its own work costs, and
    // what two of its duties cost on their own.
    report::print_ratios(
        "queue",
        "action",
        1.0,
        &[QUEUE_CASES[2], DUTY_CASES[0], DUTY_CASES[1], QUEUE_CASES[1]],
    );
    report::print_ratios("queue-latency", "action", 1.0, &LATENCY_CASES);
    report::print_ratios("queue-own-path", "action", 1.0, &OWN_PATH_CASES);
    report::print_ratios("queue-no-spin", "action", 1.0, &NO_SPIN_CASES);
    print_table(&threads);
    // Only when benchmarking (`cargo test --benches` passes no `--bench`):
    // the rounds take some seconds per thread count.
    let rounds = std::env::var("FSM_BENCH_ROUNDS").map_or(21, |n| {
        n.parse()
            .expect("FSM_BENCH_ROUNDS: a number of rounds (0: none)")
    });
    if rounds > 0 && std::env::args().any(|a| a == "--bench") {
        paired(&threads, rounds);
    }
}
