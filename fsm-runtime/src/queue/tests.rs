//! The queuer's own tests: what its parts do that its public API cannot show.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::{Actor, InFlight, ObjectId, Runtime, Store};

use super::*;
use crate::park::SPINNERS;
use crate::testing::LateRead;
use crate::{EntryKind, Holder, MemoryStore};

/// A task its queue drops unrun (its worker gone) gives its ticket the crash
/// at once, and its action, in flight, is recorded as abandoned for the
/// healer: no ticket waits forever, no object stays held by nobody.
#[test]
fn a_task_dropped_unrun_gives_its_ticket_the_crash() {
    let machine = crate::testing::machine();
    let rt = Runtime::new(machine, MemoryStore::new()).unwrap();
    let user = Actor::new("user");
    rt.create("vm", &user).unwrap();
    let handle = rt.start("vm", &user, "start").unwrap();
    let (action, fence) = (handle.action(), handle.fence());
    let job = |handle: InFlight<'_>, _: &Runtime, _: &Shared, _: &ObjectId| {
        Ran::Done((
            false,
            handle.complete().map_err(|e| Box::new(QueueError::from(e))),
        ))
    };
    let task: Arc<dyn Queued> = Arc::new(Task {
        head: Head::new("vm".into(), None),
        runtime: Some(rt.clone()),
        action,
        job: Short::new(Some((handle.detach(), job))),
    });
    let ticket = Ticket {
        task: Some(task.clone()),
        fence,
        // A queuer that never saw the task: the wait finds nothing to run.
        queue: Queuer::new(1).shared.clone(),
    };
    drop(task);
    drop(Job::new(ticket.task.clone().expect("not taken yet")));
    // Recorded when the queue let go, not when the ticket does.
    let record = rt.get("vm").unwrap();
    assert!(record.in_flight.expect("still held").abandoned);
    match ticket.wait() {
        Err(QueueError::Crashed { id, action }) => {
            assert_eq!((id.as_str(), action.as_str()), ("vm", "start"));
        }
        other => panic!("{other:?}"),
    }
}

/// Idle workers spin before they park, but no more than `SPINNERS` of
/// them at once, however many go idle together: four workers released
/// at once from four jobs, ten times over.
#[test]
fn no_more_than_two_idle_workers_spin() {
    let rt = Runtime::new(crate::testing::machine(), MemoryStore::new()).unwrap();
    let user = Actor::new("user");
    let queuer = Queuer::new(4);
    let shared = queuer.shared.clone();
    let mut most = 0;
    for round in 0..10 {
        let gate = Arc::new(std::sync::Barrier::new(5));
        let tickets: Vec<_> = (0..4)
            .map(|i| {
                let id = format!("vm-{round}-{i}");
                rt.create(id.as_str(), &user).unwrap();
                let gate = gate.clone();
                queuer
                    .request(&rt, id.as_str(), &user, "start")
                    .run(move |_| {
                        gate.wait();
                        Ok(())
                    })
                    .unwrap()
            })
            .collect();
        // Every worker holds a job; released together, they go idle
        // together, and spin for `SPIN` at most (looked at for longer,
        // in case this thread or they wait for a core meanwhile).
        gate.wait();
        let until = Instant::now() + Duration::from_millis(2);
        while Instant::now() < until {
            most = most.max(shared.parking.spinning());
        }
        for ticket in tickets {
            ticket.wait().unwrap();
        }
    }
    assert!((1..=SPINNERS).contains(&most), "{most} spinning at once");
    queuer.terminate();
}

