//! KusionStack's PodOpsLifecycle (`podopslifecycle.md`) on the fsm runtime.
//!
//! One pod; each operation on it (an id with a type) is an object of the
//! `podopslifecycle` machine, so several operations are several sub-machines of the
//! one pod, moving at once. The pod's labels and finalizers are the data the seed's
//! controllers read and write; each transition changes them inside the action's
//! window (between the runtime's start and completion), so whoever the new phase
//! wakes finds the labels already there.
//!
//! The controllers (PodOpsLifecycle, PodTransitionRule, the service controller) are
//! tokio tasks, level-triggered: any change of an operation or of the pod makes
//! them look at every operation of the pod. Operation controllers are callers of
//! [`OperationController`].
//!
//! An operation ends as the seed's do, its labels removed: once they are gone
//! (`available`, `undone`), PodOpsLifecycle removes the operation too, so that a
//! pod's controllers look at the operations in flight, not at every one it ever
//! had. Before it removes one, it copies the operation's history into the API
//! server's archive, so that its phases can still be traced and checked
//! ([`PodOps::lives`], [`PodOps::settled_violations`]); the pod serves again
//! only once every ended operation is removed.
//!
//! The trace ([`PodOps::trace`]) is read from the operations' lives, so every
//! process that opens the pod sees every step, whichever process took it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use crate::support::lock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fsm::StateMachine;
use fsm_etcd::{AnyStore, EtcdAccess};
use fsm_runtime::wire::{Codec, UnknownName};
use fsm_runtime::{
    Actor, Clock, Entry, EntryKind, Lagged, MemoryStore, ObjectId, RuntimeError, Store, StoreError,
};
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::api::{self, ApiError, ApiServer, Archive, EtcdApi, LivesError, Removal};

/// The runtime of the operations, on memory or etcd.
pub type Runtime = fsm_runtime::Runtime<AnyStore>;

use crate::machines::{PodOpsState as S, PodOpsStateAction as A};

/// The labels' domain.
pub const DOMAIN: &str = "podopslifecycle.kusionstack.io";
/// "The special label `podopslifecycle.kusionstack.io/service-available` indicate a
/// pod is available to serve."
pub const SERVICE_AVAILABLE: &str = "podopslifecycle.kusionstack.io/service-available";
/// "Protection finalizer names must have prefix `prot.podopslifecycle.kusionstack.io`."
pub const PROTECTION: &str = "prot.podopslifecycle.kusionstack.io";
/// The service controller's protection finalizer.
pub const SERVICE_FINALIZER: &str = "prot.podopslifecycle.kusionstack.io/service-controller";

/// The label prefixes keyed by an operation's id.
const ID_LABELS: [&str; 12] = [
    "operating",
    "operation-type",
    "pre-check",
    "pre-checked",
    "prepare",
    "operate",
    "operated",
    "done-operation-type",
    "post-check",
    "post-checked",
    "complete",
    "undo-operation-type",
];

/// The label `<phase>.podopslifecycle.kusionstack.io/<key>`.
pub fn label(phase: &str, key: &str) -> String {
    format!("{phase}.{DOMAIN}/{key}")
}

/// The pod: labels, finalizers, the readiness gate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pod {
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its finalizers.
    pub finalizers: BTreeSet<String>,
    /// The readiness gate `pod.kusionstack.io/service-ready`.
    pub service_ready: bool,
    /// The protection finalizers the pod must carry to serve.
    pub protections: BTreeSet<String>,
}

impl Pod {
    /// Whether the pod carries a label keyed by operation `id`.
    pub fn has_id(&self, id: &str) -> bool {
        ID_LABELS
            .iter()
            .any(|p| self.labels.contains_key(&label(p, id)))
    }

    /// The ids of the operations that have labels on the pod.
    pub fn operation_ids(&self) -> BTreeSet<String> {
        self.labels
            .keys()
            .filter_map(|k| {
                let (phase, id) = k.split_once(&format!(".{DOMAIN}/"))?;
                (ID_LABELS.contains(&phase)).then(|| id.to_owned())
            })
            .collect()
    }

    /// Whether an operation is between prepare and operated.
    pub fn preparing(&self) -> bool {
        self.operation_ids()
            .iter()
            .any(|id| self.labels.contains_key(&label("prepare", id)))
    }

    /// Whether a protection finalizer is present.
    pub fn protected(&self) -> bool {
        self.finalizers.iter().any(|f| f.starts_with(PROTECTION))
    }

    /// An operation the validating webhook would refuse: one of
    /// `operating/<id>` and `operation-type/<id>` without the other (they "must be
    /// added or removed at the same time"); the label present and the one missing.
    pub fn unpaired(&self) -> Option<(String, String)> {
        self.operation_ids().into_iter().find_map(|id| {
            let [operating, kind] = [label("operating", &id), label("operation-type", &id)];
            match (
                self.labels.contains_key(&operating),
                self.labels.contains_key(&kind),
            ) {
                (true, false) => Some((operating, kind)),
                (false, true) => Some((kind, operating)),
                _ => None,
            }
        })
    }

    fn remove_id(&mut self, id: &str) {
        for phase in ID_LABELS {
            self.labels.remove(&label(phase, id));
        }
    }
}

/// What the API server keeps of the pod: the pod, each operation's type, and
/// the broken promises its writers saw (kept with the pod, so that every process
/// that writes it reports them to whoever reads it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodDoc {
    /// The pod.
    pub pod: Pod,
    /// Each operation's type, by its id.
    pub types: BTreeMap<String, String>,
    /// Broken promises: a controller's change the webhook refused, a label or
    /// finalizer where the seed forbids it.
    pub violations: Vec<String>,
}

