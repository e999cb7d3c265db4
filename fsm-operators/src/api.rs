//! What the control planes keep in the API server besides states (Mizar's
//! topology, the pod of PodOpsLifecycle): a map of JSON documents by id. In one
//! process it is a map behind a lock; shared by operator processes, it lives in
//! etcd, one key per document, changed by transactions that compare every key
//! they change with the revision they read (optimistic concurrency, as the API
//! server itself does with `resourceVersion`).
//!
//! Beside them, each control plane keeps an [`Archive`]: the histories of the
//! objects whose records its operators removed, as an audit log keeps them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, EventType, GetOptions, Txn, TxnOp, WatchOptions};
use fsm::StateId;
use fsm_etcd::{AnyStore, EtcdAccess};
use fsm_runtime::wire::{Codec, StoredEntry, UnknownName};
use fsm_runtime::{Actor, Entry, EntryKind, ObjectId, Runtime, RuntimeError, StoreError};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

use crate::support::lock;

/// The largest answer from etcd read: as etcd's own client allows
/// (`math.MaxInt32`), past gRPC's default of 4 MiB.
const MAX_ANSWER: usize = i32::MAX as usize;

/// What a document must be to live in etcd.
pub(crate) trait Document:
    Serialize + DeserializeOwned + Clone + PartialEq + Send + 'static
{
}

impl<T: Serialize + DeserializeOwned + Clone + PartialEq + Send + 'static> Document for T {}

/// Where the documents live.
pub(crate) enum ApiServer<T> {
    /// In this process.
    Memory(Mutex<HashMap<ObjectId, T>>),
    /// In etcd, shared with every process on the same prefix.
    Etcd(Box<EtcdApi<T>>),
}

impl<T: Document> ApiServer<T> {
    /// Connects the documents on etcd again, as `etcd` says
    /// ([`EtcdApi::reconnect`]); nothing to do in memory. Blocks.
    pub(crate) fn reconnect(&self, etcd: &EtcdAccess) -> Result<(), ApiError> {
        match self {
            ApiServer::Memory(_) => Ok(()),
            ApiServer::Etcd(api) => api.reconnect(etcd),
        }
    }

    /// Runs `change` on the documents and stores what it changed, atomically. On
    /// etcd, `change` runs again on fresh data when another process changed one
    /// of the same documents meanwhile: it must only read and write them.
    pub(crate) fn with<R>(&self, mut change: impl FnMut(&mut HashMap<ObjectId, T>) -> R) -> R {
        match self {
            ApiServer::Memory(t) => change(&mut lock(t)),
            ApiServer::Etcd(api) => api.with(change),
        }
    }

    /// A copy of every document.
    pub(crate) fn snapshot(&self) -> HashMap<ObjectId, T> {
        self.with(|t| t.clone())
    }

    /// The ids of every document, in no order: on etcd the keys alone are
    /// read, not the documents.
    pub(crate) fn ids(&self) -> Vec<ObjectId> {
        match self {
            ApiServer::Memory(t) => lock(t).keys().cloned().collect(),
            ApiServer::Etcd(api) => api.ids(),
        }
    }

    /// A copy of the document `id`, if there is one: on etcd that one key is
    /// read.
    pub(crate) fn get(&self, id: &ObjectId) -> Option<T> {
        match self {
            ApiServer::Memory(t) => lock(t).get(id).cloned(),
            ApiServer::Etcd(api) => api.get(id),
        }
    }

    /// Runs `change` on the document `id` alone (`None`: there is none; left
    /// `None`, there is none after) and stores what it made of it, atomically.
    /// On etcd it reads and writes that one key, so its cost does not grow with
    /// the other documents; as for [`with`](Self::with), `change` runs again on
    /// fresh data when another process changed the document meanwhile.
    pub(crate) fn with_one<R>(
        &self,
        id: &ObjectId,
        mut change: impl FnMut(&mut Option<T>) -> R,
    ) -> R {
        match self {
            ApiServer::Memory(t) => {
                let mut t = lock(t);
                // A copy: a `change` that panics leaves the document as it was.
                let mut document = t.get(id).cloned();
                let answer = change(&mut document);
                match document {
                    Some(document) => t.insert(id.clone(), document),
                    None => t.remove(id),
                };
                answer
            }
            ApiServer::Etcd(api) => api.with_one(id, change),
        }
    }
}

/// The documents in etcd: `<prefix><id>` holds one as JSON.
pub(crate) struct EtcdApi<T> {
    /// The client in use: replaced whole by [`EtcdApi::reconnect`], which
    /// the documents' watch sees.
    client: tokio::sync::watch::Sender<Client>,
    prefix: String,
    /// Always `Some` until dropped.
    runtime: Option<tokio::runtime::Runtime>,
    /// How many changes found a document changed by someone else since they
    /// read it, and ran again.
    conflicts: std::sync::atomic::AtomicU64,
    documents: std::marker::PhantomData<fn() -> T>,
}

