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
            hidden: None,
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
    ///
    /// # Panics
    ///
    /// If `M` is not derived from this runtime's machine (a programming error).
    pub fn state_as<M: crate::typed::StateMachine>(
        &self,
        id: impl Into<ObjectId>,
    ) -> Result<M, RuntimeError> {
        let state = self.state(id)?;
        let name = &self.machine().state(state).name;
        match M::ALL.get(state.0) {
            Some(&s) if s.name() == name => Ok(s),
            _ => panic!(
                "state_as::<{}>: machine `{}` is not the runtime's `{}`",
                std::any::type_name::<M>(),
                M::machine().name(),
                self.machine().name()
            ),
        }
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
    /// Refused, in this order, if the object is busy, if the table has no such
    /// action from its state, if the actor holds none of the action's roles, if the
    /// action changes the state and the state has an owner whose role the actor
    /// lacks, or if a guard says no. Otherwise the object moves into the action's
    /// transition state (an action without one holds the object in its state), by
    /// compare-and-set against the record read: a concurrent change makes it a
    /// [`RuntimeError::Conflict`].
    ///
    /// Busy means an action is in flight. A hidden action (OpenvCloud's `migrate`)
    /// keeps the status and holds a slot of its own: while it runs another hidden
    /// action is refused, but a user's action may start (its status shows at once).
    /// Running the two one after the other is the job of the
    /// [`Queuer`](super::Queuer), as the OpenvCloud seed describes.
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
        let hidden = def.hidden;
        let to = def.via.unwrap_or(record.state);
        let now = self.now();
        let version = record.version + 1;
        let holder = Holder {
            action,
            origin: record.state,
            actor: actor.shared_name(),
            since: now,
            abandoned: false,
            version,
        };
        let mut new = record.clone();
        new.state = to;
        new.version = version;
        new.changed_at = now;
        *slot(&mut new, hidden) = Some(Arc::new(holder));
        let entry = Entry {
            version,
            at: now,
            actor: actor.shared_name(),
            kind: EntryKind::Started,
            action: Some(action),
            from: record.state,
            to,
        };
        self.commit(&id, Some(record.expected()), new.clone(), entry)?;
        tracing::debug!(version, "started");
        Ok(InFlight {
            runtime: RuntimeRef::Borrowed(self),
            id,
            action,
            origin: record.state,
            held: Expected { state: to, version },
            hidden,
            actor: actor.shared_name(),
            written: Some(new),
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

    /// Rolls back the (visible) action in flight on `id`, its record as read being
    /// `record`, to the state it started from, as `healer`. The write is a
    /// compare-and-set against `record`, so it never undoes an action that finished
    /// meanwhile: that is a [`RuntimeError::Conflict`]. A `record` holding no such
    /// action is [`RuntimeError::NotInFlight`].
    pub fn roll_back(
        &self,
        id: impl Into<ObjectId>,
        record: &Record,
        healer: &Actor,
    ) -> Result<Record, RuntimeError> {
        self.heal(id.into(), record, false, healer)
    }

    /// Releases the hidden action in flight on `id` (its record as read: `record`),
    /// which changed no state, as `healer`; a compare-and-set like
    /// [`Runtime::roll_back`].
    pub fn release_hidden(
        &self,
        id: impl Into<ObjectId>,
        record: &Record,
        healer: &Actor,
    ) -> Result<Record, RuntimeError> {
        self.heal(id.into(), record, true, healer)
    }

    fn heal(
        &self,
        id: ObjectId,
        record: &Record,
        hidden: bool,
        healer: &Actor,
    ) -> Result<Record, RuntimeError> {
        let mut new = record.clone();
        let Some(holder) = slot(&mut new, hidden).take() else {
            return Err(RuntimeError::NotInFlight {
                id,
                state: self.name(record.state),
                hidden,
            });
        };
        let to = if hidden { record.state } else { holder.origin };
        new.state = to;
        new.version += 1;
        new.changed_at = self.now();
        let entry = Entry {
            version: new.version,
            at: new.changed_at,
            actor: healer.shared_name(),
            kind: EntryKind::Healed,
            action: Some(holder.action),
            from: record.state,
            to,
        };
        self.commit(&id, Some(record.expected()), new.clone(), entry)?;
        tracing::info!(object = %id, action = %self.machine().action(holder.action).name, "rolled back");
        Ok(new)
    }

    fn conflict(&self, id: ObjectId, expected: Expected, found: Option<&Record>) -> RuntimeError {
        RuntimeError::Conflict {
            id,
            expected_state: self.name(expected.state),
            expected_version: expected.version,
            found: found.map(|r| (self.name(r.state), r.version)),
        }
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
        let busy = match (&record.in_flight, &record.hidden) {
            (Some(holder), _) => Some(holder),
            (None, Some(holder)) if def.hidden => Some(holder),
            _ => None,
        };
        if let Some(holder) = busy {
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

/// The runtime an [`InFlight`] handle finishes its action on: borrowed, or owned
/// for a handle that must outlive the borrow (one sent to a worker thread).
enum RuntimeRef<'r, S: Store> {
    Borrowed(&'r Runtime<S>),
    Owned(Runtime<S>),
}

impl<S: Store> std::ops::Deref for RuntimeRef<'_, S> {
    type Target = Runtime<S>;

    fn deref(&self) -> &Runtime<S> {
        match self {
            RuntimeRef::Borrowed(rt) => rt,
            RuntimeRef::Owned(rt) => rt,
        }
    }
}

/// The slot an action holds: a hidden action's own, or the one for the rest.
fn slot(record: &mut Record, hidden: bool) -> &mut Option<Arc<Holder>> {
    if hidden {
        &mut record.hidden
    } else {
        &mut record.in_flight
    }
}

/// An action running on an object. Finish it with [`InFlight::complete`] or
/// [`InFlight::fail`]. It borrows its [`Runtime`]; [`InFlight::into_owned`] makes
/// a `'static` handle to send elsewhere.
///
/// Dropped without either (a forgotten handle, a panic in the action), it records
/// the action as abandoned: the object stays in its transition state, visibly held
/// by an abandoned action, until the healer rolls it back.
#[must_use = "an action in flight must be completed or failed"]
pub struct InFlight<'r, S: Store = super::MemoryStore> {
    runtime: RuntimeRef<'r, S>,
    id: ObjectId,
    action: ActionId,
    origin: StateId,
    held: Expected,
    hidden: bool,
    actor: Arc<str>,
    /// The record as the start wrote it, while it may still be current.
    written: Option<Record>,
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

    /// The state the object showed and the version it had when the action started.
    pub fn held(&self) -> Expected {
        self.held
    }

    /// Whether the action is hidden (it keeps the status and its own slot).
    pub fn is_hidden(&self) -> bool {
        self.hidden
    }

    /// The same handle, owning a clone of the runtime: `'static`, to send to
    /// another thread.
    pub fn into_owned(mut self) -> InFlight<'static, S> {
        self.done = true;
        InFlight {
            runtime: RuntimeRef::Owned((*self.runtime).clone()),
            id: self.id.clone(),
            action: self.action,
            origin: self.origin,
            held: self.held,
            hidden: self.hidden,
            actor: self.actor.clone(),
            written: self.written.take(),
            done: false,
        }
    }

    /// The action succeeded: the object moves to its target (for a back-to-origin
    /// or hidden action, where it started; a hidden action leaves whatever status a
    /// user's action has set meanwhile). A [`RuntimeError::Conflict`] means the
    /// action was rolled back meanwhile by the healer; nothing is written.
    pub fn complete(mut self) -> Result<Record, RuntimeError> {
        self.finish(EntryKind::Completed)
    }

    /// The action failed: the object returns to where it started.
    pub fn fail(mut self) -> Result<Record, RuntimeError> {
        self.finish(EntryKind::Failed)
    }

    /// Writes an outcome of the action held in its slot since `held`: the entry's
    /// kind and the state `to` computes from the holder and the current record.
    /// Re-reads and retries when the record changed for another reason (a hidden
    /// action beside a visible one); a different holder ends with the conflict.
    fn settle(
        &mut self,
        kind: EntryKind,
        to: impl Fn(&Machine, &Holder, &Record) -> (StateId, Option<Arc<Holder>>),
    ) -> Result<Record, RuntimeError> {
        let (rt, id, hidden, held) = (&*self.runtime, &self.id, self.hidden, self.held);
        let mut guess = self.written.take();
        loop {
            // First the record as the start wrote it, which saves a read when
            // nothing changed since; then what the store holds.
            let record = match guess.take() {
                Some(r) => r,
                None => match rt.inner.store.load(id).map_err(RuntimeError::Store)? {
                    Some(r) => r,
                    None => return Err(rt.conflict(id.clone(), held, None)),
                },
            };
            let mut new = record.clone();
            let Some(holder) = slot(&mut new, hidden)
                .take()
                .filter(|h| h.version == held.version)
            else {
                return Err(rt.conflict(id.clone(), held, Some(&record)));
            };
            let (state, keep) = to(rt.machine(), &holder, &record);
            *slot(&mut new, hidden) = keep;
            new.state = state;
            new.version += 1;
            new.changed_at = rt.now();
            let entry = Entry {
                version: new.version,
                at: new.changed_at,
                actor: self.actor.clone(),
                kind,
                action: Some(holder.action),
                from: record.state,
                to: state,
            };
            match rt.commit(id, Some(record.expected()), new.clone(), entry) {
                Err(RuntimeError::Conflict { .. }) => continue,
                Err(e) => return Err(e),
                Ok(()) => return Ok(new),
            }
        }
    }

    fn finish(&mut self, kind: EntryKind) -> Result<Record, RuntimeError> {
        self.done = true;
        let hidden = self.hidden;
        let result = self.settle(kind, |machine, holder, record| {
            let to = if hidden {
                record.state
            } else if kind == EntryKind::Completed {
                let def = machine.action(holder.action);
                def.target_from(holder.origin).unwrap_or(holder.origin)
            } else {
                holder.origin
            };
            (to, None)
        });
        tracing::debug!(object = %self.id, ?kind, ok = result.is_ok(), "finished");
        result
    }
}

impl<S: Store> Drop for InFlight<'_, S> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let result = self.settle(EntryKind::Abandoned, |_, holder, record| {
            let mut kept = holder.clone();
            kept.abandoned = true;
            (record.state, Some(Arc::new(kept)))
        });
        match result {
            Ok(_) => tracing::warn!(
                object = %self.id,
                action = %self.runtime.machine().action(self.action).name,
                "action abandoned: handle dropped without complete or fail"
            ),
            // Healed or otherwise moved on: nothing left to record.
            Err(RuntimeError::Conflict { .. }) => {}
            Err(e) => {
                tracing::error!(object = %self.id, error = %e, "abandoned action could not be recorded")
            }
        }
    }
}