/// A rule of PodTransitionRule: whether an operation of its type may go on.
pub type Rule = Arc<dyn Fn(&Pod) -> bool + Send + Sync>;

/// A line of the trace: an operation's phase change, or a controller's note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Unix time in microseconds (unique: the pod's clock never repeats).
    pub at: u64,
    /// The operation, if the line is about one.
    pub id: Option<String>,
    /// Who.
    pub who: String,
    /// What.
    pub what: String,
}

/// The system clock, made strictly increasing so that phases of different
/// operations order as they happened.
#[derive(Debug, Clone, Default)]
struct UniqueClock(Arc<AtomicU64>);

impl UniqueClock {
    fn micros(&self) -> u64 {
        crate::support::unique_micros(&self.0)
    }
}

impl Clock for UniqueClock {
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_micros(self.micros())
    }
}

/// What the trace says of a step of an operation's history (`None`: a step
/// it leaves out, an action started, which its completion or failure says).
fn step(m: &fsm::Machine, e: &Entry) -> Option<String> {
    let state = &*m.state(e.to).name;
    let action = e.action.map_or("", |a| &*m.action(a).name);
    Some(match e.kind {
        EntryKind::Created => format!("begin -> {state}"),
        EntryKind::Completed => format!("{action} -> {state}"),
        EntryKind::Failed => format!("{action} failed -> {state}"),
        EntryKind::Abandoned => format!("{action} abandoned (its holder gone)"),
        EntryKind::Healed => format!("{action} rolled back by the healer -> {state}"),
        EntryKind::Removed => "removed, its history archived".to_owned(),
        EntryKind::Started => return None,
    })
}

fn micros(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PodOpsError {
    /// The runtime refused (see its message).
    #[error(transparent)]
    Refused(#[from] RuntimeError),
    /// A store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The pod in etcd could not be reached.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The validating webhook refused a change of the pod's labels: the operating
    /// and operation-type labels of an operation are added and removed together.
    #[error(
        "validating webhook refused {who}'s change to {pod}: it leaves {present} without {missing}; the two are added and removed together"
    )]
    Webhook {
        /// The pod.
        pod: String,
        /// Who changed it.
        who: String,
        /// The label the change would leave.
        present: String,
        /// Its missing pair.
        missing: String,
    },
    /// The archive holds a life of the operation written by a spec that named
    /// a state or an action this one does not have.
    #[error("the archive of operation {id}: {source}")]
    Archive {
        /// The operation.
        id: ObjectId,
        /// The name the spec does not have.
        source: UnknownName,
    },
    /// The operation controller runs one operation of its type at a time.
    #[error("an operation of type {kind} is already running on {pod}: {running}")]
    TypeBusy {
        /// The pod.
        pod: String,
        /// The type.
        kind: String,
        /// The operation running.
        running: String,
    },
}

struct Inner {
    name: String,
    runtime: Runtime,
    /// The pod's document, under its name.
    doc: Arc<ApiServer<PodDoc>>,
    /// The lives of removed operations, by id.
    archive: Archive,
    /// The machine's codec, for the archive.
    codec: Codec,
    rules: Arc<Mutex<HashMap<String, Vec<Rule>>>>,
    clock: UniqueClock,
    /// This process's notes on the pod, for the trace (the phase changes are
    /// read from the operations' lives).
    notes: Mutex<Vec<Line>>,
    /// How many times each guard refused.
    refusals: Mutex<HashMap<String, usize>>,
    /// Bumped at every change of the pod: wakes the controllers.
    pod_version: watch::Sender<u64>,
    /// Told after every line of the trace.
    changed: Notify,
}

/// One pod and the operations on it. Cloning it is cheap.
#[derive(Clone)]
pub struct PodOps {
    inner: Arc<Inner>,
}

impl PodOps {
    /// A pod named `name`, serving: the service controller's protection finalizer
    /// on, ready, `service-available`.
    pub fn new(name: &str) -> Self {
        let doc = ApiServer::Memory(Mutex::default());
        let store = AnyStore::Memory(Box::new(MemoryStore::new()));
        let ops = Self::build(name, doc, Archive::memory(), store).expect("memory stores open");
        ops.init();
        ops
    }

    /// The pod `name` on `etcd`, under `prefix`: its operations
    /// under `<prefix>operations/`, its document under `<prefix>pods/`, the
    /// lives of its removed operations under `<prefix>archive/`. The
    /// first to open it creates it serving; every process opened on the same
    /// prefix shares it. Blocks while it connects: from async code, call it
    /// through `spawn_blocking`.
    pub fn on_etcd(
        name: &str,
        etcd: &EtcdAccess,
        prefix: &str,
        lease: Duration,
    ) -> Result<Self, PodOpsError> {
        let store = (etcd.store(&format!("{prefix}operations/")))
            .lease_ttl(lease)
            .connect()?;
        let api = ApiServer::Etcd(Box::new(EtcdApi::connect(etcd, format!("{prefix}pods/"))?));
        let archive = Archive::on_etcd(etcd, format!("{prefix}archive/"))?;
        let ops = Self::build(name, api, archive, AnyStore::Etcd(store))?;
        ops.init();
        Ok(ops)
    }

