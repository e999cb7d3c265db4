//! The embedded default store: in memory, safe under many threads.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::time::SystemTime;

use hashbrown::HashTable;

use fsm_core::{ActionId, Machine, StateId};

use crate::sync::{AtomicUsize, Mutex, MutexGuard, Ordering, Padded, ShardLock, lock_shard};
use crate::wire::{Codec, StoredEntry, UnknownName};
use crate::{
    ActorName, Change, Entry, EntryKind, Event, Holder, ObjectId, OrderedId, Publisher, Record,
    Records, Removal, Store, StoreError, Watcher, Write,
};

/// Records and histories in memory.
///
/// Objects live in shards, each a map behind its own lock, chosen by a fast,
/// randomly seeded hash of the id: a write locks only its object's shard, for one
/// comparison and one push, so writes to different objects run in parallel and
/// an action takes no global lock. (Once a page of the listing has been asked
/// for, [`Store::records_after`], creating an object also puts its id in an
/// ordered index under one lock, so that a page costs its own objects, not a
/// pass over all.) The shard's lock is held for a few dozen nanoseconds at a
/// time: a spin lock whose waiters yield their time slice, released without an
/// atomic read-modify-write. Each write is applied whole under that lock (record,
/// history entry and the event to watchers, in version order). Each object's
/// record lives in an allocation of its own, on cache lines of its own, so that
/// threads writing different objects never write one line.
///
/// A removed object leaves its id and its removal's entry behind (some
/// hundred bytes and the id's text), so that the id's next object continues
/// its versions rather than start again at 1 (an `If-Match` or a
/// [`Fence`](crate::Fence) of the old object never matches the new one), and so
/// that [`Store::removal`] tells how it was removed. Creating the id again
/// forgets it; so does [`MemoryStore::forget_removals`], for a store whose ids
/// are seldom used twice (one per job, per operation), where they would
/// otherwise pile up for ever.
///
/// Histories are kept whole by default, 48 bytes an entry (an [`Entry`] with
/// its ids in 32 bits: a machine with more than four billion states or
/// actions is refused at [`Store::bind`]). A long-running process that only needs the
/// recent past can bound them with [`MemoryStore::keep_history`]. An object that
/// has run an action also keeps its holder's box (a [`Holder`], some seventy
/// bytes) for its next one, so that an action allocates no holder.
///
/// Records hold states and actions by id. Opening a runtime of an edited spec over
/// the same store ([`Store::bind`]) translates them by name, renames included, or
/// refuses, listing the objects the new spec cannot read. Removals never refuse a
/// spec (their objects are gone): a removal in a state the new spec drops is kept
/// by its names, [`Store::removal`] answers [`StoreError::Unreadable`] for it, and
/// a later spec that has the state again reads it again.
#[derive(Debug)]
pub struct MemoryStore {
    /// Each shard's lock on cache lines of its own, so that threads locking
    /// neighbouring shards do not contend on one line.
    shards: Box<[Padded<ShardLock<Shard>>]>,
    /// Every id in order, from the first page asked for on.
    index: Index,
    publisher: Publisher,
    keep: usize,
    /// The machine whose ids the records hold.
    bound: Mutex<Option<Machine>>,
    /// `1` once [`MemoryStore::forget_removals`] forgot one: creations are
    /// then guessed under their shard's lock ([`Store::first_version`]).
    forgot: AtomicUsize,
}

/// Every id of the store in order, kept from the first page a caller asks
/// for on ([`Store::records_after`]), so that a page costs a seek and its own
/// objects, not a pass over every id. Until then creating an object costs
/// nothing more; from then on it also inserts the id (under its shard's lock,
/// before the object is inserted, so that a reader who finds an id here and
/// then takes the shard's lock finds its object), never on an action's path.
/// (At 100,000 objects created in a random order, 753 ns a create with the
/// index kept against 406 without; the first page at that size makes it in
/// 19 ms; BENCHMARKS.md.)
#[derive(Debug, Default)]
struct Index {
    /// `1` once creates insert their ids.
    kept: AtomicUsize,
    /// The ids, and whether they are whole.
    ids: Mutex<Ids>,
    /// Held by the caller that makes the index whole, so that another waits
    /// for it rather than making it too.
    making: Mutex<()>,
}

/// What [`Index`] keeps under its lock.
#[derive(Debug, Default)]
struct Ids {
    /// Every id, in order, once `whole`.
    order: BTreeSet<OrderedId>,
    /// Every object in the store is in `order`: the first page's pass over
    /// the shards has ended.
    whole: bool,
    /// Until then, the ids removed since ids were kept: the pass may have
    /// found one before its object was removed, and must not put it in.
    gone: std::collections::HashSet<ObjectId>,
}

impl Index {
    /// Adds a created object's id, once ids are kept.
    #[inline]
    fn created(&self, id: &ObjectId) {
        if self.kept.load(Ordering::SeqCst) == 1 {
            lock(&self.ids).order.insert(OrderedId::new(id.clone()));
        }
    }

    /// Takes a removed object's id out, once ids are kept (under its shard's
    /// lock, after the object left the shard: a reader who finds the id here
    /// and then takes the shard's lock finds no object, and skips it).
    #[inline]
    fn removed(&self, id: &ObjectId) {
        if self.kept.load(Ordering::SeqCst) == 1 {
            let mut ids = lock(&self.ids);
            ids.order.remove(&OrderedId::new(id.clone()));
            if !ids.whole {
                ids.gone.insert(id.clone());
            }
        }
    }

