//! An etcd store for the fsm runtime, for operators that run as several processes
//! on several machines and need the guarantees of the in-memory store on a shared
//! one.
//!
//! ```no_run
//! use std::time::Duration;
//! use fsm_etcd::EtcdStore;
//! use fsm_runtime::{Actor, Runtime};
//!
//! let store = EtcdStore::builder(["10.0.0.5:2379"], "/sabakan/machines/")
//!     .lease_ttl(Duration::from_secs(10))
//!     .connect()?;
//! let machine = fsm_core::spec::load("specs/sabakan/machine.toml")?;
//! let machines = Runtime::builder(machine, store)
//!     .guard("keys_deleted", |_| true)
//!     .guard("restarted", |_| true)
//!     .guard("keeps_keys", |_| true)
//!     .guard("adds_no_keys", |_| true)
//!     .build()?;
//! machines.create("rack1-node3", &Actor::new("ops").with_role("admin"))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Layout and guarantees
//!
//! Under its prefix the store keeps, per object, `obj/<id>` (the record, JSON) and
//! `hist/<id>/<version>` (one history entry per write, JSON, the version
//! zero-padded so that keys sort in version order); `/` and `%` in ids are escaped.
//! A removed object leaves its `obj/<id>` key, empty, and `gone/<id>`, its
//! removal's entry ([`Store::removal`]), until the id is created again or
//! [`EtcdStore::forget_removals`] forgets them; the key `floor` then holds the
//! highest version forgotten, and the key `format` the prefix's stored
//! [`FORMAT`] (no key: format 1). A store refuses a prefix of a format newer
//! than it reads ([`StoreError::Incompatible`] when a runtime binds it), rather
//! than misread or overwrite it.
//! States and actions are stored by name with the spec's fingerprint
//! ([`fsm_runtime::wire`]), so `etcdctl get --prefix /sabakan/machines/obj/` reads
//! `"state":"Healthy"`, and adding or reordering states in the spec changes
//! nothing stored.
//!
//! - **Compare-and-set by transaction.** A write is one etcd transaction:
//!   *if* `obj/<id>` was last written at the revision of the record the write
//!   was decided on (its `mod_revision`, which the store keeps with each
//!   record it reads or writes, and reads when it keeps none), *then* put the
//!   record and put its history entry, *else* read what is there and answer
//!   [`StoreError::Conflict`]. A state change is never stored without its
//!   history entry, nor an entry without its change. A revision is never
//!   another write's, so a write decided on a record that is no longer there
//!   loses, whatever the key holds now.
//! - **Removal by transaction too.** [`Store::remove`] is one transaction:
//!   *if* `obj/<id>` is as the record expected, *then* empty `obj/<id>`, put
//!   the removal's entry at `gone/<id>`, delete the history's keys and put the
//!   entry at the next version's key too (which the watch below publishes),
//!   *else* answer the conflict. A second request deletes that last key while the object is
//!   still removed; should it fail, the next creation of the id deletes it.
//! - **Versions never repeat for an id.** The id's next object is created at
//!   the version after the removal's (*if* the emptied key is as the removal
//!   left it), so no version, and no `If-Match` or fence, of a removed object
//!   is ever one of a new object of its id. An id without a key is created
//!   past the floor (*if* it has no key and `floor` is as read: 0, no key,
//!   until a removal was forgotten). A creation is first tried at the version
//!   the store knows to be right ([`Store::first_version`]); one it does not
//!   know reads what it needs and answers the right one
//!   ([`StoreError::CreateAt`]), and the runtime creates again there.
//! - **A read saved per write.** The store keeps the records it last read or
//!   wrote ([`Store::cached`]), and a start or a completion decides on that
//!   copy instead of reading first: one transaction to start, one to end. A
//!   copy that another process made stale costs nothing wrong: the write's
//!   compare-and-set loses, or its refusal is not trusted, and it is decided
//!   again on a fresh read. Reads ([`Store::load`],
//!   `Runtime::get`) always go to etcd.
//! - **Watchers on etcd watch.** One etcd watch on `hist/`, opened at the store's
//!   first [`watch`](Store::watch), feeds the store's [`Publisher`], so watchers
//!   see the writes of every process, each object's in version order; a process
//!   that never watches costs etcd no event per write. A watch broken by a lost connection resumes from the last
//!   revision seen.
//! - **Errors.** A lost connection, a timeout or an etcd restarting is
//!   [`StoreError::Unavailable`] with `retryable: true`. A write that timed out may
//!   have been applied whole (never half): the runtime's next read tells which.
//!   A completion answered so has used up its handle: take the action up again
//!   by its fence ([`Runtime::resume`](fsm_runtime::Runtime::resume)) and
//!   complete it; if the first write was applied after all, the resume says the
//!   hold ended, and by whom.
//!
//! # Ownership across processes, and its limits
//!
//! - **A process that dies.** Each process keeps one key, `live/<lease>`, on its
//!   lease, kept alive in the background. The write that starts an action names
//!   that lease in the holder
//!   ([`Holder::session`](fsm_runtime::Holder::session)) and stands only while
//!   the key lives; no other key is written per action. The record a start
//!   answers ([`Runtime::start_with_record`](fsm_runtime::Runtime::start_with_record))
//!   names it too. When the process dies its lease
//!   expires after its time to live ([`EtcdBuilder::lease_ttl`]), the key goes,
//!   and every process then reads its holders as *abandoned*: a
//!   [`Healer`](fsm_runtime::Healer) anywhere rolls the object back at once, by
//!   compare-and-set.
//! - **Records of the previous format.** A holder written before holders named
//!   their session was alive while `held/<id>` (or `hidden/<id>`) held its
//!   version, on its process's lease; such holders are still read that way. A
//!   process of that version, though, reads a holder of this one as abandoned:
//!   do not run both versions on one prefix at once.
//! - **A slow action** in a live process keeps its lease: the lease bounds how long
//!   a dead process holds objects, not how long an action may take (the healer's
//!   timeouts do that).
//! - **A partition.** A process cut off from etcd cannot write: its starts and
//!   completions answer [`StoreError::Unavailable`] (retryable). If it stays cut
//!   off longer than the lease's time to live, its actions read as abandoned and
//!   may be rolled back by a healer elsewhere; when it comes back, its completion
//!   is a `409 Conflict` and writes nothing. What the action did outside the store
//!   must therefore be safe to redo or to undo, and it should pass the action's
//!   [`Fence`](fsm_runtime::Fence) to the systems it drives, which refuse a lower
//!   one than they have seen. [`InFlight::still_held`](fsm_runtime::InFlight::still_held)
//!   tells the holder it was revoked, by whom and when; the queue checks it before
//!   each step. The same holds when the lease expires because keep-alives failed
//!   while the process lived on; the store then takes a new lease (at once, if a
//!   write finds the old one gone before the keep-alive task does).
//! - **Watch gaps.** A watch broken by a lost connection or an etcd restart resumes
//!   from the last revision it saw, so watchers see each object's versions without
//!   a gap. If etcd compacted that revision away meanwhile, the store reads
//!   the prefix as compaction left it: when nothing under it was written in
//!   between (a quiet prefix, others' writes compacted), no event was lost and
//!   the watch goes on from the oldest revision etcd kept. Otherwise the
//!   events between are gone: every watcher's next read answers
//!   [`Lagged::Gap`](fsm_runtime::Lagged::Gap), and reading goes on from
//!   there; re-read the objects then.
//! - **Reading every object.** [`Store::records`] reads the first thousand
//!   records and every key that says whether a holder lives in one
//!   transaction, then a thousand more per request at that transaction's
//!   revision: one snapshot, in as many requests as there are thousands (a
//!   listing of `fsm serve`). [`Store::for_each_record`] reads the same
//!   snapshot and looks at each request's records before it reads the next,
//!   never holding every record (a [`Healer`](fsm_runtime::Healer)'s pass,
//!   `fsm serve`'s summary and metrics, `Runtime::states`). A compaction past
//!   that revision while the pages are read fails the call (retryable). [`Store::records_after`] reads a page the same way, over
//!   the range of keys past the page's `after` only, in key order (an id's
//!   `/` sorts as `%2F`): a page of a hundred reads a hundred records (and
//!   the keys that say holders live) however many objects there are.
//! - **Large answers.** The store reads answers of up to 2 GiB, as etcd's own
//!   client does, not gRPC's default of 4 MiB: a request's thousand records
//!   with their data, a long history and a watch catching up are read whole.
//!   A write past what etcd takes (`--max-request-bytes`, 1.5 MiB by default:
//!   an object's data, and at a start the data it proposes beside it) is
//!   [`StoreError::TooLarge`], naming the object: never retried, nothing
//!   written.
//! - **Positions.** Each event carries its write's revision
//!   ([`Event::position`](fsm_runtime::Event::position)), the same in every
//!   process on the store; [`EtcdStore::revision`] is etcd's revision now.
//!
//! # An etcd that checks who connects
//!
//! [`EtcdBuilder::user`] authenticates as an etcd user ([`EtcdUser`]), and
//! again whenever etcd says the token expired (`--auth-token-ttl`). With the
//! feature `tls`, [`EtcdBuilder::tls`] connects over TLS ([`EtcdTls`]):
//! etcd's certificate checked against the authority given, and a client
//! certificate for an etcd run with `--client-cert-auth`. A refused
//! connection is [`StoreError::Unavailable`] saying where and how the store
//! connected and what etcd or TLS answered (without a client certificate,
//! that etcd may want one); a wrong password, a user etcd does not know and a
//! certificate either side refuses are not retryable.
//! [`EtcdStore::reconnect`] renews a running store's access (a client
//! certificate about to expire, another user) without dropping its session or
//! its watch.
//!
//! The store's calls are blocking: they run on the store's own tokio runtime and
//! wait for it, so they work from plain threads and (blocking a worker briefly)
//! from async code alike.

