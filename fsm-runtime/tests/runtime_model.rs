//! Random interleavings of start, complete, fail, drop, heal, removal and
//! creation on a small machine, against a sequential model of the table
//! written here independently.

use fsm_core::{ActionId, Machine, StateId};
use fsm_runtime::{Actor, InFlight, MemoryStore, Runtime, RuntimeError, check_history};
use proptest::prelude::*;

const SPEC: &str = r#"
[machine]
name = "server"
initial = "HALTED"

[states]
HALTED = { remove = true, description = "Off" }
STARTING = { transition = true }
RUNNING = "On"
STOPPING = { transition = true }
RESIZING = { transition = true }
RETIRED = { terminal = true, remove = true }

[actions]
start = { from = "HALTED", via = "STARTING", to = "RUNNING" }
stop = { from = "RUNNING", via = "STOPPING", to = "HALTED" }
resize = { from = ["HALTED", "RUNNING"], via = "RESIZING", to_origin = true }
inspect = { from = ["HALTED", "RUNNING"] }
reboot = { from = "RUNNING", to = "RUNNING" }
retire = { from = "HALTED", to = "RETIRED" }
survey = { from = ["HALTED", "RUNNING"], hidden = true }
"#;

const OBJECTS: usize = 3;

#[derive(Debug, Clone)]
enum Op {
    Start { object: usize, action: usize },
    Complete(usize),
    Fail(usize),
    Drop(usize),
    Heal(usize),
    ReleaseHidden(usize),
    Remove(usize),
    Create(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..OBJECTS, 0..7usize).prop_map(|(object, action)| Op::Start { object, action }),
        2 => any::<usize>().prop_map(Op::Complete),
        1 => any::<usize>().prop_map(Op::Fail),
        1 => any::<usize>().prop_map(Op::Drop),
        1 => (0..OBJECTS).prop_map(Op::Heal),
        1 => (0..OBJECTS).prop_map(Op::ReleaseHidden),
        1 => (0..OBJECTS).prop_map(Op::Remove),
        1 => (0..OBJECTS).prop_map(Op::Create),
    ]
}

/// The model of one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Model {
    state: StateId,
    version: u64,
    /// (action, origin, abandoned, version of its start)
    in_flight: Option<(ActionId, StateId, bool, u64)>,
    /// The hidden action's slot, likewise.
    hidden: Option<(ActionId, StateId, bool, u64)>,
}

/// The table, as the model reads it.
struct Table {
    machine: Machine,
}

impl Table {
    fn origins(&self, a: ActionId) -> &[StateId] {
        &self.machine.action(a).origins
    }
    /// Whether an object may be removed in `state`: HALTED and RETIRED.
    fn removable(&self, state: StateId) -> bool {
        matches!(&*self.machine.state(state).name, "HALTED" | "RETIRED")
    }
    fn via(&self, a: ActionId) -> Option<StateId> {
        self.machine.action(a).via
    }
    /// Where `a` leads from `origin`, by the spec's own words.
    fn target(&self, a: ActionId, origin: StateId) -> StateId {
        let name = |s: &str| self.machine.find_state(s).unwrap();
        match &*self.machine.action(a).name {
            "start" => name("RUNNING"),
            "stop" => name("HALTED"),
            "resize" | "inspect" | "survey" => origin,
            "reboot" => name("RUNNING"),
            "retire" => name("RETIRED"),
            other => unreachable!("{other}"),
        }
    }
}

