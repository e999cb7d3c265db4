//! The queuer and the healer: OpenvCloud's Scenario 1, routing, stopping, crashes,
//! timeouts, async use, and a stress run.

use std::future::Future as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use fsm_core::Machine;
use fsm_runtime::{
    Actor, Fence, Healer, ManualClock, MemoryStore, QueueError, Queuer, Runtime, RuntimeError,
    check_history,
};

fn spec(path: &str) -> Machine {
    fsm_core::spec::load(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../specs")
            .join(path),
    )
    .unwrap()
}

type Log = Arc<Mutex<Vec<String>>>;

/// Work that records `what` in `log`.
fn note(log: &Log, what: &str) -> impl FnOnce(Fence) -> Result<(), String> + Send + 'static {
    let (log, what) = (log.clone(), what.to_owned());
    move |_| {
        log.lock().unwrap().push(what);
        Ok(())
    }
}

fn running_vm(rt: &Runtime, id: &str) {
    let ops = Actor::new("ops");
    rt.create(id, &ops).unwrap();
    rt.run(id, &ops, "deploy").unwrap();
}

/// `action` on `id` queued with work that holds its worker until released:
/// its ticket, and what releases it, once a thread runs the work.
fn held(
    queuer: &Queuer,
    rt: &Runtime,
    id: &str,
    actor: &Actor,
    action: &str,
) -> (fsm_runtime::Ticket, mpsc::Sender<()>) {
    let (started, taken) = mpsc::channel::<()>();
    let (release, released) = mpsc::channel::<()>();
    let ticket = queuer
        .request(rt, id, actor, action)
        .run(move |_| {
            started.send(()).map_err(|e| e.to_string())?;
            released.recv().map_err(|e| e.to_string())
        })
        .unwrap();
    taken.recv().unwrap();
    (ticket, release)
}

/// VMs on a clock that moves only when told to.
fn clocked_vms() -> (Arc<ManualClock>, Runtime) {
    let clock = Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH));
    let vms = Runtime::builder(spec("ovc/vm.toml"), MemoryStore::new())
        .clock(clock.clone())
        .build()
        .unwrap();
    (clock, vms)
}

/// Scenario 1 of ovc-transition-states.md, step by step.
#[test]
fn scenario_1_a_destroy_requested_during_a_migration_waits_for_it() {
    let vms = Runtime::new(spec("ovc/vm.toml"), MemoryStore::new()).unwrap();
    running_vm(&vms, "vm-1");
    let (user, platform) = (Actor::new("user"), Actor::new("load-balancer"));
    let queuer = Queuer::new(2);
    let log: Log = Arc::default();

    // Migration is queued; the VM's status does not change.
    let (started, migrating) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let migration = {
        let log = log.clone();
        queuer
            .request(&vms, "vm-1", &platform, "migrate")
            .run(move |_| {
                log.lock().unwrap().push("migrate".into());
                started.send(()).unwrap();
                released.recv().unwrap();
                Ok(())
            })
            .unwrap()
    };
    migrating.recv().unwrap();
    assert_eq!(vms.state_name("vm-1").unwrap(), "RUNNING");

    // A destroy requested during it sets DESTROYING at once, and waits.
    let destroy = queuer
        .request(&vms, "vm-1", &user, "destroy")
        .step("stop", note(&log, "stop"))
        .step("delete", note(&log, "delete"))
        .step("destroy", note(&log, "destroy"))
        .submit()
        .unwrap();
    assert_eq!(vms.state_name("vm-1").unwrap(), "DESTROYING");
    assert_eq!(*log.lock().unwrap(), ["migrate"]);

    // Only one user request at a time: a second one is refused.
    let refused = queuer
        .request(&vms, "vm-1", &user, "reboot")
        .run(|_| Ok(()))
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "cannot execute action at this time: vm-1 is DESTROYING while `destroy` runs (held by user)"
    );

    // Once the migration is done, stop, delete and destroy run, in order.
    release.send(()).unwrap();
    let after_migration = migration.wait().unwrap();
    assert_eq!(
        vms.machine().state(after_migration.state).name,
        "DESTROYING"
    );
    let done = destroy.wait().unwrap();
    assert_eq!(vms.machine().state(done.state).name, "DESTROYED");
    assert_eq!(
        *log.lock().unwrap(),
        ["migrate", "stop", "delete", "destroy"]
    );

    // The VM is destroyed: its queue is gone.
    assert_eq!(queuer.queues(), Vec::<fsm_runtime::ObjectId>::new());
    check_history(vms.machine(), &vms.history("vm-1").unwrap()).unwrap();
    queuer.terminate();
}

#[test]
fn a_refused_request_queues_nothing_and_a_step_is_checked_against_the_table() {
    let vms = Runtime::new(spec("ovc/vm.toml"), MemoryStore::new()).unwrap();
    let user = Actor::new("user");
    vms.create("vm-1", &user).unwrap();
    let queuer = Queuer::new(1);
    let err = queuer
        .request(&vms, "vm-1", &user, "pause")
        .run(|_| Ok(()))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "vm-1: `pause` cannot start in VIRTUAL: it starts only from RUNNING"
    );
    assert!(queuer.queues().is_empty());

    running_vm(&vms, "vm-2");
    let written = vms.history("vm-2").unwrap().len();
    let err = queuer
        .request(&vms, "vm-2", &user, "destroy")
        .step("resume", |_| Ok(()))
        .submit()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "vm-2: a step of `destroy` is refused: `resume` cannot start in RUNNING: it starts only from PAUSED"
    );
    assert_eq!(vms.state_name("vm-2").unwrap(), "RUNNING");
    // Refused before the start: nothing was written, no queue was made.
    assert_eq!(vms.history("vm-2").unwrap().len(), written);
    assert!(queuer.queues().is_empty());

    // A name that is no action of the machine, as the request or as a step
    // (the first such step), is refused as such: nothing is started.
    for (action, steps, unknown) in [
        ("destroi", &["stop"][..], "destroi"),
        ("destroy", &["stop", "delet", "zap"][..], "delet"),
    ] {
        let request = queuer.request(&vms, "vm-2", &user, action);
        let request = (steps.iter()).fold(request, |request, &step| request.step(step, |_| Ok(())));
        let err = request.run(|_| Ok(())).unwrap_err();
        assert!(
            matches!(&err, QueueError::Refused(RuntimeError::UnknownAction(e)) if e.name == unknown),
            "{action} {steps:?}: {err:?}"
        );
    }
    assert_eq!(vms.state_name("vm-2").unwrap(), "RUNNING");
    assert_eq!(vms.history("vm-2").unwrap().len(), written);
    assert!(queuer.queues().is_empty());
}

