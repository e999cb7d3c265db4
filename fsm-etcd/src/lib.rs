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
//!   the key lives; no other key is written per action. When the process dies its lease
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

pub use any::AnyStore;

use std::future::Future;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, EventType, GetOptions, PutOptions,
    Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use fsm_core::Machine;
use fsm_runtime::wire::{Codec, StoredEntry, StoredHolder, StoredRecord};
use fsm_runtime::{
    Entry, Event, Expected, ObjectId, Publisher, Record, Records, Removal, Store, StoreError,
    Watcher, Write,
};

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

fn unavailable(e: impl std::fmt::Display, retryable: bool) -> StoreError {
    StoreError::Unavailable {
        message: e.to_string(),
        retryable,
    }
}

/// Whether an etcd error may go away by itself.
fn store_error(e: etcd_client::Error) -> StoreError {
    use etcd_client::Error as E;
    use tonic::Code;
    let retryable = match &e {
        E::GRpcStatus(status) => {
            matches!(
                status.code(),
                Code::Unavailable
                    | Code::DeadlineExceeded
                    | Code::Aborted
                    | Code::ResourceExhausted
                    | Code::Unknown
                    | Code::Cancelled
            ) && !certificate_refused(sourced(&e))
        }
        E::TransportError(_) | E::IoError(_) | E::WatchError(_) | E::LeaseKeepAliveError(_) => {
            !certificate_refused(sourced(&e))
        }
        _ => false,
    };
    unavailable(format!("etcd: {e}"), retryable)
}

/// `e` as the first of its chain of sources: a gRPC status's own (etcd-client
/// gives none past the status).
fn sourced(e: &etcd_client::Error) -> &(dyn std::error::Error + 'static) {
    match e {
        etcd_client::Error::GRpcStatus(status) => status,
        e => e,
    }
}

/// Whether `e` came of a connection that etcd closed (a broken pipe, a
/// reset): read from its sources, where the I/O error sits under gRPC's.
fn closed_by_etcd(e: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind;
    std::iter::successors(Some(e), |e| e.source()).any(|e| {
        e.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
            )
        })
    })
}

