//! Completed actions per second through the in-memory runtime, against a raw
//! `AtomicU64` compare-and-set loop and a `Mutex<HashMap>` doing the same work, on
//! 1 and 2 threads.
//!
//! `cargo bench --bench runtime`: criterion's report, then ns per completed action
//! and each ratio to the raw atomic loop on the same number of threads.
//!
//! One completed action is two compare-and-sets on one object: into the action's
//! transition state, then to its target (HALTED → STARTING → RUNNING, then RUNNING →
//! STOPPING → HALTED, and so on). Each thread works on its own 512 objects, in turn,
//! so threads contend on the store, not on objects. The runtime also checks the
//! table, keeps the holder and writes a history entry per move (bounded to the last
//! 16 per object here, as the mutex version keeps them, so memory stays flat).

use std::collections::{HashMap, VecDeque};
use std::hint::black_box;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use criterion::{Criterion, Throughput};
use fsm::ActionId;
use fsm_runtime::{Actor, MemoryStore, ObjectId, Queuer, Runtime};

mod report;

const OBJECTS_PER_THREAD: usize = 512;
const KEEP: usize = 16;

const SPEC: &str = r#"
[machine]
name = "server"
initial = "HALTED"
[states]
HALTED = "Off"
STARTING = { transition = true }
RUNNING = "On"
STOPPING = { transition = true }
[actions]
start = { from = "HALTED", via = "STARTING", to = "RUNNING" }
stop = { from = "RUNNING", via = "STOPPING", to = "HALTED" }
"#;

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

fn mutex_map(map: &Mutex<HashMap<usize, Slot>>, t: usize, iters: u64) {
    let write = |id: usize, expect: (u64, u64), to: u64, holder| {
        let mut map = map.lock().unwrap();
        let slot = map.get_mut(&id).unwrap();
        assert_eq!((slot.state, slot.version), expect);
        slot.state = to;
        slot.version += 1;
        slot.holder = holder;
        if slot.history.len() == KEEP {
            slot.history.pop_front();
        }
        slot.history
            .push_back((expect.0, to, slot.version, SystemTime::now()));
        slot.version
    };
    for i in 0..iters as usize {
        let id = t * OBJECTS_PER_THREAD + i % OBJECTS_PER_THREAD;
        let (state, version) = {
            let map = map.lock().unwrap();
            let slot = &map[&id];
            (slot.state, slot.version)
        };
        let (via, target) = next(state);
        let v = write(id, (state, version), via, Some((state, "bench")));
        write(id, (via, v), target, None);
    }
}

fn runtime_work(rt: &Runtime, ids: &[ObjectId], t: usize, iters: u64) {
    let actor = &Actor::new(format!("worker-{t}"));
    let (start, stop) = (ActionId(0), ActionId(1));
    let mine = &ids[t * OBJECTS_PER_THREAD..(t + 1) * OBJECTS_PER_THREAD];
    for i in 0..iters as usize {
        let id = &mine[i % OBJECTS_PER_THREAD];
        // Objects of this thread alternate start and stop, in lockstep.
        let action = if (i / OBJECTS_PER_THREAD) % 2 == 0 {
            start
        } else {
            stop
        };
        let record = rt.start(id, actor, action).unwrap().complete().unwrap();
        black_box(record);
    }
}

const CASES: [&str; 3] = [
    "raw AtomicU64 compare-and-set",
    "fsm runtime (MemoryStore)",
    "Mutex around a HashMap",
];