/// Built not to spin, a queuer's idle workers park at once (none is ever
/// counted spinning) and each request wakes one through the kernel:
/// every request of many rounds still ends, on the workers, whose
/// threads carry the builder's name.
#[test]
fn a_queuer_built_not_to_spin_parks_its_workers_and_still_runs_every_request() {
    let rt = Runtime::new(crate::testing::machine(), MemoryStore::new()).unwrap();
    let user = Actor::new("user");
    let queuer = Queuer::builder()
        .workers(2)
        .spin(Duration::ZERO)
        .thread_name("vm-queuer")
        .build();
    let shared = queuer.shared.clone();
    let ran_on = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
    let mut most = 0;
    for round in 0..200 {
        let id = format!("vm-{round}");
        rt.create(id.as_str(), &user).unwrap();
        let ran_on = ran_on.clone();
        let mut ticket = queuer
            .request(&rt, id.as_str(), &user, "start")
            .run(move |_| {
                let name = std::thread::current().name().map(str::to_owned);
                lock(&ran_on).insert(name);
                Ok(())
            })
            .unwrap();
        // Polled, not waited for: a waiting thread would run the job
        // itself rather than wait for a parked worker to wake. Meanwhile,
        // the workers go idle: a spinning one would be seen.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            most = most.max(shared.parking.spinning());
            if let Poll::Ready(outcome) = Pin::new(&mut ticket).poll(&mut cx) {
                outcome.unwrap();
                break;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: the request was lost"
            );
        }
        let until = Instant::now() + Duration::from_micros(200);
        while Instant::now() < until {
            most = most.max(shared.parking.spinning());
        }
    }
    assert_eq!(most, 0, "a worker spun");
    let names = lock(&ran_on).clone();
    assert!(
        !names.is_empty()
            && names
                .iter()
                .all(|n| n.as_deref().is_some_and(|n| n.starts_with("vm-queuer-"))),
        "{names:?}"
    );
    // Both parked, waiting for work.
    let deadline = Instant::now() + Duration::from_secs(10);
    while shared.parking.sleepers() < 2 {
        assert!(Instant::now() < deadline, "the workers did not park");
        std::thread::yield_now();
    }
    queuer.terminate();
}

/// The task of a ticket not yet waited for.
fn task(ticket: &Ticket) -> &Arc<dyn Queued> {
    ticket.task.as_ref().expect("not taken yet")
}

/// Where a ticket's task is: the same address, the same task reused.
fn address(ticket: &Ticket) -> *const () {
    Arc::as_ptr(task(ticket)).cast::<()>()
}

/// Waits until the worker let go of the ticket's task (it does once it gave
/// the outcome): only a task nothing else holds is kept as a spare.
fn alone(ticket: &Ticket) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Arc::strong_count(task(ticket)) > 1 {
        assert!(Instant::now() < deadline, "the worker keeps the task");
        std::thread::yield_now();
    }
}

/// Runs `action` on `id` through `queuer` and takes its outcome once the
/// worker let go of its task, which this thread then keeps as its only
/// spare: where that task is.
fn make_spare<S: Store>(
    queuer: &Queuer,
    rt: &Runtime<S>,
    id: &str,
    user: &Actor,
    action: &str,
) -> *const () {
    let ticket = queuer
        .request(rt, id, user, action)
        .run(|_| Ok(()))
        .unwrap();
    let spare = address(&ticket);
    alone(&ticket);
    ticket.wait().unwrap();
    assert_eq!(spares(), 1);
    spare
}

/// How many spare tasks this thread keeps.
fn spares() -> usize {
    SPARE.with(|spare| spare.borrow().len())
}

/// A thread's next request writes its task over the one whose outcome
/// its last ticket took, rather than allocate; and a spare task keeps no
/// runtime, and so no store, alive: the store goes with the last runtime.
#[test]
fn a_thread_reuses_the_task_its_ticket_let_go_and_keeps_no_store_alive() {
    let store = Arc::new(MemoryStore::new());
    let rt = Runtime::new(crate::testing::machine(), store.clone()).unwrap();
    let user = Actor::new("user");
    rt.create("vm", &user).unwrap();
    let queuer = Queuer::new(1);
    let reused = make_spare(&queuer, &rt, "vm", &user, "start");
    // Awaited, the same.
    let mut second = queuer
        .request(&rt, "vm", &user, "stop")
        .run(|_| Ok(()))
        .unwrap();
    assert_eq!(address(&second), reused, "a new task was allocated");
    alone(&second);
    let mut cx = Context::from_waker(Waker::noop());
    let Poll::Ready(record) = Pin::new(&mut second).poll(&mut cx) else {
        panic!("the outcome was given, and not ready");
    };
    assert_eq!(
        rt.machine().state(record.unwrap().state).name.as_ref(),
        "HALTED"
    );
    // The second task is a spare now, on this thread.
    assert_eq!(spares(), 1);
    drop(rt);
    assert_eq!(Arc::strong_count(&store), 1, "a spare task keeps the store");
    // A runtime over another store has tasks of another type: the spare
    // is dropped (not kept beside), the task allocated (perhaps in the
    // block just freed), and that one kept in its place, then reused.
    let other = Runtime::new(crate::testing::machine(), MemoryStore::new()).unwrap();
    other.create("vm", &user).unwrap();
    let allocated = make_spare(&queuer, &other, "vm", &user, "start");
    let fourth = queuer
        .request(&other, "vm", &user, "stop")
        .run(|_| Ok(()))
        .unwrap();
    assert_eq!(
        address(&fourth),
        allocated,
        "the spare of its type was not reused"
    );
    fourth.wait().unwrap();
    queuer.terminate();
}

