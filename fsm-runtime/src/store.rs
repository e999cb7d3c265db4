//! What a store keeps, and the trait a backend implements.

use crate::sync::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use tokio::sync::broadcast;

use fsm_core::{ActionId, Machine, StateId};

use crate::{ActorName, Change, IntoObjectId, ObjectId, StoreError};

/// An object's current state, as a store keeps it.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Record {
    /// The current state.
    pub state: StateId,
    /// Bumped by one on every write; the first write (creation) is version 1,
    /// or, for an id whose earlier object was removed, the version after
    /// that removal's (after a removal the store has forgotten, some version
    /// past it: [`Store::commit`]).
    pub version: u64,
    /// When the last write happened.
    pub changed_at: SystemTime,
    /// The action running on the object, if any. Boxed, so that a record stays
    /// small to move and copy; the memory store keeps an object's box from one
    /// action to the next.
    pub in_flight: Option<Box<Holder>>,
    /// The hidden action running on the object, if any: it keeps the status, and a
    /// user's action may start beside it (see [`Runtime::start`](crate::Runtime::start)).
    pub hidden: Option<Box<Holder>>,
    /// The object's data, as JSON text: set when it is created
    /// ([`Runtime::create_with`](crate::Runtime::create_with)) and replaced when an
    /// action completes with new data ([`InFlight::complete_with`](crate::InFlight::complete_with)),
    /// so every change of data passes the table's rules for that action. The
    /// runtime stores it and never reads it; guards may
    /// ([`GuardContext::record`](crate::GuardContext)).
    pub data: Option<Arc<str>>,
}

/// Always inlined: a completion hands back a copy of the record it wrote, and
/// in a program that copies records in several places rustc kept the copy out
/// of line, which cost a blocking action about 8% of its time
/// (BENCHMARKS.md, sixtieth session). What it inlines is small: the
/// holders' boxes, when there are any, are copied by calls.
impl Clone for Record {
    #[inline(always)]
    fn clone(&self) -> Record {
        Record {
            state: self.state,
            version: self.version,
            changed_at: self.changed_at,
            in_flight: self.in_flight.clone(),
            hidden: self.hidden.clone(),
            data: self.data.clone(),
        }
    }
}

impl Record {
    /// A record in `state` at `version`, last written at `changed_at`, with no
    /// action in flight and no data: a starting point for a test or a store's
    /// own conversions (the fields are public; the struct is
    /// `#[non_exhaustive]`, so that a field added later breaks no caller).
    ///
    /// ```
    /// use std::time::SystemTime;
    /// use fsm_core::StateId;
    /// use fsm_runtime::Record;
    ///
    /// let mut record = Record::new(StateId(0), 1, SystemTime::UNIX_EPOCH);
    /// record.data = Some(r#"{"disk":"sda"}"#.into());
    /// assert_eq!(record.expected().version, 1);
    /// assert!(record.in_flight.is_none());
    /// ```
    pub fn new(state: StateId, version: u64, changed_at: SystemTime) -> Self {
        Record {
            state,
            version,
            changed_at,
            in_flight: None,
            hidden: None,
            data: None,
        }
    }

    /// The state and version a write must find for this record to be current.
    #[inline]
    pub fn expected(&self) -> Expected {
        Expected {
            state: self.state,
            version: self.version,
        }
    }
}

/// The action in flight on an object and who holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The action.
    pub action: ActionId,
    /// The static state it started from, where failing returns.
    pub origin: StateId,
    /// The actor who started it.
    pub actor: ActorName,
    /// When it started.
    pub since: SystemTime,
    /// Its handle was dropped without completing or failing: nobody will finish
    /// it, and the healer may roll it back at once.
    pub abandoned: bool,
    /// The version of the record its start wrote: which start this is.
    pub version: u64,
    /// The session of the process that started it, in a store that processes
    /// share and that tells a dead process's actions by its session: the etcd
    /// store's lease of that process, which ends with it (its actions then read
    /// as abandoned). The store names it when the start is written; `None` in
    /// the memory store.
    pub session: Option<i64>,
    /// The data its start proposed ([`Runtime::start_changing`](crate::Runtime::start_changing)),
    /// which its completion writes: kept with the hold, so that the action
    /// taken up again ([`Runtime::resume`](crate::Runtime::resume)) after its
    /// handle was lost completes with it too.
    pub proposed: Option<Arc<str>>,
}

/// The state and version a compare-and-set expects to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Expected {
    /// The state.
    pub state: StateId,
    /// The version.
    pub version: u64,
}

/// What one accepted write did, as the object's history keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Entry {
    /// The record's version after this write.
    pub version: u64,
    /// When.
    pub at: SystemTime,
    /// Who (the healer's name for a rollback).
    pub actor: ActorName,
    /// What kind of write.
    pub kind: EntryKind,
    /// The action concerned (`None` for a creation).
    pub action: Option<ActionId>,
    /// The state before.
    pub from: StateId,
    /// The state after (equal to `from` when the state did not change).
    pub to: StateId,
}

/// The kinds of write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum EntryKind {
    /// The object was created in the initial state.
    Created,
    /// An action started: into its transition state, or holding the object in its
    /// state (an action with no transition state).
    Started,
    /// The action finished: to its target, or back to its origin.
    Completed,
    /// The action failed: back to its origin.
    Failed,
    /// The action's handle was dropped without an outcome; the object keeps its
    /// state until healed.
    Abandoned,
    /// The healer rolled a stuck action back to its origin.
    Healed,
    /// The object was removed ([`Runtime::remove`](crate::Runtime::remove)):
    /// its record and history are gone. No history keeps this entry; it is
    /// the last event watchers get of the object, at the version after its
    /// last, with `from` and `to` the state it was removed in.
    Removed,
}

/// One write as a [`Store`] receives it: the new record, the history entry that
/// goes with it, and what the store must find first.
///
/// Only the runtime builds a `Write`, after its checks; a store can read it but no
/// one else can make one. That is what keeps every change of state behind the
/// runtime's rules.
#[derive(Debug, Clone)]
pub struct Write {
    pub(crate) id: ObjectId,
    pub(crate) expected: Option<Expected>,
    pub(crate) record: Record,
    pub(crate) entry: Entry,
}