#[test]
fn failing_work_fails_the_action_back_to_its_origin() {
    let vms = Runtime::new(spec("ovc/vm.toml"), MemoryStore::new()).unwrap();
    running_vm(&vms, "vm-1");
    let queuer = Queuer::new(1);
    let log: Log = Arc::default();
    let outcome = queuer
        .request(&vms, "vm-1", &Actor::new("user"), "destroy")
        .step("stop", note(&log, "stop"))
        .step("delete", |_| Err("the hypervisor said no".into()))
        .step("destroy", note(&log, "destroy"))
        .submit()
        .unwrap()
        .wait();
    assert_eq!(
        outcome.unwrap_err(),
        QueueError::Failed {
            step: "delete".into(),
            message: "the hypervisor said no".into()
        }
    );
    assert_eq!(*log.lock().unwrap(), ["stop"]);
    assert_eq!(vms.state_name("vm-1").unwrap(), "RUNNING");
}

#[test]
fn actions_on_a_disk_wait_in_the_queue_of_its_vm() {
    let vms = Runtime::new(spec("ovc/vm.toml"), MemoryStore::new()).unwrap();
    let disks = Runtime::new(spec("ovc/disk.toml"), MemoryStore::new()).unwrap();
    running_vm(&vms, "vm-1");
    let user = Actor::new("user");
    disks.create("disk-7", &user).unwrap();
    let attached: HashMapLike = Arc::new(Mutex::new(vec![("disk-7".into(), "vm-1".into())]));
    let queuer = {
        let attached = attached.clone();
        Queuer::with_route(2, move |machine, id| {
            let attached = attached.lock().unwrap();
            match attached
                .iter()
                .find(|(d, _)| machine == "disk" && d == id.as_str())
            {
                Some((_, vm)) => vm.as_str().into(),
                None => id.clone(),
            }
        })
    };
    let log: Log = Arc::default();
    let (release, released) = mpsc::channel::<()>();
    let (started, busy) = mpsc::channel();
    let reboot = {
        let log = log.clone();
        queuer
            .request(&vms, "vm-1", &user, "reboot")
            .run(move |_| {
                started.send(()).unwrap();
                released.recv().unwrap();
                log.lock().unwrap().push("reboot vm-1".into());
                Ok(())
            })
            .unwrap()
    };
    busy.recv().unwrap();
    let create = queuer
        .request(&disks, "disk-7", &user, "create")
        .run(note(&log, "create disk-7"))
        .unwrap();
    assert_eq!(queuer.queues(), ["vm-1"]);
    release.send(()).unwrap();
    reboot.wait().unwrap();
    create.wait().unwrap();
    assert_eq!(*log.lock().unwrap(), ["reboot vm-1", "create disk-7"]);
}

type HashMapLike = Arc<Mutex<Vec<(String, String)>>>;

#[test]
fn stop_runs_what_is_queued_then_deletes_the_queue() {
    let vms = Runtime::new(spec("ovc/vm.toml"), MemoryStore::new()).unwrap();
    running_vm(&vms, "vm-1");
    let user = Actor::new("user");
    let queuer = Queuer::new(2);
    let log: Log = Arc::default();
    let (release, released) = mpsc::channel::<()>();
    let ticket = {
        let log = log.clone();
        queuer
            .request(&vms, "vm-1", &user, "pause")
            .run(move |_| {
                released.recv().unwrap();
                log.lock().unwrap().push("pause".into());
                Ok(())
            })
            .unwrap()
    };
    let stopper = std::thread::scope(|s| {
        let stopping = s.spawn(|| queuer.stop("vm-1"));
        // Once `stop` has begun, the queue takes no more requests.
        let closed = loop {
            match queuer.request(&vms, "vm-1", &user, "stop").run(|_| Ok(())) {
                Err(QueueError::Refused(_)) => std::thread::yield_now(),
                other => break other.map(|_| ()),
            }
        };
        // Release the action before asserting, so that a failure cannot leave
        // `stop` waiting forever.
        release.send(()).unwrap();
        assert_eq!(
            closed.unwrap_err().to_string(),
            "the queue of vm-1 is stopping and takes no more requests"
        );
        stopping.join().unwrap();
        // `stop` returned: the queued action ran, and the queue is gone.
        assert_eq!(*log.lock().unwrap(), ["pause"]);
        queuer.queues()
    });
    assert!(stopper.is_empty());
    assert_eq!(
        vms.machine().state(ticket.wait().unwrap().state).name,
        "PAUSED"
    );
    // A later request makes a new queue.
    queuer
        .request(&vms, "vm-1", &user, "resume")
        .run(|_| Ok(()))
        .unwrap()
        .wait()
        .unwrap();
    queuer.terminate();
    assert_eq!(
        queuer
            .request(&vms, "vm-1", &user, "pause")
            .run(|_| Ok(()))
            .unwrap_err(),
        QueueError::Terminated
    );
}

#[test]
fn a_crashed_worker_leaves_the_object_for_the_healer() {
    let (_, vms) = clocked_vms();
    running_vm(&vms, "vm-1");
    let queuer = Queuer::new(1);
    quiet_planned_panics();
    let ticket = queuer
        .request(&vms, "vm-1", &Actor::new("user"), "stop")
        .run(|_| panic!("worker crashed"))
        .unwrap();
    assert!(matches!(ticket.wait(), Err(QueueError::Crashed { .. })));
    let record = vms.get("vm-1").unwrap();
    assert_eq!(vms.machine().state(record.state).name, "STOPPING");
    assert!(record.in_flight.unwrap().abandoned);
    // The only worker survived the panic.
    running_vm(&vms, "vm-2");
    let paused = queuer
        .request(&vms, "vm-2", &Actor::new("user"), "pause")
        .run(|_| Ok(()))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(vms.machine().state(paused.state).name, "PAUSED");

    // Abandoned: healed at once, whatever the timeout.
    let report = Healer::new()
        .deadline(Duration::from_secs(3600))
        .heal(&vms)
        .unwrap();
    assert_eq!(report.healed.len(), 1);
    let healed = &report.healed[0];
    assert_eq!(
        (
            healed.id.as_str(),
            healed.action.as_str(),
            healed.stuck_in.as_str(),
            healed.restored.as_str()
        ),
        ("vm-1", "stop", "STOPPING", "RUNNING")
    );
    assert!(healed.abandoned);
    assert_eq!(vms.state_name("vm-1").unwrap(), "RUNNING");
    check_history(vms.machine(), &vms.history("vm-1").unwrap()).unwrap();
}