    /// Connects the operations' store and the pod's document and archive on
    /// etcd again, as `etcd` says: renewed TLS files or another user, without
    /// a restart (the chaos processes do on SIGHUP). Each connection is
    /// tried; one refused stays as it was, and the first refusal is
    /// answered. Nothing to do in memory. Blocks: from async code, call it
    /// through `spawn_blocking`.
    pub fn reconnect(&self, etcd: &EtcdAccess) -> Result<(), PodOpsError> {
        let inner = &self.inner;
        crate::api::reconnect_all(etcd, [&inner.runtime], &inner.doc, &inner.archive)
    }

    /// Puts the pod in the API server, serving, unless it is there.
    fn init(&self) {
        let name = ObjectId::from(self.inner.name.as_str());
        self.inner.doc.with(|docs| {
            docs.entry(name.clone()).or_insert_with(|| {
                let mut pod = Pod {
                    service_ready: true,
                    ..Pod::default()
                };
                pod.protections.insert(SERVICE_FINALIZER.to_owned());
                pod.finalizers.insert(SERVICE_FINALIZER.to_owned());
                pod.labels
                    .insert(SERVICE_AVAILABLE.to_owned(), "true".into());
                PodDoc {
                    pod,
                    ..PodDoc::default()
                }
            });
        });
    }

