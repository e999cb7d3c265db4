//! The runtime proper: admission checks, compare-and-set writes, in-flight handles.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use super::{
    Actor, Clock, Entry, EntryKind, Expected, Holder, ObjectId, Record, RuntimeError, Store,
    StoreError, SystemClock, Watcher, Write,
};
use crate::spec::GuardId;
use crate::{ActionId, Machine, StateId};

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
}

type GuardFn = Box<dyn Fn(&GuardContext<'_>) -> bool + Send + Sync>;

/// An action named for the runtime: an [`ActionId`], the action's name as the spec
/// spells it, or a derived action enum (`VmStateAction::Pause`).
pub trait ActionRef {
    /// The action's id in `machine`.
    fn resolve(&self, machine: &Machine) -> Result<ActionId, RuntimeError>;
}

impl<T: Copy + Into<ActionId>> ActionRef for T {
    fn resolve(&self, _: &Machine) -> Result<ActionId, RuntimeError> {
        Ok((*self).into())
    }
}

impl ActionRef for str {
    fn resolve(&self, machine: &Machine) -> Result<ActionId, RuntimeError> {
        machine
            .find_action(self)
            .ok_or_else(|| RuntimeError::UnknownAction {
                machine: machine.name().to_owned(),
                name: self.to_owned(),
                suggestion: machine.suggest_action(self).map(str::to_owned),
            })
    }
}

impl ActionRef for &str {
    fn resolve(&self, machine: &Machine) -> Result<ActionId, RuntimeError> {
        (**self).resolve(machine)
    }
}

impl ActionRef for String {
    fn resolve(&self, machine: &Machine) -> Result<ActionId, RuntimeError> {
        self.as_str().resolve(machine)
    }
}

/// Builds a [`Runtime`]: the guards' implementations and the clock.
pub struct RuntimeBuilder<S: Store> {
    machine: Machine,
    store: S,
    guards: HashMap<String, GuardFn>,
    clock: Box<dyn Clock>,
}

impl<S: Store> RuntimeBuilder<S> {
    /// Implements the guard `name` of the machine: `check` answers whether the action
    /// may start.
    pub fn guard(
        mut self,
        name: impl Into<String>,
        check: impl Fn(&GuardContext<'_>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.guards.insert(name.into(), Box::new(check));
        self
    }

    /// Reads time from `clock` instead of the system clock.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Box::new(clock);
        self
    }

    /// The runtime, once every guard the machine names has an implementation and
    /// every implementation names a guard of the machine.
    pub fn build(mut self) -> Result<Runtime<S>, RuntimeError> {
        let machine_name = self.machine.name().to_owned();
        if let Some(guard) = self
            .guards
            .keys()
            .find(|g| !self.machine.guards().iter().any(|d| d.name == **g))
        {
            return Err(RuntimeError::UnknownGuard {
                machine: machine_name,
                guard: guard.clone(),
            });
        }
        let mut guards = Vec::new();
        for def in self.machine.guards() {
            let Some(check) = self.guards.remove(def.name.as_ref()) else {
                return Err(RuntimeError::MissingGuard {
                    machine: machine_name,
                    guard: def.name.to_string(),
                });
            };
            guards.push(check);
        }
        Ok(Runtime {
            inner: Arc::new(Inner {
                machine: self.machine,
                store: self.store,
                guards,
                clock: self.clock,
            }),
        })
    }
}

/// The runtime of one machine over one store. Cloning it is cheap and shares both.
///
/// See the [module documentation](super) for what it guarantees.
pub struct Runtime<S: Store = super::MemoryStore> {
    inner: Arc<Inner<S>>,
}

struct Inner<S> {
    machine: Machine,
    store: S,
    guards: Vec<GuardFn>,
    clock: Box<dyn Clock>,
}

impl<S: Store> Clone for Runtime<S> {
    fn clone(&self) -> Self {
        Runtime {
            inner: self.inner.clone(),
        }
    }
}

impl<S: Store> fmt::Debug for Runtime<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("machine", &self.inner.machine.name())
            .finish_non_exhaustive()
    }
}

impl<S: Store> Runtime<S> {
    /// The runtime of `machine` over `store`, for a machine with no guards (see
    /// [`Runtime::builder`] otherwise).
    pub fn new(machine: Machine, store: S) -> Result<Self, RuntimeError> {
        Self::builder(machine, store).build()
    }

