//! `fsm-runtime`: one action at a time per object, and only the right actor moves it.
//!
//! A [`Runtime`] holds one checked [`Machine`](fsm_core::Machine) and a [`Store`] of
//! objects of that machine. Every change of an object's state goes through it:
//!
//! - [`Runtime::create`] puts a new object in the initial state.
//! - [`Runtime::start`] checks the request (the object is not busy, the table has the
//!   action from the current state, the actor holds one of the action's roles and owns
//!   the current state, every guard agrees) and moves the object into the action's
//!   transition state by compare-and-set. The caller gets an [`InFlight`] handle.
//! - [`InFlight::complete`] moves it to the action's target (or back to where it
//!   started); [`InFlight::fail`] moves it back to where it started. A handle dropped
//!   without either leaves the object visibly in its transition state, marked as held
//!   by an abandoned action, for the healer.
//!
//! Every accepted move is one atomic write of the store: the new record (state,
//! version, time of change, the in-flight action and its holder) together with its
//! [`Entry`] in the object's history, published to [`Watcher`]s. A write whose
//! expected state and version no longer hold fails with a conflict carrying what was
//! found: OpenvCloud's `409 Conflict: Other action currently happening`.
//!
//! There is no way to write a record except through these checks: the [`Store`]
//! trait takes a [`Write`], which only the runtime can build.
//!
//! On top: a [`Queuer`] runs requested actions one at a time per object on a pool
//! of workers (OpenvCloud's queuer), and a [`Healer`] rolls back objects stuck in a
//! transition state.
//!
//! # Guarantees
//!
//! - **One action at a time.** At most one visible action holds an object, and at
//!   most one hidden one beside it; a start that finds it held is refused
//!   ([`RuntimeError::Busy`]), a start or an end that loses a compare-and-set to
//!   another writer is [`RuntimeError::Conflict`] and writes nothing.
//! - **Fencing.** A started action carries a [`Fence`]: the version its start wrote,
//!   higher for every later start on the object. Pass it to the systems the work
//!   drives and have them refuse a lower one. [`InFlight::still_held`] says whether
//!   the hold still stands or who revoked it and when; a [`Queuer`] checks it before
//!   every step of a job's work and stops with [`QueueError::Revoked`] instead of
//!   acting on an object it no longer holds. A handle lost while its action still
//!   holds the object (a completion the store could not write, a restarted
//!   process) is taken up again by its fence, by the actor who started the action:
//!   [`Runtime::resume`].
//! - **Healing only what is dead or overdue.** A [`Healer`] rolls back a hold whose
//!   holder is gone (a dropped handle in process; an expired lease on etcd) at
//!   once, and a live one only past its hard deadline: the spec's `deadline` for the
//!   transition state or the action, else the healer's own. A slow, live action is
//!   left alone. The rolled-back holder's completion is a `409` that writes nothing.
//! - **Histories are whole.** A state change and its [`Entry`] are written in one
//!   step, in version order; [`check_history`] verifies a history is a path of the
//!   machine. Watchers see each object's writes in order; one that falls behind,
//!   or whose store's feed broke, is told ([`Lagged`]) rather than left with a gap.
//! - **Names on the wire; specs that evolve.** Persistent stores keep states and
//!   actions by name with the spec's fingerprint ([`wire`]): adding or reordering
//!   states and actions changes nothing stored, `renamed_from` in the spec carries
//!   renames, and [`Store::bind`] refuses to open a store holding objects the new
//!   spec cannot read, listing them ([`StoreError::Incompatible`]).
//!
//! ```
//! use fsm_runtime::{Actor, MemoryStore, Runtime, RuntimeError};
//!
//! let vm = fsm_core::spec::load_str("vm.toml", r#"
//!     [machine]
//!     name = "vm"
//!     initial = "HALTED"
//!     [states]
//!     HALTED = "Off"
//!     STARTING = { transition = true }
//!     RUNNING = "On"
//!     [actions]
//!     start = { from = "HALTED", via = "STARTING", to = "RUNNING" }
//!     stop = { from = "RUNNING", to = "HALTED" }
//! "#)?;
//! let runtime = Runtime::new(vm, MemoryStore::new())?;
//! let alice = Actor::new("alice");
//!
//! runtime.create("vm-1", &alice)?;
//! let start = runtime.start("vm-1", &alice, "start")?;
//! assert_eq!(runtime.state_name("vm-1")?, "STARTING");
//!
//! // One action at a time: a second request is refused while `start` runs.
//! let refused = runtime.start("vm-1", &alice, "start").unwrap_err();
//! assert!(matches!(refused, RuntimeError::Busy { .. }));
//! assert_eq!(
//!     refused.to_string(),
//!     "cannot execute action at this time: vm-1 is STARTING while `start` runs (held by alice)"
//! );
//!
//! start.complete()?;
//! assert_eq!(runtime.state_name("vm-1")?, "RUNNING");
//! assert_eq!(runtime.history("vm-1")?.len(), 3); // created, started, completed
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Waiting for a busy object
//!
//! A [`Queuer`] orders the requests of one process. A process that finds an
//! object held by another one (several processes on one etcd prefix) and would
//! rather wait than give up calls [`Runtime::start_when_free_async`] (or, on a
//! thread of its own, [`Runtime::start_when_free`] with a time to wait): it waits
//! for the object's next write, not a fixed pause, subscribing to the object's
//! writes *before* each try, so a write between a refusal and the wait is not
//! missed, and tries again at each one (or at once when its [`Watcher`]
//! lagged: writes were missed), until the action starts, is refused for
//! another reason, or the future it was given to give up on completes (a
//! timer, a cancellation). Only one action still runs at a time: the start's
//! compare-and-set decides, whoever waits. (`fsm serve` does the same for REST
//! clients, `?wait=SECONDS`, and also orders its waiters first come, first
//! served.)
//!
//! ```
//! # use std::time::Duration;
//! # use fsm_runtime::{Actor, MemoryStore, Runtime, RuntimeError};
//! # let vm = fsm_core::spec::load_str("vm.toml", r#"
//! #     [machine]
//! #     name = "vm"
//! #     initial = "HALTED"
//! #     [states]
//! #     HALTED = "Off"
//! #     STARTING = { transition = true }
//! #     RUNNING = "On"
//! #     [actions]
//! #     start = { from = "HALTED", via = "STARTING", to = "RUNNING" }
//! #     stop = { from = "RUNNING", to = "HALTED" }
//! # "#)?;
//! # let runtime = Runtime::new(vm, MemoryStore::new())?;
//! # let alice = Actor::new("alice");
//! # runtime.create("vm-1", &alice)?;
//! # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
//! let starting = runtime.start_async("vm-1", &alice, "start").await?;
//! // `stop` waits for `start` to end (at most five seconds), then starts from
//! // where `start` left the VM.
//! let (stopping, ()) = tokio::join!(
//!     runtime.start_when_free_async("vm-1", &alice, "stop", tokio::time::sleep(Duration::from_secs(5))),
//!     async { starting.complete_async().await.map(drop).unwrap() },
//! );
//! stopping?.complete_async().await?;
//! assert_eq!(runtime.state_name("vm-1")?, "HALTED");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Cancel safety
//!
//! An async call that writes (`create_async`, `start_async`,
//! `complete_async`, `remove_async`, ...) is not taken back by dropping its
//! future: a `select!` whose other branch won, a `timeout` around the call, a
//! request whose client went away. On the [`MemoryStore`] (a store that
//! [never waits](Store::never_waits)) a call decides and writes in its first
//! poll, so a dropped future either did all of it or nothing. On a store
//! across the network (`fsm-etcd`) the write is on its way once the call was
//! first polled, and lands all the same: an object is
//! created or removed as asked, a completion lands or the handle, dropped
//! with the future, records the action abandoned.
//!
//! A start never leaves an object held with no handle to end it: on a store
//! that [runs it detached](Store::runs_detached) (the etcd store does) the
//! async start runs whole on the store's own thread, where its handle, if the
//! start lands after its future is gone, is dropped, which records the
//! action abandoned, and the next [`Healer`] pass rolls it back, with or
//! without a deadline. So a dropped start costs the object until that pass;
//! to bound a call without that cost, use the store's own timeout
//! (`EtcdBuilder::timeout`: the call then answers
//! [`StoreError::Unavailable`]) rather than dropping it, or run a start whose
//! caller may go away as a task of its own (`tokio::spawn`) that ends what
//! it started, as `fsm serve` does for each request.
//!
//! # Guards in CEL (feature `cel`)
//!
//! A guard the spec writes as a CEL expression is evaluated by the runtime, with no
//! code of yours (code given with [`RuntimeBuilder::guard`] wins over it):
//!
//! ```toml
//! [guards]
//! keys_deleted = { description = "All disk encryption keys were deleted", cel = "size(object.data.disk_keys) == 0" }
//! ```
//!
//! The expression sees `object` (`id`, `state`, `version` and `data`, the object's
//! JSON data or `null`), `action` (the action's name), `actor` (`name`, and
//! `roles`, a list) and `proposed` (`data`, the data the action would leave, when
//! it was started with [`Runtime::start_changing`]; otherwise `null`). A guard over
//! `object.data` and `proposed.data` checks a change of data, like a Kubernetes
//! transition rule over `oldSelf` and `self`:
//!
//! ```toml
//! keeps_keys = { description = "No key is removed", cel = "object.data.disk_keys.all(k, k in proposed.data.disk_keys)" }
//! ```
//!
//! It must answer a boolean; an expression that fails on an object (a missing
//! field, a type mismatch) or answers something else refuses the action, and the
//! reason is logged.
//!
//! ```
//! # #[cfg(feature = "cel")] {
//! use fsm_runtime::{Actor, MemoryStore, Runtime, RuntimeError};
//!
//! let machine = fsm_core::spec::load_str("machine.toml", r#"
//!     [machine]
//!     name = "machine"
//!     initial = "Retiring"
//!     [guards]
//!     keys_deleted = { description = "Every disk key is deleted", cel = "size(object.data.keys) == 0" }
//!     [states]
//!     Retiring = "Being retired"
//!     Retired = { terminal = true }
//!     [actions]
//!     retire = { from = "Retiring", to = "Retired", guards = "keys_deleted" }
//! "#)?;
//! let machines = Runtime::new(machine, MemoryStore::new())?; // no code for the guard
//! let ops = Actor::new("ops");
//! machines.create_with("m-1", &ops, Some(r#"{"keys": ["k1"]}"#.into()))?;
//! machines.create_with("m-2", &ops, Some(r#"{"keys": []}"#.into()))?;
//!
//! let refused = machines.run("m-1", &ops, "retire").unwrap_err();
//! assert!(matches!(refused, RuntimeError::Guard { ref guard, .. } if guard == "keys_deleted"));
//! machines.run("m-2", &ops, "retire")?;
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// docs.rs (`--cfg docsrs`, a nightly) marks each item a feature gates with it.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod admit;
#[cfg(feature = "cel")]
mod cel;
mod clock;
mod error;
mod heal;
mod history;
mod in_flight;
mod memory;
mod name;
mod park;
mod queue;
mod runtime;
mod store;
mod sync;
// The unit tests use the suite's machine too.
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod wire;
mod write;

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// The 32-bit id that stands for none: a handle's rule without a transition
/// state (`in_flight::Taken`), a memory store's entry without an action.
pub(crate) const NO_ID: u32 = u32::MAX;

