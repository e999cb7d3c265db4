//! `fsm serve`: any spec as a REST service, on memory or etcd, with a live web page,
//! so that controllers in any language get the table's checks, ownership, fencing
//! and healing.
//!
//! ```text
//! fsm serve specs/sabakan/machine.toml --listen 127.0.0.1:8080 --tokens tokens.toml
//! fsm serve specs/ovc/*.toml --tokens tokens.toml --store etcd --etcd 10.0.0.5:2379 --prefix /ovc/
//! ```
//!
//! One machine per spec, named by its `[machine] name`. The API, which
//! `/openapi.json` describes (each machine under paths of its own,
//! `/v1/vm/objects` and so on, naming only its own states and actions, with
//! links from a creation to the object's calls and from a start to its end):
//!
//! | request | answer |
//! |---|---|
//! | `POST /v1/{machine}/objects` `{"id": ...}` | 201 and the object; 409 if it exists |
//! | `GET /v1/{machine}/objects/{id}` | 200 with `ETag: "<version>"` (304 without a body when `If-None-Match` names that version, weakly too, or is `*`); an action holding it shows in `in_flight` (or `hidden`): its action, origin, actor, `fence`, deadline, whether it is abandoned or overdue, and the data its start `proposed`. 404 `not_found`; for an object that was removed (its id not used again since), with `removed`, the removal's entry, as every call on that object answers (its history, actions, data changes, removal, the end of an action) |
//! | `GET /v1/{machine}/objects?state=S` | the objects (in `S`), sorted by id; records the store holds but the service cannot read are named apart (`unreadable`: id and why), whatever `S`; and `last_event_id`, the newest write's event id when the list was read: a watch resumed after it (`Last-Event-ID`) meets every write the list may not show, so a controller lists, then watches, and misses nothing (a write the list shows may come again, at a version the list has) |
//! | `GET /v1/{machine}/objects?limit=N&after=ID` (`state` too) | a page: at most `N` objects past `ID` (from the first without it) in the store's order (by id; on etcd an id's `/` sorts as `%2F`), and `next`, the last one's id, when objects past it remain (in any state: with `state`, the page after may be empty): list again with `after` set to it. Every object that exists all along is met once however many pages it takes; the first page's `last_event_id` is where to watch from. A page is one read of the store (on etcd, a range of keys; in memory, a seek in an index of the ids that the first page makes: not every object); with `state`, the store is read a thousand records at a time until the page is full |
//! | `GET /v1/{machine}/summary` | the machine at a glance, however many objects it has: the count in each state (every state, zeros included) and the `total`, the objects an action holds (`in_flight`, each with how many requests wait for it on this service: `waiting`), how many are past their deadline (`stuck`), records the store holds but cannot read (`unreadable`, counted nowhere else), how many requests wait on this service for the machine's objects (`waiting`), and `last_event_id`, as a list's; what the page shows, watching from there |
//! | `POST /v1/{machine}/objects/{id}/actions/{action}` | 201, the object in its transition state and the `fence` token; `?run=true` starts and completes, 200; `If-Match: "<version>"` (or `*`) makes it conditional (412; an empty `If-Match` names no version, 412 too); a start whose client leaves before its answer is recorded abandoned, and the healer's next pass frees the object; `?wait=SECONDS` waits while another action holds the object (409 `busy` otherwise, at once): the requests waiting for an object (starts, data changes, removals) take turns in the order they came, each trying again at the object's writes (whichever service of the store made them; at least once a second), until it is done, is refused otherwise (the rule from the state the object reached, say), or its time is up (409 `busy`); at most [`Config::max_wait`] (400 past it), [`Config::max_waiting`] requests waiting at once (503 `too_many_waiting` past them) |
//! | `POST /v1/{machine}/objects/{id}/in-flight/{fence}/complete` (or `/fail`) | 200 and the object; by the actor who started it (403 `not_holder`), on any service of the store (the action is taken up by its fence when this one holds no handle of it: started by another process, or before a restart; the data its start proposed is kept with the hold, and written); 404 `not_in_flight` for a fence that never held the object, 409 `revoked` once its hold has ended |
//! | `PATCH /v1/{machine}/objects/{id}/data?action=A` (a JSON merge patch) | 200 and the object, its data changed by action `A`; `?wait=SECONDS` as a start's |
//! | `DELETE /v1/{machine}/objects/{id}` | 200 and the removal's history entry (`kind` `Removed`), the object's record and history gone from the store; only in a state whose spec says `remove`, by an actor with a role it names (403), when no action holds it (409 `busy`); `If-Match` as a start's (412). Watchers get the entry as the object's last `write`; the id is then free for a new object, whose versions go on after the removal's (so no `If-Match` of the old object matches it); `?wait=SECONDS` as a start's |
//! | `GET /v1/{machine}/objects/{id}/history` | the entries, oldest first; `?limit=N&after=V` a page: at most `N` entries past version `V`, and `next`, the last one's version, when entries past it remain (one read of the store: on etcd, a range of keys) |
//! | `GET /v1/{machine}/watch` | Server-Sent Events, one `write` per write, resumable with `Last-Event-ID`; a `gap` when writes were missed, or when the id is not one the store could have given. On etcd an event's id is its write's revision, the same on every service of the store, so a stream resumes on any of them; in memory each service numbers its events from its start time, in microseconds since the epoch, past an earlier one's (a restart's id gets a `gap`) |
//! | `GET /v1/watch` | every machine's writes in one stream (a client that follows several machines holds one connection: a browser gives a host six over HTTP/1.1), or with `?machine=door&machine=vm` those machines' only (404 `unknown_machine` for one the service does not have), each event's data the machine's stream's with `machine`; a `write`'s id names each machine's last event id so far (`door=41&vm=7`, names percent-encoded), and resumes the whole stream as `Last-Event-ID` (a machine not named starts from the stream's opening; one the service does not have is passed over); a `gap` names its machine. The web page follows every machine by it |
//! | `GET /healthz`, `GET /readyz` (no token) | probes: `/healthz` 200 while the process serves (it does not ask the stores); `/readyz` 200 when every machine's store answers a read, else 503 `unavailable` with `down`, each such machine and why |
//! | `GET /metrics`, `GET /openapi.json`, `GET /` | Prometheus text (per machine: `fsm_store_up`, then, while its store answers, objects per state, stuck and unreadable; requests waiting for a busy object (`fsm_requests_waiting`); actions started, completed, failed, healed, abandoned, revoked; objects removed; conflicts), OpenAPI 3, the web page (no token) |
//!
//! Every `/v1` call needs `Authorization: Bearer <token>` (401 otherwise); errors are
//! JSON, `{"error": kind, "message": ..., ...facts}`: 400 malformed (a body,
//! with its mistake's `line` and `column`; a query parameter, a path segment or
//! a header (`Last-Event-ID`, `If-Match`) that does not parse, or a query
//! parameter given twice, named in `parameter` as the OpenAPI document names
//! it; a query parameter or body field the call does not take, so that a
//! misspelt `?rn=true` is refused rather than starting and holding), 403
//! missing role or not the owner, 404 unknown machine, object or action, 405 a method the path does not take (with `Allow`), 409 busy, conflict
//! or revoked, 412 If-Match, 413 too large (a body past the limit, or data past
//! what the store takes: etcd's 1.5 MiB a request), 422 no rule from this state, a guard
//! refused, or the state allows no removal (`not_removable`, with the states that
//! do in `removable_in`), 503 the store is unavailable, or too many watch
//! streams or waiting requests (with `Retry-After: 1`).
//!
//! Objects carry JSON data: given when created, shown in every answer, and changed
//! only by an action, so that every change passes the table's rules:
//! `PATCH /v1/{machine}/objects/{id}/data?action=A` applies a JSON merge patch
//! (RFC 7396) with action `A` (its roles, its states, its guards; conditional on
//! `If-Match` too). Guards the spec writes in CEL (`cel = "..."`) are evaluated
//! over the object and its data, and for a patch over the data it would leave
//! (`proposed.data`): the spec's rules on changes of data. The patch is merged
//! into one version's data and started at that version, so the guards judge
//! what is written; a guard with no expression is code the service
//! does not have, so an action it protects is refused (422, the guard named)
//! rather than let through.
//!
//! Every object's history is kept whole unless `--keep-history N` keeps only
//! its newest N entries: in memory the oldest is overwritten; on etcd each
//! write deletes the older entries in its own transaction (compact etcd, or run
//! it with `--auto-compaction-retention`, so that their space is freed). A
//! record past what etcd takes in one request (1.5 MiB by default: the data,
//! and at a start the data it proposes beside it) is refused 413 `too_large`.
//! A removed object's id and removal (its 404s' `removed`) are kept until the
//! id is created again, unless `--forget-removals-after SECONDS` forgets them
//! once that old (within a quarter of that time more), where ids are seldom used twice
//! (the id's next object is still numbered past every version forgotten; on
//! etcd, every process on the prefix must then be of this version or later).
//!
//! # Security
//!
//! It listens on loopback unless told otherwise (`--listen`). Off loopback,
//! give it a certificate (`--tls-cert`, `--tls-key`; [`ServeTls`],
//! [`serve_tls`]): it then answers over HTTPS only, so that tokens never cross
//! the network in clear text (in HTTP/2 for a client that offers it, as
//! browsers do: their streams then share one connection; HTTP/1.1 for
//! others; without a certificate, HTTP/2 is spoken to a client that starts
//! in it, by prior knowledge), and a client that does not finish its TLS
//! handshake within 10 seconds is dropped, holding up no other. On SIGHUP it
//! reads the tokens file and the certificate again ([`Service::replace_tokens`],
//! [`ServeTls::reload`]), and the etcd TLS and password files, reconnecting to etcd with
//! them ([`Service::reconnect`]): tokens and certificates are renewed without a
//! restart, which would leave every action held over the API to the healer.
//! Files that do not read are refused, saying why, and the ones in use stay.
//! SIGINT or SIGTERM stops the binary cleanly ([`serve`]'s `shutdown`). Tokens come from a
//! file only its owner may read (refused at start otherwise), are compared in
//! constant time and never logged; every refusal is logged with the actor and the
//! rule. Request bodies (`--body-limit`) and watch streams (`--max-watchers`) are
//! bounded. No CORS unless origins are given (`--cors-origin`), and then only
//! those. An etcd that checks who connects is reached over TLS
//! (`--etcd-cacert`, and `--etcd-cert` with `--etcd-key` for its
//! `--client-cert-auth`) and as an etcd user (`--etcd-user`, its password
//! from the environment variable `FSM_ETCD_PASSWORD` or the file
//! `--etcd-password-file` names, never from the command line nor in the
//! log): [`StoreKind::Etcd`]'s [`EtcdAccess`]. A file
//! that is not what its flag says (no PEM certificate, no PEM private key)
//! stops it at start, naming the flag and the file, before it connects.