impl<T> Drop for EtcdApi<T> {
    fn drop(&mut self) {
        // Dropped inside an async program: no waiting for the client's tasks.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Why the topology could not be reached.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("etcd (the API server's documents): {0}")]
pub struct ApiError(String);

impl From<etcd_client::Error> for ApiError {
    fn from(e: etcd_client::Error) -> Self {
        ApiError(e.to_string())
    }
}

impl<T: Document> EtcdApi<T> {
    /// Connects to `etcd` (its user and TLS as the stores have them), the
    /// documents under `prefix`; an error when no etcd answers there. Blocks:
    /// from async code, call it through `spawn_blocking`.
    pub(crate) fn connect(etcd: &EtcdAccess, prefix: String) -> Result<Self, ApiError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("mizar-api")
            .enable_all()
            .build()
            .expect("a runtime for the topology's client");
        let client = runtime.block_on(client_of(etcd.clone(), prefix.clone()))?;
        Ok(EtcdApi {
            client: tokio::sync::watch::Sender::new(client),
            prefix,
            runtime: Some(runtime),
            conflicts: std::sync::atomic::AtomicU64::new(0),
            documents: std::marker::PhantomData,
        })
    }

    /// Connects again, as `etcd` says (renewed TLS files, another user), and
    /// makes every later request, and the documents' watch, on the new
    /// connection once it answers a read; refused, the one in use stays.
    /// Blocks, as [`connect`](Self::connect).
    pub(crate) fn reconnect(&self, etcd: &EtcdAccess) -> Result<(), ApiError> {
        let client = self.block_api(client_of(etcd.clone(), self.prefix.clone()))?;
        self.client.send_replace(client);
        Ok(())
    }

    /// The key-value calls of the client in use.
    fn kv(&self) -> etcd_client::KvClient {
        self.client.borrow().kv_client()
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().expect("running until dropped")
    }

    /// [`block`](Self::block) for work that answers an [`ApiError`].
    fn block_api<V: Send + 'static>(
        &self,
        work: impl Future<Output = Result<V, ApiError>> + Send + 'static,
    ) -> Result<V, ApiError> {
        fsm_etcd::wait_on(self.runtime(), work).expect("the client's runtime runs until dropped")
    }

