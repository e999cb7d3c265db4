//! One behavioural suite for every [`Store`] backend: what the runtime relies on,
//! checked through the runtime. The in-memory store and the etcd store both pass
//! it; a new backend should too. And [`LateRead`], a store that answers a read
//! late, for tests of code that reads an object, decides, then writes.
//!
//! ```
//! use fsm_runtime::MemoryStore;
//!
//! fsm_runtime::testing::check_store(MemoryStore::new);
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fsm_core::Machine;

use crate::{
    Actor, EntryKind, Event, InFlight, ObjectId, Record, Runtime, RuntimeError, Store, Watcher,
    check_history,
};

/// The machine the suite runs: a server with a transition state, a back-to-origin
/// action, a self-loop, a hidden action, a terminal state, and removal allowed
/// in two states (to anyone in `HALTED`, to the role `ops` in `RETIRED`).
pub const SPEC: &str = r#"
[machine]
name = "server"
initial = "HALTED"

[roles]
ops = "Operators"

[states]
HALTED = { remove = true, description = "Off" }
STARTING = { transition = true }
RUNNING = "On"
STOPPING = { transition = true }
RESIZING = { transition = true }
RETIRED = { terminal = true, remove = "ops" }

[actions]
start = { from = "HALTED", via = "STARTING", to = "RUNNING" }
stop = { from = "RUNNING", via = "STOPPING", to = "HALTED" }
resize = { from = ["HALTED", "RUNNING"], via = "RESIZING", to_origin = true }
reboot = { from = "RUNNING", to = "RUNNING" }
retire = { from = "HALTED", to = "RETIRED" }
migrate = { from = ["HALTED", "RUNNING"], hidden = true }
"#;

/// A store whose next [`Store::load`], once [armed](LateRead::arm), answers
/// an earlier state than the object is in: what a reader sees when another
/// actor moves the object between its read and its write. Everything else
/// goes to the store it wraps, writes included. For tests of code that reads,
/// decides, then writes: a queued composite request checks its steps against
/// the state it read, then again against the state its start found.
///
/// ```
/// use fsm_runtime::testing::{LateRead, machine};
/// use fsm_runtime::{Actor, MemoryStore, Runtime};
///
/// let machine = machine();
/// let running = machine.state_id("RUNNING").unwrap();
/// let rt = Runtime::new(machine, LateRead::new(MemoryStore::new()))?;
/// rt.create("vm", &Actor::new("user"))?;
/// rt.store().arm(running);
/// assert_eq!(rt.get("vm")?.state, running); // read late: it is HALTED
/// assert!(!rt.store().armed());
/// assert_eq!(rt.state_name("vm")?, "HALTED");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Default)]
pub struct LateRead<S> {
    store: S,
    stale: std::sync::Mutex<Option<fsm_core::StateId>>,
}

impl<S: Store> LateRead<S> {
    /// `store`, disarmed: it reads as `store` does.
    pub fn new(store: S) -> Self {
        LateRead {
            store,
            stale: std::sync::Mutex::new(None),
        }
    }

    /// The next [`Store::load`] answers `state` instead of the object's.
    pub fn arm(&self, state: fsm_core::StateId) {
        *self.stale() = Some(state);
    }

    /// Whether the next [`Store::load`] still answers the armed state: `false`
    /// once a load answered it.
    pub fn armed(&self) -> bool {
        self.stale().is_some()
    }

    fn stale(&self) -> std::sync::MutexGuard<'_, Option<fsm_core::StateId>> {
        self.stale.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<S: Store> Store for LateRead<S> {
    fn bind(&self, machine: &Machine) -> Result<(), crate::StoreError> {
        self.store.bind(machine)
    }

    fn load(&self, id: &ObjectId) -> Result<Option<Record>, crate::StoreError> {
        let stale = self.stale().take();
        let record = self.store.load(id)?;
        Ok(record.map(|mut record| {
            record.state = stale.unwrap_or(record.state);
            record
        }))
    }

    fn commit(&self, write: crate::Write) -> Result<(), crate::StoreError> {
        self.store.commit(write)
    }

    fn history(&self, id: &ObjectId) -> Result<Vec<crate::Entry>, crate::StoreError> {
        self.store.history(id)
    }

    fn ids(&self) -> Result<Vec<ObjectId>, crate::StoreError> {
        self.store.ids()
    }

    fn watch(&self) -> Result<Watcher, crate::StoreError> {
        self.store.watch()
    }

    fn remove(&self, removal: crate::Removal) -> Result<(), crate::StoreError> {
        self.store.remove(removal)
    }

    fn removal(&self, id: &ObjectId) -> Result<Option<crate::Entry>, crate::StoreError> {
        self.store.removal(id)
    }

    fn modify<T, E, R>(
        &self,
        id: &ObjectId,
        decide: impl FnMut(Option<&Record>) -> Result<(crate::Change, T), E>,
        read: impl FnMut(&Record) -> R,
    ) -> Result<Result<(T, R), E>, crate::StoreError> {
        self.store.modify(id, decide, read)
    }
}

/// The suite's machine.
pub fn machine() -> Machine {
    fsm_core::spec::load_str("server.toml", SPEC).expect("the suite's spec is valid")
}

/// Runs every check on stores made by `make`; each call must give an empty store.
/// Panics with the name of the check and what went wrong.
pub fn check_store<S: Store>(make: impl Fn() -> S) {
    creates_once(make());
    history_follows_state(make());
    stale_writes_conflict(make());
    lists_objects(make());
    pages_meet_objects_created_meanwhile(make());
    keeps_data(make());
    starts_answer_the_record_they_wrote(make());
    reads_part_of_a_record(make());
    handles_end_as_they_should(make());
    lost_handles_are_resumed_by_their_fence(make());
    hidden_actions_keep_their_own_slot(make());
    guards_decide_on_the_record_written_against(make());
    watchers_see_writes_in_order(make());
    removes_whole(make());
    removal_races_a_start(make());
    fences_outlive_removal(make());
    concurrent_actors_never_lose_a_write(make(), 4, 150);
    async_actors_share_one_thread(make(), 4, 60);
    dropped_starts_leave_no_live_hold(make());
    busy_objects_are_waited_for(make());
}

/// The suite's machine with the action declared by `action` (its line up to
/// the closing brace) guarded by `guard`.
fn guarded(action: &str, guard: &str) -> Machine {
    let line = format!("{action} }}");
    assert!(
        SPEC.contains(&line),
        "`{action}` is not in the suite's spec"
    );
    let spec = SPEC.replace(&line, &format!("{action}, guards = [\"{guard}\"] }}"))
        + &format!("\n[guards]\n{guard} = \"a guard of the suite\"\n");
    fsm_core::spec::load_str("server.toml", &spec).expect("the suite's spec, guarded")
}

fn runtime<S: Store>(store: S) -> Runtime<S> {
    Runtime::new(machine(), store).expect("no guards")
}

fn state<S: Store>(rt: &Runtime<S>, id: &str) -> String {
    rt.state_name(id).expect("the object exists").to_owned()
}

/// Runs `future` to its end on a runtime of its own, for a check that is
/// otherwise blocking.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime")
        .block_on(future)
}

/// A create of an existing id is refused and changes nothing.
pub fn creates_once<S: Store>(store: S) {
    let rt = runtime(store);
    let user = Actor::new("user");
    rt.create("a", &user).expect("creates_once: first create");
    rt.run("a", &user, "start").expect("creates_once: start");
    match rt.create("a", &user) {
        Err(RuntimeError::Exists { state, .. }) => assert_eq!(state, "RUNNING"),
        other => panic!("creates_once: second create answered {other:?}"),
    }
    assert_eq!(state(&rt, "a"), "RUNNING", "creates_once: state kept");
    assert_eq!(
        rt.history("a").unwrap().len(),
        3,
        "creates_once: history kept"
    );
}