impl Write {
    /// The object.
    pub fn id(&self) -> &ObjectId {
        &self.id
    }

    /// The state and version the object must have; `None`: it must not exist.
    pub fn expected(&self) -> Option<Expected> {
        self.expected
    }

    /// The record to store.
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// The history entry to append, in the same atomic write.
    pub fn entry(&self) -> &Entry {
        &self.entry
    }

    /// The write's parts, for a backend that stores them.
    pub fn into_parts(self) -> (ObjectId, Option<Expected>, Record, Entry) {
        (self.id, self.expected, self.record, self.entry)
    }
}

/// An object's removal as a [`Store`] receives it: the object, the state and
/// version it must be at, and the entry watchers get ([`EntryKind::Removed`]).
///
/// As with a [`Write`], only the runtime makes one, after its checks: that the
/// object's state allows removal, by the actor's roles, and that no action
/// holds it.
#[derive(Debug, Clone)]
pub struct Removal {
    pub(crate) id: ObjectId,
    pub(crate) expected: Expected,
    pub(crate) entry: Entry,
}

impl Removal {
    /// The object.
    pub fn id(&self) -> &ObjectId {
        &self.id
    }

    /// The state and version the object must be at.
    pub fn expected(&self) -> Expected {
        self.expected
    }

    /// The entry to publish to watchers: kind [`EntryKind::Removed`], at the
    /// version after `expected`'s.
    pub fn entry(&self) -> &Entry {
        &self.entry
    }

    /// The removal's parts, for a backend that carries them out.
    pub fn into_parts(self) -> (ObjectId, Expected, Entry) {
        (self.id, self.expected, self.entry)
    }
}

/// Every object of a store with its record, or why the record could not be
/// read: what [`Store::records`] answers.
pub type Records = Vec<(ObjectId, Result<Record, StoreError>)>;