/// Whether a machine's `states` and `actions` are numbered within 32 bits with
/// the last number, [`NO_ID`], left for "none": the bound of the ids a
/// started action's handle keeps (`in_flight::Taken`) and of the memory
/// store's history entries.
pub(crate) fn ids_fit(states: usize, actions: usize) -> bool {
    // `n` ids are numbered 0 to `n - 1`, all under `u32::MAX` when `n` fits.
    let fits = |n: usize| u32::try_from(n).is_ok();
    fits(states) && fits(actions)
}

/// The runtime's refusal of `machine`, with `states` states and `actions`
/// actions, if it numbers more of either than [`ids_fit`] allows.
pub(crate) fn too_many_ids(machine: &str, states: usize, actions: usize) -> Option<RuntimeError> {
    (!ids_fit(states, actions)).then(|| RuntimeError::MachineTooLarge {
        machine: machine.to_owned(),
        states,
        actions,
    })
}

/// Whether a subscriber may want the runtime's debug spans and events: the
/// check `tracing`'s macros make first, for code that would otherwise build a
/// span nobody records.
#[inline]
pub(crate) fn tracing_debug() -> bool {
    use tracing::level_filters::{LevelFilter, STATIC_MAX_LEVEL};
    STATIC_MAX_LEVEL >= LevelFilter::DEBUG && LevelFilter::current() >= LevelFilter::DEBUG
}