    /// Drives `work` on the client's runtime and waits for it: blocks the calling
    /// thread (an operator's worker thread; the documents are read on every
    /// step, like an informer's cache but uncached).
    fn block<V: Send + 'static>(
        &self,
        work: impl Future<Output = Result<V, etcd_client::Error>> + Send + 'static,
    ) -> Result<V, etcd_client::Error> {
        fsm_etcd::wait_on(self.runtime(), work).expect("the client's runtime runs until dropped")
    }

    /// Every document, with the revision of its last change.
    fn load(&self) -> Result<Read<T>, etcd_client::Error> {
        // Every document in one answer.
        let kv = self.kv();
        let (mut kv, prefix) = (
            kv.max_decoding_message_size(MAX_ANSWER),
            self.prefix.clone(),
        );
        let resp =
            self.block(async move { kv.get(prefix, Some(GetOptions::new().with_prefix())).await })?;
        let mut documents = HashMap::new();
        let mut revisions = HashMap::new();
        for kv in resp.kvs() {
            let Some(id) = kv.key_str().ok().and_then(|k| k.strip_prefix(&self.prefix)) else {
                continue;
            };
            // Written by this module only: anything else under the prefix is a bug.
            let document: T = serde_json::from_slice(kv.value())
                .unwrap_or_else(|e| panic!("key {id}: not a document of this prefix ({e})"));
            documents.insert(ObjectId::from(id), document);
            revisions.insert(ObjectId::from(id), kv.mod_revision());
        }
        Ok((documents, revisions))
    }

    fn with<R>(&self, mut change: impl FnMut(&mut HashMap<ObjectId, T>) -> R) -> R {
        let mut away = Away::default();
        loop {
            let (before, revisions) = match self.load() {
                Ok(read) => read,
                Err(e) => {
                    away.wait(&e);
                    continue;
                }
            };
            let mut after = before.clone();
            let answer = change(&mut after);
            let mut compare = Vec::new();
            let mut ops = Vec::new();
            for (id, object) in &after {
                if before.get(id) != Some(object) {
                    let key = format!("{}{id}", self.prefix);
                    let seen = revisions.get(id).copied().unwrap_or(0);
                    compare.push(Compare::mod_revision(key.clone(), CompareOp::Equal, seen));
                    let json = serde_json::to_vec(object).expect("documents serialize");
                    ops.push(TxnOp::put(key, json, None));
                }
            }
            for id in before.keys().filter(|id| !after.contains_key(*id)) {
                let key = format!("{}{id}", self.prefix);
                compare.push(Compare::mod_revision(
                    key.clone(),
                    CompareOp::Equal,
                    revisions[id],
                ));
                ops.push(TxnOp::delete(key, None));
            }
            if ops.is_empty() || self.commit(compare, ops, &mut away) {
                return answer;
            }
        }
    }

    /// Applies `ops` if every `compare` holds; false when one did not (another
    /// process changed a document since it was read: the caller reads again)
    /// or etcd did not answer (after `away`'s pause).
    fn commit(&self, compare: Vec<Compare>, ops: Vec<TxnOp>, away: &mut Away) -> bool {
        let mut kv = self.kv();
        let txn = Txn::new().when(compare).and_then(ops);
        match self.block(async move { kv.txn(txn).await }) {
            Ok(resp) if resp.succeeded() => true,
            Ok(_) => {
                self.conflicts
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                false
            }
            Err(e) => {
                away.wait(&e);
                false
            }
        }
    }

    fn ids(&self) -> Vec<ObjectId> {
        let mut away = Away::default();
        loop {
            let (mut kv, prefix) = (self.kv(), self.prefix.clone());
            let keys = GetOptions::new().with_prefix().with_keys_only();
            match self.block(async move { kv.get(prefix, Some(keys)).await }) {
                Ok(resp) => {
                    let ids = resp.kvs().iter().filter_map(|kv| {
                        let key = kv.key_str().ok()?;
                        key.strip_prefix(&self.prefix).map(ObjectId::from)
                    });
                    return ids.collect();
                }
                Err(e) => away.wait(&e),
            }
        }
    }

    /// The document `id`, with the revision of its last change (0: none).
    fn load_one(&self, id: &ObjectId) -> Result<(Option<T>, i64), etcd_client::Error> {
        let (mut kv, key) = (self.kv(), format!("{}{id}", self.prefix));
        let resp = self.block(async move { kv.get(key, None).await })?;
        Ok(match resp.kvs().first() {
            // Written by this module only, as in `load`.
            Some(kv) => {
                (
                    Some(serde_json::from_slice(kv.value()).unwrap_or_else(|e| {
                        panic!("key {id}: not a document of this prefix ({e})")
                    })),
                    kv.mod_revision(),
                )
            }
            None => (None, 0),
        })
    }

    fn get(&self, id: &ObjectId) -> Option<T> {
        let mut away = Away::default();
        loop {
            match self.load_one(id) {
                Ok((document, _)) => return document,
                Err(e) => away.wait(&e),
            }
        }
    }

    fn with_one<R>(&self, id: &ObjectId, mut change: impl FnMut(&mut Option<T>) -> R) -> R {
        let key = format!("{}{id}", self.prefix);
        let mut away = Away::default();
        loop {
            let (before, revision) = match self.load_one(id) {
                Ok(read) => read,
                Err(e) => {
                    away.wait(&e);
                    continue;
                }
            };
            let mut after = before.clone();
            let answer = change(&mut after);
            let op = match (&after, &before) {
                (after, before) if after == before => return answer,
                (Some(document), _) => {
                    let json = serde_json::to_vec(document).expect("documents serialize");
                    TxnOp::put(key.clone(), json, None)
                }
                (None, _) => TxnOp::delete(key.clone(), None),
            };
            let compare = Compare::mod_revision(key.clone(), CompareOp::Equal, revision);
            if self.commit(vec![compare], vec![op], &mut away) {
                return answer;
            }
        }
    }

    /// Sends every document put from now on, with its id: how an operator
    /// process learns of users' requests (a delete, new backends, labels) that
    /// another process wrote. A watch that breaks (etcd restarted, the
    /// connection lost) or moves to a new client ([`reconnect`](Self::reconnect))
    /// goes on from the revision it reached, so nothing put meanwhile is
    /// missed; past a compaction, from the oldest revision etcd kept (what
    /// was put in between is found by the operators' next resync, as after
    /// a restart). Ends once nobody receives.
    pub(crate) fn watch(&self, wakes: mpsc::UnboundedSender<(ObjectId, T)>) {
        let (mut clients, prefix) = (self.client.subscribe(), self.prefix.clone());
        self.runtime().spawn(async move {
            let mut from = None;
            loop {
                let mut replaced = false;
                let client = clients.borrow_and_update().clone();
                let mut watch = client.watch_client().max_decoding_message_size(MAX_ANSWER);
                let mut options = WatchOptions::new().with_prefix();
                if let Some(revision) = from {
                    options = options.with_start_revision(revision);
                }
                if let Ok(mut stream) = watch.watch(prefix.clone(), Some(options)).await {
                    loop {
                        let resp = tokio::select! {
                            message = stream.message() => match message {
                                Ok(Some(resp)) => resp,
                                // Broken: watched again, from `from`.
                                _ => break,
                            },
                            changed = clients.changed() => match changed {
                                Ok(()) => {
                                    replaced = true;
                                    break;
                                }
                                Err(_) => return,
                            },
                        };
                        if resp.canceled() {
                            if resp.compact_revision() > 0 {
                                from = Some(resp.compact_revision());
                            }
                            break;
                        }
                        // The watch's start (its first answer) or any event
                        // moves the revision to go on from.
                        if from.is_none() {
                            from = resp.header().map(|h| h.revision() + 1);
                        }
                        for event in resp.events() {
                            let Some(kv) = event.kv() else { continue };
                            from = from.max(Some(kv.mod_revision() + 1));
                            if event.event_type() != EventType::Put {
                                continue;
                            }
                            let id = kv.key_str().ok().and_then(|k| k.strip_prefix(&prefix));
                            let document = serde_json::from_slice::<T>(kv.value()).ok();
                            if let (Some(id), Some(document)) = (id, document)
                                && wakes.send((ObjectId::from(id), document)).is_err()
                            {
                                return;
                            }
                        }
                    }
                }
                if wakes.is_closed() {
                    return;
                }
                // On a new client at once; otherwise not: etcd may be away a
                // while.
                if !replaced {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        });
    }
}

/// Connects every store of `runtimes` on etcd, and the documents `apis`,
/// again as `etcd` says (renewed TLS files, another user): how a control
/// plane's process renews its access without a restart. Each is tried; one
/// refused stays on the connection it had, and the first refusal is
/// answered. Blocks.
pub(crate) fn reconnect_all<'a, T: Document, E: From<StoreError> + From<ApiError>>(
    etcd: &EtcdAccess,
    runtimes: impl IntoIterator<Item = &'a Runtime<AnyStore>>,
    documents: &ApiServer<T>,
    archive: &Archive,
) -> Result<(), E> {
    let mut refused = None;
    for runtime in runtimes {
        if let AnyStore::Etcd(store) = runtime.store()
            && let Err(e) = store.reconnect(etcd)
        {
            refused.get_or_insert(E::from(e));
        }
    }
    for api in [documents.reconnect(etcd), archive.lives.reconnect(etcd)] {
        if let Err(e) = api {
            refused.get_or_insert(E::from(e));
        }
    }
    refused.map_or(Ok(()), Err)
}

