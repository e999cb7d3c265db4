//! [`Store`] for [`EtcdStore`]: the runtime's calls, blocking and async.

use etcd_client::{GetOptions, Txn, TxnOp, TxnOpResponse};
use fsm_core::Machine;
use fsm_runtime::wire::{Codec, StoredRecord};
use fsm_runtime::{Entry, ObjectId, Record, Records, Removal, Store, StoreError, Watcher, Write};

use crate::error::unavailable;
use crate::feed::feed;
use crate::{EtcdStore, Kept, Known, REMOVED, Reading, json, lock, prefix_end, unescape};

impl Store for EtcdStore {
    /// Learns the machine's names, then reads every record under the prefix: a
    /// record in a state or held by an action the spec no longer has (nor declares
    /// as `renamed_from`) refuses the machine, listing them.
    fn bind(&self, machine: &Machine) -> Result<(), StoreError> {
        self.check_format().map_err(|e| match e {
            StoreError::Unreadable { key, reason } => StoreError::Incompatible {
                machine: machine.name().to_owned(),
                reason: format!("{key}: {reason}"),
            },
            other => other,
        })?;
        let codec = self.inner.codec.get_or_init(|| Codec::new(machine));
        if codec.fingerprint() == fsm_core::evolve::fingerprint(machine) {
            let prefix = format!("{}obj/", self.inner.prefix);
            let (mut kv, query) = (self.kv(), prefix.clone());
            let resp = self
                .run(async move { kv.get(query, Some(GetOptions::new().with_prefix())).await })?;
            let unreadable: Vec<String> = resp
                .kvs()
                .iter()
                .filter(|kv| kv.value() != REMOVED)
                .filter_map(|kv| {
                    let stored: StoredRecord = json(kv.value(), kv.key()).ok()?;
                    let id = kv.key_str().ok()?.strip_prefix(&prefix).map(unescape)?;
                    let names = [Some(&stored.state)].into_iter().chain(
                        [&stored.in_flight, &stored.hidden]
                            .into_iter()
                            .map(|h| h.as_ref().map(|h| &h.origin)),
                    );
                    let bad_state = names.flatten().find(|n| codec.state(n).is_err());
                    let bad_action = [&stored.in_flight, &stored.hidden]
                        .into_iter()
                        .flatten()
                        .map(|h| &h.action)
                        .find(|a| codec.action(a).is_err());
                    bad_state
                        .or(bad_action)
                        .map(|name| format!("{id} ({name})"))
                })
                .collect();
            if unreadable.is_empty() {
                return Ok(());
            }
            return Err(StoreError::unreadable_objects(machine.name(), unreadable));
        }
        Err(StoreError::Incompatible {
            machine: machine.name().to_owned(),
            reason: format!(
                "this store handle already serves a machine with fingerprint {}; open one handle per machine",
                codec.fingerprint()
            ),
        })
    }

    fn load(&self, id: &ObjectId) -> Result<Option<Record>, StoreError> {
        let read = self.read(id)?;
        self.keep(
            id,
            read.as_ref()
                .map(|(record, revision)| Kept::record(record, *revision)),
        );
        Ok(read.map(|(record, _)| record))
    }

    /// Writes by one transaction that compares the revision that wrote the
    /// record expected (or, for a creation, that the key holds the
    /// removal's mark, or is absent and the floor as read).
    fn commit(&self, write: Write) -> Result<(), StoreError> {
        self.commit_kept(write).map(drop)
    }

    /// The record as stored: with the session the start it makes names.
    fn commit_reading<R>(
        &self,
        write: Write,
        read: impl FnOnce(&Record) -> R,
    ) -> Result<R, StoreError> {
        Ok(read(&self.commit_kept(write)?))
    }

    /// As [`commit_reading`](Store::commit_reading), on the store's own
    /// runtime.
    fn commit_reading_async<R: Send>(
        &self,
        write: Write,
        read: impl FnOnce(&Record) -> R + Send,
    ) -> impl Future<Output = Result<R, StoreError>> + Send {
        let store = self.clone();
        let kept = self.off_thread(move || store.commit_kept(write));
        async move { kept.await.map(|record| read(&record)) }
    }