    fn build(
        name: &str,
        doc: ApiServer<PodDoc>,
        archive: Archive,
        store: AnyStore,
    ) -> Result<Self, PodOpsError> {
        let doc = Arc::new(doc);
        let key = ObjectId::from(name);
        // What the guards read: the pod's document as it is now.
        let read = {
            let (doc, key) = (doc.clone(), key.clone());
            move || doc.with(|docs| docs.get(&key).cloned().unwrap_or_default())
        };
        let rules: Arc<Mutex<HashMap<String, Vec<Rule>>>> = Arc::default();
        let clock = UniqueClock::default();
        let runtime = Runtime::builder_of::<S>(store)
            .clock(clock.clone())
            .guard("rules_passed", {
                let (read, rules) = (read.clone(), rules.clone());
                move |ctx| {
                    let doc = read();
                    let kind = doc.types.get(ctx.id.as_str()).cloned().unwrap_or_default();
                    let rules = lock(&rules).get(&kind).cloned().unwrap_or_default();
                    rules.iter().all(|rule| rule(&doc.pod))
                }
            })
            .guard("finalizers_removed", {
                let read = read.clone();
                move |_| !read().pod.protected()
            })
            // "When all the operating.podopslifecycle.kusionstack.io/<id>=<time>
            // labels have been removed".
            .guard("all_operated", {
                let read = read.clone();
                move |_| {
                    let pod = read().pod;
                    !pod.operation_ids()
                        .iter()
                        .any(|id| pod.labels.contains_key(&label("operating", id)))
                }
            })
            // "Once all the post-checked.podopslifecycle.kusionstack.io/<id>=<time>
            // added": every operation on the pod, not only those past operated.
            .guard("all_post_checked", {
                let read = read.clone();
                move |_| {
                    let pod = read().pod;
                    pod.operation_ids().iter().all(|id| {
                        pod.labels.contains_key(&label("post-checked", id))
                            || pod.labels.contains_key(&label("undo-operation-type", id))
                    })
                }
            })
            .guard("finalizers_added", {
                let read = read.clone();
                move |_| {
                    let pod = read().pod;
                    pod.protections.is_subset(&pod.finalizers)
                }
            })
            .build()?;
        Ok(PodOps {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                codec: Codec::new(runtime.machine()),
                runtime,
                doc,
                archive,
                rules,
                clock,
                notes: Mutex::default(),
                refusals: Mutex::default(),
                pod_version: watch::channel(0).0,
                changed: Notify::new(),
            }),
        })
    }

    /// The pod's document, as it is now: the pod, each operation's type, the
    /// broken promises its writers saw.
    pub fn doc(&self) -> PodDoc {
        let key = ObjectId::from(self.inner.name.as_str());
        self.inner
            .doc
            .with(|docs| docs.get(&key).cloned().unwrap_or_default())
    }

    /// Whether the pod lives on etcd (shared by processes).
    pub fn is_shared(&self) -> bool {
        matches!(&*self.inner.doc, ApiServer::Etcd(_))
    }

    /// The runtime holding the operations.
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// A copy of the pod.
    pub fn pod(&self) -> Pod {
        self.doc().pod
    }

    /// Every operation on the pod, in id order, with its phase (`None`: its
    /// record could not be read), read at once: on etcd one request, not one per
    /// operation.
    async fn operations(&self) -> Vec<(ObjectId, Option<S>)> {
        let states = self.inner.runtime.states_as_async::<S>().await;
        states
            .unwrap_or_default()
            .into_iter()
            .map(|(id, phase)| (id, phase.ok()))
            .collect()
    }

    /// [`phase`](Self::phase), the store's answer awaited.
    pub async fn phase_async(&self, id: &str) -> Option<S> {
        self.inner.runtime.state_as_async::<S>(id).await.ok()
    }

    /// The phase of operation `id` (`None`: it has no record, never begun or
    /// removed; see [`removed_in`](Self::removed_in)).
    pub fn phase(&self, id: &str) -> Option<S> {
        self.inner.runtime.state_as::<S>(id).ok()
    }

    /// The ids of the removed operations, their lives kept in the API
    /// server's archive, in order. (An id used again is also among the
    /// operations with a record.)
    pub fn removed(&self) -> Vec<ObjectId> {
        let mut ids = self.inner.archive.keys();
        ids.sort();
        ids
    }

    /// Every operation the pod ever had: those with a record and those
    /// removed ([`removed`](Self::removed)), in order.
    pub fn ever(&self) -> Vec<ObjectId> {
        let mut ids = self.inner.runtime.store().ids().unwrap_or_default();
        ids.extend(self.removed());
        ids.sort();
        ids.dedup();
        ids
    }

    /// Every life of operation `id`, oldest first, each one's history: those
    /// the archive keeps, each ending in its removal (one the process that
    /// removed it died before noting is read from the store, until the id
    /// is created again), then the record's, if there is one.
    pub fn lives(&self, id: &str) -> Result<Vec<Vec<Entry>>, PodOpsError> {
        let id = ObjectId::from(id);
        let inner = &self.inner;
        let lives = (inner.archive).lives(&id, &inner.codec, &inner.runtime, &id);
        lives.map_err(|e| match e {
            LivesError::Archive(source) => PodOpsError::Archive { id, source },
            LivesError::Record(e) => e.into(),
        })
    }

    /// The phase operation `id` was removed in (`available` or `undone`):
    /// `None` while it has a record, or if it never had one.
    pub fn removed_in(&self, id: &str) -> Option<S> {
        if self.inner.runtime.get(id).is_ok() {
            return None;
        }
        let lives = self.lives(id).ok()?;
        S::from_id(api::removed_in(&lives)?)
    }

    /// The trace so far, in time order: every step of every operation the
    /// pod ever had, read from their lives (so on etcd, the steps of every
    /// process: its creation, each action completed or failed, each rollback
    /// of the healer, its removal), and this process's notes on the pod (an
    /// undone operation's labels removed, `service-available` added, the
    /// service controller's finalizer back after an undo).
    pub fn trace(&self) -> Vec<Line> {
        let mut trace = lock(&self.inner.notes).clone();
        let m = self.inner.runtime.machine();
        for id in self.ever() {
            let line = |at, who: &str, what| Line {
                at,
                id: Some(id.to_string()),
                who: who.to_owned(),
                what,
            };
            match self.lives(id.as_str()) {
                Ok(lives) => {
                    let steps = lives.iter().flatten();
                    trace.extend(
                        steps.filter_map(|e| Some(line(micros(e.at), &e.actor, step(m, e)?))),
                    );
                }
                Err(e) => {
                    let at = self.inner.clock.micros();
                    trace.push(line(at, "trace", format!("history unreadable: {e}")));
                }
            }
        }
        trace.sort_by_key(|l| l.at);
        trace
    }

    /// Broken promises seen while the pod changed: a protection finalizer present
    /// while the pod is operated on, or `service-available` while an operation is in
    /// flight. A test asserts there are none.
    pub fn violations(&self) -> Vec<String> {
        self.doc().violations
    }

    /// What the seed promises once every operation has ended, checked over the
    /// pod and every life of every operation it ever had: the broken promises
    /// its writers kept with the pod ([`violations`](Self::violations)), every
    /// history a path of the machine, no operation half-done or left behind
    /// (each one removed by PodOpsLifecycle in `available` or `undone`), no
    /// operation's label or type left on the pod, every protection finalizer
    /// back, and the pod `service-available`. Answers every breach found.
    pub fn settled_violations(&self) -> Vec<String> {
        let doc = self.doc();
        let mut found = doc.violations.clone();
        let machine = self.inner.runtime.machine();
        let remover = Controller::Lifecycle.role();
        for id in self.ever() {
            let (name, lives) = (format!("operation {id}"), self.lives(id.as_str()));
            let Some(lives) = api::checked_lives(machine, &name, lives, &mut found) else {
                continue;
            };
            let removals = lives.iter().flatten();
            for removal in removals.filter(|e| e.kind == EntryKind::Removed) {
                if *removal.actor != *remover {
                    let by = &removal.actor;
                    found.push(format!("operation {id} removed by {by}, not {remover}"));
                }
            }
            // Without a record, its last life ends in its removal.
            let ended = api::removed_in(&lives).and_then(S::from_id);
            match (self.phase(id.as_str()), ended) {
                (None, Some(S::Available | S::Undone)) => {}
                (None, ended) => found.push(format!("operation {id} removed in {ended:?}")),
                (Some(phase), _) => found.push(format!("operation {id} left in {phase:?}")),
            }
        }
        if !doc.types.is_empty() {
            found.push(format!("types of operations {:?} left", doc.types));
        }
        let pod = doc.pod;
        if !pod.operation_ids().is_empty() {
            found.push(format!(
                "labels of operations {:?} left on the pod",
                pod.operation_ids()
            ));
        }
        for lost in pod.protections.difference(&pod.finalizers) {
            found.push(format!("the protection finalizer {lost} was lost"));
        }
        if !pod.labels.contains_key(SERVICE_AVAILABLE) {
            found.push("the pod is not service-available again".to_owned());
        }
        found
    }

    /// How many times the guard `name` has refused a phase change so far.
    pub fn refusals(&self, name: &str) -> usize {
        lock(&self.inner.refusals).get(name).copied().unwrap_or(0)
    }

    /// Adds a PodTransitionRule for operations of type `kind`.
    pub fn rule(&self, kind: &str, rule: impl Fn(&Pod) -> bool + Send + Sync + 'static) {
        lock(&self.inner.rules)
            .entry(kind.to_owned())
            .or_default()
            .push(Arc::new(rule));
        self.wake();
    }

    /// Another controller's protection: the pod serves only with `finalizer` on.
    pub fn protect(&self, finalizer: &str) {
        self.apply("user", |pod, _| {
            pod.protections.insert(finalizer.to_owned());
            pod.finalizers.insert(finalizer.to_owned());
        });
    }

    /// Changes the pod as `who`, through the validating webhook: a change that
    /// adds or removes one of an operation's `operating` and `operation-type` labels
    /// without the other is refused, and the pod stays as it was. Checks the
    /// promises and wakes the controllers if anything changed. On etcd, `change`
    /// runs again on fresh data when another process wrote the pod meanwhile.
    pub fn edit<R>(
        &self,
        who: &str,
        mut change: impl FnMut(&mut Pod) -> R,
    ) -> Result<R, PodOpsError> {
        self.write(who, |pod, _| change(pod))
    }

    /// [`edit`](Self::edit), where `change` also notes broken promises in its
    /// second argument: they are kept with the pod in the same write.
    fn write<R>(
        &self,
        who: &str,
        mut change: impl FnMut(&mut Pod, &mut Vec<String>) -> R,
    ) -> Result<R, PodOpsError> {
        let key = ObjectId::from(self.inner.name.as_str());
        let result = self.inner.doc.with(|docs| {
            let doc = docs.entry(key.clone()).or_default();
            let mut pod = doc.pod.clone();
            let mut broken = Vec::new();
            let r = change(&mut pod, &mut broken);
            if let Some((present, missing)) = pod.unpaired() {
                return Err(PodOpsError::Webhook {
                    pod: self.inner.name.clone(),
                    who: who.to_owned(),
                    present,
                    missing,
                });
            }
            if pod.labels.contains_key(SERVICE_AVAILABLE) && !pod.operation_ids().is_empty() {
                broken.push(format!(
                    "{who} left service-available on while operations {:?} have labels",
                    pod.operation_ids()
                ));
            }
            let changed = pod != doc.pod;
            doc.pod = pod;
            doc.violations.extend(broken);
            Ok((r, changed))
        });
        let (r, changed) = result?;
        if changed {
            self.wake();
        }
        Ok(r)
    }

    /// A change by one of the seed's controllers: they never break the webhook's
    /// rule, so a refusal is recorded as a broken promise.
    fn apply<R>(
        &self,
        who: &str,
        change: impl FnMut(&mut Pod, &mut Vec<String>) -> R,
    ) -> Option<R> {
        self.write(who, change)
            .map_err(|refused| self.violation(refused.to_string()))
            .ok()
    }

    /// Makes the controllers look at the pod again.
    fn wake(&self) {
        self.inner.pod_version.send_modify(|v| *v += 1);
    }

    /// Keeps a broken promise with the pod.
    fn violation(&self, what: String) {
        let key = ObjectId::from(self.inner.name.as_str());
        self.inner.doc.with(|docs| {
            docs.entry(key.clone())
                .or_default()
                .violations
                .push(what.clone())
        });
    }

    /// Notes what `who` did to the pod (not a step of an operation: those
    /// are in its history), for the trace.
    fn note(&self, id: Option<&str>, who: &str, what: String) {
        lock(&self.inner.notes).push(Line {
            at: self.inner.clock.micros(),
            id: id.map(str::to_owned),
            who: who.to_owned(),
            what,
        });
        self.stepped();
    }

    /// Wakes whoever waits for the pod's next step ([`wait_until`](Self::wait_until)).
    fn stepped(&self) {
        self.inner.changed.notify_waiters();
    }

    fn now(&self) -> String {
        (self.inner.clock.micros() / 1_000_000).to_string()
    }

    fn kind_of(&self, id: &str) -> String {
        self.doc().types.get(id).cloned().unwrap_or_default()
    }

    /// Removes operation `id`, ended (its state one the spec lets `actor`
    /// remove it in) and its labels gone: its history to the archive, its
    /// type out of the pod's document, then its record, at the version
    /// archived (see [`Archive::remove`]).
    async fn remove(&self, actor: &Actor, id: &str) -> Result<(), RuntimeError> {
        let (inner, id) = (&self.inner, ObjectId::from(id));
        let pod = ObjectId::from(inner.name.as_str());
        let forget_type = || {
            inner.doc.with(|docs| {
                if let Some(doc) = docs.get_mut(&pod) {
                    doc.types.remove(id.as_str());
                }
            })
        };
        let archive = &inner.archive;
        match (archive.remove(&id, &inner.codec, &inner.runtime, &id, actor, forget_type)).await {
            Removal::Removed => {
                self.stepped();
                Ok(())
            }
            Removal::Kept | Removal::Gone => Ok(()),
            Removal::Refused(e) => Err(e),
        }
    }

    /// Runs `action` on operation `id` as `actor`, with `effect` on the pod inside
    /// the action's window.
    async fn act(
        &self,
        actor: &Actor,
        id: &str,
        action: A,
        mut effect: impl FnMut(&mut Pod, &mut Vec<String>),
    ) -> Result<(), RuntimeError> {
        let flight = self.inner.runtime.start_async(id, actor, action).await?;
        let applied = self.apply(actor.name(), |pod, broken| {
            if pod.labels.contains_key(SERVICE_AVAILABLE) {
                broken.push(format!("{id} moves while the pod is service-available"));
            }
            effect(pod, broken);
        });
        if applied.is_none() {
            flight.fail_async().await?;
            return Ok(());
        }
        flight.complete_async().await?;
        self.stepped();
        Ok(())
    }

    /// Waits until `done` holds, re-checking after every step, or `limit` passes;
    /// answers whether it held.
    ///
    /// On etcd, where the steps are taken by other processes, it looks every
    /// [`POLL`](crate::mizar::POLL) instead.
    pub async fn wait_until(&self, limit: Duration, done: impl Fn(&PodOps) -> bool) -> bool {
        if !self.is_shared() {
            return crate::support::wait_until(&self.inner.changed, limit, self, done).await;
        }
        crate::support::poll_until(limit, crate::mizar::POLL, || done(self)).await
    }

    /// Starts PodOpsLifecycle, PodTransitionRule and the service controller.
    pub fn start(&self) -> Controllers {
        self.start_controllers(&Controller::ALL)
            .expect("the in-memory store can always be watched")
    }

    /// Starts `controllers` on the current tokio runtime: on etcd, the
    /// controllers of this process (the others run elsewhere). Besides the
    /// operations' events, a controller on etcd learns of the pod's changes from
    /// its document's watch, and looks at everything again every
    /// [`RESYNC`](crate::mizar::RESYNC).
    pub fn start_controllers(
        &self,
        controllers: &[Controller],
    ) -> Result<Controllers, PodOpsError> {
        let (stop, stopped) = watch::channel(false);
        let mut tasks = Vec::new();
        if let ApiServer::Etcd(api) = &*self.inner.doc {
            let (changes, mut changed) = tokio::sync::mpsc::unbounded_channel();
            api.watch(changes);
            let (ops, mut stopped) = (self.clone(), stopped.clone());
            tasks.push(tokio::spawn(async move {
                let mut resync = tokio::time::interval(crate::mizar::RESYNC);
                loop {
                    tokio::select! {
                        Some(_) = changed.recv() => ops.wake(),
                        _ = resync.tick() => ops.wake(),
                        _ = stopped.changed() => return,
                    }
                }
            }));
        }
        for &c in controllers {
            let watcher = self.inner.runtime.watch()?;
            tasks.push(tokio::spawn(run(
                self.clone(),
                c,
                watcher,
                self.inner.pod_version.subscribe(),
                stopped.clone(),
            )));
        }
        Ok(Controllers { stop, tasks })
    }
}

