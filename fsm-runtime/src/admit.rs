//! Admission: every check an action must pass before it starts, in the order the
//! refusals are reported.

use fsm_core::{ActionId, GuardId, Machine, Rule, StateId};

use crate::{Actor, ActorName, Expected, ObjectId, Record, Runtime, RuntimeError, Store};

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

/// Why a start was refused, as found on the record: ids and copies, no names. It
/// is decided where the store may hold a lock, and becomes a [`RuntimeError`],
/// with the names its message needs, only once the store let go
/// ([`Refusal::error`]). A refusal thus allocates nothing while the object is
/// locked, and a start's result stays small on the way out of the store.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Refusal {
    /// The object does not exist.
    NotFound,
    /// The start asked for a version the object is not at.
    VersionMismatch {
        expected: u64,
        found: u64,
        state: StateId,
    },
    /// An action holds the object.
    Busy {
        state: StateId,
        action: ActionId,
        holder: ActorName,
        abandoned: bool,
    },
    /// The table has no rule for the action from the state.
    NoRule { action: ActionId, state: StateId },
    /// The actor holds none of the action's roles.
    MissingRole { action: ActionId },
    /// The action moves the object out of a state the actor does not own, or
    /// (`removal`) the actor removes it in one.
    NotOwner { state: StateId, removal: bool },
    /// A guard said no.
    Guard { action: ActionId, guard: usize },
    /// A removal: the state allows none.
    NotRemovable { state: StateId },
    /// A removal: the actor holds none of the roles the state's `remove` names.
    MayNotRemove { state: StateId },
    /// The object moved on from the record the start was decided on.
    Conflict {
        expected: Option<Expected>,
        found: Option<Expected>,
    },
}

impl Refusal {
    /// The refusal as the runtime reports it, with the names of what it involves.
    #[cold]
    pub(crate) fn error<S: Store>(
        self,
        runtime: &Runtime<S>,
        id: ObjectId,
        actor: &Actor,
    ) -> RuntimeError {
        let machine = runtime.machine();
        let state_name = |s: StateId| machine.state(s).name.to_string();
        let action_name = |a: ActionId| machine.action(a).name.to_string();
        match self {
            Refusal::NotFound => RuntimeError::NotFound { id },
            Refusal::VersionMismatch {
                expected,
                found,
                state,
            } => RuntimeError::VersionMismatch {
                id,
                expected,
                found,
                state: state_name(state),
            },
            Refusal::Busy {
                state,
                action,
                holder,
                abandoned,
            } => RuntimeError::Busy {
                id,
                state: state_name(state),
                action: action_name(action),
                holder: holder.as_str().to_owned(),
                abandoned,
            },
            Refusal::NoRule { action, state } => RuntimeError::NoRule {
                id,
                refused: machine.refusal(action, state),
            },
            Refusal::MissingRole { action } => RuntimeError::MissingRole {
                actor: actor.name().to_owned(),
                action: action_name(action),
                roles: machine
                    .action(action)
                    .roles
                    .iter()
                    .map(|r| r.to_string())
                    .collect(),
            },
            Refusal::NotOwner { state, removal } => RuntimeError::NotOwner {
                id,
                actor: actor.name().to_owned(),
                state: state_name(state),
                owner: machine
                    .state(state)
                    .owner
                    .as_deref()
                    .unwrap_or_default()
                    .to_owned(),
                removal,
            },
            Refusal::Guard { action, guard } => {
                let guard = &machine.guards()[guard];
                RuntimeError::Guard {
                    id,
                    action: action_name(action),
                    guard: guard.name.to_string(),
                    description: guard.description.to_string(),
                }
            }
            Refusal::NotRemovable { state } => RuntimeError::NotRemovable {
                id,
                state: state_name(state),
                removable: (machine.states().iter())
                    .filter(|s| s.remove.is_some())
                    .map(|s| s.name.to_string())
                    .collect(),
            },
            Refusal::MayNotRemove { state } => RuntimeError::MayNotRemove {
                id,
                actor: actor.name().to_owned(),
                state: state_name(state),
                roles: (machine.state(state).remove.as_deref().unwrap_or_default())
                    .iter()
                    .map(|r| r.to_string())
                    .collect(),
            },
            Refusal::Conflict { expected, found } => runtime.conflict(id, expected, found),
        }
    }
}

/// The checks of a removal, against the record as read (at `version`, if
/// given): no action holds the object, its state allows removal to one of the
/// actor's roles, and the actor owns the state if it has an owner
/// ([`State::may_remove`](fsm_core::State::may_remove), whose refusal this
/// says the half of).
pub(crate) fn removable(
    machine: &Machine,
    actor: &Actor,
    record: &Record,
    version: Option<u64>,
) -> Result<(), Refusal> {
    let state = record.state;
    if let Some(expected) = version.filter(|&v| v != record.version) {
        return Err(Refusal::VersionMismatch {
            expected,
            found: record.version,
            state,
        });
    }
    if let Some(holder) = record.in_flight.as_ref().or(record.hidden.as_ref()) {
        return Err(Refusal::Busy {
            state,
            action: holder.action,
            holder: holder.actor,
            abandoned: holder.abandoned,
        });
    }
    let def = machine.state(state);
    let Some(roles) = &def.remove else {
        return Err(Refusal::NotRemovable { state });
    };
    if def.may_remove(|r| actor.has_role(r)) {
        return Ok(());
    }
    Err(match &def.owner {
        Some(owner) if roles.is_empty() || roles.contains(owner) => Refusal::NotOwner {
            state,
            removal: true,
        },
        _ => Refusal::MayNotRemove { state },
    })
}

/// The checks of a start, against the record as read: the object is not busy,
/// the table has a rule for the action from its state, the actor holds one of the
/// action's roles and owns the state (when the action moves the object), and every
/// guard agrees. The rule the start takes, or the first refusal.
#[inline(always)]
pub(crate) fn admit(
    machine: &Machine,
    guards: &[GuardFn],
    id: &ObjectId,
    actor: &Actor,
    action: ActionId,
    record: &Record,
    proposed: Option<&str>,
) -> Result<Rule, Refusal> {
    let def = machine.action(action);
    // A hidden action excludes another hidden one; a user's action may start
    // beside it. A visible action in flight excludes everything.
    let hidden = if def.hidden {
        record.hidden.as_ref()
    } else {
        None
    };
    if let Some(holder) = record.in_flight.as_ref().or(hidden) {
        return Err(Refusal::Busy {
            state: record.state,
            action: holder.action,
            holder: holder.actor,
            abandoned: holder.abandoned,
        });
    }
    let Some(rule) = machine.rule(action, record.state) else {
        return Err(Refusal::NoRule {
            action,
            state: record.state,
        });
    };
    if !def.roles.is_empty() && !def.roles.iter().any(|r| actor.has_role(r)) {
        return Err(Refusal::MissingRole { action });
    }
    // The owner alone moves the object out of its state; an action that changes
    // no state (Mizar's `update_bouncers`) is governed by its roles alone.
    if rule.changes_state
        && let Some(owner) = &machine.state(record.state).owner
        && !actor.has_role(owner)
    {
        return Err(Refusal::NotOwner {
            state: record.state,
            removal: false,
        });
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
                return Err(Refusal::Guard { action, guard: g });
            }
        }
    }
    Ok(rule)
}