// docs.rs (`--cfg docsrs`, a nightly) marks each item a feature gates with it.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod any;
mod connect;
mod error;
mod feed;
mod forget;
mod session;
mod store;

pub use any::AnyStore;
pub use connect::{EtcdAccess, EtcdBuilder, EtcdUser};
#[cfg(feature = "tls")]
pub use connect::{EtcdFlagError, EtcdFlags, EtcdTls, EtcdTlsError, EtcdTlsFileError};
pub use forget::FORMAT;

use std::future::Future;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, DeleteOptions, GetOptions, Txn, TxnOp, TxnOpResponse,
};
use fsm_runtime::wire::{Codec, StoredEntry, StoredHolder, StoredRecord};
use fsm_runtime::{
    Entry, Expected, ObjectId, Publisher, Record, Records, Removal, StoreError, Write,
};

// What the docs link to.
#[cfg(doc)]
use fsm_runtime::Store;

use crate::error::{described, is_too_large, store_error, unavailable};
use crate::forget::Floor;
use crate::session::{live_key, replace_lease};

/// How many events each watcher buffers.
const WATCH_CAPACITY: usize = 1024;

/// How many records [`Store::records`] reads per request.
const RECORDS_PAGE: i64 = 1_000;

/// How many removals [`EtcdStore::forget_removals`] forgets per transaction:
/// three deletes and two compares each, inside etcd's default limit of 128
/// operations per transaction (`--max-txn-ops`).
const FORGET_BATCH: usize = 32;

/// How many records the store keeps, to decide on without reading first
/// ([`Store::cached`]).
const KEPT: usize = 65_536;

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A [`Store`] on etcd. Cloning it is cheap and shares the connection.
#[derive(Clone)]
pub struct EtcdStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("prefix", &self.inner.prefix)
            .field("lease", &self.inner.lease.load(Ordering::Relaxed))
            .field("timeout", &self.inner.timeout)
            .finish()
    }
}

struct Inner {
    /// The store's own runtime; shut down in the background when dropped, so that
    /// dropping the store in async code is fine.
    runtime: Option<tokio::runtime::Runtime>,
    /// The client every request is made with; replaced whole by
    /// [`EtcdStore::reconnect`], which the keep-alive and watch tasks see.
    client: tokio::sync::watch::Sender<Client>,
    prefix: String,
    timeout: Duration,
    publisher: Arc<Publisher>,
    /// Whether the etcd watch that feeds `publisher` is open: only once someone
    /// watches, so that a process that never does costs etcd no event per write.
    fed: std::sync::Mutex<bool>,
    /// Objects' keys as this store last read or wrote them: the records
    /// ([`Store::cached`]) and the marks of removed objects, each with the
    /// revision that wrote it, which the next write compares.
    kept: std::sync::Mutex<std::collections::HashMap<ObjectId, Kept>>,
    /// The floor ([`EtcdStore::forget_removals`]) as last read: an id
    /// without a key is created past it.
    floor: std::sync::Mutex<Floor>,
    /// This process's lease, kept alive in the background: its key `live/<lease>`
    /// says this process lives, and the holders of the actions it starts name it.
    lease: Arc<AtomicI64>,
    /// The lease's time to live, in seconds.
    ttl: i64,
    /// Names to ids and back, for the machine the store was bound to.
    codec: Arc<OnceLock<Codec>>,
    /// How many entries of each history to keep (all: `None`).
    keep: Option<u64>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl EtcdStore {
    /// The key-value calls of the client in use.
    fn kv(&self) -> etcd_client::KvClient {
        kv_client(&self.inner.client.borrow())
    }

    /// The client in use.
    fn client(&self) -> Client {
        self.inner.client.borrow().clone()
    }

    /// The prefix the store's keys live under.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// etcd's revision now: every write accepted from here on has a later one
    /// (the [`position`](fsm_runtime::Event::position) its watchers' events
    /// carry), every write already accepted this one or an earlier one.
    pub fn revision(&self) -> Result<u64, StoreError> {
        let (mut kv, prefix) = (self.kv(), self.inner.prefix.clone());
        let header = self.run(async move { kv.get(prefix, None).await })?;
        Ok(header
            .header()
            .and_then(|h| u64::try_from(h.revision()).ok())
            .unwrap_or(0))
    }

    /// Runs `work` on the store's runtime with the store's timeout and waits for it.
    fn run<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, etcd_client::Error>> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.run_mapped(work, store_error)
    }