mod api;
mod census;
mod feed;
mod flights;
mod https;
mod json;
mod metrics;
mod openapi;
mod page;
mod tokens;
mod turns;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use fsm_core::Machine;
use fsm_runtime::{Healer, MemoryStore, PeriodicHealer, Runtime};

pub use api::router;
pub use flights::Flight;
pub use fsm_etcd::{
    AnyStore, EtcdAccess, EtcdFlagError, EtcdFlags, EtcdTls, EtcdTlsError, EtcdTlsFileError,
    EtcdUser,
};
pub use https::{ServeTls, TlsError};
pub use json::{entry_json, object_json};
pub use tokens::{MIN_TOKEN_LEN, Tokens};

/// Where a service keeps its objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreKind {
    /// In the service's memory (the default): lost when it stops.
    Memory,
    /// On etcd, each machine under `<prefix><machine>/`.
    Etcd {
        /// How to reach etcd: its members' `host:port`, and the user and TLS
        /// an etcd that checks who connects asks for.
        access: EtcdAccess,
        /// The key prefix.
        prefix: String,
    },
}

/// What a service is started with.
#[derive(Debug, Clone)]
pub struct Config {
    /// The spec files, one machine each.
    pub specs: Vec<PathBuf>,
    /// Where to listen (loopback unless told otherwise).
    pub listen: SocketAddr,
    /// Where the objects live.
    pub store: StoreKind,
    /// The largest request body accepted, in bytes.
    pub body_limit: usize,
    /// How many watch streams may be open at once.
    pub max_watchers: usize,
    /// How often the healer looks for abandoned or overdue actions.
    pub heal_every: Duration,
    /// The hard deadline of actions whose spec gives none (none by default: only
    /// abandoned holds and the spec's deadlines are healed).
    pub deadline: Option<Duration>,
    /// Web origins whose pages may call the API (CORS); none by default.
    pub cors_origins: Vec<String>,
    /// How many entries of each object's history to keep, the newest (at least
    /// one); every entry by default.
    pub keep_history: Option<usize>,
    /// How long a removed object's id and removal are kept (the `removed` of
    /// its 404s) before the healer's passes forget them (at most a quarter of
    /// that time later: a pass that forgets reads every removal kept)
    /// ([`MemoryStore::forget_removals`],
    /// [`EtcdStore::forget_removals`](fsm_etcd::EtcdStore::forget_removals):
    /// on etcd, once every process on the prefix is of this version or
    /// later); kept for ever by default.
    pub forget_removals_after: Option<Duration>,
    /// The longest a start, a data change or a removal may wait for a busy
    /// object (`?wait=SECONDS`; a longer wait is refused, 400); 30 s by
    /// default.
    pub max_wait: Duration,
    /// How many requests may wait for busy objects at once, over every
    /// machine (one more asking to wait is refused, 503 `too_many_waiting`);
    /// 1024 by default.
    pub max_waiting: usize,
}