    /// A builder, to implement the machine's guards or set the clock.
    pub fn builder(machine: Machine, store: S) -> RuntimeBuilder<S> {
        RuntimeBuilder {
            machine,
            store,
            guards: HashMap::new(),
            clock: Box::new(SystemClock),
        }
    }

    /// The machine.
    pub fn machine(&self) -> &Machine {
        &self.inner.machine
    }

    /// The store, to read from. Writing needs a [`Write`], which only the runtime
    /// makes.
    pub fn store(&self) -> &S {
        &self.inner.store
    }

    /// The current time on the runtime's clock.
    pub fn now(&self) -> std::time::SystemTime {
        self.inner.clock.now()
    }

    /// Creates `id` in the machine's initial state.
    pub fn create(&self, id: impl Into<ObjectId>, actor: &Actor) -> Result<Record, RuntimeError> {
        let id = id.into();
        let initial = self.machine().initial();
        let now = self.now();
        let record = Record {
            state: initial,
            version: 1,
            changed_at: now,
            in_flight: None,
        };
        let entry = Entry {
            version: 1,
            at: now,
            actor: actor.shared_name(),
            kind: EntryKind::Created,
            action: None,
            from: initial,
            to: initial,
        };
        match self.commit(&id, None, record.clone(), entry) {
            Err(RuntimeError::Conflict {
                found: Some((state, _)),
                ..
            }) => Err(RuntimeError::Exists { id, state }),
            Err(e) => Err(e),
            Ok(()) => {
                tracing::debug!(object = %id, actor = actor.name(), "created");
                Ok(record)
            }
        }
    }

    /// The object's record.
    pub fn get(&self, id: impl Into<ObjectId>) -> Result<Record, RuntimeError> {
        let id = id.into();
        self.inner
            .store
            .load(&id)
            .map_err(RuntimeError::Store)?
            .ok_or(RuntimeError::NotFound { id })
    }

    /// The object's state.
    pub fn state(&self, id: impl Into<ObjectId>) -> Result<StateId, RuntimeError> {
        Ok(self.get(id)?.state)
    }

    /// The name of the object's state, as the spec spells it.
    pub fn state_name(&self, id: impl Into<ObjectId>) -> Result<&str, RuntimeError> {
        let state = self.state(id)?;
        Ok(&self.machine().state(state).name)
    }

    /// The object's state as a derived enum (`VmState`).
    pub fn state_as<M: crate::typed::StateMachine>(
        &self,
        id: impl Into<ObjectId>,
    ) -> Result<M, RuntimeError> {
        Ok(M::ALL[self.state(id)?.0])
    }

    /// The object's history, oldest first.
    pub fn history(&self, id: impl Into<ObjectId>) -> Result<Vec<Entry>, RuntimeError> {
        self.inner
            .store
            .history(&id.into())
            .map_err(RuntimeError::Store)
    }

    /// A subscription to every accepted write from now on (see [`Watcher`]).
    pub fn watch(&self) -> Result<Watcher, RuntimeError> {
        self.inner.store.watch().map_err(RuntimeError::Store)
    }