    /// [`run`](Self::run), etcd's errors told by `error`.
    fn run_mapped<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, etcd_client::Error>> + Send + 'static,
        error: impl FnOnce(etcd_client::Error) -> StoreError + Send + 'static,
    ) -> Result<T, StoreError> {
        let timeout = self.inner.timeout;
        let runtime = self.inner.runtime.as_ref().expect("running until dropped");
        let work = async move {
            match tokio::time::timeout(timeout, work).await {
                Ok(done) => done.map_err(error),
                Err(_) => Err(unavailable("etcd: timed out", true)),
            }
        };
        wait_on(runtime, work)
            .unwrap_or_else(|| Err(unavailable("etcd: the store's runtime stopped", false)))
    }

    fn object_key(&self, id: &ObjectId) -> String {
        format!("{}obj/{}", self.inner.prefix, escape(id.as_str()))
    }

    /// The key by which a store of the previous format said that an action of a
    /// live process held `id`'s visible (or hidden) slot: still read, for holders
    /// written then (they name no session).
    fn held_key(&self, id: &ObjectId, hidden: bool) -> String {
        let slot = if hidden { "hidden" } else { "held" };
        format!("{}{slot}/{}", self.inner.prefix, escape(id.as_str()))
    }

    fn history_prefix(&self, id: &ObjectId) -> String {
        format!("{}hist/{}/", self.inner.prefix, escape(id.as_str()))
    }

    /// The key that says `id`'s object was removed and not created again
    /// (its `obj/` key then holds [`REMOVED`]): [`Store::ids`] reads keys
    /// only, and leaves these ids out.
    fn gone_key(&self, id: &ObjectId) -> String {
        format!("{}gone/{}", self.inner.prefix, escape(id.as_str()))
    }

    /// The key of the floor of forgotten removals
    /// ([`EtcdStore::forget_removals`]): the highest version forgotten, in
    /// decimal; absent until one is.
    fn floor_key(&self) -> String {
        format!("{}floor", self.inner.prefix)
    }

    /// The key of the prefix's stored format ([`FORMAT`]), in decimal;
    /// absent (format 1) until a removal is forgotten.
    fn format_key(&self) -> String {
        format!("{}format", self.inner.prefix)
    }
}

/// What a removed object's `obj/` key holds: nothing. The key stays (until
/// [`EtcdStore::forget_removals`] forgets it), so that the id's next object
/// continues the removed one's versions.
const REMOVED: &[u8] = b"";

/// What this store last read or wrote at an object's `obj/` key, and the
/// etcd revision of that write: a write of the object compares that
/// revision, which no other write of any key ever has, so a write decided on
/// a record that is no longer there (even on one of a forgotten object of
/// the id at the same version) always loses.
#[derive(Debug, Clone)]
struct Kept {
    known: Known,
    revision: i64,
}

/// What an `obj/` key held.
#[derive(Debug, Clone)]
enum Known {
    /// The object's record.
    Record(Record),
    /// The mark of an object removed at this version.
    Removed(u64),
}

/// Drives `work` on `runtime` (a client's own runtime) and waits for it from
/// synchronous code: on a plain thread, driving it from there; inside another
/// tokio runtime (where blocking on `runtime` would panic), handing it over and
/// waiting. `None` if `runtime` shut down before `work` finished. How a blocking
/// API is built over an async client; the caller's thread is blocked meanwhile.
pub fn wait_on<T: Send + 'static>(
    runtime: &tokio::runtime::Runtime,
    work: impl Future<Output = T> + Send + 'static,
) -> Option<T> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Some(runtime.block_on(work));
    }
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime.spawn(async move {
        let _ = tx.send(work.await);
    });
    rx.recv().ok()
}

/// An id as one key segment: `%` and `/` escaped, so that no id's keys are a
/// prefix of another's.
fn escape(id: &str) -> String {
    id.replace('%', "%25").replace('/', "%2F")
}

fn unescape(segment: &str) -> ObjectId {
    ObjectId::from(segment.replace("%2F", "/").replace("%25", "%"))
}

fn unreadable(key: &[u8], reason: impl std::fmt::Display) -> StoreError {
    StoreError::Unreadable {
        key: String::from_utf8_lossy(key).into_owned(),
        reason: reason.to_string(),
    }
}

fn json<T: serde::de::DeserializeOwned>(bytes: &[u8], key: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| unreadable(key, format!("not what fsm stores ({e})")))
}

fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("records and entries serialize")
}

impl EtcdStore {
    fn codec(&self) -> Result<&Codec, StoreError> {
        self.inner
            .codec
            .get()
            .ok_or_else(|| StoreError::Incompatible {
                machine: String::new(),
                reason: "no runtime was built over the store yet (`Store::bind`)".into(),
            })
    }

    fn decode_record(&self, bytes: &[u8], key: &[u8]) -> Result<Record, StoreError> {
        let stored: StoredRecord = json(bytes, key)?;
        self.codec()?
            .decode_record(stored)
            .map_err(|e| unreadable(key, e))
    }

    fn decode_entry(&self, bytes: &[u8], key: &[u8]) -> Result<Entry, StoreError> {
        let stored: StoredEntry = json(bytes, key)?;
        self.codec()?
            .decode_entry(stored)
            .map_err(|e| unreadable(key, e))
    }
}