/// The running controllers.
pub struct Controllers {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Controllers {
    /// Stops them and waits.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// The seed's controllers of the pod's lifecycle (operation controllers are
/// callers of [`OperationController`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Controller {
    /// PodOpsLifecycle: the mutating webhook and controller.
    Lifecycle,
    /// PodTransitionRule: the rules of each operation's type.
    TransitionRule,
    /// The service controller: traffic off and on, with its finalizer.
    Service,
}

impl Controller {
    /// Every controller.
    pub const ALL: [Controller; 3] = [
        Controller::Lifecycle,
        Controller::TransitionRule,
        Controller::Service,
    ];

    /// Its role in the spec, which is also its actor's name.
    pub fn role(self) -> &'static str {
        match self {
            Controller::Lifecycle => "podopslifecycle",
            Controller::TransitionRule => "pod-transition-rule",
            Controller::Service => "service-controller",
        }
    }

    /// The controller whose role is `role`.
    pub fn from_role(role: &str) -> Option<Controller> {
        Controller::ALL.into_iter().find(|c| c.role() == role)
    }

    fn actor(self) -> Actor {
        Actor::new(self.role()).with_role(self.role())
    }
}

async fn run(
    ops: PodOps,
    controller: Controller,
    mut watcher: fsm_runtime::Watcher,
    mut pod: watch::Receiver<u64>,
    mut stop: watch::Receiver<bool>,
) {
    let actor = controller.actor();
    loop {
        reconcile(&ops, controller, &actor).await;
        tokio::select! {
            event = watcher.recv_async() => {
                if let Err(Lagged::Closed) = event {
                    return;
                }
            }
            changed = pod.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = stop.changed() => return,
        }
    }
}