pub use admit::GuardContext;
pub use clock::{Clock, CounterClock, ManualClock, SystemClock, rfc3339};
pub use error::{RuntimeError, StoreError};
pub use fsm_core::ActionRef;
pub use heal::{HealReport, Healed, Healer, PeriodicHealer};
pub use history::{HistoryError, check_history};
pub use in_flight::{Fence, InFlight, Revocation};
pub use memory::MemoryStore;
pub use name::ActorName;
/// The queuer's parking of idle workers, for the model checker's tests
/// (`tests/loom.rs`) only.
#[cfg(fsm_loom)]
#[doc(hidden)]
pub use park::Parking as LoomParking;
pub use queue::{QueueError, Queuer, QueuerBuilder, Request, Ticket, Work};
pub use runtime::{Runtime, RuntimeBuilder, StateList};
pub use store::{
    Entry, EntryKind, Event, Expected, Holder, Lagged, Publisher, Record, Records, Removal, Store,
    WatchStream, Watcher, Write,
};
pub use write::Change;

/// The name of an object in a store: `vm-42`, a UUID, a machine's serial.
///
/// An id is a pointer to its text, cloned by a reference count. Beside the
/// pointer it carries the text's hash, taken once when the id is made, so that
/// the stores and the queuer find an object by an id they are given without
/// hashing its text again, and without reading the text's allocation at all:
/// that allocation's line holds the reference count, which a thread queueing
/// a request writes while a worker on another core looks the object up
/// (BENCHMARKS.md, sixty-first session). The hash is keyed with a seed drawn
/// once per process (ids sent by a client cannot be chosen to collide), so it
/// differs between processes and is never stored or sent. Making an id from
/// text allocates once: a caller that acts on an object often keeps its
/// `ObjectId` and lends it (`&id`, see [`IntoObjectId`]).
#[derive(Clone)]
pub struct ObjectId {
    text: Arc<str>,
    hash: u64,
}