impl EtcdStore {
    /// The object's record as etcd has it now, its holders' liveness read,
    /// and the revision that wrote it.
    fn read(&self, id: &ObjectId) -> Result<Option<(Record, i64)>, StoreError> {
        let (mut kv, key) = (self.kv(), self.object_key(id));

        let resp = self.run(async move { kv.get(key, None).await })?;
        let Some((mut record, revision)) = resp
            .kvs()
            .first()
            .filter(|kv| kv.value() != REMOVED)
            .map(|kv| Ok((self.decode_record(kv.value(), kv.key())?, kv.mod_revision())))
            .transpose()?
        else {
            return Ok(None);
        };
        let liveness = self.liveness(id, &record);
        if liveness.is_empty() {
            return Ok(Some((record, revision)));
        }
        // An action is in flight: is the process that holds it alive? If the
        // action ended between the two reads, the record is stale and calling
        // its holder abandoned is harmless: any write based on it conflicts.
        let txn = Txn::new().and_then(
            liveness
                .iter()
                .map(|(_, key, _)| TxnOp::get(key.clone(), None))
                .collect::<Vec<_>>(),
        );
        let mut kv = self.kv();
        let resp = self.run(async move { kv.txn(txn).await })?;
        let values: Vec<Option<Vec<u8>>> = resp
            .op_responses()
            .into_iter()
            .map(|r| match r {
                TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.value().to_vec()),
                _ => None,
            })
            .collect();
        mark_abandoned(&mut record, liveness, |n| values.get(n)?.as_deref());
        Ok(Some((record, revision)))
    }

    /// For each slot of `record` held and not yet known abandoned, the key
    /// that says whether its holder's process lives: the slot (0 visible, 1
    /// hidden), the key (its session's, or for a holder written by the
    /// previous format the slot's own), and for the latter the version the key
    /// must hold.
    fn liveness(&self, id: &ObjectId, record: &Record) -> Vec<(usize, String, Option<u64>)> {
        [(&record.in_flight, false), (&record.hidden, true)]
            .into_iter()
            .enumerate()
            .filter_map(|(n, (holder, hidden))| {
                let h = holder.as_ref().filter(|h| !h.abandoned)?;
                Some(match h.session {
                    Some(session) => (n, live_key(&self.inner.prefix, session), None),
                    None => (n, self.held_key(id, hidden), Some(h.version)),
                })
            })
            .collect()
    }

    /// The records of up to `limit` objects (every one: `None`) whose keys come
    /// after `after`'s (from the first: `None`), in key order, in one snapshot:
    /// the records and every key that says a holder lives, read in one
    /// transaction (the records a thousand at a time past the first thousand,
    /// at the first's revision), so that no holder is judged against keys of
    /// another moment.
    fn read_range(
        &self,
        after: Option<&ObjectId>,
        limit: Option<usize>,
    ) -> Result<Records, StoreError> {
        let mut records = Vec::new();
        self.read_pages(after, limit, |page| records.extend(page))?;
        Ok(records)
    }

    /// [`read_range`](Self::read_range), each request's records handed to
    /// `each` as they are read (and then let go), so that a caller that keeps
    /// little of each holds a thousand records at a time, not every one.
    fn read_pages(
        &self,
        after: Option<&ObjectId>,
        limit: Option<usize>,
        mut each: impl FnMut(Records),
    ) -> Result<(), StoreError> {
        let mut reading = Reading::new(
            &self.inner.prefix,
            after.map(|id| self.object_key(id)),
            limit,
        );
        while let Some(page) = self.next_page(&mut reading)? {
            each(page);
        }
        Ok(())
    }

    /// The next request of `reading`: its records, their holders judged, or
    /// `None` once the range (or the limit) is read. The first request is one
    /// transaction that also reads every key that says a holder lives, and
    /// fixes the revision; each later one reads the next thousand records at
    /// that revision, or fails, retryable, when a compaction overtook it.
    fn next_page(&self, reading: &mut Reading) -> Result<Option<Records>, StoreError> {
        let wanted = reading.wanted();
        if wanted == 0 {
            return Ok(None);
        }
        let prefix = &self.inner.prefix;
        let mut kv = self.kv();
        let get = match (reading.revision, reading.next.take()) {
            (None, _) => {
                let page = GetOptions::new()
                    .with_range(reading.end.clone())
                    .with_limit(wanted);
                let txn = Txn::new().and_then(vec![
                    TxnOp::get(reading.first_key.clone(), Some(page)),
                    TxnOp::get(
                        format!("{prefix}live/"),
                        Some(GetOptions::new().with_prefix().with_keys_only()),
                    ),
                    TxnOp::get(
                        format!("{prefix}held/"),
                        Some(GetOptions::new().with_prefix()),
                    ),
                    TxnOp::get(
                        format!("{prefix}hidden/"),
                        Some(GetOptions::new().with_prefix()),
                    ),
                ]);
                let resp = self.run(async move { kv.txn(txn).await })?;
                reading.revision = Some(resp.header().map_or(0, |h| h.revision()));
                let gets: Vec<etcd_client::GetResponse> = resp
                    .op_responses()
                    .into_iter()
                    .filter_map(|r| match r {
                        TxnOpResponse::Get(get) => Some(get),
                        _ => None,
                    })
                    .collect();
                let [first, live, held, hidden]: [_; 4] = gets.try_into().map_err(|_| {
                    unavailable(
                        "etcd: a transaction of four reads answered otherwise",
                        false,
                    )
                })?;
                // Every key that says a holder lives, with its value.
                reading.alive = [live, held, hidden]
                    .iter()
                    .flat_map(|get| get.kvs())
                    .map(|kv| (kv.key().to_vec(), kv.value().to_vec()))
                    .collect();
                first
            }
            (Some(_), None) => return Ok(None),
            (Some(revision), Some(mut after)) => {
                // The page's last key, and a zero byte: the first key past it.
                after.push(0);
                let options = GetOptions::new()
                    .with_range(reading.end.clone())
                    .with_limit(wanted)
                    .with_revision(revision);
                self.run(async move {
                    match kv.get(after, Some(options)).await {
                        // Compacted past the snapshot's revision meanwhile.
                        // (gRPC's out of range is also its code for an answer
                        // too large to read: only etcd's compaction is this.)
                        Err(etcd_client::Error::GRpcStatus(status))
                            if status.code() == tonic::Code::OutOfRange
                                && status.message().contains("compacted") =>
                        {
                            Ok(None)
                        }
                        read => read.map(Some),
                    }
                })?
                .ok_or_else(|| {
                    unavailable(
                        "etcd: compacted past the revision of the records being read; read again",
                        true,
                    )
                })?
            }
        };
        let mut page = Vec::new();
        reading.next = self.decode_page(&get, &reading.objects, &mut page);
        // Each holder judged against the keys of the first request's moment.
        for (id, record) in &mut page {
            let Ok(record) = record else { continue };
            let liveness = self.liveness(id, record);
            let values: Vec<Option<&[u8]>> = liveness
                .iter()
                .map(|(_, key, _)| reading.alive.get(key.as_bytes()).map(Vec::as_slice))
                .collect();
            mark_abandoned(record, liveness, |n| values.get(n).copied().flatten());
        }
        reading.read += page.len();
        Ok(Some(page))
    }

    /// Adds the records of one page of `obj/` to `records` (one that does not
    /// decode as its error); the page's last key when more follow.
    fn decode_page(
        &self,
        get: &etcd_client::GetResponse,
        objects: &str,
        records: &mut Records,
    ) -> Option<Vec<u8>> {
        for kv in get.kvs() {
            let Some(id) = kv.key_str().ok().and_then(|k| k.strip_prefix(objects)) else {
                continue;
            };
            if kv.value() == REMOVED {
                continue;
            }
            records.push((unescape(id), self.decode_record(kv.value(), kv.key())));
        }
        get.more()
            .then(|| get.kvs().last().map(|kv| kv.key().to_vec()))
            .flatten()
    }

    /// Commits `write` and keeps the record as stored, which it answers: a
    /// start's holder names the session the transaction wrote. A write that
    /// lost its compare-and-set keeps what the transaction read instead; one
    /// that failed otherwise may have been applied, and keeps nothing.
    fn commit_kept(&self, write: Write) -> Result<Record, StoreError> {
        let id = write.id().clone();
        let mut record = write.record().clone();
        match self.write(write) {
            Ok(Written { revision, session }) => {
                if session.is_some() {
                    let version = record.version;
                    for h in [&mut record.in_flight, &mut record.hidden]
                        .into_iter()
                        .flatten()
                        .filter(|h| starts_at(version, h.version, h.abandoned))
                    {
                        h.session = session;
                    }
                }
                self.keep(&id, Some(Kept::record(&record, revision)));
                Ok(record)
            }
            Err(e @ (StoreError::Conflict { .. } | StoreError::CreateAt { .. })) => Err(e),
            Err(e) => {
                self.keep(&id, None);
                Err(e)
            }
        }
    }

    /// Commits `write` by one transaction, answering the revision that wrote
    /// it. A creation whose version the store cannot tell is right (it knows
    /// neither the id's removal nor the floor it would be numbered past)
    /// reads them first; one that lost to a floor raised meanwhile, or to a
    /// removal forgotten, and whose version is still the right one, is made
    /// again (the runtime takes a [`StoreError::CreateAt`] naming the version
    /// it tried for a refusal).
    fn write(&self, write: Write) -> Result<Written, StoreError> {
        let (id, expected, record, entry) = write.into_parts();
        let mut tries = 0;
        loop {
            let guard = match expected {
                Some(expected) => Guard::Written(self.revision_at(&id, expected)?),
                None => match self.creation_guard(&id, entry.version) {
                    Some(guard) => guard,
                    None => {
                        let version = self.learn_creation(&id)?;
                        match self.creation_guard(&id, entry.version) {
                            Some(guard) if version == entry.version => guard,
                            _ => return Err(StoreError::CreateAt { id, version }),
                        }
                    }
                },
            };
            match self.write_guarded(&id, expected.is_none(), &record, &entry, guard) {
                Err(StoreError::CreateAt { version, .. })
                    if version == entry.version && tries < 3 =>
                {
                    tries += 1;
                }
                written => return written,
            }
        }
    }

    /// The revision that wrote the object's record at `expected`: as kept,
    /// or read. [`StoreError::Conflict`] with the record if the object is
    /// elsewhere now (none: absent, or removed).
    fn revision_at(&self, id: &ObjectId, expected: Expected) -> Result<i64, StoreError> {
        if let Some(Kept {
            known: Known::Record(record),
            revision,
        }) = lock(&self.inner.kept).get(id)
            && record.expected() == expected
        {
            return Ok(*revision);
        }
        let read = self.read(id)?;
        let found = read.as_ref().map(|(record, _)| record.clone());
        self.keep(
            id,
            read.as_ref()
                .map(|(record, revision)| Kept::record(record, *revision)),
        );
        match read {
            Some((record, revision)) if record.expected() == expected => Ok(revision),
            _ => Err(StoreError::Conflict {
                id: id.clone(),
                found: found.map(Box::new),
            }),
        }
    }

    /// What a creation of `id` at `version` compares, if the store knows it
    /// to be the right version: the removal's mark it keeps, and `version`
    /// the one after it; or no such mark and `version` the one after the
    /// floor it last read (if the key is there after all, or the floor
    /// moved, the transaction's reads tell it).
    fn creation_guard(&self, id: &ObjectId, version: u64) -> Option<Guard> {
        if let Some(Kept {
            known: Known::Removed(removed),
            revision,
        }) = lock(&self.inner.kept).get(id)
        {
            return (version == removed + 1).then_some(Guard::Removed(*revision));
        }
        let floor = *lock(&self.inner.floor);
        (version == floor.version + 1).then_some(Guard::Absent(floor.revision))
    }

    /// Reads what a creation of `id` needs (its key, its removal's, the
    /// floor), keeps it, and answers the version the id's next object
    /// starts at (or the conflict with the object there).
    fn learn_creation(&self, id: &ObjectId) -> Result<u64, StoreError> {
        let txn = Txn::new().and_then(self.creation_reads(id));
        let mut kv = self.kv();
        let resp = self.run(async move { kv.txn(txn).await })?;
        let [object, gone, floor] = three_reads(&resp)?;
        self.learned(id, object.as_ref(), gone.as_ref(), floor.as_ref())
    }

    /// What a creation reads when it cannot be made: the object's key, its
    /// removal's, and the floor's.
    fn creation_reads(&self, id: &ObjectId) -> Vec<TxnOp> {
        [self.object_key(id), self.gone_key(id), self.floor_key()]
            .map(|key| TxnOp::get(key, None))
            .into()
    }

    /// What the reads of [`creation_reads`](Self::creation_reads) say, kept:
    /// the object there ([`StoreError::Conflict`]), or the version the id's
    /// next object starts at, the one after its removal's (as its entry
    /// says; a removal made by an earlier version of this store left none,
    /// and its version was the key's etcd version) or, for an id without a
    /// key, after the floor.
    fn learned(
        &self,
        id: &ObjectId,
        object: Option<&etcd_client::KeyValue>,
        gone: Option<&etcd_client::KeyValue>,
        floor: Option<&etcd_client::KeyValue>,
    ) -> Result<u64, StoreError> {
        let floor = Floor::of(floor)?;
        self.saw_floor(floor);
        let Some(object) = object else {
            self.keep(id, None);
            return Ok(floor.version + 1);
        };
        if object.value() != REMOVED {
            let found = self.decode_record(object.value(), object.key())?;
            self.keep(id, Some(Kept::record(&found, object.mod_revision())));
            return Err(StoreError::Conflict {
                id: id.clone(),
                found: Some(Box::new(found)),
            });
        }
        let removed = match gone.filter(|gone| gone.value() != REMOVED) {
            Some(gone) => json::<StoredEntry>(gone.value(), gone.key())?.version,
            None => object.version().unsigned_abs(),
        };
        let kept = Kept {
            known: Known::Removed(removed),
            revision: object.mod_revision(),
        };
        self.keep(id, Some(kept));
        Ok(removed + 1)
    }

    /// Keeps `floor`, as just read or written. (Two calls that race may keep
    /// the older: it costs the next creation a second try, never a version.)
    fn saw_floor(&self, floor: Floor) {
        *lock(&self.inner.floor) = floor;
    }

    /// Commits `write`'s parts by one transaction that compares `guard`.
    fn write_guarded(
        &self,
        id: &ObjectId,
        creating: bool,
        record: &Record,
        entry: &Entry,
        guard: Guard,
    ) -> Result<Written, StoreError> {
        let key = self.object_key(id);
        let history_prefix = self.history_prefix(id);
        let history = format!("{history_prefix}{:020}", entry.version);
        let before = |version: u64| {
            let end = format!("{history_prefix}{version:020}");
            TxnOp::delete(
                history_prefix.clone(),
                Some(DeleteOptions::new().with_range(end)),
            )
        };
        let forget: Vec<TxnOp> = if creating {
            // A creation: every history key but its own (a removal of the id
            // leaves its last key if its second request failed, and a store
            // of the previous format numbered a new object from 1 again), and
            // the mark that the id's object was removed.
            let after = format!("{history_prefix}{:020}", entry.version + 1);
            let end = prefix_end(&history_prefix);
            vec![
                before(entry.version),
                TxnOp::delete(after, Some(DeleteOptions::new().with_range(end))),
                TxnOp::delete(self.gone_key(id), None),
            ]
        } else {
            // The entries older than the last `keep` (this one among them):
            // the range of keys before the oldest kept, deleted by the same
            // transaction.
            (self.inner.keep)
                .and_then(|keep| entry.version.checked_sub(keep))
                .map(|last_forgotten| before(last_forgotten + 1))
                .into_iter()
                .collect()
        };
        let compared = guard.compare(&key, &self.floor_key());
        let reads = if creating {
            self.creation_reads(id)
        } else {
            vec![TxnOp::get(key.clone(), None)]
        };
        let codec = self.codec()?;
        let entry = encode(&codec.encode_entry(entry));
        // A write that starts an action names this process's session (its lease)
        // in the holder, and stands only while the session's key lives: a process
        // whose lease expired must not start what every other reads as abandoned.
        let mut stored = codec.encode_record(record);
        // A holder this write puts in its slot: the start it makes.
        let written = record.version;
        let starts = move |h: &&mut StoredHolder| starts_at(written, h.version, h.abandoned);
        let started = [&mut stored.in_flight, &mut stored.hidden]
            .into_iter()
            .flatten()
            .any(|h| starts(&h));
        let prefix = self.inner.prefix.clone();
        let mut txn = move |lease: i64| {
            let mut compare = compared.clone();
            let mut otherwise = reads.clone();
            if started {
                for h in [&mut stored.in_flight, &mut stored.hidden]
                    .into_iter()
                    .flatten()
                    .filter(starts)
                {
                    h.session = Some(lease);
                }
                let live = live_key(&prefix, lease);
                compare.push(Compare::version(live.clone(), CompareOp::Greater, 0));
                otherwise.push(TxnOp::get(live, None));
            }
            let mut writes = vec![
                TxnOp::put(key.clone(), encode(&stored), None),
                TxnOp::put(history.clone(), entry.clone(), None),
            ];
            writes.extend(forget.clone());
            Txn::new().when(compare).and_then(writes).or_else(otherwise)
        };
        let (mut kv, client, lease, ttl, prefix) = (
            self.kv(),
            self.client(),
            self.inner.lease.clone(),
            self.inner.ttl,
            self.inner.prefix.clone(),
        );
        let written = id.clone();
        let too_large = move |e| {
            if is_too_large(&e) {
                let message = format!("etcd: {}", described(&e));
                StoreError::TooLarge {
                    id: written,
                    message,
                }
            } else {
                store_error(e)
            }
        };
        let resp = self.run_mapped(async move {
            let held_on = lease.load(Ordering::Acquire);
            let resp = kv.txn(txn(held_on)).await?;
            // The object was as expected but our session's key is gone: our lease
            // expired while we were cut off, before the keep-alive task noticed.
            // Take a new one now, and write again.
            let lost = !resp.succeeded()
                && started
                && matches!(resp.op_responses().get(1), Some(TxnOpResponse::Get(get)) if get.kvs().is_empty())
                && match (resp.op_responses().first(), guard) {
                    (Some(TxnOpResponse::Get(get)), Guard::Written(revision)) => {
                        get.kvs().first().map_or(0, |kv| kv.mod_revision()) == revision
                    }
                    _ => false,
                };
            if lost {
                let renewed = replace_lease(&client, &prefix, ttl, &lease, held_on).await?;
                return Ok((kv.txn(txn(renewed)).await?, renewed));
            }
            Ok((resp, held_on))
        }, too_large)?;
        let (resp, session) = resp;
        Ok(Written {
            revision: self.answered(id, resp, creating)?,
            session: started.then_some(session),
        })
    }

    /// Carries out `removal` by one transaction: if the object's key is as
    /// the revision that wrote the record expected left it, it empties that
    /// key ([`REMOVED`]: it stays, for the id's next object to go on from
    /// the removal's version), marks the id gone with the removal's entry,
    /// deletes the history's keys, and puts the removal's entry at the next
    /// version's history key, which the feed publishes to watchers as every
    /// entry. A second request then deletes that last key, if the object is
    /// still removed; a creation of the same id also deletes it (see
    /// `write`), should the second request fail.
    fn delete(&self, removal: Removal) -> Result<(), StoreError> {
        let (id, expected, entry) = removal.into_parts();
        let revision = self.revision_at(&id, expected)?;
        let key = self.object_key(&id);
        let history_prefix = self.history_prefix(&id);
        let last = format!("{history_prefix}{:020}", entry.version);
        let removed = entry.version;
        let entry = encode(&self.codec()?.encode_entry(&entry));
        let txn = Txn::new()
            .when([Compare::mod_revision(
                key.clone(),
                CompareOp::Equal,
                revision,
            )])
            .and_then([
                TxnOp::put(key.clone(), REMOVED, None),
                TxnOp::put(self.gone_key(&id), entry.clone(), None),
                TxnOp::delete(self.held_key(&id, false), None),
                TxnOp::delete(self.held_key(&id, true), None),
                TxnOp::delete(
                    history_prefix.clone(),
                    Some(DeleteOptions::new().with_range(last.clone())),
                ),
                TxnOp::put(last, entry, None),
            ])
            .or_else([TxnOp::get(key.clone(), None)]);
        let mut kv = self.kv();
        let resp = self.run(async move {
            let resp = kv.txn(txn).await?;
            if resp.succeeded() {
                let written = resp.header().map_or(0, |h| h.revision());
                let cleanup = Txn::new()
                    .when([Compare::mod_revision(key, CompareOp::Equal, written)])
                    .and_then([TxnOp::delete(
                        history_prefix.clone(),
                        Some(DeleteOptions::new().with_range(prefix_end(&history_prefix))),
                    )]);
                if let Err(e) = kv.txn(cleanup).await {
                    // Deleted by the next creation of the id, or by the next removal.
                    tracing::warn!("etcd: the removed object's last history key stays: {e}");
                }
            }
            Ok(resp)
        })?;
        let written = self.answered(&id, resp, false)?;
        let kept = Kept {
            known: Known::Removed(removed),
            revision: written,
        };
        self.keep(&id, Some(kept));
        Ok(())
    }

    /// What a transaction on `id`'s key answered: the revision that wrote
    /// it, or, kept, what its `else` branch read: for a creation (`creating`)
    /// the object there ([`StoreError::Conflict`]) or the version its next
    /// object starts at ([`StoreError::CreateAt`]); for another write, the
    /// conflict with the record there (none: absent, or removed).
    fn answered(
        &self,
        id: &ObjectId,
        resp: etcd_client::TxnResponse,
        creating: bool,
    ) -> Result<i64, StoreError> {
        if resp.succeeded() {
            return Ok(resp.header().map_or(0, |h| h.revision()));
        }
        if creating {
            let [object, gone, floor] = three_reads(&resp)?;
            let version = self.learned(id, object.as_ref(), gone.as_ref(), floor.as_ref())?;
            return Err(StoreError::CreateAt {
                id: id.clone(),
                version,
            });
        }
        let read = match resp.op_responses().into_iter().next() {
            Some(TxnOpResponse::Get(get)) => get.kvs().first().cloned(),
            _ => None,
        };
        let found = read
            .as_ref()
            .filter(|kv| kv.value() != REMOVED)
            .map(|kv| Ok((self.decode_record(kv.value(), kv.key())?, kv.mod_revision())))
            .transpose()?;
        self.keep(
            id,
            found
                .as_ref()
                .map(|(record, revision)| Kept::record(record, *revision)),
        );
        Err(StoreError::Conflict {
            id: id.clone(),
            found: found.map(|(record, _)| Box::new(record)),
        })
    }

    /// Keeps what the store read or wrote at `id`'s key, for
    /// [`Store::cached`] and the next write's compare; `None` forgets it.
    fn keep(&self, id: &ObjectId, kept: Option<Kept>) {
        let mut all = lock(&self.inner.kept);
        match kept {
            Some(kept) => keep_bounded(&mut all, KEPT, id, kept),
            None => {
                all.remove(id);
            }
        }
    }
}

