//! Objects and history entries as the API writes them: states and actions by name.

use fsm_core::Machine;
use fsm_runtime::{Holder, Record, rfc3339};
use serde_json::{Map, Value, json};

/// A holder, with its deadline (from the spec) and whether it is past it.
fn holder_json(m: &Machine, h: &Holder, state: fsm_core::StateId) -> Value {
    let deadline = m.deadline(h.action, state);
    let overdue = deadline.is_some_and(|d| h.since + d < std::time::SystemTime::now());
    json!({
        "action": m.action(h.action).name.as_ref(),
        "origin": m.state(h.origin).name.as_ref(),
        "actor": h.actor.as_ref(),
        "since": rfc3339(h.since),
        "fence": h.version,
        "abandoned": h.abandoned,
        "deadline_seconds": deadline.map(|d| d.as_secs_f64()),
        "overdue": overdue,
        // The data its start proposed, which its completion writes.
        "proposed": h.proposed.as_deref().and_then(|d| serde_json::from_str::<Value>(d).ok()),
    })
}

/// A history entry as the API shows it (in a history, and in a watch event).
pub fn entry_json(m: &Machine, e: &fsm_runtime::Entry) -> Map<String, Value> {
    let Value::Object(map) = json!({
        "version": e.version,
        "kind": format!("{:?}", e.kind),
        "action": e.action.map(|a| m.action(a).name.to_string()),
        "from": m.state(e.from).name.as_ref(),
        "to": m.state(e.to).name.as_ref(),
        "actor": e.actor.as_ref(),
        "at": rfc3339(e.at),
    }) else {
        unreachable!("a JSON object literal")
    };
    map
}

/// An object as the API shows it: states and actions by name.
pub fn object_json(m: &Machine, id: &str, r: &Record) -> Value {
    json!({
        "id": id,
        "machine": m.name(),
        "state": m.state(r.state).name.as_ref(),
        "version": r.version,
        "changed_at": rfc3339(r.changed_at),
        // Stored as the API received it: JSON.
        "data": r.data.as_deref().and_then(|d| serde_json::from_str::<Value>(d).ok()).unwrap_or(Value::Null),
        "in_flight": r.in_flight.as_ref().map(|h| holder_json(m, h, r.state)),
        "hidden": r.hidden.as_ref().map(|h| holder_json(m, h, r.state)),
    })
}
