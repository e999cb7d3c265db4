//! The runtime of one machine over one store: creating objects, reading them, and
//! starting actions after the admission checks.
//!
//! # The path every action takes
//!
//! What keeps it short, each measured in BENCHMARKS.md. The default clock,
//! `CounterClock`, is the wall clock read through the processor's counter
//! (`quanta`), anchored to `SystemTime::now()` every 100 ms; an action run at once
//! (`Runtime::run`) reads it once, its completion stamped with its start's time
//! (`InFlight::complete_at_once`). `modify` hands back
//! only what the caller `read`s of the record it leaves (a start keeps nothing of
//! it, a completion the whole record), and `Store::load_with` reads a part of a
//! record in place (`Runtime::state`). Holders and entries name their actor by an
//! interned `ActorName` (a pointer, copied and compared as one), so a write counts
//! no references to names. A start refused inside `modify` is decided as ids and
//! copies (`admit::Refusal`) and becomes a `RuntimeError`, with the names its
//! message needs, only once the store let go: nothing is allocated under the
//! object's lock. The start's tracing span is built only when a subscriber listens
//! for debug.
//!
//! A holder is boxed once per object: a start's `Change` says what its holder is
//! (`Hold::Start`) and the memory store builds it in the box the object's last
//! holder left (`Change::apply_reusing`), so an action allocates and frees no
//! holder, and a queued action (started on the caller's thread, ended on a
//! worker's) frees nothing on the worker that the caller allocated (a block freed
//! on another thread reaches the caller's allocator again only through its slow
//! path).
//!
//! Reads take the caller's id by reference (`IntoObjectId`): looking an object up
//! counts no reference and copies no text; a start's handle borrows an `&ObjectId`
//! (`IntoHeldId`), so an action counts none either. An id carries its hash, taken
//! when it is made, in the allocation of its text. An action on an `ObjectId`
//! allocates nothing once its object has held a holder and its history, if
//! bounded ([`MemoryStore::keep_history`](crate::MemoryStore::keep_history)),
//! is full; a whole history grows as a vector does (`tests/allocation.rs`
//! counts it).
//!
//! The runtime's small non-generic functions on the hot path (the table's lookups,
//! the admission, `Change::apply`, the memory store's lookup) are `#[inline]`: the
//! runtime's generic code is compiled in the user's crate, and without the hint
//! every one of them is a call it cannot see through. A start's decision
//! (`decide_start`, `admit_start`, `admit::admit`) and the making of its handle
//! (`started`, `Start::begun`) are `#[inline(always)]`: since a start also
//! hands back what it read of its record (`start_with_record`), rustc leaves
//! them as calls under `#[inline]`, 1,106 instructions an action against 1,001
//! (callgrind, `examples/queue_path.rs direct`; BENCHMARKS.md, fifty-fourth
//! session). CI's `scripts/instructions` holds each hot path to a ceiling.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use fsm_core::{ActionId, Machine, StateId};