/// Whether a holder at `version` (`abandoned` or not) is the start a write
/// of `written` makes: the holder whose session that write names.
fn starts_at(written: u64, version: u64, abandoned: bool) -> bool {
    version == written && !abandoned
}

/// A write that landed: the revision that wrote it, and the session it named
/// in the holder of the action it started, if it started one.
pub(crate) struct Written {
    pub(crate) revision: i64,
    pub(crate) session: Option<i64>,
}

impl Kept {
    fn record(record: &Record, revision: i64) -> Kept {
        Kept {
            known: Known::Record(record.clone()),
            revision,
        }
    }
}

/// What a write compares at its object's `obj/` key.
#[derive(Debug, Clone, Copy)]
enum Guard {
    /// The record as written at this revision.
    Written(i64),
    /// A removed object's mark, as written at this revision.
    Removed(i64),
    /// No key, and the floor's key as written at this revision (0: none).
    Absent(i64),
}

impl Guard {
    fn compare(self, key: &str, floor_key: &str) -> Vec<Compare> {
        match self {
            Guard::Written(revision) => {
                vec![Compare::mod_revision(key, CompareOp::Equal, revision)]
            }
            Guard::Removed(revision) => vec![
                Compare::mod_revision(key, CompareOp::Equal, revision),
                Compare::value(key, CompareOp::Equal, REMOVED),
            ],
            Guard::Absent(floor) => vec![
                Compare::version(key, CompareOp::Equal, 0),
                Compare::mod_revision(floor_key, CompareOp::Equal, floor),
            ],
        }
    }
}