impl Config {
    /// Defaults: memory, loopback port 8080, 64 KiB bodies, 64 watchers, a heal
    /// pass every 5 s, requests waiting for a busy object 30 s at most, 1024
    /// of them at once.
    pub fn new(specs: Vec<PathBuf>) -> Config {
        Config {
            specs,
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            store: StoreKind::Memory,
            body_limit: 64 * 1024,
            max_watchers: 64,
            heal_every: Duration::from_secs(5),
            deadline: None,
            cors_origins: Vec::new(),
            keep_history: None,
            forget_removals_after: None,
            max_wait: Duration::from_secs(30),
            max_waiting: 1024,
        }
    }
}

/// When the healer's passes forget removals: forgetting reads every removal
/// the store keeps (on etcd, every `gone/` key), so a pass forgets at most
/// once a quarter of the time removals are kept, not at every heal pass.
#[derive(Debug, Default)]
struct Forgetting {
    last: std::sync::Mutex<Option<std::time::Instant>>,
}

impl Forgetting {
    /// Whether a pass at `now` forgets removals kept `after`, counting it as
    /// done if so.
    fn due(&self, after: Duration, now: std::time::Instant) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let due = last.is_none_or(|at| now.saturating_duration_since(at) >= after / 4);
        if due {
            *last = Some(now);
        }
        due
    }
}

