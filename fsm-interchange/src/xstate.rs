//! XState v5: a machine config as JSON, for `createMachine(config)`.

use fsm_model::{ActionId, Machine};
use serde_json::{Map, Value, json};

use crate::{ExportError, child, done_event, entries, failed_event};

/// `machine` as an XState v5 machine config (JSON, for `createMachine`), under
/// the contract in the crate's documentation: the machine's `id` is its name,
/// states keep their names, a transition state is a compound state with a child
/// per way in.
///
/// # Errors
///
/// A name XState would read as something else ([`ExportError`]).
pub fn xstate(m: &Machine) -> Result<String, ExportError> {
    crate::names::for_xstate(m)?;
    let id = m.name();
    let at = |path: &str| format!("#{id}.{path}");
    let mut states = Map::new();
    for s in m.state_ids() {
        let state = m.state(s);
        let mut node = Map::new();
        if let Some(d) = &state.description {
            node.insert("description".into(), json!(d.as_ref()));
        }
        let mut meta = Map::new();
        meta.insert("transition".into(), json!(state.is_transition()));
        if let Some(owner) = &state.owner {
            meta.insert("owner".into(), json!(owner.as_ref()));
        }
        if !state.persisted {
            meta.insert("persisted".into(), json!(false));
        }
        if let Some(deadline) = state.deadline {
            meta.insert("deadline_seconds".into(), json!(deadline.as_secs_f64()));
        }
        if state.terminal {
            node.insert("type".into(), json!("final"));
        }
        let mut on = Map::new();
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
            let mut transition = Map::new();
            transition.insert("target".into(), json!(target));
            if let Some(d) = &m.action(rule.action).description {
                transition.insert("description".into(), json!(d.as_ref()));
            }
            transition.insert("meta".into(), action_meta(m, rule.action));
            on.insert(event, Value::Object(transition));
        }
        if !in_place.is_empty() {
            meta.insert("in_place".into(), Value::Array(in_place));
        }
        if state.is_transition() {
            let mut children = Map::new();
            let ways = entries(m, s);
            for way in &ways {
                let name = child(m, s, way.action, way.origin);
                children.insert(
                    name,
                    json!({
                        "on": {
                            done_event(m, way.action): { "target": at(&m.state(way.target).name) },
                            failed_event(m, way.action): { "target": at(&m.state(way.origin).name) },
                        }
                    }),
                );
            }
            if let Some(first) = ways.first() {
                node.insert(
                    "initial".into(),
                    json!(child(m, s, first.action, first.origin)),
                );
            }
            node.insert("states".into(), Value::Object(children));
        }
        if !on.is_empty() {
            node.insert("on".into(), Value::Object(on));
        }
        node.insert("meta".into(), Value::Object(meta));
        states.insert(state.name.to_string(), Value::Object(node));
    }
    let mut machine = Map::new();
    machine.insert("id".into(), json!(id));
    machine.insert("initial".into(), json!(m.state(m.initial()).name.as_ref()));
    if let Some(d) = m.description() {
        machine.insert("description".into(), json!(d));
    }
    let roles: Map<String, Value> = m
        .roles()
        .iter()
        .map(|r| (r.name.to_string(), json!(r.description.as_deref())))
        .collect();
    let guards: Map<String, Value> = m
        .guards()
        .iter()
        .map(|g| (g.name.to_string(), json!(g.description.as_ref())))
        .collect();
    machine.insert(
        "meta".into(),
        json!({ "roles": roles, "guards": guards, "single_mutator": m.single_mutator() }),
    );
    machine.insert("states".into(), Value::Object(states));
    let mut out =
        serde_json::to_string_pretty(&Value::Object(machine)).expect("a JSON value serializes");
    out.push('\n');
    Ok(out)
}

/// What an action carries besides its moves: roles, guards, hidden, deadline.
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
    Value::Object(meta)
}
