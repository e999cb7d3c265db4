//! Why the runtime or a store refused.

use fsm_core::{RuleError, UnknownAction, UnknownState};

use crate::{Fence, ObjectId, Record, Revocation};

/// A store could not carry out a write or a read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The write expected a state and version (or no object, for a create) that no
    /// longer hold; `found` is what the store holds now (`None`: no such object).
    #[error("409 Conflict on {id}: the object changed since it was read")]
    Conflict {
        /// The object.
        id: ObjectId,
        /// What the store holds now.
        found: Option<Box<Record>>,
    },
    /// A creation numbered otherwise than the id's next object must be:
    /// `version` is the one its first entry takes. That is 1 for an id that
    /// never had an object, and the version after its removal's for one whose
    /// object was removed ([`Store::remove`](crate::Store::remove)), so that
    /// no version of a removed object is ever one of a new object of its id,
    /// and no `If-Match` written for the old object matches the new one. The
    /// runtime creates again at `version`; a caller never sees this.
    #[error("409 Conflict on {id}: its next object is created at version {version}")]
    CreateAt {
        /// The object.
        id: ObjectId,
        /// The version the creation must write.
        version: u64,
    },
    /// What the store holds under `key` is not a record or entry of this machine:
    /// not what fsm writes, or a state or action the spec no longer has (a rename
    /// needs `renamed_from` in the spec). Retrying cannot help.
    #[error("{key} cannot be read: {reason}")]
    Unreadable {
        /// Where, in the store's own terms (an etcd key).
        key: String,
        /// Why.
        reason: String,
    },
    /// The store cannot serve this machine (it is bound to another one, or holds
    /// objects the machine cannot read).
    #[error("the store cannot serve machine `{machine}`: {reason}")]
    Incompatible {
        /// The machine.
        machine: String,
        /// Why.
        reason: String,
    },
    /// The write is larger than the store takes (etcd's request limit, 1.5 MiB
    /// by default): the object's data, most likely. Nothing was written, and
    /// the same write will never be taken.
    #[error("the write to {id} is larger than the store takes: {message}")]
    TooLarge {
        /// The object written.
        id: ObjectId,
        /// What the store said.
        message: String,
    },
    /// The store itself failed: connection lost, timeout, a server restarting.
    #[error("store unavailable: {message}")]
    Unavailable {
        /// What went wrong, from the backend.
        message: String,
        /// Whether the same request may succeed if tried again. A write that fails
        /// this way was not applied, or was applied whole: never half.
        retryable: bool,
    },
}

impl StoreError {
    /// The refusal of a store to serve `machine` over objects in states or
    /// actions its spec no longer has: `objects`, each as `id (name)`.
    pub fn unreadable_objects(machine: &str, mut objects: Vec<String>) -> StoreError {
        objects.sort();
        StoreError::Incompatible {
            machine: machine.to_owned(),
            reason: format!(
                "objects in states or actions the spec no longer has: {}; declare their old names with `renamed_from`",
                objects.join(", ")
            ),
        }
    }

    /// Whether trying the same request again can help.
    pub fn is_retryable(&self) -> bool {
        match self {
            StoreError::Conflict { .. }
            | StoreError::CreateAt { .. }
            | StoreError::Unreadable { .. }
            | StoreError::Incompatible { .. }
            | StoreError::TooLarge { .. } => false,
            StoreError::Unavailable { retryable, .. } => *retryable,
        }
    }
}