/// Whether rustls refused etcd's certificate (an authority that did not sign
/// it, a name it is not issued to, an expired one), or etcd refused this
/// client's ([`certificate_alert`]): the same connection would be refused
/// again, so retrying cannot help. Read from `e`'s sources, where rustls's
/// error sits inside an I/O error.
#[cfg(feature = "tls")]
fn certificate_refused(e: &(dyn std::error::Error + 'static)) -> bool {
    certificate_alert(e)
        || std::iter::successors(Some(e), |e| e.source()).any(|e| {
            [Some(e), io_inner(e)].into_iter().flatten().any(|e| {
                matches!(
                    e.downcast_ref::<rustls::Error>(),
                    Some(
                        rustls::Error::InvalidCertificate(_)
                            | rustls::Error::NoCertificatesPresented
                    )
                )
            })
        })
}

/// Whether etcd refused this client's certificate, or its want of one, by a
/// TLS alert. Read from `e`'s sources as [`certificate_refused`]; HTTP/2
/// passes an I/O error on as its kind and text only, so the alert may arrive
/// as "received fatal alert: BadCertificate" rather than as rustls's error.
#[cfg(feature = "tls")]
fn certificate_alert(e: &(dyn std::error::Error + 'static)) -> bool {
    use rustls::AlertDescription as Alert;
    // The alerts by which etcd refuses this client's certificate.
    const REFUSALS: [Alert; 6] = [
        Alert::BadCertificate,
        Alert::CertificateRequired,
        Alert::UnknownCA,
        Alert::CertificateExpired,
        Alert::CertificateRevoked,
        Alert::UnsupportedCertificate,
    ];
    std::iter::successors(Some(e), |e| e.source()).any(|e| {
        let typed = [Some(e), io_inner(e)].into_iter().flatten().any(|e| {
            matches!(
                e.downcast_ref::<rustls::Error>(),
                Some(rustls::Error::AlertReceived(alert)) if REFUSALS.contains(alert)
            )
        });
        let told = (e.downcast_ref::<std::io::Error>())
            .filter(|io| io.kind() == std::io::ErrorKind::InvalidData)
            .is_some_and(|io| {
                let text = io.to_string();
                let alert = text.strip_prefix("received fatal alert: ");
                alert.is_some_and(|name| REFUSALS.iter().any(|a| format!("{a:?}") == name))
            });
        typed || told
    })
}

/// The error an I/O error `e` carries, if it is one.
#[cfg(feature = "tls")]
fn io_inner<'e>(
    e: &'e (dyn std::error::Error + 'static),
) -> Option<&'e (dyn std::error::Error + 'static)> {
    (e.downcast_ref::<std::io::Error>())
        .and_then(|io| io.get_ref())
        .map(|inner| inner as &(dyn std::error::Error + 'static))
}

/// Without TLS no certificate is checked.
#[cfg(not(feature = "tls"))]
fn certificate_refused(_: &(dyn std::error::Error + 'static)) -> bool {
    false
}

/// Without TLS no certificate is asked for.
#[cfg(not(feature = "tls"))]
fn certificate_alert(_: &(dyn std::error::Error + 'static)) -> bool {
    false
}

/// Whether etcd refused a request for its size: past its request limit
/// (`--max-request-bytes`, 1.5 MiB by default: "request is too large"), or past
/// gRPC's limit on what it receives, which is that and 512 KiB ("larger than
/// max"). The same request will never be taken.
fn is_too_large(e: &etcd_client::Error) -> bool {
    use tonic::Code;
    let etcd_client::Error::GRpcStatus(status) = e else {
        return false;
    };
    match status.code() {
        Code::InvalidArgument => status.message().contains("request is too large"),
        Code::ResourceExhausted => status.message().contains("larger than max"),
        _ => false,
    }
}

/// Options of an [`EtcdStore`] before it connects.
#[derive(Debug, Clone)]
pub struct EtcdBuilder {
    /// Where etcd is, and the user and TLS it takes.
    access: EtcdAccess,
    prefix: String,
    timeout: Duration,
    lease_ttl: Duration,
    keep: Option<u64>,
}

/// Where an etcd is and how it lets a client in: its endpoints, and the user
/// and the TLS it asks for. One value for every connection of a process: a
/// store's ([`EtcdAccess::store`]), and a client of the process's own beside
/// its stores ([`EtcdAccess::connect_options`]: a control plane's documents).
///
/// ```no_run
/// use fsm_etcd::{EtcdAccess, EtcdUser};
///
/// let etcd = EtcdAccess::new(["etcd-0.example.com:2379"])
///     .user(EtcdUser::new("mizar", std::env::var("ETCD_PASSWORD")?));
/// let vpcs = etcd.store("/mizar/vpc/").lease_ttl(std::time::Duration::from_secs(2)).connect()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdAccess {
    endpoints: Vec<String>,
    user: Option<EtcdUser>,
    #[cfg(feature = "tls")]
    tls: Option<EtcdTls>,
}

impl EtcdAccess {
    /// The etcd at `endpoints` (`host:port`), in plain text, without a user.
    pub fn new<E: AsRef<str>>(endpoints: impl IntoIterator<Item = E>) -> Self {
        EtcdAccess {
            endpoints: endpoints
                .into_iter()
                .map(|e| e.as_ref().to_owned())
                .collect(),
            user: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// As `user` ([`EtcdBuilder::user`]).
    pub fn user(mut self, user: EtcdUser) -> Self {
        self.user = Some(user);
        self
    }

    /// Over TLS ([`EtcdBuilder::tls`]; feature `tls`).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: EtcdTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The endpoints.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// A store of the objects under `prefix` on this etcd, reached this way,
    /// to connect once its other options are set.
    pub fn store(&self, prefix: &str) -> EtcdBuilder {
        EtcdBuilder {
            access: self.clone(),
            prefix: prefix.to_owned(),
            timeout: Duration::from_secs(5),
            lease_ttl: Duration::from_secs(10),
            keep: None,
        }
    }

    /// etcd-client's options that reach this etcd as the stores do (the user,
    /// its token renewed when it expires; TLS), for a client of one's own:
    /// add timeouts as the client needs. TLS material that does not read is
    /// refused here ([`EtcdTls::check`]), as a store's connection refuses it.
    pub fn connect_options(&self) -> Result<ConnectOptions, StoreError> {
        let options = ConnectOptions::new();
        #[cfg(feature = "tls")]
        let options = with_tls(options, self.tls.as_ref())?;
        Ok(with_user(options, self.user.as_ref()))
    }
}

impl EtcdAccess {
    /// Who connects where and how, for the errors of connecting: "etcd at
    /// ENDPOINTS over TLS as user `NAME`".
    fn at(&self) -> String {
        let mut at = format!("etcd at {}", self.endpoints.join(","));
        #[cfg(feature = "tls")]
        if self.tls.is_some() {
            at.push_str(" over TLS");
        }
        if let Some(user) = &self.user {
            at.push_str(&format!(" as user `{}`", user.name));
        }
        at
    }

    /// What an error of `doing` ("connecting to") this etcd says: where and
    /// how it connected, and what etcd or the connection answered.
    fn refused(&self, doing: &'static str) -> impl Fn(etcd_client::Error) -> StoreError + use<> {
        let at = self.at();
        #[cfg(feature = "tls")]
        let without_certificate = self.tls.as_ref().is_some_and(|tls| tls.identity.is_none());
        #[cfg(not(feature = "tls"))]
        let without_certificate = false;
        move |e| {
            // etcd's `--client-cert-auth` closes a connection that shows no
            // certificate, and the client learns only that the connection
            // broke: say what may be missing.
            let sources = sourced(&e);
            let hint =
                if without_certificate && (closed_by_etcd(sources) || certificate_alert(sources)) {
                    "; an etcd run with --client-cert-auth closes a connection that gives no \
                 client certificate: give one (--etcd-cert and --etcd-key, or EtcdTls::identity)"
                } else {
                    ""
                };
            match store_error(e) {
                StoreError::Unavailable { message, retryable } => StoreError::Unavailable {
                    message: format!("{doing} {at}: {message}{hint}"),
                    retryable,
                },
                other => other,
            }
        }
    }

    /// A store's client of this etcd, each request bounded by `timeout`.
    /// TLS material that does not read is refused before connecting.
    async fn client(&self, timeout: Duration, doing: &'static str) -> Result<Client, StoreError> {
        let options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(2))
            .with_timeout(timeout);
        #[cfg(feature = "tls")]
        let options = with_tls(options, self.tls.as_ref())?;
        let options = with_user(options, self.user.as_ref());
        Client::connect(&self.endpoints, Some(options))
            .await
            .map_err(self.refused(doing))
    }
}

/// `options` with `user`, if any: authenticated when connecting, and again
/// whenever etcd says the token expired (`--auth-token-ttl`, 5 minutes by
/// default).
fn with_user(options: ConnectOptions, user: Option<&EtcdUser>) -> ConnectOptions {
    match user {
        Some(EtcdUser { name, password }) => options
            .with_user(name.clone(), password.clone())
            .with_auto_token_refresh(true),
        None => options,
    }
}

/// `options` over `tls`, if any, once its PEM reads.
#[cfg(feature = "tls")]
fn with_tls(options: ConnectOptions, tls: Option<&EtcdTls>) -> Result<ConnectOptions, StoreError> {
    match tls {
        Some(tls) => {
            tls.check()
                .map_err(|e| unavailable(format!("etcd over TLS: {e}"), false))?;
            Ok(options.with_tls(tls.options()))
        }
        None => Ok(options),
    }
}

/// An etcd user and its password, for an etcd with authentication on
/// (`etcdctl auth enable`): the store authenticates as it when it connects, and
/// again whenever etcd says its token expired.
///
/// Its `Debug` shows the name, never the password.
///
/// ```
/// let user = fsm_etcd::EtcdUser::new("fsm-serve", "s3cret");
/// assert_eq!(format!("{user:?}"), r#"EtcdUser { name: "fsm-serve", password: <hidden> }"#);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdUser {
    name: String,
    password: String,
}

impl EtcdUser {
    /// The user `name`, with `password`.
    pub fn new(name: impl Into<String>, password: impl Into<String>) -> Self {
        EtcdUser {
            name: name.into(),
            password: password.into(),
        }
    }

    /// The user's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Debug for EtcdUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "EtcdUser {{ name: {:?}, password: <hidden> }}",
            self.name
        )
    }
}

/// TLS to etcd (feature `tls`): the certificate authority that signed etcd's
/// certificate, and for an etcd run with `--client-cert-auth`, this client's
/// certificate and key, all PEM. With it the store connects over `https`
/// (an endpoint given as `host:port` is read as `https://host:port`), and
/// refuses an etcd whose certificate that authority did not sign, or that is
/// not issued to the endpoint's host (or to [`domain`](Self::domain)).
///
/// Its `Debug` shows what it holds, never the key.
///
/// ```no_run
/// use fsm_etcd::{EtcdStore, EtcdTls, EtcdUser};
///
/// let tls = EtcdTls::new(std::fs::read("/etc/etcd/ca.pem")?).identity(
///     std::fs::read("/etc/fsm/client.pem")?,
///     std::fs::read("/etc/fsm/client-key.pem")?,
/// );
/// let store = EtcdStore::builder(["etcd-0.example.com:2379"], "/sabakan/machines/")
///     .tls(tls)
///     .user(EtcdUser::new("sabakan", std::env::var("ETCD_PASSWORD")?))
///     .connect()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(feature = "tls")]
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdTls {
    ca: Vec<u8>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
    domain: Option<String>,
}

#[cfg(feature = "tls")]
impl EtcdTls {
    /// TLS that trusts the certificates `ca` (PEM, one or several) signed.
    pub fn new(ca: impl Into<Vec<u8>>) -> Self {
        EtcdTls {
            ca: ca.into(),
            identity: None,
            domain: None,
        }
    }

    /// This client's certificate and its private key (PEM), which an etcd run
    /// with `--client-cert-auth` asks for. (Without a user, such an etcd takes
    /// the certificate's common name as the user's.)
    pub fn identity(mut self, certificate: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        self.identity = Some((certificate.into(), key.into()));
        self
    }

    /// The name etcd's certificate must be issued to, when it is not the
    /// endpoints' host (endpoints given as addresses, a certificate issued to
    /// a name).
    pub fn domain(mut self, name: impl Into<String>) -> Self {
        self.domain = Some(name.into());
        self
    }

    /// Whether the PEM given reads: the authority holds at least one
    /// certificate, and the identity (if any) a certificate and a private
    /// key. [`EtcdBuilder::connect`] checks it before it connects, so that
    /// a file of something else is named as such, not found at the first
    /// handshake (or taken for an etcd that does not answer).
    pub fn check(&self) -> Result<(), EtcdTlsError> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certificates =
            |pem: &[u8]| match CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>() {
                Ok(found) if found.is_empty() => Err("holds no PEM certificate".to_owned()),
                Ok(_) => Ok(()),
                Err(e) => Err(format!("is not PEM: {e}")),
            };
        certificates(&self.ca).map_err(EtcdTlsError::Authority)?;
        if let Some((certificate, key)) = &self.identity {
            certificates(certificate).map_err(EtcdTlsError::Certificate)?;
            PrivateKeyDer::from_pem_slice(key)
                .map_err(|e| EtcdTlsError::Key(format!("is not a PEM private key: {e}")))?;
        }
        Ok(())
    }

    /// TLS from PEM files: the authority `ca`, and the client's certificate
    /// and key when `identity` is given, each read and [checked](Self::check).
    /// The error names the file at fault, and what is wrong with it.
    pub fn from_files(
        ca: &std::path::Path,
        identity: Option<(&std::path::Path, &std::path::Path)>,
    ) -> Result<EtcdTls, EtcdTlsFileError> {
        let read = |path: &std::path::Path, part: fn(String) -> EtcdTlsError| {
            std::fs::read(path).map_err(|e| EtcdTlsFileError {
                path: path.to_owned(),
                problem: part(format!("could not be read: {e}")),
            })
        };
        let mut tls = EtcdTls::new(read(ca, EtcdTlsError::Authority)?);
        if let Some((certificate, key)) = identity {
            tls = tls.identity(
                read(certificate, EtcdTlsError::Certificate)?,
                read(key, EtcdTlsError::Key)?,
            );
        }
        tls.check().map_err(|problem| {
            let path = match (&problem, identity) {
                (EtcdTlsError::Certificate(_), Some((certificate, _))) => certificate,
                (EtcdTlsError::Key(_), Some((_, key))) => key,
                _ => ca,
            };
            EtcdTlsFileError {
                path: path.to_owned(),
                problem,
            }
        })?;
        Ok(tls)
    }

    fn options(&self) -> etcd_client::TlsOptions {
        let mut options = etcd_client::TlsOptions::new()
            .ca_certificate(etcd_client::Certificate::from_pem(&self.ca));
        if let Some((certificate, key)) = &self.identity {
            options = options.identity(etcd_client::Identity::from_pem(certificate, key));
        }
        if let Some(domain) = &self.domain {
            options = options.domain_name(domain.clone());
        }
        options
    }
}