/// A state store: records and their histories, changed only by atomic
/// compare-and-set [`Write`]s.
///
/// A backend must apply a write whole or not at all: the record and its history
/// entry together, only if the object is in the expected state at the expected
/// version (or absent, for a creation), and otherwise answer
/// [`StoreError::Conflict`] with what it found. Failures of the backend itself are
/// [`StoreError::Unavailable`], saying whether a retry can help. Every applied write
/// is published to watchers, in version order per object. A [`Removal`] is
/// applied the same way: record and history deleted together, only at the
/// expected version, its entry published last.
///
/// The runtime makes most writes through [`Store::modify`], whose default reads
/// (or takes the copy the store kept, [`Store::cached`]), lets the runtime
/// decide, and commits a compare-and-set `Write`: a backend implements `load` and
/// `commit` and gets it for free. A backend that can hold
/// an object still while the runtime decides (the memory store) overrides it.
pub trait Store: Send + Sync + 'static {
    /// Called by [`RuntimeBuilder::build`](crate::RuntimeBuilder::build) before
    /// any other call: the machine whose objects the store keeps. A store that
    /// persists objects keeps their states and actions by name (see
    /// [`crate::wire`]) and learns here how to read them back; it may refuse a
    /// machine it cannot serve.
    fn bind(&self, machine: &Machine) -> Result<(), StoreError> {
        let _ = machine;
        Ok(())
    }

    /// The object's record, if it exists.
    fn load(&self, id: &ObjectId) -> Result<Option<Record>, StoreError>;

    /// What `read` takes of the object's record, if it exists: a caller that
    /// needs a part of the record (its state, its holder's version) pays for
    /// that part only. The default [`load`](Store::load)s the record whole; the
    /// [`MemoryStore`](crate::MemoryStore) reads it in place, under the object's
    /// shard lock, so `read` must be quick and must not call the store.
    fn load_with<R>(
        &self,
        id: &ObjectId,
        read: impl FnOnce(&Record) -> R,
    ) -> Result<Option<R>, StoreError> {
        Ok(self.load(id)?.as_ref().map(read))
    }

    /// Applies `write` atomically, or refuses it.
    ///
    /// A creation ([`write.expected()`](Write::expected) is `None`) is
    /// applied only if the id has no object, and only at the version its
    /// next object starts at: 1 for an id that never had one, the version
    /// after its removal's for one whose object was removed. A creation at
    /// another version is refused with [`StoreError::CreateAt`] naming the
    /// right one, and the runtime creates again there; so a store remembers
    /// the removal's version of each id it removed until the id is created
    /// again. A store may forget removals after a while
    /// ([`MemoryStore::forget_removals`](crate::MemoryStore::forget_removals)),
    /// if it numbers an id without a removal from past every version it
    /// forgot (not from 1): whatever it forgets, no version of an id is ever
    /// that of another of its objects.
    fn commit(&self, write: Write) -> Result<(), StoreError>;

    /// The version the runtime first tries to create `id` at: a guess, which
    /// [`commit`](Store::commit) corrects with [`StoreError::CreateAt`]. The
    /// default, 1, is right for an id that never had an object on a store
    /// that never forgot a removal; a store that knows better (the etcd
    /// store: past the id's removal it keeps, or past the floor of forgotten
    /// removals it last read) saves the second try.
    fn first_version(&self, id: &ObjectId) -> u64 {
        let _ = id;
        1
    }

    /// The object's history, oldest first (empty if it does not exist).
    fn history(&self, id: &ObjectId) -> Result<Vec<Entry>, StoreError>;

    /// A page of the object's [`history`](Store::history): up to `limit`
    /// entries past version `after` (from the oldest kept when `None`), oldest
    /// first. Listing again after the last entry's version, until a page holds
    /// fewer than `limit`, meets every entry once.
    ///
    /// The default reads the whole history and keeps the page; a store that
    /// can read a range overrides it to read only the page (the etcd store:
    /// one range of keys).
    fn history_after(
        &self,
        id: &ObjectId,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        let past = |e: &Entry| after.is_none_or(|after| e.version > after);
        Ok(self
            .history(id)?
            .into_iter()
            .filter(past)
            .take(limit)
            .collect())
    }

    /// Every object in the store.
    fn ids(&self) -> Result<Vec<ObjectId>, StoreError>;

    /// Every object in the store with its record, sorted by id: what
    /// [`ids`](Store::ids), then [`load`](Store::load) of each, would give, for
    /// callers that keep every object (a listing; one that keeps little of
    /// each looks with [`for_each_record`](Store::for_each_record)). The outer `Err`: the store could not list its objects; an
    /// inner one: that object's record could not be read (say, written by a
    /// newer spec), the others are there all the same.
    ///
    /// The default does just that, a read per object; a store across the
    /// network overrides it to read them all at once (the etcd store: one
    /// transaction).
    fn records(&self) -> Result<Records, StoreError> {
        let mut records = Vec::new();
        for id in self.ids()? {
            match self.load(&id) {
                Ok(Some(record)) => records.push((id, Ok(record))),
                // Gone since it was listed: not listed.
                Ok(None) => {}
                Err(e) => records.push((id, Err(e))),
            }
        }
        records.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        Ok(records)
    }

    /// Calls `look` with every object in the store and its record (or why it
    /// cannot be read), in no set order: [`records`](Store::records) without
    /// the copies and the sort, for callers that keep little of what they
    /// look at (the healer's pass, [`Runtime::states`](crate::Runtime::states),
    /// a count per state). The `Err`: the store could not list its objects.
    ///
    /// `look` may run while the store holds a lock on some of its objects: it
    /// must not call the store (on the [`MemoryStore`](crate::MemoryStore) it
    /// would wait for itself), and should be quick. A store that reads in
    /// parts may fail after `look` has seen some objects (the etcd store, when
    /// a compaction overtakes its snapshot): a caller acts on what it looked
    /// at only once the call returned `Ok`, as the healer does.
    ///
    /// The default reads [`records`](Store::records) and looks at each; the
    /// memory store looks at each record in place, a shard at a time under
    /// the shard's lock.
    fn for_each_record(
        &self,
        mut look: impl FnMut(&ObjectId, Result<&Record, &StoreError>),
    ) -> Result<(), StoreError> {
        for (id, record) in self.records()? {
            look(&id, record.as_ref());
        }
        Ok(())
    }

    /// One page of [`records`](Store::records): up to `limit` objects that
    /// come after `after` (from the first when `None`; `after` need not
    /// exist) in the store's listing order, in that order. Listing again from
    /// the last id of each page, until a page holds fewer than `limit`, meets
    /// every object that exists all along exactly once, however many pages it
    /// takes and whatever is written meanwhile. A page is read as `records`
    /// reads (on etcd, one snapshot); the pages are not one snapshot together.
    ///
    /// The listing order is by id on the [`MemoryStore`](crate::MemoryStore)
    /// and by default. A store may list in an order of its own that it keeps
    /// from page to page (the etcd store: by its keys, where an id's `/` sorts
    /// as `%2F`), so a caller pages from the last id of a page as answered, not
    /// from the greatest.
    ///
    /// The default reads [`ids`](Store::ids), then [`load`](Store::load)s
    /// those of the page; a store that can read a range overrides it to read
    /// only the page.
    fn records_after(&self, after: Option<&ObjectId>, limit: usize) -> Result<Records, StoreError> {
        let mut ids = self.ids()?;
        ids.sort_unstable();
        let from = after.map_or(0, |after| ids.partition_point(|id| id <= after));
        let mut records = Vec::new();
        for id in ids.into_iter().skip(from) {
            if records.len() == limit {
                break;
            }
            match self.load(&id) {
                Ok(Some(record)) => records.push((id, Ok(record))),
                // Gone since it was listed: not listed.
                Ok(None) => {}
                Err(e) => records.push((id, Err(e))),
            }
        }
        Ok(records)
    }

    /// A subscription to every write applied from now on.
    fn watch(&self) -> Result<Watcher, StoreError>;

    /// Removes the object, its record and its whole history, in one atomic
    /// step, if it is at [`removal.expected()`](Removal::expected); otherwise
    /// [`StoreError::Conflict`] with what the store holds (`found: None`: no
    /// such object), and nothing changes. A removal that happened is
    /// published to watchers as [`removal.entry()`](Removal::entry), after
    /// every earlier write of the object. The id is then free: a creation
    /// makes a new object, whose versions go on from the removal's (see
    /// [`commit`](Store::commit)).
    fn remove(&self, removal: Removal) -> Result<(), StoreError>;

    /// [`remove`](Store::remove) for async callers. The default answers with
    /// `remove`, which suits a store whose calls never wait; a store that waits
    /// on the network implements it without blocking the caller's thread.
    fn remove_async(
        &self,
        removal: Removal,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        std::future::ready(self.remove(removal))
    }

    /// How `id`'s last object was removed: the removal's entry, as
    /// [`remove`](Store::remove) published it (who, when, in which state, at
    /// which version), while no object has been created under the id since.
    /// `None` for an id whose object lives, that never had one, or whose
    /// removal the store has forgotten since
    /// ([`MemoryStore::forget_removals`](crate::MemoryStore::forget_removals)). The entry
    /// outlives the object's history: a reader that kept the history (an
    /// audit log) but missed the removal finds it here.
    fn removal(&self, id: &ObjectId) -> Result<Option<Entry>, StoreError>;

    /// [`removal`](Store::removal) for async callers, as
    /// [`load_async`](Store::load_async).
    fn removal_async(
        &self,
        id: &ObjectId,
    ) -> impl Future<Output = Result<Option<Entry>, StoreError>> + Send {
        std::future::ready(self.removal(id))
    }

    /// A read and the change made from it, as one compare-and-set: `decide` sees
    /// the object's record (`None`: absent) and returns the [`Change`] to make with
    /// a value to hand back, or refuses (the inner `Err`; nothing is written).
    /// Answers that value and what `read` takes of the record the change left
    /// (`Record::clone` for all of it, `|_| ()` for nothing: a caller pays only
    /// for what it keeps). The outer `Err` is the store's: the compare-and-set
    /// lost, or the backend failed.
    ///
    /// `decide` may be called again, on a fresher record, when a copy the store
    /// kept turned out stale (and `read` again with it: only the last answer is
    /// handed back).
    ///
    /// The default decides on the copy the store kept
    /// ([`cached`](Store::cached)), else on a fresh [`load`](Store::load), and
    /// commits the change as a [`Write`] compared against that record, so a write
    /// that came in between makes it a [`StoreError::Conflict`]. A decision on a
    /// kept copy stands only if its write lands: when the write loses its
    /// compare-and-set, or the decision is a refusal (which must stand on a
    /// fresh read), the default reads and decides again. A store that can
    /// hold the object still while `decide` runs overrides it and decides on the
    /// record it holds (the [`MemoryStore`](crate::MemoryStore) does, under the
    /// object's shard lock: one lookup, no copy of the record, and no conflict).
    /// `decide` is quick and never calls back into the store: the runtime passes
    /// its own checks and a read of its [`Clock`](crate::Clock) (so that a write
    /// is stamped after the one before it), never a guard.
    fn modify<T, E, R>(
        &self,
        id: &ObjectId,
        mut decide: impl FnMut(Option<&Record>) -> Result<(Change, T), E>,
        mut read: impl FnMut(&Record) -> R,
    ) -> Result<Result<(T, R), E>, StoreError> {
        let (mut record, mut kept) = match self.cached(id) {
            Some(copy) => (Some(copy), true),
            None => (self.load(id)?, false),
        };
        loop {
            match attempt(id, record, kept, &mut decide)? {
                Attempt::Refused(refused) => return Ok(Err(refused)),
                Attempt::Write(write, value) => {
                    if let Some(next) = landed(self.commit_reading(write, &mut read), kept)? {
                        return Ok(Ok((value, next)));
                    }
                }
                Attempt::Again => {}
            }
            (record, kept) = (self.load(id)?, false);
        }
    }

    /// [`modify`](Store::modify) for async callers, with the same default:
    /// [`load_async`](Store::load_async) (unless the store kept a copy), decide, then
    /// [`commit_async`](Store::commit_async). A store that decides on the record
    /// it holds answers with its `modify` (the memory store does).
    fn modify_async<T: Send, E: Send, R: Send>(
        &self,
        id: &ObjectId,
        mut decide: impl FnMut(Option<&Record>) -> Result<(Change, T), E> + Send,
        mut read: impl FnMut(&Record) -> R + Send,
    ) -> impl Future<Output = Result<Result<(T, R), E>, StoreError>> + Send {
        async move {
            let (mut record, mut kept) = match self.cached(id) {
                Some(copy) => (Some(copy), true),
                None => (self.load_async(id).await?, false),
            };
            loop {
                match attempt(id, record, kept, &mut decide)? {
                    Attempt::Refused(refused) => return Ok(Err(refused)),
                    Attempt::Write(write, value) => {
                        let committed = self.commit_reading_async(write, &mut read).await;
                        if let Some(next) = landed(committed, kept)? {
                            return Ok(Ok((value, next)));
                        }
                    }
                    Attempt::Again => {}
                }
                (record, kept) = (self.load_async(id).await?, false);
            }
        }
    }

    /// [`commit`](Store::commit), answering what `read` takes of the record
    /// as stored. The default reads the write's own record: a store that adds
    /// to a record as it writes it (the etcd store names the session of a
    /// start's holder, [`Holder::session`]) answers the record as stored, so
    /// that [`modify`](Store::modify)'s `read`, which the default calls this
    /// for, sees what a later [`load`](Store::load) finds.
    fn commit_reading<R>(
        &self,
        write: Write,
        read: impl FnOnce(&Record) -> R,
    ) -> Result<R, StoreError> {
        let next = read(write.record());
        self.commit(write).map(|()| next)
    }

    /// [`commit_reading`](Store::commit_reading) for async callers, with
    /// [`commit_async`](Store::commit_async).
    fn commit_reading_async<R: Send>(
        &self,
        write: Write,
        read: impl FnOnce(&Record) -> R + Send,
    ) -> impl Future<Output = Result<R, StoreError>> + Send {
        let next = read(write.record());
        async move { self.commit_async(write).await.map(|()| next) }
    }

    /// A copy of the object's record that the store kept from its own last read
    /// or write, for the default [`modify`](Store::modify) to decide on instead
    /// of reading first: a read fewer per action on a store across the network,
    /// when one process drives an object (its start, then its completion, each
    /// one transaction). A decision on it stands only if its write lands, so a
    /// stale copy costs a read, never a wrong answer. The default keeps none.
    fn cached(&self, id: &ObjectId) -> Option<Record> {
        let _ = id;
        None
    }

    /// [`load`](Store::load) for async callers: what the runtime's `_async` calls
    /// await. The default answers with `load`, which suits a store whose calls
    /// never wait (the [`MemoryStore`](crate::MemoryStore)); a store that waits on
    /// the network implements it without blocking the caller's thread.
    fn load_async(
        &self,
        id: &ObjectId,
    ) -> impl Future<Output = Result<Option<Record>, StoreError>> + Send {
        std::future::ready(self.load(id))
    }

    /// [`load_with`](Store::load_with) for async callers: what `read` takes of
    /// the object's record, if it exists. The default reads the record whole
    /// with [`load_async`](Store::load_async); the
    /// [`MemoryStore`](crate::MemoryStore) reads it in place, as its `load_with`.
    fn load_with_async<R: Send>(
        &self,
        id: &ObjectId,
        read: impl FnOnce(&Record) -> R + Send,
    ) -> impl Future<Output = Result<Option<R>, StoreError>> + Send {
        async move { Ok(self.load_async(id).await?.as_ref().map(read)) }
    }

    /// [`commit`](Store::commit) for async callers, as
    /// [`load_async`](Store::load_async).
    fn commit_async(&self, write: Write) -> impl Future<Output = Result<(), StoreError>> + Send {
        std::future::ready(self.commit(write))
    }

    /// [`ids`](Store::ids) for async callers, as
    /// [`load_async`](Store::load_async).
    fn ids_async(&self) -> impl Future<Output = Result<Vec<ObjectId>, StoreError>> + Send {
        std::future::ready(self.ids())
    }

    /// [`records`](Store::records) for async callers, as
    /// [`load_async`](Store::load_async).
    fn records_async(&self) -> impl Future<Output = Result<Records, StoreError>> + Send {
        std::future::ready(self.records())
    }

    /// [`watch`](Store::watch) for async callers: a store whose watch asks its
    /// backend (the etcd store's first one reads etcd's revision, to start its
    /// feed there) awaits the answer instead of blocking the caller's thread.
    /// The default subscribes at once.
    fn watch_async(&self) -> impl Future<Output = Result<Watcher, StoreError>> + Send {
        std::future::ready(self.watch())
    }

    /// [`for_each_record`](Store::for_each_record) for async callers: the
    /// default looks at each of [`records_async`](Store::records_async); the
    /// memory store looks in place, and the etcd store makes each request of
    /// its read off the caller's thread and looks at its records before the
    /// next.
    fn for_each_record_async(
        &self,
        mut look: impl FnMut(&ObjectId, Result<&Record, &StoreError>) + Send,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        async move {
            for (id, record) in self.records_async().await? {
                look(&id, record.as_ref());
            }
            Ok(())
        }
    }

    /// [`records_after`](Store::records_after) for async callers, as
    /// [`load_async`](Store::load_async).
    fn records_after_async(
        &self,
        after: Option<&ObjectId>,
        limit: usize,
    ) -> impl Future<Output = Result<Records, StoreError>> + Send {
        std::future::ready(self.records_after(after, limit))
    }

    /// [`history`](Store::history) for async callers, as
    /// [`load_async`](Store::load_async).
    fn history_async(
        &self,
        id: &ObjectId,
    ) -> impl Future<Output = Result<Vec<Entry>, StoreError>> + Send {
        std::future::ready(self.history(id))
    }

    /// [`history_after`](Store::history_after) for async callers, as
    /// [`load_async`](Store::load_async).
    fn history_after_async(
        &self,
        id: &ObjectId,
        after: Option<u64>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Entry>, StoreError>> + Send {
        std::future::ready(self.history_after(id, after, limit))
    }

    /// Whether [`run_detached`](Store::run_detached) runs a call apart from
    /// its caller, to its end. If so, the runtime's async start runs there
    /// whole, so that a start whose future is dropped (a `select!`, a
    /// `timeout`) never leaves an object held with no handle: what it began
    /// lands or not there, and a handle it made is dropped there, which
    /// records the action abandoned (rolled back by the next
    /// [`Healer`](crate::Healer) pass). The default is no: a store whose calls
    /// never wait (the [`MemoryStore`](crate::MemoryStore)) decides and
    /// writes in the start's first poll, so its future, dropped, has begun
    /// nothing. A store across the network that says no leaves its async
    /// starts as its `modify_async` makes them (see the crate's "Cancel
    /// safety").
    fn runs_detached(&self) -> bool {
        false
    }

    /// Whether every call of this store ends without waiting: on nothing
    /// across a network or a disk, and on no lock held for longer than a
    /// write takes (the [`MemoryStore`](crate::MemoryStore): a shard's lock,
    /// held for nanoseconds). If so, the runtime's async starts and ends run
    /// their blocking forms in their first poll, and
    /// [`run_async`](crate::Runtime::run_async) is the blocking
    /// [`run`](crate::Runtime::run), which spares them the work of the
    /// futures around the store's own (on the memory store, about a tenth of
    /// an async action's time, and a fifth of an async run's: BENCHMARKS.md,
    /// fifty-ninth and sixtieth sessions). A store that says so and waits
    /// blocks the executor's thread meanwhile.
    /// The default is no: the async forms await the store's async calls.
    fn never_waits(&self) -> bool {
        false
    }

    /// Runs `call`, blocking calls of this store (a whole start: its guards,
    /// its read and its write), apart from the caller's task, to its end even
    /// when the returned future is dropped; what `call` returns is then
    /// dropped where it ran. Used when [`runs_detached`](Store::runs_detached)
    /// says so; the default calls `call` at once, on the caller's thread.
    fn run_detached<T: Send + 'static>(
        &self,
        call: impl FnOnce() -> T + Send + 'static,
    ) -> impl Future<Output = Result<T, StoreError>> + Send {
        std::future::ready(Ok(call()))
    }
}

