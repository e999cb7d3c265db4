//! XState v5: a machine config as JSON, for `createMachine(config)`.

use fsm_model::{ActionId, Machine, Target};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value, json};

use crate::{ExportError, child, done_event, entries, failed_event, origins_in_spec_order};

/// A JSON object whose members keep the order they were put in (serde_json's
/// `Map` sorts them): states in the spec's order, transitions in the
/// table's.
enum Ordered {
    Object(Vec<(String, Ordered)>),
    Value(Value),
}

impl Serialize for Ordered {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Ordered::Value(value) => value.serialize(serializer),
            Ordered::Object(members) => {
                let mut map = serializer.serialize_map(Some(members.len()))?;
                for (key, value) in members {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
        }
    }
}

/// `machine` as an XState v5 machine config (JSON, for `createMachine`), under
/// the contract in the crate's documentation: the machine's `id` is its name,
/// states keep their names (and the spec's order), a transition state is a
/// compound state with a child per way in, and a state named by steps
/// (`active.playing`) is a child of compound states (`active`).
///
/// # Errors
///
/// A name XState would read as something else ([`ExportError`]).
pub fn xstate(m: &Machine) -> Result<String, ExportError> {
    crate::names::for_xstate(m)?;
    let id = m.name();
    let at = |path: &str| format!("#{id}.{path}");
    // The machine's initial state, as the path each compound state on it
    // starts along.
    let initial: Vec<&str> = m.state(m.initial()).name.split('.').collect();
    let mut states = Vec::new();
    for s in m.state_ids() {
        let state = m.state(s);
        let mut node = Vec::new();
        if let Some(d) = &state.description {
            node.push(("description".into(), Ordered::Value(json!(d.as_ref()))));
        }
        let mut meta = Map::new();
        meta.insert("transition".into(), json!(state.is_transition()));
        if let Some(owner) = &state.owner {
            meta.insert("owner".into(), json!(owner.as_ref()));
        }
        // `true`: anyone may remove an object here; else the roles that may.
        match state.remove.as_deref() {
            None => {}
            Some([]) => {
                meta.insert("remove".into(), json!(true));
            }
            Some(roles) => {
                meta.insert("remove".into(), names(roles));
            }
        }
        if !state.persisted {
            meta.insert("persisted".into(), json!(false));
        }
        if let Some(deadline) = state.deadline {
            meta.insert("deadline_seconds".into(), json!(deadline.as_secs_f64()));
        }
        if !state.renamed_from.is_empty() {
            meta.insert("renamed_from".into(), names(&state.renamed_from));
        }
        if state.terminal {
            node.push(("type".into(), Ordered::Value(json!("final"))));
        }
        let mut on = Vec::new();
        let mut in_place = Vec::new();
        for rule in m.rules_from(s) {
            let event = m.action(rule.action).name.to_string();
            if !rule.changes_state {
                in_place.push(action_meta(m, rule.action));
                continue;
            }
            let target = match rule.via {
                Some(via) => at(&format!(
                    "{}.{}",
                    m.state(via).name,
                    child(m, via, rule.action, s)
                )),
                None => at(&m.state(rule.target).name),
            };
            let mut transition = vec![("target".into(), Ordered::Value(json!(target)))];
            if let Some(d) = &m.action(rule.action).description {
                transition.push(("description".into(), Ordered::Value(json!(d.as_ref()))));
            }
            transition.push(("meta".into(), Ordered::Value(action_meta(m, rule.action))));
            on.push((event, Ordered::Object(transition)));
        }
        if !in_place.is_empty() {
            meta.insert("in_place".into(), Value::Array(in_place));
        }
        if state.is_transition() {
            let ways = entries(m, s);
            if let Some(first) = ways.first() {
                let initial = child(m, s, first.action, first.origin);
                node.push(("initial".into(), Ordered::Value(json!(initial))));
            }
            let children = ways
                .iter()
                .map(|way| {
                    let ends = Ordered::Object(vec![
                        (
                            done_event(m, way.action),
                            Ordered::Value(json!({ "target": at(&m.state(way.target).name) })),
                        ),
                        (
                            failed_event(m, way.action),
                            Ordered::Value(json!({ "target": at(&m.state(way.origin).name) })),
                        ),
                    ]);
                    let name = child(m, s, way.action, way.origin);
                    (name, Ordered::Object(vec![("on".into(), ends)]))
                })
                .collect();
            node.push(("states".into(), Ordered::Object(children)));
        }
        if !on.is_empty() {
            node.push(("on".into(), Ordered::Object(on)));
        }
        node.push(("meta".into(), Ordered::Value(Value::Object(meta))));
        let path: Vec<&str> = state.name.split('.').collect();
        nest(&mut states, &path, Ordered::Object(node));
    }
    let states = nested(states, &initial);
    let mut machine = vec![("id".into(), Ordered::Value(json!(id)))];
    if let Some(d) = m.description() {
        machine.push(("description".into(), Ordered::Value(json!(d))));
    }
    machine.push(("initial".into(), Ordered::Value(json!(initial[0]))));
    // Roles, guards and actions in the spec's order, so that the table comes
    // back the same (an action's id is its place in the order).
    let roles = m.roles().iter().map(|r| {
        let description = json!(r.description.as_deref());
        (r.name.to_string(), Ordered::Value(description))
    });
    let guards = m.guards().iter().map(|g| {
        let described = match &g.cel {
            None => json!(g.description.as_ref()),
            Some(cel) => json!({ "description": g.description.as_ref(), "cel": cel.as_ref() }),
        };
        (g.name.to_string(), Ordered::Value(described))
    });
    let actions = m.action_ids().map(|a| m.action(a).name.as_ref());
    let mut meta = vec![
        ("roles".into(), Ordered::Object(roles.collect())),
        ("guards".into(), Ordered::Object(guards.collect())),
        (
            "actions".into(),
            Ordered::Value(json!(actions.collect::<Vec<_>>())),
        ),
    ];
    // The origins of each action that lists them in another order than the
    // states' (the transitions come state by state).
    let origins: Vec<(String, Ordered)> = (m.action_ids())
        .filter_map(|a| {
            let origins = origins_in_spec_order(m, a)?;
            Some((m.action(a).name.to_string(), Ordered::Value(json!(origins))))
        })
        .collect();
    if !origins.is_empty() {
        meta.push(("origins".into(), Ordered::Object(origins)));
    }
    meta.push((
        "single_mutator".into(),
        Ordered::Value(json!(m.single_mutator())),
    ));
    machine.push(("meta".into(), Ordered::Object(meta)));
    machine.push(("states".into(), states));
    let mut out =
        serde_json::to_string_pretty(&Ordered::Object(machine)).expect("a JSON value serializes");
    out.push('\n');
    Ok(out)
}