/// What [`EtcdTls::check`] found wrong, and in which part.
#[cfg(feature = "tls")]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EtcdTlsError {
    /// The authority ([`EtcdTls::new`]'s PEM).
    #[error("the authority (CA) {0}")]
    Authority(String),
    /// The client's certificate ([`EtcdTls::identity`]'s first PEM).
    #[error("the client certificate {0}")]
    Certificate(String),
    /// The client's private key ([`EtcdTls::identity`]'s second PEM).
    #[error("the client key {0}")]
    Key(String),
}

/// What [`EtcdTls::from_files`] found wrong: the file, and what is wrong
/// with it (it could not be read, or it is not what its part needs).
#[cfg(feature = "tls")]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {problem}", .path.display())]
pub struct EtcdTlsFileError {
    /// The file.
    pub path: std::path::PathBuf,
    /// What is wrong, in which part.
    pub problem: EtcdTlsError,
}

/// How the fsm tools' command lines say to reach an etcd that checks who
/// connects, in the flags `fsm serve` and the operators' examples share (after
/// etcdctl's): `--etcd-cacert` (etcd's authority: over TLS), `--etcd-cert`
/// and `--etcd-key` (a client certificate, for etcd's `--client-cert-auth`),
/// `--etcd-user` (its password from the environment variable
/// [`PASSWORD_VARIABLE`](Self::PASSWORD_VARIABLE), or from the file
/// `--etcd-password-file` names, read at each [`access`](Self::access); never
/// from the command line, where other users could read it). Feature `tls`;
/// with the feature `clap`, a command line takes them as they are
/// (`#[command(flatten)]`), a certificate refused without its key or the
/// authority:
///
/// ```
/// # #[cfg(feature = "clap")] {
/// use clap::Parser;
/// use fsm_etcd::EtcdFlags;
///
/// #[derive(Parser)]
/// struct Args {
///     #[arg(long, default_value = "127.0.0.1:2379")]
///     etcd: String,
///     #[command(flatten)]
///     access: EtcdFlags,
/// }
///
/// let args = Args::parse_from(["serve", "--etcd-cacert", "ca.pem", "--etcd-user", "ops"]);
/// assert_eq!(args.access.args(), ["--etcd-cacert", "ca.pem", "--etcd-user", "ops"]);
/// assert!(Args::try_parse_from(["serve", "--etcd-cert", "client.pem"]).is_err());
/// assert!(Args::try_parse_from(["serve", "--etcd-password-file", "secret"]).is_err());
/// # }
/// ```
///
/// ```
/// use fsm_etcd::{EtcdAccess, EtcdFlags, EtcdFlagError};
///
/// let none = EtcdFlags::default();
/// assert_eq!(none.access(["127.0.0.1:2379"])?, EtcdAccess::new(["127.0.0.1:2379"]));
///
/// let half = EtcdFlags { cert: Some("client.pem".into()), ..EtcdFlags::default() };
/// assert_eq!(half.access(["127.0.0.1:2379"]), Err(EtcdFlagError::Identity));
/// # Ok::<(), EtcdFlagError>(())
/// ```
#[cfg(feature = "tls")]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct EtcdFlags {
    /// The certificate authority (PEM) that signed etcd's certificate: connect
    /// to etcd over TLS, and only to an etcd whose certificate it signed.
    #[cfg_attr(
        feature = "clap",
        arg(long = "etcd-cacert", id = "etcd_cacert", value_name = "FILE")
    )]
    pub cacert: Option<std::path::PathBuf>,
    /// A client certificate (PEM), for an etcd run with `--client-cert-auth`;
    /// with `--etcd-key` and `--etcd-cacert`.
    #[cfg_attr(
        feature = "clap",
        arg(long = "etcd-cert", id = "etcd_cert", value_name = "FILE",
            requires_all = ["etcd_key", "etcd_cacert"])
    )]
    pub cert: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM); with `--etcd-cert`.
    #[cfg_attr(
        feature = "clap",
        arg(
            long = "etcd-key",
            id = "etcd_key",
            value_name = "FILE",
            requires = "etcd_cert"
        )
    )]
    pub key: Option<std::path::PathBuf>,
    /// The etcd user to authenticate as, its password read from the
    /// environment variable `FSM_ETCD_PASSWORD` (or `--etcd-password-file`),
    /// never from the command line, where other users could read it.
    #[cfg_attr(
        feature = "clap",
        arg(long = "etcd-user", id = "etcd_user", value_name = "NAME")
    )]
    pub user: Option<String>,
    /// A file holding `--etcd-user`'s password (a trailing line break is not
    /// part of it), in place of `FSM_ETCD_PASSWORD`: a mounted secret, read
    /// again each time the access is (`fsm serve` on SIGHUP), so that a
    /// changed password is taken up without a restart.
    #[cfg_attr(
        feature = "clap",
        arg(
            long = "etcd-password-file",
            id = "etcd_password_file",
            value_name = "FILE",
            requires = "etcd_user"
        )
    )]
    pub password_file: Option<std::path::PathBuf>,
}