/// Looks at every operation of the pod and does what `controller` does there.
async fn reconcile(ops: &PodOps, controller: Controller, actor: &Actor) {
    for (id, phase) in ops.operations().await {
        let Some(phase) = phase else {
            continue;
        };
        let id = id.as_str();
        let done = match controller {
            Controller::Lifecycle => lifecycle(ops, actor, id, phase).await,
            Controller::TransitionRule => transition_rule(ops, actor, id, phase).await,
            Controller::Service => service(ops, actor, id, phase).await,
        };
        match done {
            // Guards and lost races: the next change brings the controller back.
            Err(RuntimeError::Guard { guard, .. }) => {
                *lock(&ops.inner.refusals).entry(guard).or_default() += 1;
                ops.inner.changed.notify_waiters();
            }
            Ok(()) | Err(RuntimeError::NoRule { .. }) => {}
            Err(e) if e.is_retryable() => {}
            Err(e) => ops.violation(format!("{}: {e}", actor.name())),
        }
    }
    match controller {
        Controller::Lifecycle => serve(ops, actor).await,
        Controller::Service => restore(ops, actor).await,
        Controller::TransitionRule => {}
    }
}

/// PodOpsLifecycle: the mutating webhook and controller.
async fn lifecycle(ops: &PodOps, actor: &Actor, id: &str, phase: S) -> Result<(), RuntimeError> {
    let t = ops.now();
    match phase {
        S::Operating => {
            ops.act(actor, id, A::BeginPreCheck, |pod, _| {
                pod.labels.insert(label("pre-check", id), t.clone());
            })
            .await
        }
        S::PreChecked => {
            ops.act(actor, id, A::Prepare, |pod, _| {
                pod.labels.insert(label("prepare", id), t.clone());
                pod.service_ready = false;
            })
            .await
        }
        S::Prepare => {
            ops.act(actor, id, A::Operate, |pod, broken| {
                if pod.protected() {
                    broken.push(format!(
                        "{id} operates with finalizers {:?}",
                        pod.finalizers
                    ));
                }
                pod.labels.insert(label("operate", id), t.clone());
            })
            .await
        }
        S::Operated => {
            ops.act(actor, id, A::BeginPostCheck, |pod, _| {
                pod.labels.insert(label("post-check", id), t.clone());
            })
            .await
        }
        S::PostChecked => {
            ops.act(actor, id, A::Complete, |pod, _| {
                pod.labels.insert(label("complete", id), t.clone());
                // The seed says "set readinessgate service-ready as false" here too.
                pod.service_ready = false;
            })
            .await
        }
        S::Complete => {
            ops.act(actor, id, A::FinishComplete, |pod, _| pod.remove_id(id))
                .await
        }
        S::Undone if ops.pod().has_id(id) => {
            // "When undo-operation-type/<id>=<type> added, then remove other labels
            // with the same id. If all the operations with the same type have been
            // canceled, remove operation-permission/<type>."
            let kind = ops.kind_of(id);
            ops.apply(actor.name(), |pod, _| {
                pod.remove_id(id);
                let same_type_left = pod
                    .operation_ids()
                    .iter()
                    .any(|other| pod.labels.get(&label("operation-type", other)) == Some(&kind));
                if !same_type_left {
                    pod.labels.remove(&label("operation-permission", &kind));
                }
            });
            ops.note(Some(id), actor.name(), "labels removed".into());
            Ok(())
        }
        // Its labels gone: nothing is left of the operation on the pod.
        S::Available | S::Undone if !ops.pod().has_id(id) => ops.remove(actor, id).await,
        _ => Ok(()),
    }
}