/// The states of one level, by name: a table's state, or a compound state
/// that holds those whose names go on from its own (`active` holds
/// `active.playing`).
enum Level {
    State(Ordered),
    Compound(Vec<(String, Level)>),
}

/// Puts the state at `path` (its name's steps) with its `node` into `level`.
fn nest(level: &mut Vec<(String, Level)>, path: &[&str], node: Ordered) {
    let [first, rest @ ..] = path else { return };
    if rest.is_empty() {
        level.push(((*first).to_owned(), Level::State(node)));
        return;
    }
    let at = match level.iter().position(|(name, _)| name == first) {
        Some(at) => at,
        None => {
            level.push(((*first).to_owned(), Level::Compound(Vec::new())));
            level.len() - 1
        }
    };
    if let Level::Compound(children) = &mut level[at].1 {
        nest(children, rest, node);
    }
    // (A state that is also another's parent is refused before: see
    // `names::for_xstate`.)
}

/// `level` as XState's `states`: a compound state starts at its child on
/// the path `initial` (the machine's initial state), else at its first.
fn nested(level: Vec<(String, Level)>, initial: &[&str]) -> Ordered {
    let members = (level.into_iter())
        .map(|(name, level)| {
            let node = match level {
                Level::State(node) => node,
                Level::Compound(children) => {
                    let on_path = initial.first() == Some(&name.as_str());
                    let inner = if on_path { &initial[1..] } else { &[][..] };
                    let first = (inner.first().copied())
                        .filter(|first| children.iter().any(|(c, _)| c == first))
                        .unwrap_or(children[0].0.as_str())
                        .to_owned();
                    Ordered::Object(vec![
                        ("initial".into(), Ordered::Value(json!(first))),
                        ("states".into(), nested(children, inner)),
                    ])
                }
            };
            (name, node)
        })
        .collect();
    Ordered::Object(members)
}

/// What an action carries besides its moves: roles, guards, hidden, deadline,
/// description, earlier names, and whether it goes back to its origin.
fn action_meta(m: &Machine, a: ActionId) -> Value {
    let action = m.action(a);
    let mut meta = Map::new();
    meta.insert("action".into(), json!(action.name.as_ref()));
    if !action.roles.is_empty() {
        let roles: Vec<&str> = action.roles.iter().map(|r| r.as_ref()).collect();
        meta.insert("roles".into(), json!(roles));
    }
    if !action.guards.is_empty() {
        meta.insert("guards".into(), json!(m.guard_names(a)));
    }
    if action.hidden {
        meta.insert("hidden".into(), json!(true));
    }
    if let Some(deadline) = action.deadline {
        meta.insert("deadline_seconds".into(), json!(deadline.as_secs_f64()));
    }
    if let Some(d) = &action.description {
        meta.insert("description".into(), json!(d.as_ref()));
    }
    if !action.renamed_from.is_empty() {
        meta.insert("renamed_from".into(), names(&action.renamed_from));
    }
    if action.via.is_some() && action.target == Target::Origin {
        meta.insert("to_origin".into(), json!(true));
    }
    Value::Object(meta)
}

/// A list of names (earlier names) as a JSON array.
fn names(names: &[fsm_model::Text]) -> Value {
    json!(names.iter().map(|n| n.as_ref()).collect::<Vec<&str>>())
}
