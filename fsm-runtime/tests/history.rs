//! `check_history`, which every concurrency and etcd test trusts, branch by branch:
//! a valid history, written by the runtime, mutated into each kind of history no run
//! of the machine could write, and rejected with its message.

use std::path::PathBuf;

use fsm_core::{ActionId, Machine, StateId};
use fsm_runtime::{Actor, Entry, EntryKind, Healer, MemoryStore, Runtime, check_history};

fn vm() -> Machine {
    fsm_core::spec::load(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../specs/ovc/vm.toml"))
        .unwrap()
}

/// A history with every kind of entry: created, started and completed, failed,
/// a hidden action beside a visible one, abandoned, healed.
fn valid() -> (Machine, Vec<Entry>) {
    let machine = vm();
    let rt = Runtime::new(machine.clone(), MemoryStore::new()).unwrap();
    let user = Actor::new("user");
    rt.create("vm", &user).unwrap();
    rt.run("vm", &user, "deploy").unwrap();
    rt.start("vm", &user, "pause").unwrap().fail().unwrap();
    let migrate = rt.start("vm", &user, "migrate").unwrap();
    rt.run("vm", &user, "reboot").unwrap();
    migrate.complete().unwrap();
    drop(rt.start("vm", &user, "stop").unwrap());
    Healer::new().heal(&rt).unwrap();
    let history = rt.history("vm").unwrap();
    let kinds: Vec<EntryKind> = history.iter().map(|e| e.kind).collect();
    use EntryKind::*;
    assert_eq!(
        kinds,
        [
            Created, Started, Completed, Started, Failed, Started, Started, Completed, Completed,
            Started, Abandoned, Healed
        ]
    );
    check_history(&machine, &history).expect("the runtime writes valid histories");
    (machine, history)
}

fn state(m: &Machine, name: &str) -> StateId {
    m.state_id(name).unwrap()
}

fn action(m: &Machine, name: &str) -> ActionId {
    m.find_action(name).unwrap()
}

/// The history with `change` applied, which must be rejected with `problem`.
fn rejects(change: impl FnOnce(&Machine, &mut Vec<Entry>), index: usize, problem: &str) {
    let (m, mut history) = valid();
    change(&m, &mut history);
    let err = check_history(&m, &history).expect_err(problem);
    assert_eq!(err.index, index, "{err}");
    assert_eq!(err.problem, problem, "{err}");
}

#[test]
fn a_version_gap_is_rejected() {
    rejects(|_, h| h[3].version = 9, 3, "version 9 where 4 was due");
}

/// An id whose object was removed numbers its next object on from the
/// removal: a history may start later than 1, and goes on from there.
#[test]
fn a_history_may_start_after_version_one_and_goes_on_from_there() {
    let (m, mut history) = valid();
    for e in &mut history {
        e.version += 4;
    }
    check_history(&m, &history).expect("a creation at version 5, and on from there");
    history[0].version = 0;
    let err = check_history(&m, &history).expect_err("no version 0");
    assert_eq!(
        (err.index, err.problem.as_str()),
        (0, "version 0 where 1 was due")
    );
    history[0].version = 5;
    history[1].version = 5;
    let err = check_history(&m, &history).expect_err("versions go on from the first");
    assert_eq!(
        (err.index, err.problem.as_str()),
        (1, "version 5 where 6 was due")
    );
}

#[test]
fn an_entry_stamped_before_the_one_before_it_is_rejected() {
    use std::time::Duration;
    rejects(
        |_, h| h[3].at = h[2].at - Duration::from_millis(5),
        3,
        "stamped 5ms earlier than the entry before it",
    );
}

#[test]
fn a_history_must_start_with_a_creation() {
    rejects(
        |_, h| {
            h.remove(0);
            for (i, e) in h.iter_mut().enumerate() {
                e.version = i as u64 + 1
            }
        },
        0,
        "the first entry is not a creation",
    );
}

#[test]
fn an_entry_must_start_where_the_last_ended() {
    rejects(
        |m, h| h[3].from = state(m, "HALTED"),
        3,
        "starts in HALTED but the object was in RUNNING",
    );
}

#[test]
fn a_start_must_name_its_action() {
    rejects(
        |_, h| h[1].action = None,
        1,
        "a Started entry names no action",
    );
}

#[test]
fn an_object_is_created_once() {
    rejects(
        |m, h| {
            h[3].kind = EntryKind::Created;
            h[3].to = state(m, "RUNNING");
        },
        3,
        "created twice",
    );
}

#[test]
fn an_object_is_created_in_the_initial_state() {
    rejects(
        |m, h| {
            h[0].from = state(m, "HALTED");
            h[0].to = state(m, "HALTED");
        },
        0,
        "created in HALTED rather than VIRTUAL",
    );
}

#[test]
fn nothing_starts_while_a_visible_action_runs() {
    // The pause's failure becomes a second start.
    rejects(
        |m, h| {
            h[4].kind = EntryKind::Started;
            h[4].action = Some(action(m, "reboot"));
            h[4].from = state(m, "PAUSING");
            h[4].to = state(m, "REBOOTING");
        },
        4,
        "`reboot` started while `pause` was in flight",
    );
}

#[test]
fn a_hidden_action_does_not_start_beside_another() {
    // The reboot beside the migration becomes a second migration.
    rejects(
        |m, h| {
            h[6].action = Some(action(m, "migrate"));
            h[6].to = state(m, "RUNNING");
        },
        6,
        "`migrate` started while `migrate` was in flight",
    );
}

#[test]
fn an_action_starts_only_from_its_origins() {
    rejects(
        |m, h| h[3].action = Some(action(m, "resume")),
        3,
        "`resume` started from RUNNING, not one of its origins",
    );
}

#[test]
fn an_action_starts_into_its_transition_state() {
    rejects(
        |m, h| h[3].to = state(m, "STOPPING"),
        3,
        "`pause` started into STOPPING",
    );
}

#[test]
fn nothing_ends_that_did_not_start() {
    rejects(
        |m, h| {
            h[1].kind = EntryKind::Completed;
            h[1].to = state(m, "VIRTUAL");
        },
        1,
        "Completed `deploy` with no action in flight",
    );
}

#[test]
fn only_the_action_in_flight_ends() {
    rejects(
        |m, h| h[4].action = Some(action(m, "stop")),
        4,
        "Failed `stop` while `pause` was in flight",
    );
}

#[test]
fn an_end_leads_where_the_table_says() {
    // A completion to the wrong target, a failure away from the origin, an
    // abandonment that moves.
    rejects(
        |m, h| h[2].to = state(m, "HALTED"),
        2,
        "Completed `deploy` led to HALTED rather than RUNNING",
    );
    rejects(
        |m, h| h[4].to = state(m, "PAUSED"),
        4,
        "Failed `pause` led to PAUSED rather than RUNNING",
    );
    rejects(
        |m, h| h[10].to = state(m, "HALTED"),
        10,
        "Abandoned `stop` led to HALTED rather than STOPPING",
    );
}