#[test]
fn the_healer_waits_for_the_timeout_of_the_state_and_never_undoes_a_finished_action() {
    let (clock, vms) = clocked_vms();
    let user = Actor::new("user");
    for id in ["vm-1", "vm-2", "vm-3"] {
        running_vm(&vms, id);
    }
    let start = clock_now(&clock);
    let pausing = vms.start("vm-1", &user, "pause").unwrap();
    let rebooting = vms.start("vm-2", &user, "reboot").unwrap();
    let finishing = vms.start("vm-3", &user, "stop").unwrap();
    let healer = Healer::new()
        .deadline(Duration::from_secs(600))
        .deadline_for("REBOOTING", Duration::from_secs(60))
        .actor(Actor::new("selfhealing"));

    clock.advance(Duration::from_secs(61));
    let report = healer.heal(&vms).unwrap();
    assert_eq!(report.healed.len(), 1, "only REBOOTING is past its timeout");
    assert_eq!(report.healed[0].id.as_str(), "vm-2");
    assert_eq!(report.healed[0].since, start);
    assert_eq!(vms.state_name("vm-2").unwrap(), "RUNNING");
    // The rebooting worker finishes late: its write is refused, nothing is lost.
    assert!(rebooting.complete().is_err());

    clock.advance(Duration::from_secs(600));
    // vm-3's action finishes between the healer's read and its write: simulate by
    // reading first, finishing, then healing from the stale read.
    let stale = vms.get("vm-3").unwrap();
    finishing.complete().unwrap();
    assert!(
        vms.roll_back("vm-3", &stale, &Actor::new("selfhealing"))
            .is_err()
    );
    let report = healer.heal(&vms).unwrap();
    assert_eq!(
        report
            .healed
            .iter()
            .map(|h| h.id.as_str())
            .collect::<Vec<_>>(),
        ["vm-1"]
    );
    assert_eq!(vms.state_name("vm-3").unwrap(), "HALTED");
    drop(pausing);
    let last = vms.history("vm-2").unwrap().pop().unwrap();
    assert_eq!(&*last.actor, "selfhealing");
}

/// A deadline for a state the machine does not have fails the pass, naming
/// the state closest to it, and heals nothing; a name in another case is the
/// spec's state, and a later deadline for it replaces the earlier.
#[test]
fn a_deadline_for_a_state_the_machine_lacks_fails_the_pass_and_names_the_closest() {
    let (clock, vms) = clocked_vms();
    running_vm(&vms, "vm-1");
    let rebooting = vms.start("vm-1", &Actor::new("user"), "reboot").unwrap();
    clock.advance(Duration::from_secs(61));

    let typo = Healer::new().deadline_for("REBOTING", Duration::from_secs(60));
    match typo.heal(&vms) {
        Err(RuntimeError::UnknownState(unknown)) => {
            assert_eq!(unknown.name, "REBOTING");
            assert_eq!(unknown.suggestion.as_deref(), Some("REBOOTING"));
            assert_eq!(
                unknown.to_string(),
                "machine `vm` has no state `REBOTING`; did you mean `REBOOTING`?"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        vms.state_name("vm-1").unwrap(),
        "REBOOTING",
        "nothing healed"
    );

    let later = Healer::new()
        .deadline_for("REBOOTING", Duration::from_secs(30))
        .deadline_for("rebooting", Duration::from_secs(120));
    assert!(later.heal(&vms).unwrap().healed.is_empty(), "120 s, not 30");
    clock.advance(Duration::from_secs(60));
    let report = later.heal(&vms).unwrap();
    assert_eq!(report.healed.len(), 1);
    assert_eq!(report.healed[0].stuck_in, "REBOOTING");
    assert_eq!(report.healed[0].deadline, Some(Duration::from_secs(120)));
    assert!(rebooting.complete().is_err());
}

fn clock_now(clock: &ManualClock) -> SystemTime {
    use fsm_runtime::Clock;
    clock.now()
}

#[test]
fn the_periodic_healer_reports_and_stops() {
    let (_, vms) = clocked_vms();
    running_vm(&vms, "vm-1");
    drop(vms.start("vm-1", &Actor::new("user"), "pause").unwrap());
    let (tx, reports) = mpsc::channel();
    let healer = Healer::new().deadline(Duration::from_secs(60)).spawn(
        vms.clone(),
        Duration::from_millis(1),
        move |r| {
            let _ = tx.send(r);
        },
    );
    let report = loop {
        let r = reports.recv().unwrap().unwrap();
        if !r.healed.is_empty() {
            break r;
        }
    };
    healer.stop();
    assert_eq!(report.healed[0].restored, "RUNNING");
}

#[test]
fn an_async_caller_awaits_its_ticket() {
    let vms = Runtime::new(spec("ovc/vm.toml"), MemoryStore::new()).unwrap();
    running_vm(&vms, "vm-1");
    let queuer = Queuer::new(1);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let record = rt.block_on(async {
        queuer
            .request(&vms, "vm-1", &Actor::new("user"), "pause")
            .run(|_| Ok(()))
            .unwrap()
            .await
    });
    assert_eq!(vms.machine().state(record.unwrap().state).name, "PAUSED");
}

/// A ticket awaited, or waited for, before its work ends is woken when it ends:
/// the future is pending first, and the blocking wait outlasts its spinning.
#[test]
fn a_ticket_is_woken_when_its_work_ends() {
    let vms = Runtime::new(spec("ovc/vm.toml"), MemoryStore::new()).unwrap();
    running_vm(&vms, "vm-1");
    running_vm(&vms, "vm-2");
    let queuer = Queuer::new(1);
    let user = Actor::new("user");

    let (release, released) = std::sync::mpsc::channel::<()>();
    let mut ticket = queuer
        .request(&vms, "vm-1", &user, "pause")
        .run(move |_| {
            released.recv().map_err(|e| e.to_string())?;
            Ok(())
        })
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut pending = 0;
    let record = rt.block_on(std::future::poll_fn(|cx| {
        match std::pin::Pin::new(&mut ticket).poll(cx) {
            std::task::Poll::Pending => {
                pending += 1;
                // The work may end now; only `give` wakes this task.
                release.send(()).unwrap();
                std::task::Poll::Pending
            }
            ready => ready,
        }
    }));
    assert_eq!(pending, 1, "the ticket was pending once, then woken");
    assert_eq!(vms.machine().state(record.unwrap().state).name, "PAUSED");

    // Taken by the worker before the wait, so that the wait cannot run it.
    let (started, taken) = std::sync::mpsc::channel::<()>();
    let slow = queuer
        .request(&vms, "vm-2", &user, "pause")
        .run(move |_| {
            started.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            Ok(())
        })
        .unwrap();
    taken.recv().unwrap();
    let record = slow.wait().unwrap();
    assert_eq!(vms.machine().state(record.state).name, "PAUSED");
}

/// A thread that waits for a request no worker has taken yet runs its work
/// itself, rather than wait for a worker: with the only worker held by a long
/// action on vm-1, a pause of vm-2 ends on the waiting thread. A request behind
/// another on its own queue still waits its turn: the wait does not run it
/// while the one before it runs.
#[test]
fn a_waiting_ticket_runs_work_no_worker_has_taken() {
    let vms = Runtime::new(spec("ovc/vm.toml"), MemoryStore::new()).unwrap();
    for id in ["vm-1", "vm-2", "vm-3"] {
        running_vm(&vms, id);
    }
    let user = Actor::new("user");
    // Each queuer's one worker is held by a pause of vm-1 until released.
    let hold = |queuer: &Queuer| held(queuer, &vms, "vm-1", &user, "pause");
    let ran_on = Arc::new(Mutex::new(None));
    let record_thread = |ran_on: &Arc<Mutex<_>>| {
        let ran_on = ran_on.clone();
        move |_| {
            *ran_on.lock().unwrap() = Some(std::thread::current().id());
            Ok(())
        }
    };

    let queuer = Queuer::new(1);
    let (long, release) = hold(&queuer);
    let quick = queuer
        .request(&vms, "vm-2", &user, "pause")
        .run(record_thread(&ran_on))
        .unwrap();
    let (done, outcome) = mpsc::channel();
    let waiter = std::thread::spawn(move || done.send(quick.wait()));
    let Ok(record) = outcome.recv_timeout(Duration::from_secs(10)) else {
        release.send(()).unwrap();
        panic!("the waiting ticket did not run its work while the worker was busy");
    };
    assert_eq!(vms.machine().state(record.unwrap().state).name, "PAUSED");
    assert_eq!(*ran_on.lock().unwrap(), Some(waiter.thread().id()));
    assert_eq!(vms.state_name("vm-1").unwrap(), "PAUSING", "still held");
    release.send(()).unwrap();
    long.wait().unwrap();
    queuer.terminate();

    // Every request on one queue: vm-3's pause waits behind vm-1's.
    *ran_on.lock().unwrap() = None;
    let queuer = Queuer::with_route(1, |_, _| "host".into());
    vms.run("vm-1", &user, "resume").unwrap();
    let (long, release) = hold(&queuer);
    let behind = queuer
        .request(&vms, "vm-3", &user, "pause")
        .run(record_thread(&ran_on))
        .unwrap();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| behind.wait());
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(*ran_on.lock().unwrap(), None, "ran before the job ahead");
        assert!(!waiter.is_finished());
        release.send(()).unwrap();
        waiter.join().unwrap().unwrap();
    });
    long.wait().unwrap();
    assert!(ran_on.lock().unwrap().is_some());
    assert_eq!(vms.state_name("vm-3").unwrap(), "PAUSED");
}