/// Equal text. Two clones of one id share their text, so a store finding the id
/// the caller holds compares one pointer, not the bytes.
impl PartialEq for ObjectId {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.text, &other.text) || (self.hash == other.hash && self.text == other.text)
    }
}

impl Eq for ObjectId {}

/// By text.
impl PartialOrd for ObjectId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// By text.
impl Ord for ObjectId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

/// The text's hash, consistent with equality and with `Borrow<str>`.
impl std::hash::Hash for ObjectId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

/// The hasher of ids' texts, seeded once per process.
static ID_HASHER: std::sync::LazyLock<foldhash::fast::RandomState> =
    std::sync::LazyLock::new(Default::default);

impl ObjectId {
    fn new(text: &str) -> ObjectId {
        let hash = std::hash::BuildHasher::hash_one(&*ID_HASHER, text);
        ObjectId {
            text: Arc::from(text),
            hash,
        }
    }

    /// The id as text.
    #[inline]
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The hash of the id's text, taken when the id was made: equal ids have
    /// equal hashes, within this process.
    #[inline]
    pub(crate) fn hash_code(&self) -> u64 {
        self.hash
    }
}

/// An id beside its first sixteen bytes as a number, for ordering many ids:
/// most comparisons are then of two numbers, not of two texts behind two
/// pointers. The memory store's ordered index holds these (in a scratch loop
/// of 200,000 creates in a random order into a store keeping it, 1.1 µs a
/// create against 2.0 with the ids alone; BENCHMARKS.md), and
/// [`Runtime::states`] sorts by them.
///
/// Ordered as the ids are: the numbers are big-endian, and a text shorter than
/// sixteen bytes is padded with zeros, so two numbers that differ order their
/// texts as the texts' bytes do, and equal numbers fall back on the texts.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct OrderedId {
    prefix: u128,
    /// The id.
    pub(crate) id: ObjectId,
}