    /// A creation is first tried past the removal of the id the store keeps,
    /// or past the floor it last read.
    fn first_version(&self, id: &ObjectId) -> u64 {
        if let Some(Kept {
            known: Known::Removed(removed),
            ..
        }) = lock(&self.inner.kept).get(id)
        {
            return removed + 1;
        }
        lock(&self.inner.floor).version + 1
    }

    /// Deletes the object's keys by one transaction (see `delete`), and
    /// keeps the removal's mark.
    fn remove(&self, removal: Removal) -> Result<(), StoreError> {
        let id = removal.id().clone();
        let result = self.delete(removal);
        if let Err(StoreError::Unavailable { .. }) = &result {
            // It may have been applied: keep nothing.
            self.keep(&id, None);
        }
        result
    }

    /// Runs [`remove`](Store::remove) on the store's own runtime and awaits
    /// it, as [`load_async`](Store::load_async).
    fn remove_async(
        &self,
        removal: Removal,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let store = self.clone();
        self.off_thread(move || store.remove(removal))
    }

    /// The entry at `gone/<id>`. (A removal made by an earlier version of
    /// this store put nothing there: `None`.)
    fn removal(&self, id: &ObjectId) -> Result<Option<Entry>, StoreError> {
        let (mut kv, key) = (self.kv(), self.gone_key(id));
        let resp = self.run(async move { kv.get(key, None).await })?;
        match resp.kvs().first() {
            Some(kv) if kv.value() != REMOVED => self.decode_entry(kv.value(), kv.key()).map(Some),
            _ => Ok(None),
        }
    }

    /// The record this store last read or wrote.
    fn cached(&self, id: &ObjectId) -> Option<Record> {
        match lock(&self.inner.kept).get(id) {
            Some(Kept {
                known: Known::Record(record),
                ..
            }) => Some(record.clone()),
            _ => None,
        }
    }

    fn history(&self, id: &ObjectId) -> Result<Vec<Entry>, StoreError> {
        self.history_after(id, None, usize::MAX)
    }

    /// One range of the history's keys: from version `after + 1`, `limit`
    /// of them at most.
    fn history_after(
        &self,
        id: &ObjectId,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let prefix = self.history_prefix(id);
        let end = prefix_end(&prefix);
        let from = format!("{prefix}{:020}", after.map_or(0, |v| v.saturating_add(1)));
        let mut options = GetOptions::new().with_range(end);
        if let Ok(limit) = i64::try_from(limit) {
            options = options.with_limit(limit);
        }
        let mut kv = self.kv();
        let resp = self.run(async move { kv.get(from, Some(options)).await })?;
        // etcd answers in key order, which is version order. A removal's
        // entry is no object's history: it is only ever the last key left of
        // a removed object (its clean-up failed), until the id's next creation.
        let mut entries = Vec::with_capacity(resp.kvs().len());
        for kv in resp.kvs() {
            let entry = self.decode_entry(kv.value(), kv.key())?;
            if entry.kind != fsm_runtime::EntryKind::Removed {
                entries.push(entry);
            }
        }
        Ok(entries)
    }