/// One machine of a service.
pub struct MachineService {
    runtime: Runtime<AnyStore>,
    feed: Arc<feed::Feed>,
    svg: String,
}

/// A running service's state.
pub struct Service {
    machines: BTreeMap<String, Arc<MachineService>>,
    /// Replaced whole on a reload ([`Service::replace_tokens`]).
    tokens: std::sync::RwLock<Tokens>,
    flights: Arc<flights::Flights>,
    watchers: Arc<tokio::sync::Semaphore>,
    max_watchers: usize,
    body_limit: usize,
    max_wait: Duration,
    /// A place for each request that may wait for a busy object.
    waiting: Arc<tokio::sync::Semaphore>,
    max_waiting: usize,
    cors_origins: Vec<String>,
    healers: std::sync::Mutex<Vec<PeriodicHealer>>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("machines", &self.machines.keys().collect::<Vec<_>>())
            .field("tokens", &*self.tokens())
            .finish_non_exhaustive()
    }
}

impl Service {
    /// Opens every spec on its store and starts its feed (on `tokio`) and its
    /// healer. Blocking (it connects to etcd): call it outside async code, or in
    /// `spawn_blocking`. An etcd prefix must end with `/` (or be empty), and
    /// is refused before anything connects otherwise. Each role a token holds
    /// that no spec declares is
    /// warned of through `tracing` ([`Tokens::undeclared_roles`]): it grants
    /// nothing here, and is most often a typo.
    pub fn open(
        config: &Config,
        tokens: Tokens,
        tokio: &tokio::runtime::Handle,
    ) -> Result<Arc<Service>, String> {
        // Without its `/`, the prefix `/ovc` puts the machine `vm` under `/ovcvm/`.
        if let StoreKind::Etcd { prefix, .. } = &config.store
            && !prefix.is_empty()
            && !prefix.ends_with('/')
        {
            return Err(format!(
                "the etcd prefix `{prefix}` (`--prefix`) must end with `/`: each machine lives under \
                 <prefix><machine>/ (`{prefix}/`?)"
            ));
        }
        let mut machines = BTreeMap::new();
        let mut healers = Vec::new();
        let flights = Arc::new(flights::Flights::default());
        for path in &config.specs {
            let machine: Machine = fsm_core::spec::load(path).map_err(|e| e.to_string())?;
            let name = machine.name().to_owned();
            if machines.contains_key(&name) {
                return Err(format!(
                    "{}: a second machine named `{name}`: each spec must name its own",
                    path.display()
                ));
            }
            let store = match &config.store {
                StoreKind::Memory => {
                    let store = MemoryStore::new();
                    AnyStore::Memory(Box::new(match config.keep_history {
                        Some(entries) => store.keep_history(entries),
                        None => store,
                    }))
                }
                StoreKind::Etcd { access, prefix } => {
                    let mut store = access.store(&format!("{prefix}{name}/"));
                    if let Some(entries) = config.keep_history {
                        store = store.keep_history(entries);
                    }
                    AnyStore::Etcd(
                        store
                            .connect()
                            .map_err(|e| format!("machine `{name}`: {e}"))?,
                    )
                }
            };
            let mut builder = Runtime::builder(machine.clone(), store);
            // Guards written in CEL are evaluated by the runtime; the others are
            // code the service does not have, and refuse.
            for guard in machine.guards().iter().filter(|g| g.cel.is_none()) {
                tracing::warn!(
                    machine = %name,
                    guard = %guard.name,
                    "the service cannot evaluate guard `{}`: the actions it guards are refused",
                    guard.name
                );
                builder = builder.guard(guard.name.to_string(), |_| false);
            }
            let runtime = builder
                .build()
                .map_err(|e| format!("machine `{name}`: {e}"))?;
            let feed = {
                let _entered = tokio.enter();
                feed::Feed::start(&name, &runtime, flights.clone())?
            };
            let mut healer = Healer::new();
            if let Some(deadline) = config.deadline {
                healer = healer.deadline(deadline);
            }
            let logged = name.clone();
            let (forgets, forget_after) = (runtime.clone(), config.forget_removals_after);
            let forgetting = Forgetting::default();
            healers.push(healer.spawn(runtime.clone(), config.heal_every, move |report| {
                match report {
                    Ok(report) => {
                        for healed in &report.healed {
                            tracing::warn!(machine = %logged, object = %healed.id, action = %healed.action, restored = %healed.restored, "healed");
                        }
                    }
                    Err(e) => tracing::warn!(machine = %logged, "the healer failed: {e}"),
                }
                if let Some(after) = forget_after
                    && forgetting.due(after, std::time::Instant::now())
                {
                    let before = forgets.now().checked_sub(after).unwrap_or(UNIX_EPOCH);
                    match forgets.store().forget_removals(before) {
                        Ok(0) => {}
                        Ok(forgotten) => tracing::debug!(machine = %logged, forgotten, "removals forgotten"),
                        Err(e) => tracing::warn!(machine = %logged, "forgetting removals failed: {e}"),
                    }
                }
            }));
            let svg = fsm_render::svg(runtime.machine(), fsm_render::View::Folded);
            machines.insert(name, Arc::new(MachineService { runtime, feed, svg }));
        }
        if machines.is_empty() {
            return Err("no spec given: a service needs at least one machine".into());
        }
        warn_undeclared_roles(&machines, &tokens);
        Ok(Arc::new(Service {
            machines,
            tokens: std::sync::RwLock::new(tokens),
            flights,
            watchers: Arc::new(tokio::sync::Semaphore::new(config.max_watchers)),
            max_watchers: config.max_watchers,
            body_limit: config.body_limit,
            max_wait: config.max_wait,
            waiting: Arc::new(tokio::sync::Semaphore::new(config.max_waiting)),
            max_waiting: config.max_waiting,
            cors_origins: config.cors_origins.clone(),
            healers: std::sync::Mutex::new(healers),
        }))
    }