use crate::admit::{self, GuardContext, GuardFn, Refusal};
use crate::in_flight::{self, InFlight};
use crate::write::{self, Change, Hold, Slot};
use crate::{
    Actor, Clock, CounterClock, Entry, EntryKind, Expected, Fence, IntoHeldId, IntoObjectId,
    ObjectId, Record, Removal, RuntimeError, Store, StoreError, Watcher, Write,
};
use fsm_core::ActionRef;

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

    /// Reads time from `clock` instead of the system's wall clock (read through
    /// the processor's counter: [`CounterClock`]).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Box::new(clock);
        self
    }

    /// The runtime, once every guard the machine names has an implementation (code
    /// given with [`guard`](Self::guard), or, with the feature `cel`, the guard's
    /// CEL expression in the spec) and every implementation names a guard of the
    /// machine.
    pub fn build(mut self) -> Result<Runtime<S>, RuntimeError> {
        let machine_name = self.machine.name().to_owned();
        if let Some(guard) = self
            .guards
            .keys()
            .find(|g| !self.machine.guards().iter().any(|d| d.name == **g))
        {
            return Err(RuntimeError::UnknownGuard {
                suggestion: self.machine.suggest_guard(guard).map(str::to_owned),
                machine: machine_name,
                guard: guard.clone(),
            });
        }
        let mut guards = Vec::new();
        for def in self.machine.guards() {
            // Code given for a guard wins over its CEL expression.
            if let Some(check) = self.guards.remove(def.name.as_ref()) {
                guards.push(check);
                continue;
            }
            #[cfg(feature = "cel")]
            if let Some(expression) = &def.cel {
                let guard =
                    crate::cel::CelGuard::compile(&def.name, expression).map_err(|why| {
                        RuntimeError::BadGuard {
                            machine: machine_name.clone(),
                            guard: def.name.to_string(),
                            why,
                        }
                    })?;
                guards.push(Box::new(move |ctx: &GuardContext<'_>| guard.check(ctx)));
                continue;
            }
            return Err(RuntimeError::MissingGuard {
                machine: machine_name,
                guard: def.name.to_string(),
            });
        }
        let (states, actions) = (self.machine.states().len(), self.machine.actions().len());
        if let Some(refused) = crate::too_many_ids(&machine_name, states, actions) {
            return Err(refused);
        }
        self.store
            .bind(&self.machine)
            .map_err(RuntimeError::Store)?;
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

/// Every object with its state (a [`StateId`], or a derived enum's variant), or
/// why its record could not be read: what [`Runtime::states`] and
/// [`Runtime::states_as`] answer, sorted by id.
pub type StateList<M> = Vec<(ObjectId, Result<M, RuntimeError>)>;

/// The states of the objects a [`Store::for_each_record`] looks at (no record
/// copied), as `as_state` gives them, then sorted by id. What is sorted is
/// small (the id as an [`OrderedId`](crate::OrderedId), the state, an error
/// boxed), and the list is built from it once.
struct StatesFound<M, F> {
    as_state: F,
    found: Vec<(crate::OrderedId, Result<M, Box<RuntimeError>>)>,
}

impl<M, F: Fn(StateId) -> M> StatesFound<M, F> {
    fn new(as_state: F) -> Self {
        StatesFound {
            as_state,
            found: Vec::new(),
        }
    }

    fn look(&mut self, id: &ObjectId, record: Result<&Record, &StoreError>) {
        let state = match record {
            Ok(record) => Ok((self.as_state)(record.state)),
            Err(e) => Err(Box::new(RuntimeError::Store(e.clone()))),
        };
        self.found.push((crate::OrderedId::new(id.clone()), state));
    }

    fn sorted(mut self) -> StateList<M> {
        self.found.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        (self.found.into_iter())
            .map(|(key, state)| (key.id, state.map_err(|e| *e)))
            .collect()
    }
}

/// The runtime of one machine over one store. Cloning it is cheap and shares both.
///
/// See the [crate documentation](crate) for what it guarantees.
pub struct Runtime<S: Store = crate::MemoryStore> {
    inner: Arc<Inner<S>>,
}

/// Aligned to a pair of cache lines, so that the `Arc`'s reference count has
/// its lines to itself: a queued request's task holds a clone of the runtime,
/// counted up and down on the caller's core, while a worker on another core
/// reads the fields below for every action it ends; on the count's line they
/// followed the count from core to core (BENCHMARKS.md, sixty-first session).
#[repr(align(128))]
struct Inner<S> {
    machine: Machine,
    store: S,
    guards: Vec<GuardFn>,
    clock: Box<dyn Clock>,
}

// The count's lines are its own only while `Inner` starts a pair of lines.
const _: () = assert!(std::mem::align_of::<Inner<crate::MemoryStore>>() >= 128);

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

/// An async start run detached ([`Store::run_detached`]), boxed.
type DetachedStart<'a, S, R> = std::pin::Pin<
    Box<
        dyn Future<Output = Result<Result<(InFlight<'static, S>, R), RuntimeError>, StoreError>>
            + Send
            + 'a,
    >,
>;

impl<S: Store> Runtime<S> {
    /// The runtime of `machine` over `store`, for a machine with no guards (see
    /// [`Runtime::builder`] otherwise).
    pub fn new(machine: Machine, store: S) -> Result<Self, RuntimeError> {
        Self::builder(machine, store).build()
    }

    /// The runtime of the machine a state enum was derived from
    /// (`#[derive(StateMachine)]`), over `store`, for a machine with no
    /// guards: [`new`](Self::new) with
    /// [`M::machine()`](fsm_core::typed::StateMachine::machine). Actions are
    /// then given as the derived action enum's variants, and
    /// [`state_as`](Self::state_as) reads a state back as `M` (the `fsm`
    /// crate's README shows it).
    pub fn of<M: fsm_core::typed::StateMachine>(store: S) -> Result<Self, RuntimeError> {
        Self::new(M::machine().clone(), store)
    }

    /// [`builder`](Self::builder) of the machine a state enum was derived
    /// from, to implement its guards or set the clock.
    pub fn builder_of<M: fsm_core::typed::StateMachine>(store: S) -> RuntimeBuilder<S> {
        Self::builder(M::machine().clone(), store)
    }

    /// A builder, to implement the machine's guards or set the clock.
    pub fn builder(machine: Machine, store: S) -> RuntimeBuilder<S> {
        RuntimeBuilder {
            machine,
            store,
            guards: HashMap::new(),
            clock: Box::new(CounterClock),
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
    pub fn now(&self) -> SystemTime {
        self.inner.clock.now()
    }

    /// The time a write of `record` is stamped with: the clock's, or the
    /// record's last write's if the clock reads earlier (it stepped back), so
    /// that an object's history is in order whatever the clock does.
    #[inline]
    pub(crate) fn stamp(&self, record: &Record) -> SystemTime {
        self.now().max(record.changed_at)
    }

    /// Creates `id` in the machine's initial state.
    pub fn create(&self, id: impl IntoObjectId, actor: &Actor) -> Result<Record, RuntimeError> {
        self.create_with(id, actor, None)
    }

    /// Creates `id` in the machine's initial state with `data` (JSON text, stored
    /// as given: see [`Record::data`]).
    pub fn create_with(
        &self,
        id: impl IntoObjectId,
        actor: &Actor,
        data: Option<Arc<str>>,
    ) -> Result<Record, RuntimeError> {
        let id = id.into_object_id();
        let mut version = self.inner.store.first_version(&id);
        loop {
            let write = self.creation(id.clone(), actor, data.clone(), version);
            let record = write.record.clone();
            match self.inner.store.commit(write) {
                // (A store that named the version tried is answered as the
                // store's error, not tried again.)
                Err(StoreError::CreateAt { version: due, .. }) if due != version => version = due,
                result => return self.created(id, actor, result, record),
            }
        }
    }

    /// [`create`](Self::create) for async callers.
    pub async fn create_async(
        &self,
        id: impl IntoObjectId,
        actor: &Actor,
    ) -> Result<Record, RuntimeError> {
        self.create_with_async(id, actor, None).await
    }

    /// [`create_with`](Self::create_with) for async callers: the store's write is
    /// awaited ([`Store::commit_async`]), never waited for on the caller's thread.
    pub async fn create_with_async(
        &self,
        id: impl IntoObjectId,
        actor: &Actor,
        data: Option<Arc<str>>,
    ) -> Result<Record, RuntimeError> {
        let id = id.into_object_id();
        let mut version = self.inner.store.first_version(&id);
        loop {
            let write = self.creation(id.clone(), actor, data.clone(), version);
            let record = write.record.clone();
            match self.inner.store.commit_async(write).await {
                // (A store that named the version tried is answered as the
                // store's error, not tried again.)
                Err(StoreError::CreateAt { version: due, .. }) if due != version => version = due,
                result => return self.created(id, actor, result, record),
            }
        }
    }

    /// The write that creates `id`, its first entry at `version`: the
    /// store's guess ([`Store::first_version`], 1 by default), unless the
    /// store answered that the id's next object starts elsewhere
    /// ([`StoreError::CreateAt`]: an object of the id was removed, or the
    /// store forgot removals), in which case the creation is made again at
    /// that version.
    fn creation(&self, id: ObjectId, actor: &Actor, data: Option<Arc<str>>, version: u64) -> Write {
        write::create(
            id,
            self.machine().initial(),
            actor.actor_name(),
            self.now(),
            data,
            version,
        )
    }

    /// What a creation's write ended in: the record, or why not.
    fn created(
        &self,
        id: ObjectId,
        actor: &Actor,
        result: Result<(), StoreError>,
        record: Record,
    ) -> Result<Record, RuntimeError> {
        match result.map_err(|e| self.refused(None, e)) {
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
    pub fn get(&self, id: impl IntoObjectId) -> Result<Record, RuntimeError> {
        let id = id.object_id();
        self.load(&id)?.ok_or_else(|| RuntimeError::NotFound {
            id: id.into_owned(),
        })
    }

    /// [`get`](Self::get) for async callers.
    pub async fn get_async(&self, id: impl IntoObjectId) -> Result<Record, RuntimeError> {
        let id = id.object_id();
        self.load_async(&id)
            .await?
            .ok_or_else(|| RuntimeError::NotFound {
                id: id.into_owned(),
            })
    }

    pub(crate) fn load(&self, id: &ObjectId) -> Result<Option<Record>, RuntimeError> {
        self.inner.store.load(id).map_err(RuntimeError::Store)
    }

    pub(crate) async fn load_async(&self, id: &ObjectId) -> Result<Option<Record>, RuntimeError> {
        self.inner
            .store
            .load_async(id)
            .await
            .map_err(RuntimeError::Store)
    }

    /// The object's state.
    pub fn state(&self, id: impl IntoObjectId) -> Result<StateId, RuntimeError> {
        let id = id.object_id();
        self.inner
            .store
            .load_with(&id, |r| r.state)
            .map_err(RuntimeError::Store)?
            .ok_or_else(|| RuntimeError::NotFound {
                id: id.into_owned(),
            })
    }

    /// The name of the object's state, as the spec spells it.
    pub fn state_name(&self, id: impl IntoObjectId) -> Result<&str, RuntimeError> {
        let state = self.state(id)?;
        Ok(&self.machine().state(state).name)
    }

    /// The object's state as a derived enum (`VmState`).
    ///
    /// # Panics
    ///
    /// If `M` is not derived from this runtime's machine (a programming error).
    pub fn state_as<M: fsm_core::typed::StateMachine>(
        &self,
        id: impl IntoObjectId,
    ) -> Result<M, RuntimeError> {
        Ok(self.typed(self.state(id)?))
    }

    /// [`state`](Self::state) for async callers.
    pub async fn state_async(&self, id: impl IntoObjectId) -> Result<StateId, RuntimeError> {
        let id = id.object_id();
        self.inner
            .store
            .load_with_async(&id, |r| r.state)
            .await
            .map_err(RuntimeError::Store)?
            .ok_or_else(|| RuntimeError::NotFound {
                id: id.into_owned(),
            })
    }

    /// [`state_as`](Self::state_as) for async callers.
    ///
    /// # Panics
    ///
    /// If `M` is not derived from this runtime's machine (a programming error).
    pub async fn state_as_async<M: fsm_core::typed::StateMachine>(
        &self,
        id: impl IntoObjectId,
    ) -> Result<M, RuntimeError> {
        Ok(self.typed(self.state_async(id).await?))
    }

    /// The state of every object, sorted by id, read at once with
    /// [`Store::for_each_record`]: on etcd one transaction, where a
    /// [`state`](Self::state) per object would make a request each; in memory
    /// each record looked at in place, none copied. An object whose record cannot be
    /// read (say, one written by a newer spec) has that error in place of its
    /// state; the others are there all the same. The outer error: the store could
    /// not list its objects.
    ///
    /// ```
    /// # use fsm_runtime::{Actor, MemoryStore, Runtime};
    /// # let spec = "[machine]\nname = \"lamp\"\ninitial = \"off\"\n[states]\noff = {}\non = { terminal = true }\n\
    /// #     [actions]\nflip = { from = \"off\", to = \"on\" }\n";
    /// # let machine = fsm_core::spec::load_str("lamp.toml", spec).unwrap();
    /// let rt = Runtime::new(machine, MemoryStore::new())?;
    /// let me = Actor::new("me");
    /// rt.create("b", &me)?;
    /// rt.create("a", &me)?;
    /// rt.run("b", &me, "flip")?;
    /// let states: Vec<(String, &str)> = rt
    ///     .states()?
    ///     .into_iter()
    ///     .map(|(id, state)| Ok((id.to_string(), &*rt.machine().state(state?).name)))
    ///     .collect::<Result<_, fsm_runtime::RuntimeError>>()?;
    /// assert_eq!(states, [("a".to_owned(), "off"), ("b".to_owned(), "on")]);
    /// # Ok::<(), fsm_runtime::RuntimeError>(())
    /// ```
    pub fn states(&self) -> Result<StateList<StateId>, RuntimeError> {
        self.states_with(|state| state)
    }

    /// [`states`](Self::states) for async callers.
    pub async fn states_async(&self) -> Result<StateList<StateId>, RuntimeError> {
        self.states_with_async(|state| state).await
    }

    /// [`states`](Self::states), each a variant of a derived enum (`VmState`), as
    /// [`state_as`](Self::state_as).
    ///
    /// # Panics
    ///
    /// If `M` is not derived from this runtime's machine (a programming error),
    /// and the store holds an object.
    pub fn states_as<M: fsm_core::typed::StateMachine>(
        &self,
    ) -> Result<StateList<M>, RuntimeError> {
        self.states_with(|state| self.typed(state))
    }

    /// [`states_as`](Self::states_as) for async callers.
    ///
    /// # Panics
    ///
    /// As [`states_as`](Self::states_as).
    pub async fn states_as_async<M: fsm_core::typed::StateMachine>(
        &self,
    ) -> Result<StateList<M>, RuntimeError> {
        self.states_with_async(|state| self.typed(state)).await
    }

    /// Every object's state as `as_state` gives it, sorted by id.
    fn states_with<M>(
        &self,
        as_state: impl Fn(StateId) -> M,
    ) -> Result<StateList<M>, RuntimeError> {
        let mut found = StatesFound::new(as_state);
        (self.store())
            .for_each_record(|id, record| found.look(id, record))
            .map_err(RuntimeError::Store)?;
        Ok(found.sorted())
    }

    /// [`states_with`](Self::states_with) for async callers.
    async fn states_with_async<M: Send>(
        &self,
        as_state: impl Fn(StateId) -> M + Send,
    ) -> Result<StateList<M>, RuntimeError> {
        let mut found = StatesFound::new(as_state);
        (self.store())
            .for_each_record_async(|id, record| found.look(id, record))
            .await
            .map_err(RuntimeError::Store)?;
        Ok(found.sorted())
    }

    /// `state` as a variant of `M`, derived from this runtime's machine.
    fn typed<M: fsm_core::typed::StateMachine>(&self, state: StateId) -> M {
        let name = &self.machine().state(state).name;
        match M::ALL.get(state.0) {
            Some(&s) if s.name() == name => s,
            _ => panic!(
                "state_as::<{}>: machine `{}` is not the runtime's `{}`",
                std::any::type_name::<M>(),
                M::machine().name(),
                self.machine().name()
            ),
        }
    }

    /// The object's history, oldest first.
    pub fn history(&self, id: impl IntoObjectId) -> Result<Vec<Entry>, RuntimeError> {
        self.inner
            .store
            .history(&id.object_id())
            .map_err(RuntimeError::Store)
    }

    /// [`history`](Self::history) for async callers.
    pub async fn history_async(&self, id: impl IntoObjectId) -> Result<Vec<Entry>, RuntimeError> {
        self.inner
            .store
            .history_async(&id.object_id())
            .await
            .map_err(RuntimeError::Store)
    }

    /// A subscription to every accepted write from now on (see [`Watcher`]).
    ///
    /// To follow every object without a gap, a controller watches first, then
    /// reads the records: a write made in between is both in what it read and
    /// among the events, at a version it already has, so it skips each event
    /// at or below the version it read for that object.
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use fsm_runtime::{Actor, MemoryStore, ObjectId, Runtime, Store};
    ///
    /// let vms = Runtime::new(
    ///     fsm_core::spec::load(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/vm.toml"))?,
    ///     MemoryStore::new(),
    /// )?;
    /// let user = Actor::new("user");
    /// vms.create("vm-1", &user)?;
    ///
    /// let mut watcher = vms.watch()?;
    /// vms.create("vm-2", &user)?; // read below, and told
    /// let mut seen: HashMap<ObjectId, u64> = vms
    ///     .store()
    ///     .records()?
    ///     .into_iter()
    ///     .filter_map(|(id, record)| Some((id, record.ok()?.version)))
    ///     .collect();
    /// vms.run("vm-1", &user, "deploy")?; // told only
    ///
    /// let mut news = Vec::new();
    /// while let Some(event) = watcher.try_recv()? {
    ///     let last = seen.entry(event.id.clone()).or_default();
    ///     if event.entry.version > *last {
    ///         *last = event.entry.version;
    ///         news.push((event.id.to_string(), event.entry.version));
    ///     }
    /// }
    /// // vm-2's creation came twice and counts once; vm-1's action, in two writes.
    /// assert_eq!(news, [("vm-1".to_owned(), 2), ("vm-1".to_owned(), 3)]);
    /// assert_eq!(seen.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// Over REST, `fsm serve` numbers its events and answers a list's
    /// `last_event_id`, so a client lists first and watches from there.
    pub fn watch(&self) -> Result<Watcher, RuntimeError> {
        self.inner.store.watch().map_err(RuntimeError::Store)
    }

    /// [`watch`](Self::watch) for async callers: a store whose watch asks its
    /// backend first (the etcd store's first one) is awaited, not waited for
    /// on the caller's thread ([`Store::watch_async`]).
    pub async fn watch_async(&self) -> Result<Watcher, RuntimeError> {
        self.inner
            .store
            .watch_async()
            .await
            .map_err(RuntimeError::Store)
    }

    /// Starts `action` on `id` for `actor`.
    ///
    /// Refused, in this order, if the object is busy, if the table has no rule for
    /// the action from its state, if the actor holds none of the action's roles, if
    /// the action changes the state and the state has an owner whose role the actor
    /// lacks, or if a guard says no. Otherwise the object moves into the action's
    /// transition state (an action without one holds the object in its state), by
    /// compare-and-set against the record read: a concurrent change makes it a
    /// [`RuntimeError::Conflict`].
    ///
    /// Busy means an action is in flight. A hidden action (OpenvCloud's `migrate`)
    /// keeps the status and holds a slot of its own: while it runs another hidden
    /// action is refused, but a user's action may start (its status shows at once).
    /// Running the two one after the other is the job of the
    /// [`Queuer`](crate::Queuer), as the OpenvCloud seed describes.
    ///
    /// The handle borrows the runtime, and the id when given an `&ObjectId`
    /// ([`IntoHeldId`]); [`InFlight::into_owned`] makes one that borrows
    /// neither.
    pub fn start<'r>(
        &'r self,
        id: impl IntoHeldId<'r>,
        actor: &Actor,
        action: impl ActionRef,
    ) -> Result<InFlight<'r, S>, RuntimeError> {
        let id = id.into_held_id();
        self.start_expecting(id, actor, action, None, None, |_| (), handle)
    }

    /// [`start`](Self::start), only if the object is at `version` (an HTTP
    /// `If-Match`): otherwise [`RuntimeError::VersionMismatch`], and nothing is
    /// written. The start's compare-and-set is against that version, so nobody can
    /// write in between.
    pub fn start_at<'r>(
        &'r self,
        id: impl IntoHeldId<'r>,
        version: u64,
        actor: &Actor,
        action: impl ActionRef,
    ) -> Result<InFlight<'r, S>, RuntimeError> {
        let (id, version) = (id.into_held_id(), Some(version));
        self.start_expecting(id, actor, action, version, None, |_| (), handle)
    }

    /// [`start`](Self::start) of an action that changes the object's data to
    /// `data` (JSON text, see [`Record::data`]): its guards see the change
    /// ([`GuardContext::proposed`](crate::GuardContext::proposed), `proposed.data`
    /// in CEL) beside the data as it is, so a spec can say which changes an action
    /// may make (sabakan: `add_key` removes no key). [`InFlight::complete`] writes
    /// `data` with the completion; a failed action leaves the data as it was.
    ///
    /// With `version`, only if the object is at that version (as
    /// [`start_at`](Self::start_at)): a change computed from the data of one
    /// version is then never written over another.
    pub fn start_changing<'r>(
        &'r self,
        id: impl IntoHeldId<'r>,
        version: Option<u64>,
        actor: &Actor,
        action: impl ActionRef,
        data: Arc<str>,
    ) -> Result<InFlight<'r, S>, RuntimeError> {
        let (id, data) = (id.into_held_id(), Some(data));
        self.start_expecting(id, actor, action, version, data, |_| (), handle)
    }

    /// [`start_changing`](Self::start_changing) (with no data,
    /// [`start_at`](Self::start_at) or [`start`](Self::start)) that answers
    /// the record as the start wrote it beside the handle: in the action's
    /// transition state (its origin, for an action without one), at the
    /// version of the handle's [`fence`](InFlight::fence), held by `actor`. Read with the write, not after it (on the memory store under
    /// the same lock; on etcd, no request more): what a caller that shows the
    /// object after a start wants, where a [`get`](Self::get) after it would
    /// cost a read and could meet a later write.
    ///
    /// ```
    /// # use fsm_runtime::{Actor, MemoryStore, Runtime};
    /// # let machine = fsm_core::spec::load(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/vm.toml"))?;
    /// let vms = Runtime::new(machine, MemoryStore::new())?;
    /// let ops = Actor::new("ops");
    /// vms.create("vm-1", &ops)?;
    /// let (deploy, started) = vms.start_with_record("vm-1", None, &ops, "deploy", None)?;
    /// assert_eq!(vms.machine().state(started.state).name, "DEPLOYING");
    /// assert_eq!(started.version, deploy.fence().0);
    /// assert_eq!(started.in_flight.as_ref().map(|h| h.actor.as_str()), Some("ops"));
    /// deploy.complete()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start_with_record<'r>(
        &'r self,
        id: impl IntoHeldId<'r>,
        version: Option<u64>,
        actor: &Actor,
        action: impl ActionRef,
        data: Option<Arc<str>>,
    ) -> Result<(InFlight<'r, S>, Record), RuntimeError> {
        let id = id.into_held_id();
        self.start_expecting(id, actor, action, version, data, Record::clone, pair)
    }

    /// [`start`](Self::start) for async callers: the store's read and write are
    /// awaited ([`Store::load_async`], [`Store::commit_async`]), so a store on the
    /// network never blocks the caller's thread, and the handle finishes with
    /// [`InFlight::complete_async`] or [`InFlight::fail_async`].
    ///
    /// Cancel safe: dropped, the start has either done nothing, or it lands
    /// and its handle is dropped where it ran, recording the action abandoned
    /// (on a store that [runs starts detached](Store::runs_detached), as the
    /// etcd store does; see the crate's "Cancel safety").
    pub async fn start_async(
        &self,
        id: impl IntoObjectId,
        actor: &Actor,
        action: impl ActionRef,
    ) -> Result<InFlight<'_, S>, RuntimeError> {
        self.start_changing_async(id, None, actor, action, None)
            .await
    }

    /// [`start_changing`](Self::start_changing) (and, with no data,
    /// [`start_at`](Self::start_at)) for async callers, as
    /// [`start_async`](Self::start_async).
    pub async fn start_changing_async(
        &self,
        id: impl IntoObjectId,
        version: Option<u64>,
        actor: &Actor,
        action: impl ActionRef,
        data: Option<Arc<str>>,
    ) -> Result<InFlight<'_, S>, RuntimeError> {
        let started = self.start_reading_async(id, version, actor, action, data, |_| ());
        Ok(started.await?.0)
    }

    /// [`start_with_record`](Self::start_with_record) for async callers, as
    /// [`start_async`](Self::start_async).
    pub async fn start_with_record_async(
        &self,
        id: impl IntoObjectId,
        version: Option<u64>,
        actor: &Actor,
        action: impl ActionRef,
        data: Option<Arc<str>>,
    ) -> Result<(InFlight<'_, S>, Record), RuntimeError> {
        self.start_reading_async(id, version, actor, action, data, Record::clone)
            .await
    }

    /// The async start, with what `read` takes of the record it wrote.
    async fn start_reading_async<R: Send + 'static>(
        &self,
        id: impl IntoObjectId,
        version: Option<u64>,
        actor: &Actor,
        action: impl ActionRef,
        data: Option<Arc<str>>,
        read: impl FnMut(&Record) -> R + Send + 'static,
    ) -> Result<(InFlight<'_, S>, R), RuntimeError> {
        use tracing::Instrument as _;
        let id = id.into_object_id();
        let action = action.resolve(self.machine())?;
        if self.inner.store.never_waits() {
            // Decided and written here, in the first poll, as a blocking
            // start would: dropped before it, this future has begun nothing.
            return self.start_expecting(Cow::Owned(id), actor, action, version, data, read, pair);
        }
        if self.inner.store.runs_detached() {
            // Whole, where the store runs it to its end: dropped, this future
            // leaves no hold without a handle (see `Store::runs_detached`).
            let (runtime, actor) = (self.clone(), actor.clone());
            let caller = tracing::Span::current();
            let start = move || -> Result<(InFlight<'static, S>, R), RuntimeError> {
                caller.in_scope(|| {
                    let id = Cow::Owned(id);
                    let (held, read) =
                        runtime.start_expecting(id, &actor, action, version, data, read, pair)?;
                    Ok((held.into_owned(), read))
                })
            };
            // Boxed as `dyn Future + Send`: awaited as the store's own type,
            // rustc cannot prove the caller's future `Send` for every lifetime
            // (the callers' `tokio::spawn` failed). One allocation per start on
            // a store across the network.
            let detached: DetachedStart<'_, S, R> = Box::pin(self.inner.store.run_detached(start));
            return detached.await.map_err(RuntimeError::Store)?;
        }
        // As for `start`: with no subscriber listening, no span is built (a
        // disabled span costs the future nothing to carry).
        let span = match crate::tracing_debug() {
            true => self.start_span(&id, actor, action),
            false => tracing::Span::none(),
        };
        async {
            let (store, mut read) = (&self.inner.store, read);
            let ask = Ask {
                id: &id,
                actor,
                action,
                version,
                proposed: data.as_ref(),
            };
            let mut expected = None;
            let decided = match self.machine().action(action).guards.is_empty() {
                true => {
                    let decide =
                        |record: Option<&Record>| self.decide_start(&ask, record, &mut expected);
                    store.modify_async(&id, decide, &mut read).await
                }
                // In a box of its own, made only for an action with guards:
                // its read, its guards' verdict and the start they admit, kept
                // across two awaits, would make every start's future nearly
                // twice the size (968 bytes against 512), the memory every
                // task awaiting a start carries.
                false => {
                    let guarded = async {
                        let seen = self.get_async(&id).await?;
                        expected = Some(seen.expected());
                        let mut start = match self.guarded(&ask, &seen) {
                            Ok(start) => start,
                            Err(refused) => return Ok(Ok(Err(refused))),
                        };
                        drop(seen);
                        let decided = store.modify_async(&id, |r| start.decide(r), &mut read);
                        Ok::<_, RuntimeError>(decided.await)
                    };
                    Box::pin(guarded).await?
                }
            };
            self.started(Cow::Owned(id), actor, decided, expected, pair)
        }
        .instrument(span)
        .await
    }

    /// [`start`](Self::start), waiting at most `wait` while another action
    /// holds the object: what [`start_when_free_async`](Self::start_when_free_async)
    /// does, for a caller on a thread of its own, which it blocks (do not call
    /// it from async code). `Duration::MAX` waits as long as it takes.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use fsm_runtime::{Actor, MemoryStore, Runtime, RuntimeError};
    /// # let vm = fsm_core::spec::load_str("vm.toml", r#"
    /// #     [machine]
    /// #     name = "vm"
    /// #     initial = "HALTED"
    /// #     [states]
    /// #     HALTED = "Off"
    /// #     STARTING = { transition = true }
    /// #     RUNNING = "On"
    /// #     [actions]
    /// #     start = { from = "HALTED", via = "STARTING", to = "RUNNING" }
    /// #     stop = { from = "RUNNING", to = "HALTED" }
    /// # "#)?;
    /// # let runtime = Runtime::new(vm, MemoryStore::new())?;
    /// # let alice = Actor::new("alice");
    /// # runtime.create("vm-1", &alice)?;
    /// let starting = runtime.start("vm-1", &alice, "start")?;
    /// std::thread::scope(|s| {
    ///     // `stop` waits for `start` to end, then starts from where it left the VM.
    ///     let stop = s.spawn(|| runtime.start_when_free("vm-1", &alice, "stop", Duration::from_secs(5)));
    ///     starting.complete()?;
    ///     stop.join().unwrap()?.complete()?;
    ///     Ok::<_, RuntimeError>(())
    /// })?;
    /// assert_eq!(runtime.state_name("vm-1")?, "HALTED");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start_when_free(
        &self,
        id: impl IntoObjectId,
        actor: &Actor,
        action: impl ActionRef,
        wait: std::time::Duration,
    ) -> Result<InFlight<'_, S>, RuntimeError> {
        let deadline = std::time::Instant::now().checked_add(wait);
        let id = id.into_object_id();
        let action = action.resolve(self.machine())?;
        match self.start(id.clone(), actor, action) {
            Err(RuntimeError::Busy { .. }) => {}
            answer => return answer,
        }
        loop {
            let mut written = self.watch()?.only(id.clone());
            let busy = match self.start(id.clone(), actor, action) {
                Err(busy @ RuntimeError::Busy { .. }) => busy,
                answer => return answer,
            };
            let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
            if left.is_some_and(|left| left.is_zero()) {
                return Err(busy);
            }
            match written.recv_timeout(left.unwrap_or(std::time::Duration::MAX)) {
                // Written, or writes missed: tried again.
                Ok(Some(_)) => {}
                Err(crate::Lagged::Closed) => {
                    // No more writes will be told: only the end of the wait.
                    match left {
                        Some(left) => std::thread::sleep(left),
                        None => loop {
                            std::thread::park();
                        },
                    }
                    return Err(busy);
                }
                Err(_) => {}
                Ok(None) => return Err(busy),
            }
        }
    }

    /// [`start_async`](Self::start_async), waiting while another action holds
    /// the object: refused [`Busy`](RuntimeError::Busy), it waits for the
    /// object's next write (whichever process made it, on a shared store) and
    /// tries again, until the action starts, is refused for another reason
    /// (the state the object reached does not allow it, say), or `give_up`
    /// completes: then the last `Busy`, as without a wait. What
    /// [`Queuer`](crate::Queuer) does inside one process, for processes that
    /// share a store (`fsm serve`'s `?wait=SECONDS` is built the same way).
    ///
    /// Once the object was found busy, its writes are watched *before* each
    /// try, so a write between a refusal and the wait is never missed; a
    /// watcher that lagged (writes it did not see) tries again at once. Only one action still runs at a time:
    /// the start's compare-and-set decides between all who wait. `give_up` is
    /// any future: a timer (`tokio::time::sleep(d)`), a cancellation, or
    /// [`std::future::pending`] to wait as long as it takes. Cancel safe as
    /// `start_async` is.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use fsm_runtime::{Actor, MemoryStore, Runtime, RuntimeError};
    /// # let vm = fsm_core::spec::load_str("vm.toml", r#"
    /// #     [machine]
    /// #     name = "vm"
    /// #     initial = "HALTED"
    /// #     [states]
    /// #     HALTED = "Off"
    /// #     STARTING = { transition = true }
    /// #     RUNNING = "On"
    /// #     [actions]
    /// #     start = { from = "HALTED", via = "STARTING", to = "RUNNING" }
    /// #     stop = { from = "RUNNING", to = "HALTED" }
    /// # "#)?;
    /// # let runtime = Runtime::new(vm, MemoryStore::new())?;
    /// # let alice = Actor::new("alice");
    /// # runtime.create("vm-1", &alice)?;
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
    /// let starting = runtime.start_async("vm-1", &alice, "start").await?;
    /// // `stop` waits for `start` to end, then starts from where it left the VM.
    /// let give_up = tokio::time::sleep(Duration::from_secs(5));
    /// let (stopping, ()) = tokio::join!(
    ///     runtime.start_when_free_async("vm-1", &alice, "stop", give_up),
    ///     async { starting.complete_async().await.map(drop).unwrap() },
    /// );
    /// stopping?.complete_async().await?;
    /// assert_eq!(runtime.state_name("vm-1")?, "HALTED");
    ///
    /// // Out of time: the object's holder, as without a wait.
    /// let _held = runtime.start_async("vm-1", &alice, "start").await?;
    /// let give_up = tokio::time::sleep(Duration::from_millis(10));
    /// let late = runtime.start_when_free_async("vm-1", &alice, "stop", give_up).await;
    /// assert!(matches!(late, Err(RuntimeError::Busy { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn start_when_free_async(
        &self,
        id: impl IntoObjectId,
        actor: &Actor,
        action: impl ActionRef,
        give_up: impl Future<Output = ()>,
    ) -> Result<InFlight<'_, S>, RuntimeError> {
        let id = id.into_object_id();
        let action = action.resolve(self.machine())?;
        // A free object costs no watcher: the object's writes are watched
        // once it was found busy, and it is tried again at once.
        match self.start_async(id.clone(), actor, action).await {
            Err(RuntimeError::Busy { .. }) => {}
            answer => return answer,
        }
        let mut give_up = std::pin::pin!(give_up);
        loop {
            let mut written = self.watch_async().await?.only(id.clone());
            let busy = match self.start_async(id.clone(), actor, action).await {
                Err(busy @ RuntimeError::Busy { .. }) => busy,
                answer => return answer,
            };
            // The object's next write (or a lag), or the end of the wait. A
            // store whose watch ended tells of no more writes: only the end
            // of the wait is left.
            let mut next = std::pin::pin!(written.recv_async());
            let mut watching = true;
            let wrote = std::future::poll_fn(|cx| {
                if give_up.as_mut().poll(cx).is_ready() {
                    return std::task::Poll::Ready(false);
                }
                while watching {
                    match next.as_mut().poll(cx) {
                        std::task::Poll::Ready(Err(crate::Lagged::Closed)) => watching = false,
                        std::task::Poll::Ready(_) => return std::task::Poll::Ready(true),
                        std::task::Poll::Pending => break,
                    }
                }
                std::task::Poll::Pending
            })
            .await;
            if !wrote {
                return Err(busy);
            }
        }
    }

    /// A start, and what `read` takes of the record it wrote: the handle and
    /// that, as `make` answers them. (`make` builds the answer in the caller's
    /// place: a handle taken out of a pair after the start was copied once
    /// more, 22 instructions a start; BENCHMARKS.md, sixty-second session.)
    #[allow(clippy::too_many_arguments)] // the start's, and how to answer it
    fn start_expecting<'r, R, T>(
        &'r self,
        id: Cow<'r, ObjectId>,
        actor: &Actor,
        action: impl ActionRef,
        version: Option<u64>,
        proposed: Option<Arc<str>>,
        read: impl FnMut(&Record) -> R,
        make: impl FnOnce(InFlight<'r, S>, R) -> T,
    ) -> Result<T, RuntimeError> {
        let action = action.resolve(self.machine())?;
        // The span is made, entered and closed only for a subscriber that listens:
        // with none, tracing costs one comparison per start.
        if crate::tracing_debug() {
            return self.start_traced(id, actor, action, version, proposed, read, make);
        }
        self.start_resolved(id, actor, action, version, proposed, read, make)
    }

    /// [`start_resolved`](Self::start_resolved) inside the start's span, for a
    /// subscriber that listens for debug: apart, so that the path without one
    /// has no span to drop.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)] // as `start_expecting`
    fn start_traced<'r, R, T>(
        &'r self,
        id: Cow<'r, ObjectId>,
        actor: &Actor,
        action: ActionId,
        version: Option<u64>,
        proposed: Option<Arc<str>>,
        read: impl FnMut(&Record) -> R,
        make: impl FnOnce(InFlight<'r, S>, R) -> T,
    ) -> Result<T, RuntimeError> {
        let _span = self.start_span(&id, actor, action).entered();
        self.start_resolved(id, actor, action, version, proposed, read, make)
    }

    /// [`start_expecting`](Self::start_expecting) of a resolved action.
    /// (Always inlined: out of line, its answer was one more copy, 8
    /// instructions a start.)
    #[inline(always)]
    #[allow(clippy::too_many_arguments)] // as `start_expecting`
    fn start_resolved<'r, R, T>(
        &'r self,
        id: Cow<'r, ObjectId>,
        actor: &Actor,
        action: ActionId,
        version: Option<u64>,
        proposed: Option<Arc<str>>,
        read: impl FnMut(&Record) -> R,
        make: impl FnOnce(InFlight<'r, S>, R) -> T,
    ) -> Result<T, RuntimeError> {
        let ask = Ask {
            id: &id,
            actor,
            action,
            version,
            proposed: proposed.as_ref(),
        };
        let mut expected = None;
        let decided = match self.machine().action(action).guards.is_empty() {
            true => {
                let decide =
                    |record: Option<&Record>| self.decide_start(&ask, record, &mut expected);
                self.inner.store.modify(&id, decide, read)
            }
            false => {
                let seen = self.get(&*id)?;
                expected = Some(seen.expected());
                match self.guarded(&ask, &seen) {
                    Ok(mut start) => self.inner.store.modify(&id, |r| start.decide(r), read),
                    Err(refused) => Ok(Err(refused)),
                }
            }
        };
        self.started(id, actor, decided, expected, make)
    }

    /// A start without guards, decided on the object's `record` as the store has
    /// it (for the memory store, under one shard lock), noting its version in
    /// `expected` for a conflict's message. The store may ask again, on a fresher
    /// record (see [`Store::modify`]): the checks run again.
    #[inline(always)]
    fn decide_start(
        &self,
        ask: &Ask<'_>,
        record: Option<&Record>,
        expected: &mut Option<Expected>,
    ) -> Result<(Change, Start), Refusal> {
        let record = record.ok_or(Refusal::NotFound)?;
        *expected = Some(record.expected());
        self.admit_start(ask, record)
    }

    /// A start with guards: its checks, the guards among them, run on `seen`, a
    /// record read with nothing held (guards are the user's code and may read
    /// other objects); if they pass, the start, for the store's step to make
    /// ([`Guarded::decide`]). A start without guards runs its checks inside the
    /// step instead ([`decide_start`](Self::decide_start)).
    fn guarded(&self, ask: &Ask<'_>, seen: &Record) -> Result<Guarded, Refusal> {
        Ok(Guarded {
            admitted: Some(self.admit_start(ask, seen)?),
            seen: seen.expected(),
        })
    }

    /// The handle of a start the store decided, or why it was refused.
    #[inline(always)]
    fn started<'r, R, T>(
        &'r self,
        id: Cow<'r, ObjectId>,
        actor: &Actor,
        decided: Result<Result<(Start, R), Refusal>, StoreError>,
        expected: Option<Expected>,
        make: impl FnOnce(InFlight<'r, S>, R) -> T,
    ) -> Result<T, RuntimeError> {
        let refused = match decided {
            Ok(Ok((start, read))) => return Ok(make(start.begun(self, id), read)),
            Ok(Err(refused)) => refused.error(self, id.into_owned(), actor),
            Err(e) => self.refused(expected, e),
        };
        tracing::debug!(error = %refused, "refused");
        Err(refused)
    }

    fn start_span(&self, id: &ObjectId, actor: &Actor, action: ActionId) -> tracing::Span {
        tracing::debug_span!(
            "start",
            object = %id,
            action = %self.machine().action(action).name,
            actor = actor.name()
        )
    }

    /// A start's checks against the object's `record`, as read, and if they pass,
    /// the change that starts the action and what its handle will hold.
    #[inline(always)]
    fn admit_start(&self, ask: &Ask<'_>, record: &Record) -> Result<(Change, Start), Refusal> {
        let Ask {
            id,
            actor,
            action,
            version,
            proposed,
        } = *ask;
        if let Some(expected) = version.filter(|&v| v != record.version) {
            return Err(Refusal::VersionMismatch {
                expected,
                found: record.version,
                state: record.state,
            });
        }
        let rule = admit::admit(
            self.machine(),
            &self.inner.guards,
            id,
            actor,
            action,
            record,
            proposed.map(|p| &**p),
        )?;
        // After the checks: a start is stamped later than every read its guards
        // made, and (inside `Store::modify`) than the write before it.
        let at = self.stamp(record);
        let slot = Slot::of(self.machine().action(action).hidden);
        let version = record.version + 1;
        let to = rule.via.unwrap_or(record.state);
        let change = Change {
            kind: EntryKind::Started,
            action,
            slot,
            hold: Hold::Start(proposed.cloned()),
            to,
            actor: actor.actor_name(),
            at,
            data: None,
        };
        let start = Start {
            rule: crate::in_flight::Taken::new(rule),
            slot,
            held: Expected { state: to, version },
            proposed: proposed.cloned(),
        };
        Ok((change, start))
    }

    /// Takes up again, as `actor`, the action that holds `id` with the fencing
    /// token `fence`: its handle, as its start gave it, to complete or fail.
    ///
    /// A handle can be lost while its action still holds the object: a
    /// completion the store could not write (a [`RuntimeError::Store`] that
    /// [`is_retryable`](RuntimeError::is_retryable)) consumed it; the process
    /// that started the action stopped; another process sharing the store is
    /// asked to end it. The fence, which the start handed out, and the actor,
    /// who must be the one who started the action, entitle the caller. An
    /// action recorded as abandoned (its handle dropped) is taken up too. If
    /// the first handle still lives somewhere, the two end one action: the
    /// first end is written, the other's is a [`RuntimeError::Conflict`] that
    /// writes nothing.
    ///
    /// Refused with [`RuntimeError::NotHolder`] when another actor started it;
    /// [`RuntimeError::Revoked`] when its hold ended (it was completed or
    /// failed, or the healer rolled it back), with who ended it from the
    /// history; [`RuntimeError::NoHold`] when the history names no start with
    /// that fence. Data proposed at the start
    /// ([`start_changing`](Self::start_changing)) is kept with the hold
    /// ([`Holder::proposed`](crate::Holder::proposed)): the resumed action's
    /// [`complete`](InFlight::complete) writes it, as the first handle's would
    /// have ([`InFlight::complete_with`] gives other data instead).
    ///
    /// The hold stays its start's, session included: on a store whose holders
    /// live by a session (etcd's leases), an action whose starter's session
    /// ended is rolled back by the healer as its holder gone, and the resumed
    /// handle's completion is then a [`RuntimeError::Conflict`] that writes
    /// nothing.
    ///
    /// ```
    /// # use fsm_runtime::{Actor, MemoryStore, Runtime, RuntimeError};
    /// # let machine = fsm_core::spec::load(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/vm.toml"))?;
    /// let vms = Runtime::new(machine, MemoryStore::new())?;
    /// let worker = Actor::new("worker-3");
    /// vms.create("vm-1", &worker)?;
    /// let fence = vms.start("vm-1", &worker, "deploy")?.fence();
    /// // The handle is gone (a crash, a restart); its fence was kept.
    /// let deploy = vms.resume("vm-1", &worker, fence)?;
    /// assert_eq!(vms.machine().state(deploy.complete()?.state).name, "RUNNING");
    /// // Ended: its hold is gone.
    /// let again = vms.resume("vm-1", &worker, fence).unwrap_err();
    /// assert!(matches!(again, RuntimeError::Revoked { .. }), "{again}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resume(
        &self,
        id: impl IntoObjectId,
        actor: &Actor,
        fence: Fence,
    ) -> Result<InFlight<'_, S>, RuntimeError> {
        let id = id.object_id();
        let record = self.get(&*id)?;
        InFlight::resumed(self, &id, &record, actor, fence)
            .unwrap_or_else(|| Err(in_flight::hold_gone(self, &id, fence, None)))
    }

    /// [`resume`](Self::resume) for async callers.
    ///
    /// ```
    /// # use fsm_runtime::{Actor, MemoryStore, Runtime};
    /// # let machine = fsm_core::spec::load(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/vm.toml"))?;
    /// # let vms = Runtime::new(machine, MemoryStore::new())?;
    /// # let worker = Actor::new("worker-3");
    /// # vms.create("vm-1", &worker)?;
    /// let fence = vms.start("vm-1", &worker, "deploy")?.fence();
    /// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
    /// let deploy = vms.resume_async("vm-1", &worker, fence).await?;
    /// assert_eq!(vms.machine().state(deploy.complete_async().await?.state).name, "RUNNING");
    /// # Ok::<(), fsm_runtime::RuntimeError>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn resume_async(
        &self,
        id: impl IntoObjectId,
        actor: &Actor,
        fence: Fence,
    ) -> Result<InFlight<'_, S>, RuntimeError> {
        let id = id.object_id();
        let record = self.get_async(&*id).await?;
        match InFlight::resumed(self, &id, &record, actor, fence) {
            Some(resumed) => resumed,
            None => {
                let history = self.history_async(&*id).await;
                Err(in_flight::hold_gone_in(self, history, &id, fence, None))
            }
        }
    }

    /// Starts `action` and completes it at once: a move with nothing to wait for.
    /// Its two entries in the history (the start, the completion) carry one time:
    /// the clock is read once.
    pub fn run(
        &self,
        id: impl IntoObjectId,
        actor: &Actor,
        action: impl ActionRef,
    ) -> Result<Record, RuntimeError> {
        self.run_expecting(id, None, actor, action)
    }

    /// [`run`](Self::run), only if the object is at `version` (an HTTP
    /// `If-Match`), as [`start_at`](Self::start_at): otherwise
    /// [`RuntimeError::VersionMismatch`], and nothing is written.
    pub fn run_at(
        &self,
        id: impl IntoObjectId,
        version: u64,
        actor: &Actor,
        action: impl ActionRef,
    ) -> Result<Record, RuntimeError> {
        self.run_expecting(id, Some(version), actor, action)
    }

    /// [`run`](Self::run) for async callers.
    pub fn run_async(
        &self,
        id: impl IntoObjectId,
        actor: &Actor,
        action: impl ActionRef,
    ) -> impl Future<Output = Result<Record, RuntimeError>> {
        self.run_expecting_async(id, None, actor, action)
    }

    /// [`run_at`](Self::run_at) for async callers.
    pub fn run_at_async(
        &self,
        id: impl IntoObjectId,
        version: u64,
        actor: &Actor,
        action: impl ActionRef,
    ) -> impl Future<Output = Result<Record, RuntimeError>> {
        self.run_expecting_async(id, Some(version), actor, action)
    }

    /// A run, at `version` if one is given.
    #[inline]
    fn run_expecting(
        &self,
        id: impl IntoObjectId,
        version: Option<u64>,
        actor: &Actor,
        action: impl ActionRef,
    ) -> Result<Record, RuntimeError> {
        // The handle ends here: it may borrow the caller's id.
        let id = id.object_id();
        let held = self.start_expecting(id, actor, action, version, None, |_| (), handle)?;
        held.complete_at_once()
    }

    /// [`run_expecting`](Self::run_expecting) for async callers: the future
    /// `run_async` and `run_at_async` hand back.
    async fn run_expecting_async(
        &self,
        id: impl IntoObjectId,
        version: Option<u64>,
        actor: &Actor,
        action: impl ActionRef,
    ) -> Result<Record, RuntimeError> {
        if self.inner.store.never_waits() {
            // The blocking run, in the first poll: no future of the start's
            // or the end's is made, and the id is lent, not copied.
            return self.run_expecting(id, version, actor, action);
        }
        // The start's own future, not `start_async`'s two around it: each
        // layer of futures costs an action its making, moving and polling.
        let (held, ()) = self
            .start_reading_async(id, version, actor, action, None, |_| ())
            .await?;
        held.complete_at_once_async().await
    }

    /// Rolls back the (visible) action in flight on `id`, its record as read being
    /// `record`, to the state it started from, as `healer`. The write is a
    /// compare-and-set against `record`, so it never undoes an action that finished
    /// meanwhile: that is a [`RuntimeError::Conflict`]. A `record` holding no such
    /// action is [`RuntimeError::NotInFlight`].
    pub fn roll_back(
        &self,
        id: impl IntoObjectId,
        record: &Record,
        healer: &Actor,
    ) -> Result<Record, RuntimeError> {
        self.heal(id.into_object_id(), record, Slot::Visible, healer)
    }

    /// Releases the hidden action in flight on `id` (its record as read: `record`),
    /// which changed no state, as `healer`; a compare-and-set like
    /// [`Runtime::roll_back`].
    pub fn release_hidden(
        &self,
        id: impl IntoObjectId,
        record: &Record,
        healer: &Actor,
    ) -> Result<Record, RuntimeError> {
        self.heal(id.into_object_id(), record, Slot::Hidden, healer)
    }

    fn heal(
        &self,
        id: ObjectId,
        record: &Record,
        slot: Slot,
        healer: &Actor,
    ) -> Result<Record, RuntimeError> {
        let Some(holder) = slot.get(record) else {
            return Err(RuntimeError::NotInFlight {
                id,
                state: self.name(record.state),
                hidden: slot == Slot::Hidden,
            });
        };
        let to = match slot {
            Slot::Hidden => record.state,
            Slot::Visible => holder.origin,
        };
        let action = holder.action;
        let write = Change {
            kind: EntryKind::Healed,
            action,
            slot,
            hold: Hold::End,
            to,
            actor: healer.actor_name(),
            at: self.stamp(record),
            data: None,
        }
        .write(id.clone(), record);
        let healed = write.record.clone();
        self.commit(write)?;
        tracing::info!(object = %id, action = %self.machine().action(action).name, "rolled back");
        Ok(healed)
    }

    /// Removes `id` as `actor`: its record and its history leave the store,
    /// and watchers get a last event, [`EntryKind::Removed`], which this
    /// answers. The id is then free; creating it again makes a new object,
    /// whose versions go on after the removal's (the removal at version 4,
    /// the new object's creation is version 5), so that no `If-Match` or
    /// version read from the old object ever matches the new one.
    ///
    /// Refused, with nothing changed, when the object does not exist
    /// ([`RuntimeError::NotFound`]), when an action holds it, abandoned or not
    /// (`Busy`: the healer rolls an abandoned one back first), when its state
    /// allows no removal (`NotRemovable`: the spec's `remove` on a state), when
    /// the actor holds none of the roles that state names (`MayNotRemove`), or
    /// when the state has an owner and the actor is not it (`NotOwner`). The
    /// removal is a compare-and-delete against the record the checks read: a
    /// write in between makes it a [`RuntimeError::Conflict`].
    ///
    /// ```
    /// use fsm_runtime::{Actor, EntryKind, MemoryStore, Runtime, RuntimeError};
    ///
    /// // sabakan's rule: "Only Retired machines can be removed", by admins.
    /// let spec = r#"
    ///     [machine]
    ///     name = "machine"
    ///     initial = "Healthy"
    ///     [roles]
    ///     admin = "Administrators"
    ///     [states]
    ///     Healthy = "Machines that can run applications"
    ///     Retired = { terminal = true, remove = "admin" }
    ///     [actions]
    ///     retire = { from = "Healthy", to = "Retired", roles = "admin" }
    /// "#;
    /// let machines = Runtime::new(fsm_core::spec::load_str("machine.toml", spec)?, MemoryStore::new())?;
    /// let admin = Actor::new("alice").with_role("admin");
    /// machines.create("m-1", &admin)?;
    ///
    /// let refused = machines.remove("m-1", &admin).unwrap_err();
    /// assert!(matches!(refused, RuntimeError::NotRemovable { .. }));
    /// assert_eq!(
    ///     refused.to_string(),
    ///     "m-1 cannot be removed in Healthy: only objects in Retired may be removed"
    /// );
    ///
    /// machines.run("m-1", &admin, "retire")?;
    /// let removed = machines.remove("m-1", &admin)?;
    /// assert_eq!((removed.kind, removed.version), (EntryKind::Removed, 4));
    /// assert!(matches!(machines.get("m-1"), Err(RuntimeError::NotFound { .. })));
    /// assert!(machines.history("m-1")?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remove(&self, id: impl IntoObjectId, actor: &Actor) -> Result<Entry, RuntimeError> {
        self.remove_expecting(id.into_object_id(), None, actor)
    }

    /// How `id`'s last object was removed: the removal's entry (who removed
    /// it, when, in which state, at which version), while no object has been
    /// created under the id since ([`Store::removal`]); `None` for an object
    /// that lives or never did. What tells a removed object from one that
    /// never was, and completes a history kept elsewhere whose keeper missed
    /// the removal.
    ///
    /// ```
    /// # use fsm_runtime::{Actor, MemoryStore, Runtime};
    /// # let spec = r#"
    /// #     [machine]
    /// #     name = "machine"
    /// #     initial = "Healthy"
    /// #     [roles]
    /// #     admin = "Administrators"
    /// #     [states]
    /// #     Healthy = "Machines that can run applications"
    /// #     Retired = { terminal = true, remove = "admin" }
    /// #     [actions]
    /// #     retire = { from = "Healthy", to = "Retired", roles = "admin" }
    /// # "#;
    /// let machines = Runtime::new(fsm_core::spec::load_str("machine.toml", spec)?, MemoryStore::new())?;
    /// let admin = Actor::new("alice").with_role("admin");
    /// machines.create("m-1", &admin)?;
    /// assert_eq!(machines.removal_of("m-1")?, None);
    /// machines.run("m-1", &admin, "retire")?;
    /// let removed = machines.remove("m-1", &admin)?;
    /// assert_eq!(machines.removal_of("m-1")?, Some(removed));
    /// // Created again, the id names a living object.
    /// machines.create("m-1", &admin)?;
    /// assert_eq!(machines.removal_of("m-1")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn removal_of(&self, id: impl IntoObjectId) -> Result<Option<Entry>, RuntimeError> {
        (self.inner.store)
            .removal(&id.object_id())
            .map_err(RuntimeError::Store)
    }

    /// [`removal_of`](Self::removal_of) for async callers.
    pub async fn removal_of_async(
        &self,
        id: impl IntoObjectId,
    ) -> Result<Option<Entry>, RuntimeError> {
        (self.inner.store)
            .removal_async(&id.object_id())
            .await
            .map_err(RuntimeError::Store)
    }

    /// [`remove`](Self::remove), only if the object is at `version` (an HTTP
    /// `If-Match`): otherwise [`RuntimeError::VersionMismatch`], and nothing is
    /// removed.
    pub fn remove_at(
        &self,
        id: impl IntoObjectId,
        version: u64,
        actor: &Actor,
    ) -> Result<Entry, RuntimeError> {
        self.remove_expecting(id.into_object_id(), Some(version), actor)
    }

    fn remove_expecting(
        &self,
        id: ObjectId,
        version: Option<u64>,
        actor: &Actor,
    ) -> Result<Entry, RuntimeError> {
        let record = self.load(&id)?;
        let removal = self.removal(id, record, version, actor)?;
        let result = self.inner.store.remove(removal.clone());
        self.removed(removal, result)
    }

    /// [`remove`](Self::remove) (and, with `version`, [`remove_at`](Self::remove_at))
    /// for async callers: the store's read and removal are awaited
    /// ([`Store::load_async`], [`Store::remove_async`]).
    pub async fn remove_async(
        &self,
        id: impl IntoObjectId,
        version: Option<u64>,
        actor: &Actor,
    ) -> Result<Entry, RuntimeError> {
        let id = id.into_object_id();
        let record = self.load_async(&id).await?;
        let removal = self.removal(id, record, version, actor)?;
        let result = self.inner.store.remove_async(removal.clone()).await;
        self.removed(removal, result)
    }

    /// The removal of `id` as `actor`, decided on its `record` as read (and,
    /// with `version`, only at that version), or why not.
    fn removal(
        &self,
        id: ObjectId,
        record: Option<Record>,
        version: Option<u64>,
        actor: &Actor,
    ) -> Result<Removal, RuntimeError> {
        let Some(record) = record else {
            return Err(RuntimeError::NotFound { id });
        };
        if let Err(refused) = admit::removable(self.machine(), actor, &record, version) {
            return Err(refused.error(self, id, actor));
        }
        let entry = Entry {
            version: record.version + 1,
            at: self.stamp(&record),
            actor: actor.actor_name(),
            kind: EntryKind::Removed,
            action: None,
            from: record.state,
            to: record.state,
        };
        Ok(Removal {
            id,
            expected: record.expected(),
            entry,
        })
    }

    /// What a removal ended in: its entry, or why not.
    fn removed(
        &self,
        removal: Removal,
        result: Result<(), StoreError>,
    ) -> Result<Entry, RuntimeError> {
        let (id, expected, entry) = removal.into_parts();
        result.map_err(|e| self.refused(Some(expected), e))?;
        tracing::info!(object = %id, actor = %entry.actor, "removed");
        Ok(entry)
    }

    /// A conflict on `id`: the write expected `expected`, the store has `found`
    /// (the state and version of its record, if any).
    #[cold]
    pub(crate) fn conflict(
        &self,
        id: ObjectId,
        expected: Option<Expected>,
        found: Option<Expected>,
    ) -> RuntimeError {
        let (expected_state, expected_version) = match expected {
            Some(e) => (self.name(e.state), e.version),
            None => (String::from("(absent)"), 0),
        };
        RuntimeError::Conflict {
            id,
            expected_state,
            expected_version,
            found: found.map(|e| (self.name(e.state), e.version)),
        }
    }

    /// Hands a write to the store; a refused compare-and-set is a conflict with the
    /// names of what was expected and found.
    pub(crate) fn commit(&self, write: Write) -> Result<(), RuntimeError> {
        let expected = write.expected;
        self.inner
            .store
            .commit(write)
            .map_err(|e| self.refused(expected, e))
    }

    /// The error of a write that expected `expected` and that the store refused.
    #[cold]
    pub(crate) fn refused(&self, expected: Option<Expected>, e: StoreError) -> RuntimeError {
        match e {
            StoreError::Conflict { id, found } => {
                tracing::debug!(object = %id, "conflict");
                self.conflict(id, expected, found.map(|r| r.expected()))
            }
            e => RuntimeError::Store(e),
        }
    }

    pub(crate) fn name(&self, state: StateId) -> String {
        self.machine().state(state).name.to_string()
    }

    pub(crate) fn action_name(&self, action: ActionId) -> &str {
        &self.machine().action(action).name
    }
}