/// A client of `etcd` (its user and TLS as the stores have them) that has
/// answered a read under `prefix`: the client connects lazily, and an etcd
/// nobody answers at is an error here, not a `with` that waits for ever.
async fn client_of(etcd: EtcdAccess, prefix: String) -> Result<Client, ApiError> {
    let options = (etcd.connect_options())
        .map_err(|e| ApiError(e.to_string()))?
        .with_connect_timeout(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(5));
    let client = Client::connect(etcd.endpoints(), Some(options)).await?;
    let count = GetOptions::new().with_prefix().with_count_only();
    client.kv_client().get(prefix, Some(count)).await?;
    Ok(client)
}

/// What an archive keeps of one key: the history of each life of the object
/// (an id may be used again), oldest first, states and actions by name.
pub(crate) type Lives = Vec<Vec<StoredEntry>>;

/// The histories of removed objects, by key (the object's id, or a name made
/// of it), kept in the API server as an audit log keeps them: so that what a
/// seed promises can still be checked over every object that ever lived.
/// States and actions are kept by name ([`Codec`]), as the stores keep them,
/// so a life reads the same after the spec is edited (a rename with
/// `renamed_from`), and one the spec can no longer read is an error, not a
/// guess. Like an audit log, it grows with every object removed.
pub(crate) struct Archive {
    /// The lives by key.
    pub(crate) lives: ApiServer<Lives>,
}

/// What [`Archive::remove`] did.
#[derive(Debug)]
pub(crate) enum Removal {
    /// The object was in no state `actor` may remove it in, had no record,
    /// or its record could not be read: nothing was done.
    Kept,
    /// Removed; its life, this removal last, is in the archive.
    Removed,
    /// Gone before its removal (removed by this actor's previous process).
    Gone,
    /// Its history could not be read, or the removal was refused (its life
    /// archived all the same): the next look tries again.
    Refused(RuntimeError),
}

/// Why [`Archive::lives`] could not read an object's lives.
#[derive(Debug)]
pub(crate) enum LivesError {
    /// An archived life names a state or an action the spec does not have.
    Archive(UnknownName),
    /// The object's record could not be read.
    Record(RuntimeError),
}

impl Archive {
    /// An archive in this process.
    pub(crate) fn memory() -> Self {
        Archive {
            lives: ApiServer::Memory(Mutex::default()),
        }
    }

    /// The archive on `etcd`, one key per object under `prefix`. Blocks
    /// while it connects, as [`EtcdApi::connect`].
    pub(crate) fn on_etcd(etcd: &EtcdAccess, prefix: String) -> Result<Self, ApiError> {
        let lives = ApiServer::Etcd(Box::new(EtcdApi::connect(etcd, prefix)?));
        Ok(Archive { lives })
    }

    /// The keys of every object archived, in no order (on etcd the keys
    /// alone are read).
    pub(crate) fn keys(&self) -> Vec<ObjectId> {
        self.lives.ids()
    }

    /// Keeps `life`, a history from its creation, under `key`: in place of a
    /// shorter copy of the same life (the one kept before the removal, once
    /// the removal is known), or after the lives there.
    pub(crate) fn keep(&self, key: &ObjectId, codec: &Codec, life: &[Entry]) {
        let Some(first) = life.first().map(|e| e.version) else {
            return;
        };
        let life: Vec<StoredEntry> = life.iter().map(|e| codec.encode_entry(e)).collect();
        self.lives.with_one(key, |lives| {
            let lives = lives.get_or_insert_with(Vec::new);
            let same = lives
                .iter_mut()
                .find(|kept| kept.first().map(|e| e.version) == Some(first));
            match same {
                Some(kept) if kept.len() < life.len() => *kept = life.clone(),
                Some(_) => {}
                None => lives.push(life.clone()),
            }
        });
    }