/// What one decision of the defaults of [`Store::modify`] and
/// [`Store::modify_async`] came to.
// Moved once per decision: boxing the write would cost an allocation per write.
#[allow(clippy::large_enum_variant)]
enum Attempt<T, E> {
    /// Refused, on a record that can be trusted.
    Refused(E),
    /// The write to commit and the value to hand back.
    Write(Write, T),
    /// Refused on a kept copy: a refusal stands only on a fresh read.
    Again,
}

/// One decision on `record` (a `kept` copy, or one read).
fn attempt<T, E>(
    id: &ObjectId,
    record: Option<Record>,
    kept: bool,
    decide: impl FnOnce(Option<&Record>) -> Result<(Change, T), E>,
) -> Result<Attempt<T, E>, StoreError> {
    Ok(match decided_write(id, record, decide)? {
        Ok((write, value)) => Attempt::Write(write, value),
        Err(_) if kept => Attempt::Again,
        Err(refused) => Attempt::Refused(refused),
    })
}

/// What was read of a decision's write that landed (`None`: it lost its
/// compare-and-set on a kept copy, which was stale: decide again on a fresh
/// read).
fn landed<R>(committed: Result<R, StoreError>, kept: bool) -> Result<Option<R>, StoreError> {
    match committed {
        Ok(next) => Ok(Some(next)),
        Err(StoreError::Conflict { .. }) if kept => Ok(None),
        Err(e) => Err(e),
    }
}