    /// The ids whole, made so by a pass over `shards` the first time.
    fn whole<'a>(&'a self, shards: &[Padded<ShardLock<Shard>>]) -> MutexGuard<'a, Ids> {
        let ids = lock(&self.ids);
        if ids.whole {
            return ids;
        }
        drop(ids);
        let _making = lock(&self.making);
        let ids = lock(&self.ids);
        if ids.whole {
            // Made whole while this caller waited.
            return ids;
        }
        drop(ids);
        // Creates insert from now on; an object created before is in its
        // shard by the time the pass below takes that shard's lock (a create
        // that takes it after the pass sees `kept`). Removals take out from
        // now on, and name what they took for the pass to leave out (an object
        // removed and created again since is in `order` by its create).
        self.kept.store(1, Ordering::SeqCst);
        let found = ids_of(shards);
        let mut ids = lock(&self.ids);
        let gone = std::mem::take(&mut ids.gone);
        let found = found.into_iter().filter(|id| !gone.contains(id));
        ids.order.extend(found.map(OrderedId::new));
        ids.whole = true;
        ids
    }

    /// The ids in order, if the index is whole.
    fn in_order(&self) -> Option<Vec<ObjectId>> {
        let ids = lock(&self.ids);
        ids.whole
            .then(|| ids.order.iter().map(|o| o.id.clone()).collect())
    }
}

/// Every id in `shards`, each shard's copied under its lock, one shard at a
/// time, in no order.
fn ids_of(shards: &[Padded<ShardLock<Shard>>]) -> Vec<ObjectId> {
    let mut ids = Vec::new();
    for shard in shards {
        let shard = lock_shard(&shard.0);
        ids.extend(shard.objects.iter().map(|(id, _)| id.clone()));
    }
    ids
}

/// The objects of one shard, each found by the hash that chose the shard: an id
/// is hashed once per access.
#[derive(Debug, Default)]
struct Shard {
    objects: HashTable<(ObjectId, Box<Slot>)>,
    /// Each id whose object was removed and not created again: the id's
    /// next object starts at the version after its removal's.
    removed: HashTable<(ObjectId, Tombstone)>,
    /// The highest removal version [`MemoryStore::forget_removals`] forgot
    /// here (0 until it forgets one): an id without a tombstone starts above
    /// it, so that no version of a forgotten object is ever one of its id's
    /// next object.
    floor: u64,
}

/// What a removed object leaves behind.
#[derive(Debug, Clone)]
struct Tombstone {
    /// The removal's version.
    version: u64,
    /// When the object was removed.
    at: SystemTime,
    /// The removal's entry.
    entry: RemovalEntry,
}

/// A removal's entry as a tombstone keeps it.
#[derive(Debug, Clone)]
enum RemovalEntry {
    /// Read by the spec the store is bound to.
    Read(Entry),
    /// Kept by its names, because the spec the store was bound to since has
    /// not one of them (a state dropped with only removed objects in it): a
    /// later spec that has them again reads it again, as the etcd store's.
    ByName {
        stored: Box<StoredEntry>,
        unknown: UnknownName,
    },
}

impl Shard {
    #[inline]
    fn get(&self, hash: u64, id: &ObjectId) -> Option<&Slot> {
        self.objects
            .find(hash, |(k, _)| k == id)
            .map(|(_, slot)| &**slot)
    }

    #[inline]
    fn get_mut(&mut self, hash: u64, id: &ObjectId) -> Option<&mut Slot> {
        self.objects
            .find_mut(hash, |(k, _)| k == id)
            .map(|(_, slot)| &mut **slot)
    }

    /// Takes an object out, removed by `removal`.
    fn remove(&mut self, hash: u64, id: &ObjectId, removal: Entry) {
        if let Ok(entry) = self.objects.find_entry(hash, |(k, _)| k == id) {
            let ((id, _), _) = entry.remove();
            let tombstone = Tombstone {
                version: removal.version,
                at: removal.at,
                entry: RemovalEntry::Read(removal),
            };
            self.removed
                .insert_unique(hash, (id, tombstone), |(k, _)| id_hash(k));
        }
    }

    /// The removal of the id's last object, if it was removed and not
    /// created again (nor forgotten).
    fn removal(&self, hash: u64, id: &ObjectId) -> Option<&Tombstone> {
        self.removed
            .find(hash, |(k, _)| k == id)
            .map(|(_, removal)| removal)
    }

    /// The version the id's next object is created at, which forgets the
    /// id's removal: the one after the removal's, or, for an id without one,
    /// the one after the floor (1 until a removal was forgotten).
    fn first_version(&self, hash: u64, id: &ObjectId) -> u64 {
        self.removal(hash, id)
            .map_or(self.floor, |removal| removal.version)
            + 1
    }

    /// Forgets the removals made before `before`, raising the floor to the
    /// highest of their versions in the same step (the shard is locked):
    /// a creation that no longer finds an id's tombstone finds the floor
    /// above it. How many it forgot.
    fn forget_removals(&mut self, before: SystemTime) -> usize {
        let (count, mut floor) = (self.removed.len(), self.floor);
        self.removed.retain(|(_, removal)| {
            let keep = removal.at >= before;
            if !keep {
                floor = floor.max(removal.version);
            }
            keep
        });
        self.floor = floor;
        let left = self.removed.len();
        if left < self.removed.capacity() / 4 {
            self.removed.shrink_to(left, |(k, _)| id_hash(k));
        }
        count - left
    }