/// An object's data is stored with it, kept by every write that does not replace
/// it, and replaced with the completion that brings new data.
pub fn keeps_data<S: Store>(store: S) {
    let rt = runtime(store);
    let user = Actor::new("user");
    let data = |rt: &Runtime<S>| rt.get("d").expect("keeps_data: get").data;
    rt.create_with("d", &user, Some(r#"{"keys":["k1"]}"#.into()))
        .expect("keeps_data: create");
    assert_eq!(
        data(&rt).as_deref(),
        Some(r#"{"keys":["k1"]}"#),
        "keeps_data: created"
    );
    rt.run("d", &user, "start").expect("keeps_data: start");
    rt.start("d", &user, "stop")
        .unwrap()
        .fail()
        .expect("keeps_data: fail");
    assert_eq!(
        data(&rt).as_deref(),
        Some(r#"{"keys":["k1"]}"#),
        "keeps_data: kept"
    );
    let record = rt
        .start("d", &user, "stop")
        .unwrap()
        .complete_with(r#"{"keys":[]}"#.into())
        .expect("keeps_data: complete with data");
    assert_eq!(
        record.data.as_deref(),
        Some(r#"{"keys":[]}"#),
        "keeps_data: answered"
    );
    assert_eq!(
        data(&rt).as_deref(),
        Some(r#"{"keys":[]}"#),
        "keeps_data: replaced"
    );
    assert_eq!(rt.state_name("d").unwrap(), "HALTED");
    rt.create("none", &user)
        .expect("keeps_data: create without");
    assert_eq!(rt.get("none").unwrap().data, None, "keeps_data: none");
}

/// `start_with_record` and `start_with_record_async` answer the record as
/// their start wrote it: in the transition state, at the handle's fence, held
/// by the actor, with the data it proposed kept with the hold and the object's
/// data as it was. The same record a read finds after (nothing writes in
/// between), and one a guarded start (read first, then written) answers too.
pub fn starts_answer_the_record_they_wrote<S: Store>(store: S) {
    let what = "starts_answer_the_record_they_wrote";
    let machine = guarded(
        "stop = { from = \"RUNNING\", via = \"STOPPING\", to = \"HALTED\"",
        "drained",
    );
    let rt = Runtime::builder(machine, store)
        .guard("drained", |_| true)
        .build()
        .expect("the guard is implemented");
    let user = Actor::new("user");
    let named = |record: &Record| rt.machine().state(record.state).name.clone();
    let held_by = |record: &Record| record.in_flight.as_ref().map(|h| h.actor.as_str());
    rt.create_with("r", &user, Some(r#"{"disk":1}"#.into()))
        .unwrap_or_else(|e| panic!("{what}: create: {e}"));
    let proposed: std::sync::Arc<str> = r#"{"disk":2}"#.into();
    let (flight, started) = rt
        .start_with_record("r", None, &user, "start", Some(proposed.clone()))
        .unwrap_or_else(|e| panic!("{what}: start: {e}"));
    assert_eq!(named(&started), "STARTING", "{what}: state");
    assert_eq!(started.version, flight.fence().0, "{what}: version");
    assert_eq!(held_by(&started), Some("user"), "{what}: holder");
    let kept = started.in_flight.as_ref().and_then(|h| h.proposed.clone());
    assert_eq!(kept, Some(proposed), "{what}: proposed data");
    assert_eq!(
        started.data.as_deref(),
        Some(r#"{"disk":1}"#),
        "{what}: data"
    );
    assert_eq!(rt.get("r").unwrap(), started, "{what}: read after");
    let completed = flight
        .complete()
        .unwrap_or_else(|e| panic!("{what}: complete: {e}"));
    assert_eq!(
        completed.data.as_deref(),
        Some(r#"{"disk":2}"#),
        "{what}: completed"
    );
    // Guarded, and async: at the version asked for.
    let version = Some(completed.version);
    let (flight, started) = block_on(rt.start_with_record_async("r", version, &user, "stop", None))
        .unwrap_or_else(|e| panic!("{what}: guarded start: {e}"));
    assert_eq!(named(&started), "STOPPING", "{what}: guarded state");
    assert_eq!(started.version, flight.fence().0, "{what}: guarded version");
    assert_eq!(held_by(&started), Some("user"), "{what}: guarded holder");
    assert_eq!(rt.get("r").unwrap(), started, "{what}: guarded read after");
    block_on(flight.complete_async()).unwrap_or_else(|e| panic!("{what}: stop: {e}"));
    // Refused: nothing written, nothing answered.
    match rt.start_with_record("r", Some(1), &user, "start", None) {
        Err(RuntimeError::VersionMismatch { .. }) => {}
        other => panic!("{what}: a start at an old version answered {other:?}"),
    }
    assert_eq!(rt.history("r").unwrap().len(), 5, "{what}: history");
}

/// `load_with` reads the part of a record it is asked for, as `load` would
/// find it, and nothing for an absent object; `load_with_async` (which
/// `state_async` reads with) the same.
pub fn reads_part_of_a_record<S: Store>(store: S) {
    let rt = runtime(store);
    let user = Actor::new("user");
    rt.create("p", &user)
        .expect("reads_part_of_a_record: create");
    let held = rt.start("p", &user, "start").unwrap();
    let part = |r: &Record| (r.state, r.version, r.in_flight.as_ref().map(|h| h.actor));
    let id = ObjectId::from("p");
    let read = rt.store().load_with(&id, part).unwrap();
    let whole = rt.store().load(&id).unwrap().expect("the object exists");
    assert_eq!(read, Some(part(&whole)), "reads_part_of_a_record: as load");
    assert_eq!(
        read.map(|(_, version, actor)| (version, actor)),
        Some((2, Some(user.actor_name()))),
        "reads_part_of_a_record: the start's version and holder"
    );
    assert_eq!(rt.state_name("p").unwrap(), "STARTING");
    let read_async = block_on(rt.store().load_with_async(&id, part)).unwrap();
    assert_eq!(
        read_async, read,
        "reads_part_of_a_record: async, as blocking"
    );
    let state = block_on(rt.state_async("p")).unwrap();
    assert_eq!(rt.machine().state(state).name.as_ref(), "STARTING");
    held.complete().unwrap();
    let absent = rt.store().load_with(&"absent".into(), part).unwrap();
    assert_eq!(absent, None, "reads_part_of_a_record: absent");
    assert!(
        matches!(rt.state("absent"), Err(RuntimeError::NotFound { .. })),
        "reads_part_of_a_record: state of an absent object"
    );
}

/// Every write's entry is in the history, in version order, and the last one
/// says where the object is.
pub fn history_follows_state<S: Store>(store: S) {
    let rt = runtime(store);
    let user = Actor::new("user");
    rt.create("a", &user).unwrap();
    for action in ["start", "reboot", "resize", "stop", "retire"] {
        rt.run("a", &user, action)
            .unwrap_or_else(|e| panic!("history_follows_state: {action}: {e}"));
    }
    let flight = rt.start("a", &user, "start");
    assert!(
        matches!(flight, Err(RuntimeError::NoRule { .. })),
        "history_follows_state: RETIRED is terminal"
    );
    let history = rt.history("a").unwrap();
    check_history(rt.machine(), &history).expect("history_follows_state: a valid path");
    let versions: Vec<u64> = history.iter().map(|e| e.version).collect();
    assert_eq!(versions, (1..=history.len() as u64).collect::<Vec<_>>());
    let record = rt.get("a").unwrap();
    assert_eq!(record.version, history.len() as u64);
    assert_eq!(Some(record.state), history.last().map(|e| e.to));
    assert_eq!(state(&rt, "a"), "RETIRED");
    // Pages of every size, each after the last one's version, give the same
    // entries, as the async form does; past the last version, or of an object
    // that does not exist, none.
    let store = rt.store();
    let a = ObjectId::from("a");
    for limit in 1..=history.len() + 1 {
        let (paged, pages) = read_pages(
            "history_follows_state",
            limit,
            |after, sync| {
                let after = after.copied();
                if sync {
                    store.history_after(&a, after, limit)
                } else {
                    block_on(store.history_after_async(&a, after, limit))
                }
                .unwrap()
            },
            |e| e.version,
        );
        assert_eq!(
            pages,
            history.len() / limit + 1,
            "history_follows_state: pages of {limit}"
        );
        assert_eq!(paged, history, "history_follows_state: pages of {limit}");
    }
    let last = history.len() as u64;
    assert!(store.history_after(&a, Some(last), 5).unwrap().is_empty());
    let none = store
        .history_after(&ObjectId::from("nobody"), None, 5)
        .unwrap();
    assert!(
        none.is_empty(),
        "history_follows_state: no object, no entries"
    );
}

/// A write against a record that has changed since it was read is a conflict and
/// writes nothing.
pub fn stale_writes_conflict<S: Store>(store: S) {
    let rt = runtime(store);
    let (user, healer) = (Actor::new("user"), Actor::new("healer"));
    rt.create("a", &user).unwrap();
    let flight = rt.start("a", &user, "start").unwrap();
    let stale = rt.get("a").unwrap();
    flight.complete().unwrap();
    match rt.roll_back("a", &stale, &healer) {
        Err(RuntimeError::Conflict { found, .. }) => {
            assert_eq!(found, Some(("RUNNING".to_owned(), 3)));
        }
        other => panic!("stale_writes_conflict: answered {other:?}"),
    }
    assert_eq!(rt.history("a").unwrap().len(), 3, "stale_writes_conflict");
    // The other way round: the healer wins, the late completion conflicts.
    let flight = rt.start("a", &user, "stop").unwrap();
    let held = rt.get("a").unwrap();
    rt.roll_back("a", &held, &healer).unwrap();
    assert!(matches!(
        flight.complete(),
        Err(RuntimeError::Conflict { .. })
    ));
    assert_eq!(state(&rt, "a"), "RUNNING");
}

/// A guard is the user's code, so it runs on a record read before the store
/// holds anything; the start is then written only if the object is still as the
/// guard saw it. Here the guard waits while another write lands: the start is a
/// conflict and writes nothing, and a second try, on the new record, goes in.
pub fn guards_decide_on_the_record_written_against<S: Store>(store: S) {
    use std::sync::mpsc;
    use std::sync::{Arc, Mutex};
    let machine = guarded(
        "start = { from = \"HALTED\", via = \"STARTING\", to = \"RUNNING\"",
        "approved",
    );
    // The first call of the guard says it is deciding, then waits to be let go.
    let (deciding, wait) = (mpsc::channel(), mpsc::channel::<()>());
    let gate = Arc::new(Mutex::new(Some((deciding.0, wait.1))));
    let rt = Runtime::builder(machine, store)
        .guard("approved", move |_| {
            if let Some((deciding, go)) = gate.lock().expect("the gate").take() {
                deciding.send(()).expect("the test waits");
                go.recv().expect("the test lets the guard go");
            }
            true
        })
        .build()
        .expect("the guard is implemented");
    let (user, other) = (Actor::new("user"), Actor::new("other"));
    rt.create("a", &user).unwrap();
    std::thread::scope(|s| {
        let guarded = s.spawn(|| {
            rt.start("a", &user, "start")
                .map(|flight| flight.complete())
        });
        deciding.1.recv().expect("the guard runs");
        // While the guard decides, another write lands.
        rt.run("a", &other, "migrate").unwrap();
        wait.0.send(()).unwrap();
        match guarded.join().expect("the start returns") {
            Err(RuntimeError::Conflict { found, .. }) => {
                assert_eq!(
                    found,
                    Some(("HALTED".to_owned(), 3)),
                    "guards_decide_on_the_record_written_against"
                );
            }
            other => panic!("guards_decide_on_the_record_written_against: answered {other:?}"),
        }
    });
    let history = rt.history("a").unwrap();
    assert_eq!(
        history.len(),
        3,
        "guards_decide_on_the_record_written_against: {history:?}"
    );
    rt.start("a", &user, "start").unwrap().complete().unwrap();
    assert_eq!(
        state(&rt, "a"),
        "RUNNING",
        "guards_decide_on_the_record_written_against"
    );
}

/// A failed action returns to its origin; a dropped handle leaves the object held
/// by an abandoned action, which the healer rolls back at once.
pub fn handles_end_as_they_should<S: Store>(store: S) {
    let rt = runtime(store);
    let (user, healer) = (Actor::new("user"), Actor::new("healer"));
    rt.create("a", &user).unwrap();
    rt.start("a", &user, "start").unwrap().fail().unwrap();
    assert_eq!(
        state(&rt, "a"),
        "HALTED",
        "handles_end_as_they_should: failed"
    );
    drop(rt.start("a", &user, "start").unwrap());
    let record = rt.get("a").unwrap();
    assert_eq!(state(&rt, "a"), "STARTING");
    assert!(
        record.in_flight.as_ref().is_some_and(|h| h.abandoned),
        "handles_end_as_they_should: dropped handle is abandoned: {record:?}"
    );
    match rt.start("a", &user, "stop") {
        Err(RuntimeError::Busy { abandoned, .. }) => assert!(abandoned),
        other => panic!("handles_end_as_they_should: answered {other:?}"),
    }
    let report = crate::Healer::new()
        .deadline(Duration::from_secs(3600))
        .actor(healer)
        .heal(&rt)
        .unwrap();
    assert_eq!(
        report.healed.len(),
        1,
        "handles_end_as_they_should: {report:?}"
    );
    assert_eq!(state(&rt, "a"), "HALTED");
    let kinds: Vec<EntryKind> = rt.history("a").unwrap().iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EntryKind::Created,
            EntryKind::Started,
            EntryKind::Failed,
            EntryKind::Started,
            EntryKind::Abandoned,
            EntryKind::Healed,
        ]
    );
}

/// An action whose handle was dropped is taken up again by its fence, by the
/// actor who started it, from what the store kept, and completed, with the
/// data its start proposed; taken up after that, its hold is gone.
pub fn lost_handles_are_resumed_by_their_fence<S: Store>(store: S) {
    let rt = runtime(store);
    let (user, other) = (Actor::new("user"), Actor::new("other"));
    rt.create("a", &user).unwrap();
    let proposed: std::sync::Arc<str> = r#"{"disk":"d-1"}"#.into();
    let fence = (rt.start_changing("a", None, &user, "start", proposed.clone()))
        .unwrap()
        .fence();
    match rt.resume("a", &other, fence) {
        Err(RuntimeError::NotHolder { holder, .. }) => assert_eq!(holder, "user"),
        other => panic!("lost_handles_are_resumed_by_their_fence: another actor: {other:?}"),
    }
    let resumed = rt.resume("a", &user, fence).unwrap();
    assert_eq!(resumed.fence(), fence);
    let record = resumed.complete().unwrap();
    assert_eq!(
        (state(&rt, "a"), record.version),
        ("RUNNING".to_owned(), 4),
        "lost_handles_are_resumed_by_their_fence: completed after its abandonment"
    );
    assert_eq!(
        (record.data.as_deref(), rt.get("a").unwrap().data.as_deref()),
        (Some(&*proposed), Some(&*proposed)),
        "lost_handles_are_resumed_by_their_fence: the data its start proposed"
    );
    match rt.resume("a", &user, fence) {
        Err(RuntimeError::Revoked { by: Some(by), .. }) => assert_eq!(by.version, 4),
        other => panic!("lost_handles_are_resumed_by_their_fence: ended: {other:?}"),
    }
    // The same from async code: the stop's handle dropped, taken up, completed,
    // and its hold then found gone in the history, read without blocking.
    let fence = rt.start("a", &user, "stop").unwrap().fence();
    let holder = rt.get("a").unwrap().in_flight.expect("held by the stop");
    assert_eq!(
        holder.proposed, None,
        "lost_handles_are_resumed_by_their_fence: a start that proposes nothing holds no \
         proposal (none of an earlier start's, whose box a store may reuse)"
    );
    block_on(async {
        match rt.resume_async("a", &other, fence).await {
            Err(RuntimeError::NotHolder { holder, .. }) => assert_eq!(holder, "user"),
            other => {
                panic!("lost_handles_are_resumed_by_their_fence: async, another actor: {other:?}")
            }
        }
        let resumed = rt.resume_async("a", &user, fence).await.unwrap();
        assert_eq!(resumed.fence(), fence);
        let record = resumed.complete_async().await.unwrap();
        assert_eq!(
            (record.version, record.data.as_deref()),
            (7, Some(&*proposed)),
            "lost_handles_are_resumed_by_their_fence: async (a start that proposes nothing \
             keeps the data)"
        );
        match rt.resume_async("a", &user, fence).await {
            Err(RuntimeError::Revoked { by: Some(by), .. }) => assert_eq!(by.version, 7),
            other => panic!("lost_handles_are_resumed_by_their_fence: async, ended: {other:?}"),
        }
        match rt.resume_async("a", &user, crate::Fence(99)).await {
            Err(RuntimeError::NoHold { .. }) => {}
            other => panic!("lost_handles_are_resumed_by_their_fence: async, no start: {other:?}"),
        }
    });
    assert_eq!(state(&rt, "a"), "HALTED");
    check_history(rt.machine(), &rt.history("a").unwrap())
        .expect("lost_handles_are_resumed_by_their_fence: a valid history");
}

/// A hidden action keeps the status and its own slot: a user's action may start
/// beside it, another hidden one may not, and each ends on its own.
pub fn hidden_actions_keep_their_own_slot<S: Store>(store: S) {
    let rt = runtime(store);
    let (user, balancer) = (Actor::new("user"), Actor::new("balancer"));
    rt.create("a", &user).unwrap();
    let migration = rt.start("a", &balancer, "migrate").unwrap();
    assert_eq!(state(&rt, "a"), "HALTED", "hidden_actions: status kept");
    assert!(matches!(
        rt.start("a", &balancer, "migrate"),
        Err(RuntimeError::Busy { .. })
    ));
    let start = rt.start("a", &user, "start").unwrap();
    assert_eq!(state(&rt, "a"), "STARTING");
    migration.complete().unwrap();
    let record = rt.get("a").unwrap();
    assert!(record.hidden.is_none() && record.in_flight.is_some());
    assert_eq!(
        state(&rt, "a"),
        "STARTING",
        "hidden_actions: the user's action goes on"
    );
    start.complete().unwrap();
    assert_eq!(state(&rt, "a"), "RUNNING");
    // Both slots held by dropped handles: one pass of the healer frees both,
    // the hidden one on the record the visible one's rollback left.
    drop(rt.start("a", &balancer, "migrate").unwrap());
    drop(rt.start("a", &user, "stop").unwrap());
    let report = crate::Healer::new()
        .deadline(Duration::from_secs(3600))
        .heal(&rt)
        .unwrap();
    let healed: Vec<bool> = report.healed.iter().map(|h| h.hidden).collect();
    assert_eq!(healed, [false, true], "hidden_actions: {report:?}");
    let record = rt.get("a").unwrap();
    assert!(
        record.in_flight.is_none() && record.hidden.is_none(),
        "hidden_actions: both freed: {record:?}"
    );
    assert_eq!(state(&rt, "a"), "RUNNING");
    check_history(rt.machine(), &rt.history("a").unwrap())
        .expect("hidden_actions: a valid history");
    // A user's start right after a hidden one writes the hidden holder again
    // (on a store that keeps a copy of what it wrote, decided on that copy):
    // both stay live, and a healer's pass, its deadline far off, leaves both.
    rt.create("b", &user).unwrap();
    let migration = rt.start("b", &balancer, "migrate").unwrap();
    let start = rt.start("b", &user, "start").unwrap();
    let report = crate::Healer::new()
        .deadline(Duration::from_secs(3600))
        .heal(&rt)
        .unwrap();
    assert!(
        report.healed.is_empty(),
        "hidden_actions: healed live holds: {report:?}"
    );
    migration.complete().unwrap();
    start.complete().unwrap();
    assert_eq!(state(&rt, "b"), "RUNNING");
}

/// `ids` lists every object, and only them; `records` (and `records_async`)
/// give each with the record `load` gives, holders and data included, sorted
/// by id; `for_each_record` (and `for_each_record_async`) looks at each once,
/// with that record.
pub fn lists_objects<S: Store>(store: S) {
    let rt = runtime(store);
    let user = Actor::new("user");
    // `w/1` and `w-1`: a store whose keys escape `/` may list them in either
    // order, and must page them alike.
    for id in ["z", "x", "y", "w/1", "w-1"] {
        rt.create(id, &user).unwrap();
    }
    let _held = rt.start("x", &user, "start").unwrap();
    let _hidden = rt.start("y", &user, "migrate").unwrap();
    rt.start_changing("z", None, &user, "start", r#"{"n":1}"#.into())
        .unwrap()
        .complete()
        .unwrap();
    let mut ids: Vec<String> = rt
        .store()
        .ids()
        .unwrap()
        .iter()
        .map(|id| id.to_string())
        .collect();
    ids.sort();
    assert_eq!(ids, ["w-1", "w/1", "x", "y", "z"], "lists_objects");
    assert!(rt.history("nobody").unwrap().is_empty(), "lists_objects");

    let loaded: Vec<(String, Record)> = ids
        .iter()
        .map(|id| (id.clone(), rt.get(id.as_str()).unwrap()))
        .collect();
    let listed = |records: crate::Records| -> Vec<(String, Record)> {
        records
            .into_iter()
            .map(|(id, record)| (id.to_string(), record.expect("lists_objects: readable")))
            .collect()
    };
    assert_eq!(
        listed(rt.store().records().unwrap()),
        loaded,
        "lists_objects: records"
    );
    assert_eq!(
        listed(block_on(rt.store().records_async()).unwrap()),
        loaded,
        "lists_objects: records_async"
    );
    let mut looked = Vec::new();
    rt.store()
        .for_each_record(|id, record| {
            let record = record.expect("lists_objects: readable");
            looked.push((id.to_string(), record.clone()));
        })
        .unwrap();
    looked.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(looked, loaded, "lists_objects: for_each_record");
    let mut looked = Vec::new();
    block_on(rt.store().for_each_record_async(|id, record| {
        let record = record.expect("lists_objects: readable");
        looked.push((id.to_string(), record.clone()));
    }))
    .unwrap();
    looked.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(looked, loaded, "lists_objects: for_each_record_async");
    pages_meet_every_object_once(&rt, &loaded);
    // What the records must show, so that agreeing with `load` means something.
    let by_id: std::collections::HashMap<_, _> = loaded.into_iter().collect();
    assert!(by_id["x"].in_flight.is_some(), "lists_objects: x held");
    assert!(
        by_id["y"].hidden.is_some(),
        "lists_objects: y's hidden holder"
    );
    assert_eq!(
        by_id["z"].data.as_deref(),
        Some(r#"{"n":1}"#),
        "lists_objects: z's data"
    );
}

/// Every page that `read` answers, of `limit` items at most, from the first
/// (`read(None, _)`), each after the `cursor` of the last item of the page
/// before, until a page holds fewer than `limit`: the items in order, and how
/// many pages. `read` is told to read blocking (`true`) or async, in turn.
/// Panics, naming `check`, on a page past `limit`, or pages that do not end.
fn read_pages<T, C>(
    check: &str,
    limit: usize,
    mut read: impl FnMut(Option<&C>, bool) -> Vec<T>,
    cursor: impl Fn(&T) -> C,
) -> (Vec<T>, usize) {
    let (mut items, mut after, mut pages) = (Vec::new(), None, 0);
    loop {
        let page = read(after.as_ref(), pages % 2 == 0);
        pages += 1;
        assert!(
            page.len() <= limit,
            "{check}: a page of {} for a limit of {limit}",
            page.len()
        );
        let full = page.len() == limit;
        after = page.last().map(&cursor).or(after);
        items.extend(page);
        if !full {
            return (items, pages);
        }
        assert!(pages <= 1_000, "{check}: pages of {limit} do not end");
    }
}

/// `records_after`, page by page from the first, each page's last id the next
/// page's `after`, meets each of `loaded` (by id) once, with the record `load`
/// gives, for every page size; so does the async form; a page after an id
/// that does not exist starts past where it would be.
fn pages_meet_every_object_once<S: Store>(rt: &Runtime<S>, loaded: &[(String, Record)]) {
    let store = rt.store();
    for limit in 1..=loaded.len() + 1 {
        let (page, pages) = read_pages(
            "lists_objects",
            limit,
            |after, sync| {
                if sync {
                    store.records_after(after, limit)
                } else {
                    block_on(store.records_after_async(after, limit))
                }
                .unwrap()
            },
            |(id, _)| id.clone(),
        );
        assert_eq!(
            pages,
            loaded.len() / limit + 1,
            "lists_objects: pages of {limit} for {} objects",
            loaded.len()
        );
        let mut listed: Vec<(String, Record)> = page
            .into_iter()
            .map(|(id, record)| (id.to_string(), record.expect("lists_objects: readable")))
            .collect();
        listed.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(listed, loaded, "lists_objects: pages of {limit}");
    }
    assert!(
        store.records_after(None, 0).unwrap().is_empty(),
        "lists_objects: a page of none"
    );
    let past: Vec<String> = store
        .records_after(Some(&ObjectId::from("x0")), 10)
        .unwrap()
        .into_iter()
        .map(|(id, _)| id.to_string())
        .collect();
    assert_eq!(past, ["y", "z"], "lists_objects: the page after x0");
}

/// Pages of `records_after` read while objects are created between them: each
/// object that existed all along is met once, and no object twice; an object
/// created past the last page read is met, one created before it is not (a
/// page reads the store as it is then).
pub fn pages_meet_objects_created_meanwhile<S: Store>(store: S) {
    let rt = runtime(store);
    let user = Actor::new("user");
    let id = |n: usize| format!("o-{n:03}");
    // The even numbers exist all along; the odd ones are created as the pages go.
    for n in (0..60).step_by(2) {
        rt.create(id(n), &user).unwrap();
    }
    let (mut met, mut after, mut created) = (Vec::<String>::new(), None::<ObjectId>, Vec::new());
    let mut odd = (1..60).step_by(2);
    loop {
        let page = rt.store().records_after(after.as_ref(), 4).unwrap();
        for (id, record) in &page {
            record
                .as_ref()
                .expect("pages_meet_objects_created_meanwhile: readable");
            met.push(id.to_string());
        }
        let Some((last, _)) = page.last() else { break };
        after = Some(last.clone());
        // Two created between this page and the next: the lowest odd number
        // left (behind the cursor) and the highest (past it, until the cursor
        // overtakes them).
        for n in [odd.next(), odd.next_back()].into_iter().flatten() {
            rt.create(id(n), &user).unwrap();
            created.push((id(n), id(n).as_str() > last.as_str()));
        }
        if page.len() < 4 {
            break;
        }
    }
    let mut unique = met.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        met.len(),
        "pages_meet_objects_created_meanwhile: an object met twice: {met:?}"
    );
    for n in (0..60).step_by(2) {
        assert!(
            met.contains(&id(n)),
            "pages_meet_objects_created_meanwhile: {} was not met",
            id(n)
        );
    }
    let (past, behind): (Vec<_>, Vec<_>) = created.iter().partition(|(_, past)| *past);
    // Both kinds happened: the pages raced the creates on either side.
    assert!(
        !past.is_empty() && !behind.is_empty(),
        "pages_meet_objects_created_meanwhile: {created:?}"
    );
    for (id, past) in &created {
        assert_eq!(
            met.contains(id),
            *past,
            "pages_meet_objects_created_meanwhile: {id}, created {} the cursor",
            if *past { "past" } else { "behind" }
        );
    }
}

/// The next event of `watcher`, waiting up to 10 s.
fn next(watcher: &mut Watcher) -> Event {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match watcher.try_recv() {
            Ok(Some(event)) => return event,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            other => panic!("watchers_see_writes_in_order: no event ({other:?})"),
        }
    }
}

/// A watcher sees every write from its subscription on, each object's in version
/// order, with the write's history entry.
pub fn watchers_see_writes_in_order<S: Store>(store: S) {
    let rt = runtime(store);
    let user = Actor::new("user");
    let mut all = rt.watch().unwrap();
    let mut only_b = rt.watch().unwrap().only("b");
    rt.create("a", &user).unwrap();
    rt.create("b", &user).unwrap();
    rt.run("b", &user, "start").unwrap();
    let events: Vec<Event> = (0..4).map(|_| next(&mut all)).collect();
    // Positions, where the store gives them, only grow along a watcher.
    let positions: Vec<u64> = events.iter().filter_map(|e| e.position).collect();
    assert!(
        positions.is_empty() || positions.len() == events.len(),
        "watchers_see_writes_in_order: some writes have a position, some not: {events:?}"
    );
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "watchers_see_writes_in_order: positions out of order: {positions:?}"
    );
    let seen: Vec<(String, u64)> = events
        .iter()
        .map(|e| (e.id.to_string(), e.entry.version))
        .collect();
    let b: Vec<u64> = seen
        .iter()
        .filter(|(id, _)| id == "b")
        .map(|e| e.1)
        .collect();
    assert_eq!(b, [1, 2, 3], "watchers_see_writes_in_order: {seen:?}");
    assert!(seen.contains(&("a".into(), 1)));
    let event = next(&mut only_b);
    assert_eq!(
        (event.id.as_str(), event.entry.kind),
        ("b", EntryKind::Created)
    );
    assert_eq!(rt.history("b").unwrap()[0], event.entry);
}

/// A removal takes the object whole (record, history, listings) and tells
/// watchers last; one the spec or a holder refuses changes nothing; the store
/// tells how the object was removed ([`Store::removal`]) until the id is
/// created again; the id is then free for a new object, whose versions go on
/// after the removal's, so that no version of the old object (an `If-Match`
/// written for it) matches the new one.
pub fn removes_whole<S: Store>(store: S) {
    let rt = runtime(store);
    let (user, ops) = (Actor::new("user"), Actor::new("olga").with_role("ops"));
    let what = "removes_whole";
    let mut all = rt.watch().unwrap();
    let mut only_r = rt.watch().unwrap().only("r");
    for id in ["q", "r", "s"] {
        rt.create(id, &user).unwrap();
    }
    rt.run("r", &user, "retire").unwrap();
    let before = rt.history("r").unwrap();
    // Refused: by the state, by the role, by a version, by a holder.
    rt.run("q", &user, "start").unwrap();
    match rt.remove("q", &user) {
        Err(RuntimeError::NotRemovable {
            state, removable, ..
        }) => {
            assert_eq!(
                (state.as_str(), removable),
                ("RUNNING", vec!["HALTED".into(), "RETIRED".into()]),
                "{what}"
            );
        }
        other => panic!("{what}: removal in RUNNING answered {other:?}"),
    }
    match rt.remove("r", &user) {
        Err(RuntimeError::MayNotRemove { roles, .. }) => assert_eq!(roles, ["ops"], "{what}"),
        other => panic!("{what}: removal without the role answered {other:?}"),
    }
    match rt.remove_at("r", 2, &ops) {
        Err(RuntimeError::VersionMismatch {
            expected: 2,
            found: 3,
            ..
        }) => {}
        other => panic!("{what}: removal at a stale version answered {other:?}"),
    }
    let held = rt.start("s", &user, "resize").unwrap();
    match rt.remove("s", &user) {
        Err(RuntimeError::Busy { action, .. }) => assert_eq!(action, "resize", "{what}"),
        other => panic!("{what}: removal of a held object answered {other:?}"),
    }
    held.complete().unwrap();
    assert_eq!(
        rt.history("r").unwrap(),
        before,
        "{what}: a refusal changed nothing"
    );
    // Removed: gone from every read, told to watchers after its earlier writes.
    let removed = rt.remove_at("r", 3, &ops).expect("removes_whole: removal");
    assert_eq!(
        (
            removed.kind,
            removed.version,
            removed.action,
            &*removed.actor
        ),
        (EntryKind::Removed, 4, None, "olga"),
        "{what}"
    );
    assert_eq!(rt.machine().state(removed.from).name, "RETIRED", "{what}");
    assert!(
        matches!(rt.get("r"), Err(RuntimeError::NotFound { .. })),
        "{what}"
    );
    assert!(rt.history("r").unwrap().is_empty(), "{what}: history kept");
    assert_eq!(
        rt.removal_of("r").unwrap(),
        Some(removed.clone()),
        "{what}: how it was removed"
    );
    for id in ["q", "never"] {
        assert_eq!(rt.removal_of(id).unwrap(), None, "{what}: {id} not removed");
    }
    assert!(
        !rt.store()
            .ids()
            .unwrap()
            .iter()
            .any(|id| id.as_str() == "r"),
        "{what}: listed"
    );
    let listed = |page: Vec<(ObjectId, _)>| {
        page.into_iter()
            .map(|(id, _)| id.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(listed(rt.store().records().unwrap()), ["q", "s"], "{what}");
    assert_eq!(
        listed(rt.store().records_after(None, 10).unwrap()),
        ["q", "s"],
        "{what}"
    );
    // A page of two is two objects, whatever the removed one left between.
    assert_eq!(
        listed(rt.store().records_after(None, 2).unwrap()),
        ["q", "s"],
        "{what}: a page of two"
    );
    assert_eq!(
        listed(rt.store().records_after(Some(&"q".into()), 1).unwrap()),
        ["s"],
        "{what}: a page of one after q"
    );
    let mut seen: Vec<Event> = Vec::new();
    while seen
        .last()
        .is_none_or(|e| e.entry.kind != EntryKind::Removed)
    {
        let event = next(&mut only_r);
        seen.push(event);
    }
    let versions: Vec<u64> = seen.iter().map(|e| e.entry.version).collect();
    assert_eq!(
        versions,
        [1, 2, 3, 4],
        "{what}: the removal comes after every write"
    );
    assert_eq!(seen[3].entry, removed, "{what}");
    let mut removals = 0;
    while removals == 0 {
        removals += usize::from(next(&mut all).entry.kind == EntryKind::Removed);
    }
    // Nothing left to remove; the id is free again.
    assert!(
        matches!(rt.remove("r", &ops), Err(RuntimeError::NotFound { .. })),
        "{what}"
    );
    let created = rt.create("r", &user).expect("removes_whole: created again");
    assert_eq!(created.version, 5, "{what}: numbered after the removal");
    assert_eq!(
        rt.removal_of("r").unwrap(),
        None,
        "{what}: the removal forgotten once the id lives again"
    );
    let history = rt.history("r").unwrap();
    assert_eq!(
        history
            .iter()
            .map(|e| (e.version, e.kind))
            .collect::<Vec<_>>(),
        [(5, EntryKind::Created)],
        "{what}: a new object's history has only its own life"
    );
    check_history(rt.machine(), &history).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(
        next(&mut only_r).entry,
        history[0],
        "{what}: watchers see the versions go on"
    );
    // No version of the old object is one of the new: a removal (or a
    // start) written for the old object at its last version is refused.
    match rt.remove_at("r", 3, &user) {
        Err(RuntimeError::VersionMismatch {
            expected: 3,
            found: 5,
            ..
        }) => {}
        other => panic!("{what}: a removal at the old object's version answered {other:?}"),
    }
    // The async form, at the version read; then created again, async.
    let removed = block_on(rt.remove_async("r", Some(5), &user)).expect("removes_whole: async");
    assert_eq!(
        (removed.kind, removed.version),
        (EntryKind::Removed, 6),
        "{what}"
    );
    assert!(rt.store().load(&"r".into()).unwrap().is_none(), "{what}");
    assert_eq!(
        block_on(rt.removal_of_async("r")).unwrap(),
        Some(removed),
        "{what}: async"
    );
    let created = block_on(rt.create_async("r", &user)).expect("removes_whole: async creation");
    assert_eq!(
        created.version, 7,
        "{what}: numbered after the second removal"
    );
    assert_eq!(rt.get("r").unwrap().version, 7, "{what}");
    let kept = rt.store().ids().unwrap();
    assert_eq!(
        kept.iter().filter(|id| id.as_str() == "r").count(),
        1,
        "{what}: listed once"
    );
}

/// An object removed and created again is another object: the fence of an
/// action on the old one (whose hold the healer ended, so that the object
/// could be removed) never takes up or ends the same action on the new one,
/// though the id, the action and the steps that led there are the same.
/// (Numbered from 1 again, the new action's fence would be the old one's.)
pub fn fences_outlive_removal<S: Store>(store: S) {
    fences_outlive_a_removal(&runtime(store), "fences_outlive_removal", |_| {});
}

/// For a store that forgets removals (`forget` forgets every removal made
/// so far, answering how many, as
/// [`MemoryStore::forget_removals`](crate::MemoryStore::forget_removals)
/// does with a time to come): once forgotten, a removal is no longer told
/// ([`Store::removal`]), and still no version of the forgotten object is one
/// of its id's next object. The new object is created past the old one's
/// removal, so the old action's fence is neither the new action's nor taken
/// up on it, and the new object, moved as the old one was, never takes a
/// version the old one had. (Numbered from 1 again, it would take them all.)
pub fn forgotten_removals_keep_versions_apart<S: Store>(store: S, forget: impl Fn(&S) -> usize) {
    let rt = runtime(store);
    let what = "forgotten_removals_keep_versions_apart";
    let user = Actor::new("user");
    rt.create("g", &user).unwrap();
    rt.remove("g", &user).unwrap();
    let (old_versions, removed) = fences_outlive_a_removal(&rt, what, |rt| {
        assert!(rt.removal_of("f").unwrap().is_some(), "{what}");
        assert_eq!(forget(rt.store()), 2, "{what}: both removals forgotten");
        for id in ["f", "g"] {
            assert_eq!(rt.removal_of(id).unwrap(), None, "{what}: {id} still told");
        }
        assert_eq!(forget(rt.store()), 0, "{what}: nothing left to forget");
    });
    let new_versions: Vec<u64> = rt.history("f").unwrap().iter().map(|e| e.version).collect();
    assert!(
        new_versions[0] > removed.version,
        "{what}: created at {} after a removal at {}",
        new_versions[0],
        removed.version
    );
    assert!(
        new_versions.iter().all(|v| !old_versions.contains(v)),
        "{what}: the new object's versions {new_versions:?} repeat some of {old_versions:?}"
    );
    assert!(
        rt.create("g", &user).unwrap().version > 2,
        "{what}: g numbered past its forgotten removal"
    );
}

/// An action on `f` whose hold the healer ends, `f` removed, `meanwhile`
/// run, `f` created again and the same action started on it: the new
/// action's fence is past the old one's, the old fence is neither taken up
/// nor ended on the new object, and the new action completes. Answers the
/// old object's versions and its removal.
fn fences_outlive_a_removal<S: Store>(
    rt: &Runtime<S>,
    what: &str,
    meanwhile: impl FnOnce(&Runtime<S>),
) -> (Vec<u64>, crate::Entry) {
    let (old_worker, new_worker) = (Actor::new("old-worker"), Actor::new("new-worker"));
    rt.create("f", &old_worker).unwrap();
    let old = rt.start("f", &old_worker, "resize").unwrap();
    let old_fence = old.fence();
    let record = rt.get("f").unwrap();
    rt.roll_back("f", &record, &Actor::new("healer")).unwrap();
    let old_versions = rt.history("f").unwrap().iter().map(|e| e.version).collect();
    let removed = (rt.remove("f", &old_worker)).unwrap_or_else(|e| panic!("{what}: removal: {e}"));
    meanwhile(rt);
    rt.create("f", &new_worker).unwrap();
    let new = rt.start("f", &new_worker, "resize").unwrap();
    assert!(
        new.fence() > old_fence,
        "{what}: the new action's {} is not past the old one's {old_fence}",
        new.fence()
    );
    // The old object's history went with it: no start of the new object's
    // had the fence.
    match rt.resume("f", &old_worker, old_fence) {
        Err(RuntimeError::NoHold { fence, .. }) => assert_eq!(fence, old_fence, "{what}"),
        other => panic!("{what}: the old fence taken up on the new object: {other:?}"),
    }
    match old.complete() {
        Err(RuntimeError::Conflict { .. }) => {}
        other => panic!("{what}: the old handle completed on the new object: {other:?}"),
    }
    new.still_held()
        .unwrap_or_else(|e| panic!("{what}: the new action lost its hold: {e}"));
    new.complete().unwrap();
    check_history(rt.machine(), &rt.history("f").unwrap())
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    (old_versions, removed)
}

/// A removal and a start race on one object, round after round: exactly one
/// of them lands, and the object is as the winner left it. Asserts that the
/// race happened: in some round the removal read the object before the start
/// and lost its compare-and-delete to it ([`RuntimeError::Conflict`]).
pub fn removal_races_a_start<S: Store>(store: S) {
    let rt = runtime(store);
    let (remover, starter) = (Actor::new("remover"), Actor::new("starter"));
    let what = "removal_races_a_start";
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut lost_the_compare, mut rounds) = (0, 0);
    while lost_the_compare == 0 {
        assert!(
            Instant::now() < deadline,
            "{what}: in {rounds} rounds no removal lost its compare-and-delete to a start"
        );
        rounds += 1;
        let id = format!("race-{rounds}");
        rt.create(id.as_str(), &remover).unwrap();
        let barrier = std::sync::Barrier::new(2);
        let (removed, started) = std::thread::scope(|s| {
            let removal = s.spawn(|| {
                barrier.wait();
                rt.remove(id.as_str(), &remover)
            });
            let start = s.spawn(|| {
                barrier.wait();
                rt.run(id.as_str(), &starter, "start")
            });
            (removal.join().unwrap(), start.join().unwrap())
        });
        match (&removed, &started) {
            (Ok(entry), Err(RuntimeError::NotFound { .. } | RuntimeError::Conflict { .. })) => {
                assert_eq!(entry.version, 2, "{what}");
                assert!(
                    rt.store().load(&id.as_str().into()).unwrap().is_none(),
                    "{what}"
                );
            }
            (Err(lost), Ok(_)) => {
                match lost {
                    RuntimeError::Conflict { .. } => lost_the_compare += 1,
                    // Read while the action held it, or after it ended.
                    RuntimeError::Busy { .. } | RuntimeError::NotRemovable { .. } => {}
                    other => panic!("{what}: the removal lost with {other:?}"),
                }
                let record = rt.get(id.as_str()).expect("the start's object stays");
                assert_eq!(rt.machine().state(record.state).name, "RUNNING", "{what}");
            }
            other => panic!("{what}: round {rounds}: {other:?}"),
        }
    }
}

/// `threads` actors race on a few objects: every accepted action is in the
/// histories, every history is a path, and every object is where its history ends.
pub fn concurrent_actors_never_lose_a_write<S: Store>(store: S, threads: usize, attempts: usize) {
    let rt = runtime(store);
    let ids: Vec<String> = (0..5).map(|i| format!("obj-{i}")).collect();
    let admin = Actor::new("admin");
    for id in &ids {
        rt.create(id.as_str(), &admin).unwrap();
    }
    let completed = AtomicUsize::new(0);
    let actions = ["start", "stop", "resize", "reboot", "migrate"];
    std::thread::scope(|s| {
        for t in 0..threads {
            let (rt, ids, completed) = (&rt, &ids, &completed);
            s.spawn(move || {
                let actor = Actor::new(format!("actor-{t}"));
                for i in 0..attempts {
                    let id = ids[(i * 7 + t) % ids.len()].as_str();
                    let action = actions[(i + t) % actions.len()];
                    match rt.start(id, &actor, action) {
                        Ok(flight) => {
                            if flight.complete().is_ok() {
                                completed.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Err(e) if e.is_retryable() => {}
                        Err(RuntimeError::NoRule { .. }) => {}
                        Err(e) => panic!("concurrent: unexpected refusal: {e}"),
                    }
                }
            });
        }
    });
    let mut in_histories = 0;
    for id in &ids {
        let history = rt.history(id.as_str()).unwrap();
        check_history(rt.machine(), &history).unwrap_or_else(|e| panic!("concurrent: {id}: {e}"));
        let record = rt.get(id.as_str()).unwrap();
        assert_eq!(
            Some(record.state),
            history.last().map(|e| e.to),
            "concurrent: {id}"
        );
        assert_eq!(record.version, history.len() as u64, "concurrent: {id}");
        in_histories += history
            .iter()
            .filter(|e| e.kind == EntryKind::Completed)
            .count();
    }
    assert_eq!(
        in_histories,
        completed.load(Ordering::Relaxed),
        "concurrent: every completed action is in a history, and only those"
    );
}

/// The suite's machine edited as specs are in production: a state inserted before
/// the others (every index moves), `RUNNING` renamed `UP` and `resize` renamed
/// `rescale`, both declared with `renamed_from`.
pub const SPEC_EDITED: &str = r#"
[machine]
name = "server"
initial = "HALTED"

[states]
BOOTING = { transition = true }
HALTED = "Off"
STARTING = { transition = true }
UP = { description = "On", renamed_from = "RUNNING" }
STOPPING = { transition = true }
RESIZING = { transition = true }
RETIRED = { terminal = true }

[actions]
boot = { from = "HALTED", via = "BOOTING", to = "UP" }
start = { from = "HALTED", via = "STARTING", to = "UP" }
stop = { from = "UP", via = "STOPPING", to = "HALTED" }
rescale = { from = ["HALTED", "UP"], via = "RESIZING", to_origin = true, renamed_from = "resize" }
reboot = { from = "UP", to = "UP" }
retire = { from = "HALTED", to = "RETIRED" }
migrate = { from = ["HALTED", "UP"], hidden = true }
"#;

/// Objects written under one version of the spec are read and moved under an edited
/// one; a version that drops a state some object is in is refused, naming it.
/// `open` opens the same store again each time it is called (a clone of an
/// `Arc<MemoryStore>`, a new etcd handle on the same prefix); the store starts
/// empty.
pub fn specs_evolve<S: Store>(open: impl Fn() -> S) {
    let user = Actor::new("user");
    let old = runtime(open());
    old.create("up", &user).expect("specs_evolve: create");
    old.run("up", &user, "start").expect("specs_evolve: start");
    old.create("resizing", &user).expect("specs_evolve: create");
    // A worker that died during a resize: its hold is abandoned.
    drop(
        old.start("resizing", &user, "resize")
            .expect("specs_evolve: resize"),
    );
    old.create("retired", &user).expect("specs_evolve: create");
    old.run("retired", &user, "retire")
        .expect("specs_evolve: retire");
    // Removed objects: one in a state the edits keep, one in a state the
    // last edit drops (which must not refuse it: the object is gone).
    old.create("gone", &user).expect("specs_evolve: create");
    old.remove("gone", &user).expect("specs_evolve: remove");
    let ops = Actor::new("olga").with_role("ops");
    old.create("gone-retired", &user)
        .expect("specs_evolve: create");
    old.run("gone-retired", &user, "retire")
        .expect("specs_evolve: retire");
    old.remove("gone-retired", &ops)
        .expect("specs_evolve: remove");
    drop(old);

    let edited = fsm_core::spec::load_str("server.toml", SPEC_EDITED).expect("a valid spec");
    let new = Runtime::new(edited.clone(), open())
        .expect("specs_evolve: the edited spec reads every object");
    assert_eq!(
        new.state_name("up").unwrap(),
        "UP",
        "specs_evolve: a renamed state"
    );
    let history = new.history("up").unwrap();
    let names: Vec<&str> = history.iter().map(|e| &*edited.state(e.to).name).collect();
    assert_eq!(
        names,
        ["HALTED", "STARTING", "UP"],
        "specs_evolve: history by the new names"
    );
    check_history(&edited, &history)
        .expect("specs_evolve: the history is a path of the edited spec");
    let removal = new
        .removal_of("gone")
        .expect("specs_evolve: a removal read")
        .expect("specs_evolve: a removal kept");
    assert_eq!(
        (&*edited.state(removal.from).name, removal.kind),
        ("HALTED", EntryKind::Removed),
        "specs_evolve: a removal by the new names"
    );
    // Moved under the edited spec.
    new.run("up", &user, "stop").expect("specs_evolve: stop");
    new.run("up", &user, "boot")
        .expect("specs_evolve: a new action");
    assert_eq!(new.state_name("up").unwrap(), "UP");
    check_history(&edited, &new.history("up").unwrap()).expect("specs_evolve: history after moves");
    // The abandoned resize reads as the renamed action and is healed back.
    let record = new.get("resizing").unwrap();
    let holder = record.in_flight.as_ref().expect("specs_evolve: still held");
    assert_eq!(edited.action(holder.action).name, "rescale");
    let report = crate::Healer::new().heal(&new).expect("specs_evolve: heal");
    assert_eq!(report.healed.len(), 1, "specs_evolve: {report:?}");
    assert_eq!(new.state_name("resizing").unwrap(), "HALTED");
    // A hold whose rule the next edit takes away: still read, not taken up.
    new.create("held", &user).expect("specs_evolve: create");
    let fence = new
        .start("held", &user, "rescale")
        .expect("specs_evolve: rescale")
        .fence();
    drop(new);
    let narrowed = SPEC_EDITED.replace(
        "rescale = { from = [\"HALTED\", \"UP\"]",
        "rescale = { from = [\"UP\"]",
    );
    assert_ne!(narrowed, SPEC_EDITED);
    let narrowed = fsm_core::spec::load_str("server.toml", narrowed).expect("a valid spec");
    let rt = Runtime::new(narrowed, open()).expect("specs_evolve: a narrowed rule");
    match rt.resume("held", &user, fence) {
        Err(e @ RuntimeError::NoRule { .. }) => assert_eq!(
            e.to_string(),
            "held: `rescale` cannot start in HALTED: it starts only from UP",
            "specs_evolve: resumed without its rule"
        ),
        other => panic!("specs_evolve: resumed without its rule: {other:?}"),
    }
    drop(rt);

    // Retiring a state some object is in, without a migration, is refused.
    let without_retired = SPEC_EDITED
        .replace("RETIRED = { terminal = true }\n", "")
        .replace("retire = { from = \"HALTED\", to = \"RETIRED\" }\n", "");
    let dropped = fsm_core::spec::load_str("server.toml", without_retired).expect("a valid spec");
    match Runtime::new(dropped, open()) {
        Err(RuntimeError::Store(e @ crate::StoreError::Incompatible { .. })) => {
            let message = e.to_string();
            assert!(
                message.contains("retired (RETIRED)"),
                "specs_evolve: {message}"
            );
            assert!(
                !message.contains("up (") && !message.contains("gone-retired"),
                "specs_evolve: only what is unreadable: {message}"
            );
        }
        other => panic!("specs_evolve: a spec without RETIRED answered {other:?}"),
    }
    // And the store still serves the spec it was serving.
    let again = Runtime::new(edited, open()).expect("specs_evolve: reopened");
    assert_eq!(again.state_name("retired").unwrap(), "RETIRED");
}

/// A removal in a state that a later spec drops never refuses that spec (its
/// object is gone) and reads as unreadable under it, saying which name is
/// missing; a spec that has the state again reads the removal again, from
/// that state, and the id's next object goes on from the removal's version.
/// `open` opens the same store again each time it is called; the store starts
/// empty.
pub fn removals_outlive_specs_that_cannot_read_them<S: Store>(open: impl Fn() -> S) {
    let what = "removals_outlive_specs_that_cannot_read_them";
    let rt = runtime(open());
    let (user, ops) = (Actor::new("user"), Actor::new("olga").with_role("ops"));
    rt.create("r", &user).expect(what);
    rt.run("r", &user, "retire").expect(what);
    let removed = rt.remove("r", &ops).expect(what).version;
    drop(rt);

    let without_retired = SPEC
        .replace("RETIRED = { terminal = true, remove = \"ops\" }\n", "")
        .replace("retire = { from = \"HALTED\", to = \"RETIRED\" }\n", "");
    assert_ne!(without_retired, SPEC);
    let dropped = fsm_core::spec::load_str("server.toml", without_retired).expect("a valid spec");
    let rt = Runtime::new(dropped, open())
        .unwrap_or_else(|e| panic!("{what}: a removed object refused a spec: {e}"));
    match rt.removal_of("r") {
        // What was read is named the store's way (the id, a key on etcd).
        Err(RuntimeError::Store(e @ crate::StoreError::Unreadable { .. })) => {
            let message = e.to_string();
            assert!(
                message.contains("r cannot be read: ")
                    && message.ends_with(
                        "machine `server` has no state `RETIRED` \
                         (if it was renamed, say so with `renamed_from` in the spec)"
                    ),
                "{what}: {message}"
            )
        }
        other => panic!("{what}: the removal under a spec without its state: {other:?}"),
    }
    drop(rt);

    let rt = runtime(open());
    let removal = rt
        .removal_of("r")
        .unwrap_or_else(|e| panic!("{what}: the removal under its spec again: {e}"))
        .unwrap_or_else(|| panic!("{what}: the removal was lost"));
    assert_eq!(
        (
            &*rt.machine().state(removal.from).name,
            removal.kind,
            removal.version
        ),
        ("RETIRED", EntryKind::Removed, removed),
        "{what}: the removal read again"
    );
    assert_eq!(
        rt.create("r", &user).expect(what).version,
        removed + 1,
        "{what}: the id's next object"
    );
}

/// `tasks` actors race on a few objects through the async API, as tasks of one
/// current-thread tokio runtime, each giving the thread up while it holds an
/// action: the races happen (starts refused as busy, or compare-and-sets lost),
/// every accepted action is in the histories, every history is a path, and a
/// watcher's stream delivers every write once, in version order per object. A
/// call that blocked the thread on work needing it would hang here: the whole
/// check is bounded, and fails instead.
pub fn async_actors_share_one_thread<S: Store>(store: S, tasks: usize, attempts: usize) {
    use tokio_stream::StreamExt as _;

    let rt = runtime(store);
    let thread = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime");
    let check = async {
        let ids: Vec<String> = (0..3).map(|i| format!("obj-{i}")).collect();
        let admin = Actor::new("admin");
        let mut events = rt.watch().unwrap().into_stream();
        for id in &ids {
            rt.create_async(id.as_str(), &admin).await.unwrap();
        }
        let raced = std::sync::Arc::new(AtomicUsize::new(0));
        let completed = std::sync::Arc::new(AtomicUsize::new(0));
        let actions = ["start", "stop", "resize", "reboot", "migrate"];
        let mut actors = tokio::task::JoinSet::new();
        for t in 0..tasks {
            let (rt, ids) = (rt.clone(), ids.clone());
            let (raced, completed) = (raced.clone(), completed.clone());
            actors.spawn(async move {
                let actor = Actor::new(format!("task-{t}"));
                for i in 0..attempts {
                    let id = ids[(i * 7 + t * 3) % ids.len()].as_str();
                    let action = actions[(i + t) % actions.len()];
                    match rt.start_async(id, &actor, action).await {
                        Ok(flight) => {
                            // Hold the action while the other tasks run.
                            tokio::task::yield_now().await;
                            flight.complete_async().await.unwrap();
                            completed.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(RuntimeError::Busy { .. } | RuntimeError::Conflict { .. }) => {
                            raced.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(RuntimeError::NoRule { .. }) => {}
                        Err(e) => panic!("async_actors_share_one_thread: {e}"),
                    }
                }
            });
        }
        while let Some(done) = actors.join_next().await {
            done.expect("async_actors_share_one_thread: a task panicked");
        }
        let (raced, completed) = (
            raced.load(Ordering::Relaxed),
            completed.load(Ordering::Relaxed),
        );
        assert!(
            raced > 0,
            "async_actors_share_one_thread: no start met another task's action ({completed} completed)"
        );
        let mut writes = 0;
        for id in &ids {
            let history = rt.history(id.as_str()).unwrap();
            check_history(rt.machine(), &history).unwrap();
            writes += history.len();
        }
        // Created, then a start and a completion per completed action.
        assert_eq!(
            writes,
            ids.len() + 2 * completed,
            "async_actors_share_one_thread"
        );
        let mut listed = rt.store().ids_async().await.unwrap();
        listed.sort();
        let expected: Vec<crate::ObjectId> = ids.iter().map(crate::ObjectId::from).collect();
        assert_eq!(listed, expected, "async_actors_share_one_thread: ids_async");
        for id in &ids {
            let (now, awaited) = (rt.state(id.as_str()), rt.state_async(id.as_str()).await);
            assert_eq!(now, awaited, "async_actors_share_one_thread: state_async");
        }
        let mut last = std::collections::HashMap::new();
        for _ in 0..writes {
            let event = events.next().await.expect("the stream goes on").unwrap();
            let before = last.insert(event.id.to_string(), event.entry.version);
            assert_eq!(
                before.unwrap_or(0) + 1,
                event.entry.version,
                "async_actors_share_one_thread: {} out of order",
                event.id
            );
        }
    };
    thread
        .block_on(async { tokio::time::timeout(Duration::from_secs(60), check).await })
        .expect(
            "async_actors_share_one_thread: stalled (a blocking call on the runtime's thread?)",
        );
}

/// An async start whose future is dropped after its first poll (a `timeout`
/// around it, a `select!` whose other branch won) leaves no hold that nobody
/// can end: the start lands with its action recorded abandoned (the handle
/// dropped), or not at all, so a healer with no deadline frees the object. A
/// store whose calls never wait does all of it in the first poll; one across
/// the network runs the start detached ([`Store::runs_detached`]).
pub fn dropped_starts_leave_no_live_hold<S: Store>(store: S) {
    let rt = runtime(store);
    let user = Actor::new("user");
    rt.create("a", &user)
        .expect("dropped_starts_leave_no_live_hold: create");
    block_on(async {
        let mut start = std::pin::pin!(rt.start_async("a", &user, "start"));
        // Polled once, then dropped with whatever it answered.
        let _ = std::future::poll_fn(|cx| std::task::Poll::Ready(start.as_mut().poll(cx))).await;
    });
    let abandoned = |rt: &Runtime<S>| {
        rt.history("a")
            .expect("dropped_starts_leave_no_live_hold: history")
            .iter()
            .any(|e| e.kind == EntryKind::Abandoned)
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !abandoned(&rt) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let record = rt.get("a").expect("dropped_starts_leave_no_live_hold: get");
    assert!(
        record.in_flight.is_none() || abandoned(&rt),
        "dropped_starts_leave_no_live_hold: held with no handle and not abandoned: {record:?}"
    );
    crate::Healer::new()
        .heal(&rt)
        .expect("dropped_starts_leave_no_live_hold: heal");
    let record = rt.get("a").expect("dropped_starts_leave_no_live_hold: get");
    assert!(
        record.in_flight.is_none(),
        "dropped_starts_leave_no_live_hold: still held after a healer with no deadline: {record:?}"
    );
    assert_eq!(state(&rt, "a"), "HALTED");
}

/// [`Runtime::start_when_free_async`]: a start refused `Busy` waits for the
/// object's next write (here the holder's completion, seen through the store's
/// watch) and starts from the state it reached; one whose wait ends first
/// answers the holder's `Busy`; one the reached state refuses answers that at
/// once, not at the end of its wait. The wait runs as a spawned task (its
/// future is `Send`). Then the same of [`Runtime::start_when_free`], on a
/// thread of its own.
pub fn busy_objects_are_waited_for<S: Store>(store: S) {
    let rt = runtime(store);
    let (user, other) = (Actor::new("user"), Actor::new("other"));
    block_on(async {
        let long = || tokio::time::sleep(Duration::from_secs(30));
        rt.create_async("a", &user).await.unwrap();
        let held = rt.start_async("a", &user, "start").await.unwrap();
        // The race: `stop` is refused while `start` holds the object.
        let refused = rt.start_async("a", &other, "stop").await;
        assert!(
            matches!(refused, Err(RuntimeError::Busy { .. })),
            "busy_objects_are_waited_for: {refused:?}"
        );
        let waiting = tokio::spawn({
            let rt = rt.clone();
            let other = other.clone();
            async move {
                rt.start_when_free_async("a", &other, "stop", long())
                    .await
                    .map(InFlight::into_owned)
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !waiting.is_finished(),
            "busy_objects_are_waited_for: did not wait"
        );
        held.complete_async().await.unwrap();
        let stopping = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("busy_objects_are_waited_for: no start after the holder's completion")
            .expect("no panic")
            .expect("busy_objects_are_waited_for: the wait ends in a start");
        assert_eq!(state(&rt, "a"), "STOPPING");
        stopping.complete_async().await.unwrap();

        // Out of time: the holder's `Busy`.
        let held = rt.start_async("a", &user, "start").await.unwrap();
        let short = tokio::time::sleep(Duration::from_millis(20));
        match rt.start_when_free_async("a", &other, "resize", short).await {
            Err(RuntimeError::Busy { holder, .. }) => assert_eq!(holder, "user"),
            answer => panic!(
                "busy_objects_are_waited_for: {:?}",
                answer.map(|f| f.id().clone())
            ),
        }
        // Refused by the state the object reaches: answered then, whatever
        // the wait had left (`retire` leaves HALTED only; `start` ends RUNNING).
        let held = held.into_owned();
        let completing = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            held.complete_async().await.map(drop).unwrap();
        });
        let retiring = rt.start_when_free_async("a", &other, "retire", std::future::pending());
        let retired = tokio::time::timeout(Duration::from_secs(10), retiring)
            .await
            .expect("busy_objects_are_waited_for: waited past the refusal");
        completing.await.expect("no panic");
        assert!(
            matches!(retired, Err(RuntimeError::NoRule { .. })),
            "busy_objects_are_waited_for: {:?}",
            retired.map(|f| f.id().clone())
        );
    });

    // The blocking wait, on a thread of its own.
    rt.create("b", &user).unwrap();
    let held = rt.start("b", &user, "start").unwrap();
    let refused = rt.start("b", &other, "stop");
    assert!(
        matches!(refused, Err(RuntimeError::Busy { .. })),
        "busy_objects_are_waited_for: {refused:?}"
    );
    std::thread::scope(|s| {
        let waiting = s.spawn(|| {
            rt.start_when_free("b", &other, "stop", Duration::from_secs(30))
                .map(|f| f.complete().map(drop))
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !waiting.is_finished(),
            "busy_objects_are_waited_for: did not wait"
        );
        held.complete().unwrap();
        let stopped = waiting.join().expect("no panic");
        assert!(
            matches!(stopped, Ok(Ok(()))),
            "busy_objects_are_waited_for: {stopped:?}"
        );
    });
    assert_eq!(state(&rt, "b"), "HALTED");
    let held = rt.start("b", &user, "start").unwrap();
    let began = Instant::now();
    match rt.start_when_free("b", &other, "resize", Duration::from_millis(20)) {
        Err(RuntimeError::Busy { holder, .. }) => assert_eq!(holder, "user"),
        answer => panic!(
            "busy_objects_are_waited_for: {:?}",
            answer.map(|f| f.id().clone())
        ),
    }
    assert!(
        began.elapsed() >= Duration::from_millis(20),
        "busy_objects_are_waited_for: gave up early"
    );
    std::thread::scope(|s| {
        let retiring = s.spawn(|| {
            let began = Instant::now();
            let retired = rt.start_when_free("b", &other, "retire", Duration::from_secs(30));
            (retired.map(|f| f.id().clone()), began.elapsed())
        });
        std::thread::sleep(Duration::from_millis(50));
        held.complete().unwrap();
        let (retired, took) = retiring.join().expect("no panic");
        assert!(
            matches!(retired, Err(RuntimeError::NoRule { .. })),
            "busy_objects_are_waited_for: {retired:?}"
        );
        assert!(
            took < Duration::from_secs(10),
            "busy_objects_are_waited_for: waited past the refusal"
        );
    });
    // A wait too long for the clock (as long as it takes): a free object
    // starts at once.
    let stopping = rt.start_when_free("b", &other, "stop", Duration::MAX);
    assert!(
        stopping.is_ok(),
        "busy_objects_are_waited_for: {:?}",
        stopping.map(drop)
    );
}