#[cfg(feature = "tls")]
impl EtcdFlags {
    /// The environment variable `--etcd-user`'s password is read from.
    pub const PASSWORD_VARIABLE: &'static str = "FSM_ETCD_PASSWORD";

    /// The access to the etcd at `endpoints` these flags give: the TLS files
    /// read and [checked](EtcdTls::check), the password read from its file or
    /// the environment. The error names the flag, and the file at fault.
    pub fn access<E: AsRef<str>>(
        &self,
        endpoints: impl IntoIterator<Item = E>,
    ) -> Result<EtcdAccess, EtcdFlagError> {
        let mut access = EtcdAccess::new(endpoints);
        let identity = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Some((cert.as_path(), key.as_path())),
            (None, None) => None,
            _ => return Err(EtcdFlagError::Identity),
        };
        match (&self.cacert, identity) {
            (Some(ca), identity) => {
                let tls = EtcdTls::from_files(ca, identity).map_err(|file| {
                    let flag = match file.problem {
                        EtcdTlsError::Certificate(_) => "--etcd-cert",
                        EtcdTlsError::Key(_) => "--etcd-key",
                        _ => "--etcd-cacert",
                    };
                    EtcdFlagError::File { flag, file }
                })?;
                access = access.tls(tls);
            }
            (None, Some(_)) => return Err(EtcdFlagError::Identity),
            (None, None) => {}
        }
        match (&self.user, &self.password_file) {
            (Some(name), Some(file)) => {
                let read =
                    std::fs::read_to_string(file).map_err(|e| EtcdFlagError::PasswordFile {
                        path: file.clone(),
                        problem: e.to_string(),
                    })?;
                let password = read.strip_suffix('\n').unwrap_or(&read);
                let password = password.strip_suffix('\r').unwrap_or(password);
                if password.is_empty() {
                    return Err(EtcdFlagError::PasswordFile {
                        path: file.clone(),
                        problem: "it is empty".into(),
                    });
                }
                access = access.user(EtcdUser::new(name, password));
            }
            (Some(name), None) => {
                let password = std::env::var(Self::PASSWORD_VARIABLE).map_err(|_| {
                    EtcdFlagError::Password {
                        user: name.clone(),
                        variable: Self::PASSWORD_VARIABLE,
                    }
                })?;
                access = access.user(EtcdUser::new(name, password));
            }
            (None, Some(_)) => return Err(EtcdFlagError::PasswordFileWithoutUser),
            (None, None) => {}
        }
        Ok(access)
    }

    /// The flags again, for a process one starts to reach the same etcd the
    /// same way (its password goes by the environment it inherits).
    pub fn args(&self) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = Vec::new();
        for (flag, file) in [
            ("--etcd-cacert", &self.cacert),
            ("--etcd-cert", &self.cert),
            ("--etcd-key", &self.key),
        ] {
            if let Some(file) = file {
                args.extend([flag.into(), file.into()]);
            }
        }
        if let Some(user) = &self.user {
            args.extend(["--etcd-user".into(), user.into()]);
        }
        if let Some(file) = &self.password_file {
            args.extend(["--etcd-password-file".into(), file.into()]);
        }
        args
    }
}

/// Why [`EtcdFlags::access`] refused the flags.
#[cfg(feature = "tls")]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EtcdFlagError {
    /// A TLS file does not read, or is not what its flag says.
    #[error("{flag} {file}")]
    File {
        /// The flag that named the file.
        flag: &'static str,
        /// The file, and what is wrong with it.
        file: EtcdTlsFileError,
    },
    /// A client certificate without its key (or the other way round), or
    /// without the authority.
    #[error("--etcd-cert and --etcd-key go together, and with --etcd-cacert")]
    Identity,
    /// `--etcd-user` without its password in the environment.
    #[error(
        "--etcd-user {user}: set its password in the environment variable {variable}, or give --etcd-password-file"
    )]
    Password {
        /// The user named.
        user: String,
        /// The variable that was not set.
        variable: &'static str,
    },
    /// `--etcd-password-file` names a file that does not read, or is empty.
    #[error("--etcd-password-file {}: {problem}", .path.display())]
    PasswordFile {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// `--etcd-password-file` without `--etcd-user`.
    #[error("--etcd-password-file is the password of --etcd-user, which is not given")]
    PasswordFileWithoutUser,
}