    /// Adds an object that is not there yet, and forgets the removal of the
    /// id's last object, if any.
    fn insert(&mut self, hash: u64, id: ObjectId, slot: Slot) {
        if let Ok(entry) = self.removed.find_entry(hash, |(k, _)| *k == id) {
            entry.remove();
        }
        self.objects
            .insert_unique(hash, (id, Box::new(slot)), |(k, _)| id_hash(k));
    }
}

/// The hash an id is found by, in the shard's choice and in its table alike:
/// the one it was made with.
#[inline]
fn id_hash(id: &ObjectId) -> u64 {
    id.hash_code()
}

/// An object: its record and history, in an allocation of its own, on cache
/// lines of its own (the table that finds it holds its id and a pointer), so
/// that threads writing different objects never write one line.
#[derive(Debug, Clone)]
#[repr(align(128))]
struct Slot {
    record: Record,
    history: History,
    /// The box of the last holder an action's end took out of the record, for
    /// the next start to hold its holder in (see [`Change::apply_reusing`]).
    spare: Option<Box<Holder>>,
}

/// An object's history, bounded by [`MemoryStore::keep_history`]: a vector that
/// grows to the bound and is then written round, the oldest entry overwritten
/// in place (`next` is where the next entry goes, and where the oldest is).
#[derive(Debug, Clone, Default)]
struct History {
    entries: Vec<Packed>,
    next: usize,
}

impl History {
    #[inline(always)]
    fn push(&mut self, entry: &Entry, keep: usize) {
        let entry = Packed::new(entry);
        if self.entries.len() < keep {
            self.entries.push(entry);
        } else {
            self.entries[self.next] = entry;
            self.next += 1;
            if self.next == self.entries.len() {
                self.next = 0;
            }
        }
    }

    /// Oldest first.
    fn iter(&self) -> impl Iterator<Item = &Packed> {
        let (newer, older) = self.entries.split_at(self.next);
        older.iter().chain(newer)
    }
}

/// An [`Entry`] as a history keeps it: 48 bytes where an `Entry` takes 72,
/// so that the two entries an action writes fill fewer cache lines, and a
/// history takes two thirds of the memory. Nothing is lost: the ids take 32
/// bits each, which every machine's do ([`MemoryStore::bind`] refuses a
/// machine with more states or actions), and the rest is as the entry has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Packed {
    version: u64,
    at: SystemTime,
    actor: ActorName,
    /// [`NO_ACTION`] for a creation.
    action: u32,
    from: u32,
    to: u32,
    kind: EntryKind,
}

/// A packed entry's `action` when it has none (a creation).
const NO_ACTION: u32 = crate::NO_ID;

impl Packed {
    #[inline(always)]
    fn new(entry: &Entry) -> Packed {
        // The ids are the bound machine's, which `bind` checked fit.
        Packed {
            version: entry.version,
            at: entry.at,
            actor: entry.actor,
            action: entry.action.map_or(NO_ACTION, |a| a.0 as u32),
            from: entry.from.0 as u32,
            to: entry.to.0 as u32,
            kind: entry.kind,
        }
    }

    /// The entry it was made from.
    fn entry(&self) -> Entry {
        Entry {
            version: self.version,
            at: self.at,
            actor: self.actor,
            kind: self.kind,
            action: (self.action != NO_ACTION).then_some(ActionId(self.action as usize)),
            from: StateId(self.from as usize),
            to: StateId(self.to as usize),
        }
    }
}

