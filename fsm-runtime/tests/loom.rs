//! Every interleaving of a few threads, checked by loom, on the real in-memory store
//! (built with loom's locks): its compare-and-set commit, the completion's retry when
//! the other holder slot wrote meanwhile, and the publisher's order; and on the
//! queuer's parking of idle workers (its wake-ups: no job left with every worker
//! asleep).
//!
//! `RUSTFLAGS="--cfg fsm_loom" cargo test -p fsm-runtime --release --test loom`
//! (`scripts/test` runs it, in a target directory of its own).
#![cfg(fsm_loom)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use fsm_core::Machine;
use fsm_runtime::{Actor, EntryKind, MemoryStore, Runtime, RuntimeError, check_history};

fn vm() -> Machine {
    fsm_core::spec::load(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../specs/ovc/vm.toml"))
        .unwrap()
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    model_bounded(3, f);
}

/// `model`, with at most `preemptions` preemptions per interleaving.
fn model_bounded(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    let runs = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    builder.check(move || {
        counted.fetch_add(1, Ordering::Relaxed);
        f()
    });
    eprintln!("loom: {} interleavings", runs.load(Ordering::Relaxed));
}

/// A running VM in a fresh store.
fn running(machine: &Machine) -> Runtime {
    let rt = Runtime::new(machine.clone(), MemoryStore::new()).unwrap();
    let ops = Actor::new("ops");
    rt.create("vm", &ops).unwrap();
    rt.run("vm", &ops, "deploy").unwrap();
    rt
}

/// Two threads start the same action on one object: exactly one wins; the other is
/// told the object is busy or that it changed; the history holds one reboot.
#[test]
fn one_of_two_racing_starts_wins() {
    let machine = vm();
    model(move || {
        let rt = running(&machine);
        let racers: Vec<_> = (0..2)
            .map(|t| {
                let rt = rt.clone();
                loom::thread::spawn(move || {
                    match rt.start("vm", &Actor::new(format!("t{t}")), "reboot") {
                        Ok(handle) => {
                            handle.complete().unwrap();
                            true
                        }
                        Err(RuntimeError::Busy { .. } | RuntimeError::Conflict { .. }) => false,
                        Err(e) => panic!("{e}"),
                    }
                })
            })
            .collect();
        let wins: Vec<bool> = racers.into_iter().map(|r| r.join().unwrap()).collect();
        if wins.contains(&false) {
            REFUSED.fetch_add(1, Ordering::Relaxed);
        }
        let history = rt.history("vm").unwrap();
        check_history(rt.machine(), &history).unwrap();
        let reboots = history
            .iter()
            .filter(|e| e.kind == EntryKind::Started)
            .count()
            - 1;
        // Both may win, one after the other; never more starts than wins.
        assert_eq!(reboots, wins.iter().filter(|&&w| w).count());
        assert!(wins.contains(&true), "one of them wins");
    });
    // The race happened: in some interleaving one start was refused.
    assert!(REFUSED.load(Ordering::Relaxed) > 0);
}

/// Interleavings (across all of a model's executions) in which the race was lost.
static REFUSED: AtomicUsize = AtomicUsize::new(0);
static INTERLEAVED: AtomicUsize = AtomicUsize::new(0);

/// A hidden action completes while a visible one starts and completes beside it:
/// the completion re-reads and retries on the other slot's write, and both land. The
/// visible start may lose its compare-and-set to the completion (`409`) and starts again,
/// as a client would.
#[test]
fn a_completion_retries_past_the_other_slots_write() {
    let machine = vm();
    model(move || {
        let rt = running(&machine);
        let migrate = rt
            .start("vm", &Actor::new("balancer"), "migrate")
            .unwrap()
            .into_owned();
        let hidden = loom::thread::spawn(move || {
            migrate.complete().unwrap();
        });
        let visible = {
            let rt = rt.clone();
            loom::thread::spawn(move || {
                let user = Actor::new("user");
                loop {
                    match rt.run("vm", &user, "reboot") {
                        Ok(_) => break,
                        Err(RuntimeError::Conflict { .. }) => continue,
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        };
        hidden.join().unwrap();
        visible.join().unwrap();
        let record = rt.get("vm").unwrap();
        assert!(record.in_flight.is_none() && record.hidden.is_none());
        assert_eq!(rt.state_name("vm").unwrap(), "RUNNING");
        let history = rt.history("vm").unwrap();
        check_history(rt.machine(), &history).unwrap();
        let at = |kind: EntryKind, action: &str| {
            let action = rt.machine().action_named(action);
            history
                .iter()
                .position(|e| e.kind == kind && e.action == action)
                .unwrap()
        };
        // The reboot started while the migration was held: the completion then wrote
        // on a version other than the one it started from.
        if at(EntryKind::Started, "reboot") < at(EntryKind::Completed, "migrate") {
            INTERLEAVED.fetch_add(1, Ordering::Relaxed);
        }
    });
    assert!(INTERLEAVED.load(Ordering::Relaxed) > 0);
}

/// Writers on two objects on the one shard the model's store has, and a watcher: it sees every write, each
/// object's versions in order, none twice.
#[test]
fn watchers_see_each_objects_writes_in_order() {
    let machine = vm();
    model(move || {
        let rt = Runtime::new(machine.clone(), MemoryStore::new()).unwrap();
        let mut watcher = rt.watch().unwrap();
        let writers: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|id| {
                let rt = rt.clone();
                loom::thread::spawn(move || {
                    let ops = Actor::new("ops");
                    rt.create(id, &ops).unwrap();
                    rt.run(id, &ops, "deploy").unwrap();
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let mut seen: Vec<(String, u64)> = Vec::new();
        while let Some(event) = watcher.try_recv().unwrap() {
            seen.push((event.id.to_string(), event.entry.version));
        }
        for id in ["a", "b"] {
            let versions: Vec<u64> = seen
                .iter()
                .filter(|(i, _)| i == id)
                .map(|(_, v)| *v)
                .collect();
            assert_eq!(versions, [1, 2, 3], "{id}: {seen:?}");
        }
    });
}

/// The queuer's two idle workers (the real [`Parking`](fsm_runtime::LoomParking))
/// and a caller pushing jobs, each followed by the pusher's wake-up: every job
/// is taken. A job left while both workers sleep would leave them and the caller
/// (waiting for the jobs to be taken) blocked for ever, which loom reports as a
/// deadlock. Without spinning, two jobs (a worker that takes one and sees the
/// other passes the wake-up on); with spinning (a worker counted spinning spares
/// the pusher its wake-up), one job: two would take minutes. About 125,000 and
/// 540,000 interleavings, 30 s in all. Checked to fail, as a deadlock, with the
/// pusher's fence removed (each configuration), and with the parking worker's
/// last look removed (without spinning).
#[test]
fn no_pushed_job_is_left_with_every_worker_asleep() {
    use loom::sync::atomic::AtomicBool;
    use loom::sync::{Arc, Condvar, Mutex};
    use std::time::Duration;

    for (spin, jobs, preemptions) in [(Duration::ZERO, 2, 2), (Duration::from_micros(50), 1, 2)] {
        model_bounded(preemptions, move || {
            let parking = Arc::new(fsm_runtime::LoomParking::new(spin));
            // The ready list: jobs pushed and not yet taken.
            let ready = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
            let stopped = Arc::new(AtomicBool::new(false));
            let taken = Arc::new((Mutex::new(0usize), Condvar::new()));
            let workers: Vec<_> = (0..2)
                .map(|_| {
                    let (parking, ready, stopped, taken) = (
                        parking.clone(),
                        ready.clone(),
                        stopped.clone(),
                        taken.clone(),
                    );
                    loom::thread::spawn(move || {
                        loop {
                            let take = |n: usize| n.checked_sub(1);
                            if ready
                                .fetch_update(Ordering::AcqRel, Ordering::Acquire, take)
                                .is_ok()
                            {
                                if ready.load(Ordering::Acquire) > 0 {
                                    parking.pass_on();
                                }
                                let (count, changed) = &*taken;
                                *count.lock().unwrap() += 1;
                                changed.notify_all();
                                continue;
                            }
                            if stopped.load(Ordering::Acquire) {
                                return;
                            }
                            parking.idle(
                                || ready.load(Ordering::Acquire) > 0,
                                || stopped.load(Ordering::Acquire),
                            );
                        }
                    })
                })
                .collect();
            for _ in 0..jobs {
                ready.fetch_add(1, Ordering::Release);
                parking.pushed();
            }
            let (count, changed) = &*taken;
            let mut done = count.lock().unwrap();
            while *done < jobs {
                done = changed.wait(done).unwrap();
            }
            drop(done);
            stopped.store(true, Ordering::SeqCst);
            parking.stop_all();
            for worker in workers {
                worker.join().unwrap();
            }
        });
    }
}
