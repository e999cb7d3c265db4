//! A Mizar-like control plane on the fsm runtime (`mizar-object-workflows.md`).
//!
//! Seven kinds of object (droplets, VPCs, dividers, networks, bouncers, endpoints,
//! scaled endpoints),
//! each a machine of `specs/mizar/` with its own [`Runtime`]. Seven operators run as
//! tokio tasks on the runtime's async API (`start_async`, `complete_async`); each
//! watches the runtimes of the kinds it cares about and acts on an object only
//! when the object is in a state it owns: the single-mutator rule of the
//! seed is the specs' owners and roles, enforced by the runtime, not by the
//! operators' good manners. Operators are level-triggered: an event only says which
//! object to look at, so a lost event ([`Lagged`]) costs a resync, never a stuck
//! workflow.
//!
//! What the seed keeps in the API server besides states (parents, placements,
//! addresses, which bouncer knows which divider) is the [`Topology`].
//!
//! Each delete workflow ends as the seed's do, in "the X Operator deletes the
//! X Object": the object's record leaves the store once it is Deleted, removed
//! by the operator its spec names (`remove = "..."` on `Deleted`), and a parent
//! finishes its delete only once its dividers or bouncers are gone, and starts
//! it only once its networks or endpoints are. Before it removes a record, the
//! operator copies its history into the API server's archive (as an audit log
//! would keep it), so that what the seed promises can still be checked over
//! every object that ever lived ([`Cluster::violations`], [`Cluster::lives`]).
//! Like an audit log, the archive grows with every object removed. The trace
//! ([`Cluster::trace`]) is read from those lives too, so every process that
//! opens the cluster sees every step, whichever process took it.

use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fsm::{ActionId, StateMachine};
use fsm_etcd::{AnyStore, EtcdAccess};
use fsm_runtime::wire::{Codec, UnknownName};
use fsm_runtime::{
    Actor, Clock, Entry, EntryKind, Healer, InFlight, Lagged, MemoryStore, ObjectId,
    PeriodicHealer, RuntimeError, Store, StoreError, Watcher,
};
use serde::{Deserialize, Serialize};

use crate::api::{self, ApiError, ApiServer, Archive, EtcdApi, LivesError, Removal};
use crate::support::lock;

/// The runtime of one kind of object, on memory or etcd.
pub type Runtime = fsm_runtime::Runtime<AnyStore>;
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;

use crate::machines::{
    BouncerState as B, BouncerStateAction as BA, DividerState as D, DividerStateAction as DA,
    DropletState as Dr, DropletStateAction as DrA, EndpointState as E, EndpointStateAction as EA,
    NetworkState as N, NetworkStateAction as NA, ScaledEndpointState as S,
    ScaledEndpointStateAction as SA, VpcState as V, VpcStateAction as VA,
};

/// The VPC the VPC Operator creates on start-up (the seed's second trigger of the
/// VPC create workflow), in a cluster made [`Cluster::with_defaults`].
pub const DEFAULT_VPC: &str = "vpc-default";
/// The network the Network Operator creates in the default VPC.
pub const DEFAULT_NETWORK: &str = "vpc-default/net-default";

/// The kinds of Mizar object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Kind {
    /// A node able to host dividers and bouncers.
    Droplet,
    /// A virtual private cloud.
    Vpc,
    /// A VPC's divider.
    Divider,
    /// A network of a VPC.
    Network,
    /// A network's bouncer.
    Bouncer,
    /// A pod's endpoint in a network.
    Endpoint,
    /// A service's endpoint in a network, with endpoints as its backends.
    ScaledEndpoint,
}

impl Kind {
    /// Its machine's name, as its spec spells it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Droplet => "droplet",
            Kind::Vpc => "vpc",
            Kind::Divider => "divider",
            Kind::Network => "network",
            Kind::Bouncer => "bouncer",
            Kind::Endpoint => "endpoint",
            Kind::ScaledEndpoint => "scaled_endpoint",
        }
    }

    /// Every kind.
    pub const ALL: [Kind; 7] = [
        Kind::Droplet,
        Kind::Vpc,
        Kind::Divider,
        Kind::Network,
        Kind::Bouncer,
        Kind::Endpoint,
        Kind::ScaledEndpoint,
    ];
}

/// The operators (and the CNI service) of the seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    /// Provisions VPCs, creates their dividers, deletes them.
    Vpc,
    /// Provisions networks, creates their bouncers, allocates endpoints.
    Network,
    /// Provisions droplets and places dividers and bouncers on them.
    Droplet,
    /// Keeps dividers and bouncers informed of each other.
    Divider,
    /// Provisions dividers and endpoints; deletes bouncers.
    Bouncer,
    /// Keeps endpoints and bouncers informed of each other.
    Endpoint,
    /// Creates droplets, writes endpoint files, deletes endpoints of deleted pods.
    Cni,
}

impl Operator {
    /// Every operator.
    pub const ALL: [Operator; 7] = [
        Operator::Vpc,
        Operator::Network,
        Operator::Droplet,
        Operator::Divider,
        Operator::Bouncer,
        Operator::Endpoint,
        Operator::Cni,
    ];

    /// Its role in the specs, which is also its actor's name.
    pub fn role(self) -> &'static str {
        match self {
            Operator::Vpc => "vpc-operator",
            Operator::Network => "network-operator",
            Operator::Droplet => "droplet-operator",
            Operator::Divider => "divider-operator",
            Operator::Bouncer => "bouncer-operator",
            Operator::Endpoint => "endpoint-operator",
            Operator::Cni => "cni-service",
        }
    }

    /// The operator whose role is `role`.
    pub fn from_role(role: &str) -> Option<Operator> {
        Operator::ALL.into_iter().find(|o| o.role() == role)
    }

    /// Its actor.
    pub fn actor(self) -> Actor {
        Actor::new(self.role()).with_role(self.role())
    }

    fn watches(self) -> &'static [Kind] {
        match self {
            Operator::Vpc => &[Kind::Vpc, Kind::Divider, Kind::Network],
            Operator::Network => &[
                Kind::Vpc,
                Kind::Network,
                Kind::Bouncer,
                Kind::Endpoint,
                Kind::ScaledEndpoint,
            ],
            Operator::Droplet => &[Kind::Droplet, Kind::Divider, Kind::Bouncer],
            Operator::Divider => &[Kind::Vpc, Kind::Divider, Kind::Bouncer],
            Operator::Bouncer => &[
                Kind::Divider,
                Kind::Network,
                Kind::Bouncer,
                Kind::Endpoint,
                Kind::ScaledEndpoint,
            ],
            Operator::Endpoint => &[Kind::Bouncer, Kind::Endpoint, Kind::ScaledEndpoint],
            Operator::Cni => &[Kind::Endpoint],
        }
    }
}

/// Why the cluster refused a user's request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MizarError {
    /// The runtime refused (see its message).
    #[error(transparent)]
    Refused(#[from] RuntimeError),
    /// A store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The topology in etcd could not be reached.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The parent object does not exist.
    #[error("{kind:?} {id} does not exist")]
    NoParent {
        /// The parent's kind.
        kind: Kind,
        /// The parent.
        id: ObjectId,
    },
    /// The parent is being deleted: no new children.
    #[error("{id} is being deleted: it takes no new children")]
    ParentDeleting {
        /// The parent.
        id: ObjectId,
    },
    /// The archive holds a life written by a spec that named a state or an
    /// action this one does not have.
    #[error("the archive of {kind:?} {id}: {source}")]
    Archive {
        /// The object's kind.
        kind: Kind,
        /// The object.
        id: ObjectId,
        /// The name the spec does not have.
        source: UnknownName,
    },
}

/// What the API server holds about an object besides its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Object {
    /// Its kind.
    pub kind: Kind,
    /// The VPC of a network or divider; the network of a bouncer, endpoint or
    /// scaled endpoint.
    pub parent: Option<ObjectId>,
    /// A VPC's networks; a network's endpoints and scaled endpoints.
    pub children: BTreeSet<ObjectId>,
    /// A VPC's dividers; a network's bouncers.
    pub parts: BTreeSet<ObjectId>,
    /// The objects it was updated with: a divider's bouncers, a bouncer's dividers
    /// and (scaled) endpoints, a (scaled) endpoint's bouncers.
    pub peers: BTreeSet<ObjectId>,
    /// A scaled endpoint's backends, as the user last set them.
    pub backends: BTreeSet<ObjectId>,
    /// The backends the Endpoint Operator has taken in (update workflow, steps
    /// 1-2).
    pub backends_seen: Option<BTreeSet<ObjectId>>,
    /// The backends the Bouncer Operator has told the bouncers about (steps 4-5).
    pub backends_told: Option<BTreeSet<ObjectId>>,
    /// The droplet a divider or bouncer was placed on.
    pub droplet: Option<ObjectId>,
    /// An endpoint's address.
    pub ip: Option<Ipv4Addr>,
    /// The user asked for its deletion.
    pub delete_requested: bool,
}

impl Object {
    fn new(kind: Kind, parent: Option<ObjectId>) -> Self {
        Object {
            kind,
            parent,
            children: BTreeSet::new(),
            parts: BTreeSet::new(),
            peers: BTreeSet::new(),
            backends: BTreeSet::new(),
            backends_seen: None,
            backends_told: None,
            droplet: None,
            ip: None,
            delete_requested: false,
        }
    }
}

/// The API server's data beyond states, by object id.
pub type Topology = HashMap<ObjectId, Object>;

/// One line of the cluster's trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// When (the cluster's clock: every runtime's entries share it).
    pub tick: u64,
    /// Who acted: an operator's role, or `user`.
    pub who: String,
    /// What happened.
    pub what: String,
}

/// A clock shared by all the cluster's runtimes that never returns the same time
/// twice: entries of different objects order as they happened. In one process it
/// counts from 1; operators in several processes read the wall clock (in
/// microseconds, still strictly increasing in each process), which orders their
/// entries as long as they share a host's clock.
#[derive(Debug, Clone, Default)]
pub struct Ticks {
    last: Arc<AtomicU64>,
    wall: bool,
}

impl Ticks {
    fn wall() -> Self {
        Ticks {
            last: Arc::default(),
            wall: true,
        }
    }