/// The write `decide` makes of the `record` read (compared against it), or its
/// refusal. A change decided on an absent object is a conflict ([`decided_on`]).
fn decided_write<T, E>(
    id: &ObjectId,
    record: Option<Record>,
    decide: impl FnOnce(Option<&Record>) -> Result<(Change, T), E>,
) -> Result<Result<(Write, T), E>, StoreError> {
    let (change, value) = match decide(record.as_ref()) {
        Ok(decided) => decided,
        Err(refused) => return Ok(Err(refused)),
    };
    let record = decided_on(id, record)?;
    Ok(Ok((change.write(id.clone(), &record), value)))
}

/// What a change was decided on (`found`: the object, or what holds it), or
/// the conflict of a change decided on an absent object: every change is to
/// an object that exists (creation is not a change), so there is nothing to
/// write it over. One rule for every store.
pub(crate) fn decided_on<T>(id: &ObjectId, found: Option<T>) -> Result<T, StoreError> {
    found.ok_or_else(|| StoreError::Conflict {
        id: id.clone(),
        found: None,
    })
}

/// One applied write, as watchers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The object.
    pub id: ObjectId,
    /// The write's history entry.
    pub entry: Entry,
    /// The write's place in the store's order of writes, when the store keeps
    /// one that every process on it sees alike: on etcd, the write's revision.
    /// `None` from a store in one process (the memory store). Along one
    /// watcher, the positions given only grow, so a reader in another process
    /// can go on from the position of the last write it saw.
    pub position: Option<u64>,
}