fn bench(c: &mut Criterion) {
    let machine = fsm::spec::load_str("server.toml", SPEC).unwrap();
    assert_eq!(machine.find_state("STOPPING").unwrap().0 as u64, STOPPING);
    for threads in [1usize, 2] {
        let n = threads * OBJECTS_PER_THREAD;
        let mut g = c.benchmark_group(format!("runtime-{threads}-threads"));
        g.throughput(Throughput::Elements(1));

        let atomics: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(HALTED << 32 | 1)).collect();
        g.bench_function(CASES[0], |b| {
            b.iter_custom(|iters| on_threads(threads, iters, |t, k| raw_atomic(&atomics, t, k)))
        });

        let rt = Runtime::new(machine.clone(), MemoryStore::new().keep_history(KEEP)).unwrap();
        let actor = Actor::new("bench");
        let ids: Vec<ObjectId> = (0..n).map(|i| ObjectId::from(format!("s-{i}"))).collect();
        for id in &ids {
            rt.create(id, &actor).unwrap();
        }
        // Every object must be HALTED when a sample starts at an even round; keep
        // each thread's iteration count a multiple of two rounds.
        let round = 2 * OBJECTS_PER_THREAD as u64 * threads as u64;
        g.bench_function(CASES[1], |b| {
            b.iter_custom(|iters| {
                let iters = iters.div_ceil(round) * round;
                on_threads(threads, iters, |t, k| runtime_work(&rt, &ids, t, k))
            })
        });

        let map: Mutex<HashMap<usize, Slot>> = Mutex::new(
            (0..n)
                .map(|i| {
                    (
                        i,
                        Slot {
                            state: HALTED,
                            version: 1,
                            holder: None,
                            history: VecDeque::new(),
                        },
                    )
                })
                .collect(),
        );
        g.bench_function(CASES[2], |b| {
            b.iter_custom(|iters| on_threads(threads, iters, |t, k| mutex_map(&map, t, k)))
        });
        g.finish();
    }
}

const QUEUE_CASES: [&str; 2] = ["direct runtime", "queued (2 workers)"];
const LATENCY_CASES: [&str; 2] = ["direct run", "queued request + wait"];

/// The queuer against calling the runtime directly: throughput over 512 objects
/// (a request on each, then every ticket awaited), and the round trip of one
/// request on an idle queuer.
fn bench_queue(c: &mut Criterion) {
    let machine = fsm::spec::load_str("server.toml", SPEC).unwrap();
    let actor = Actor::new("bench");
    let rt = Runtime::new(machine, MemoryStore::new().keep_history(KEEP)).unwrap();
    let ids: Vec<ObjectId> = (0..OBJECTS_PER_THREAD)
        .map(|i| ObjectId::from(format!("q-{i}")))
        .collect();
    for id in &ids {
        rt.create(id, &actor).unwrap();
    }
    let queuer = Queuer::new(2);
    // Every object alternates start and stop; `round` says which.
    let mut round = 0usize;
    let mut action = move || {
        round += 1;
        ActionId((round + 1) % 2)
    };
    let mut g = c.benchmark_group("queue");
    g.throughput(Throughput::Elements(1));
    g.bench_function(QUEUE_CASES[0], |b| {
        b.iter_custom(|iters| {
            let rounds = iters.div_ceil(OBJECTS_PER_THREAD as u64);
            let start = Instant::now();
            for _ in 0..rounds {
                let a = action();
                for id in &ids {
                    black_box(rt.run(id, &actor, a).unwrap());
                }
            }
            start
                .elapsed()
                .mul_f64(iters as f64 / (rounds * OBJECTS_PER_THREAD as u64) as f64)
        })
    });
    g.bench_function(QUEUE_CASES[1], |b| {
        b.iter_custom(|iters| {
            let rounds = iters.div_ceil(OBJECTS_PER_THREAD as u64);
            let start = Instant::now();
            for _ in 0..rounds {
                let a = action();
                let tickets: Vec<_> = ids
                    .iter()
                    .map(|id| queuer.request(&rt, id, &actor, a).run(|_| Ok(())).unwrap())
                    .collect();
                for t in tickets {
                    black_box(t.wait().unwrap());
                }
            }
            start
                .elapsed()
                .mul_f64(iters as f64 / (rounds * OBJECTS_PER_THREAD as u64) as f64)
        })
    });
    g.finish();

    let mut g = c.benchmark_group("queue-latency");
    let id = &ids[0];
    g.bench_function(LATENCY_CASES[0], |b| {
        b.iter(|| black_box(rt.run(id, &actor, action()).unwrap()))
    });
    g.bench_function(LATENCY_CASES[1], |b| {
        b.iter(|| {
            black_box(
                queuer
                    .request(&rt, id, &actor, action())
                    .run(|_| Ok(()))
                    .unwrap()
                    .wait()
                    .unwrap(),
            )
        })
    });
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    bench_queue(&mut c);
    c.final_summary();
    for threads in [1, 2] {
        report::print_ratios(&format!("runtime-{threads}-threads"), "action", 1.0, &CASES);
    }
    report::print_ratios("queue", "action", 1.0, &QUEUE_CASES);
    report::print_ratios("queue-latency", "action", 1.0, &LATENCY_CASES);
}