/// The first key each of a transaction's three reads found.
fn three_reads(
    resp: &etcd_client::TxnResponse,
) -> Result<[Option<etcd_client::KeyValue>; 3], StoreError> {
    let found: Vec<Option<etcd_client::KeyValue>> = resp
        .op_responses()
        .into_iter()
        .filter_map(|r| match r {
            TxnOpResponse::Get(get) => Some(get.kvs().first().cloned()),
            _ => None,
        })
        .collect();
    found.try_into().map_err(|_| {
        unavailable(
            "etcd: a transaction of three reads answered otherwise",
            false,
        )
    })
}

/// Keeps `value` for `id` among at most `bound` objects: a new object past
/// the bound takes the place of one kept object (the map's first, an
/// arbitrary one). What is kept only saves reads, so any may go.
fn keep_bounded<T>(
    kept: &mut std::collections::HashMap<ObjectId, T>,
    bound: usize,
    id: &ObjectId,
    value: T,
) {
    if kept.len() >= bound && !kept.contains_key(id) {
        let evicted = kept.keys().next().cloned();
        if let Some(evicted) = evicted {
            kept.remove(&evicted);
        }
    }
    kept.insert(id.clone(), value);
}

impl EtcdStore {
    /// Runs `call` on a blocking thread of the store's runtime, where it drives
    /// its requests on that runtime, and awaits the answer. One code path for
    /// both APIs: what the blocking calls check and retry, the async ones do
    /// too.
    fn off_thread<T: Send + 'static>(
        &self,
        call: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
    ) -> impl Future<Output = Result<T, StoreError>> + Send + 'static {
        let call = self.detached(call);
        async move { call.await? }
    }

    /// Runs `call` on a blocking thread of the store's runtime, to its end
    /// whether or not the returned future is awaited: a dropped future drops
    /// tokio's handle of the task, not the task, and what `call` returns is
    /// then dropped on that thread.
    pub(crate) fn detached<T: Send + 'static>(
        &self,
        call: impl FnOnce() -> T + Send + 'static,
    ) -> impl Future<Output = Result<T, StoreError>> + Send + 'static {
        let runtime = self.inner.runtime.as_ref().expect("running until dropped");
        let call = runtime.spawn_blocking(call);
        async move {
            call.await.map_err(|e| {
                unavailable(
                    format!("etcd: the store's call did not finish ({e})"),
                    false,
                )
            })
        }
    }
}