/// A job a waiting ticket runs leaves its entry in the ready list; the worker
/// that meets the entry while the job still runs passes over it, and the
/// ticket has the job's own outcome, given once (a second outcome panics in a
/// debug build).
#[test]
fn a_worker_passes_over_the_entry_of_a_job_a_waiting_ticket_runs() {
    let vms = Runtime::new(spec("ovc/vm.toml"), MemoryStore::new()).unwrap();
    for id in ["vm-1", "vm-2"] {
        running_vm(&vms, id);
    }
    let user = Actor::new("user");
    let queuer = Queuer::new(1);
    // The only worker, held by a pause of vm-1.
    let (long, release) = held(&queuer, &vms, "vm-1", &user, "pause");
    // vm-2's pause, run by its waiting ticket, until told to end.
    let (running, runs) = mpsc::channel::<()>();
    let (end, ends) = mpsc::channel::<()>();
    let quick = queuer
        .request(&vms, "vm-2", &user, "pause")
        .run(move |_| {
            running.send(()).unwrap();
            ends.recv().map_err(|e| e.to_string())
        })
        .unwrap();
    let waiter = std::thread::spawn(move || quick.wait());
    runs.recv().unwrap();
    // The worker ends vm-1's pause and, before its ticket has the outcome,
    // looks for its next job: it meets vm-2's entry, whose job still runs.
    release.send(()).unwrap();
    long.wait().unwrap();
    end.send(()).unwrap();
    let record = waiter.join().expect("one outcome").unwrap();
    assert_eq!(vms.machine().state(record.state).name, "PAUSED");
    queuer.terminate();
}

/// 4 workers, 500 objects, 50,000 random requests, some failing, some crashing.
#[test]
fn stress_the_healer_leaves_nothing_stuck_and_every_history_is_a_path() {
    const OBJECTS: usize = 500;
    const REQUESTS: u64 = 50_000;
    quiet_planned_panics();
    let (clock, vms) = clocked_vms();
    let machine = vms.machine().clone();
    for i in 0..OBJECTS {
        running_vm(&vms, &format!("vm-{i}"));
    }
    let queuer = Queuer::new(4);
    let user = Actor::new("user");
    let all: Vec<_> = machine.action_ids().collect();
    let (accepted, refused) = (AtomicU64::new(0), AtomicU64::new(0));
    let mut tickets = Vec::new();
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    for _ in 0..REQUESTS {
        let id = format!("vm-{}", next(OBJECTS));
        let mut action = all[next(all.len())];
        // Keep most objects alive: terminal actions are rare.
        if machine
            .rules_of(action)
            .any(|r| machine.state(r.target).terminal)
            && next(50) != 0
        {
            action = all[0];
        }
        let fate = next(100);
        let work = move |_: Fence| -> Result<(), String> {
            match fate {
                0 => panic!("worker crashed"),
                1..=9 => Err("the hypervisor said no".into()),
                _ => Ok(()),
            }
        };
        match queuer.request(&vms, id, &user, action).run(work) {
            Ok(ticket) => {
                accepted.fetch_add(1, Ordering::Relaxed);
                tickets.push(ticket);
            }
            Err(QueueError::Refused(_)) => {
                refused.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => panic!("{e}"),
        }
    }
    let crashed = tickets
        .into_iter()
        .map(|t| t.wait())
        .filter(|r| matches!(r, Err(QueueError::Crashed { .. })))
        .count();
    queuer.terminate();
    // A request on an object whose action is still running is refused: how
    // many are accepted depends on how fast the workers end actions against
    // how fast this thread asks, which varies with the machine, the build and
    // the queuer (6,900–14,100 of 50,000 in release builds beside the other
    // tests, on two cores, with the queuer's central lock; 1,650–2,400 with
    // the lock-free queuer, whose callers ask faster). The bound only says the
    // stress did run.
    assert!(
        accepted.load(Ordering::Relaxed) > 1_000,
        "{accepted:?} accepted"
    );
    assert!(crashed > 0);

    clock.advance(Duration::from_secs(3600));
    let report = Healer::new()
        .deadline(Duration::from_secs(600))
        .heal(&vms)
        .unwrap();
    assert_eq!(
        report.healed.len(),
        crashed,
        "every crash healed, nothing else"
    );
    assert!(report.errors.is_empty());
    for i in 0..OBJECTS {
        let id = format!("vm-{i}");
        let record = vms.get(id.as_str()).unwrap();
        assert!(!machine.state(record.state).is_transition(), "{id} stuck");
        assert_eq!((record.in_flight, record.hidden), (None, None));
        check_history(&machine, &vms.history(id.as_str()).unwrap())
            .unwrap_or_else(|e| panic!("{id}: {e}"));
    }
}

/// The stress run crashes workers on purpose; keep their panics out of the output
/// (any other panic is still printed).
fn quiet_planned_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&"worker crashed") {
            previous(info);
        }
    }));
}

