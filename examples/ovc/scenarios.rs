//! OpenvCloud's scenarios (`ovc-transition-states.md`) on the fsm runtime, each
//! answering the trace of what happened.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use fsm_runtime::{Actor, Healer, ManualClock, MemoryStore, Queuer, Runtime, RuntimeError};

use crate::machines::{CloudspaceState, CloudspaceStateAction as C, VmState, VmStateAction as A};

type Error = Box<dyn std::error::Error>;

/// A VM runtime on `clock`.
fn vms(clock: Arc<ManualClock>) -> Result<Runtime, RuntimeError> {
    Runtime::builder_of::<VmState>(MemoryStore::new())
        .clock(clock)
        .build()
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000),
    ))
}

/// `validate_transition(object, from, to)`: the API's first check.
pub fn validate() -> Vec<String> {
    let mut trace = Vec::new();
    for (from, to) in [
        (VmState::Running, VmState::Pausing),
        (VmState::Pausing, VmState::Paused),
        (VmState::Running, VmState::Paused),
        (VmState::Deploying, VmState::Halted),
    ] {
        trace.push(match VmState::validate_transition(from, to) {
            Ok(()) => format!("{} -> {}: allowed", from.name(), to.name()),
            Err(e) => format!("refused: {e}"),
        });
    }
    trace
}

/// Scenario 1: a migration runs hidden; a destroy requested meanwhile shows
/// DESTROYING at once and runs after it as stop, delete, destroy; another request
/// meanwhile is refused; the destroyed VM's queue ends, and its record, a
/// permanently deleted object's, leaves the store.
pub fn migration() -> Result<Vec<String>, Error> {
    let mut trace = Vec::new();
    let vms = vms(clock())?;
    let (user, balancer) = (Actor::new("user"), Actor::new("load-balancer"));
    vms.create("vm-1", &user)?;
    vms.run("vm-1", &user, A::Deploy)?;
    trace.push(format!("vm-1 is {}", vms.state_name("vm-1")?));

    let queuer = Queuer::new(2);
    let (finish_migration, migrated) = mpsc::channel::<()>();
    let migration = queuer
        .request(&vms, "vm-1", &balancer, A::Migrate)
        .run(move |_| migrated.recv().map_err(|e| e.to_string()))?;
    trace.push(format!(
        "migrate queued; vm-1 still shows {}",
        vms.state_name("vm-1")?
    ));
    // destroy_vm is stop, delete, destroy, run in order by the queue's worker.
    let steps = Arc::new(Mutex::new(Vec::new()));
    let step = |name: &'static str| {
        let steps = steps.clone();
        move |_fence| {
            steps.lock().map_err(|e| e.to_string())?.push(name);
            Ok(())
        }
    };
    let destroy = queuer
        .request(&vms, "vm-1", &user, A::Destroy)
        .step(A::Stop, step("stop"))
        .step(A::Delete, step("delete"))
        .step(A::Destroy, step("destroy"))
        .submit()?;
    trace.push(format!(
        "destroy queued; vm-1 shows {}",
        vms.state_name("vm-1")?
    ));
    if let Err(e) = queuer.request(&vms, "vm-1", &user, A::Reboot).submit() {
        trace.push(format!("reboot refused: {e}"));
    }
    finish_migration.send(())?;
    migration.wait()?;
    trace.push("migration finished".into());
    let record = destroy.wait()?;
    trace.push(format!(
        "destroy_vm ran {:?}: vm-1 is {}",
        steps.lock().map_err(|e| e.to_string())?,
        vms.machine().state(record.state).name
    ));
    trace.push(format!("queues left: {}", queuer.queues().len()));
    queuer.terminate();
    trace.extend(history(&vms, "vm-1")?);
    // "DESTROYED - object is permanently deleted": the spec lets its record go.
    let removed = vms.remove("vm-1", &user)?;
    let after = match vms.get("vm-1") {
        Err(e) => e.to_string(),
        Ok(record) => format!("still at v{}", record.version),
    };
    trace.push(format!(
        "vm-1 removed in {} at v{}; then: {after}",
        vms.machine().state(removed.from).name,
        removed.version
    ));
    Ok(trace)
}