/// "If there is no label with id, add podopslifecycle.kusionstack.io/service-available"
/// (once the protection finalizers are all back).
///
/// Not while an operation has a record, labels or not: one whose last step
/// (removing its labels) was cut off by a crash before its phase moved must end
/// first, and an ended one must be removed, so that a pod that serves has no
/// operation left.
async fn serve(ops: &PodOps, actor: &Actor) {
    if !ops.operations().await.is_empty() {
        return;
    }
    let served = ops.apply(actor.name(), |pod, _| {
        let idle = pod.operation_ids().is_empty() && pod.protections.is_subset(&pod.finalizers);
        let fresh = idle && !pod.labels.contains_key(SERVICE_AVAILABLE);
        if fresh {
            pod.labels
                .insert(SERVICE_AVAILABLE.to_owned(), "true".into());
            pod.service_ready = true;
        }
        fresh
    });
    if served == Some(true) {
        ops.note(None, actor.name(), format!("{SERVICE_AVAILABLE} added"));
    }
}

/// PodTransitionRule: the rules of the operation's type, before and after.
async fn transition_rule(
    ops: &PodOps,
    actor: &Actor,
    id: &str,
    phase: S,
) -> Result<(), RuntimeError> {
    let (t, kind) = (ops.now(), ops.kind_of(id));
    match phase {
        S::PreCheck => {
            ops.act(actor, id, A::PassPreCheck, |pod, _| {
                pod.labels.insert(label("pre-checked", id), t.clone());
                pod.labels
                    .insert(label("operation-permission", &kind), t.clone());
            })
            .await
        }
        S::PostCheck => {
            ops.act(actor, id, A::PassPostCheck, |pod, _| {
                pod.labels.insert(label("post-checked", id), t.clone());
            })
            .await
        }
        _ => Ok(()),
    }
}

/// The service controller: traffic off (finalizer removed) when an operation
/// prepares, on again (finalizer back) when it completes, or when the last
/// operation in flight was undone.
async fn service(ops: &PodOps, actor: &Actor, id: &str, phase: S) -> Result<(), RuntimeError> {
    let pod = ops.pod();
    match phase {
        S::Prepare if pod.finalizers.contains(SERVICE_FINALIZER) => {
            ops.act(actor, id, A::RemoveFinalizer, |pod, _| {
                pod.finalizers.remove(SERVICE_FINALIZER);
            })
            .await
        }
        // Not while another operation is between prepare and operated: its traffic
        // must stay off (checked again under the pod's lock).
        S::Complete if !pod.finalizers.contains(SERVICE_FINALIZER) && !pod.preparing() => {
            ops.act(actor, id, A::AddFinalizer, |pod, _| {
                if !pod.preparing() {
                    pod.finalizers.insert(SERVICE_FINALIZER.to_owned());
                }
            })
            .await
        }
        _ => Ok(()),
    }
}

/// The service controller, once no operation is in flight: traffic on again
/// (its finalizer back) after the last operation was undone, which, unlike a
/// completed one, did not put it back.
async fn restore(ops: &PodOps, actor: &Actor) {
    let operations = ops.operations().await;
    let live = |p: S| !S::machine().state(p.into()).terminal;
    if operations.iter().any(|(_, phase)| phase.is_none_or(live)) {
        return;
    }
    let restored = ops.apply(actor.name(), |pod, _| {
        let off = !pod.finalizers.contains(SERVICE_FINALIZER) && pod.operation_ids().is_empty();
        if off {
            pod.finalizers.insert(SERVICE_FINALIZER.to_owned());
        }
        off
    });
    if restored == Some(true) {
        let what = "traffic on again: finalizer back after the undo".to_owned();
        ops.note(None, actor.name(), what);
    }
}

/// An operation controller: replaces, restarts or deletes the pod, as operations
/// of its type.
pub struct OperationController {
    kind: String,
    concurrent: bool,
    actor: Actor,
}

impl OperationController {
    /// A controller of operations of type `kind`, one at a time.
    pub fn new(kind: &str) -> Self {
        OperationController {
            kind: kind.to_owned(),
            concurrent: false,
            actor: Actor::new(format!("{kind}-controller")).with_role("operation-controller"),
        }
    }