    /// The machines served, by name.
    pub fn machines(&self) -> impl Iterator<Item = &str> {
        self.machines.keys().map(String::as_str)
    }

    /// The runtime of machine `name`: what the API reads and writes, for an
    /// embedding program (or a test) to use directly.
    pub fn runtime(&self, name: &str) -> Option<&Runtime<AnyStore>> {
        self.machines.get(name).map(|m| &m.runtime)
    }

    /// The tokens accepted now.
    fn tokens(&self) -> std::sync::RwLockReadGuard<'_, Tokens> {
        self.tokens.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Accepts `tokens` from now on, in place of those before (`fsm serve`
    /// reads its tokens file again on SIGHUP): a token no longer in them is
    /// refused at its next request (401), and actions started with it stay
    /// theirs, to complete or fail by the actor's new token. A role no served
    /// machine declares is warned of, as at [`open`](Self::open).
    pub fn replace_tokens(&self, tokens: Tokens) {
        warn_undeclared_roles(&self.machines, &tokens);
        *self.tokens.write().unwrap_or_else(|e| e.into_inner()) = tokens;
    }

    /// Connects each machine's etcd store again, as `access` says
    /// ([`EtcdStore::reconnect`](fsm_etcd::EtcdStore::reconnect)): renewed TLS
    /// files, while the service runs (`fsm serve` reads its `--etcd-cacert`,
    /// `--etcd-cert`, `--etcd-key` and `--etcd-password-file` again on
    /// SIGHUP). Each store is tried: one whose new connection is refused stays
    /// on the one it had, and the error names each such machine. How many
    /// stores reconnected (none on the memory store). Blocking: call it
    /// outside async code, or in `spawn_blocking`.
    pub fn reconnect(&self, access: &EtcdAccess) -> Result<usize, String> {
        let (mut reconnected, mut refused) = (0, Vec::new());
        for (name, machine) in &self.machines {
            if let AnyStore::Etcd(store) = machine.runtime.store() {
                match store.reconnect(access) {
                    Ok(()) => reconnected += 1,
                    Err(e) => refused.push(format!("machine `{name}`: {e}")),
                }
            }
        }
        match refused.is_empty() {
            true => Ok(reconnected),
            false => Err(refused.join("; ")),
        }
    }

    /// Stops the healers and drops the actions still in flight over the API
    /// (they read as abandoned, for the healer of the next run or of another
    /// process).
    pub fn close(&self) {
        for healer in self
            .healers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            healer.stop();
        }
        let flights = std::mem::take(&mut self.flights.lock().handles);
        drop(flights);
    }
}