/// The issue's Scenario 1 with a healer: `migrate` runs hidden, `destroy` (stop,
/// delete, destroy) waits behind it, the healer rolls the VM back when DESTROYING
/// passes its deadline. When the migration ends, none of the destroy's steps runs,
/// and its ticket says who revoked it and when.
#[test]
fn a_destroy_revoked_while_it_waits_runs_none_of_its_steps() {
    let (clock, vms) = clocked_vms();
    running_vm(&vms, "vm-1");
    let (user, platform) = (Actor::new("user"), Actor::new("load-balancer"));
    let queuer = Queuer::new(2);
    let (started, migrating) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let migration = queuer
        .request(&vms, "vm-1", &platform, "migrate")
        .run(move |_| {
            started.send(()).unwrap();
            released.recv().unwrap();
            Ok(())
        })
        .unwrap();
    migrating.recv().unwrap();
    let log: Log = Arc::default();
    let destroy = queuer
        .request(&vms, "vm-1", &user, "destroy")
        .step("stop", note(&log, "stop"))
        .step("delete", note(&log, "delete"))
        .step("destroy", note(&log, "destroy"))
        .submit()
        .unwrap();
    assert_eq!(vms.state_name("vm-1").unwrap(), "DESTROYING");

    clock.advance(Duration::from_secs(601));
    let healer = Healer::new().deadline_for("DESTROYING", Duration::from_secs(600));
    let report = healer.heal(&vms).unwrap();
    // Only the destroy passed a deadline: the migration, alive, has none.
    assert_eq!(report.healed.len(), 1, "{report:?}");
    assert_eq!(report.healed[0].action, "destroy");
    assert_eq!(report.healed[0].deadline, Some(Duration::from_secs(600)));
    assert_eq!(vms.state_name("vm-1").unwrap(), "RUNNING");

    release.send(()).unwrap();
    migration.wait().unwrap();
    let err = destroy.wait().unwrap_err();
    let QueueError::Revoked(RuntimeError::Revoked {
        by: Some(by),
        fence,
        ..
    }) = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!((by.by.as_str(), by.at), ("healer", clock_now(&clock)));
    // Created 1, deploy 2 and 3, migrate's start 4, destroy's start 5.
    assert_eq!(fence.0, 5, "{err}");
    assert!(
        err.to_string().starts_with("vm-1: `destroy` (fence "),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("revoked by healer at 1970-01-01T00:10:01.000Z"),
        "{err}"
    );
    assert!(
        log.lock().unwrap().is_empty(),
        "steps ran: {:?}",
        log.lock().unwrap()
    );
    assert_eq!(vms.state_name("vm-1").unwrap(), "RUNNING");
    check_history(vms.machine(), &vms.history("vm-1").unwrap()).unwrap();
    queuer.terminate();
}

/// A hold revoked during a step: the later steps do not run.
#[test]
fn a_hold_revoked_during_a_step_runs_no_later_step() {
    let (clock, vms) = clocked_vms();
    running_vm(&vms, "vm-1");
    let queuer = Queuer::new(1);
    let log: Log = Arc::default();
    let heal = {
        let (vms, clock, log) = (vms.clone(), clock.clone(), log.clone());
        move |_: Fence| {
            log.lock().unwrap().push("stop".into());
            clock.advance(Duration::from_secs(61));
            let report = Healer::new()
                .deadline(Duration::from_secs(60))
                .heal(&vms)
                .unwrap();
            assert_eq!(report.healed.len(), 1);
            Ok(())
        }
    };
    let ticket = queuer
        .request(&vms, "vm-1", &Actor::new("user"), "destroy")
        .step("stop", heal)
        .step("delete", note(&log, "delete"))
        .step("destroy", note(&log, "destroy"))
        .submit()
        .unwrap();
    assert!(matches!(ticket.wait(), Err(QueueError::Revoked(_))));
    assert_eq!(*log.lock().unwrap(), ["stop"]);
    check_history(vms.machine(), &vms.history("vm-1").unwrap()).unwrap();
}

/// Every step's work gets the action's fencing token, and each start on an object
/// takes a higher one.
#[test]
fn work_gets_the_fence_and_fences_only_grow() {
    let vms = Runtime::new(spec("ovc/vm.toml"), MemoryStore::new()).unwrap();
    running_vm(&vms, "vm-1");
    let queuer = Queuer::new(1);
    let seen = Arc::new(Mutex::new(Vec::new()));
    for action in ["pause", "resume", "reboot"] {
        let seen = seen.clone();
        queuer
            .request(&vms, "vm-1", &Actor::new("user"), action)
            .run(move |fence| {
                seen.lock().unwrap().push(fence);
                Ok(())
            })
            .unwrap()
            .wait()
            .unwrap();
    }
    let seen = seen.lock().unwrap().clone();
    // Each start's fence is the version it wrote: created 1, deploy 2-3, then two
    // versions per action.
    assert_eq!(seen, [Fence(4), Fence(6), Fence(8)]);
    let handle = vms.start("vm-1", &Actor::new("user"), "pause").unwrap();
    assert_eq!(handle.fence(), Fence(10));
    assert!(handle.still_held().is_ok());
    handle.complete().unwrap();
}

/// A slow action whose holder lives is not healed, however long it takes, unless it
/// passes a hard deadline; one whose holder is gone is healed at once.
#[test]
fn a_slow_live_action_is_left_alone_and_a_dead_one_is_healed() {
    let (clock, vms) = clocked_vms();
    running_vm(&vms, "vm-slow");
    running_vm(&vms, "vm-dead");
    let user = Actor::new("user");
    let slow = vms.start("vm-slow", &user, "pause").unwrap();
    drop(vms.start("vm-dead", &user, "pause").unwrap());
    clock.advance(Duration::from_secs(30 * 86_400));
    let report = Healer::new().heal(&vms).unwrap();
    let healed: Vec<&str> = report.healed.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(healed, ["vm-dead"]);
    assert!(report.healed[0].abandoned);
    assert_eq!(vms.state_name("vm-slow").unwrap(), "PAUSING");
    assert!(slow.still_held().is_ok());
    slow.complete().unwrap();
    assert_eq!(vms.state_name("vm-slow").unwrap(), "PAUSED");
}

/// A deadline declared in the spec, on a transition state or on an action, is the
/// healer's without being told.
#[test]
fn deadlines_come_from_the_spec() {
    let machine = fsm_core::spec::load_str(
        "job.toml",
        r#"
        [machine]
        name = "job"
        initial = "IDLE"
        [states]
        IDLE = "Waiting"
        RUNNING = { transition = true, deadline = "10m" }
        [actions]
        run = { from = "IDLE", via = "RUNNING", to = "IDLE" }
        poke = { from = "IDLE", hidden = true, deadline = "30s" }
        "#,
    )
    .unwrap();
    let clock = Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH));
    let jobs = Runtime::builder(machine, MemoryStore::new())
        .clock(clock.clone())
        .build()
        .unwrap();
    let user = Actor::new("user");
    jobs.create("j", &user).unwrap();
    // A hidden action first: a visible one may start beside it, not the reverse.
    let poke = jobs.start("j", &user, "poke").unwrap();
    let run = jobs.start("j", &user, "run").unwrap();
    clock.advance(Duration::from_secs(31));
    let first = Healer::new().heal(&jobs).unwrap();
    assert_eq!(
        first
            .healed
            .iter()
            .map(|h| (h.action.as_str(), h.deadline))
            .collect::<Vec<_>>(),
        [("poke", Some(Duration::from_secs(30)))]
    );
    clock.advance(Duration::from_secs(600));
    let second = Healer::new().heal(&jobs).unwrap();
    assert_eq!(second.healed[0].action, "run");
    assert_eq!(second.healed[0].deadline, Some(Duration::from_secs(600)));
    assert!(matches!(run.complete(), Err(RuntimeError::Conflict { .. })));
    assert!(matches!(
        poke.complete(),
        Err(RuntimeError::Conflict { .. })
    ));
    check_history(jobs.machine(), &jobs.history("j").unwrap()).unwrap();
}