/// A read of a range of records in one snapshot, a request at a time (see
/// [`EtcdStore::next_page`]): where it starts and ends, what its first
/// request fixed (the revision, every key that says a holder lives), and
/// where the next request starts. Owned, so that an async caller moves it to
/// the store's runtime for each request and looks at each page in between.
struct Reading {
    /// The prefix of every object's key.
    objects: String,
    /// The first key the range may hold: `obj/`, or past `after`'s key.
    first_key: Vec<u8>,
    /// The end of `obj/`.
    end: Vec<u8>,
    limit: Option<usize>,
    /// How many records were read so far.
    read: usize,
    /// The first request's revision, once it was made.
    revision: Option<i64>,
    /// Every key that says a holder lives, with its value, as of `revision`.
    alive: std::collections::HashMap<Vec<u8>, Vec<u8>>,
    /// The last key read, when more follow.
    next: Option<Vec<u8>>,
}

impl Reading {
    /// A read of the objects under `prefix` whose keys come after `after`
    /// (from the first: `None`), up to `limit` (every one: `None`).
    fn new(prefix: &str, after: Option<String>, limit: Option<usize>) -> Self {
        let objects = format!("{prefix}obj/");
        let end = prefix_end(&objects);
        // The first key past `after`: that key and a zero byte.
        let first_key = after.map_or_else(
            || objects.clone().into_bytes(),
            |key| {
                let mut key = key.into_bytes();
                key.push(0);
                key
            },
        );
        Reading {
            objects,
            first_key,
            end,
            limit,
            read: 0,
            revision: None,
            alive: Default::default(),
            next: None,
        }
    }