#[cfg(feature = "tls")]
impl std::fmt::Debug for EtcdTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdTls")
            .field("ca_bytes", &self.ca.len())
            .field(
                "identity",
                &self.identity.as_ref().map(|_| "<certificate and key>"),
            )
            .field("domain", &self.domain)
            .finish()
    }
}

impl EtcdBuilder {
    /// How long one request may take before it is [`StoreError::Unavailable`]
    /// (default 5 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long after this process is gone (or cut off from etcd) its actions in
    /// flight show as abandoned, for a healer anywhere to roll back (default 10 s,
    /// at least 1 s).
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }

    /// Keeps only the last `entries` entries of each history (at least one):
    /// each write deletes, in its own transaction, the entries older than
    /// that, so that a long-lived object's history does not grow without end
    /// in etcd. Histories are kept whole by default. A history cut this way no
    /// longer starts with the creation, so
    /// [`check_history`](fsm_runtime::check_history) no longer applies to it.
    /// (etcd keeps each key's old revisions until it compacts them: run it with
    /// `--auto-compaction-retention`, or compact it, so that what is deleted
    /// frees its space.)
    pub fn keep_history(mut self, entries: usize) -> Self {
        self.keep = Some(u64::try_from(entries.max(1)).unwrap_or(u64::MAX));
        self
    }

    /// Authenticates as `user`, for an etcd with authentication on.
    pub fn user(mut self, user: EtcdUser) -> Self {
        self.access = self.access.user(user);
        self
    }

    /// Connects over TLS (feature `tls`): see [`EtcdTls`]. An etcd whose
    /// certificate the store refuses (signed by another authority, issued to
    /// another name, expired) is [`StoreError::Unavailable`] with `retryable:
    /// false`: the same connection would be refused again; so is an etcd that
    /// refuses the store's certificate, or its want of one, by a TLS alert.
    /// Without a certificate the refusal says that etcd may want one
    /// (`--client-cert-auth`); at times etcd closes the connection before its
    /// alert reaches the client, which then learns only that the connection
    /// broke: that stays retryable. PEM that does not read
    /// ([`EtcdTls::check`]) is refused before connecting, not retryable.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: EtcdTls) -> Self {
        self.access = self.access.tls(tls);
        self
    }

    /// Connects: fails with [`StoreError::Unavailable`] when no endpoint
    /// answers, when TLS fails (etcd's certificate not signed by the
    /// authority, or etcd asking for a client certificate this store has
    /// not), and when etcd refuses the user.
    pub fn connect(self) -> Result<EtcdStore, StoreError> {
        EtcdStore::open(self)
    }
}

impl EtcdStore {
    /// Connects to etcd at `endpoints` (`host:port`) and keeps the objects under
    /// `prefix` (one prefix per machine: `"/sabakan/machines/"`), with the default
    /// options.
    pub fn connect<E: AsRef<str>>(
        endpoints: impl IntoIterator<Item = E>,
        prefix: &str,
    ) -> Result<Self, StoreError> {
        Self::builder(endpoints, prefix).connect()
    }

    /// A store to connect once its options are set.
    pub fn builder<E: AsRef<str>>(
        endpoints: impl IntoIterator<Item = E>,
        prefix: &str,
    ) -> EtcdBuilder {
        EtcdAccess::new(endpoints).store(prefix)
    }

    fn open(options: EtcdBuilder) -> Result<Self, StoreError> {
        let EtcdBuilder {
            access,
            prefix,
            timeout,
            lease_ttl,
            keep,
        } = options;
        // One worker: it only hands requests to the connection and answers back,
        // and with two, each call's hand-offs crossed between them, a thread
        // woken through the kernel more per call (BENCHMARKS.md). Async callers'
        // calls wait on the runtime's blocking threads, not on its worker.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("fsm-etcd")
            .enable_all()
            .build()
            .map_err(|e| unavailable(e, false))?;
        let ttl = lease_ttl.as_secs().max(1) as i64;
        let (client, lease) = runtime.block_on(async {
            let client = access.client(timeout, "connecting to").await?;
            // The first requests: where a refused certificate or user shows.
            let first = async {
                let lease = client.lease_client().grant(ttl, None).await?.id();
                put_live(&client, &prefix, lease).await?;
                Ok(lease)
            };
            let lease = first.await.map_err(access.refused("connecting to"))?;
            Ok::<_, StoreError>((client, lease))
        })?;
        let publisher = Arc::new(Publisher::new(WATCH_CAPACITY));
        let lease = Arc::new(AtomicI64::new(lease));
        let client = tokio::sync::watch::Sender::new(client);
        runtime.spawn(keep_alive(
            client.subscribe(),
            prefix.clone(),
            ttl,
            lease.clone(),
        ));
        let codec = Arc::new(OnceLock::new());
        Ok(EtcdStore {
            inner: Arc::new(Inner {
                runtime: Some(runtime),
                client,
                prefix,
                timeout,
                publisher,
                fed: std::sync::Mutex::new(false),
                kept: Default::default(),
                floor: Default::default(),
                lease,
                ttl,
                codec,
                keep,
            }),
        })
    }

    /// Connects to etcd again, as `access` says, and makes every later request
    /// on that connection: renewed TLS files (a client certificate about to
    /// expire, a new authority) or another user, while the store runs. The new
    /// connection is tried first (a read of this process's session key), and
    /// only once it answers does it replace the one in use, so a refused
    /// access leaves the store as it was. This process's session (its lease)
    /// goes on, kept alive from then on on the new connection; the watch that
    /// feeds the store's watchers is opened again on it from the revision
    /// after the last write it saw under the prefix, so no event is lost or
    /// repeated. (Should etcd have compacted past that revision meanwhile,
    /// as after quiet hours on the prefix with `--auto-compaction-retention`,
    /// the watch goes on from the oldest revision etcd kept, as after any
    /// watch that breaks: with no gap when nothing under the prefix was
    /// written in between, else the watchers are told of it,
    /// [`Lagged::Gap`](fsm_runtime::Lagged).) Requests already under way end
    /// on the connection they began on.
    ///
    /// Fails with [`StoreError::Unavailable`], as [`EtcdBuilder::connect`]
    /// does, saying where it reconnected and how.
    pub fn reconnect(&self, access: &EtcdAccess) -> Result<(), StoreError> {
        let (access, timeout) = (access.clone(), self.inner.timeout);
        let live = live_key(&self.inner.prefix, self.inner.lease.load(Ordering::Acquire));
        let runtime = self.inner.runtime.as_ref().expect("running until dropped");
        let connected = wait_on(runtime, async move {
            let client = access.client(timeout, "reconnecting to").await?;
            (kv_client(&client).get(live, None).await)
                .map_err(access.refused("reconnecting to"))?;
            Ok::<_, StoreError>(client)
        })
        .unwrap_or_else(|| Err(unavailable("etcd: the store's runtime stopped", false)))?;
        self.inner.client.send_replace(connected);
        tracing::info!(prefix = %self.inner.prefix, "reconnected to etcd");
        Ok(())
    }

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