    /// Starts `action` on `id` for `actor`.
    ///
    /// Refused, in this order, if the object is busy (in a transition state or
    /// holding an action), if the table has no such action from its state, if the
    /// actor holds none of the action's roles, if the action changes the state and
    /// the state has an owner whose role the actor lacks, or if a guard says no. Otherwise the object moves into the
    /// action's transition state (an action without one holds the object in its
    /// state), by compare-and-set against the record read: a concurrent change makes
    /// it a [`RuntimeError::Conflict`].
    pub fn start(
        &self,
        id: impl Into<ObjectId>,
        actor: &Actor,
        action: impl ActionRef,
    ) -> Result<InFlight<'_, S>, RuntimeError> {
        let id = id.into();
        let action = action.resolve(self.machine())?;
        let span = tracing::debug_span!(
            "start",
            object = %id,
            action = %self.machine().action(action).name,
            actor = actor.name()
        );
        let _enter = span.enter();
        let record = self.get(id.clone())?;
        if let Err(e) = self.admit(&id, actor, action, &record) {
            tracing::debug!(error = %e, "refused");
            return Err(e);
        }
        let def = self.machine().action(action);
        let to = def.via.unwrap_or(record.state);
        let now = self.now();
        let held = Expected {
            state: to,
            version: record.version + 1,
        };
        let new = Record {
            state: to,
            version: held.version,
            changed_at: now,
            in_flight: Some(Holder {
                action,
                origin: record.state,
                actor: actor.shared_name(),
                since: now,
                abandoned: false,
            }),
        };
        let entry = Entry {
            version: held.version,
            at: now,
            actor: actor.shared_name(),
            kind: EntryKind::Started,
            action: Some(action),
            from: record.state,
            to,
        };
        self.commit(&id, Some(record.expected()), new, entry)?;
        tracing::debug!(version = held.version, "started");
        Ok(InFlight {
            runtime: self,
            id,
            action,
            origin: record.state,
            held,
            actor: actor.shared_name(),
            done: false,
        })
    }

    /// Starts `action` and completes it at once: a move with nothing to wait for.
    pub fn run(
        &self,
        id: impl Into<ObjectId>,
        actor: &Actor,
        action: impl ActionRef,
    ) -> Result<Record, RuntimeError> {
        self.start(id, actor, action)?.complete()
    }

    /// Rolls back the action in flight on `id` (its record as read: `record`) to the
    /// state it started from, as `healer`. The write is a compare-and-set against
    /// `record`, so it never undoes an action that finished meanwhile.
    pub fn roll_back(
        &self,
        id: impl Into<ObjectId>,
        record: &Record,
        healer: &Actor,
    ) -> Result<Record, RuntimeError> {
        let id = id.into();
        let Some(holder) = &record.in_flight else {
            return Err(RuntimeError::Conflict {
                id,
                expected_state: self.name(record.state),
                expected_version: record.version,
                found: Some((self.name(record.state), record.version)),
            });
        };
        let (action, origin) = (holder.action, holder.origin);
        let record = self.write_outcome(
            &id,
            record.expected(),
            action,
            origin,
            EntryKind::Healed,
            healer.shared_name(),
        )?;
        tracing::info!(object = %id, action = %self.machine().action(action).name, "rolled back");
        Ok(record)
    }

    /// Every check of [`Runtime::start`] but the write.
    fn admit(
        &self,
        id: &ObjectId,
        actor: &Actor,
        action: ActionId,
        record: &Record,
    ) -> Result<(), RuntimeError> {
        let m = self.machine();
        let state = m.state(record.state);
        let def = m.action(action);
        if let Some(holder) = &record.in_flight {
            return Err(RuntimeError::Busy {
                id: id.clone(),
                state: state.name.to_string(),
                action: m.action(holder.action).name.to_string(),
                holder: holder.actor.to_string(),
                abandoned: holder.abandoned,
            });
        }
        if !def.origins.contains(&record.state) {
            return Err(RuntimeError::NoRule {
                id: id.clone(),
                action: def.name.to_string(),
                state: state.name.to_string(),
                origins: def.origins.iter().map(|&o| self.name(o)).collect(),
            });
        }
        if !def.roles.is_empty() && !def.roles.iter().any(|r| actor.has_role(r)) {
            return Err(RuntimeError::MissingRole {
                actor: actor.name().to_owned(),
                action: def.name.to_string(),
                roles: def.roles.iter().map(|r| r.to_string()).collect(),
            });
        }
        // The owner alone moves the object out of its state; an action that changes
        // no state (Mizar's `update_bouncers`) is governed by its roles alone.
        if let Some(owner) = state.owner.as_ref().filter(|_| def.changes_state()) {
            if !actor.has_role(owner) {
                return Err(RuntimeError::NotOwner {
                    id: id.clone(),
                    actor: actor.name().to_owned(),
                    state: state.name.to_string(),
                    owner: owner.to_string(),
                });
            }
        }
        let ctx = GuardContext {
            machine: m,
            id,
            record,
            action,
            actor,
        };
        for &GuardId(g) in def.guards.iter() {
            if !(self.inner.guards[g])(&ctx) {
                let guard = &m.guards()[g];
                return Err(RuntimeError::Guard {
                    id: id.clone(),
                    action: def.name.to_string(),
                    guard: guard.name.to_string(),
                    description: guard.description.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Ends the action held at `held`: to `to`, clearing the holder.
    fn write_outcome(
        &self,
        id: &ObjectId,
        held: Expected,
        action: ActionId,
        to: StateId,
        kind: EntryKind,
        actor: Arc<str>,
    ) -> Result<Record, RuntimeError> {
        let now = self.now();
        let record = Record {
            state: to,
            version: held.version + 1,
            changed_at: now,
            in_flight: None,
        };
        let entry = Entry {
            version: record.version,
            at: now,
            actor,
            kind,
            action: Some(action),
            from: held.state,
            to,
        };
        self.commit(id, Some(held), record.clone(), entry)?;
        Ok(record)
    }

    fn commit(
        &self,
        id: &ObjectId,
        expected: Option<Expected>,
        record: Record,
        entry: Entry,
    ) -> Result<(), RuntimeError> {
        let write = Write {
            id: id.clone(),
            expected,
            record,
            entry,
        };
        self.inner.store.commit(write).map_err(|e| match e {
            StoreError::Conflict { id, found } => {
                let (expected_state, expected_version) = match expected {
                    Some(e) => (self.name(e.state), e.version),
                    None => (String::from("(absent)"), 0),
                };
                tracing::debug!(object = %id, "conflict");
                RuntimeError::Conflict {
                    id,
                    expected_state,
                    expected_version,
                    found: found.map(|r| (self.name(r.state), r.version)),
                }
            }
            e => RuntimeError::Store(e),
        })
    }

    fn name(&self, state: StateId) -> String {
        self.machine().state(state).name.to_string()
    }
}

/// An action running on an object, borrowed from its [`Runtime`]. Finish it with
/// [`InFlight::complete`] or [`InFlight::fail`].
///
/// Dropped without either (a forgotten handle, a panic in the action), it records
/// the action as abandoned: the object stays in its transition state, visibly held
/// by an abandoned action, until the healer rolls it back.
#[must_use = "an action in flight must be completed or failed"]
pub struct InFlight<'r, S: Store = super::MemoryStore> {
    runtime: &'r Runtime<S>,
    id: ObjectId,
    action: ActionId,
    origin: StateId,
    held: Expected,
    actor: Arc<str>,
    done: bool,
}

impl<S: Store> fmt::Debug for InFlight<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InFlight")
            .field("id", &self.id)
            .field("action", &self.runtime.machine().action(self.action).name)
            .field("origin", &self.runtime.name(self.origin))
            .field("version", &self.held.version)
            .finish()
    }
}

impl<S: Store> InFlight<'_, S> {
    /// The object.
    pub fn id(&self) -> &ObjectId {
        &self.id
    }

    /// The action.
    pub fn action(&self) -> ActionId {
        self.action
    }

    /// The static state the action started from.
    pub fn origin(&self) -> StateId {
        self.origin
    }

    /// The state and version the object holds while the action runs.
    pub fn held(&self) -> Expected {
        self.held
    }

    /// The action succeeded: the object moves to its target (for a back-to-origin
    /// action, where it started). A [`RuntimeError::Conflict`] means the object was
    /// changed meanwhile (the healer rolled the action back); nothing is written.
    pub fn complete(mut self) -> Result<Record, RuntimeError> {
        let def = self.runtime.machine().action(self.action);
        let to = def.target_from(self.origin).unwrap_or(self.origin);
        self.finish(to, EntryKind::Completed)
    }

    /// The action failed: the object returns to where it started.
    pub fn fail(mut self) -> Result<Record, RuntimeError> {
        self.finish(self.origin, EntryKind::Failed)
    }

    fn finish(&mut self, to: StateId, kind: EntryKind) -> Result<Record, RuntimeError> {
        self.done = true;
        let actor = self.actor.clone();
        let result = self
            .runtime
            .write_outcome(&self.id, self.held, self.action, to, kind, actor);
        tracing::debug!(object = %self.id, ?kind, ok = result.is_ok(), "finished");
        result
    }
}

impl<S: Store> Drop for InFlight<'_, S> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let rt = self.runtime;
        let now = rt.now();
        let Ok(Some(mut record)) = rt.inner.store.load(&self.id) else {
            tracing::error!(object = %self.id, "abandoned action could not be recorded: object unreadable");
            return;
        };
        // Already healed or otherwise moved on: nothing left to record.
        let Some(holder) = record.in_flight.as_mut() else {
            return;
        };
        if record.version != self.held.version {
            return;
        }
        holder.abandoned = true;
        let actor = self.actor.clone();
        record.version += 1;
        record.changed_at = now;
        let entry = Entry {
            version: record.version,
            at: now,
            actor,
            kind: EntryKind::Abandoned,
            action: Some(self.action),
            from: self.held.state,
            to: self.held.state,
        };
        match rt.commit(&self.id, Some(self.held), record, entry) {
            Ok(()) => tracing::warn!(
                object = %self.id,
                action = %rt.machine().action(self.action).name,
                "action abandoned: handle dropped without complete or fail"
            ),
            Err(e) => {
                tracing::error!(object = %self.id, error = %e, "abandoned action could not be recorded")
            }
        }
    }
}