    /// How many records the next request asks for: what the limit leaves, a
    /// thousand at most.
    fn wanted(&self) -> i64 {
        let left = self
            .limit
            .map_or(usize::MAX, |limit| limit.saturating_sub(self.read));
        i64::try_from(left).unwrap_or(i64::MAX).min(RECORDS_PAGE)
    }
}

/// Marks abandoned each holder of `record` whose liveness key (see
/// [`EtcdStore::liveness`]) is gone, or, for a holder of the previous format,
/// no longer holds its version: its process's lease expired. `value` gives the
/// value read for the `n`th key of `liveness`.
fn mark_abandoned<'v>(
    record: &mut Record,
    liveness: Vec<(usize, String, Option<u64>)>,
    value: impl Fn(usize) -> Option<&'v [u8]>,
) {
    for (n, (slot, _, version)) in liveness.into_iter().enumerate() {
        let alive = match version {
            None => value(n).is_some(),
            Some(version) => value(n).is_some_and(|v| v == version.to_string().as_bytes()),
        };
        if !alive {
            let slot = if slot == 0 {
                &mut record.in_flight
            } else {
                &mut record.hidden
            };
            if let Some(holder) = slot.as_mut() {
                holder.abandoned = true;
            }
        }
    }
}

/// The end of the range of keys that start with `prefix` (etcd's `range_end`).
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// The largest answer from etcd the store reads: as etcd's own client allows
/// (`math.MaxInt32`). gRPC's default, 4 MiB, is less than a page of a thousand
/// records that carry data, or a long history; etcd bounds what it sends itself.
const MAX_ANSWER: usize = i32::MAX as usize;

/// `client`'s key-value calls, reading answers up to [`MAX_ANSWER`].
fn kv_client(client: &Client) -> etcd_client::KvClient {
    client.kv_client().max_decoding_message_size(MAX_ANSWER)
}

/// This crate's README (its page on crates.io): its examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::SystemTime;

    use fsm_core::StateId;
    use fsm_runtime::{ObjectId, Record};

    use super::keep_bounded;

    fn record(version: u64) -> Record {
        Record::new(StateId(0), version, SystemTime::UNIX_EPOCH)
    }

    #[test]
    fn kept_records_past_the_bound_take_one_kept_record_s_place() {
        let mut kept = HashMap::new();
        for n in 0..4u64 {
            keep_bounded(&mut kept, 4, &ObjectId::from(format!("o-{n}")), record(n));
        }
        assert_eq!(kept.len(), 4);
        // A kept object written again replaces its own record.
        keep_bounded(&mut kept, 4, &ObjectId::from("o-2"), record(9));
        assert_eq!((kept.len(), kept[&ObjectId::from("o-2")].version), (4, 9));
        // A new object evicts one, not all.
        keep_bounded(&mut kept, 4, &ObjectId::from("o-4"), record(4));
        assert_eq!(kept.len(), 4);
        assert_eq!(kept[&ObjectId::from("o-4")].version, 4);
        let survivors = (0..4)
            .filter(|n| kept.contains_key(&ObjectId::from(format!("o-{n}"))))
            .count();
        assert_eq!(survivors, 3);
    }
}

#[cfg(all(test, feature = "tls"))]
mod tls_tests {
    use super::{EtcdStore, EtcdTls, EtcdTlsError};
    use fsm_runtime::StoreError;

    /// A certificate and its key, PEM, made here.
    fn pair() -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    /// A file of something else is named before any connection is tried:
    /// not taken for an etcd that does not answer (retryable), as it was.
    #[test]
    fn pem_that_does_not_read_is_refused_before_connecting() {
        let (certificate, key) = pair();
        let refused = EtcdStore::builder(["127.0.0.1:1"], "/x/")
            .tls(EtcdTls::new("not a certificate"))
            .connect()
            .unwrap_err();
        assert_eq!(
            refused,
            StoreError::Unavailable {
                message: "etcd over TLS: the authority (CA) holds no PEM certificate".into(),
                retryable: false
            }
        );
        let check = |tls: EtcdTls| tls.check();
        assert_eq!(check(EtcdTls::new(certificate.as_bytes())), Ok(()));
        assert_eq!(
            check(
                EtcdTls::new(certificate.as_bytes())
                    .identity(certificate.as_bytes(), key.as_bytes())
            ),
            Ok(())
        );
        assert_eq!(
            check(EtcdTls::new(certificate.as_bytes()).identity(key.as_bytes(), key.as_bytes())),
            Err(EtcdTlsError::Certificate("holds no PEM certificate".into()))
        );
        let wrong_key = check(
            EtcdTls::new(certificate.as_bytes())
                .identity(certificate.as_bytes(), certificate.as_bytes()),
        );
        assert!(
            matches!(&wrong_key, Err(EtcdTlsError::Key(why)) if why.starts_with("is not a PEM private key")),
            "{wrong_key:?}"
        );
        assert_eq!(
            wrong_key.unwrap_err().to_string().split(':').next(),
            Some("the client key is not a PEM private key")
        );
    }
}