    fn tick(&self) -> u64 {
        if !self.wall {
            return self.last.fetch_add(1, Ordering::SeqCst) + 1;
        }
        crate::support::unique_micros(&self.last)
    }
}

/// A time of the cluster's clock, as a tick count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tick(pub u64);

impl From<SystemTime> for Tick {
    fn from(at: SystemTime) -> Self {
        Tick(
            at.duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64),
        )
    }
}

impl Clock for Ticks {
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_micros(self.tick())
    }
}

/// Something for an operator to look at.
#[derive(Debug)]
enum Wake {
    /// This object changed (or a user asked something of it).
    Object(Kind, ObjectId),
    /// Events were lost: look at everything.
    Resync,
}

struct Inner {
    runtimes: Vec<Runtime>,
    topology: Arc<ApiServer<Object>>,
    /// The lives of removed objects, by `<kind>/<id>` ([`archive_key`]).
    archive: Archive,
    /// Each kind's codec, for the archive (in `Kind` order).
    codecs: Vec<Codec>,
    ticks: Ticks,
    trace: Mutex<Vec<Line>>,
    /// Errors no workflow expects; a test asserts there are none.
    errors: Mutex<Vec<String>>,
    /// Each running operator's inbox, for users' requests.
    inboxes: Mutex<Vec<(Operator, mpsc::UnboundedSender<Wake>)>>,
    /// How many times an operator's watcher lagged and it resynced.
    lags: AtomicU32,
    user: Actor,
    /// Told after every line of the trace.
    changed: Notify,
    /// The operators create the default VPC and network on start-up.
    defaults: bool,
}

/// The control plane: runtimes, topology, trace. Cloning it is cheap.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

impl Default for Cluster {
    fn default() -> Self {
        Self::new()
    }
}

/// How often [`Cluster::wait_until`] looks again on etcd.
pub const POLL: Duration = Duration::from_millis(50);

/// How often an operator on etcd looks at every object again.
pub const RESYNC: Duration = Duration::from_millis(500);

/// How many events a watcher buffers by default.
const WATCH_CAPACITY: usize = 1024;

/// Whether every id in `ids` is in `state`, read from `rt` (an empty set is not).
fn all_in<M: StateMachine + PartialEq>(rt: &Runtime, ids: &BTreeSet<ObjectId>, state: M) -> bool {
    !ids.is_empty()
        && ids
            .iter()
            .all(|id| rt.state_as::<M>(id.clone()).ok() == Some(state))
}

/// Whether no id in `ids` is left: each one's record was removed (its delete
/// workflow ran to its end), or never made.
fn none_left(rt: &Runtime, ids: &BTreeSet<ObjectId>) -> bool {
    ids.iter()
        .all(|id| matches!(rt.get(id.clone()), Err(RuntimeError::NotFound { .. })))
}

impl Cluster {
    /// An empty cluster with no operator running.
    pub fn new() -> Self {
        Self::with_watch_capacity(WATCH_CAPACITY)
    }

    /// An empty cluster whose watchers buffer `capacity` events each: a small one
    /// makes operators lag and resync.
    pub fn with_watch_capacity(capacity: usize) -> Self {
        let store = |_: Kind| {
            Ok(AnyStore::Memory(Box::new(
                MemoryStore::with_watch_capacity(capacity),
            )))
        };
        let api = ApiServer::Memory(Mutex::default());
        Self::build(store, api, Archive::memory(), Ticks::default(), false)
            .expect("memory stores open")
    }

    /// An empty cluster whose operators, once started, create the default VPC
    /// ([`DEFAULT_VPC`]) and its default network ([`DEFAULT_NETWORK`]), as Mizar's
    /// do: the seed's second trigger of the VPC and network create workflows.
    pub fn with_defaults() -> Self {
        let store = |_: Kind| Ok(AnyStore::Memory(Box::new(MemoryStore::new())));
        let api = ApiServer::Memory(Mutex::default());
        Self::build(store, api, Archive::memory(), Ticks::default(), true)
            .expect("memory stores open")
    }

    /// The cluster on `etcd`, under `prefix`: each kind's objects
    /// under `<prefix><kind>/`, the topology under `<prefix>topology/`. Every
    /// process opened on the same prefix shares it; a process runs the
    /// operators it starts ([`Cluster::start_operators`]). An action in flight
    /// of a process that dies is abandoned once its lease of `lease` expires,
    /// and a healer rolls it back (see [`Cluster::spawn_healers`]). Blocks while
    /// it connects: from async code, call it through `spawn_blocking`.
    pub fn on_etcd(
        etcd: &EtcdAccess,
        prefix: &str,
        lease: Duration,
        defaults: bool,
    ) -> Result<Self, MizarError> {
        let store = |kind: Kind| {
            let prefix = format!("{prefix}{}/", kind.name());
            (etcd.store(&prefix))
                .lease_ttl(lease)
                .connect()
                .map(AnyStore::Etcd)
        };
        let api = EtcdApi::connect(etcd, format!("{prefix}topology/"))?;
        let archive = Archive::on_etcd(etcd, format!("{prefix}archive/"))?;
        Self::build(
            store,
            ApiServer::Etcd(Box::new(api)),
            archive,
            Ticks::wall(),
            defaults,
        )
    }

    /// Connects every store and the topology and archive on etcd again, as
    /// `etcd` says: renewed TLS files or another user, without a restart
    /// (the chaos processes do on SIGHUP). Each connection is tried; one
    /// refused stays as it was, and the first refusal is answered. Nothing
    /// to do in memory. Blocks: from async code, call it through
    /// `spawn_blocking`.
    pub fn reconnect(&self, etcd: &EtcdAccess) -> Result<(), MizarError> {
        let inner = &self.inner;
        crate::api::reconnect_all(etcd, &inner.runtimes, &inner.topology, &inner.archive)
    }

    fn build(
        store: impl Fn(Kind) -> Result<AnyStore, StoreError>,
        api: ApiServer<Object>,
        archive: Archive,
        ticks: Ticks,
        defaults: bool,
    ) -> Result<Self, MizarError> {
        let topology = Arc::new(api);
        let plain = |machine: &fsm::Machine| -> Result<Runtime, MizarError> {
            Ok(
                Runtime::builder(machine.clone(), store(kind_of(machine.name()))?)
                    .clock(ticks.clone())
                    .build()?,
            )
        };
        let droplets = plain(Dr::machine())?;
        let dividers = plain(D::machine())?;
        let bouncers = plain(B::machine())?;
        let endpoints = plain(E::machine())?;
        let scaled = plain(S::machine())?;
        // The parents' guards look for their children: "a VPC is not deleted while
        // it has Networks", "a Network is not deleted while it has Endpoints".
        let related = {
            let topology = topology.clone();
            move |id: &ObjectId, children: bool| {
                topology.with(|t| {
                    t.get(id).map_or_else(BTreeSet::new, |o| {
                        if children {
                            o.children.clone()
                        } else {
                            o.parts.clone()
                        }
                    })
                })
            }
        };
        let networks = Runtime::builder_of::<N>(store(Kind::Network)?)
            .clock(ticks.clone())
            .guard("bouncers_provisioned", {
                let (bouncers, related) = (bouncers.clone(), related.clone());
                move |ctx| all_in(&bouncers, &related(ctx.id, false), B::Provisioned)
            })
            .guard("no_endpoints", {
                let (endpoints, scaled, related) =
                    (endpoints.clone(), scaled.clone(), related.clone());
                move |ctx| {
                    let children = related(ctx.id, true);
                    none_left(&endpoints, &children) && none_left(&scaled, &children)
                }
            })
            .build()?;
        let vpcs = Runtime::builder_of::<V>(store(Kind::Vpc)?)
            .clock(ticks.clone())
            .guard("dividers_provisioned", {
                let (dividers, related) = (dividers.clone(), related.clone());
                move |ctx| all_in(&dividers, &related(ctx.id, false), D::Provisioned)
            })
            .guard("no_networks", {
                let (networks, related) = (networks.clone(), related.clone());
                move |ctx| none_left(&networks, &related(ctx.id, true))
            })
            .build()?;
        let mut runtimes = vec![
            droplets, vpcs, dividers, networks, bouncers, endpoints, scaled,
        ];
        // In Kind order.
        runtimes.sort_by_key(|rt| kind_of(rt.machine().name()));
        let codecs = runtimes.iter().map(|rt| Codec::new(rt.machine())).collect();
        Ok(Cluster {
            inner: Arc::new(Inner {
                runtimes,
                topology,
                archive,
                codecs,
                ticks,
                trace: Mutex::default(),
                errors: Mutex::default(),
                inboxes: Mutex::default(),
                lags: AtomicU32::new(0),
                user: Actor::new("user"),
                changed: Notify::new(),
                defaults,
            }),
        })
    }

    /// The runtime of `kind`'s objects.
    pub fn runtime(&self, kind: Kind) -> &Runtime {
        &self.inner.runtimes[kind as usize]
    }

    /// A copy of the topology.
    pub fn topology(&self) -> Topology {
        self.inner.topology.snapshot()
    }

    /// The trace so far, in the order things happened: every step of every
    /// object that ever lived, read from their lives (so on etcd every
    /// process's steps: a creation, an action into its transition state, an
    /// action completed or failed, the healer's rollbacks, a removal), and
    /// this process's notes (users' requests, what operators chose, their
    /// caches, errors).
    pub fn trace(&self) -> Vec<Line> {
        let mut trace = lock(&self.inner.trace).clone();
        for kind in Kind::ALL {
            let m = self.runtime(kind).machine();
            for id in self.ever(kind) {
                match self.lives(kind, id.as_str()) {
                    Ok(lives) => trace.extend(lives.iter().flatten().filter_map(|e| {
                        Some(Line {
                            tick: Tick::from(e.at).0,
                            who: e.actor.to_string(),
                            what: step(m, kind, &id, e)?,
                        })
                    })),
                    Err(e) => trace.push(Line {
                        tick: self.inner.ticks.tick(),
                        who: "trace".to_owned(),
                        what: format!("{kind:?} {id}: history unreadable: {e}"),
                    }),
                }
            }
        }
        trace.sort_by_key(|l| l.tick);
        trace
    }

    /// Errors the operators met that no workflow expects.
    pub fn errors(&self) -> Vec<String> {
        lock(&self.inner.errors).clone()
    }