/// Why the memory store cannot keep `machine`'s ids in its histories, if it
/// cannot: it has more states or actions than 32 bits number (the last
/// number, which no id then is, is a creation's "no action").
fn too_large(machine: &Machine) -> Option<StoreError> {
    // The runtime refuses such a machine first (`RuntimeError::MachineTooLarge`);
    // the store holds its own format to the bound too.
    if crate::ids_fit(machine.states().len(), machine.actions().len()) {
        return None;
    }
    Some(StoreError::Incompatible {
        machine: machine.name().to_owned(),
        reason: format!(
            "{} states and {} actions: the memory store keeps at most {} of each",
            machine.states().len(),
            machine.actions().len(),
            u32::MAX
        ),
    })
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl MemoryStore {
    /// How many events each watcher buffers by default before it lags.
    pub const WATCH_CAPACITY: usize = 1024;

    /// An empty store.
    pub fn new() -> Self {
        Self::with_watch_capacity(Self::WATCH_CAPACITY)
    }

    /// An empty store whose watchers buffer up to `capacity` events each.
    pub fn with_watch_capacity(capacity: usize) -> Self {
        // Enough shards that threads working on different objects rarely share
        // one (256 per core: a shard's lock is then mostly touched by one core,
        // and its line is not passed back and forth), 128 bytes each: 64 KiB on
        // two cores, at most 128 KiB (1,024 shards). Under the model checker, one:
        // every object meets every other on it, and the randomly seeded hash cannot
        // make an execution differ from the one loom recorded.
        let shards = if cfg!(fsm_loom) {
            1
        } else {
            let cores = std::thread::available_parallelism().map_or(4, |n| n.get());
            (cores * 256).next_power_of_two().min(1024)
        };
        MemoryStore {
            shards: (0..shards)
                .map(|_| Padded(ShardLock::new(Shard::default())))
                .collect(),
            index: Index::default(),
            publisher: Publisher::new(capacity),
            keep: usize::MAX,
            bound: Mutex::new(None),
            forgot: AtomicUsize::new(0),
        }
    }

    /// Keeps only the last `entries` entries of each history (at least one). A
    /// history cut this way no longer starts with the creation, so
    /// [`check_history`](crate::check_history) no longer applies to it.
    pub fn keep_history(mut self, entries: usize) -> Self {
        self.keep = entries.max(1);
        self
    }

    /// Forgets what the objects removed before `before` left behind (their
    /// ids and removals' entries), and answers how many it forgot.
    ///
    /// [`Store::removal`] then answers `None` for those ids, as for an id
    /// that never had an object. Versions still never repeat for an id:
    /// each shard raises a floor to the highest removal version it forgot,
    /// in the same step, and an id without a removal is created above it, so
    /// an `If-Match` or a [`Fence`](crate::Fence) of a forgotten object
    /// never matches a later object of its id, and fences stay increasing.
    /// Once it has forgotten one, the store looks up the version of each
    /// creation before it is made ([`Store::first_version`]: a look under the
    /// shard's lock more per creation), as a new id starts above 1 there.
    ///
    /// Each shard is locked in turn, for a pass over its removals; actions
    /// on its objects wait meanwhile. Call it now and then (the removals of
    /// more than an hour ago, say), not per action: `fsm serve` does so with
    /// `--forget-removals-after`.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use fsm_runtime::{Actor, MemoryStore, Runtime, Store};
    ///
    /// let job = fsm_core::spec::load_str("job.toml", r#"
    ///     [machine]
    ///     name = "job"
    ///     initial = "IDLE"
    ///     [states]
    ///     IDLE = { remove = true, description = "Not running" }
    ///     RUNNING = "Running"
    ///     [actions]
    ///     start = { from = "IDLE", to = "RUNNING" }
    ///     stop = { from = "RUNNING", to = "IDLE" }
    /// "#)?;
    /// let rt = Runtime::new(job, MemoryStore::new())?;
    /// let ops = Actor::new("ops");
    /// rt.create("job-1", &ops)?;
    /// let job = rt.start("job-1", &ops, "start")?;
    /// let fence = job.fence(); // handed to the systems the job drives
    /// job.complete()?;
    /// rt.run("job-1", &ops, "stop")?;
    /// rt.remove("job-1", &ops)?;
    /// assert!(rt.removal_of("job-1")?.is_some());
    ///
    /// let an_hour_later = SystemTime::now() + Duration::from_secs(3600);
    /// assert_eq!(rt.store().forget_removals(an_hour_later), 1);
    /// assert!(rt.removal_of("job-1")?.is_none());
    /// // The id's next object is numbered past the one forgotten.
    /// let again = rt.create("job-1", &ops)?;
    /// assert!(again.version > fence.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn forget_removals(&self, before: SystemTime) -> usize {
        let forgotten = self
            .shards
            .iter()
            .map(|shard| lock_shard(&shard.0).forget_removals(before))
            .sum();
        if forgotten > 0 {
            self.forgot.store(1, Ordering::SeqCst);
        }
        forgotten
    }

    /// Appends a written record's `entry` to its history and tells the watchers.
    #[inline(always)]
    fn append(&self, slot: &mut Slot, id: &ObjectId, entry: Entry) {
        self.publisher.publish(|| Event {
            id: id.clone(),
            entry: entry.clone(),
            position: None,
        });
        slot.history.push(&entry, self.keep);
    }

    /// The id's hash and its shard. The shard is chosen by bits the table does not
    /// use to place an entry within it (its low bits and top seven).
    #[inline]
    fn shard(&self, id: &ObjectId) -> (u64, &ShardLock<Shard>) {
        let hash = id_hash(id);
        let shard = (hash >> 32) as usize & (self.shards.len() - 1);
        (hash, &self.shards[shard].0)
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

/// Reads the ids of one version of a machine as those of another, by name.
struct Translation<'m> {
    old: &'m Machine,
    new: &'m Machine,
    /// Both machines' codecs, made for the first removal one of them cannot
    /// read.
    codecs: std::cell::OnceCell<(Codec, Codec)>,
}

impl Translation<'_> {
    fn state(&self, s: StateId) -> Result<StateId, UnknownName> {
        let name = &self.old.state(s).name;
        (self.new.state_named(name)).ok_or_else(|| self.unknown("state", name))
    }

    fn action(&self, a: ActionId) -> Result<ActionId, UnknownName> {
        let name = &self.old.action(a).name;
        (self.new.action_named(name)).ok_or_else(|| self.unknown("action", name))
    }

    fn unknown(&self, kind: &'static str, name: &str) -> UnknownName {
        UnknownName {
            machine: self.new.name().to_owned(),
            kind,
            name: name.to_owned(),
        }
    }

    fn entry(&self, entry: &Entry) -> Result<Entry, UnknownName> {
        let mut out = entry.clone();
        out.from = self.state(entry.from)?;
        out.to = self.state(entry.to)?;
        out.action = entry.action.map(|a| self.action(a)).transpose()?;
        Ok(out)
    }

    /// A removal's tombstone: its version stays whatever the spec; an entry
    /// the new spec cannot read is kept by its names and says why, as the
    /// etcd store's would, and one kept so is read again by a spec that has
    /// its names.
    fn tombstone(&self, tombstone: &Tombstone) -> Tombstone {
        let codecs = || {
            self.codecs
                .get_or_init(|| (Codec::new(self.old), Codec::new(self.new)))
        };
        let entry = match &tombstone.entry {
            RemovalEntry::Read(entry) => match self.entry(entry) {
                Ok(entry) => RemovalEntry::Read(entry),
                Err(unknown) => RemovalEntry::ByName {
                    stored: Box::new(codecs().0.encode_entry(entry)),
                    unknown,
                },
            },
            RemovalEntry::ByName { stored, .. } => {
                match codecs().1.decode_entry((**stored).clone()) {
                    Ok(entry) => RemovalEntry::Read(entry),
                    Err(unknown) => RemovalEntry::ByName {
                        stored: stored.clone(),
                        unknown,
                    },
                }
            }
        };
        Tombstone {
            version: tombstone.version,
            at: tombstone.at,
            entry,
        }
    }

    fn slot(&self, slot: &Slot) -> Result<Slot, UnknownName> {
        let mut out = slot.clone();
        let r = &mut out.record;
        r.state = self.state(r.state)?;
        for h in [&mut r.in_flight, &mut r.hidden].into_iter().flatten() {
            h.action = self.action(h.action)?;
            h.origin = self.state(h.origin)?;
        }
        for e in &mut out.history.entries {
            *e = Packed::new(&self.entry(&e.entry())?);
        }
        Ok(out)
    }
}