/// Actions refused while the VM is in a transition state; an update whose expected
/// state no longer holds answers 409; a VM stuck in a transition state is rolled
/// back by the healer, with a report, and the stuck worker's late completion is
/// refused.
pub fn stuck() -> Result<Vec<String>, Error> {
    let mut trace = Vec::new();
    let clock = clock();
    let vms = vms(clock.clone())?;
    let (user, worker) = (Actor::new("user"), Actor::new("worker-7"));
    vms.create("vm-2", &user)?;
    vms.run("vm-2", &user, A::Deploy)?;

    // The worker starts stopping the VM, then hangs.
    let stopping = vms.start("vm-2", &worker, A::Stop)?;
    trace.push(format!("worker-7 stops vm-2: {}", vms.state_name("vm-2")?));
    if let Err(e) = vms.run("vm-2", &user, A::Pause) {
        trace.push(format!("pause refused: {e}"));
    }

    // Ten minutes later the healer finds it.
    clock.advance(Duration::from_secs(601));
    let healer = Healer::new()
        .deadline(Duration::from_secs(600))
        .actor(Actor::new("self-healing"));
    let report = healer.heal(&vms)?;
    for healed in &report.healed {
        trace.push(format!(
            "healer: {} stuck in {} by {} since {}s; restored {}",
            healed.id,
            healed.stuck_in,
            healed.action,
            clock_secs(healed.since),
            healed.restored
        ));
    }
    // The worker wakes up: its expected state no longer holds.
    if let Err(e) = stopping.complete() {
        trace.push(format!("worker-7 completes: {e}"));
    }
    trace.push(format!("vm-2 is {}", vms.state_name("vm-2")?));
    vms.run("vm-2", &user, A::Pause)?;
    trace.push(format!(
        "pause accepted: vm-2 is {}",
        vms.state_name("vm-2")?
    ));
    trace.extend(history(&vms, "vm-2")?);
    Ok(trace)
}

/// Cloudspace administration: "Pausing is an administrative action that cannot be
/// recreated by the user", and the cloudspace comes back "by starting or resetting
/// VFW by administrator". A user is refused all three; an admin makes them.
pub fn cloudspace() -> Result<Vec<String>, Error> {
    let mut trace = Vec::new();
    let spaces = Runtime::builder_of::<CloudspaceState>(MemoryStore::new())
        .clock(clock())
        .build()?;
    let (user, admin) = (
        Actor::new("user"),
        Actor::new("cloudbroker").with_role("admin"),
    );
    spaces.create("cs-1", &user)?;
    spaces.run("cs-1", &user, C::Deploy)?;
    for (action, who) in [
        (C::Pause, &user),
        (C::Pause, &admin),
        (C::Resume, &user),
        (C::Resume, &admin),
        (C::Reset, &user),
        (C::Reset, &admin),
    ] {
        trace.push(match spaces.run("cs-1", who, action) {
            Ok(_) => format!(
                "{} {}: cs-1 is {}",
                who.name(),
                spaces.machine().action(action.into()).name,
                spaces.state_name("cs-1")?
            ),
            Err(e) => format!("refused: {e}"),
        });
    }
    trace.extend(history(&spaces, "cs-1")?);
    Ok(trace)
}

fn clock_secs(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The object's history, a line per entry.
fn history(vms: &Runtime, id: &str) -> Result<Vec<String>, RuntimeError> {
    let m = vms.machine();
    Ok(vms
        .history(id)?
        .iter()
        .map(|e| {
            let action = e.action.map_or("create", |a| &m.action(a).name);
            format!(
                "  {id} v{} {:?} {action} by {}: {} -> {}",
                e.version,
                e.kind,
                e.actor,
                m.state(e.from).name,
                m.state(e.to).name
            )
        })
        .collect())
}