/// Why a [`Watcher`] returned no event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Lagged {
    /// The watcher fell behind and its buffer overflowed: `missed` events were
    /// dropped for it (writers never wait for a watcher). Reading goes on with the
    /// oldest event still buffered; re-read the objects concerned from the store.
    #[error("watcher lagged behind and missed {missed} events")]
    Missed {
        /// How many.
        missed: u64,
    },
    /// The store's own feed lost events it could not recover (an etcd watch that
    /// resumed after its start revision had been compacted away). Reading goes on
    /// with the events after the gap; re-read every object from the store.
    #[error("the store's feed lost events it could not recover; re-read the objects")]
    Gap,
    /// The store is gone; no event will come.
    #[error("the store was dropped")]
    Closed,
}

/// What a [`Publisher`] sends its watchers.
#[derive(Debug, Clone)]
enum Note {
    Event(Event),
    Gap,
}

/// A subscription to a store's writes, with a bounded buffer.
///
/// A slow watcher never blocks writers; when its buffer is full it loses the oldest
/// events and its next read says how many ([`Lagged::Missed`]).
///
/// ```
/// use fsm_runtime::{Actor, EntryKind, MemoryStore, Runtime};
///
/// let vms = Runtime::new(
///     fsm_core::spec::load(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/vm.toml"))?,
///     MemoryStore::new(),
/// )?;
/// let mut watcher = vms.watch()?.only("vm-1");
/// let user = Actor::new("user");
/// vms.create("vm-2", &user)?; // not watched
/// vms.create("vm-1", &user)?;
/// vms.run("vm-1", &user, "deploy")?;
///
/// let kinds: Vec<EntryKind> = std::iter::from_fn(|| watcher.try_recv().ok().flatten())
///     .map(|event| event.entry.kind)
///     .collect();
/// assert_eq!(kinds, [EntryKind::Created, EntryKind::Started, EntryKind::Completed]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Watcher {
    rx: broadcast::Receiver<Note>,
    only: Option<ObjectId>,
    _counted: Counted,
}

/// One watcher in its store's count (`Publisher::is_watched`), while it lives.
#[derive(Debug)]
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

impl Watcher {
    /// Only the events of `id`.
    pub fn only(mut self, id: impl IntoObjectId) -> Self {
        self.only = Some(id.into_object_id());
        self
    }

    /// The event to hand out for `note`, if this watcher wants it.
    fn wanted(&self, note: Note) -> Option<Result<Event, Lagged>> {
        wanted(self.only.as_ref(), note)
    }

    /// The next event, waiting for it. Do not call from async code: use
    /// [`Watcher::recv_async`] there.
    pub fn recv(&mut self) -> Result<Event, Lagged> {
        loop {
            let note = self.rx.blocking_recv().map_err(lagged)?;
            if let Some(event) = self.wanted(note) {
                return event;
            }
        }
    }

    /// The next event, if one is buffered.
    pub fn try_recv(&mut self) -> Result<Option<Event>, Lagged> {
        loop {
            match self.rx.try_recv() {
                Ok(note) => {
                    if let Some(event) = self.wanted(note) {
                        return event.map(Some);
                    }
                }
                Err(broadcast::error::TryRecvError::Empty) => return Ok(None),
                Err(broadcast::error::TryRecvError::Lagged(missed)) => {
                    return Err(Lagged::Missed { missed });
                }
                Err(broadcast::error::TryRecvError::Closed) => return Err(Lagged::Closed),
            }
        }
    }

    /// The next event, awaiting it.
    pub async fn recv_async(&mut self) -> Result<Event, Lagged> {
        loop {
            let note = self.rx.recv().await.map_err(lagged)?;
            if let Some(event) = self.wanted(note) {
                return event;
            }
        }
    }

