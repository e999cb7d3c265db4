//! Admission: every check an action must pass before it starts, in the order the
//! refusals are reported.

use fsm_core::{ActionId, GuardId, Machine, Rule};

use crate::write::Slot;
use crate::{Actor, ObjectId, Record, RuntimeError};

/// What a guard sees when it decides.
#[derive(Debug)]
#[non_exhaustive]
pub struct GuardContext<'a> {
    /// The machine.
    pub machine: &'a Machine,
    /// The object.
    pub id: &'a ObjectId,
    /// Its record as read before the start.
    pub record: &'a Record,
    /// The action asked for.
    pub action: ActionId,
    /// Who asks.
    pub actor: &'a Actor,
    /// The data the action proposes to leave the object with (JSON text), when it
    /// was started with [`Runtime::start_changing`](crate::Runtime::start_changing):
    /// a guard that sees both this and `record.data` checks a change of data, the
    /// way a Kubernetes transition rule sees `self` and `oldSelf`.
    pub proposed: Option<&'a str>,
}

/// A guard's implementation: whether the action may start.
pub(crate) type GuardFn = Box<dyn Fn(&GuardContext<'_>) -> bool + Send + Sync>;

/// The checks of a start, against the record as read: the object is not busy,
/// the table has a rule for the action from its state, the actor holds one of the
/// action's roles and owns the state (when the action moves the object), and every
/// guard agrees. The rule the start takes, or the first refusal.
pub(crate) fn admit(
    machine: &Machine,
    guards: &[GuardFn],
    id: &ObjectId,
    actor: &Actor,
    action: ActionId,
    record: &Record,
    proposed: Option<&str>,
) -> Result<Rule, RuntimeError> {
    let state = machine.state(record.state);
    let def = machine.action(action);
    // A hidden action excludes another hidden one; a user's action may start
    // beside it. A visible action in flight excludes everything.
    let busy = Slot::Visible
        .get(record)
        .or_else(|| def.hidden.then(|| Slot::Hidden.get(record)).flatten());
    if let Some(holder) = busy {
        return Err(RuntimeError::Busy {
            id: id.clone(),
            state: state.name.to_string(),
            action: machine.action(holder.action).name.to_string(),
            holder: holder.actor.to_string(),
            abandoned: holder.abandoned,
        });
    }
    let Some(rule) = machine.rule(action, record.state) else {
        return Err(RuntimeError::NoRule {
            id: id.clone(),
            refused: machine.refusal(action, record.state),
        });
    };
    if !def.roles.is_empty() && !def.roles.iter().any(|r| actor.has_role(r)) {
        return Err(RuntimeError::MissingRole {
            actor: actor.name().to_owned(),
            action: def.name.to_string(),
            roles: def.roles.iter().map(|r| r.to_string()).collect(),
        });
    }
    // The owner alone moves the object out of its state; an action that changes
    // no state (Mizar's `update_bouncers`) is governed by its roles alone.
    if let Some(owner) = state.owner.as_ref().filter(|_| rule.changes_state) {
        if !actor.has_role(owner) {
            return Err(RuntimeError::NotOwner {
                id: id.clone(),
                actor: actor.name().to_owned(),
                state: state.name.to_string(),
                owner: owner.to_string(),
            });
        }
    }
    let cx = GuardContext {
        machine,
        id,
        record,
        action,
        actor,
        proposed,
    };
    for &GuardId(g) in def.guards.iter() {
        if !(guards[g])(&cx) {
            let guard = &machine.guards()[g];
            return Err(RuntimeError::Guard {
                id: id.clone(),
                action: def.name.to_string(),
                guard: guard.name.to_string(),
                description: guard.description.to_string(),
            });
        }
    }
    Ok(rule)
}