/// A disk routed to its VM's queue reaches a terminal state: the VM's queue goes
/// on taking requests; `terminate` runs what is queued before it returns.
#[test]
fn a_routed_object_ending_does_not_end_the_queue_it_was_routed_to() {
    let vms = Runtime::new(spec("ovc/vm.toml"), MemoryStore::new()).unwrap();
    let disks = Runtime::new(spec("ovc/disk.toml"), MemoryStore::new()).unwrap();
    running_vm(&vms, "vm-1");
    let user = Actor::new("user");
    for disk in ["disk-7", "disk-8"] {
        disks.create(disk, &user).unwrap();
    }
    disks.run("disk-7", &user, "create").unwrap();
    let queuer = Queuer::with_route(1, |machine, id| {
        if machine == "disk" {
            "vm-1".into()
        } else {
            id.clone()
        }
    });
    let log: Log = Arc::default();
    let gate = |name: &'static str| {
        let (release, released) = mpsc::channel::<()>();
        let (started, running) = mpsc::channel();
        let log = log.clone();
        let work = move |_: Fence| {
            started.send(()).unwrap();
            released.recv().unwrap();
            log.lock().unwrap().push(name.to_owned());
            Ok(())
        };
        (work, release, running)
    };
    // On vm-1's queue: disk-8 created (held), disk-7 deleted (terminal), vm-1 paused
    // (held).
    let (create_work, release_create, _creating) = gate("create disk-8");
    let create = queuer
        .request(&disks, "disk-8", &user, "create")
        .run(create_work)
        .unwrap();
    let delete = queuer
        .request(&disks, "disk-7", &user, "delete")
        .run(note(&log, "delete disk-7"))
        .unwrap();
    let (pause_work, release_pause, pausing) = gate("pause vm-1");
    let pause = queuer
        .request(&vms, "vm-1", &user, "pause")
        .run(pause_work)
        .unwrap();
    release_create.send(()).unwrap();
    create.wait().unwrap();
    let deleted = delete.wait().unwrap();
    assert!(
        disks.machine().state(deleted.state).terminal,
        "disk-7 is gone"
    );
    pausing.recv().unwrap();
    // The disk's end did not close the VM's queue: it still takes a request while
    // the pause runs.
    let attach = queuer
        .request(&disks, "disk-8", &user, "attach")
        .run(note(&log, "attach disk-8"))
        .unwrap();
    assert_eq!(queuer.queues(), ["vm-1"]);
    release_pause.send(()).unwrap();
    queuer.terminate();
    // Drained: everything queued ran before `terminate` returned.
    assert_eq!(
        *log.lock().unwrap(),
        [
            "create disk-8",
            "delete disk-7",
            "pause vm-1",
            "attach disk-8"
        ]
    );
    pause.wait().unwrap();
    attach.wait().unwrap();
    assert!(queuer.queues().is_empty());
}