    /// Forgets what the objects removed before `before` left under the
    /// prefix (each one's emptied `obj/` key and its `gone/` entry), and
    /// answers how many it forgot: for a prefix whose ids are seldom used
    /// twice (one per job, per operation), where they would otherwise pile
    /// up for ever, and [`Store::ids`] read every one of them.
    ///
    /// [`Store::removal`] then answers `None` for those ids, as for an id
    /// that never had an object. Versions still never repeat for an id: the
    /// key `floor` is first raised to the highest removal version it is about
    /// to forget, and an id without a key is created above it (its creation
    /// compares the floor's key as it read it), so an `If-Match` or a
    /// [`Fence`](fsm_runtime::Fence) of a forgotten object never matches a
    /// later object of its id, and fences stay increasing. A removal is
    /// forgotten only if its keys are still as it left them (the id was not
    /// created again meanwhile): by one transaction for up to 32 removals,
    /// then, should one of them have changed, by one each.
    /// Removals made by an earlier version of this store, whose `gone/` key
    /// is empty (no time to go by), are kept; so is a `gone/` key that cannot
    /// be read (its version unknown), with a warning naming it.
    ///
    /// **Every process on the prefix must be of this version or later** once
    /// a removal is forgotten: an earlier one creates an id without a key at
    /// version 1, and compares a record's version with its key's etcd
    /// version, which a key created again no longer matches. The first
    /// forgetting marks the prefix with this store's [`FORMAT`]; from this
    /// version on a store refuses a prefix marked with a format newer than it
    /// reads, so a later format is never misread (versions before this one
    /// do not read the mark).
    ///
    /// Call it now and then, not per action: it reads every `gone/` key, a
    /// thousand per request. `fsm serve` does so with
    /// `--forget-removals-after`.
    pub fn forget_removals(&self, before: std::time::SystemTime) -> Result<usize, StoreError> {
        let due = self.removals_before(before)?;
        let Some(highest) = due.iter().map(|(_, version, _)| *version).max() else {
            return Ok(0);
        };
        self.raise_floor(highest)?;
        let mut forgotten = 0;
        for batch in due.chunks(FORGET_BATCH) {
            // Most often no removal of a batch changed meanwhile: one
            // transaction forgets them all. Otherwise each by its own, and
            // those that changed are left alone.
            if self.forget(batch)? {
                forgotten += batch.len();
                continue;
            }
            for removal in batch {
                if self.forget(std::slice::from_ref(removal))? {
                    forgotten += 1;
                }
            }
        }
        Ok(forgotten)
    }

    /// Forgets every removal of `due` (its id, its version and the revision
    /// that wrote it) by one transaction, if each one's `obj/` and `gone/`
    /// keys are still as it left them; whether they were.
    fn forget(&self, due: &[(ObjectId, u64, i64)]) -> Result<bool, StoreError> {
        let mut when = Vec::with_capacity(2 * due.len());
        let mut ops = Vec::with_capacity(3 * due.len());
        for (id, _, revision) in due {
            let (object, gone) = (self.object_key(id), self.gone_key(id));
            let history = self.history_prefix(id);
            when.push(Compare::mod_revision(
                object.clone(),
                CompareOp::Equal,
                *revision,
            ));
            when.push(Compare::mod_revision(
                gone.clone(),
                CompareOp::Equal,
                *revision,
            ));
            ops.push(TxnOp::delete(object, None));
            ops.push(TxnOp::delete(gone, None));
            // The removal's last history key, if its clean-up failed.
            ops.push(TxnOp::delete(
                history.clone(),
                Some(DeleteOptions::new().with_range(prefix_end(&history))),
            ));
        }
        let txn = Txn::new().when(when).and_then(ops);
        let mut kv = self.kv();
        let forgot = self.run(async move { kv.txn(txn).await })?.succeeded();
        if forgot {
            for (id, _, _) in due {
                self.keep(id, None);
            }
        }
        Ok(forgot)
    }

    /// Every removal under the prefix made before `before`: its id, its
    /// version, and the revision that wrote it (its `obj/` and `gone/` keys
    /// alike), read a thousand `gone/` keys per request.
    fn removals_before(
        &self,
        before: std::time::SystemTime,
    ) -> Result<Vec<(ObjectId, u64, i64)>, StoreError> {
        let prefix = format!("{}gone/", self.inner.prefix);
        let end = prefix_end(&prefix);
        let mut from = prefix.clone().into_bytes();
        let mut due = Vec::new();
        loop {
            let options = GetOptions::new()
                .with_range(end.clone())
                .with_limit(RECORDS_PAGE);
            let (mut kv, key) = (self.kv(), from.clone());
            let resp = self.run(async move { kv.get(key, Some(options)).await })?;
            for kv in resp.kvs() {
                if kv.value() == REMOVED {
                    continue;
                }
                // One removal that cannot be read stops no other's forgetting;
                // it is kept (its version is unknown, so the floor could not
                // be raised past it).
                let entry: StoredEntry = match json(kv.value(), kv.key()) {
                    Ok(entry) => entry,
                    Err(e) => {
                        tracing::warn!("etcd: a removal kept, not forgotten: {e}");
                        continue;
                    }
                };
                let segment = kv.key_str().ok().and_then(|k| k.strip_prefix(&prefix));
                if let (Some(segment), true) = (segment, entry.at < before) {
                    due.push((unescape(segment), entry.version, kv.mod_revision()));
                }
            }
            match resp.kvs().last() {
                Some(last) if resp.more() => {
                    from = last.key().to_vec();
                    from.push(0);
                }
                _ => return Ok(due),
            }
        }
    }