impl Store for MemoryStore {
    fn bind(&self, machine: &Machine) -> Result<(), StoreError> {
        if let Some(refused) = too_large(machine) {
            return Err(refused);
        }
        let mut bound = lock(&self.bound);
        let Some(old) = bound.as_ref() else {
            *bound = Some(machine.clone());
            return Ok(());
        };
        if fsm_core::evolve::fingerprint(old) == fsm_core::evolve::fingerprint(machine) {
            return Ok(());
        }
        // An edited spec: translate every object by name, all or nothing.
        let t = Translation {
            old,
            new: machine,
            codecs: std::cell::OnceCell::new(),
        };
        let mut shards: Vec<_> = self.shards.iter().map(|s| lock_shard(&s.0)).collect();
        let mut unreadable = Vec::new();
        let mut translated = Vec::new();
        for shard in &shards {
            let mut out = Vec::with_capacity(shard.objects.len());
            for (id, slot) in shard.objects.iter() {
                match t.slot(slot) {
                    Ok(slot) => out.push(slot),
                    Err(unknown) => unreadable.push(format!("{id} ({})", unknown.name)),
                }
            }
            translated.push(out);
        }
        if !unreadable.is_empty() {
            return Err(StoreError::unreadable_objects(machine.name(), unreadable));
        }
        // Nothing moved meanwhile (every shard is locked): the same order.
        // Removals never refuse a spec (their objects are gone): one the new
        // spec cannot read answers `Store::removal` with why.
        for (shard, out) in shards.iter_mut().zip(translated) {
            for ((_, slot), new) in shard.objects.iter_mut().zip(out) {
                **slot = new;
            }
            for (_, tombstone) in shard.removed.iter_mut() {
                *tombstone = t.tombstone(tombstone);
            }
        }
        *bound = Some(machine.clone());
        Ok(())
    }

    fn load(&self, id: &ObjectId) -> Result<Option<Record>, StoreError> {
        self.load_with(id, Record::clone)
    }

    /// Reads the record in place, under its shard's lock.
    fn load_with<R>(
        &self,
        id: &ObjectId,
        read: impl FnOnce(&Record) -> R,
    ) -> Result<Option<R>, StoreError> {
        let (hash, shard) = self.shard(id);
        Ok(lock_shard(shard)
            .get(hash, id)
            .map(|slot| read(&slot.record)))
    }

    /// 1 until the store forgot a removal; then the version under the
    /// shard's lock (past the id's removal, or past the shard's floor).
    fn first_version(&self, id: &ObjectId) -> u64 {
        if self.forgot.load(Ordering::SeqCst) == 0 {
            return 1;
        }
        let (hash, shard) = self.shard(id);
        lock_shard(shard).first_version(hash, id)
    }

    fn commit(&self, write: Write) -> Result<(), StoreError> {
        let (id, expected, record, entry) = write.into_parts();
        let (hash, shard) = self.shard(&id);
        let mut shard = lock_shard(shard);
        let Some(expected) = expected else {
            if let Some(slot) = shard.get(hash, &id) {
                return Err(StoreError::Conflict {
                    found: Some(Box::new(slot.record.clone())),
                    id,
                });
            }
            let version = shard.first_version(hash, &id);
            if record.version != version {
                return Err(StoreError::CreateAt { id, version });
            }
            let mut slot = Slot {
                record,
                history: History::default(),
                spare: None,
            };
            self.append(&mut slot, &id, entry);
            self.index.created(&id);
            shard.insert(hash, id, slot);
            return Ok(());
        };
        let slot = crate::store::decided_on(&id, shard.get_mut(hash, &id))?;
        if slot.record.expected() != expected {
            return Err(StoreError::Conflict {
                found: Some(Box::new(slot.record.clone())),
                id,
            });
        }
        slot.record = record;
        self.append(slot, &id, entry);
        Ok(())
    }