/// Workers spin briefly, then park; a caller waiting on its ticket does the same.
/// Requests that arrive while every worker is parked, while one spins, and in a
/// burst from several threads all run, and a stop waiting for a queue that is
/// still running is woken when it drains.
#[test]
fn parked_and_spinning_workers_take_every_request() {
    let rt = Runtime::new(spec("ovc/vm.toml"), MemoryStore::new()).unwrap();
    let ops = Actor::new("ops");
    let queuer = Queuer::new(2);
    running_vm(&rt, "vm-1");
    let mut pauses = 0;
    for idle in [0u64, 1, 20, 0, 5] {
        // Long enough for the workers to park (they spin for 50 µs), or not.
        std::thread::sleep(Duration::from_millis(idle));
        let action = if pauses % 2 == 0 { "pause" } else { "resume" };
        let ticket = queuer
            .request(&rt, "vm-1", &ops, action)
            .run(|_| Ok(()))
            .unwrap();
        // A request no parked worker is woken for would wait for ever: bound it.
        // (Awaited, not waited for: a blocking wait may run the work itself.)
        let (done, outcome) = mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            done.send(rt.block_on(ticket))
        });
        let Ok(record) = outcome.recv_timeout(Duration::from_secs(10)) else {
            // Dropping the queuer would wait for the job that never runs.
            std::mem::forget(queuer);
            panic!("no parked worker was woken for the request after {idle} ms idle");
        };
        let record = record.unwrap();
        pauses += 1;
        let expected = if pauses % 2 == 1 { "PAUSED" } else { "RUNNING" };
        assert_eq!(rt.machine().state(record.state).name.as_ref(), expected);
    }
    // A burst from four threads on four objects, each waiting for its ticket:
    // a job runs on whichever takes it first, a worker or its waiting thread.
    // Both races are won (a thread that waits at once mostly wins; one that
    // waits a millisecond first, every tenth time, mostly loses), and each
    // action starts and ends once (the histories below).
    const ACTIONS: usize = 200;
    for i in 0..4 {
        running_vm(&rt, &format!("burst-{i}"));
    }
    let (on_workers, on_waiters) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for i in 0..4 {
            let (rt, ops, queuer) = (&rt, &ops, &queuer);
            let (on_workers, on_waiters) = (&on_workers, &on_waiters);
            s.spawn(move || {
                let id = format!("burst-{i}");
                let waiter = std::thread::current().id();
                for k in 0..ACTIONS {
                    let action = if k % 2 == 0 { "pause" } else { "resume" };
                    let (ran, on) = mpsc::channel();
                    let ticket = queuer
                        .request(rt, id.as_str(), ops, action)
                        .run(move |_| {
                            ran.send(std::thread::current().id())
                                .map_err(|e| e.to_string())
                        })
                        .unwrap();
                    if k % 10 == 9 {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    ticket.wait().unwrap();
                    let counter = if on.recv().unwrap() == waiter {
                        on_waiters
                    } else {
                        on_workers
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    let (on_workers, on_waiters) = (on_workers.into_inner(), on_waiters.into_inner());
    assert_eq!(on_workers + on_waiters, 4 * ACTIONS as u64);
    assert!(
        on_workers > 0 && on_waiters > 0,
        "workers ran {on_workers}, waiters {on_waiters}"
    );
    for i in 0..4 {
        let id = format!("burst-{i}");
        assert_eq!(rt.state_name(id.as_str()).unwrap(), "RUNNING");
        // Created, deployed (started and completed), then two entries per action.
        assert_eq!(rt.history(id.as_str()).unwrap().len(), 3 + 2 * ACTIONS);
    }
    // `stop` parks until the running job ends and the queue drains (vm-1 is
    // PAUSED after five alternating actions).
    let (release, released) = mpsc::channel::<()>();
    let ticket = queuer
        .request(&rt, "vm-1", &ops, "resume")
        .run(move |_| {
            released.recv().unwrap();
            Ok(())
        })
        .unwrap();
    std::thread::scope(|s| {
        let stopper = s.spawn(|| queuer.stop("vm-1"));
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            !stopper.is_finished(),
            "stop returned while the queue was running"
        );
        release.send(()).unwrap();
        stopper.join().unwrap();
    });
    assert_eq!(
        ticket.wait().unwrap().version,
        rt.get("vm-1").unwrap().version
    );
    // The stopped queue is gone, and so are the burst's: each went with its
    // last job.
    assert!(queuer.queues().is_empty());
}

/// A queue lives while it has work: made by a request, it keeps the requests
/// behind its running job, and goes when its last job ends. A thousand objects
/// queued on once each leave no queue behind (a queuer serving a fleet for
/// months keeps only the queues of objects with work); a stop of an object with
/// no work returns at once, and its next request makes a new queue.
#[test]
fn a_queue_lives_while_it_has_work() {
    let (disks, vms) = (
        Runtime::new(spec("ovc/disk.toml"), MemoryStore::new()).unwrap(),
        Runtime::new(spec("ovc/vm.toml"), MemoryStore::new()).unwrap(),
    );
    let user = Actor::new("user");
    running_vm(&vms, "vm-1");
    for id in ["disk-1", "disk-2"] {
        disks.create(id, &user).unwrap();
    }
    // Disks queue on their VM's queue.
    let queuer = Queuer::with_route(2, |machine, id| match machine {
        "disk" => "vm-1".into(),
        _ => id.clone(),
    });
    let (pause, release) = held(&queuer, &vms, "vm-1", &user, "pause");
    let creates: Vec<_> = ["disk-1", "disk-2"]
        .into_iter()
        .map(|id| {
            queuer
                .request(&disks, id, &user, "create")
                .run(|_| Ok(()))
                .unwrap()
        })
        .collect();
    assert_eq!(queuer.queues(), ["vm-1"]);
    release.send(()).unwrap();
    pause.wait().unwrap();
    for create in creates {
        create.wait().unwrap();
    }
    assert!(queuer.queues().is_empty(), "{:?}", queuer.queues());

    let many: Vec<String> = (0..1000).map(|i| format!("vm-{i:04}")).collect();
    for id in &many {
        running_vm(&vms, id);
    }
    let tickets: Vec<_> = (many.iter())
        .map(|id| {
            queuer
                .request(&vms, id.as_str(), &user, "pause")
                .run(|_| Ok(()))
                .unwrap()
        })
        .collect();
    for ticket in tickets {
        ticket.wait().unwrap();
    }
    assert!(
        queuer.queues().is_empty(),
        "{} queues left",
        queuer.queues().len()
    );
    queuer.stop("vm-0001");
    let resumed = queuer
        .request(&vms, "vm-0001", &user, "resume")
        .run(|_| Ok(()))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(vms.machine().state(resumed.state).name, "RUNNING");
    queuer.terminate();
}

/// Several callers share queues (their objects routed four to a queue) with
/// three workers: a queue runs one job at a time, each caller's requests on a
/// queue run in the order they were accepted, and every accepted request ends
/// (no job is left in the ready list with every worker parked). The races
/// happened: requests were accepted while their queue was running another's
/// job (and so were handed on by the worker that ended it), and both workers
/// and waiting callers ran jobs. Then `terminate` races requests still coming
/// in: each is refused, or accepted and run to its end.
#[test]
fn callers_sharing_queues_run_one_job_at_a_time_in_order() {
    const CALLERS: usize = 4;
    const OBJECTS: usize = 4; // per caller
    const QUEUES: usize = 4;
    const ROUNDS: usize = 150;
    let rt = Runtime::new(spec("ovc/vm.toml"), MemoryStore::new()).unwrap();
    let ops = Actor::new("ops");
    // Object `c-o` goes to queue `q-(c + o) % QUEUES`: each caller's objects
    // are spread over every queue, and each queue takes every caller's.
    let queuer = Queuer::with_route(3, |_, id| {
        let (c, o) = id.as_str().split_once('-').unwrap();
        let q = (c.parse::<usize>().unwrap() + o.parse::<usize>().unwrap()) % QUEUES;
        format!("q-{q}").into()
    });
    for c in 0..CALLERS {
        for o in 0..OBJECTS {
            running_vm(&rt, &format!("{c}-{o}"));
        }
    }
    /// What the jobs saw: per queue, how many of its jobs run now, and the
    /// (caller, sequence) of each in the order they ran.
    #[derive(Default)]
    struct Seen {
        running: [AtomicU64; QUEUES],
        ran: [Mutex<Vec<(usize, usize)>>; QUEUES],
        overlaps: AtomicU64,
        on_waiters: AtomicU64,
    }
    let seen = Arc::new(Seen::default());
    let behind = AtomicU64::new(0);
    std::thread::scope(|s| {
        for c in 0..CALLERS {
            let (rt, ops, queuer, seen, behind) = (&rt, &ops, &queuer, &seen, &behind);
            s.spawn(move || {
                let me = std::thread::current().id();
                let mut seq = 0;
                for round in 0..ROUNDS {
                    let action = if round % 2 == 0 { "pause" } else { "resume" };
                    let tickets: Vec<_> = (0..OBJECTS)
                        .map(|o| {
                            let q = (c + o) % QUEUES;
                            seq += 1;
                            let (mine, seen_by_job) = (seq, seen.clone());
                            let ticket = queuer
                                .request(rt, format!("{c}-{o}").as_str(), ops, action)
                                .run(move |_| {
                                    if seen_by_job.running[q].fetch_add(1, Ordering::SeqCst) != 0 {
                                        seen_by_job.overlaps.fetch_add(1, Ordering::Relaxed);
                                    }
                                    seen_by_job.ran[q].lock().unwrap().push((c, mine));
                                    // Long enough for others to queue behind.
                                    let until =
                                        std::time::Instant::now() + Duration::from_micros(20);
                                    while std::time::Instant::now() < until {
                                        std::hint::spin_loop();
                                    }
                                    if std::thread::current().id() == me {
                                        seen_by_job.on_waiters.fetch_add(1, Ordering::Relaxed);
                                    }
                                    seen_by_job.running[q].fetch_sub(1, Ordering::SeqCst);
                                    Ok(())
                                })
                                .unwrap();
                            if seen.running[q].load(Ordering::SeqCst) != 0 {
                                behind.fetch_add(1, Ordering::Relaxed);
                            }
                            ticket
                        })
                        .collect();
                    for ticket in tickets {
                        ticket.wait().unwrap();
                    }
                }
            });
        }
    });
    assert_eq!(
        seen.overlaps.load(Ordering::Relaxed),
        0,
        "two jobs of one queue ran at once"
    );
    let total: usize = seen.ran.iter().map(|r| r.lock().unwrap().len()).sum();
    assert_eq!(total, CALLERS * OBJECTS * ROUNDS);
    for (q, ran) in seen.ran.iter().enumerate() {
        let ran = ran.lock().unwrap();
        for c in 0..CALLERS {
            let mine: Vec<usize> = ran
                .iter()
                .filter(|(by, _)| *by == c)
                .map(|&(_, s)| s)
                .collect();
            assert!(
                mine.windows(2).all(|w| w[0] < w[1]),
                "queue q-{q} ran caller {c}'s requests out of order: {mine:?}"
            );
        }
    }
    let (behind, on_waiters) = (behind.into_inner(), seen.on_waiters.load(Ordering::Relaxed));
    assert!(
        behind > 0,
        "no request was accepted while its queue was running"
    );
    assert!(
        on_waiters < total as u64,
        "the workers ran no job ({on_waiters} of {total} on waiting callers)"
    );
    for c in 0..CALLERS {
        for o in 0..OBJECTS {
            let id = format!("{c}-{o}");
            assert_eq!(rt.state_name(id.as_str()).unwrap(), "RUNNING", "{id}");
            check_history(rt.machine(), &rt.history(id.as_str()).unwrap()).unwrap();
        }
    }

    // `terminate` while two callers keep asking.
    let (accepted, refused) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for c in 0..2 {
            let (rt, ops, queuer) = (&rt, &ops, &queuer);
            let (accepted, refused) = (&accepted, &refused);
            s.spawn(move || {
                for round in 0.. {
                    let action = if round % 2 == 0 { "pause" } else { "resume" };
                    match queuer
                        .request(rt, format!("{c}-0").as_str(), ops, action)
                        .run(|_| Ok(()))
                    {
                        Ok(ticket) => {
                            ticket.wait().unwrap();
                            accepted.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(QueueError::Terminated | QueueError::Closed { .. }) => {
                            refused.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
            });
        }
        while accepted.load(Ordering::Relaxed) < 20 {
            std::thread::yield_now();
        }
        queuer.terminate();
    });
    assert_eq!(
        refused.into_inner(),
        2,
        "each caller was refused once terminated"
    );
    assert!(queuer.queues().is_empty());
}

/// `stop` racing two callers on one queue (their objects routed to it), while
/// a job holds the queue: the requests accepted before the stop run to their
/// end, one at a time, and none is lost; those that come while the queue
/// stops are refused as closed (one at least: the race happened); `stop`
/// returns only once the job holding the queue ended, and does not wait for
/// a queue that a request after the end made anew.
#[test]
fn stop_racing_requests_runs_what_it_accepted_and_refuses_the_rest() {
    const OBJECTS: usize = 3; // per caller
    let rt = Runtime::new(spec("ovc/vm.toml"), MemoryStore::new()).unwrap();
    let ops = Actor::new("ops");
    let queuer = Arc::new(Queuer::with_route(2, |_, _| "shared".into()));
    for c in 0..2 {
        for o in 0..OBJECTS {
            running_vm(&rt, &format!("{c}-{o}"));
        }
    }
    running_vm(&rt, "gate");
    let running = Arc::new(AtomicU64::new(0));
    let overlaps = Arc::new(AtomicU64::new(0));
    let (accepted, closed) = (AtomicU64::new(0), AtomicU64::new(0));
    let (stopping, stopped) = (
        std::sync::atomic::AtomicBool::new(false),
        std::sync::atomic::AtomicBool::new(false),
    );
    let work = |running: Arc<AtomicU64>, overlaps: Arc<AtomicU64>| {
        move |_| {
            if running.fetch_add(1, Ordering::SeqCst) != 0 {
                overlaps.fetch_add(1, Ordering::SeqCst);
            }
            std::thread::sleep(Duration::from_micros(50));
            running.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        }
    };
    let (release, released) = mpsc::channel::<()>();
    let mut gate = None;
    std::thread::scope(|s| {
        for c in 0..2 {
            let (rt, ops, queuer, work) = (&rt, &ops, &queuer, &work);
            let (accepted, closed) = (&accepted, &closed);
            let (stopping, stopped) = (&stopping, &stopped);
            let (running, overlaps) = (running.clone(), overlaps.clone());
            s.spawn(move || {
                // Each round pauses or resumes all of the caller's objects, and
                // waits for them; the callers stop at their first refusal.
                for round in 0.. {
                    if stopped.load(Ordering::SeqCst) {
                        return;
                    }
                    let action = if round % 2 == 0 { "pause" } else { "resume" };
                    let mut tickets = Vec::new();
                    for o in 0..OBJECTS {
                        let id = format!("{c}-{o}");
                        match queuer
                            .request(rt, id.as_str(), ops, action)
                            .run(work(running.clone(), overlaps.clone()))
                        {
                            Ok(ticket) => tickets.push(ticket),
                            Err(QueueError::Closed { id }) => {
                                assert!(stopping.load(Ordering::SeqCst), "closed before the stop");
                                assert_eq!(id.as_str(), "shared");
                                closed.fetch_add(1, Ordering::SeqCst);
                                // Back in step: the objects this round moved go back.
                                for ticket in tickets {
                                    let record = ticket.wait().unwrap();
                                    accepted.fetch_add(1, Ordering::SeqCst);
                                    let _ = record;
                                }
                                return;
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                    for ticket in tickets {
                        ticket.wait().unwrap();
                        accepted.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
        while accepted.load(Ordering::SeqCst) < 30 {
            std::thread::yield_now();
        }
        // A job that holds the queue until both callers were refused.
        gate = Some(
            queuer
                .request(&rt, "gate", &ops, "pause")
                .run(move |_| released.recv().map_err(|e| e.to_string()))
                .unwrap(),
        );
        stopping.store(true, Ordering::SeqCst);
        // Not a scoped thread: a stop that never returns fails the test
        // instead of hanging it.
        let stop = {
            let queuer = queuer.clone();
            std::thread::spawn(move || queuer.stop("shared"))
        };
        // A caller whose round was accepted before the stop waits behind the
        // gate; the other, or both, come to the stopping queue and are refused.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while closed.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert!(
            !stop.is_finished(),
            "stop returned while a job held the queue"
        );
        release.send(()).unwrap();
        // The callers go on meanwhile: one whose requests come after the
        // queue's end makes a new queue under the same key, which the stop
        // must not wait for.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !stop.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        // The callers end at their next round.
        stopped.store(true, Ordering::SeqCst);
        assert!(
            stop.is_finished(),
            "stop waited for a queue made after the one it stopped"
        );
    });
    gate.unwrap().wait().unwrap();
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "two jobs of the queue ran at once"
    );
    assert!(
        closed.into_inner() > 0,
        "no request came to the stopping queue"
    );
    for c in 0..2 {
        for o in 0..OBJECTS {
            let id = format!("{c}-{o}");
            check_history(rt.machine(), &rt.history(id.as_str()).unwrap()).unwrap();
            assert!(
                rt.get(id.as_str()).unwrap().in_flight.is_none(),
                "{id} left held"
            );
        }
    }
    queuer.terminate();
}