/// What a start asks for: the object, the actor, the action, the version it
/// must find (an HTTP `If-Match`), and the data the action proposes. Lent to
/// the store's step by reference, so that nothing is moved on the path every
/// start takes.
struct Ask<'a> {
    id: &'a ObjectId,
    actor: &'a Actor,
    action: ActionId,
    version: Option<u64>,
    /// Lent too: an `Ask` owns nothing, so nothing is moved to drop it.
    proposed: Option<&'a Arc<str>>,
}

/// A start whose checks, its guards among them, passed on the record at `seen`.
struct Guarded {
    seen: Expected,
    /// Handed over to the first write the store makes.
    admitted: Option<(Change, Start)>,
}

impl Guarded {
    /// The start, decided on the object's `record` as the store has it: it
    /// stands only if the object is still at the version its guards saw, and
    /// only once (the store may ask again after a write it lost).
    #[inline]
    fn decide(&mut self, record: Option<&Record>) -> Result<(Change, Start), Refusal> {
        let record = record.ok_or(Refusal::NotFound)?;
        let conflict = Refusal::Conflict {
            expected: Some(self.seen),
            found: Some(record.expected()),
        };
        match record.expected() == self.seen {
            true => self.admitted.take().ok_or(conflict),
            false => Err(conflict),
        }
    }
}

/// A started action's handle alone, as `start` answers it.
#[inline(always)]
fn handle<'r, S: Store>(held: InFlight<'r, S>, (): ()) -> InFlight<'r, S> {
    held
}

/// A started action's handle beside what its start read.
#[inline(always)]
fn pair<'r, S: Store, R>(held: InFlight<'r, S>, read: R) -> (InFlight<'r, S>, R) {
    (held, read)
}

/// What a start that passed its checks hands its [`InFlight`], once the store has
/// taken its write.
struct Start {
    rule: crate::in_flight::Taken,
    slot: Slot,
    held: Expected,
    proposed: Option<Arc<str>>,
}

impl Start {
    /// The handle of the action started on `id`.
    #[inline(always)]
    fn begun<'r, S: Store>(
        self,
        runtime: &'r Runtime<S>,
        id: Cow<'r, ObjectId>,
    ) -> InFlight<'r, S> {
        tracing::debug!(version = self.held.version, "started");
        InFlight::new(runtime, id, self.rule, self.slot, self.held, self.proposed)
    }
}