    /// Raises the floor to `version`, unless it is there already, by
    /// compare-and-set on its key, and marks the prefix as of this store's
    /// [`FORMAT`] in the same transaction (a process that reads only an
    /// earlier format refuses the prefix from then on).
    fn raise_floor(&self, version: u64) -> Result<(), StoreError> {
        loop {
            let (floor_key, format_key) = (self.floor_key(), self.format_key());
            let read = Txn::new().and_then([
                TxnOp::get(floor_key.clone(), None),
                TxnOp::get(format_key.clone(), None),
            ]);
            let mut kv = self.kv();
            let resp = self.run(async move { kv.txn(read).await })?;
            let mut gets = resp.op_responses().into_iter().map(|r| match r {
                TxnOpResponse::Get(get) => get.kvs().first().cloned(),
                _ => None,
            });
            let floor = Floor::of(gets.next().flatten().as_ref())?;
            let format = Format::of(gets.next().flatten().as_ref())?;
            self.saw_floor(floor);
            if floor.version >= version {
                return Ok(());
            }
            let mut ops = vec![TxnOp::put(floor_key.clone(), version.to_string(), None)];
            if format.version < FORMAT {
                ops.push(TxnOp::put(format_key.clone(), FORMAT.to_string(), None));
            }
            let txn = Txn::new()
                .when([
                    Compare::mod_revision(floor_key, CompareOp::Equal, floor.revision),
                    Compare::mod_revision(format_key, CompareOp::Equal, format.revision),
                ])
                .and_then(ops);
            let mut kv = self.kv();
            let resp = self.run(async move { kv.txn(txn).await })?;
            if resp.succeeded() {
                self.saw_floor(Floor {
                    version,
                    revision: resp.header().map_or(0, |h| h.revision()),
                });
                return Ok(());
            }
        }
    }

    /// Refuses a prefix stored in a format newer than this store reads
    /// ([`FORMAT`]), before it reads or writes anything there.
    fn check_format(&self) -> Result<(), StoreError> {
        let (mut kv, key) = (self.kv(), self.format_key());
        let resp = self.run(async move { kv.get(key, None).await })?;
        Format::of(resp.kvs().first()).map(drop)
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

/// The floor as this store last read it: the highest removal version
/// forgotten under the prefix ([`EtcdStore::forget_removals`]; 0: none),
/// and the revision of the key that holds it (0: no key).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Floor {
    version: u64,
    revision: i64,
}

impl Floor {
    /// The floor `kv` holds (none: no key), or why it cannot be read.
    fn of(kv: Option<&etcd_client::KeyValue>) -> Result<Floor, StoreError> {
        let Some(kv) = kv else {
            return Ok(Floor::default());
        };
        Ok(Floor {
            version: decimal(kv, "not a version (the floor of forgotten removals)")?,
            revision: kv.mod_revision(),
        })
    }
}

/// The stored format this store writes, and the newest it reads: 2 since
/// removals can be forgotten (a write compares the revision that wrote the
/// record it was decided on, a creation the floor, where format 1 compared
/// a key's etcd version, which forgetting restarts). A prefix without the
/// key `format` is of format 1, which this store reads and writes alike.
pub const FORMAT: u64 = 2;

/// The format a prefix is stored in, and the revision that said so (0: no
/// key, format 1).
#[derive(Debug, Clone, Copy)]
struct Format {
    version: u64,
    revision: i64,
}

impl Format {
    /// The format `kv` holds (none: no key, format 1), or why this store
    /// cannot read the prefix: a number it does not know.
    fn of(kv: Option<&etcd_client::KeyValue>) -> Result<Format, StoreError> {
        let Some(kv) = kv else {
            return Ok(Format {
                version: 1,
                revision: 0,
            });
        };
        let version = decimal(kv, "not a format (a number)")?;
        if version > FORMAT {
            return Err(unreadable(
                kv.key(),
                format!(
                    "the prefix is stored in format {version}, and this version of fsm-etcd reads \
                     formats up to {FORMAT}: upgrade every process on the prefix"
                ),
            ));
        }
        Ok(Format {
            version,
            revision: kv.mod_revision(),
        })
    }
}

/// The number `kv` holds in decimal, or `what` it should have been.
fn decimal(kv: &etcd_client::KeyValue, what: &str) -> Result<u64, StoreError> {
    std::str::from_utf8(kv.value())
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| unreadable(kv.key(), what))
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