    /// How many times an operator lost events and looked at everything again.
    pub fn lags(&self) -> u32 {
        self.inner.lags.load(Ordering::Relaxed)
    }

    /// Every object of `kind`.
    pub fn ids(&self, kind: Kind) -> Vec<ObjectId> {
        let mut ids = self.runtime(kind).store().ids().unwrap_or_default();
        ids.sort();
        ids
    }

    /// [`ids`](Self::ids), the store's answer awaited.
    pub async fn ids_async(&self, kind: Kind) -> Vec<ObjectId> {
        let mut ids = self
            .runtime(kind)
            .store()
            .ids_async()
            .await
            .unwrap_or_default();
        ids.sort();
        ids
    }

    /// The state name of `id`, of `kind`.
    pub fn state(&self, kind: Kind, id: &str) -> Option<String> {
        self.runtime(kind).state_name(id).ok().map(str::to_owned)
    }

    /// The ids of `kind` whose records were removed, their lives kept in the
    /// API server's archive, in order. (An id used again is also among
    /// [`ids`](Self::ids).)
    pub fn removed(&self, kind: Kind) -> Vec<ObjectId> {
        let prefix = format!("{}/", kind.name());
        let keys = self.inner.archive.keys().into_iter();
        let mut ids: Vec<ObjectId> = keys
            .filter_map(|key| key.as_str().strip_prefix(&prefix).map(ObjectId::from))
            .collect();
        ids.sort();
        ids
    }

    /// Every object of `kind` that ever lived: those with a record
    /// ([`ids`](Self::ids)) and those removed ([`removed`](Self::removed)), in
    /// order.
    pub fn ever(&self, kind: Kind) -> Vec<ObjectId> {
        let mut ids = self.ids(kind);
        ids.extend(self.removed(kind));
        ids.sort();
        ids.dedup();
        ids
    }

    /// Every life of `id` of `kind`, oldest first, each one's history: those
    /// the archive keeps, each ending in its removal (one the process that
    /// removed it died before noting is read from the store, until the id
    /// is created again), then the record's, if there is one.
    pub fn lives(&self, kind: Kind, id: &str) -> Result<Vec<Vec<Entry>>, MizarError> {
        let id = ObjectId::from(id);
        let codec = &self.inner.codecs[kind as usize];
        let key = archive_key(kind, &id);
        let lives = self
            .inner
            .archive
            .lives(&key, codec, self.runtime(kind), &id);
        lives.map_err(|e| match e {
            LivesError::Archive(source) => MizarError::Archive { kind, id, source },
            LivesError::Record(e) => e.into(),
        })
    }

    /// The state `id` of `kind` was in when its record was removed: `None`
    /// while it has a record, or if it never had one. (The operators remove a
    /// record only at the version they archived, so a life archived without
    /// its removal was removed where it ends.)
    pub fn removed_in(&self, kind: Kind, id: &str) -> Option<String> {
        if self.runtime(kind).get(id).is_ok() {
            return None;
        }
        let lives = self.lives(kind, id).ok()?;
        let state = api::removed_in(&lives)?;
        Some(self.runtime(kind).machine().state(state).name.to_string())
    }

    /// Notes what `who` did or saw (not a step of an object: those are in
    /// its history), for the trace.
    fn log(&self, who: &str, what: String) {
        lock(&self.inner.trace).push(Line {
            tick: self.inner.ticks.tick(),
            who: who.to_owned(),
            what,
        });
        self.stepped();
    }

    /// Wakes whoever waits for the cluster's next step
    /// ([`wait_until`](Self::wait_until)).
    fn stepped(&self) {
        self.inner.changed.notify_waiters();
    }

    fn error(&self, who: &str, what: String) {
        if self.is_shared() {
            // An operator process: nobody reads its trace.
            eprintln!("{who}: ERROR {what}");
        }
        self.log(who, format!("ERROR {what}"));
        lock(&self.inner.errors).push(format!("{who}: {what}"));
    }

    fn with<R>(&self, f: impl FnMut(&mut Topology) -> R) -> R {
        self.inner.topology.with(f)
    }

    fn object(&self, id: &ObjectId) -> Option<Object> {
        self.with(|t| t.get(id).cloned())
    }

    /// Tells the running operators that watch `kind` to look at `id`.
    fn poke(&self, kind: Kind, id: &ObjectId) {
        for (op, inbox) in lock(&self.inner.inboxes).iter() {
            if op.watches().contains(&kind) {
                let _ = inbox.send(Wake::Object(kind, id.clone()));
            }
        }
    }

    /// Creates `id` of `kind` under `parent` as `actor`: the topology first, so that
    /// operators seeing the new object find it there.
    fn create(
        &self,
        kind: Kind,
        id: &str,
        parent: Option<(Kind, &str)>,
        actor: &Actor,
    ) -> Result<ObjectId, MizarError> {
        let id = ObjectId::from(id);
        let recorded = self.runtime(kind).get(id.clone()).is_ok();
        self.reserve(kind, &id, parent, recorded)?;
        let created = self.runtime(kind).create(id.clone(), actor);
        self.created(id, created)
    }

    /// [`create`](Self::create), for the operators: the store's calls awaited.
    async fn create_async(
        &self,
        kind: Kind,
        id: &str,
        parent: Option<(Kind, &str)>,
        actor: &Actor,
    ) -> Result<ObjectId, MizarError> {
        let id = ObjectId::from(id);
        let recorded = self.runtime(kind).get_async(id.clone()).await.is_ok();
        self.reserve(kind, &id, parent, recorded)?;
        let created = self.runtime(kind).create_async(id.clone(), actor).await;
        self.created(id, created)
    }

    /// A creation's first step: `id` in the topology, under its parent. An object
    /// there without a record (`recorded` false) was being created by a process
    /// that died in between: this creation finishes it.
    fn reserve(
        &self,
        kind: Kind,
        id: &ObjectId,
        parent: Option<(Kind, &str)>,
        recorded: bool,
    ) -> Result<(), MizarError> {
        let parent_id = parent.map(|(k, p)| (k, ObjectId::from(p)));
        self.with(|t| {
            if let Some(existing) = t.get(id) {
                if existing.kind == kind && !recorded {
                    return Ok(());
                }
                return Err(MizarError::Refused(RuntimeError::Exists {
                    id: id.clone(),
                    state: format!("{:?}", existing.kind),
                }));
            }
            if let Some((pk, p)) = &parent_id {
                let parent = t.get_mut(p).ok_or_else(|| MizarError::NoParent {
                    kind: *pk,
                    id: p.clone(),
                })?;
                if parent.delete_requested {
                    return Err(MizarError::ParentDeleting { id: p.clone() });
                }
                if matches!(kind, Kind::Network | Kind::Endpoint | Kind::ScaledEndpoint) {
                    parent.children.insert(id.clone());
                } else {
                    parent.parts.insert(id.clone());
                }
            }
            let parent = parent_id.as_ref().map(|(_, p)| p.clone());
            t.insert(id.clone(), Object::new(kind, parent));
            Ok(())
        })
    }

    /// A creation's second step, its record, done, or the topology's entry
    /// taken back.
    fn created(
        &self,
        id: ObjectId,
        record: Result<fsm_runtime::Record, RuntimeError>,
    ) -> Result<ObjectId, MizarError> {
        match record {
            Ok(_) => {
                self.stepped();
                Ok(id)
            }
            Err(e) => {
                self.with(|t| forget(t, &id));
                Err(e.into())
            }
        }
    }

    /// The CNI service creates a droplet for a node.
    pub fn create_droplet(&self, id: &str) -> Result<ObjectId, MizarError> {
        self.create(Kind::Droplet, id, None, &Operator::Cni.actor())
    }

    /// A user creates a VPC.
    pub fn create_vpc(&self, id: &str) -> Result<ObjectId, MizarError> {
        self.create(Kind::Vpc, id, None, &self.inner.user)
    }

    /// A user creates a network in `vpc`.
    pub fn create_network(&self, vpc: &str, id: &str) -> Result<ObjectId, MizarError> {
        self.create(Kind::Network, id, Some((Kind::Vpc, vpc)), &self.inner.user)
    }

    /// A user creates a pod, and with it its endpoint in `network`.
    pub fn create_endpoint(&self, network: &str, id: &str) -> Result<ObjectId, MizarError> {
        self.create(
            Kind::Endpoint,
            id,
            Some((Kind::Network, network)),
            &self.inner.user,
        )
    }

    /// A user creates a service in `network`: a scaled endpoint with `backends`
    /// (endpoints of the network).
    pub fn create_scaled_endpoint(
        &self,
        network: &str,
        id: &str,
        backends: &[&str],
    ) -> Result<ObjectId, MizarError> {
        let id = self.create(
            Kind::ScaledEndpoint,
            id,
            Some((Kind::Network, network)),
            &self.inner.user,
        )?;
        self.set_backends(id.as_str(), backends)?;
        Ok(id)
    }

    /// A backend is added to or removed from a service: its scaled endpoint's
    /// backends become `backends` (the trigger of the update workflow).
    pub fn set_backends(&self, id: &str, backends: &[&str]) -> Result<(), MizarError> {
        let id = ObjectId::from(id);
        self.with(|t| {
            let o = t
                .get_mut(&id)
                .filter(|o| o.kind == Kind::ScaledEndpoint)
                .ok_or_else(|| RuntimeError::NotFound { id: id.clone() })?;
            o.backends = backends.iter().map(|b| ObjectId::from(*b)).collect();
            Ok::<_, MizarError>(())
        })?;
        self.log("user", format!("set the backends of {id} to {backends:?}"));
        self.poke(Kind::ScaledEndpoint, &id);
        Ok(())
    }

    /// A user deletes a VPC, a network, a service, or the pod of an endpoint. The operators do
    /// the rest, in the order the seed's delete workflows give.
    pub fn delete(&self, id: &str) -> Result<(), MizarError> {
        let id = ObjectId::from(id);
        let kind = self.with(|t| {
            let o = t
                .get_mut(&id)
                .ok_or_else(|| RuntimeError::NotFound { id: id.clone() })?;
            o.delete_requested = true;
            Ok::<_, MizarError>(o.kind)
        })?;
        self.log("user", format!("asked to delete {kind:?} {id}"));
        self.poke(kind, &id);
        Ok(())
    }