    /// Decides on the record it holds, under the object's shard lock: nothing
    /// comes between the read and the write, the object is looked up once, and the
    /// change is made in place.
    fn modify<T, E, R>(
        &self,
        id: &ObjectId,
        mut decide: impl FnMut(Option<&Record>) -> Result<(Change, T), E>,
        mut read: impl FnMut(&Record) -> R,
    ) -> Result<Result<(T, R), E>, StoreError> {
        let (hash, shard) = self.shard(id);
        let mut shard = lock_shard(shard);
        let slot = shard.get_mut(hash, id);
        let (change, value) = match decide(slot.as_deref().map(|slot| &slot.record)) {
            Ok(decided) => decided,
            Err(refused) => return Ok(Err(refused)),
        };
        let slot = crate::store::decided_on(id, slot)?;
        let entry = change.apply_reusing(&mut slot.record, &mut slot.spare);
        self.append(slot, id, entry);
        Ok(Ok((value, read(&slot.record))))
    }

    /// `load_with`: the memory store never waits.
    fn load_with_async<R: Send>(
        &self,
        id: &ObjectId,
        read: impl FnOnce(&Record) -> R + Send,
    ) -> impl Future<Output = Result<Option<R>, StoreError>> + Send {
        std::future::ready(self.load_with(id, read))
    }

    /// `for_each_record`: the memory store never waits.
    fn for_each_record_async(
        &self,
        look: impl FnMut(&ObjectId, Result<&Record, &StoreError>) + Send,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        std::future::ready(self.for_each_record(look))
    }

    /// A write holds its shard's lock for nanoseconds: the runtime's async
    /// starts and ends run their blocking forms.
    fn never_waits(&self) -> bool {
        true
    }

    /// `modify`: the memory store never waits.
    fn modify_async<T: Send, E: Send, R: Send>(
        &self,
        id: &ObjectId,
        decide: impl FnMut(Option<&Record>) -> Result<(Change, T), E> + Send,
        read: impl FnMut(&Record) -> R + Send,
    ) -> impl Future<Output = Result<Result<(T, R), E>, StoreError>> + Send {
        std::future::ready(self.modify(id, decide, read))
    }

    fn history(&self, id: &ObjectId) -> Result<Vec<Entry>, StoreError> {
        let (hash, shard) = self.shard(id);
        Ok(lock_shard(shard)
            .get(hash, id)
            .map(|slot| slot.history.iter().map(Packed::entry).collect())
            .unwrap_or_default())
    }