/// Why the runtime refused a request. Every variant names the object, the states by
/// their spec names, and the rule or actor that refused.
///
/// Match on the variants, not on the messages; [`is_retryable`](Self::is_retryable)
/// says whether the same request may succeed later.
///
/// ```
/// use fsm_runtime::{Actor, MemoryStore, Runtime, RuntimeError};
///
/// let vms = Runtime::new(
///     fsm_core::spec::load(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/vm.toml"))?,
///     MemoryStore::new(),
/// )?;
/// let (alice, bob) = (Actor::new("alice"), Actor::new("bob"));
/// vms.create("vm-1", &alice)?;
/// let deploy = vms.start("vm-1", &alice, "deploy")?;
///
/// match vms.start("vm-1", &bob, "deploy") {
///     Err(RuntimeError::Busy { state, action, holder, .. }) => {
///         assert_eq!(state, "DEPLOYING");
///         assert_eq!((action.as_str(), holder.as_str()), ("deploy", "alice"));
///     }
///     other => panic!("{other:?}"),
/// }
/// deploy.complete()?;
///
/// // No rule: the table says what it allows from there instead.
/// let refused = vms.run("vm-1", &bob, "deploy").unwrap_err();
/// assert!(matches!(refused, RuntimeError::NoRule { .. }));
/// assert!(!refused.is_retryable());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// No object with this id.
    #[error("no object {id}")]
    NotFound {
        /// The object.
        id: ObjectId,
    },
    /// `create` of an id that exists.
    #[error("object {id} already exists (in {state})")]
    Exists {
        /// The object.
        id: ObjectId,
        /// Its current state.
        state: String,
    },
    /// The machine has no action of this name.
    #[error(transparent)]
    UnknownAction(#[from] UnknownAction),
    /// The machine has no state of this name (a name given to the
    /// [`Healer`](crate::Healer)).
    #[error(transparent)]
    UnknownState(#[from] UnknownState),
    /// An action is running on the object (it is in a transition state, or holds a
    /// hidden or direct action): OpenvCloud's "Cannot execute action at this time".
    #[error(
        "cannot execute action at this time: {id} is {state} while `{action}` runs ({} by {holder})",
        if *.abandoned { "abandoned" } else { "held" }
    )]
    Busy {
        /// The object.
        id: ObjectId,
        /// Its current state.
        state: String,
        /// The action in flight.
        action: String,
        /// Who started it.
        holder: String,
        /// Whether its handle was dropped without finishing (the healer's case).
        abandoned: bool,
    },
    /// The table has no rule for the action from the object's state.
    #[error("{id}: {refused}")]
    NoRule {
        /// The object.
        id: ObjectId,
        /// What the table says, with the action, the state and where it may start.
        refused: RuleError,
    },
    /// The actor holds none of the roles the action needs.
    #[error("{actor} may not run `{action}`: it needs the role {}", roles.join(" or "))]
    MissingRole {
        /// The actor.
        actor: String,
        /// The action.
        action: String,
        /// The roles that may run it.
        roles: Vec<String>,
    },
    /// The state has an owner and the actor does not hold its role: it may
    /// not move the object out of the state, nor remove it there.
    #[error("{actor} may not {} {state}: it is owned by {owner}", owner_refused(.id, *.removal))]
    NotOwner {
        /// The object.
        id: ObjectId,
        /// The actor.
        actor: String,
        /// The state.
        state: String,
        /// The owner's role.
        owner: String,
        /// Whether the request refused was a removal ([`Runtime::remove`](crate::Runtime::remove)),
        /// not a move out of the state.
        removal: bool,
    },
    /// The object's state allows no removal (the spec's `remove` on a state).
    #[error("{id} cannot be removed in {state}: {}", removable_text(.removable))]
    NotRemovable {
        /// The object.
        id: ObjectId,
        /// Its state.
        state: String,
        /// The states whose objects may be removed, in the spec's order.
        removable: Vec<String>,
    },
    /// The actor holds none of the roles that may remove an object in its state.
    #[error("{actor} may not remove {id} in {state}: it needs the role {}", roles.join(" or "))]
    MayNotRemove {
        /// The object.
        id: ObjectId,
        /// The actor.
        actor: String,
        /// The object's state.
        state: String,
        /// The roles that may remove an object in that state.
        roles: Vec<String>,
    },
    /// A guard of the action said no.
    #[error("guard `{guard}` refused `{action}` on {id}: {description}")]
    Guard {
        /// The object.
        id: ObjectId,
        /// The action.
        action: String,
        /// The guard.
        guard: String,
        /// What the guard requires, from the spec.
        description: String,
    },
    /// The object changed between the read and the write (another actor won the
    /// race, or the healer rolled the action back): `409 Conflict`.
    #[error(
        "409 Conflict: {id} was expected in {expected_state} at version {expected_version}, {}",
        found_text(.found)
    )]
    Conflict {
        /// The object.
        id: ObjectId,
        /// The state the write expected.
        expected_state: String,
        /// The version the write expected.
        expected_version: u64,
        /// The state and version actually found (`None`: the object is gone).
        found: Option<(String, u64)>,
    },
    /// The action's hold on the object was ended by someone else (the healer rolled
    /// it back): its work must stop, and any later step is refused.
    #[error("{id}: `{action}` ({fence}) no longer holds the object: {}", revoked_text(.by))]
    Revoked {
        /// The object.
        id: ObjectId,
        /// The action.
        action: String,
        /// Its fencing token.
        fence: Fence,
        /// Who ended the hold and when, if the history says.
        by: Option<Revocation>,
    },
    /// An action in flight was to be taken up ([`Runtime::resume`](crate::Runtime::resume))
    /// by an actor other than the one who started it.
    #[error(
        "{id}: `{action}` ({fence}) was started by {holder}, not {actor}: only {holder} may end it"
    )]
    NotHolder {
        /// The object.
        id: ObjectId,
        /// The action in flight.
        action: String,
        /// Its fencing token.
        fence: Fence,
        /// Who started it.
        holder: String,
        /// Who asked.
        actor: String,
    },
    /// No action holds the object with this fencing token, and its history names
    /// no start that had it ([`Runtime::resume`](crate::Runtime::resume)).
    #[error("no action holds {id} with {fence}")]
    NoHold {
        /// The object.
        id: ObjectId,
        /// The token asked for.
        fence: Fence,
    },
    /// A start asked for a version of the object that is no longer current (an HTTP
    /// `If-Match` that does not match: `412 Precondition Failed`).
    #[error("{id} is at version {found} (in {state}), not {expected}")]
    VersionMismatch {
        /// The object.
        id: ObjectId,
        /// The version asked for.
        expected: u64,
        /// The version found.
        found: u64,
        /// The state found.
        state: String,
    },
    /// A rollback was asked for a record on which no action (or no hidden action)
    /// is in flight.
    #[error("no {} action is in flight on {id} (in {state}): nothing to roll back", if *.hidden { "hidden" } else { "visible" })]
    NotInFlight {
        /// The object.
        id: ObjectId,
        /// Its state in the record given.
        state: String,
        /// Whether a hidden action was asked for.
        hidden: bool,
    },
    /// A guard the machine names has no implementation (from
    /// [`RuntimeBuilder::build`](crate::RuntimeBuilder::build)).
    #[error(
        "guard `{guard}` of machine `{machine}` has no implementation: add it with `.guard(\"{guard}\", ...)`"
    )]
    MissingGuard {
        /// The machine.
        machine: String,
        /// The guard.
        guard: String,
    },
    /// A guard's CEL expression in the spec does not compile (feature `cel`).
    #[error("guard `{guard}` of machine `{machine}`: its `cel` expression does not compile: {why}")]
    BadGuard {
        /// The machine.
        machine: String,
        /// The guard.
        guard: String,
        /// What the CEL parser said.
        why: String,
    },
    /// A guard implementation was given for a name the machine does not have.
    #[error(
        "machine `{machine}` has no guard `{guard}`{}",
        suggestion.as_ref().map_or(String::new(), |s| format!("; did you mean `{s}`?"))
    )]
    UnknownGuard {
        /// The machine.
        machine: String,
        /// The name given.
        guard: String,
        /// The machine's guard closest to it, if one is close.
        suggestion: Option<String>,
    },
    /// The machine has more states or actions than the runtime numbers: it
    /// keeps a started action's rule with its ids in 32 bits, the last
    /// number kept for "none" (a machine that large could not be loaded:
    /// four billion states take hundreds of gigabytes).
    #[error(
        "machine `{machine}` has {states} states and {actions} actions: the runtime numbers at most {} of each",
        u32::MAX
    )]
    MachineTooLarge {
        /// The machine.
        machine: String,
        /// How many states it has.
        states: usize,
        /// How many actions it has.
        actions: usize,
    },
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
}

