//! Requests through the queuer, for counting the instructions each costs under
//! callgrind: a measure that the machine's noise does not move (BENCHMARKS.md,
//! "The queuer", twenty-third session).
//!
//! ```sh
//! cargo build --release -p fsm-runtime --example queue_path
//! for n in 5120 56320; do
//!   valgrind --tool=callgrind --callgrind-out-file=cg.$n target/release/examples/queue_path own $n
//! done
//! # A function's inclusive count in cg.56320, less the same in cg.5120, over
//! # 51,200: its instructions per request. The caller's path is
//! # `queue::Request<S>::run`, the worker's `queue::Shared::run`:
//! callgrind_annotate --inclusive=yes cg.56320 | grep -E 'queue::(Request<S>|Shared)::run '
//! ```
//!
//! `scripts/instructions` does this for each hot path, in CI, and fails when
//! one costs more than its ceiling.
//!
//! (The programs' totals move by a few million instructions from one run to
//! the next: the clock's calibration at its first reading takes as long as
//! it takes. The functions of a request do not.)
//!
//! The modes: `direct` runs each action on the calling thread (`Runtime::run`,
//! in `run`);
//! `async` does so through `Runtime::run_async`, polled there (`run_async`);
//! `async-start` through `Runtime::start_async` then `InFlight::complete_async`
//! (`start_then_complete_async`);
//! `own` queues each request on a queuer whose only worker is held, so the
//! thread that waits for it runs it (the caller's and the worker's path, one
//! after the other, on one thread); `burst` queues a request on each of 512
//! objects, then waits for every ticket, with two workers; `held-burst` does
//! the same on the queuer of `own`, so that its waiting thread runs every
//! request and the submitting finds each line it writes at home (no worker
//! wrote it last); `busy` holds every object, then asks for another action on
//! each: a start refused as busy, what a caller that lost a race pays
//! (`refused`). Each prints the time per request to standard error, and the
//! bursts how long their submitting took of it (wall times: use the bench
//! for those).

use std::future::Future;
use std::hint::black_box;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use fsm_core::ActionId;
use fsm_runtime::{Actor, MemoryStore, ObjectId, Queuer, Runtime};

/// The bench's machine (`benches/server.toml`): each object alternates
/// `start` (action 0) and `stop` (action 1).
const SPEC: &str = include_str!("../../benches/server.toml");

const OBJECTS: usize = 512;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "own".into());
    let requests: usize = args.next().map_or(Ok(51_200), |n| n.parse())?;
    let machine = fsm_core::spec::load_str("server.toml", SPEC)?;
    let actor = Actor::new("bench");
    let rt = Runtime::new(machine, MemoryStore::new().keep_history(16))?;
    let ids: Vec<ObjectId> = (0..OBJECTS)
        .map(|i| ObjectId::from(format!("q-{i}")))
        .collect();
    for id in &ids {
        rt.create(id, &actor)?;
    }
    let rounds = requests / OBJECTS;
    // How long the bursts took to submit, of the whole (the burst modes).
    let mut submitting = None;
    let started = Instant::now();
    match mode.as_str() {
        "direct" => {
            for round in 0..rounds {
                for id in &ids {
                    black_box(run(&rt, id, &actor, ActionId(round % 2))?);
                }
            }
        }
        "async" => {
            for round in 0..rounds {
                for id in &ids {
                    black_box(run_async(&rt, id, &actor, ActionId(round % 2))?);
                }
            }
        }
        "async-start" => {
            for round in 0..rounds {
                for id in &ids {
                    black_box(start_then_complete_async(
                        &rt,
                        id,
                        &actor,
                        ActionId(round % 2),
                    )?);
                }
            }
        }
        "own" | "held-burst" => {
            // The only worker held by a job on another object until the end.
            let held = Queuer::new(1);
            let gate = ObjectId::from("held");
            rt.create(&gate, &actor)?;
            let (release, released) = std::sync::mpsc::channel::<()>();
            let (running, busy) = std::sync::mpsc::channel::<()>();
            let holding = held
                .request(&rt, &gate, &actor, ActionId(0))
                .run(move |_| {
                    running.send(()).map_err(|e| e.to_string())?;
                    released.recv().map_err(|e| e.to_string())
                })?;
            busy.recv()?;
            if mode == "own" {
                for round in 0..rounds {
                    for id in &ids {
                        let ticket = held.request(&rt, id, &actor, ActionId(round % 2));
                        black_box(ticket.run(|_| Ok(()))?.wait()?);
                    }
                }
            } else {
                submitting = Some(bursts(&held, &rt, &ids, &actor, rounds)?);
            }
            release.send(())?;
            holding.wait()?;
            held.terminate();
        }
        "burst" => {
            let queuer = Queuer::new(2);
            submitting = Some(bursts(&queuer, &rt, &ids, &actor, rounds)?);
            queuer.terminate();
        }
        "busy" => {
            // Every object held, then each asked for another action: every
            // start refused as busy, its error built and dropped.
            let held = ids
                .iter()
                .map(|id| rt.start(id, &actor, ActionId(0)))
                .collect::<Result<Vec<_>, _>>()?;
            for _ in 0..rounds {
                for id in &ids {
                    assert!(refused(&rt, id, &actor), "{id} is held: a start is refused");
                }
            }
            for handle in held {
                handle.complete()?;
            }
        }
        other => {
            return Err(format!(
                "no mode `{other}`: direct, async, async-start, own, burst, held-burst or busy"
            )
            .into());
        }
    }
    let per = |time: Duration| time / (rounds * OBJECTS).max(1) as u32;
    if let Some(submitting) = submitting {
        eprintln!("{mode}, submitting: {:?} per request", per(submitting));
    }
    eprintln!("{mode}: {:?} per request", per(started.elapsed()));
    Ok(())
}