    /// The next event, waiting for it at most `timeout`: `Ok(None)` when none
    /// came in time. Blocks the thread as [`recv`](Watcher::recv) does; do not
    /// call from async code.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use fsm_runtime::{Actor, EntryKind, MemoryStore, Runtime};
    /// # let door = fsm_core::spec::load_str("door.toml", r#"
    /// #     [machine]
    /// #     name = "door"
    /// #     initial = "closed"
    /// #     [states]
    /// #     closed = "Closed"
    /// #     open = "Open"
    /// #     [actions]
    /// #     open = { from = "closed", to = "open" }
    /// #     close = { from = "open", to = "closed" }
    /// # "#)?;
    /// let doors = Runtime::new(door, MemoryStore::new())?;
    /// let mut watcher = doors.watch()?;
    /// assert!(watcher.recv_timeout(Duration::from_millis(10))?.is_none());
    /// doors.create("front", &Actor::new("ops"))?;
    /// let event = watcher.recv_timeout(Duration::from_secs(1))?.expect("the creation");
    /// assert_eq!(event.entry.kind, EntryKind::Created);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recv_timeout(&mut self, timeout: std::time::Duration) -> Result<Option<Event>, Lagged> {
        /// Wakes the waiting thread: the broadcast's wake-up, as a thread's
        /// unpark.
        struct Unpark(std::thread::Thread);
        impl std::task::Wake for Unpark {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let deadline = std::time::Instant::now().checked_add(timeout);
        let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut cx = std::task::Context::from_waker(&waker);
        let mut next = std::pin::pin!(self.recv_async());
        loop {
            if let std::task::Poll::Ready(event) = next.as_mut().poll(&mut cx) {
                return event.map(Some);
            }
            // Woken by the broadcast, by the deadline, or spuriously: polled again.
            match deadline.map(|d| d.checked_duration_since(std::time::Instant::now())) {
                None => std::thread::park(),
                Some(Some(left)) if !left.is_zero() => std::thread::park_timeout(left),
                Some(_) => return Ok(None),
            }
        }
    }

    /// The events as a [`Stream`](tokio_stream::Stream), for async code that
    /// combines streams (`StreamExt`, `select!`): each item is what
    /// [`recv_async`](Watcher::recv_async) would answer, a lag as an `Err` that
    /// the stream goes on after. It ends when the store is dropped
    /// ([`Lagged::Closed`] is not an item).
    ///
    /// ```
    /// # use fsm_runtime::{Actor, MemoryStore, Runtime};
    /// # use tokio_stream::StreamExt;
    /// # let machine = fsm_core::spec::load_str("door.toml", r#"
    /// #     [machine]
    /// #     name = "door"
    /// #     initial = "closed"
    /// #     [states]
    /// #     closed = "Closed"
    /// #     open = "Open"
    /// #     [actions]
    /// #     open = { from = "closed", to = "open" }
    /// #     close = { from = "open", to = "closed" }
    /// # "#).unwrap();
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let runtime = Runtime::new(machine, MemoryStore::new())?;
    /// let mut events = runtime.watch()?.into_stream();
    /// let me = Actor::new("me");
    /// runtime.create_async("door-1", &me).await?;
    /// runtime.start_async("door-1", &me, "open").await?.complete_async().await?;
    /// let mut kinds = Vec::new();
    /// while let Some(Ok(event)) = events.next().await {
    ///     kinds.push(format!("{:?}", event.entry.kind));
    ///     if kinds.len() == 3 { break; }
    /// }
    /// assert_eq!(kinds, ["Created", "Started", "Completed"]);
    /// # Ok::<_, Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn into_stream(self) -> WatchStream {
        WatchStream {
            inner: tokio_stream::wrappers::BroadcastStream::new(self.rx),
            only: self.only,
            _counted: self._counted,
        }
    }
}

/// A [`Watcher`] as a [`Stream`](tokio_stream::Stream) of events: see
/// [`Watcher::into_stream`].
pub struct WatchStream {
    inner: tokio_stream::wrappers::BroadcastStream<Note>,
    only: Option<ObjectId>,
    _counted: Counted,
}

impl std::fmt::Debug for WatchStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchStream")
            .field("only", &self.only)
            .finish_non_exhaustive()
    }
}

impl tokio_stream::Stream for WatchStream {
    type Item = Result<Event, Lagged>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
        loop {
            let note = match std::pin::Pin::new(&mut self.inner).poll_next(cx) {
                std::task::Poll::Pending => return std::task::Poll::Pending,
                std::task::Poll::Ready(None) => return std::task::Poll::Ready(None),
                std::task::Poll::Ready(Some(Err(BroadcastStreamRecvError::Lagged(missed)))) => {
                    return std::task::Poll::Ready(Some(Err(Lagged::Missed { missed })));
                }
                std::task::Poll::Ready(Some(Ok(note))) => note,
            };
            if let Some(item) = wanted(self.only.as_ref(), note) {
                return std::task::Poll::Ready(Some(item));
            }
        }
    }
}

/// The event to hand out for `note` to a watcher of `only` (or of every object).
fn wanted(only: Option<&ObjectId>, note: Note) -> Option<Result<Event, Lagged>> {
    match note {
        Note::Event(event) => only.is_none_or(|id| *id == event.id).then_some(Ok(event)),
        Note::Gap => Some(Err(Lagged::Gap)),
    }
}

fn lagged(e: broadcast::error::RecvError) -> Lagged {
    match e {
        broadcast::error::RecvError::Lagged(missed) => Lagged::Missed { missed },
        broadcast::error::RecvError::Closed => Lagged::Closed,
    }
}

/// The publishing side for store implementations: a bounded broadcast that costs
/// one atomic load per write while nobody watches.
#[derive(Debug)]
pub struct Publisher {
    tx: broadcast::Sender<Note>,
    count: Arc<AtomicUsize>,
}