    /// Commits `write` by one transaction, answering the revision that wrote
    /// it. A creation whose version the store cannot tell is right (it knows
    /// neither the id's removal nor the floor it would be numbered past)
    /// reads them first; one that lost to a floor raised meanwhile, or to a
    /// removal forgotten, and whose version is still the right one, is made
    /// again (the runtime takes a [`StoreError::CreateAt`] naming the version
    /// it tried for a refusal).
    fn write(&self, write: Write) -> Result<i64, StoreError> {
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
    ) -> Result<i64, StoreError> {
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
        let starts = move |h: &&mut StoredHolder| h.version == written && !h.abandoned;
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
                let message = format!("etcd: {e}");
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
                return kv.txn(txn(renewed)).await;
            }
            Ok(resp)
        }, too_large)?;
        self.answered(id, resp, creating)
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
        let id = write.id().clone();
        let record = write.record().clone();
        match self.write(write) {
            Ok(revision) => {
                self.keep(&id, Some(Kept::record(&record, revision)));
                Ok(())
            }
            // What the transaction read instead is kept.
            Err(e @ (StoreError::Conflict { .. } | StoreError::CreateAt { .. })) => Err(e),
            Err(e) => {
                // A write that failed may have been applied: keep nothing.
                self.keep(&id, None);
                Err(e)
            }
        }
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

    /// Runs [`commit`](Store::commit) on the store's own runtime and awaits it, as
    /// [`load_async`](Store::load_async).
    fn commit_async(&self, write: Write) -> impl Future<Output = Result<(), StoreError>> + Send {
        let store = self.clone();
        self.off_thread(move || store.commit(write))
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

impl EtcdStore {
    /// Runs `call` on a blocking thread of the store's runtime, where it drives
    /// its requests on that runtime, and awaits the answer. One code path for
    /// both APIs: what the blocking calls check and retry, the async ones do
    /// too.
    fn off_thread<T: Send + 'static>(
        &self,
        call: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
    ) -> impl Future<Output = Result<T, StoreError>> + Send + 'static {
        let runtime = self.inner.runtime.as_ref().expect("running until dropped");
        let call = runtime.spawn_blocking(call);
        async move {
            call.await.unwrap_or_else(|e| {
                Err(unavailable(
                    format!("etcd: the store's call did not finish ({e})"),
                    false,
                ))
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

/// The key that lives as long as the session (lease) `session` of a process.
fn live_key(prefix: &str, session: i64) -> String {
    format!("{prefix}live/{session:x}")
}

/// Puts the key of session `lease`, on that lease.
async fn put_live(client: &Client, prefix: &str, lease: i64) -> Result<(), etcd_client::Error> {
    kv_client(client)
        .put(
            live_key(prefix, lease),
            "",
            Some(PutOptions::new().with_lease(lease)),
        )
        .await
        .map(drop)
}

/// Replaces the expired lease `old` with a new one, unless another task already
/// did (then that one is kept, and the lease granted here is revoked): every key
/// of this process must be on the one lease the keep-alive task renews.
async fn replace_lease(
    client: &Client,
    prefix: &str,
    ttl: i64,
    lease: &AtomicI64,
    old: i64,
) -> Result<i64, etcd_client::Error> {
    let mut leases = client.lease_client();
    let granted = leases.grant(ttl, None).await?.id();
    put_live(client, prefix, granted).await?;
    match lease.compare_exchange(old, granted, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            tracing::debug!(old, new = granted, "etcd lease lost; took a new one");
            Ok(granted)
        }
        Err(current) => {
            let _ = leases.revoke(granted).await;
            Ok(current)
        }
    }
}

/// Once the store's client is replaced ([`EtcdStore::reconnect`]): a task
/// that works on one client stops there and begins again on the new one.
/// Never, once the store is gone (its runtime stops its tasks then).
async fn replaced(client: &mut tokio::sync::watch::Receiver<Client>) {
    if client.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Keeps this process's lease alive; when it was lost (etcd unreachable longer
/// than its time to live), takes a new one: the actions held under the old one
/// show as abandoned elsewhere meanwhile, and their completions get a conflict if
/// a healer rolled them back. Always on the store's client in use.
async fn keep_alive(
    mut clients: tokio::sync::watch::Receiver<Client>,
    prefix: String,
    ttl: i64,
    lease: Arc<AtomicI64>,
) {
    let every = Duration::from_millis((ttl as u64 * 1000 / 3).max(200));
    loop {
        let id = lease.load(Ordering::Acquire);
        let client = clients.borrow_and_update().clone();
        let mut leases = client.lease_client();
        let kept = async {
            if let Ok((mut keeper, mut stream)) = leases.keep_alive(id).await {
                loop {
                    if keeper.keep_alive().await.is_err() {
                        break;
                    }
                    match stream.message().await {
                        Ok(Some(resp)) if resp.ttl() > 0 => {}
                        _ => break,
                    }
                    tokio::time::sleep(every).await;
                    // A write that found the lease expired replaced it meanwhile.
                    if lease.load(Ordering::Acquire) != id {
                        break;
                    }
                }
            }
            tokio::time::sleep(every).await;
        };
        tokio::select! {
            () = kept => {}
            // Kept alive from now on on the new client, at once.
            () = replaced(&mut clients) => continue,
        }
        if lease.load(Ordering::Acquire) != id {
            continue;
        }
        // A lease that still lives is kept; an expired one is replaced.
        let expired = match leases.time_to_live(id, None).await {
            Ok(resp) => resp.ttl() <= 0,
            Err(_) => continue,
        };
        if expired {
            let _ = replace_lease(&client, &prefix, ttl, &lease, id).await;
        }
    }
}

/// Publishes every history entry written under `prefix` from `revision` on,
/// re-watching from the last revision seen when the watch breaks or the
/// store's client is replaced.
async fn feed(
    mut clients: tokio::sync::watch::Receiver<Client>,
    prefix: String,
    mut revision: i64,
    publisher: Arc<Publisher>,
    codec: Arc<OnceLock<Codec>>,
) {
    loop {
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(revision);
        let mut watch = (clients.borrow_and_update())
            .watch_client()
            .max_decoding_message_size(MAX_ANSWER);
        match watch.watch(prefix.clone(), Some(options)).await {
            Ok(mut stream) => {
                loop {
                    let resp = tokio::select! {
                        message = stream.message() => match message {
                            Ok(Some(resp)) => resp,
                            _ => break,
                        },
                        // Watched again, on the new client, from `revision`.
                        () = replaced(&mut clients) => break,
                    };
                    // The revision to resume from was compacted away. If
                    // nothing under the prefix was written from there to the
                    // compaction, no event was lost (etcd moved on with
                    // others' writes); otherwise the events between are gone:
                    // say so. Either way go on from what etcd kept.
                    if resp.canceled() && resp.compact_revision() > 0 {
                        let (compacted, client) =
                            (resp.compact_revision(), clients.borrow().clone());
                        match written_between(&client, &prefix, revision, compacted).await {
                            Ok(false) => tracing::debug!(
                                from = revision,
                                to = compacted,
                                "etcd compacted the watch's revisions; nothing under the prefix was written in between"
                            ),
                            // Written in between, or not known to be
                            // unwritten: the watchers cannot be told nothing
                            // was lost.
                            written => {
                                tracing::warn!(
                                    from = revision,
                                    to = compacted,
                                    unread = written.err().map(|e| e.to_string()),
                                    "etcd compacted the watch's revisions; watchers told of the gap"
                                );
                                publisher.gap();
                            }
                        }
                        revision = compacted;
                        break;
                    }
                    for event in resp.events() {
                        let Some(kv) = event.kv() else { continue };
                        revision = revision.max(kv.mod_revision() + 1);
                        // Nothing to decode for nobody: the revision above is
                        // all a later watcher needs.
                        if event.event_type() != EventType::Put || !publisher.is_watched() {
                            continue;
                        }
                        let Some(id) = kv
                            .key_str()
                            .ok()
                            .and_then(|k| k.strip_prefix(&prefix))
                            .and_then(|k| k.split_once('/'))
                            .map(|(id, _)| unescape(id))
                        else {
                            continue;
                        };
                        // Nobody watches before a runtime is built over the store.
                        let Some(codec) = codec.get() else { continue };
                        let entry = serde_json::from_slice::<StoredEntry>(kv.value())
                            .map_err(|e| e.to_string())
                            .and_then(|e| codec.decode_entry(e).map_err(|e| e.to_string()));
                        match entry {
                            Ok(entry) => publisher.publish(|| Event {
                                id,
                                entry,
                                position: u64::try_from(kv.mod_revision()).ok(),
                            }),
                            Err(e) => tracing::warn!(key = ?kv.key_str(), "not an fsm entry: {e}"),
                        }
                    }
                }
                tracing::debug!("etcd watch ended; watching again from {revision}");
            }
            Err(e) => tracing::debug!("etcd watch failed: {e}; retrying"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether a key under `prefix` was written (put) from revision `from` to
/// `compacted`, etcd's compacted revision: read as the prefix was at
/// `compacted` (what compaction keeps), the keys whose last write by then
/// was at `from` or after. Every history entry is written with its object's
/// `obj/` key, which no write deletes, so an entry written in between leaves
/// such a key. (Other keys of the prefix, a session's for one, count too: a
/// gap told where none was, never the other way round.)
async fn written_between(
    client: &Client,
    prefix: &str,
    from: i64,
    compacted: i64,
) -> Result<bool, etcd_client::Error> {
    let between = GetOptions::new()
        .with_prefix()
        .with_keys_only()
        .with_revision(compacted)
        .with_min_mod_revision(from)
        .with_limit(1);
    let resp = client.kv_client().get(prefix, Some(between)).await?;
    Ok(!resp.kvs().is_empty())
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