impl OrderedId {
    pub(crate) fn new(id: ObjectId) -> Self {
        let mut bytes = [0; 16];
        let text = id.as_str().as_bytes();
        let n = text.len().min(16);
        bytes[..n].copy_from_slice(&text[..n]);
        OrderedId {
            prefix: u128::from_be_bytes(bytes),
            id,
        }
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<&str> for ObjectId {
    fn from(s: &str) -> Self {
        ObjectId::new(s)
    }
}

impl From<String> for ObjectId {
    fn from(s: String) -> Self {
        ObjectId::new(&s)
    }
}

impl From<&String> for ObjectId {
    fn from(s: &String) -> Self {
        ObjectId::new(s)
    }
}

/// Maps and sets keyed by `ObjectId` can be searched with a `&str`.
impl std::borrow::Borrow<str> for ObjectId {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

/// The id's text, as [`ObjectId::as_str`] gives it: an id reads as a `&str`
/// (`id.starts_with("vm-")`), as an [`ActorName`] does.
impl std::ops::Deref for ObjectId {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for ObjectId {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

/// Equal text: `assert_eq!(record_id, "vm-1")`.
impl PartialEq<str> for ObjectId {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

/// Equal text.
impl PartialEq<&str> for ObjectId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Any text is an id: `"vm-1".parse::<ObjectId>()` never fails.
impl std::str::FromStr for ObjectId {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(ObjectId::new(s))
    }
}

impl From<&ObjectId> for ObjectId {
    fn from(id: &ObjectId) -> Self {
        id.clone()
    }
}

/// What names an object to the runtime, its queuer and its watchers: an
/// `ObjectId` or `&ObjectId`, or text (`&str`, `String`, `&String`). A read
/// (`state`, `get`, `history`) looks the object up by the id the caller lends,
/// and copies nothing; a call that keeps the id (a creation, a queued request)
/// takes its own. A start's handle takes [`IntoHeldId`]: the same ids, an
/// `&ObjectId` lent to the handle.
///
/// ```
/// # use fsm_runtime::{Actor, MemoryStore, ObjectId, Runtime};
/// # let machine = fsm_core::spec::load_str("vm.toml", r#"
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
/// let rt = Runtime::new(machine, MemoryStore::new())?;
/// let ops = Actor::new("ops");
/// let vm = ObjectId::from("vm-1");
/// rt.create(&vm, &ops)?;
/// rt.run(&vm, &ops, "start")?;
/// assert_eq!(rt.state_name(&vm)?, "RUNNING"); // `vm` lent to the read
/// assert_eq!(rt.state_name("vm-1")?, "RUNNING"); // an id made from text
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait IntoObjectId {
    /// The id, for a caller that keeps it (a lent id is cloned: a reference
    /// count).
    fn into_object_id(self) -> ObjectId;

    /// The id, lent for as long as `self` is, when `self` is one.
    fn object_id(&self) -> Cow<'_, ObjectId>;
}

impl IntoObjectId for ObjectId {
    #[inline]
    fn into_object_id(self) -> ObjectId {
        self
    }

    #[inline]
    fn object_id(&self) -> Cow<'_, ObjectId> {
        Cow::Borrowed(self)
    }
}

impl IntoObjectId for &ObjectId {
    #[inline]
    fn into_object_id(self) -> ObjectId {
        self.clone()
    }

    #[inline]
    fn object_id(&self) -> Cow<'_, ObjectId> {
        Cow::Borrowed(self)
    }
}

impl IntoObjectId for &str {
    fn into_object_id(self) -> ObjectId {
        self.into()
    }

    fn object_id(&self) -> Cow<'_, ObjectId> {
        Cow::Owned((*self).into())
    }
}

impl IntoObjectId for String {
    fn into_object_id(self) -> ObjectId {
        self.into()
    }

    fn object_id(&self) -> Cow<'_, ObjectId> {
        Cow::Owned(self.into())
    }
}

impl IntoObjectId for &String {
    fn into_object_id(self) -> ObjectId {
        self.into()
    }

    fn object_id(&self) -> Cow<'_, ObjectId> {
        Cow::Owned((*self).into())
    }
}

/// What names the object of a start ([`Runtime::start`](crate::Runtime::start),
/// [`start_at`](crate::Runtime::start_at),
/// [`start_changing`](crate::Runtime::start_changing)) for its handle to hold:
/// the same ids as [`IntoObjectId`]. An `&ObjectId` is lent to the handle,
/// which then lives no longer than the id (and costs no reference count); an
/// `ObjectId` is moved into it; an id made from text is made for it.
///
/// ```
/// # use fsm_runtime::{Actor, MemoryStore, ObjectId, Runtime};
/// # let machine = fsm_core::spec::load(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/vm.toml"))?;
/// let rt = Runtime::new(machine, MemoryStore::new())?;
/// let ops = Actor::new("ops");
/// let vm = ObjectId::from("vm-1");
/// rt.create(&vm, &ops)?;
/// let deploy = rt.start(&vm, &ops, "deploy")?; // borrows `vm`
/// deploy.complete()?;
/// // A handle that outlives the id it was started with takes its own.
/// let reboot = rt.start(format!("vm-{}", 1), &ops, "reboot")?;
/// reboot.complete()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait IntoHeldId<'a> {
    /// The id, lent for `'a` when `self` lends one.
    fn into_held_id(self) -> Cow<'a, ObjectId>;
}