impl RuntimeError {
    /// Whether the same request may succeed later: after the running action ends
    /// (`Busy`), after re-reading (`Conflict`), or when the store is back.
    pub fn is_retryable(&self) -> bool {
        match self {
            RuntimeError::Busy { .. } | RuntimeError::Conflict { .. } => true,
            RuntimeError::Store(e) => e.is_retryable(),
            _ => false,
        }
    }
}

fn found_text(found: &Option<(String, u64)>) -> String {
    match found {
        Some((state, version)) => format!("found {state} at version {version}"),
        None => "found no such object".into(),
    }
}

/// What the owner rule refused: `move <id> out of`, or `remove <id> in`.
fn owner_refused(id: &ObjectId, removal: bool) -> String {
    if removal {
        format!("remove {id} in")
    } else {
        format!("move {id} out of")
    }
}

fn removable_text(removable: &[String]) -> String {
    if removable.is_empty() {
        "no state of the machine allows removal".into()
    } else {
        format!("only objects in {} may be removed", removable.join(", "))
    }
}

fn revoked_text(by: &Option<Revocation>) -> String {
    match by {
        Some(r) => format!(
            "revoked by {} at {} (version {})",
            r.by,
            crate::clock::rfc3339(r.at),
            r.version
        ),
        None => "its hold is gone".into(),
    }
}