fn object(i: usize) -> String {
    format!("s-{i}")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_runtime_matches_a_sequential_model(ops in proptest::collection::vec(op(), 1..60)) {
        let machine = fsm_core::spec::load_str("server.toml", SPEC).unwrap();
        let table = Table { machine: machine.clone() };
        let rt = Runtime::new(machine.clone(), MemoryStore::new()).unwrap();
        let actor = Actor::new("tester");
        // Each object as the model has it (`None`: removed), and the version
        // of its last removal.
        let mut model = Vec::new();
        let mut removed_at: Vec<Option<u64>> = vec![None; OBJECTS];
        for i in 0..OBJECTS {
            rt.create(object(i), &actor).unwrap();
            model.push(Some(Model { state: machine.initial(), version: 1, in_flight: None, hidden: None }));
        }
        // Handles and, beside each, the object, whether it is hidden and the version
        // its start wrote.
        let mut handles: Vec<(InFlight, usize, bool, u64)> = Vec::new();

        for op in ops {
            match op {
                Op::Start { object: i, action } => {
                    let a = ActionId(action);
                    let hidden = machine.action(a).hidden;
                    let got = rt.start(object(i), &actor, a);
                    let Some(m) = &mut model[i] else {
                        prop_assert!(matches!(got, Err(RuntimeError::NotFound { .. })), "{got:?}");
                        continue;
                    };
                    let busy = m.in_flight.is_some() || (hidden && m.hidden.is_some());
                    if busy {
                        prop_assert!(matches!(got, Err(RuntimeError::Busy { .. })), "{got:?}");
                    } else if !table.origins(a).contains(&m.state) {
                        prop_assert!(matches!(got, Err(RuntimeError::NoRule { .. })), "{got:?}");
                    } else {
                        let handle = got.unwrap();
                        m.version += 1;
                        let holder = Some((a, m.state, false, m.version));
                        if hidden { m.hidden = holder } else { m.in_flight = holder }
                        m.state = table.via(a).unwrap_or(m.state);
                        handles.push((handle, i, hidden, m.version));
                    }
                }
                Op::Complete(k) | Op::Fail(k) | Op::Drop(k) if !handles.is_empty() => {
                    let (handle, i, hidden, started) = handles.swap_remove(k % handles.len());
                    // A held object is never removed: the handle of a removed
                    // object lost its hold first (healed), and its end is a
                    // conflict that finds no object.
                    let Some(m) = &mut model[i] else {
                        let got = match op {
                            Op::Drop(_) => continue,
                            Op::Complete(_) => handle.complete(),
                            _ => handle.fail(),
                        };
                        prop_assert!(matches!(got, Err(RuntimeError::Conflict { found: None, .. })), "{got:?}");
                        continue;
                    };
                    let slot = if hidden { &mut m.hidden } else { &mut m.in_flight };
                    let current = slot.is_some_and(|h| h.3 == started);
                    match op {
                        Op::Drop(_) => {
                            drop(handle);
                            if current {
                                m.version += 1;
                                slot.as_mut().unwrap().2 = true;
                            }
                        }
                        _ => {
                            let completing = matches!(op, Op::Complete(_));
                            let got = if completing { handle.complete() } else { handle.fail() };
                            if current {
                                prop_assert!(got.is_ok(), "{got:?}");
                                let (a, origin, _, _) = slot.take().unwrap();
                                if !hidden {
                                    m.state = if completing { table.target(a, origin) } else { origin };
                                }
                                m.version += 1;
                            } else {
                                prop_assert!(matches!(got, Err(RuntimeError::Conflict { .. })), "{got:?}");
                            }
                        }
                    }
                }
                Op::Heal(i) | Op::ReleaseHidden(i) => {
                    let hidden = matches!(op, Op::ReleaseHidden(_));
                    let Some(m) = &mut model[i] else {
                        let got = rt.get(object(i));
                        prop_assert!(matches!(got, Err(RuntimeError::NotFound { .. })), "{got:?}");
                        continue;
                    };
                    let record = rt.get(object(i)).unwrap();
                    let healer = Actor::new("healer");
                    let got = if hidden {
                        rt.release_hidden(object(i), &record, &healer)
                    } else {
                        rt.roll_back(object(i), &record, &healer)
                    };
                    let slot = if hidden { &mut m.hidden } else { &mut m.in_flight };
                    match slot.take() {
                        Some((_, origin, _, _)) => {
                            prop_assert!(got.is_ok(), "{got:?}");
                            if !hidden {
                                m.state = origin;
                            }
                            m.version += 1;
                        }
                        None => prop_assert!(matches!(got, Err(RuntimeError::NotInFlight { .. })), "{got:?}"),
                    }
                }
                Op::Remove(i) => {
                    let got = rt.remove(object(i), &actor);
                    match &model[i] {
                        None => prop_assert!(matches!(got, Err(RuntimeError::NotFound { .. })), "{got:?}"),
                        Some(m) if m.in_flight.is_some() || m.hidden.is_some() => {
                            prop_assert!(matches!(got, Err(RuntimeError::Busy { .. })), "{got:?}");
                        }
                        Some(m) if !table.removable(m.state) => {
                            prop_assert!(matches!(got, Err(RuntimeError::NotRemovable { .. })), "{got:?}");
                        }
                        Some(m) => {
                            let entry = got.unwrap();
                            prop_assert_eq!(entry.version, m.version + 1);
                            removed_at[i] = Some(entry.version);
                            model[i] = None;
                        }
                    }
                }
                Op::Create(i) => {
                    let got = rt.create(object(i), &actor);
                    match &model[i] {
                        Some(_) => prop_assert!(matches!(got, Err(RuntimeError::Exists { .. })), "{got:?}"),
                        None => {
                            // Numbered after the removal: no version of the
                            // removed object is one of the new.
                            let version = removed_at[i].map_or(1, |v| v + 1);
                            prop_assert_eq!(got.unwrap().version, version);
                            model[i] = Some(Model { state: machine.initial(), version, in_flight: None, hidden: None });
                        }
                    }
                }
                _ => {}
            }
            for (i, m) in model.iter().enumerate() {
                let Some(m) = m else {
                    let got = rt.get(object(i));
                    prop_assert!(matches!(got, Err(RuntimeError::NotFound { .. })), "{got:?}");
                    prop_assert!(rt.history(object(i)).unwrap().is_empty());
                    continue;
                };
                let r = rt.get(object(i)).unwrap();
                let holder = |h: Option<Box<fsm_runtime::Holder>>| h.map(|h| (h.action, h.origin, h.abandoned, h.version));
                let seen = Model {
                    state: r.state,
                    version: r.version,
                    in_flight: holder(r.in_flight),
                    hidden: holder(r.hidden),
                };
                prop_assert_eq!(seen, *m, "object {}", i);
            }
        }
        drop(handles);
        for i in 0..OBJECTS {
            check_history(&machine, &rt.history(object(i)).unwrap()).unwrap();
        }
    }
}