impl<'a, 'b: 'a> IntoHeldId<'a> for &'b ObjectId {
    #[inline]
    fn into_held_id(self) -> Cow<'a, ObjectId> {
        Cow::Borrowed(self)
    }
}

impl<'a> IntoHeldId<'a> for ObjectId {
    #[inline]
    fn into_held_id(self) -> Cow<'a, ObjectId> {
        Cow::Owned(self)
    }
}

impl<'a> IntoHeldId<'a> for &str {
    fn into_held_id(self) -> Cow<'a, ObjectId> {
        Cow::Owned(self.into())
    }
}

impl<'a> IntoHeldId<'a> for String {
    fn into_held_id(self) -> Cow<'a, ObjectId> {
        Cow::Owned(self.into())
    }
}

impl<'a> IntoHeldId<'a> for &String {
    fn into_held_id(self) -> Cow<'a, ObjectId> {
        Cow::Owned(self.into())
    }
}

/// As a JSON string (or any format's string).
impl serde::Serialize for ObjectId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// From a string, read in place where the format lends it (JSON's, unless it
/// has escapes): the id's one allocation is the only one.
impl<'de> serde::Deserialize<'de> for ObjectId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;

        impl serde::de::Visitor<'_> for Text {
            type Value = ObjectId;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object's id, as a string")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<ObjectId, E> {
                Ok(ObjectId::new(text))
            }
        }

        deserializer.deserialize_str(Text)
    }
}

/// Who asks for an action: an operator, an admin, a controller. An actor holds
/// roles; an action that names roles needs one of them, and a state with an owner
/// is left only by an actor holding the owner's role.
///
/// ```
/// use fsm_runtime::{Actor, MemoryStore, Runtime, RuntimeError};
///
/// // Mizar: an object in `Init` is the Network Operator's to move.
/// let machine = fsm_core::spec::load_str("net.toml", r#"
///     [machine]
///     name = "network"
///     initial = "Init"
///     [roles]
///     network-operator = "Provisions networks"
///     [states]
///     Init = { owner = "network-operator" }
///     Provisioned = "Ready"
///     [actions]
///     provision = { from = "Init", to = "Provisioned" }
///     update = { from = "Provisioned", to = "Provisioned" }
/// "#)?;
/// let networks = Runtime::new(machine, MemoryStore::new())?;
/// let operator = Actor::new("network-operator-0").with_role("network-operator");
/// let rogue = Actor::new("rogue");
/// networks.create("net-1", &operator)?;
///
/// let refused = networks.run("net-1", &rogue, "provision").unwrap_err();
/// assert!(matches!(refused, RuntimeError::NotOwner { ref owner, .. } if owner == "network-operator"));
/// networks.run("net-1", &operator, "provision")?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Actor {
    name: ActorName,
    roles: Arc<[Arc<str>]>,
}

impl Actor {
    /// An actor with no role.
    pub fn new(name: impl AsRef<str>) -> Self {
        Actor {
            name: ActorName::new(name),
            roles: Arc::new([]),
        }
    }

    /// The same actor, also holding `role`.
    pub fn with_role(self, role: impl AsRef<str>) -> Self {
        let mut roles: Vec<Arc<str>> = self.roles.iter().cloned().collect();
        if !self.has_role(role.as_ref()) {
            roles.push(role.as_ref().into());
        }
        Actor {
            name: self.name,
            roles: roles.into(),
        }
    }

    /// The actor's name, as history records it.
    #[inline]
    pub fn name(&self) -> &'static str {
        self.name.as_str()
    }

    /// The actor's name, interned, as a holder and an entry keep it.
    #[inline]
    pub fn actor_name(&self) -> ActorName {
        self.name
    }

    /// The roles the actor holds.
    pub fn roles(&self) -> impl Iterator<Item = &str> {
        self.roles.iter().map(|r| &**r)
    }

    /// Does the actor hold `role`?
    #[inline]
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| &**r == role)
    }
}