/// Serves `service` on `listener` until `shutdown` resolves, then finishes the
/// requests under way (nothing accepted is lost) and closes the service. The
/// requests waiting for a busy object (`?wait`) are answered at once then, as
/// their object is (409 `busy`), rather than hold the stop up.
pub async fn serve(
    service: Arc<Service>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_on(service, listener, shutdown).await
}

/// [`serve`] over HTTPS only, with `tls`'s certificate: a client that does
/// not complete its TLS handshake within 10 seconds is dropped, and holds up
/// no other client meanwhile.
pub async fn serve_tls(
    service: Arc<Service>,
    listener: tokio::net::TcpListener,
    tls: &ServeTls,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_on(service, https::TlsListener::new(listener, tls)?, shutdown).await
}

async fn serve_on<L>(
    service: Arc<Service>,
    listener: L,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()>
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    let app = router(service.clone());
    // Once told to stop, no request waits for a busy object any more: the
    // requests under way are finished, and those would hold the stop up.
    let stopping = service.clone();
    let shutdown = async move {
        shutdown.await;
        for machine in stopping.machines.values() {
            machine.feed.turns.close();
        }
    };
    let result = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await;
    let closing = service.clone();
    let _ = tokio::task::spawn_blocking(move || closing.close()).await;
    result
}

/// Warns of each role a token holds that no machine served declares
/// ([`Tokens::undeclared_roles`]): the service starts, or takes the tokens,
/// all the same (a tokens file may be shared by services of other machines).
fn warn_undeclared_roles(machines: &BTreeMap<String, Arc<MachineService>>, tokens: &Tokens) {
    let served = machines.values().map(|m| m.runtime.machine());
    for line in tokens.undeclared_roles(served) {
        tracing::warn!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::Forgetting;

    /// The first pass forgets; then a pass forgets only once a quarter of the
    /// time removals are kept has gone by since the last that did; with no
    /// time to keep them, every pass forgets.
    #[test]
    fn removals_are_forgotten_a_quarter_of_their_time_apart() {
        let forgetting = Forgetting::default();
        let hour = Duration::from_secs(3600);
        let start = Instant::now();
        let at = |minutes: u64| start + Duration::from_secs(60 * minutes);
        let passes: Vec<bool> = [0, 5, 14, 15, 20, 29, 30]
            .into_iter()
            .map(|m| forgetting.due(hour, at(m)))
            .collect();
        assert_eq!(passes, [true, false, false, true, false, false, true]);
        let every = Forgetting::default();
        assert!((0..3).all(|m| every.due(Duration::ZERO, at(m))));
    }
}