    /// The keys of `obj/` and of `gone/`, read in one transaction, keys only:
    /// every id with a key of the first and none of the second (an id whose
    /// object was removed keeps its `obj/` key, empty).
    fn ids(&self) -> Result<Vec<ObjectId>, StoreError> {
        let objects = format!("{}obj/", self.inner.prefix);
        let gone = format!("{}gone/", self.inner.prefix);
        let keys = || Some(GetOptions::new().with_prefix().with_keys_only());
        let txn = Txn::new().and_then([
            TxnOp::get(objects.clone(), keys()),
            TxnOp::get(gone.clone(), keys()),
        ]);
        let mut kv = self.kv();
        let resp = self.run(async move { kv.txn(txn).await })?;
        let mut gets = resp.op_responses().into_iter().filter_map(|r| match r {
            TxnOpResponse::Get(get) => Some(get),
            _ => None,
        });
        let (Some(live), Some(removed)) = (gets.next(), gets.next()) else {
            return Err(unavailable(
                "etcd: a transaction of two reads answered otherwise",
                false,
            ));
        };
        let segments = |get: &etcd_client::GetResponse, prefix: &str| -> Vec<String> {
            get.kvs()
                .iter()
                .filter_map(|kv| Some(kv.key_str().ok()?.strip_prefix(prefix)?.to_owned()))
                .collect()
        };
        let removed: std::collections::HashSet<String> =
            segments(&removed, &gone).into_iter().collect();
        Ok(segments(&live, &objects)
            .into_iter()
            .filter(|segment| !removed.contains(segment))
            .map(|segment| unescape(&segment))
            .collect())
    }

    /// Every record in one snapshot of etcd: one transaction for the first
    /// thousand records and every key that says whether a holder lives, then
    /// a request per thousand more, read at the same revision.
    fn records(&self) -> Result<Records, StoreError> {
        let mut records = self.read_range(None, None)?;
        records.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        Ok(records)
    }

    /// Each record looked at as [`records`](Store::records) reads it (one
    /// snapshot), a request's thousand records at a time: not sorted, and
    /// never every record held at once.
    fn for_each_record(
        &self,
        mut look: impl FnMut(&ObjectId, Result<&Record, &StoreError>),
    ) -> Result<(), StoreError> {
        self.read_pages(None, None, |page| {
            for (id, record) in &page {
                look(id, record.as_ref());
            }
        })
    }

    /// One range of keys past `after`'s, in one snapshot as
    /// [`records`](Store::records) reads: in key order, where an id's `/` sorts
    /// as `%2F` (and `%` as `%25`), so `a/1` comes before `a-1`.
    fn records_after(&self, after: Option<&ObjectId>, limit: usize) -> Result<Records, StoreError> {
        self.read_range(after, Some(limit))
    }

    /// The first call opens the etcd watch on the history, from the revision
    /// etcd is at once the watcher exists: every write accepted after this call
    /// returns reaches the watcher.
    fn watch(&self) -> Result<Watcher, StoreError> {
        let mut fed = lock(&self.inner.fed);
        let watcher = self.inner.publisher.watch();
        if !*fed {
            let revision = i64::try_from(self.revision()?).unwrap_or(i64::MAX - 1);
            let runtime = self.inner.runtime.as_ref().expect("running until dropped");
            runtime.spawn(feed(
                self.inner.client.subscribe(),
                format!("{}hist/", self.inner.prefix),
                revision + 1,
                self.inner.publisher.clone(),
                self.inner.codec.clone(),
            ));
            *fed = true;
        }
        Ok(watcher)
    }

    /// Runs [`load`](Store::load) on the store's own runtime and awaits it: the
    /// caller's thread (a worker of its runtime, or the only thread of a
    /// current-thread runtime) goes on with other tasks meanwhile.
    fn load_async(
        &self,
        id: &ObjectId,
    ) -> impl Future<Output = Result<Option<Record>, StoreError>> + Send {
        let (store, id) = (self.clone(), id.clone());
        self.off_thread(move || store.load(&id))
    }

    /// Yes: an async start runs whole on a blocking thread of the store's
    /// runtime, so that one whose future is dropped lands or not there, and
    /// its handle, if it made one, is dropped there (the action recorded
    /// abandoned), never left held by this live process with no handle.
    fn runs_detached(&self) -> bool {
        true
    }