    /// Every life of `id` in `runtime`, archived under `key`, oldest first,
    /// each one's history: those the archive keeps, each ending in its
    /// removal, then the record's, if there is one. A removal the process
    /// that made it died before noting is read from the store, which keeps
    /// it until the id is created again ([`Runtime::removal_of`]).
    pub(crate) fn lives(
        &self,
        key: &ObjectId,
        codec: &Codec,
        runtime: &Runtime<AnyStore>,
        id: &ObjectId,
    ) -> Result<Vec<Vec<Entry>>, LivesError> {
        let mut lives = Vec::new();
        for life in self.lives.get(key).unwrap_or_default() {
            let life: Result<Vec<Entry>, _> =
                life.into_iter().map(|e| codec.decode_entry(e)).collect();
            lives.push(life.map_err(LivesError::Archive)?);
        }
        // A store answers an empty history for an id it has no record of.
        match runtime.history(id.clone()) {
            Ok(history) if history.is_empty() => {
                let unnoted = lives
                    .last()
                    .and_then(|life| life.last())
                    .filter(|last| last.kind != EntryKind::Removed);
                if let Some(last) = unnoted.map(|last| last.version) {
                    match runtime.removal_of(id.clone()) {
                        Ok(Some(removal)) if removal.version == last + 1 => {
                            lives.last_mut().expect("a last life").push(removal);
                        }
                        Ok(_) => {}
                        Err(e) => return Err(LivesError::Record(e)),
                    }
                }
            }
            Ok(history) => {
                // Archived, but its removal cut off: the record's history is
                // that life, whole.
                let first = |life: &[Entry]| life.first().map(|e| e.version);
                if lives.last().is_some_and(|l| first(l) == first(&history)) {
                    lives.pop();
                }
                lives.push(history);
            }
            Err(RuntimeError::NotFound { .. }) => {}
            Err(e) => return Err(LivesError::Record(e)),
        }
        Ok(lives)
    }

    /// Removes `id` from `runtime` as `actor`, if its record is in a state
    /// the spec lets `actor` remove it in. Its history goes to the archive
    /// under `key` first, `before` runs, and the removal is made at the
    /// version archived: a process killed in between leaves the record,
    /// which the next look removes (a removal needs nothing but the record),
    /// and a record changed in between is not removed. Once removed, the
    /// removal is added to the life archived.
    pub(crate) async fn remove(
        &self,
        key: &ObjectId,
        codec: &Codec,
        runtime: &Runtime<AnyStore>,
        id: &ObjectId,
        actor: &Actor,
        before: impl FnOnce(),
    ) -> Removal {
        let removable = |state| {
            let state = runtime.machine().state(state);
            state.may_remove(|r| actor.has_role(r))
        };
        match runtime.get_async(id.clone()).await {
            Ok(record) if removable(record.state) => {}
            _ => return Removal::Kept,
        }
        let mut life = match runtime.history_async(id.clone()).await {
            Ok(history) => history,
            Err(e) => return Removal::Refused(e),
        };
        let Some(version) = life.last().map(|e| e.version) else {
            return Removal::Gone;
        };
        self.keep(key, codec, &life);
        before();
        match runtime.remove_async(id.clone(), Some(version), actor).await {
            Ok(removal) => {
                life.push(removal);
                self.keep(key, codec, &life);
                Removal::Removed
            }
            Err(RuntimeError::NotFound { .. }) => Removal::Gone,
            Err(e) => Removal::Refused(e),
        }
    }
}

/// `lives`, each checked to be a path of `machine`: what is wrong goes to
/// `found`, each breach led by `name` (the object, as the report names it).
/// The lives, or `None` when they could not be read.
pub(crate) fn checked_lives<E: std::fmt::Display>(
    machine: &fsm::Machine,
    name: &str,
    lives: Result<Vec<Vec<Entry>>, E>,
    found: &mut Vec<String>,
) -> Option<Vec<Vec<Entry>>> {
    let lives = lives
        .map_err(|e| found.push(format!("{name}: history unreadable: {e}")))
        .ok()?;
    for life in &lives {
        if let Err(e) = fsm_runtime::check_history(machine, life) {
            found.push(format!("{name}: {e}"));
        }
    }
    Some(lives)
}

/// The state a removed object was removed in: where the last of its `lives`
/// ends. (Records are removed only at the version
/// archived, so a life archived without its removal was removed where it
/// ends.)
pub(crate) fn removed_in(lives: &[Vec<Entry>]) -> Option<StateId> {
    let last = lives.last()?.last()?;
    Some(match last.kind {
        EntryKind::Removed => last.from,
        _ => last.to,
    })
}

/// Documents as read, with the revision of each one's last change.
type Read<T> = (HashMap<ObjectId, T>, HashMap<ObjectId, i64>);

/// The pauses of one call the API server's documents do not answer, before
/// each try again, as a client of the real one would make them: 100 ms,
/// doubling to [`Away::LONGEST`], so that a process whose user etcd refuses
/// neither asks it ten times a second nor says so as often (it says so at the
/// first failure and at the 2nd, 4th, 8th ... after).
#[derive(Default)]
struct Away {
    tries: u32,
}