    /// Starts the operators on the current tokio runtime.
    pub fn start(&self) -> Operators {
        self.start_operators(&Operator::ALL)
            .expect("the in-memory stores can always be watched")
    }

    /// Starts `operators` on the current tokio runtime: on etcd, the operators of
    /// this process (the others run elsewhere). Besides the runtimes' events, an
    /// operator on etcd learns of users' requests from the topology's watch, and
    /// looks at everything again every [`RESYNC`]: what a restarted operator
    /// must take over is found that way.
    pub fn start_operators(&self, operators: &[Operator]) -> Result<Operators, MizarError> {
        let (stop, stopped) = watch::channel(false);
        let mut tasks = Vec::new();
        if let ApiServer::Etcd(api) = &*self.inner.topology {
            let (wakes, mut woken) = mpsc::unbounded_channel::<(ObjectId, Object)>();
            api.watch(wakes);
            let (cluster, mut stopped) = (self.clone(), stopped.clone());
            tasks.push(tokio::spawn(async move {
                let mut resync = tokio::time::interval(RESYNC);
                loop {
                    tokio::select! {
                        Some((id, object)) = woken.recv() => cluster.poke(object.kind, &id),
                        _ = resync.tick() => cluster.resync(),
                        _ = stopped.changed() => return,
                    }
                }
            }));
        }
        for &op in operators {
            let (tx, rx) = mpsc::unbounded_channel();
            for &kind in op.watches() {
                let watcher = self.runtime(kind).watch()?;
                tasks.push(tokio::spawn(feed(
                    self.clone(),
                    watcher,
                    kind,
                    tx.clone(),
                    stopped.clone(),
                )));
            }
            let _ = tx.send(Wake::Resync);
            lock(&self.inner.inboxes).push((op, tx.clone()));
            let worker = Worker {
                cluster: self.clone(),
                op,
                actor: op.actor(),
                inbox: tx,
                deleting: HashMap::new(),
                cache: BTreeSet::new(),
                next_droplet: 0,
            };
            tasks.push(tokio::spawn(worker.run(rx, stopped.clone())));
        }
        Ok(Operators {
            cluster: self.clone(),
            stop,
            tasks,
        })
    }

    /// Tells every running operator to look at everything.
    fn resync(&self) {
        for (_, inbox) in lock(&self.inner.inboxes).iter() {
            let _ = inbox.send(Wake::Resync);
        }
    }

    /// Runs a [`Healer`] over every kind's objects every `every`: it rolls back the
    /// actions of operator processes that died (their holds abandoned once their
    /// lease expired), so that the restarted operator does the step again.
    pub fn spawn_healers(&self, every: Duration) -> Vec<PeriodicHealer> {
        Kind::ALL
            .into_iter()
            .map(|kind| {
                let cluster = self.clone();
                Healer::new().spawn(self.runtime(kind).clone(), every, move |report| {
                    // Its rollbacks are in the histories, and so in the trace.
                    if report.is_ok_and(|r| !r.healed.is_empty()) {
                        cluster.stepped();
                    }
                })
            })
            .collect()
    }

    /// What the seed promises, checked over the history of every object that
    /// ever lived, removed ones included ([`lives`](Self::lives)): each is a
    /// path of its machine (a removal only where the spec allows it); every
    /// action and removal was made by an operator, and every move out of an
    /// owned state by its owner; each object was created by whom the seed says
    /// (the user, or the operator of its parent); a parent's delete started only
    /// after its last child was deleted. Answers every breach found.
    pub fn violations(&self) -> Vec<String> {
        let mut found = Vec::new();
        let topology_parents = self.parents();
        for kind in Kind::ALL {
            let m = self.runtime(kind).machine();
            for id in self.ever(kind) {
                let name = format!("{kind:?} {id}");
                let lives = self.lives(kind, id.as_str());
                let Some(lives) = api::checked_lives(m, &name, lives, &mut found) else {
                    continue;
                };
                for entry in lives.iter().flatten() {
                    match entry.kind {
                        EntryKind::Created => {
                            let creator = creator(kind, id.as_str());
                            if *entry.actor != *creator {
                                found.push(format!(
                                    "{kind:?} {id} created by {}, not {creator}",
                                    entry.actor
                                ));
                            }
                        }
                        // The healer's and the runtime's own writes.
                        EntryKind::Healed | EntryKind::Abandoned => {}
                        EntryKind::Started
                        | EntryKind::Completed
                        | EntryKind::Failed
                        | EntryKind::Removed => {
                            if Operator::from_role(&entry.actor).is_none() {
                                found.push(format!(
                                    "{kind:?} {id}: {:?} by {}, no operator",
                                    entry.kind, entry.actor
                                ));
                            }
                            let action = entry.action.map(|a| m.action(a));
                            let owner = m.state(entry.from).owner.as_deref();
                            if let (Some(action), Some(owner)) = (action, owner)
                                && action.changes_state()
                                && *entry.actor != *owner
                            {
                                found.push(format!(
                                    "{kind:?} {id} left {} by {}, not its owner {owner}",
                                    m.state(entry.from).name,
                                    entry.actor
                                ));
                            }
                        }
                    }
                }
            }
        }
        // A parent's delete (VPC, network) started after its children's ends.
        for (child_kind, child, parent_kind, parent) in topology_parents {
            let deleting = self.entered(parent_kind, parent.as_str(), "Deleting");
            let deleted = self.entered(child_kind, child.as_str(), "Deleted");
            if let (Some(deleting), Some(deleted)) = (deleting, deleted) {
                if deleting < deleted {
                    found.push(format!(
                        "{parent_kind:?} {parent} started its delete before {child_kind:?} {child} was deleted"
                    ));
                }
            } else if deleting.is_some() && deleted.is_none() {
                found.push(format!(
                    "{parent_kind:?} {parent} started its delete while {child_kind:?} {child} lives"
                ));
            }
        }
        found
    }

    /// Every (child kind, child, parent kind, parent) of a VPC's networks and a
    /// network's (scaled) endpoints, by the parents their histories' ids name.
    fn parents(&self) -> Vec<(Kind, ObjectId, Kind, ObjectId)> {
        let mut pairs = Vec::new();
        for (child_kind, parent_kind) in [
            (Kind::Network, Kind::Vpc),
            (Kind::Endpoint, Kind::Network),
            (Kind::ScaledEndpoint, Kind::Network),
        ] {
            let parents = self.ever(parent_kind);
            for child in self.ever(child_kind) {
                // Ids are paths: `vpc/net/pod`.
                let parent = parents
                    .iter()
                    .filter(|p| child.as_str().starts_with(&format!("{p}/")))
                    .max_by_key(|p| p.as_str().len());
                if let Some(parent) = parent {
                    pairs.push((child_kind, child.clone(), parent_kind, parent.clone()));
                }
            }
        }
        pairs
    }

    /// When `id` of `kind` last entered `state`, if it did (in any of its
    /// [`lives`](Self::lives)).
    pub fn entered(&self, kind: Kind, id: &str, state: &str) -> Option<Tick> {
        let target = self.runtime(kind).machine().find_state(state)?;
        let lives = self.lives(kind, id).ok()?;
        lives
            .iter()
            .flatten()
            .rev()
            .find(|e| e.to == target && !matches!(e.kind, EntryKind::Created | EntryKind::Removed))
            .map(|e| Tick::from(e.at))
    }

    /// Waits until `done` holds of the cluster, re-checking after every step an
    /// operator or a user takes, or until `limit` passes; answers whether it held.
    ///
    /// On etcd, where the steps are taken by other processes, it looks every
    /// [`POLL`] instead.
    pub async fn wait_until(&self, limit: Duration, done: impl Fn(&Cluster) -> bool) -> bool {
        if let ApiServer::Memory(_) = &*self.inner.topology {
            return crate::support::wait_until(&self.inner.changed, limit, self, done).await;
        }
        crate::support::poll_until(limit, POLL, || done(self)).await
    }

    /// Whether the cluster lives on etcd (shared by processes).
    pub fn is_shared(&self) -> bool {
        matches!(&*self.inner.topology, ApiServer::Etcd(_))
    }
}

/// What the trace says of a step of `id`'s history (`None`: one it leaves
/// out, an action started that holds the object in its state, which the
/// action's completion or failure says).
fn step(m: &fsm::Machine, kind: Kind, id: &ObjectId, e: &Entry) -> Option<String> {
    let state = &*m.state(e.to).name;
    let action = e.action.map_or("", |a| &*m.action(a).name);
    Some(match e.kind {
        EntryKind::Created => format!("created {kind:?} {id}"),
        EntryKind::Started if m.state(e.to).is_transition() => {
            format!("{action} {kind:?} {id} -> {state}")
        }
        EntryKind::Started => return None,
        EntryKind::Completed => format!("{action} {kind:?} {id} -> {state}"),
        EntryKind::Failed => format!("{action} {kind:?} {id} failed -> {state}"),
        EntryKind::Abandoned => format!("{action} {kind:?} {id} abandoned (its holder gone)"),
        EntryKind::Healed => format!("rolled back {action} of {kind:?} {id} -> {state}"),
        EntryKind::Removed => format!("removed {kind:?} {id}"),
    })
}

/// The key of `id` of `kind` in the archive.
fn archive_key(kind: Kind, id: &ObjectId) -> ObjectId {
    ObjectId::from(format!("{}/{id}", kind.name()))
}

/// Who creates an object of `kind`: the user, the operator of its parent, or,
/// for the defaults, their operators.
fn creator(kind: Kind, id: &str) -> &'static str {
    match (kind, id) {
        (Kind::Droplet, _) => "cni-service",
        (Kind::Vpc, DEFAULT_VPC) | (Kind::Divider, _) => "vpc-operator",
        (Kind::Network, DEFAULT_NETWORK) | (Kind::Bouncer, _) => "network-operator",
        (Kind::Vpc | Kind::Network | Kind::Endpoint | Kind::ScaledEndpoint, _) => "user",
    }
}

fn kind_of(machine: &str) -> Kind {
    Kind::ALL
        .into_iter()
        .find(|k| k.name() == machine)
        .expect("a Mizar machine")
}