/// Threads that wait for their own requests while the only worker is busy
/// run them, each leaving its entry in the ready list; past `LEFTOVERS`
/// the waiter that adds one sweeps them out, so the list stays bounded
/// while the worker stays busy. A job still ready in the list (nobody
/// waits for it) is put back by each sweep, and the worker runs it once
/// it is free.
#[test]
fn leftovers_of_requests_their_waiters_ran_are_swept() {
    let rt = Runtime::new(crate::testing::machine(), MemoryStore::new()).unwrap();
    let user = Actor::new("user");
    let queuer = Queuer::new(1);
    for id in ["held", "ready"] {
        rt.create(id, &user).unwrap();
    }
    let (release, released) = std::sync::mpsc::channel::<()>();
    let (started, busy) = std::sync::mpsc::channel::<()>();
    let held = queuer
        .request(&rt, "held", &user, "start")
        .run(move |_| {
            started.send(()).map_err(|e| e.to_string())?;
            released.recv().map_err(|e| e.to_string())
        })
        .unwrap();
    busy.recv().unwrap();
    let ran_on = Arc::new(std::sync::OnceLock::new());
    let mut ready = {
        let ran_on = ran_on.clone();
        queuer
            .request(&rt, "ready", &user, "start")
            .run(move |_| {
                let _ = ran_on.set(std::thread::current().name().map(str::to_owned));
                Ok(())
            })
            .unwrap()
    };
    let listed = || queuer.shared.ready.len() as isize;
    let mut longest = 0;
    for i in 0..3 * LEFTOVERS {
        let id = format!("vm-{i}");
        rt.create(id.as_str(), &user).unwrap();
        let ticket = queuer
            .request(&rt, id.as_str(), &user, "start")
            .run(|_| Ok(()))
            .unwrap();
        ticket.wait().unwrap();
        longest = longest.max(listed());
    }
    // The leftovers piled up, and were swept out each time they passed
    // the bound (the ready job is the one more).
    assert_eq!(longest, LEFTOVERS + 1);
    assert!(listed() <= LEFTOVERS + 1, "{} listed", listed());
    // Awaited (an awaited ticket never runs its job), the ready job is
    // run by the worker once it is free.
    release.send(()).unwrap();
    held.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut cx = Context::from_waker(Waker::noop());
    let record = loop {
        if let Poll::Ready(outcome) = Pin::new(&mut ready).poll(&mut cx) {
            break outcome.unwrap();
        }
        assert!(Instant::now() < deadline, "the ready job was lost");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(rt.machine().state(record.state).name.as_ref(), "RUNNING");
    assert_eq!(
        ran_on.get().cloned().flatten().as_deref(),
        Some("fsm-queuer-0")
    );
    queuer.terminate();
}

/// A ticket polled again after it was ready panics, saying so, rather than
/// stay pending with nobody left to wake it.
#[test]
#[should_panic(expected = "a `Ticket` was polled after it gave its outcome")]
fn a_ticket_polled_after_its_outcome_panics() {
    let rt = Runtime::new(crate::testing::machine(), MemoryStore::new()).unwrap();
    let user = Actor::new("user");
    rt.create("vm", &user).unwrap();
    let queuer = Queuer::new(1);
    let mut ticket = queuer
        .request(&rt, "vm", &user, "start")
        .run(|_| Ok(()))
        .unwrap();
    while !ticket
        .task
        .as_ref()
        .expect("not taken yet")
        .head()
        .outcome
        .is_given()
    {
        std::thread::yield_now();
    }
    let mut cx = Context::from_waker(Waker::noop());
    match Pin::new(&mut ticket).poll(&mut cx) {
        Poll::Ready(outcome) => assert!(outcome.is_ok(), "{outcome:?}"),
        Poll::Pending => panic!("the outcome was given"),
    }
    let _ = Pin::new(&mut ticket).poll(&mut cx);
}

/// A queued action is started on the caller's thread and ended on a
/// worker's, and its holder's box is freed by neither: the memory store keeps
/// it with the object, and the object's next action (started here again) is
/// held in the same box, whether the queued one completed or failed. A box
/// freed on the worker would reach the caller's next start only through the
/// allocator's shared bins (see `Change::apply_reusing`).
#[test]
fn a_queued_action_leaves_its_holder_box_to_the_next_start() {
    let rt = Runtime::new(crate::testing::machine(), MemoryStore::new()).unwrap();
    let user = Actor::new("user");
    let queuer = Queuer::new(1);
    let boxed = |id: &str| {
        rt.store()
            .load_with(&id.into(), |r| {
                r.in_flight.as_deref().map(|h| h as *const Holder as usize)
            })
            .unwrap()
            .flatten()
    };
    for (id, fails, next) in [("completes", false, "stop"), ("fails", true, "start")] {
        rt.create(id, &user).unwrap();
        // The job, taken by the worker (not by the wait below), waits until
        // the box it holds is seen here.
        let (started, taken) = std::sync::mpsc::channel::<()>();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let ticket = queuer
            .request(&rt, id, &user, "start")
            .run(move |_| {
                started.send(()).map_err(|e| e.to_string())?;
                match released.recv() {
                    Ok(()) if fails => Err("no host".to_owned()),
                    got => got.map_err(|e| e.to_string()),
                }
            })
            .unwrap();
        taken.recv().unwrap();
        let first = boxed(id).expect("started");
        release.send(()).unwrap();
        let outcome = ticket.wait();
        let state = &rt.machine().state(rt.state(id).unwrap()).name;
        match outcome {
            Ok(_) if !fails => assert_eq!(state, "RUNNING"),
            Err(QueueError::Failed { .. }) if fails => assert_eq!(state, "HALTED"),
            other => panic!("{id}: {other:?}"),
        }
        assert_eq!(boxed(id), None, "{id}: ended");
        let handle = rt.start(id, &user, next).unwrap();
        assert_eq!(
            boxed(id),
            Some(first),
            "{id}: the next start reuses the box"
        );
        handle.complete().unwrap();
    }
    queuer.terminate();
}

/// Requests look in the shared queues only while some queue is stopping:
/// the count that says so rises while `stop` waits for a running job (and
/// other queues take requests meanwhile), rises and falls again when an
/// object's own queue ends at a terminal state, and is back to zero once
/// the queues it counted are gone (a count left behind would send every
/// later request the slow way).
#[test]
fn the_count_of_stopping_queues_returns_to_zero() {
    let rt = Runtime::new(crate::testing::machine(), MemoryStore::new()).unwrap();
    let user = Actor::new("user");
    for id in ["vm", "other", "old"] {
        rt.create(id, &user).unwrap();
    }
    let queuer = Queuer::new(2);
    let stopping = || queuer.shared.stopping.load(Ordering::Acquire);
    let (release, released) = std::sync::mpsc::channel::<()>();
    let ticket = queuer
        .request(&rt, "vm", &user, "start")
        .run(move |_| released.recv().map_err(|e| e.to_string()))
        .unwrap();
    assert_eq!(stopping(), 0);
    std::thread::scope(|s| {
        let stop = s.spawn(|| queuer.stop("vm"));
        while stopping() == 0 {
            std::thread::yield_now();
        }
        assert_eq!(stopping(), 1);
        // Only the stopping queue refuses.
        let refused = queuer.request(&rt, "vm", &user, "stop").run(|_| Ok(()));
        assert!(
            matches!(refused, Err(QueueError::Closed { .. })),
            "{refused:?}"
        );
        let other = queuer.request(&rt, "other", &user, "start").run(|_| Ok(()));
        release.send(()).unwrap();
        other.expect("another queue takes requests").wait().unwrap();
        stop.join().unwrap();
    });
    ticket.wait().unwrap();
    assert_eq!(stopping(), 0);
    // `retire` ends in a terminal state: the object's queue closes and goes.
    queuer
        .request(&rt, "old", &user, "retire")
        .run(|_| Ok(()))
        .unwrap()
        .wait()
        .unwrap();
    assert!(!queuer.queues().contains(&"old".into()));
    assert_eq!(stopping(), 0);
    queuer.terminate();
    assert_eq!(
        stopping(),
        1,
        "a terminated queuer counts as stopping for good"
    );
}

/// A request the runtime refuses (its object busy) gives back the spare
/// task it took before its start: the thread's next request is written
/// over it.
#[test]
fn a_refused_request_gives_back_its_spare_task() {
    let rt = Runtime::new(crate::testing::machine(), MemoryStore::new()).unwrap();
    let user = Actor::new("user");
    rt.create("vm", &user).unwrap();
    rt.create("other", &user).unwrap();
    let queuer = Queuer::new(1);
    let spare = make_spare(&queuer, &rt, "vm", &user, "start");
    // "other" is held: the request is refused by its start.
    let held = rt.start("other", &user, "start").unwrap();
    let refused = queuer.request(&rt, "other", &user, "stop").run(|_| Ok(()));
    assert!(
        matches!(refused, Err(QueueError::Refused(RuntimeError::Busy { .. }))),
        "{refused:?}"
    );
    assert_eq!(spares(), 1, "the refused request kept the spare");
    held.complete().unwrap();
    let next = queuer
        .request(&rt, "vm", &user, "stop")
        .run(|_| Ok(()))
        .unwrap();
    assert_eq!(address(&next), spare, "a new task was allocated");
    next.wait().unwrap();
    queuer.terminate();
}

/// A composite request is checked twice: against the state read before the
/// start (so a refusal writes nothing), and against the state the start
/// found, which an actor may have changed in between. Refused on that second
/// look, the started action fails back, nothing is queued, and the spare
/// task the request took before its start is kept for the next.
#[test]
fn a_step_is_checked_again_against_the_state_the_start_found() {
    let machine =
        fsm_core::spec::load(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/vm.toml")).unwrap();
    let running = machine.state_id("RUNNING").unwrap();
    let store = LateRead::new(MemoryStore::new());
    let vms = Runtime::new(machine, store).unwrap();
    let user = Actor::new("user");
    vms.create("vm-1", &user).unwrap();
    vms.run("vm-1", &user, "deploy").unwrap();
    vms.run("vm-1", &user, "stop").unwrap();
    let queuer = Queuer::new(1);
    let spare = make_spare(&queuer, &vms, "vm-1", &user, "add_disk");
    let written = vms.history("vm-1").unwrap().len();
    // Read as RUNNING, where `stop` may start; started from HALTED, where it
    // may not (`destroy` may start from both).
    vms.store().arm(running);
    let err = queuer
        .request(&vms, "vm-1", &user, "destroy")
        .step("stop", |_| Ok(()))
        .step("destroy", |_| Ok(()))
        .submit()
        .unwrap_err();
    assert!(
        !vms.store().armed(),
        "the request read the object before its start"
    );
    assert_eq!(
        err.to_string(),
        "vm-1: a step of `destroy` is refused: `stop` cannot start in HALTED: it starts only from RUNNING, PAUSED"
    );
    // Started, then failed back: HALTED again, held by nobody, nothing queued.
    let record = vms.get("vm-1").unwrap();
    assert_eq!(vms.machine().state(record.state).name, "HALTED");
    assert!(record.in_flight.is_none());
    let kinds: Vec<_> = (vms.history("vm-1").unwrap()[written..].iter())
        .map(|entry| entry.kind)
        .collect();
    assert_eq!(kinds, [EntryKind::Started, EntryKind::Failed]);
    assert!(queuer.queues().is_empty());
    assert_eq!(spares(), 1, "the refused request kept the spare");
    // Read right, the same request is refused before its start.
    let err = queuer
        .request(&vms, "vm-1", &user, "destroy")
        .step("stop", |_| Ok(()))
        .submit()
        .unwrap_err();
    let QueueError::Step { refused, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(
        matches!(&**refused, fsm_core::RuleError::NotFrom { action, state, .. } if action == "stop" && state == "HALTED"),
        "{refused:?}"
    );
    assert_eq!(vms.history("vm-1").unwrap().len(), written + 2);
    // The next accepted request writes its task over the spare.
    let next = queuer
        .request(&vms, "vm-1", &user, "add_disk")
        .run(|_| Ok(()))
        .unwrap();
    assert_eq!(address(&next), spare, "a new task was allocated");
    next.wait().unwrap();
    queuer.terminate();
}