impl Publisher {
    /// A publisher whose watchers buffer up to `capacity` events each.
    pub fn new(capacity: usize) -> Self {
        Publisher {
            tx: broadcast::channel(capacity.max(1)).0,
            count: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Whether anyone watches now: a store whose events cost work to make (an
    /// etcd watch's entries, decoded) can skip them while nobody does.
    #[inline]
    pub fn is_watched(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }

    /// Sends `event` to every watcher; `make` runs only if someone watches.
    #[inline]
    pub fn publish(&self, make: impl FnOnce() -> Event) {
        if self.count.load(Ordering::Acquire) > 0 {
            // An error means every watcher was dropped meanwhile: nobody to tell.
            let _ = self.tx.send(Note::Event(make()));
        }
    }

    /// Tells every watcher that events were lost upstream and cannot be replayed:
    /// each one's next read answers [`Lagged::Gap`] (for a store whose own feed
    /// broke, like an etcd watch resumed after a compaction).
    pub fn gap(&self) {
        if self.count.load(Ordering::Acquire) > 0 {
            let _ = self.tx.send(Note::Gap);
        }
    }

    /// A new watcher, seeing events published from now on.
    pub fn watch(&self) -> Watcher {
        self.count.fetch_add(1, Ordering::AcqRel);
        Watcher {
            rx: self.tx.subscribe(),
            only: None,
            _counted: Counted(self.count.clone()),
        }
    }
}

/// A store shared by several runtimes (of one machine), or kept by the caller to
/// open a runtime over it again later.
impl<S: Store> Store for Arc<S> {
    fn bind(&self, machine: &Machine) -> Result<(), StoreError> {
        (**self).bind(machine)
    }
    fn load(&self, id: &ObjectId) -> Result<Option<Record>, StoreError> {
        (**self).load(id)
    }
    fn load_with<R>(
        &self,
        id: &ObjectId,
        read: impl FnOnce(&Record) -> R,
    ) -> Result<Option<R>, StoreError> {
        (**self).load_with(id, read)
    }
    fn commit(&self, write: Write) -> Result<(), StoreError> {
        (**self).commit(write)
    }

    fn modify<T, E, R>(
        &self,
        id: &ObjectId,
        decide: impl FnMut(Option<&Record>) -> Result<(Change, T), E>,
        read: impl FnMut(&Record) -> R,
    ) -> Result<Result<(T, R), E>, StoreError> {
        (**self).modify(id, decide, read)
    }
    fn modify_async<T: Send, E: Send, R: Send>(
        &self,
        id: &ObjectId,
        decide: impl FnMut(Option<&Record>) -> Result<(Change, T), E> + Send,
        read: impl FnMut(&Record) -> R + Send,
    ) -> impl Future<Output = Result<Result<(T, R), E>, StoreError>> + Send {
        (**self).modify_async(id, decide, read)
    }
    fn cached(&self, id: &ObjectId) -> Option<Record> {
        (**self).cached(id)
    }
    fn runs_detached(&self) -> bool {
        (**self).runs_detached()
    }
    fn never_waits(&self) -> bool {
        (**self).never_waits()
    }
    fn run_detached<T: Send + 'static>(
        &self,
        call: impl FnOnce() -> T + Send + 'static,
    ) -> impl Future<Output = Result<T, StoreError>> + Send {
        (**self).run_detached(call)
    }
    fn first_version(&self, id: &ObjectId) -> u64 {
        (**self).first_version(id)
    }
    fn history(&self, id: &ObjectId) -> Result<Vec<Entry>, StoreError> {
        (**self).history(id)
    }
    fn history_after(
        &self,
        id: &ObjectId,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        (**self).history_after(id, after, limit)
    }
    fn ids(&self) -> Result<Vec<ObjectId>, StoreError> {
        (**self).ids()
    }
    fn records(&self) -> Result<Records, StoreError> {
        (**self).records()
    }
    fn for_each_record(
        &self,
        look: impl FnMut(&ObjectId, Result<&Record, &StoreError>),
    ) -> Result<(), StoreError> {
        (**self).for_each_record(look)
    }
    fn records_after(&self, after: Option<&ObjectId>, limit: usize) -> Result<Records, StoreError> {
        (**self).records_after(after, limit)
    }
    fn watch(&self) -> Result<Watcher, StoreError> {
        (**self).watch()
    }

    fn remove(&self, removal: Removal) -> Result<(), StoreError> {
        (**self).remove(removal)
    }
    fn removal(&self, id: &ObjectId) -> Result<Option<Entry>, StoreError> {
        (**self).removal(id)
    }
    fn removal_async(
        &self,
        id: &ObjectId,
    ) -> impl Future<Output = Result<Option<Entry>, StoreError>> + Send {
        (**self).removal_async(id)
    }

    fn remove_async(
        &self,
        removal: Removal,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).remove_async(removal)
    }
    fn load_async(
        &self,
        id: &ObjectId,
    ) -> impl Future<Output = Result<Option<Record>, StoreError>> + Send {
        (**self).load_async(id)
    }
    fn load_with_async<R: Send>(
        &self,
        id: &ObjectId,
        read: impl FnOnce(&Record) -> R + Send,
    ) -> impl Future<Output = Result<Option<R>, StoreError>> + Send {
        (**self).load_with_async(id, read)
    }
    fn commit_async(&self, write: Write) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).commit_async(write)
    }
    fn commit_reading<R>(
        &self,
        write: Write,
        read: impl FnOnce(&Record) -> R,
    ) -> Result<R, StoreError> {
        (**self).commit_reading(write, read)
    }
    fn commit_reading_async<R: Send>(
        &self,
        write: Write,
        read: impl FnOnce(&Record) -> R + Send,
    ) -> impl Future<Output = Result<R, StoreError>> + Send {
        (**self).commit_reading_async(write, read)
    }
    fn ids_async(&self) -> impl Future<Output = Result<Vec<ObjectId>, StoreError>> + Send {
        (**self).ids_async()
    }
    fn records_async(&self) -> impl Future<Output = Result<Records, StoreError>> + Send {
        (**self).records_async()
    }
    fn watch_async(&self) -> impl Future<Output = Result<Watcher, StoreError>> + Send {
        (**self).watch_async()
    }
    fn for_each_record_async(
        &self,
        look: impl FnMut(&ObjectId, Result<&Record, &StoreError>) + Send,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).for_each_record_async(look)
    }
    fn records_after_async(
        &self,
        after: Option<&ObjectId>,
        limit: usize,
    ) -> impl Future<Output = Result<Records, StoreError>> + Send {
        (**self).records_after_async(after, limit)
    }
    fn history_async(
        &self,
        id: &ObjectId,
    ) -> impl Future<Output = Result<Vec<Entry>, StoreError>> + Send {
        (**self).history_async(id)
    }
    fn history_after_async(
        &self,
        id: &ObjectId,
        after: Option<u64>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Entry>, StoreError>> + Send {
        (**self).history_after_async(id, after, limit)
    }
}