    /// Lets several operations of its type run at once ("whether it can be
    /// performed concurrently with the same type is determined by user's operation
    /// controller").
    pub fn concurrent(mut self) -> Self {
        self.concurrent = true;
        self
    }

    /// Begins operation `id`: adds `operating/<id>=<time>` and
    /// `operation-type/<id>=<type>` at the same time.
    ///
    /// Refused ([`RuntimeError::Exists`]) while `id` has a record, an
    /// operation in flight or one ended and not yet removed, before anything
    /// is written: the removal of the ended one drops the type of its id
    /// from the pod's document, which would otherwise be this one's. Once it
    /// is removed, the id begins a new operation (a new life).
    pub async fn begin(&self, ops: &PodOps, id: &str) -> Result<(), PodOpsError> {
        if let Ok(record) = ops.inner.runtime.get_async(id).await {
            let state = ops
                .inner
                .runtime
                .machine()
                .state(record.state)
                .name
                .to_string();
            let id = ObjectId::from(id);
            return Err(RuntimeError::Exists { id, state }.into());
        }
        if !self.concurrent {
            let types = ops.doc().types;
            for (running, kind) in &types {
                let phase = ops.phase_async(running).await;
                let live = phase.is_some_and(|p| !S::machine().state(p.into()).terminal);
                if *kind == self.kind && live {
                    return Err(PodOpsError::TypeBusy {
                        pod: ops.inner.name.clone(),
                        kind: self.kind.clone(),
                        running: running.clone(),
                    });
                }
            }
        }
        let key = ObjectId::from(ops.inner.name.as_str());
        ops.inner.doc.with(|docs| {
            let doc = docs.entry(key.clone()).or_default();
            doc.types.insert(id.to_owned(), self.kind.clone());
        });
        let t = ops.now();
        ops.edit(self.actor.name(), |pod| {
            pod.labels.remove(SERVICE_AVAILABLE);
            pod.labels.insert(label("operating", id), t.clone());
            pod.labels
                .insert(label("operation-type", id), self.kind.clone());
        })?;
        if let Err(e) = ops.inner.runtime.create_async(id, &self.actor).await {
            ops.apply(self.actor.name(), |pod, _| pod.remove_id(id));
            return Err(e.into());
        }
        ops.stepped();
        Ok(())
    }

    /// The operation itself (replace, restart, ...), once PodOpsLifecycle said
    /// `operate`: then `operating/<id>` and `operation-type/<id>` go, and the webhook
    /// adds `operated/<id>` and `done-operation-type/<id>`.
    pub async fn finish(&self, ops: &PodOps, id: &str) -> Result<(), PodOpsError> {
        let t = ops.now();
        ops.act(&self.actor, id, A::Finish, |pod, broken| {
            if pod.protected() {
                broken.push(format!(
                    "{id} operated on with finalizers {:?}",
                    pod.finalizers
                ));
            }
            pod.labels.remove(&label("operating", id));
            pod.labels.remove(&label("operation-type", id));
            for phase in ["pre-check", "pre-checked", "prepare"] {
                pod.labels.remove(&label(phase, id));
            }
            let others_of_type = pod
                .operation_ids()
                .iter()
                .any(|other| pod.labels.get(&label("operation-type", other)) == Some(&self.kind));
            if !others_of_type {
                pod.labels
                    .remove(&label("operation-permission", &self.kind));
            }
            pod.labels.insert(label("operated", id), t.clone());
            pod.labels
                .insert(label("done-operation-type", id), self.kind.clone());
        })
        .await?;
        Ok(())
    }

    /// Cancels operation `id`: `undo-operation-type/<id>=<type>`.
    pub async fn undo(&self, ops: &PodOps, id: &str) -> Result<(), PodOpsError> {
        ops.act(&self.actor, id, A::Undo, |pod, _| {
            pod.labels
                .insert(label("undo-operation-type", id), self.kind.clone());
        })
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A life in the archive that names a phase the spec does not have (a
    /// rename without `renamed_from`) is an error of `lives` naming the
    /// operation and the name, a breach `settled_violations` reports, and a
    /// line of the trace; nothing panics.
    #[test]
    fn an_archived_life_the_spec_cannot_read_is_reported() {
        let ops = PodOps::new("web-0");
        let rt = ops.runtime();
        let id = ObjectId::from("op-old");
        let actor = Actor::new("replace-controller").with_role("operation-controller");
        rt.create(id.clone(), &actor).unwrap();
        let life = rt.history(id.clone()).unwrap();
        let inner = &ops.inner;
        inner.archive.keep(&id, &inner.codec, &life);
        // The archived creation, as a spec that called `operating` "begun" wrote it.
        inner.archive.lives.with_one(&id, |lives| {
            lives.as_mut().unwrap()[0][0].to = "begun".into();
        });
        match ops.lives("op-old") {
            Err(PodOpsError::Archive { id, source }) => {
                assert_eq!((id.as_str(), source.name.as_str()), ("op-old", "begun"));
            }
            other => panic!("{other:?}"),
        }
        let found = ops.settled_violations();
        let unreadable = "operation op-old: history unreadable: the archive of operation op-old: ";
        assert!(found.iter().any(|f| f.starts_with(unreadable)), "{found:?}");
        let trace = ops.trace();
        let line = trace.iter().find(|l| l.id.as_deref() == Some("op-old"));
        assert!(
            line.is_some_and(|l| l.what.starts_with("history unreadable: the archive")),
            "{trace:#?}"
        );
    }
}