/// Removes `id`, its parts and its children (and theirs) from the topology, and
/// `id` from its parent.
fn forget(t: &mut Topology, id: &ObjectId) {
    if let Some(o) = t.remove(id) {
        if let Some(parent) = o.parent.and_then(|p| t.get_mut(&p)) {
            parent.children.remove(id);
            parent.parts.remove(id);
        }
        for below in o.parts.iter().chain(&o.children) {
            forget(t, below);
        }
    }
}

/// Forwards a watcher's events to an operator's inbox until told to stop.
async fn feed(
    cluster: Cluster,
    mut watcher: Watcher,
    kind: Kind,
    inbox: mpsc::UnboundedSender<Wake>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let wake = tokio::select! {
            event = watcher.recv_async() => match event {
                Ok(event) => Wake::Object(kind, event.id),
                Err(Lagged::Missed { .. } | Lagged::Gap) => {
                    cluster.inner.lags.fetch_add(1, Ordering::Relaxed);
                    Wake::Resync
                }
                Err(Lagged::Closed) => return,
            },
            _ = stop.changed() => return,
        };
        if inbox.send(wake).is_err() {
            return;
        }
    }
}

/// The running operators.
pub struct Operators {
    cluster: Cluster,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Operators {
    /// Stops every operator and waits for them. A delete workflow still in flight
    /// stays in its transition state, held by an abandoned action.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        lock(&self.cluster.inner.inboxes).clear();
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// What became of an attempt.
enum Outcome {
    Done,
    /// Not now: a rule or guard refused; a later event will bring it back.
    Wait,
}

/// One operator's loop and its private state.
struct Worker {
    cluster: Cluster,
    op: Operator,
    actor: Actor,
    inbox: mpsc::UnboundedSender<Wake>,
    /// Delete actions in flight (VPCs, networks), completed once the children are
    /// gone.
    deleting: HashMap<ObjectId, InFlight<'static, AnyStore>>,
    /// The operator's own state store.
    cache: BTreeSet<ObjectId>,
    next_droplet: usize,
}

impl Worker {
    async fn run(
        mut self,
        mut inbox: mpsc::UnboundedReceiver<Wake>,
        mut stop: watch::Receiver<bool>,
    ) {
        if self.op == Operator::Vpc && self.cluster.inner.defaults {
            self.default_vpc().await;
        }
        loop {
            let wake = tokio::select! {
                wake = inbox.recv() => match wake {
                    Some(wake) => wake,
                    None => return,
                },
                _ = stop.changed() => return,
            };
            match wake {
                Wake::Object(kind, id) => self.reconcile(kind, &id).await,
                Wake::Resync => {
                    for &kind in self.op.watches() {
                        for id in self.cluster.ids_async(kind).await {
                            self.reconcile(kind, &id).await;
                        }
                    }
                }
            }
        }
    }

    fn rt(&self, kind: Kind) -> &Runtime {
        self.cluster.runtime(kind)
    }

    fn log(&self, what: String) {
        self.cluster.log(self.op.role(), what);
    }

    /// Adds `id` to (or removes it from) the operator's own state store.
    fn cache(&mut self, kind: Kind, id: &ObjectId, add: bool) {
        let changed = if add {
            self.cache.insert(id.clone())
        } else {
            self.cache.remove(id)
        };
        if changed {
            let what = if add { "added to" } else { "removed from" };
            self.log(format!("{kind:?} {id} {what} its cache"));
        }
    }

    /// Runs `action` on `id`: a refusal the workflow expects (a guard, or the object
    /// having moved on) waits for the next event; a busy object or a lost race is
    /// looked at again shortly; anything else is an error of the example.
    async fn act(&self, kind: Kind, id: &ObjectId, action: impl Into<ActionId>) -> Outcome {
        self.act_with(kind, id, action, || {}).await
    }

    /// Runs `action` on `id` with `effect` (the data the step updates) inside the
    /// action's window: nobody else can move the object meanwhile, and whoever the
    /// new state wakes finds the data already there.
    async fn act_with(
        &self,
        kind: Kind,
        id: &ObjectId,
        action: impl Into<ActionId>,
        effect: impl FnOnce(),
    ) -> Outcome {
        let action = action.into();
        let done = match self
            .rt(kind)
            .start_async(id.clone(), &self.actor, action)
            .await
        {
            Ok(flight) => {
                effect();
                flight.complete_async().await
            }
            Err(e) => Err(e),
        };
        match done {
            Ok(_) => {
                self.cluster.stepped();
                Outcome::Done
            }
            Err(e) => self.refused(kind, id, e),
        }
    }

    fn refused(&self, kind: Kind, id: &ObjectId, e: RuntimeError) -> Outcome {
        match e {
            RuntimeError::NoRule { .. } => Outcome::Wait,
            e @ RuntimeError::Guard { .. } => {
                self.log(format!("waits: {e}"));
                Outcome::Wait
            }
            e if e.is_retryable() => {
                let (inbox, id) = (self.inbox.clone(), id.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    let _ = inbox.send(Wake::Object(kind, id));
                });
                Outcome::Wait
            }
            e => {
                self.cluster.error(self.op.role(), e.to_string());
                Outcome::Wait
            }
        }
    }

    async fn reconcile(&mut self, kind: Kind, id: &ObjectId) {
        if self.removes(kind) && self.remove(kind, id).await {
            return;
        }
        match (self.op, kind) {
            (Operator::Vpc, Kind::Vpc) => self.vpc(id).await,
            (Operator::Vpc, Kind::Divider | Kind::Network) => {
                if let Some(vpc) = self.parent(id) {
                    self.vpc(&vpc).await;
                }
            }
            (Operator::Network, Kind::Vpc) => self.default_network(id).await,
            (Operator::Network, Kind::Network) => self.network(id).await,
            (Operator::Network, Kind::Bouncer) => {
                if let Some(network) = self.parent(id) {
                    self.network(&network).await;
                }
            }
            (Operator::Network, Kind::Endpoint) => {
                self.allocate(id).await;
                // The network may be waiting for its last endpoint to go.
                if let Some(network) = self.parent(id) {
                    self.network(&network).await;
                }
            }
            (Operator::Network, Kind::ScaledEndpoint) => {
                // Or for its last service.
                if let Some(network) = self.parent(id) {
                    self.network(&network).await;
                }
            }
            (Operator::Droplet, Kind::Droplet) => self.droplet(id).await,
            (Operator::Droplet, Kind::Divider | Kind::Bouncer) => self.place(kind, id).await,
            (Operator::Divider, Kind::Vpc) => {
                self.delete_parts(
                    (Kind::Vpc, id, V::Deleting),
                    (Kind::Divider, D::Provisioned, DA::RequestDelete),
                )
                .await
            }
            (Operator::Divider, Kind::Divider) => self.divider_done(id).await,
            (Operator::Divider, Kind::Bouncer) => self.bouncer_dividers(id).await,
            (Operator::Bouncer, Kind::Divider) => self.divider_bouncers(id).await,
            (Operator::Bouncer, Kind::Network) => {
                self.delete_parts(
                    (Kind::Network, id, N::Deleting),
                    (Kind::Bouncer, B::Provisioned, BA::RequestDelete),
                )
                .await
            }
            (Operator::Bouncer, Kind::Bouncer) => self.bouncer_done(id).await,
            (Operator::Bouncer, Kind::Endpoint) => self.endpoint_bouncers(id).await,
            (Operator::Bouncer, Kind::ScaledEndpoint) => self.scaled_endpoint_bouncers(id).await,
            (Operator::Endpoint, Kind::Bouncer) => self.bouncer_endpoints(id).await,
            (Operator::Endpoint, Kind::Endpoint) => self.endpoint(id).await,
            (Operator::Endpoint, Kind::ScaledEndpoint) => self.scaled_endpoint(id).await,
            (Operator::Cni, Kind::Endpoint) => self.cni(id).await,
            _ => {}
        }
    }

    /// The parent of `id`, if it has one.
    fn parent(&self, id: &ObjectId) -> Option<ObjectId> {
        self.cluster.object(id).and_then(|o| o.parent)
    }

    /// Whether the spec of `kind` lets this operator remove its objects in some
    /// state (for each kind but droplets, one operator may: in Deleted).
    fn removes(&self, kind: Kind) -> bool {
        let states = self.rt(kind).machine().states();
        states
            .iter()
            .any(|s| s.may_remove(|r| self.actor.has_role(r)))
    }

    /// "The X Operator deletes the X Object": `id`, in a state its spec lets
    /// this operator remove it in (Deleted, where its delete workflow ends),
    /// leaves the store, then the operator's cache; a VPC, which has no parent,
    /// leaves the topology too (a child's entry goes with its parent's delete).
    /// Its history goes to the API server's archive first, and the removal is
    /// made at the version archived: a process killed in between leaves the
    /// record, which the next look at it removes (a removal needs nothing but
    /// the record). Answers whether the object was in such a state.
    async fn remove(&mut self, kind: Kind, id: &ObjectId) -> bool {
        let (rt, cluster) = (self.rt(kind).clone(), self.cluster.clone());
        let codec = &cluster.inner.codecs[kind as usize];
        let key = archive_key(kind, id);
        // The topology's entry before the record: a process killed in between
        // leaves the record, found again by its id (never the other way round,
        // an entry nobody would look at again).
        let forget_vpc = || {
            cluster.with(|t| {
                if t.get(id).is_some_and(|o| o.parent.is_none()) {
                    forget(t, id);
                }
            })
        };
        let archive = &cluster.inner.archive;
        match archive
            .remove(&key, codec, &rt, id, &self.actor, forget_vpc)
            .await
        {
            Removal::Kept => return false,
            Removal::Removed => {
                self.cluster.stepped();
                self.cache(kind, id, false);
            }
            Removal::Gone => {}
            Removal::Refused(e) => {
                let _ = self.refused(kind, id, e);
            }
        }
        true
    }

    // --- VPC operator ---------------------------------------------------------

    async fn vpc(&mut self, id: &ObjectId) {
        let Some((o, state)) = self.look::<V>(Kind::Vpc, id).await else {
            return;
        };
        match state {
            Ok(V::Init) if self.missing(Kind::Divider, &o.parts).await => {
                // Step 2 of "VPC Object Create Workflow".
                self.create_part(Kind::Vpc, id, Kind::Divider, "divider-0")
                    .await;
            }
            Ok(V::Init) => {
                // Steps 11-12; the guard `dividers_provisioned` decides.
                let _ = self.act(Kind::Vpc, id, VA::Provision).await;
            }
            Ok(V::Provisioned) if o.delete_requested => {
                // "The VPC Operator will not delete the VPC unless all of the
                // specified VPC's children Networks have been deleted": the guard
                // `no_networks` refuses until then.
                self.start_delete(Kind::Vpc, id, VA::Delete).await;
            }
            Ok(V::Deleting) if self.none_left(Kind::Divider, &o.parts).await => {
                self.finish_delete(id).await;
            }
            _ => {}
        }
    }

    /// "VPC Operator creates a default VPC": on start-up, unless it exists.
    async fn default_vpc(&self) {
        match self
            .cluster
            .create_async(Kind::Vpc, DEFAULT_VPC, None, &self.actor)
            .await
        {
            Ok(_) | Err(MizarError::Refused(RuntimeError::Exists { .. })) => {}
            Err(e) => self.cluster.error(self.op.role(), e.to_string()),
        }
    }

    /// Whether the object has no part of `kind` yet, or one whose creation a
    /// process that died left unfinished (in the topology, without a record).
    async fn missing(&self, kind: Kind, parts: &BTreeSet<ObjectId>) -> bool {
        for part in parts {
            if self.rt(kind).get_async(part.clone()).await.is_err() {
                return true;
            }
        }
        parts.is_empty()
    }

    /// Creates the part `name` (a divider, a bouncer) of `id`.
    async fn create_part(&self, kind: Kind, id: &ObjectId, part: Kind, name: &str) {
        let part_id = format!("{id}/{name}");
        let parent = Some((kind, id.as_str()));
        let created = self
            .cluster
            .create_async(part, &part_id, parent, &self.actor)
            .await;
        if let Err(e) = created {
            self.cluster.error(self.op.role(), e.to_string());
        }
    }

    /// Starts deleting `id` and holds the action until its children are gone.
    async fn start_delete(&mut self, kind: Kind, id: &ObjectId, action: impl Into<ActionId>) {
        let rt = self.rt(kind).clone();
        match rt.start_async(id.clone(), &self.actor, action.into()).await {
            Ok(flight) => {
                self.cluster.stepped();
                self.deleting.insert(id.clone(), flight.into_owned());
            }
            Err(e) => {
                let _ = self.refused(kind, id, e);
            }
        }
    }

    /// Completes the delete held for `id`; its removal follows
    /// ([`remove`](Self::remove)).
    async fn finish_delete(&mut self, id: &ObjectId) {
        let Some(flight) = self.deleting.remove(id) else {
            return;
        };
        // Before the object shows Deleted: its own parts and children (all
        // removed) leave the topology; the object stays there until its
        // removal, and while it has a parent until the parent's delete, so that
        // the parent's operator finds its way back from it.
        self.cluster.with(|t| {
            let o = t.get(id).cloned();
            for below in o.iter().flat_map(|o| o.parts.iter().chain(&o.children)) {
                forget(t, below);
            }
        });
        match flight.complete_async().await {
            Ok(_) => self.cluster.stepped(),
            Err(e) => self.cluster.error(self.op.role(), e.to_string()),
        }
    }

    // --- Network operator -----------------------------------------------------

    /// "Network operator creates a default network": once the default VPC
    /// exists, in it, unless it exists (or the VPC is being deleted).
    async fn default_network(&self, vpc: &ObjectId) {
        if !self.cluster.inner.defaults || vpc.as_str() != DEFAULT_VPC {
            return;
        }
        let network = ObjectId::from(DEFAULT_NETWORK);
        let vpc_alive = self
            .cluster
            .object(vpc)
            .is_some_and(|o| !o.delete_requested);
        if !vpc_alive {
            return;
        }
        // In the topology with its record: made. Without one, its creation
        // was cut off (the process killed between the two): finished here,
        // or nothing ever would.
        if self.cluster.object(&network).is_some()
            && self
                .rt(Kind::Network)
                .get_async(network.clone())
                .await
                .is_ok()
        {
            return;
        }
        let parent = Some((Kind::Vpc, DEFAULT_VPC));
        match self
            .cluster
            .create_async(Kind::Network, DEFAULT_NETWORK, parent, &self.actor)
            .await
        {
            Ok(_) | Err(MizarError::Refused(RuntimeError::Exists { .. })) => {}
            Err(MizarError::ParentDeleting { .. }) => {}
            Err(e) => self.cluster.error(self.op.role(), e.to_string()),
        }
    }

    async fn network(&mut self, id: &ObjectId) {
        let Some((o, state)) = self.look::<N>(Kind::Network, id).await else {
            return;
        };
        match state {
            Ok(N::Init) if self.missing(Kind::Bouncer, &o.parts).await => {
                // Step 2 of "Network Object Create Workflow".
                self.create_part(Kind::Network, id, Kind::Bouncer, "bouncer-0")
                    .await;
            }
            Ok(N::Init) => {
                let _ = self.act(Kind::Network, id, NA::Provision).await;
            }
            Ok(N::Provisioned) => {
                // Endpoints created before the network was provisioned waited (and
                // those of a network to delete must go through their lifecycle
                // before it can go).
                for endpoint in &o.children {
                    self.allocate(endpoint).await;
                }
                if o.delete_requested {
                    self.start_delete(Kind::Network, id, NA::Delete).await;
                }
            }
            Ok(N::Deleting) if self.none_left(Kind::Bouncer, &o.parts).await => {
                self.finish_delete(id).await;
            }
            _ => {}
        }
    }

    /// Endpoint create, steps 1-3, and endpoint delete, steps 3-5.
    async fn allocate(&mut self, id: &ObjectId) {
        let Some((o, state)) = self.look::<E>(Kind::Endpoint, id).await else {
            return;
        };
        match state {
            Ok(E::Init) => {
                let network = o.parent.clone().expect("an endpoint has a network");
                if self
                    .rt(Kind::Network)
                    .state_as_async::<N>(network)
                    .await
                    .ok()
                    != Some(N::Provisioned)
                {
                    return;
                }
                let _ = self
                    .act_with(Kind::Endpoint, id, EA::Allocate, || self.allocate_ip(id))
                    .await;
            }
            Ok(E::DeleteRequested) => {
                let _ = self
                    .act_with(Kind::Endpoint, id, EA::Deallocate, || {
                        self.set(id, |o| o.ip = None);
                    })
                    .await;
            }
            _ => {}
        }
    }

    // --- Droplet operator -----------------------------------------------------

    async fn droplet(&mut self, id: &ObjectId) {
        if self
            .rt(Kind::Droplet)
            .state_as_async::<Dr>(id.clone())
            .await
            .ok()
            == Some(Dr::Init)
            && let Outcome::Done = self.act(Kind::Droplet, id, DrA::Provision).await
        {
            // Dividers and bouncers may have waited for a droplet.
            let waiting = [
                (Kind::Divider, self.every_in(Kind::Divider, D::Init).await),
                (Kind::Bouncer, self.every_in(Kind::Bouncer, B::Init).await),
            ];
            for (kind, ids) in waiting {
                for id in ids {
                    self.place(kind, &id).await;
                }
            }
        }
    }

    async fn place(&mut self, kind: Kind, id: &ObjectId) {
        let init = match kind {
            Kind::Divider => {
                self.rt(kind).state_as_async::<D>(id.clone()).await.ok() == Some(D::Init)
            }
            _ => self.rt(kind).state_as_async::<B>(id.clone()).await.ok() == Some(B::Init),
        };
        if !init {
            return;
        }
        let droplets = self.every_in(Kind::Droplet, Dr::Provisioned).await;
        if droplets.is_empty() {
            return;
        }
        let droplet = droplets[self.next_droplet % droplets.len()].clone();
        self.next_droplet += 1;
        self.log(format!("picked {droplet} for {kind:?} {id}"));
        let effect = || self.set(id, |o| o.droplet = Some(droplet.clone()));
        let _ = match kind {
            Kind::Divider => self.act_with(kind, id, DA::Place, effect).await,
            _ => self.act_with(kind, id, BA::Place, effect).await,
        };
    }

    // --- Divider operator -----------------------------------------------------

    /// The parent (of `kind`) is in `deleting`: each of its parts (of `part`) in
    /// `provisioned` is asked to go with `request`. The Divider Operator does this
    /// for a VPC's dividers (VPC delete, step 4), the Bouncer Operator for a
    /// network's bouncers (network delete, step 7).
    async fn delete_parts<P: StateMachine + PartialEq, C: StateMachine + PartialEq>(
        &mut self,
        (kind, parent, deleting): (Kind, &ObjectId, P),
        (part, provisioned, request): (Kind, C, impl Into<ActionId> + Copy),
    ) {
        let Some(o) = self.cluster.object(parent) else {
            return;
        };
        if self.rt(kind).state_as_async::<P>(parent.clone()).await.ok() != Some(deleting) {
            return;
        }
        for id in &o.parts {
            if self.rt(part).state_as_async::<C>(id.clone()).await.ok() == Some(provisioned) {
                let _ = self.act(part, id, request).await;
            }
        }
    }

    async fn divider_done(&mut self, id: &ObjectId) {
        match self.rt(Kind::Divider).state_as_async::<D>(id.clone()).await {
            Ok(D::Provisioned) => {
                self.cache(Kind::Divider, id, true);
                // Bouncers of the VPC may have waited for it. (A VPC cannot be
                // deleting yet: it is provisioned only once its dividers are.)
                let vpc = self.cluster.object(id).and_then(|o| o.parent);
                if let Some(vpc) = vpc {
                    let networks = self
                        .cluster
                        .object(&vpc)
                        .map(|o| o.children)
                        .unwrap_or_default();
                    for network in networks {
                        for bouncer in self
                            .cluster
                            .object(&network)
                            .map(|o| o.parts)
                            .unwrap_or_default()
                        {
                            self.bouncer_dividers(&bouncer).await;
                        }
                    }
                }
            }
            Ok(D::Deprovisioned) => {
                // Divider delete step 6; the removal (and step 7) follows.
                let _ = self.act(Kind::Divider, id, DA::Delete).await;
            }
            _ => {}
        }
    }

    /// A bouncer is endpoint-ready: update it with the VPC's dividers and them with
    /// it, then provision it (bouncer create, steps 7-9); a bouncer whose endpoints
    /// are removed loses its dividers (network delete, steps 4-6).
    async fn bouncer_dividers(&mut self, id: &ObjectId) {
        let state = self.rt(Kind::Bouncer).state_as_async::<B>(id.clone()).await;
        if !matches!(state, Ok(B::EndpointReady | B::EndpointsRemoved)) {
            return;
        }
        let Some(dividers) = self.vpc_dividers(id) else {
            return;
        };
        if state == Ok(B::EndpointReady) {
            if !self.all_in(Kind::Divider, &dividers, D::Provisioned).await {
                return; // Back when a divider is provisioned.
            }
            let _ = self
                .act_with(Kind::Bouncer, id, BA::Provision, || {
                    self.link(id, &dividers, true);
                })
                .await;
        } else {
            let _ = self
                .act_with(Kind::Bouncer, id, BA::RemoveDividers, || {
                    self.link(id, &dividers, false);
                })
                .await;
        }
    }

    /// The dividers of the VPC of a bouncer's network.
    fn vpc_dividers(&self, bouncer: &ObjectId) -> Option<BTreeSet<ObjectId>> {
        self.cluster.with(|t| {
            let network = t.get(bouncer)?.parent.clone()?;
            let vpc = t.get(&network)?.parent.clone()?;
            Some(t.get(&vpc)?.parts.clone())
        })
    }

    /// Updates the topology's entry of `id`.
    fn set(&self, id: &ObjectId, mut update: impl FnMut(&mut Object)) {
        self.cluster.with(|t| t.get_mut(id).map(&mut update));
    }

    /// Gives `id` an address no other object has: one past the highest in use
    /// (read and written in one change of the topology, so two operators, even in
    /// two processes, never hand out the same one).
    fn allocate_ip(&self, id: &ObjectId) {
        let first = u32::from(Ipv4Addr::new(10, 0, 0, 2));
        let ip = self.cluster.with(|t| {
            let next = t
                .values()
                .filter_map(|o| o.ip.map(u32::from))
                .max()
                .map_or(first, |top| top + 1);
            let ip = Ipv4Addr::from(next);
            t.get_mut(id).map(|o| *o.ip.get_or_insert(ip))
        });
        if let Some(ip) = ip {
            self.log(format!("allocated {ip} to {id}"));
        }
    }

    /// Makes `id` and each of `others` know (or forget) each other.
    fn link(&self, id: &ObjectId, others: &BTreeSet<ObjectId>, know: bool) {
        self.cluster.with(|t| {
            for other in others {
                for (a, b) in [(id, other), (other, id)] {
                    if let Some(o) = t.get_mut(a) {
                        if know {
                            o.peers.insert(b.clone());
                        } else {
                            o.peers.remove(b);
                        }
                    }
                }
            }
        });
    }

    // --- Bouncer operator -----------------------------------------------------

    /// The bouncers of every network of a divider's VPC.
    fn vpc_bouncers(&self, divider: &ObjectId) -> BTreeSet<ObjectId> {
        self.cluster.with(|t| {
            let Some(vpc) = t.get(divider).and_then(|o| o.parent.clone()) else {
                return BTreeSet::new();
            };
            let networks = t.get(&vpc).map(|o| o.children.clone()).unwrap_or_default();
            networks
                .iter()
                .filter_map(|n| t.get(n))
                .flat_map(|n| n.parts.iter().cloned())
                .collect()
        })
    }

    /// Divider create steps 5-7, and divider delete steps 3-5.
    async fn divider_bouncers(&mut self, id: &ObjectId) {
        match self.rt(Kind::Divider).state_as_async::<D>(id.clone()).await {
            Ok(D::Placed) => {
                let bouncers = self.vpc_bouncers(id);
                let _ = self
                    .act_with(Kind::Divider, id, DA::Provision, || {
                        self.link(id, &bouncers, true);
                    })
                    .await;
            }
            Ok(D::DeleteRequested) => {
                let peers = self.cluster.object(id).map(|o| o.peers).unwrap_or_default();
                let _ = self
                    .act_with(Kind::Divider, id, DA::Deprovision, || {
                        self.link(id, &peers, false);
                    })
                    .await;
            }
            _ => {}
        }
    }

    async fn bouncer_done(&mut self, id: &ObjectId) {
        match self.rt(Kind::Bouncer).state_as_async::<B>(id.clone()).await {
            Ok(B::Provisioned) => {
                self.cache(Kind::Bouncer, id, true);
            }
            Ok(B::DividersRemoved) => {
                // Bouncer delete step 9; the removal follows.
                let _ = self.act(Kind::Bouncer, id, BA::Delete).await;
            }
            _ => {}
        }
    }

    /// Endpoint create steps 4-8 once the Endpoint Operator has updated the
    /// endpoint with its bouncers; endpoint delete steps 6-7.
    async fn endpoint_bouncers(&mut self, id: &ObjectId) {
        let Some((o, state)) = self.look::<E>(Kind::Endpoint, id).await else {
            return;
        };
        match state {
            Ok(E::Allocated) if !o.peers.is_empty() => {
                let _ = self
                    .act_with(Kind::Endpoint, id, EA::Provision, || {
                        self.link(id, &o.peers, true);
                        self.log(format!(
                            "told the CNI service: write {id} ({}) to its file",
                            o.ip.map_or("-".into(), |ip| ip.to_string())
                        ));
                    })
                    .await;
            }
            Ok(E::Deallocated) => {
                let _ = self
                    .act_with(Kind::Endpoint, id, EA::Delete, || {
                        self.link(id, &o.peers, false);
                    })
                    .await;
            }
            _ => {}
        }
    }

    // --- Endpoint operator ----------------------------------------------------

    /// Bouncer create steps 5-6 and 12-13; bouncer delete steps 3-5.
    async fn bouncer_endpoints(&mut self, id: &ObjectId) {
        let Some((o, state)) = self.look::<B>(Kind::Bouncer, id).await else {
            return;
        };
        let endpoints = o
            .parent
            .and_then(|n| self.cluster.object(&n))
            .map(|n| n.children)
            .unwrap_or_default();
        match state {
            Ok(B::Placed) => {
                let ready: BTreeSet<ObjectId> = self
                    .those_in(Kind::Endpoint, endpoints, E::Provisioned)
                    .await
                    .into_iter()
                    .collect();
                let _ = self
                    .act_with(Kind::Bouncer, id, BA::MarkEndpointReady, || {
                        self.link(id, &ready, true);
                    })
                    .await;
            }
            Ok(B::Provisioned) => {
                // Endpoints learn of the bouncer; services waiting for it go on.
                for child in endpoints {
                    self.endpoint(&child).await;
                    self.scaled_endpoint(&child).await;
                }
            }
            Ok(B::DeleteRequested) => {
                let endpoints: BTreeSet<ObjectId> = o
                    .peers
                    .iter()
                    .filter(|p| {
                        self.cluster
                            .object(p)
                            .is_some_and(|p| p.kind == Kind::Endpoint)
                    })
                    .cloned()
                    .collect();
                let _ = self
                    .act_with(Kind::Bouncer, id, BA::RemoveEndpoints, || {
                        self.link(id, &endpoints, false);
                    })
                    .await;
            }
            _ => {}
        }
    }

    /// Endpoint create step 5: the endpoint learns its network's provisioned
    /// bouncers (a data update, no state change).
    async fn endpoint(&mut self, id: &ObjectId) {
        let Some((o, state)) = self.look::<E>(Kind::Endpoint, id).await else {
            return;
        };
        let Ok(state @ (E::Allocated | E::Provisioned)) = state else {
            return;
        };
        if state == E::Provisioned {
            self.cache(Kind::Endpoint, id, true);
        }
        let bouncers = self.provisioned_bouncers(o.parent.as_ref()).await;
        let new: BTreeSet<ObjectId> = bouncers.difference(&o.peers).cloned().collect();
        if new.is_empty() {
            return;
        }
        let _ = self
            .act_with(Kind::Endpoint, id, EA::UpdateBouncers, || {
                self.link(id, &new, true);
            })
            .await;
    }

    /// Scaled endpoint create steps 1-3 (an IP, MAC, etc. for the service),
    /// update steps 1-3 (the backends taken in; the Bouncer Operator, watching,
    /// is called back by the write), and delete steps 1-2 and 7-8.
    async fn scaled_endpoint(&mut self, id: &ObjectId) {
        let kind = Kind::ScaledEndpoint;
        let Some((o, state)) = self.look::<S>(kind, id).await else {
            return;
        };
        match state {
            Ok(S::Init) => {
                // Once the network's bouncers are up, so that they can be told
                // about the service (a bouncer's provisioning brings us back).
                let bouncers = o
                    .parent
                    .and_then(|n| self.cluster.object(&n))
                    .map(|n| n.parts);
                let bouncers = bouncers.unwrap_or_default();
                if !self.all_in(Kind::Bouncer, &bouncers, B::Provisioned).await {
                    return;
                }
                let backends = o.backends.clone();
                let done = self
                    .act_with(kind, id, SA::Provision, || {
                        self.allocate_ip(id);
                        self.set(id, |o| o.backends_seen = Some(backends.clone()));
                    })
                    .await;
                if let Outcome::Done = done {
                    self.cache(kind, id, true);
                }
            }
            Ok(S::Provisioned) if o.delete_requested => {
                let _ = self
                    .act_with(kind, id, SA::Deallocate, || self.set(id, |o| o.ip = None))
                    .await;
            }
            Ok(S::Provisioned) if o.backends_seen.as_ref() != Some(&o.backends) => {
                let backends = o.backends.clone();
                let _ = self
                    .act_with(kind, id, SA::UpdateBackends, || {
                        self.set(id, |o| o.backends_seen = Some(backends.clone()));
                    })
                    .await;
            }
            Ok(S::Detached) => {
                // Delete step 7; the removal (and step 8) follows.
                let _ = self.act(kind, id, SA::Delete).await;
            }
            _ => {}
        }
    }

    /// Scaled endpoint update steps 4-5 (at its creation too: every bouncer of
    /// the network learns the new service) and delete steps 4-6.
    async fn scaled_endpoint_bouncers(&mut self, id: &ObjectId) {
        let kind = Kind::ScaledEndpoint;
        let Some((o, state)) = self.look::<S>(kind, id).await else {
            return;
        };
        match state {
            Ok(S::Provisioned)
                if o.backends_seen.is_some() && o.backends_told != o.backends_seen =>
            {
                let bouncers = self.provisioned_bouncers(o.parent.as_ref()).await;
                let told = o.backends_seen.clone();
                let _ = self
                    .act_with(kind, id, SA::UpdateBouncers, || {
                        self.link(id, &bouncers, true);
                        self.set(id, |o| o.backends_told = told.clone());
                    })
                    .await;
            }
            Ok(S::Deallocated) => {
                let _ = self
                    .act_with(kind, id, SA::Detach, || self.link(id, &o.peers, false))
                    .await;
            }
            _ => {}
        }
    }

    /// The provisioned bouncers of `network`.
    async fn provisioned_bouncers(&self, network: Option<&ObjectId>) -> BTreeSet<ObjectId> {
        let bouncers = network
            .and_then(|n| self.cluster.object(n))
            .map(|n| n.parts)
            .unwrap_or_default();
        let provisioned = self.those_in(Kind::Bouncer, bouncers, B::Provisioned).await;
        provisioned.into_iter().collect()
    }

    /// The state of `id` of `kind`, read without blocking the thread.
    /// The object's entry in the topology and its state, read in that order, for
    /// a step that needs both; `None` when the topology no longer has it.
    async fn look<M: StateMachine>(
        &self,
        kind: Kind,
        id: &ObjectId,
    ) -> Option<(Object, Result<M, RuntimeError>)> {
        let o = self.cluster.object(id)?;
        Some((o, self.rt(kind).state_as_async::<M>(id.clone()).await))
    }

    async fn state_of<M: StateMachine>(&self, kind: Kind, id: &ObjectId) -> Option<M> {
        self.rt(kind).state_as_async::<M>(id.clone()).await.ok()
    }

    /// Every object of `kind` in `state`, in id order, read at once: on etcd
    /// one request, where [`those_in`](Self::those_in) makes one per object.
    async fn every_in<M: StateMachine + PartialEq>(&self, kind: Kind, state: M) -> Vec<ObjectId> {
        let states = self.rt(kind).states_as_async::<M>().await;
        states
            .unwrap_or_default()
            .into_iter()
            .filter(|(_, found)| found.as_ref().is_ok_and(|found| *found == state))
            .map(|(id, _)| id)
            .collect()
    }

    /// Those of `ids` of `kind` in `state`, in order.
    async fn those_in<M: StateMachine + PartialEq>(
        &self,
        kind: Kind,
        ids: impl IntoIterator<Item = ObjectId>,
        state: M,
    ) -> Vec<ObjectId> {
        let mut found = Vec::new();
        for id in ids {
            if self.state_of(kind, &id).await == Some(state) {
                found.push(id);
            }
        }
        found
    }

    /// Whether every id in `ids` is in `state` (an empty set is not), as the
    /// free [`all_in`] the guards use, awaited.
    async fn all_in<M: StateMachine + PartialEq>(
        &self,
        kind: Kind,
        ids: &BTreeSet<ObjectId>,
        state: M,
    ) -> bool {
        !ids.is_empty() && self.those_in(kind, ids.iter().cloned(), state).await.len() == ids.len()
    }

    /// Whether no id in `ids` is left, as the free [`none_left`] the guards
    /// use, awaited.
    async fn none_left(&self, kind: Kind, ids: &BTreeSet<ObjectId>) -> bool {
        for id in ids {
            let found = self.rt(kind).get_async(id.clone()).await;
            if !matches!(found, Err(RuntimeError::NotFound { .. })) {
                return false;
            }
        }
        true
    }

    // --- CNI service ----------------------------------------------------------

    /// Endpoint delete steps 1-2: the pod is gone, the CNI service deletes the
    /// endpoint object.
    async fn cni(&mut self, id: &ObjectId) {
        let Some(o) = self.cluster.object(id) else {
            return;
        };
        if o.delete_requested
            && self
                .rt(Kind::Endpoint)
                .state_as_async::<E>(id.clone())
                .await
                .ok()
                == Some(E::Provisioned)
        {
            let _ = self.act(Kind::Endpoint, id, EA::RequestDelete).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default network's creation cut off between the topology and the
    /// record (the network operator killed) is finished by the operator's
    /// next look, not left without a record for ever.
    #[tokio::test(flavor = "current_thread")]
    async fn a_default_network_cut_off_before_its_record_is_finished() {
        let mizar = Cluster::with_defaults();
        mizar.create_vpc(DEFAULT_VPC).unwrap();
        let network = ObjectId::from(DEFAULT_NETWORK);
        (mizar.reserve(
            Kind::Network,
            &network,
            Some((Kind::Vpc, DEFAULT_VPC)),
            false,
        ))
        .unwrap();
        assert!(mizar.runtime(Kind::Network).get(network.clone()).is_err());
        mizar.create_droplet("droplet-0").unwrap();
        let operators = mizar.start();
        let up =
            |c: &Cluster| c.state(Kind::Network, DEFAULT_NETWORK).as_deref() == Some("Provisioned");
        let made = mizar.wait_until(Duration::from_secs(20), up).await;
        operators.stop().await;
        assert!(made, "the default network stalled: {:#?}", mizar.trace());
    }

    /// A creation cut off between the topology and the record (its process
    /// killed) is finished by the next one; a finished one is not made twice.
    #[test]
    fn a_creation_cut_off_before_its_record_is_finished_by_the_next() {
        let mizar = Cluster::new();
        let id = ObjectId::from("vpc-cut");
        mizar.with(|t| t.insert(id.clone(), Object::new(Kind::Vpc, None)));
        assert!(mizar.runtime(Kind::Vpc).get(id.clone()).is_err());

        mizar.create_vpc("vpc-cut").unwrap();
        assert_eq!(mizar.state(Kind::Vpc, "vpc-cut").as_deref(), Some("Init"));
        assert!(matches!(
            mizar.create_vpc("vpc-cut"),
            Err(MizarError::Refused(RuntimeError::Exists { .. }))
        ));
        // The same id under another kind is no unfinished creation.
        assert!(matches!(
            mizar.create_droplet("vpc-cut"),
            Err(MizarError::Refused(RuntimeError::Exists { .. }))
        ));
    }

    /// A life in the archive that names a state the spec does not have (a
    /// rename without `renamed_from`) is an error of `lives`, naming the
    /// object and the name, and a breach `violations` reports; nothing panics.
    #[test]
    fn an_archived_life_the_spec_cannot_read_is_reported() {
        let mizar = Cluster::new();
        let id = ObjectId::from("vpc-old");
        mizar.create_vpc("vpc-old").unwrap();
        let life = mizar.runtime(Kind::Vpc).history(id.clone()).unwrap();
        let key = archive_key(Kind::Vpc, &id);
        let codec = &mizar.inner.codecs[Kind::Vpc as usize];
        mizar.inner.archive.keep(&key, codec, &life);
        // The archived creation, as a spec that called Init "New" wrote it.
        mizar.inner.archive.lives.with_one(&key, |lives| {
            let lives = lives.as_mut().unwrap();
            lives[0][0].to = "New".into();
        });
        match mizar.lives(Kind::Vpc, "vpc-old") {
            Err(MizarError::Archive { kind, id, source }) => {
                assert_eq!(
                    (kind, id.as_str(), source.name.as_str()),
                    (Kind::Vpc, "vpc-old", "New")
                );
            }
            other => panic!("{other:?}"),
        }
        let found = mizar.violations();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("Vpc vpc-old: history unreadable: the archive of Vpc vpc-old: "),
            "{found:?}"
        );
    }

    /// A removal cut off between the archive and the store (its process
    /// killed): the archive has the life and the store the record, and the
    /// life reads once; the operator's next look removes the record, and the
    /// archive then holds that life once, whole, its removal last.
    #[tokio::test(flavor = "current_thread")]
    async fn a_removal_cut_off_after_the_archive_is_made_by_the_next_look() {
        let mizar = Cluster::new();
        let id = ObjectId::from("vpc/divider-0");
        mizar
            .create(Kind::Divider, id.as_str(), None, &Operator::Vpc.actor())
            .unwrap();
        let dividers = mizar.runtime(Kind::Divider);
        for (op, action) in [
            (Operator::Droplet, DA::Place),
            (Operator::Bouncer, DA::Provision),
            (Operator::Divider, DA::RequestDelete),
            (Operator::Bouncer, DA::Deprovision),
            (Operator::Divider, DA::Delete),
        ] {
            dividers.run(id.clone(), &op.actor(), action).unwrap();
        }
        let history = dividers.history(id.clone()).unwrap();
        let codec = &mizar.inner.codecs[Kind::Divider as usize];
        let key = archive_key(Kind::Divider, &id);
        mizar.inner.archive.keep(&key, codec, &history);
        assert_eq!(
            mizar.lives(Kind::Divider, id.as_str()).unwrap(),
            std::slice::from_ref(&history)
        );
        assert_eq!(mizar.removed_in(Kind::Divider, id.as_str()), None);

        let operators = mizar.start_operators(&[Operator::Divider]).unwrap();
        let removed = |c: &Cluster| c.removed_in(Kind::Divider, "vpc/divider-0").is_some();
        assert!(
            mizar.wait_until(Duration::from_secs(30), removed).await,
            "{:#?}",
            mizar.trace()
        );
        operators.stop().await;
        let lives = mizar.lives(Kind::Divider, id.as_str()).unwrap();
        assert_eq!(lives.len(), 1, "{lives:?}");
        assert_eq!(lives[0][..history.len()], history[..]);
        let removal = &lives[0][history.len()..];
        assert_eq!(removal.len(), 1, "{removal:?}");
        assert_eq!(
            (removal[0].kind, &*removal[0].actor),
            (EntryKind::Removed, "divider-operator")
        );
        assert_eq!(
            mizar.removed_in(Kind::Divider, id.as_str()).as_deref(),
            Some("Deleted")
        );
        assert_eq!(mizar.violations(), Vec::<String>::new());
    }
}
