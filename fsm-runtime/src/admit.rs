//! Admission: every check an action must pass before it starts, in the order the
//! refusals are reported.

use fsm_core::{ActionId, GuardId, Machine, Rule};

use crate::{Actor, Holder, ObjectId, Record, RuntimeError};

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
///
/// Every start passes here, most of them admitted: the refusals, which build
/// their messages, are out of line.
pub(crate) fn admit(
    machine: &Machine,
    guards: &[GuardFn],
    id: &ObjectId,
    actor: &Actor,
    action: ActionId,
    record: &Record,
    proposed: Option<&str>,
) -> Result<Rule, RuntimeError> {
    let def = machine.action(action);
    // A hidden action excludes another hidden one; a user's action may start
    // beside it. A visible action in flight excludes everything.
    let hidden = if def.hidden {
        record.hidden.as_ref()
    } else {
        None
    };
    if let Some(holder) = record.in_flight.as_ref().or(hidden) {
        return Err(busy(machine, id, record, holder));
    }
    let Some(rule) = machine.rule(action, record.state) else {
        return Err(no_rule(machine, id, action, record));
    };
    if !def.roles.is_empty() && !def.roles.iter().any(|r| actor.has_role(r)) {
        return Err(missing_role(machine, actor, action));
    }
    // The owner alone moves the object out of its state; an action that changes
    // no state (Mizar's `update_bouncers`) is governed by its roles alone.
    if rule.changes_state {
        if let Some(owner) = &machine.state(record.state).owner {
            if !actor.has_role(owner) {
                return Err(not_owner(machine, id, actor, record, owner));
            }
        }
    }
    if !def.guards.is_empty() {
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
                return Err(refused_by_guard(machine, id, action, g));
            }
        }
    }
    Ok(rule)
}

#[cold]
fn busy(machine: &Machine, id: &ObjectId, record: &Record, holder: &Holder) -> RuntimeError {
    RuntimeError::Busy {
        id: id.clone(),
        state: machine.state(record.state).name.to_string(),
        action: machine.action(holder.action).name.to_string(),
        holder: holder.actor.to_string(),
        abandoned: holder.abandoned,
    }
}

#[cold]
fn no_rule(machine: &Machine, id: &ObjectId, action: ActionId, record: &Record) -> RuntimeError {
    RuntimeError::NoRule {
        id: id.clone(),
        refused: machine.refusal(action, record.state),
    }
}

#[cold]
fn missing_role(machine: &Machine, actor: &Actor, action: ActionId) -> RuntimeError {
    let def = machine.action(action);
    RuntimeError::MissingRole {
        actor: actor.name().to_owned(),
        action: def.name.to_string(),
        roles: def.roles.iter().map(|r| r.to_string()).collect(),
    }
}

#[cold]
fn not_owner(
    machine: &Machine,
    id: &ObjectId,
    actor: &Actor,
    record: &Record,
    owner: &str,
) -> RuntimeError {
    RuntimeError::NotOwner {
        id: id.clone(),
        actor: actor.name().to_owned(),
        state: machine.state(record.state).name.to_string(),
        owner: owner.to_string(),
    }
}

#[cold]
fn refused_by_guard(machine: &Machine, id: &ObjectId, action: ActionId, g: usize) -> RuntimeError {
    let guard = &machine.guards()[g];
    RuntimeError::Guard {
        id: id.clone(),
        action: machine.action(action).name.to_string(),
        guard: guard.name.to_string(),
        description: guard.description.to_string(),
    }
}