impl fmt::Debug for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Actor")
            .field("name", &self.name)
            .field(
                "roles",
                &self.roles.iter().map(|r| &**r).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// This crate's README (its page on crates.io): its examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use super::ObjectId;

    #[test]
    fn ids_made_apart_from_one_text_are_one_id() {
        let a = ObjectId::from("vm-1");
        let b = ObjectId::from(String::from("vm-1"));
        let c: ObjectId = serde_json::from_str("\"vm-1\"").unwrap();
        assert!(!std::sync::Arc::ptr_eq(&a.text, &b.text));
        assert_eq!(a, b);
        assert_eq!(a, c);
        assert_eq!(a.hash_code(), b.hash_code());
        assert_eq!(a.hash_code(), c.hash_code());
        assert_ne!(a, ObjectId::from("vm-2"));
        assert_eq!(serde_json::to_string(&c).unwrap(), "\"vm-1\"");
        // And equal to its text, as text.
        let d: ObjectId = "vm-1".parse().unwrap();
        assert_eq!(d, a);
        assert_eq!(d, "vm-1");
        assert!(d != "vm-10" && *d == *"vm-1" && d.starts_with("vm-"));
        assert_eq!(d.as_ref(), "vm-1");
    }

    /// A machine that numbers more states or actions than 32 bits (the last
    /// number kept) is refused with its counts; one at the bound is not.
    #[test]
    fn a_machine_numbering_more_than_32_bits_of_ids_is_refused() {
        let most = super::NO_ID as usize;
        assert!(super::too_many_ids("vm", most, most).is_none());
        assert!(super::too_many_ids("vm", 3, 0).is_none());
        for (states, actions) in [(most + 1, 1), (1, most + 1)] {
            let refused = super::too_many_ids("vm", states, actions).expect("refused");
            assert_eq!(
                refused,
                crate::RuntimeError::MachineTooLarge {
                    machine: "vm".into(),
                    states,
                    actions
                }
            );
            assert!(
                refused
                    .to_string()
                    .contains(&format!("{states} states and {actions} actions"))
            );
        }
    }

    /// A handle's rule, kept in 32-bit ids, is the rule it was taken from, with
    /// or without a transition state, up to the largest id a machine may have.
    #[test]
    fn a_taken_rule_is_the_rule() {
        use fsm_core::{ActionId, Rule, StateId};
        let last = crate::NO_ID as usize - 1;
        for via in [None, Some(StateId(0)), Some(StateId(last))] {
            for changes_state in [false, true] {
                let rule = Rule {
                    action: ActionId(last),
                    origin: StateId(last),
                    via,
                    target: StateId(7),
                    changes_state,
                };
                assert_eq!(crate::in_flight::Taken::new(rule).rule(), rule);
            }
        }
    }

    /// A start given an `&ObjectId` lends it to its handle: no reference is
    /// counted until the handle is made to own one.
    #[test]
    fn a_start_lends_its_id_to_its_handle() {
        let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/vm.toml");
        let rt = crate::Runtime::new(
            fsm_core::spec::load(spec).unwrap(),
            crate::MemoryStore::new(),
        )
        .unwrap();
        let ops = crate::Actor::new("ops");
        let vm = ObjectId::from("vm-1");
        rt.create(&vm, &ops).unwrap();
        let counted = std::sync::Arc::strong_count(&vm.text); // the caller's and the store's
        let deploy = rt.start(&vm, &ops, "deploy").unwrap();
        assert!(std::ptr::eq(deploy.id(), &vm));
        assert_eq!(std::sync::Arc::strong_count(&vm.text), counted);
        let owned = deploy.into_owned();
        assert_eq!(std::sync::Arc::strong_count(&vm.text), counted + 1);
        drop(vm);
        assert_eq!(owned.id().as_str(), "vm-1");
        owned.complete().unwrap();
        // Text makes the handle's own id.
        let reboot = rt.start(String::from("vm-1"), &ops, "reboot").unwrap();
        assert_eq!(reboot.complete().unwrap().version, 5);
    }

    #[test]
    fn maps_of_ids_are_searched_by_text_and_sorted_by_text() {
        let mut map = HashMap::new();
        map.insert(ObjectId::from("vm-1"), 1);
        map.insert(ObjectId::from("vm-2"), 2);
        assert_eq!(map.get("vm-2"), Some(&2));
        assert_eq!(map.get(&ObjectId::from("vm-1")), Some(&1));
        let sorted: BTreeSet<_> = ["b", "a", "c"].into_iter().map(ObjectId::from).collect();
        let texts: Vec<_> = sorted.iter().map(ObjectId::as_str).collect();
        assert_eq!(texts, ["a", "b", "c"]);
    }
}