/// `rounds` bursts on `queuer`: a request on each of `ids`, then every
/// ticket waited for. How long the submitting took, of the whole.
fn bursts(
    queuer: &Queuer,
    rt: &Runtime,
    ids: &[ObjectId],
    actor: &Actor,
    rounds: usize,
) -> Result<Duration, Box<dyn std::error::Error>> {
    let mut submitting = Duration::ZERO;
    for round in 0..rounds {
        let submitted = Instant::now();
        let tickets = ids
            .iter()
            .map(|id| {
                let request = queuer.request(rt, id, actor, ActionId(round % 2));
                request.run(|_| Ok(()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        submitting += submitted.elapsed();
        for ticket in tickets {
            black_box(ticket.wait()?);
        }
    }
    Ok(submitting)
}

/// `Runtime::run`. Not inlined, so that callgrind counts it whole, whatever
/// of it rustc inlines here (`scripts/instructions`, the path `direct`).
#[inline(never)]
fn run(
    rt: &Runtime,
    id: &ObjectId,
    actor: &Actor,
    action: ActionId,
) -> Result<fsm_runtime::Record, fsm_runtime::RuntimeError> {
    rt.run(id, actor, action)
}

/// `Runtime::run_async`, polled where it is called: on the memory store,
/// which never waits, its first poll ends it. Not inlined, so that callgrind
/// counts it whole, the futures' making and polling included
/// (`scripts/instructions`, the path `async`).
#[inline(never)]
fn run_async(
    rt: &Runtime,
    id: &ObjectId,
    actor: &Actor,
    action: ActionId,
) -> Result<fsm_runtime::Record, fsm_runtime::RuntimeError> {
    first_poll(std::pin::pin!(rt.run_async(id, actor, action)))
}

/// `Runtime::start_async`, then `InFlight::complete_async`, each polled where
/// it is called: an action an async caller runs with work between its start
/// and its end. Not inlined, so that callgrind counts it whole
/// (`scripts/instructions`, the path `async-start`).
#[inline(never)]
fn start_then_complete_async(
    rt: &Runtime,
    id: &ObjectId,
    actor: &Actor,
    action: ActionId,
) -> Result<fsm_runtime::Record, fsm_runtime::RuntimeError> {
    let held = first_poll(std::pin::pin!(rt.start_async(id, actor, action)))?;
    first_poll(std::pin::pin!(held.complete_async()))
}

/// What `future`'s first poll gives: on the memory store, which never waits,
/// every call ends there.
fn first_poll<T>(future: std::pin::Pin<&mut impl Future<Output = T>>) -> T {
    match future.poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(done) => done,
        Poll::Pending => unreachable!("the memory store never waits"),
    }
}

/// A start of `stop` on `id`, which a start holds: whether it was refused as
/// busy. Not inlined, so that callgrind counts a refusal whole, the error's
/// building and its drop included (`scripts/instructions`, the path `busy`).
#[inline(never)]
fn refused(rt: &Runtime, id: &ObjectId, actor: &Actor) -> bool {
    matches!(
        rt.start(id, actor, ActionId(1)),
        Err(fsm_runtime::RuntimeError::Busy { .. })
    )
}