    /// The page copied under the object's shard lock: the rest of the
    /// history is not.
    fn history_after(
        &self,
        id: &ObjectId,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        let (hash, shard) = self.shard(id);
        let past = |e: &&Packed| after.is_none_or(|after| e.version > after);
        Ok(lock_shard(shard)
            .get(hash, id)
            .map(|slot| {
                slot.history
                    .iter()
                    .filter(past)
                    .take(limit)
                    .map(Packed::entry)
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The index copied, already in order, once it is kept; until then each
    /// shard's ids copied under its lock, then sorted.
    fn ids(&self) -> Result<Vec<ObjectId>, StoreError> {
        if let Some(ids) = self.index.in_order() {
            return Ok(ids);
        }
        let mut ids = ids_of(&self.shards);
        ids.sort();
        Ok(ids)
    }

    /// Each shard's records copied under its lock, one shard at a time.
    fn records(&self) -> Result<Records, StoreError> {
        let mut records = Vec::new();
        for shard in &self.shards {
            let shard = lock_shard(&shard.0);
            records.extend(
                shard
                    .objects
                    .iter()
                    .map(|(id, slot)| (id.clone(), Ok(slot.record.clone()))),
            );
        }
        records.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        Ok(records)
    }

    /// Each shard's records looked at in place under its lock, one shard at
    /// a time: nothing copied.
    fn for_each_record(
        &self,
        mut look: impl FnMut(&ObjectId, Result<&Record, &StoreError>),
    ) -> Result<(), StoreError> {
        for shard in &self.shards {
            let shard = lock_shard(&shard.0);
            for (id, slot) in shard.objects.iter() {
                look(id, Ok(&slot.record));
            }
        }
        Ok(())
    }

    /// The page's ids taken from the index (a seek to `after`, then `limit`
    /// steps), then each of those read under its shard's lock: a page costs its
    /// own objects, whatever the store holds. The first page also makes the
    /// index, a pass over every id.
    fn records_after(&self, after: Option<&ObjectId>, limit: usize) -> Result<Records, StoreError> {
        let from = after.map_or(Bound::Unbounded, |id| {
            Bound::Excluded(OrderedId::new(id.clone()))
        });
        let ids: Vec<ObjectId> = (self.index.whole(&self.shards).order)
            .range((from, Bound::Unbounded))
            .take(limit)
            .map(|o| o.id.clone())
            .collect();
        Ok(ids
            .into_iter()
            .filter_map(|id| {
                let (hash, shard) = self.shard(&id);
                let record = lock_shard(shard).get(hash, &id)?.record.clone();
                Some((id, Ok(record)))
            })
            .collect())
    }

    fn watch(&self) -> Result<Watcher, StoreError> {
        Ok(self.publisher.watch())
    }

    /// The record and history dropped under the shard's lock, the entry
    /// published under it too (after every earlier write of the object).
    fn remove(&self, removal: Removal) -> Result<(), StoreError> {
        let (id, expected, entry) = removal.into_parts();
        let (hash, shard) = self.shard(&id);
        let mut shard = lock_shard(shard);
        let slot = crate::store::decided_on(&id, shard.get(hash, &id))?;
        if slot.record.expected() != expected {
            return Err(StoreError::Conflict {
                found: Some(Box::new(slot.record.clone())),
                id,
            });
        }
        shard.remove(hash, &id, entry.clone());
        self.index.removed(&id);
        self.publisher.publish(|| Event {
            id,
            entry,
            position: None,
        });
        Ok(())
    }

    fn removal(&self, id: &ObjectId) -> Result<Option<Entry>, StoreError> {
        let (hash, shard) = self.shard(id);
        let shard = lock_shard(shard);
        let Some(tombstone) = shard.removal(hash, id) else {
            return Ok(None);
        };
        match &tombstone.entry {
            RemovalEntry::Read(entry) => Ok(Some(entry.clone())),
            RemovalEntry::ByName { unknown, .. } => Err(StoreError::Unreadable {
                key: id.to_string(),
                reason: format!("its removal's entry: {unknown}"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use fsm_core::{ActionId, StateId};
    use proptest::prelude::*;

    use super::{MemoryStore, NO_ACTION, Packed};
    use crate::{Actor, Clock as _, ObjectId, OrderedId, Runtime, Store};
    use crate::{ActorName, Entry, EntryKind};

    const N: usize = 2_000;

    /// Rounds of `work` (creates or removes of the objects `o-00000`..), on a
    /// thread of its own over a fresh runtime that `before` filled, while the
    /// first page, which makes the index, is read once `going` says the work
    /// is under way; `after` checks the store once the work is done. Asserts
    /// the race: in some round the first page met some objects, not all.
    fn first_page_during(
        before: impl Fn(&Runtime, &Actor),
        work: impl Fn(&Runtime, &Actor, String) + Sync,
        going: impl Fn(&Runtime) -> bool,
        after: impl Fn(&Runtime, usize),
    ) {
        let mut raced = false;
        for round in 0..50 {
            let rt = Runtime::new(crate::testing::machine(), MemoryStore::new()).unwrap();
            let user = Actor::new("user");
            before(&rt, &user);
            let first = std::thread::scope(|s| {
                let worker = s.spawn(|| (0..N).for_each(|n| work(&rt, &user, format!("o-{n:05}"))));
                while !going(&rt) {
                    std::thread::yield_now();
                }
                let first = rt.store().records_after(None, usize::MAX).unwrap().len();
                worker.join().unwrap();
                first
            });
            after(&rt, round);
            raced |= 0 < first && first < N;
            if raced && round >= 4 {
                break;
            }
        }
        assert!(raced, "no first page was read while the work went on");
    }

    /// The index made while objects are created: a page read after the
    /// creates lists every object, each once. (A create that raced the pass
    /// that makes the index and was left out would never be listed.)
    #[test]
    fn the_index_made_while_objects_are_created_misses_none() {
        first_page_during(
            |_, _| {},
            |rt, user, id| {
                rt.create(id, user).unwrap();
            },
            |rt| rt.store().ids().unwrap().len() >= N / 4,
            |rt, round| {
                let all = rt.store().records_after(None, usize::MAX).unwrap();
                assert_eq!(all.len(), N, "round {round}: listed {}", all.len());
                assert!(all.windows(2).all(|w| w[0].0 < w[1].0), "round {round}");
            },
        );
    }

    /// The index made while every object is removed: afterwards no id of the
    /// index names a removed object. (An id the pass found before its object
    /// was removed, and put in the index after the removal took it out, would
    /// be listed by `ids` forever.)
    #[test]
    fn the_index_made_while_objects_are_removed_keeps_none_of_them() {
        first_page_during(
            |rt, user| (0..N).for_each(|n| drop(rt.create(format!("o-{n:05}"), user).unwrap())),
            |rt, user, id| {
                rt.remove(id, user).unwrap();
            },
            |rt| rt.store().load(&"o-00499".into()).unwrap().is_none(),
            |rt, round| {
                let ids = rt.store().ids().unwrap();
                assert!(
                    ids.is_empty(),
                    "round {round}: {} removed ids kept",
                    ids.len()
                );
                assert!(rt.store().records_after(None, 10).unwrap().is_empty());
            },
        );
    }

    /// Removals are forgotten by their time: those before the time given,
    /// not those after; the shard's floor rises with what it forgot, and only
    /// that shard's: a new id elsewhere is still created at 1.
    #[test]
    fn removals_are_forgotten_by_their_time_and_raise_their_shards_floor() {
        let start = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1 << 30);
        let clock = std::sync::Arc::new(crate::ManualClock::new(start));
        let rt = Runtime::builder(crate::testing::machine(), MemoryStore::new())
            .clock(clock.clone())
            .build()
            .unwrap();
        let user = Actor::new("user");
        for id in ["old", "new"] {
            rt.create(id, &user).unwrap();
            rt.run(id, &user, "resize").unwrap();
        }
        rt.remove("old", &user).unwrap();
        clock.advance(std::time::Duration::from_secs(60));
        let between = clock.now();
        rt.remove("new", &user).unwrap();

        // Until a removal is forgotten, creations are guessed at 1.
        assert_eq!(rt.store().first_version(&"old".into()), 1);
        assert_eq!(rt.store().forget_removals(between), 1);
        assert_eq!(rt.removal_of("old").unwrap(), None);
        assert_eq!(rt.removal_of("new").unwrap().map(|e| e.version), Some(4));
        // "new" goes on from its removal; "old", from its shard's floor.
        assert_eq!(rt.create("new", &user).unwrap().version, 5);
        assert_eq!(rt.create("old", &user).unwrap().version, 5);

        let (_, old_shard) = rt.store().shard(&"old".into());
        let same =
            |n: &usize| std::ptr::eq(rt.store().shard(&format!("id-{n}").into()).1, old_shard);
        let neighbour = (0..).find(same).map(|n| format!("id-{n}")).unwrap();
        let elsewhere = (0..).find(|n| !same(n)).map(|n| format!("id-{n}")).unwrap();
        let guesses =
            [&neighbour, &elsewhere].map(|id| rt.store().first_version(&id.as_str().into()));
        assert_eq!(guesses, [5, 1], "{neighbour}, {elsewhere}");
        assert_eq!(
            rt.create(neighbour.as_str(), &user).unwrap().version,
            5,
            "{neighbour}"
        );
        assert_eq!(
            rt.create(elsewhere.as_str(), &user).unwrap().version,
            1,
            "{elsewhere}"
        );
    }

    /// Threads create and remove their own ids (all of one shard, which
    /// has one floor) over and over while another forgets every removal,
    /// again and again: every object of an id is created past the removal of
    /// the one before, forgotten or not. Asserts the race, round after round
    /// until it happened: some creations found their id's removal forgotten
    /// (and were numbered from the floor, which another id's removal had
    /// raised past it), and the forgetting forgot.
    #[test]
    fn forgetting_removals_while_ids_come_and_go_never_repeats_a_version() {
        /// Counts a worker out when it ends, panicking or not: the forgetter
        /// stops once none is left.
        struct Working<'a>(&'a std::sync::atomic::AtomicUsize);
        impl Drop for Working<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
        let raced = (0..100).any(|_| {
            let rt = Runtime::new(crate::testing::machine(), MemoryStore::new()).unwrap();
            let (_, one) = rt.store().shard(&"w-0".into());
            let ids: Vec<String> = (0..)
                .map(|n| format!("w-{n}"))
                .filter(|id| std::ptr::eq(rt.store().shard(&id.as_str().into()).1, one))
                .take(32)
                .collect();
            let working = std::sync::atomic::AtomicUsize::new(2);
            let (forgotten, from_floor) = std::thread::scope(|s| {
                let forgetter = s.spawn(|| {
                    let mut forgotten = 0;
                    while working.load(std::sync::atomic::Ordering::Relaxed) > 0 {
                        forgotten += rt.store().forget_removals(later);
                        std::thread::yield_now();
                    }
                    forgotten
                });
                let workers: Vec<_> = (0..2)
                    .map(|t| {
                        let (rt, ids, working) = (&rt, &ids, &working);
                        s.spawn(move || {
                            let _working = Working(working);
                            let user = Actor::new(format!("worker-{t}"));
                            let mut from_floor = 0;
                            for id in ids.iter().skip(t).step_by(2) {
                                let mut removed_at = 0;
                                for _ in 0..50 {
                                    let created = rt.create(id.as_str(), &user).unwrap().version;
                                    assert!(
                                        created > removed_at,
                                        "{id}: created at {created} after a removal at {removed_at}"
                                    );
                                    from_floor += usize::from(created > removed_at + 1);
                                    removed_at = rt.remove(id.as_str(), &user).unwrap().version;
                                }
                            }
                            from_floor
                        })
                    })
                    .collect();
                let from_floor: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
                (forgetter.join().unwrap(), from_floor)
            });
            forgotten > 0 && from_floor > 0
        });
        assert!(
            raced,
            "in 100 rounds no creation found its removal forgotten"
        );
    }

    proptest! {
        /// The index orders ids as the ids order themselves: short ones, ones
        /// with zero bytes where the padding goes, and long ones that share
        /// their first sixteen bytes.
        #[test]
        fn the_index_orders_ids_by_their_text(
            a in "(vm-0000000000000)?[a-c\\x00]{0,20}",
            b in "(vm-0000000000000)?[a-c\\x00]{0,20}",
        ) {
            let (x, y) = (ObjectId::from(a.as_str()), ObjectId::from(b.as_str()));
            prop_assert_eq!(OrderedId::new(x).cmp(&OrderedId::new(y)), a.cmp(&b));
        }
    }

    /// A packed entry is the two thirds of an entry it is made to be.
    #[test]
    fn a_packed_entry_takes_48_bytes() {
        assert_eq!(size_of::<Packed>(), 48);
        assert!(size_of::<Entry>() > 48);
    }

    const KINDS: [EntryKind; 7] = [
        EntryKind::Created,
        EntryKind::Started,
        EntryKind::Completed,
        EntryKind::Failed,
        EntryKind::Abandoned,
        EntryKind::Healed,
        EntryKind::Removed,
    ];

    proptest! {
        /// Packing loses nothing: every id a machine may have, a creation's
        /// missing action, every kind, times before the epoch and after it.
        #[test]
        fn an_entry_packed_reads_back_whole(
            version in any::<u64>(),
            before in any::<bool>(),
            secs in 0u64..(1 << 40),
            nanos in 0u32..1_000_000_000,
            action in proptest::option::of(0..NO_ACTION),
            from in any::<u32>(),
            to in any::<u32>(),
            kind in 0..KINDS.len(),
        ) {
            let distance = Duration::new(secs, nanos);
            let at = if before { UNIX_EPOCH - distance } else { UNIX_EPOCH + distance };
            let entry = Entry {
                version,
                at,
                actor: ActorName::new("healer"),
                kind: KINDS[kind],
                action: action.map(|a| ActionId(a as usize)),
                from: StateId(from as usize),
                to: StateId(to as usize),
            };
            prop_assert_eq!(Packed::new(&entry).entry(), entry);
        }
    }
}