    /// Runs `call` on a blocking thread of the store's runtime, to its end
    /// even when the future is dropped.
    fn run_detached<T: Send + 'static>(
        &self,
        call: impl FnOnce() -> T + Send + 'static,
    ) -> impl Future<Output = Result<T, StoreError>> + Send {
        self.detached(call)
    }

    /// Runs [`commit`](Store::commit) on the store's own runtime and awaits it, as
    /// [`load_async`](Store::load_async).
    fn commit_async(&self, write: Write) -> impl Future<Output = Result<(), StoreError>> + Send {
        let store = self.clone();
        self.off_thread(move || store.commit(write))
    }

    /// Subscribes at once once the feed runs; the first watch, which reads
    /// etcd's revision to start the feed there, runs on the store's own
    /// runtime and is awaited.
    fn watch_async(&self) -> impl Future<Output = Result<Watcher, StoreError>> + Send {
        let store = self.clone();
        async move {
            let fed = *lock(&store.inner.fed);
            match fed {
                true => Ok(store.inner.publisher.watch()),
                false => {
                    let first = store.clone();
                    store.off_thread(move || first.watch()).await
                }
            }
        }
    }

    /// Runs [`ids`](Store::ids) on the store's own runtime and awaits it, as
    /// [`load_async`](Store::load_async).
    fn ids_async(&self) -> impl Future<Output = Result<Vec<ObjectId>, StoreError>> + Send {
        let store = self.clone();
        self.off_thread(move || store.ids())
    }

    /// Runs [`records`](Store::records) on the store's own runtime and awaits
    /// it, as [`load_async`](Store::load_async).
    fn records_async(&self) -> impl Future<Output = Result<Records, StoreError>> + Send {
        let store = self.clone();
        self.off_thread(move || store.records())
    }

    /// [`for_each_record`](Store::for_each_record) for async callers: each
    /// request of the read runs on the store's own runtime, as
    /// [`load_async`](Store::load_async), and `look` sees its records on the
    /// caller's task before the next request is made. As the blocking form,
    /// it never holds more than one request's thousand records.
    fn for_each_record_async(
        &self,
        mut look: impl FnMut(&ObjectId, Result<&Record, &StoreError>) + Send,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let store = self.clone();
        async move {
            let mut reading = Reading::new(&store.inner.prefix, None, None);
            loop {
                let on = store.clone();
                let (read_on, page) = store
                    .off_thread(move || {
                        let page = on.next_page(&mut reading)?;
                        Ok((reading, page))
                    })
                    .await?;
                let Some(page) = page else { return Ok(()) };
                for (id, record) in &page {
                    look(id, record.as_ref());
                }
                reading = read_on;
            }
        }
    }

    /// Runs [`records_after`](Store::records_after) on the store's own runtime
    /// and awaits it, as [`load_async`](Store::load_async).
    fn records_after_async(
        &self,
        after: Option<&ObjectId>,
        limit: usize,
    ) -> impl Future<Output = Result<Records, StoreError>> + Send {
        let (store, after) = (self.clone(), after.cloned());
        self.off_thread(move || store.records_after(after.as_ref(), limit))
    }

    /// Runs [`removal`](Store::removal) on the store's own runtime and awaits
    /// it, as [`load_async`](Store::load_async).
    fn removal_async(
        &self,
        id: &ObjectId,
    ) -> impl Future<Output = Result<Option<Entry>, StoreError>> + Send {
        let (store, id) = (self.clone(), id.clone());
        self.off_thread(move || store.removal(&id))
    }

    /// Runs [`history`](Store::history) on the store's own runtime and awaits
    /// it, as [`load_async`](Store::load_async).
    fn history_async(
        &self,
        id: &ObjectId,
    ) -> impl Future<Output = Result<Vec<Entry>, StoreError>> + Send {
        let (store, id) = (self.clone(), id.clone());
        self.off_thread(move || store.history(&id))
    }

    /// Runs [`history_after`](Store::history_after) on the store's own runtime
    /// and awaits it, as [`load_async`](Store::load_async).
    fn history_after_async(
        &self,
        id: &ObjectId,
        after: Option<u64>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Entry>, StoreError>> + Send {
        let (store, id) = (self.clone(), id.clone());
        self.off_thread(move || store.history_after(&id, after, limit))
    }
}