impl Away {
    /// The longest pause.
    const LONGEST: Duration = Duration::from_secs(2);

    /// The pause after `tries` failures before this one.
    fn pause(tries: u32) -> Duration {
        let doubled = Duration::from_millis(100).saturating_mul(1 << tries.min(8));
        doubled.min(Self::LONGEST)
    }

    /// Whether the failure after `tries` others is one to say: the first,
    /// then the 2nd, 4th, 8th ... after it.
    fn said(tries: u32) -> bool {
        tries == 0 || tries.is_power_of_two()
    }

    /// Says why, if this failure is one to say, and waits.
    fn wait(&mut self, e: &etcd_client::Error) {
        if Self::said(self.tries) {
            eprintln!(
                "mizar: the API server's documents are unreachable (try {}), trying again: {e}",
                self.tries + 1
            );
        }
        std::thread::sleep(Self::pause(self.tries));
        self.tries = self.tries.saturating_add(1);
    }
}

/// What the integration tests share (the etcd to test against).
#[cfg(test)]
#[path = "../../fsm-core/tests/common/mod.rs"]
mod common;

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::common;

    use super::*;

    /// An etcd that nobody answers at is an error from `connect`, within its
    /// connect timeout: not a client whose first change waits for ever.
    #[test]
    fn connecting_where_no_etcd_answers_is_an_error() {
        let started = std::time::Instant::now();
        // Port 1 (tcpmux): nothing listens there on a test machine.
        let nowhere = EtcdAccess::new(["127.0.0.1:1"]);
        let err = match EtcdApi::<u64>::connect(&nowhere, "/nowhere/".into()) {
            Err(e) => e,
            Ok(_) => panic!("connected where nothing listens"),
        };
        assert!(
            err.to_string()
                .starts_with("etcd (the API server's documents): "),
            "{err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
    }

    /// Two clients of one prefix, each on its own thread, add to the same
    /// document at once, each change waiting between its read and its write: the
    /// races happen (changes run again), and no addition is lost. Through
    /// `with` (every document read) and through `with_one` (that one only).
    #[test]
    fn racing_writers_in_etcd_lose_no_change() {
        racing_writers(false);
        racing_writers(true);
    }

    /// Two clients of the documents on a prefix of the test's etcd no other
    /// run uses, with the access and the prefix; `None` (the test passes
    /// over) only with `FSM_SKIP_ETCD`.
    fn two_clients(test: &str) -> Option<(EtcdApi<u64>, EtcdApi<u64>, EtcdAccess, String)> {
        let endpoints = common::etcd_endpoints();
        let prefix = format!(
            "/fsm-test/api/{test}/{}-{:?}/",
            std::process::id(),
            std::time::SystemTime::now()
        );
        let etcd = EtcdAccess::new(&endpoints);
        let connect = || EtcdApi::<u64>::connect(&etcd, prefix.clone());
        match (connect(), connect()) {
            (Ok(a), Ok(b)) => Some((a, b, etcd, prefix)),
            (Err(e), _) | (_, Err(e)) => {
                common::missing(
                    "FSM_SKIP_ETCD",
                    &format!("no etcd answers at {endpoints:?} ({e})"),
                    "run the tests with scripts/test, which starts one, or start one and set FSM_ETCD_ENDPOINTS",
                );
                None
            }
        }
    }

    fn racing_writers(one: bool) {
        let Some((a, b, _, _)) = two_clients(&format!("racing-{one}")) else {
            return;
        };
        let key = ObjectId::from("n");
        let add = |api: &EtcdApi<u64>| {
            for _ in 0..25 {
                let slow_add = |n: &mut Option<u64>| {
                    let before = n.unwrap_or(0);
                    std::thread::sleep(Duration::from_millis(2));
                    *n = Some(before + 1);
                };
                match one {
                    true => api.with_one(&key, slow_add),
                    false => api.with(|docs| {
                        let mut n = docs.get(&key).copied();
                        slow_add(&mut n);
                        docs.insert(key.clone(), n.unwrap());
                    }),
                }
            }
        };
        std::thread::scope(|s| {
            s.spawn(|| add(&a));
            s.spawn(|| add(&b));
        });
        let total = a.with(|docs| docs.get(&key).copied());
        assert_eq!(total, Some(50));
        assert_eq!(b.with_one(&key, |n| *n), Some(50));
        assert_eq!(b.ids(), std::slice::from_ref(&key));
        let conflicts = a.conflicts.load(Ordering::Relaxed) + b.conflicts.load(Ordering::Relaxed);
        assert!(conflicts > 0, "the writers never met");
    }

    /// A box `box-1`, open (where its keeper may remove it; `close` shuts
    /// it, where no one may), in memory, with an empty archive.
    fn a_box() -> (Runtime<AnyStore>, Codec, Actor, ObjectId, Archive) {
        a_box_in(AnyStore::Memory(Box::new(fsm_runtime::MemoryStore::new())))
    }

    /// [`a_box`] in `store`.
    fn a_box_in(store: AnyStore) -> (Runtime<AnyStore>, Codec, Actor, ObjectId, Archive) {
        let spec = r#"
            [machine]
            name = "box"
            initial = "open"
            [roles]
            keeper = "Keeps the boxes"
            [states]
            open = { remove = "keeper" }
            shut = { terminal = true }
            [actions]
            close = { from = "open", to = "shut", roles = "keeper" }
        "#;
        let machine = fsm::spec::load_str("box.toml", spec).unwrap();
        let runtime = Runtime::builder(machine, store).build().unwrap();
        let codec = Codec::new(runtime.machine());
        let keeper = Actor::new("keeper").with_role("keeper");
        let id = ObjectId::from("box-1");
        runtime.create(id.clone(), &keeper).unwrap();
        (runtime, codec, keeper, id, Archive::memory())
    }

    /// The removal is made at the version archived: a record moved between
    /// the archive and the removal (here by the hook that runs in between)
    /// is not removed, and its life, read back, is the record's whole
    /// history, not the shorter copy archived.
    #[tokio::test(flavor = "current_thread")]
    async fn a_record_moved_between_the_archive_and_the_removal_is_not_removed() {
        let (runtime, codec, keeper, id, archive) = a_box();

        let close = || {
            runtime.run(id.clone(), &keeper, "close").unwrap();
        };
        let removal = archive.remove(&id, &codec, &runtime, &id, &keeper, close);
        match removal.await {
            Removal::Refused(RuntimeError::VersionMismatch {
                expected, found, ..
            }) => assert_eq!((expected, found), (1, 3)),
            other => panic!("removed a record moved meanwhile: {other:?}"),
        }
        let state = runtime.get(id.clone()).unwrap().state;
        assert_eq!(runtime.machine().state(state).name, "shut");
        // One life: the record's, which the archived copy (its creation) begins.
        let lives = archive.lives(&id, &codec, &runtime, &id).unwrap();
        assert_eq!(lives, [runtime.history(id.clone()).unwrap()]);
        assert_eq!(lives[0].len(), 3);
        assert_eq!(removed_in(&lives), Some(state));
        // In `shut` the spec lets no one remove it: nothing is done.
        let again = archive.remove(&id, &codec, &runtime, &id, &keeper, || {});
        assert!(matches!(again.await, Removal::Kept));
    }

    /// A remover that dies between the removal and its note leaves the life
    /// archived without its removal: the life read back ends in it all the
    /// same, read from the store, as the noted one would (until the id is
    /// created again, when the store forgets it).
    #[test]
    fn a_removal_the_remover_did_not_note_is_read_from_the_store() {
        let (runtime, codec, keeper, id, archive) = a_box();

        // `Archive::remove`'s steps, cut off after the removal.
        let life = runtime.history(id.clone()).unwrap();
        archive.keep(&id, &codec, &life);
        let removal = runtime.remove(id.clone(), &keeper).unwrap();
        let stored: Vec<Vec<StoredEntry>> = archive.lives.get(&id).unwrap();
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0].len(), 1, "archived without its removal");

        let lives = archive.lives(&id, &codec, &runtime, &id).unwrap();
        let whole: Vec<Entry> = life.iter().cloned().chain([removal]).collect();
        assert_eq!(lives, [whole]);
        assert_eq!(lives[0][1].actor.as_str(), "keeper");
        fsm_runtime::check_history(runtime.machine(), &lives[0]).unwrap();

        // Created again, the id's new life is the record's; the first, whose
        // removal the store no longer has, ends where it was archived.
        runtime.create(id.clone(), &keeper).unwrap();
        let lives = archive.lives(&id, &codec, &runtime, &id).unwrap();
        assert_eq!(lives, [life, runtime.history(id.clone()).unwrap()]);
    }

    /// A store on a prefix of the test's etcd no other run uses, with the
    /// prefix; `None` (the test passes over) only with `FSM_SKIP_ETCD`.
    fn on_etcd(test: &str) -> Option<(AnyStore, String)> {
        let endpoints = common::etcd_endpoints();
        let prefix = format!(
            "/fsm-test/archive/{test}/{}-{:?}/",
            std::process::id(),
            std::time::SystemTime::now()
        );
        match fsm_etcd::EtcdStore::connect(&endpoints, &prefix) {
            Ok(store) => Some((AnyStore::Etcd(store), prefix)),
            Err(e) => {
                common::missing(
                    "FSM_SKIP_ETCD",
                    &format!("no etcd answers at {endpoints:?} ({e})"),
                    "run the tests with scripts/test, which starts one, or start one and set FSM_ETCD_ENDPOINTS",
                );
                None
            }
        }
    }

    /// `work` run to its end on a runtime of its own (the etcd store's calls
    /// block: the test is no task).
    fn block_on<T>(work: impl Future<Output = T>) -> T {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(work)
    }

    /// Puts `value` at `key` of the test's etcd, as something other than
    /// fsm would.
    fn put_raw(key: String, value: &str) {
        block_on(async {
            let mut raw = Client::connect(common::etcd_endpoints(), None).await?;
            raw.put(key, value, None).await
        })
        .unwrap();
    }

    /// A removal the store holds but cannot read (not what fsm writes) fails
    /// the read of the lives, naming where it is, rather than answering the
    /// archived life, which lacks it, as if whole.
    #[test]
    fn a_removal_the_store_cannot_read_fails_the_lives() {
        let Some((store, prefix)) = on_etcd("removal") else {
            return;
        };
        let (runtime, codec, keeper, id, archive) = a_box_in(store);
        // `Archive::remove`'s steps, cut off after the removal: its lives
        // read the removal from the store.
        archive.keep(&id, &codec, &runtime.history(id.clone()).unwrap());
        runtime.remove(id.clone(), &keeper).unwrap();
        let lives = archive.lives(&id, &codec, &runtime, &id).unwrap();
        assert_eq!(lives[0].last().map(|e| e.kind), Some(EntryKind::Removed));
        put_raw(format!("{prefix}gone/box-1"), "not an entry");
        match archive.lives(&id, &codec, &runtime, &id) {
            Err(LivesError::Record(e)) => assert!(e.to_string().contains("gone/box-1"), "{e}"),
            other => panic!("the removal read as {other:?}"),
        }
    }

    /// A history the store cannot read is not archived, and its record is
    /// not removed: the removal is refused with the store's error, and the
    /// object stays as it was, for a look once the history reads again.
    #[test]
    fn a_history_the_store_cannot_read_is_neither_archived_nor_removed() {
        let Some((store, prefix)) = on_etcd("history") else {
            return;
        };
        let (runtime, codec, keeper, id, archive) = a_box_in(store);
        put_raw(format!("{prefix}hist/box-1/{:020}", 1), "not an entry");
        let removal = archive.remove(&id, &codec, &runtime, &id, &keeper, || {});
        match block_on(removal) {
            Removal::Refused(e) => assert!(e.to_string().contains("hist/box-1/"), "{e}"),
            other => panic!("removed with its history unreadable: {other:?}"),
        }
        assert_eq!(runtime.get(id.clone()).unwrap().version, 1);
        assert!(archive.keys().is_empty(), "{:?}", archive.keys());
    }

    /// The documents' watch goes on past a reconnection and past a
    /// compaction: a document put while the watch moves to the new client
    /// wakes it all the same, and so does one put after etcd compacted away
    /// the revision the watch resumes from.
    #[test]
    fn the_documents_watch_goes_on_past_a_reconnection_and_a_compaction() {
        let Some((watching, writer, etcd, prefix)) = two_clients("watch") else {
            return;
        };
        let (wakes, mut woken) = mpsc::unbounded_channel();
        watching.watch(wakes);
        let key = ObjectId::from("n");
        let put = |n: u64| writer.with_one(&key, |doc| *doc = Some(n));
        let next = |woken: &mut mpsc::UnboundedReceiver<(ObjectId, u64)>| {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            loop {
                match woken.try_recv() {
                    Ok((_, n)) => return n,
                    Err(_) if std::time::Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Err(e) => panic!("no wake: {e}"),
                }
            }
        };
        // The watch is under way once a put wakes it.
        let mut first = 0;
        while woken.try_recv().is_err() {
            first += 1;
            put(first);
            std::thread::sleep(Duration::from_millis(20));
        }
        while woken.try_recv().is_ok() {}
        watching.reconnect(&etcd).unwrap();
        put(100);
        assert_eq!(next(&mut woken), 100);
        // Others' writes, then a compaction past the revision the watch has
        // reached; the watch, moved to a new client, begins there again.
        block_on(async {
            let mut raw = Client::connect(common::etcd_endpoints(), None).await?;
            let elsewhere = format!("{}-elsewhere", prefix.trim_end_matches('/'));
            for _ in 0..3 {
                raw.put(elsewhere.as_str(), "x", None).await?;
            }
            let revision = raw
                .get("/", None)
                .await?
                .header()
                .map_or(0, |h| h.revision());
            raw.compact(revision, None).await.map(drop)
        })
        .unwrap();
        watching.reconnect(&etcd).unwrap();
        put(200);
        assert_eq!(next(&mut woken), 200);
    }

    /// A call etcd does not answer is tried again after 100 ms, then after
    /// pauses that double up to two seconds, and stay there.
    #[test]
    fn the_pauses_between_tries_double_to_two_seconds() {
        let pauses: Vec<u128> = (0..8).map(|t| Away::pause(t).as_millis()).collect();
        assert_eq!(pauses, [100, 200, 400, 800, 1600, 2000, 2000, 2000]);
        assert_eq!(Away::pause(u32::MAX), Away::LONGEST);
    }

    /// A process whose calls etcd keeps refusing says so at the first
    /// failure and at the 2nd, 4th, 8th ... after it, not at every try.
    #[test]
    fn a_failing_call_is_said_ever_more_seldom() {
        let said: Vec<u32> = (0..40).filter(|&t| Away::said(t)).map(|t| t + 1).collect();
        assert_eq!(said, [1, 2, 3, 5, 9, 17, 33]);
    }
}
