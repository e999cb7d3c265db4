//! Mizar's operators as processes on etcd, killed and restarted while a user
//! creates, updates and deletes objects; the histories checked at the end.
//!
//! The driver ([`run`]) opens the cluster on etcd, starts one process per
//! operator (the caller says how: [`run`]'s `spawn`), runs a healer for every
//! kind, and plays the user: rounds of a VPC with a network, two pods and a
//! service, created, the service's backends changed, all deleted, parents first.
//! Meanwhile it kills a random operator process with SIGKILL about every
//! `kill_every` and starts it again, and forgets the stores' removals older
//! than [`Chaos::forget_after`] as it goes. A process ([`operator`]) runs one
//! operator until it is killed.
//!
//! How an operator recovers after a restart: nothing of its own survives (its
//! cache, the delete actions it held in flight); everything it needs is in etcd.
//! The actions its predecessor held are abandoned once their lease expires (the
//! store marks a holder whose lease key is gone), and the healer rolls them back
//! to the state they started from. The restarted operator looks at everything on
//! start and every [`RESYNC`](crate::mizar::RESYNC), finds its objects in the
//! states it owns, and does the step again: steps are idempotent on the topology
//! (links are sets, an address is given once), a creation cut off between
//! the topology and the record is finished by the next one, and a removal cut
//! off between the archive and the store is made by the next look at the
//! Deleted object.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use fsm::StateMachine;
use fsm_etcd::{AnyStore, EtcdAccess, EtcdFlags, EtcdStore};
use fsm_runtime::{EntryKind, ObjectId, RuntimeError, Store, StoreError};
use tokio::process::{Child, Command};

use crate::machines::PodOpsState as S;
use crate::mizar::{Cluster, DEFAULT_NETWORK, DEFAULT_VPC, Kind, MizarError, Operator};
use crate::podops::{Controller, OperationController, PodOps, PodOpsError, SERVICE_AVAILABLE};

/// A chaos run's settings.
#[derive(Debug, Clone)]
pub struct Chaos {
    /// The etcd, and how to reach it (its user and TLS, if it asks for them).
    pub etcd: EtcdAccess,
    /// The prefix the run's keys live under (one no other run uses).
    pub prefix: String,
    /// How long the user starts new rounds.
    pub duration: Duration,
    /// About how often an operator process is killed (none when zero).
    pub kill_every: Duration,
    /// How long a workflow may take, its restarts included.
    pub deadline: Duration,
    /// The etcd lease of each process's actions in flight: how long a dead
    /// process's actions hold their objects before the healer may roll them back.
    pub lease: Duration,
    /// Forget the removals older than this while the run goes on
    /// ([`EtcdStore::forget_removals`](fsm_etcd::EtcdStore::forget_removals) on
    /// every machine's store, every half second, and once more when the
    /// processes are gone), so that forgetting meets the operators' kills,
    /// retries and archives, and the checks read lives whose removals the
    /// store no longer keeps. `None`: never.
    pub forget_after: Option<Duration>,
}

/// What a chaos run found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Workflows that completed: on Mizar, each object's create and delete and
    /// each update of a service's backends; on PodOps, each operation that ended
    /// (`available` or `undone`).
    pub workflows: usize,
    /// Operator processes killed and started again.
    pub restarts: usize,
    /// Actions of killed processes the healer rolled back (Healed entries): kills
    /// that landed on an action in flight.
    pub rolled_back: usize,
    /// The objects whose records their operators removed (on PodOps, the
    /// operations), each one's history kept in the archive (and checked with
    /// the others).
    pub removed: usize,
    /// Removals the stores forgot meanwhile ([`Chaos::forget_after`]).
    pub forgotten: usize,
    /// Breaches of the seed's promises ([`Cluster::violations`]).
    pub violations: Vec<String>,
    /// Workflows that missed their deadline.
    pub late: Vec<String>,
}

impl Report {
    /// The run's last line, exactly:
    /// `N workflows completed, K operator restarts, V invariant violations`.
    pub fn line(&self) -> String {
        format!(
            "{} workflows completed, {} operator restarts, {} invariant violations",
            self.workflows,
            self.restarts,
            self.violations.len()
        )
    }

    /// Whether the run passed: no violation, no late workflow.
    pub fn passed(&self) -> bool {
        self.violations.is_empty() && self.late.is_empty()
    }
}

/// Accesses to etcd a process is given while it runs (the examples' processes:
/// their etcd flags read again on SIGHUP), each to reconnect with.
pub type Renewals = Option<tokio::sync::mpsc::UnboundedReceiver<EtcdAccess>>;

/// Reconnects with each access `renewals` gives (`reconnect` blocks, so it
/// runs off the async threads), saying on standard error how it went.
fn follow<E: std::fmt::Display>(
    renewals: Renewals,
    reconnect: impl Fn(&EtcdAccess) -> Result<(), E> + Clone + Send + 'static,
) {
    let Some(mut renewals) = renewals else {
        return;
    };
    tokio::spawn(async move {
        while let Some(access) = renewals.recv().await {
            let reconnect = reconnect.clone();
            let done = off_thread(move || reconnect(&access).map_err(|e| e.to_string())).await;
            match done {
                Ok(()) => eprintln!("reconnected to etcd"),
                Err(e) => eprintln!("the etcd access in use stays: {e}"),
            }
        }
    });
}

/// Runs one operator process's operator on the cluster on `etcd` under
/// `prefix` until the process is killed (or the future dropped), reconnecting
/// with each access `renewals` gives.
pub async fn operator(
    etcd: &EtcdAccess,
    prefix: &str,
    lease: Duration,
    op: Operator,
    renewals: Renewals,
) -> Result<(), MizarError> {
    let cluster = connect(etcd, prefix, lease).await?;
    let _operators = cluster.start_operators(&[op])?;
    follow(renewals, move |access| cluster.reconnect(access));
    std::future::pending::<()>().await;
    Ok(())
}

/// The cluster on etcd, connected off the async threads.
async fn connect(etcd: &EtcdAccess, prefix: &str, lease: Duration) -> Result<Cluster, MizarError> {
    let (etcd, prefix) = (etcd.clone(), prefix.to_owned());
    off_thread(move || Cluster::on_etcd(&etcd, &prefix, lease, true)).await
}

/// Runs `work`, which blocks (a connection, a store's call), off the async
/// threads.
async fn off_thread<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work)
        .await
        .expect("the blocking work does not panic")
}

/// A store whose removals a chaos run forgets as it goes: an etcd store
/// ([`EtcdStore::forget_removals`]), or a test's stand-in.
trait Forgets: Clone + Send + 'static {
    /// Forgets the removals made before `before`; how many.
    fn forget_removals(&self, before: SystemTime) -> Result<usize, StoreError>;
}

impl Forgets for EtcdStore {
    fn forget_removals(&self, before: SystemTime) -> Result<usize, StoreError> {
        EtcdStore::forget_removals(self, before)
    }
}

/// Runs `user` while the removals older than `after` are forgotten from
/// `stores` every half second, then, once `user` is done, once more after
/// `after` (with nothing else running, so that every removal of the run is
/// then older): what `user` did, and how many removals were forgotten.
/// Forgetting that fails for a reason no retry mends is `Err`.
async fn forgetting<F: Forgets, R>(
    stores: Vec<F>,
    after: Option<Duration>,
    user: impl Future<Output = R>,
) -> (R, Result<usize, String>) {
    let Some(after) = after else {
        return (user.await, Ok(0));
    };
    let pass = async |stores: &[F]| -> Result<usize, String> {
        let mut forgotten = 0;
        for store in stores {
            let (store, before) = (store.clone(), SystemTime::now() - after);
            match off_thread(move || store.forget_removals(before)).await {
                Ok(n) => forgotten += n,
                // etcd slow under the run's load: the next pass.
                Err(e) if e.is_retryable() => {}
                Err(e) => return Err(format!("forgetting removals failed: {e}")),
            }
        }
        Ok(forgotten)
    };
    // Until a pass fails for good (then the user's run ends without them).
    let mut forgotten = 0;
    let passes = async {
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            forgotten += pass(&stores).await?;
        }
    };
    tokio::pin!(user);
    let (done, failed): (R, Result<(), String>) = tokio::select! {
        done = &mut user => (done, Ok(())),
        failed = passes => (user.await, failed),
    };
    if let Err(e) = failed {
        return (done, Err(e));
    }
    tokio::time::sleep(after).await;
    let last = pass(&stores).await;
    (done, last.map(|n| forgotten + n))
}

/// The etcd stores of `runtimes` (a run on etcd has no other).
fn etcd_stores<'r>(
    runtimes: impl IntoIterator<Item = &'r fsm_runtime::Runtime<AnyStore>>,
) -> Vec<EtcdStore> {
    (runtimes.into_iter())
        .filter_map(|rt| match rt.store() {
            AnyStore::Etcd(store) => Some(store.clone()),
            AnyStore::Memory(_) => None,
        })
        .collect()
}

/// A number below `n`, different in every call and every run.
fn random_below(n: usize) -> usize {
    use std::hash::{BuildHasher, Hasher};
    let hasher = std::collections::hash_map::RandomState::new().build_hasher();
    (hasher.finish() % n as u64) as usize
}

/// A control plane's processes, by role: started, and killed and started again.
struct Processes<'s> {
    start: Box<dyn Fn(&'static str) -> Child + 's>,
    running: Vec<(&'static str, Child)>,
}

impl<'s> Processes<'s> {
    /// Starts a process for each of `roles` with `command(role)`.
    fn start(roles: &[&'static str], command: impl Fn(&'static str) -> Command + 's) -> Self {
        let start = Box::new(move |role: &'static str| {
            command(role)
                .kill_on_drop(true)
                .spawn()
                .unwrap_or_else(|e| panic!("start the {role} process: {e}"))
        });
        let running = roles.iter().map(|&role| (role, start(role))).collect();
        Processes { start, running }
    }

    /// Kills the process of `role` (SIGKILL) and starts it again.
    async fn restart(&mut self, role: &'static str) {
        let (_, child) = self
            .running
            .iter_mut()
            .find(|(r, _)| *r == role)
            .expect("every role has a process");
        let _ = child.kill().await;
        *child = (self.start)(role);
    }

    /// Kills them all.
    async fn kill_all(&mut self) {
        for (_, child) in &mut self.running {
            let _ = child.kill().await;
        }
    }
}

/// Runs `user` while a random one of `processes` is killed and restarted about
/// every `every` (none when zero), and the one `asked` names whenever asked;
/// answers what `user` did and how many restarts there were.
async fn under_chaos<R>(
    every: Duration,
    processes: &mut Processes<'_>,
    mut asked: tokio::sync::mpsc::UnboundedReceiver<&'static str>,
    user: impl Future<Output = R>,
) -> (R, usize) {
    let over = AtomicBool::new(false);
    let roles: Vec<&'static str> = processes.running.iter().map(|(r, _)| *r).collect();
    let killer = async {
        let mut restarts = 0;
        while !every.is_zero() && !over.load(Ordering::Relaxed) {
            // Between half and one and a half periods.
            let pause = every / 2 + every * random_below(1000) as u32 / 1000;
            let target = tokio::select! {
                () = tokio::time::sleep(pause) => roles[random_below(roles.len())],
                Some(role) = asked.recv() => role,
            };
            if over.load(Ordering::Relaxed) {
                break;
            }
            processes.restart(target).await;
            restarts += 1;
        }
        restarts
    };
    let user = async {
        let done = user.await;
        over.store(true, Ordering::Relaxed);
        done
    };
    let (restarts, done) = tokio::join!(killer, user);
    processes.kill_all().await;
    (done, restarts)
}

/// How many actions the healer rolled back on the pod's operations, removed
/// ones included (their lives read from the archive).
fn podops_rolled_back(ops: &PodOps) -> usize {
    let ever = ops.ever().into_iter();
    ever.map(|id| healed(&ops.lives(id.as_str()).unwrap_or_default().concat()))
        .sum()
}

/// How many of `history`'s entries are the healer's rollbacks.
fn healed(history: &[fsm_runtime::Entry]) -> usize {
    history
        .iter()
        .filter(|e| e.kind == EntryKind::Healed)
        .count()
}

/// How many actions the healer rolled back on Mizar's objects, removed ones
/// included (their lives read from the archive).
fn mizar_rolled_back(cluster: &Cluster) -> usize {
    let lives = |kind: Kind, id: &ObjectId| cluster.lives(kind, id.as_str()).unwrap_or_default();
    Kind::ALL
        .into_iter()
        .flat_map(|kind| cluster.ever(kind).into_iter().map(move |id| (kind, id)))
        .map(|(kind, id)| healed(&lives(kind, &id).concat()))
        .sum()
}

/// Runs the chaos run `chaos` on Mizar, starting each operator's process with
/// `spawn(operator)` (a command that runs [`operator`] for it). Besides the
/// random kills, the user has the VPC Operator killed while it holds each
/// round's VPC delete, so that every round's recovery includes a rollback.
pub async fn run(chaos: &Chaos, spawn: impl Fn(Operator) -> Command) -> Result<Report, MizarError> {
    let cluster = connect(&chaos.etcd, &chaos.prefix, chaos.lease).await?;
    let _healers = cluster.spawn_healers(Duration::from_millis(200));
    let roles = Operator::ALL.map(Operator::role);
    let mut processes = Processes::start(&roles, |role| {
        spawn(Operator::from_role(role).expect("an operator's role"))
    });
    for node in ["droplet-1", "droplet-2"] {
        cluster.create_droplet(node)?;
    }
    let (ask, asked) = tokio::sync::mpsc::unbounded_channel();
    let chaotic = !chaos.kill_every.is_zero();
    let user = async {
        let mut report = Report::default();
        // The default VPC and network, created by their operators.
        let defaults =
            |c: &Cluster| c.state(Kind::Network, DEFAULT_NETWORK).as_deref() == Some("Provisioned");
        if !workflow(&cluster, &mut report, chaos.deadline, "defaults", defaults).await {
            // Where each stands, for whoever reads the report.
            for (kind, id) in [(Kind::Vpc, DEFAULT_VPC), (Kind::Network, DEFAULT_NETWORK)] {
                let state = describe(&cluster, kind, id);
                report.late.push(format!("  {kind:?} {id}: {state}"));
            }
        }
        let began = Instant::now();
        let mut round = 0;
        let mut result = Ok(());
        while result.is_ok() && (round == 0 || began.elapsed() < chaos.duration) {
            let ask = chaotic.then_some(&ask);
            result = user_round(&cluster, &mut report, chaos.deadline, round, ask).await;
            round += 1;
        }
        result.map(|()| report)
    };
    let stores = etcd_stores(Kind::ALL.map(|kind| cluster.runtime(kind)));
    let chaotic = under_chaos(chaos.kill_every, &mut processes, asked, user);
    let ((report, restarts), forgotten) = forgetting(stores, chaos.forget_after, chaotic).await;
    let mut report = report?;
    report.restarts = restarts;
    report.violations = cluster.violations();
    match forgotten {
        Ok(n) => report.forgotten = n,
        Err(e) => report.violations.push(e),
    }
    report.rolled_back = mizar_rolled_back(&cluster);
    report.removed = Kind::ALL
        .map(|kind| cluster.removed(kind).len())
        .iter()
        .sum();
    Ok(report)
}

/// Waits for `done`; counts the workflow, or records it as late.
async fn workflow(
    cluster: &Cluster,
    report: &mut Report,
    deadline: Duration,
    what: &str,
    done: impl Fn(&Cluster) -> bool,
) -> bool {
    if cluster.wait_until(deadline, done).await {
        report.workflows += 1;
        true
    } else {
        report
            .late
            .push(format!("{what} did not complete within {deadline:?}"));
        false
    }
}

/// One round of the user: a VPC with a network, two pods and a service created,
/// the service's backends changed, everything deleted at once, parents first.
async fn user_round(
    cluster: &Cluster,
    report: &mut Report,
    deadline: Duration,
    round: usize,
    kill: Option<&tokio::sync::mpsc::UnboundedSender<&'static str>>,
) -> Result<(), MizarError> {
    let vpc = format!("vpc-{round}");
    let net = format!("{vpc}/net-0");
    let pods = [format!("{net}/pod-0"), format!("{net}/pod-1")];
    let svc = format!("{net}/svc");
    cluster.create_vpc(&vpc)?;
    cluster.create_network(&vpc, &net)?;
    for pod in &pods {
        cluster.create_endpoint(&net, pod)?;
    }
    cluster.create_scaled_endpoint(&net, &svc, &[pods[0].as_str()])?;
    let objects = [
        (Kind::Vpc, vpc.clone()),
        (Kind::Network, net.clone()),
        (Kind::Endpoint, pods[0].clone()),
        (Kind::Endpoint, pods[1].clone()),
        (Kind::ScaledEndpoint, svc.clone()),
    ];
    for (kind, id) in &objects {
        let up = |c: &Cluster| c.state(*kind, id).as_deref() == Some("Provisioned");
        let what = format!("create {kind:?} {id}");
        if !workflow(cluster, report, deadline, &what, up).await {
            report
                .late
                .push(format!("  {kind:?} {id}: {}", describe(cluster, *kind, id)));
        }
    }
    let both: BTreeSet<ObjectId> = pods.iter().map(ObjectId::from).collect();
    cluster.set_backends(&svc, &[pods[0].as_str(), pods[1].as_str()])?;
    let told = |c: &Cluster| {
        c.topology()
            .get(svc.as_str())
            .is_some_and(|o| o.backends_told.as_ref() == Some(&both))
    };
    workflow(cluster, report, deadline, &format!("update {svc}"), told).await;
    // The VPC's delete waits for its network: the VPC Operator holds it in
    // flight meanwhile. The first event of that hold is the moment to kill it.
    let mut vpc_events = cluster.runtime(Kind::Vpc).watch()?.only(vpc.as_str());
    for (_, id) in &objects {
        cluster.delete(id)?;
    }
    if let Some(kill) = kill {
        let deleting = cluster.runtime(Kind::Vpc).machine().find_state("Deleting");
        let held = async {
            while let Ok(event) = vpc_events.recv_async().await {
                if Some(event.entry.to) == deleting && event.entry.kind == EntryKind::Started {
                    return true;
                }
            }
            false
        };
        if tokio::time::timeout(deadline, held).await == Ok(true) {
            let _ = kill.send(Operator::Vpc.role());
        }
    }
    for (kind, id) in &objects {
        // Deleted, then removed by its operator.
        let gone = |c: &Cluster| c.removed_in(*kind, id).as_deref() == Some("Deleted");
        let what = format!("delete {kind:?} {id}");
        if !workflow(cluster, report, deadline, &what, gone).await {
            report
                .late
                .push(format!("  {kind:?} {id}: {}", describe(cluster, *kind, id)));
        }
    }
    Ok(())
}

/// Where `id` of `kind` is: its state, who holds it, what the user asked.
fn describe(cluster: &Cluster, kind: Kind, id: &str) -> String {
    let record = cluster.runtime(kind).get(id);
    let object = cluster.topology().get(id).cloned();
    match record {
        Ok(r) => format!(
            "in {} at version {}, held by {:?}; delete requested: {:?}; children {:?}",
            cluster.runtime(kind).machine().state(r.state).name,
            r.version,
            r.in_flight.map(|h| (h.actor.to_string(), h.abandoned)),
            object.as_ref().map(|o| o.delete_requested),
            object.map(|o| o.children),
        ),
        Err(RuntimeError::NotFound { .. }) => match cluster.removed_in(kind, id) {
            Some(state) => format!("removed in {state}"),
            None => "no record, none archived".to_owned(),
        },
        Err(e) => format!("unreadable: {e}"),
    }
}

/// The pod of a PodOpsLifecycle chaos run.
pub const POD: &str = "web-0";

/// Runs one controller process's controller on the pod on `etcd` under
/// `prefix` until the process is killed (or the future dropped), reconnecting
/// with each access `renewals` gives.
pub async fn controller(
    etcd: &EtcdAccess,
    prefix: &str,
    lease: Duration,
    controller: Controller,
    renewals: Renewals,
) -> Result<(), PodOpsError> {
    let ops = connect_pod(etcd, prefix, lease).await?;
    let _controllers = ops.start_controllers(&[controller])?;
    follow(renewals, move |access| ops.reconnect(access));
    std::future::pending::<()>().await;
    Ok(())
}

/// The pod on etcd, connected off the async threads.
async fn connect_pod(
    etcd: &EtcdAccess,
    prefix: &str,
    lease: Duration,
) -> Result<PodOps, PodOpsError> {
    let (etcd, prefix) = (etcd.clone(), prefix.to_owned());
    off_thread(move || PodOps::on_etcd(POD, &etcd, &prefix, lease)).await
}

/// The types of the operation controllers of a PodOps chaos run.
pub const OPERATION_TYPES: [&str; 2] = ["replace", "restart"];

/// Every process of a PodOps chaos run, by role: the three controllers, and an
/// operation controller per type of [`OPERATION_TYPES`] (`<type>-controller`).
pub fn podops_roles() -> [&'static str; 5] {
    [
        Controller::Lifecycle.role(),
        Controller::TransitionRule.role(),
        Controller::Service.role(),
        "replace-controller",
        "restart-controller",
    ]
}

/// Runs the process of `role` (one of [`podops_roles`]) on the pod on `etcd`
/// under `prefix` until it is killed: a controller, or the operation
/// controller of a type, which begins operations until `until` (seconds since
/// the Unix epoch); either reconnects with each access `renewals` gives.
pub async fn podops_process(
    etcd: &EtcdAccess,
    prefix: &str,
    lease: Duration,
    role: &str,
    until: u64,
    renewals: Renewals,
) -> Result<(), PodOpsError> {
    if let Some(c) = Controller::from_role(role) {
        return controller(etcd, prefix, lease, c, renewals).await;
    }
    let kind = role
        .strip_suffix("-controller")
        .filter(|k| OPERATION_TYPES.contains(k))
        .unwrap_or_else(|| panic!("no PodOps process `{role}`"));
    let ops = connect_pod(etcd, prefix, lease).await?;
    let renewed = ops.clone();
    follow(renewals, move |access| renewed.reconnect(access));
    operations(&ops, kind, Duration::from_secs(until)).await
}

/// How many operations of each type a PodOps chaos run begins at least, however
/// slow the machine: its operation controllers go on past `until` until they
/// have, and the run waits for them. Three, so that a `restart` is undone.
pub const PODOPS_OPERATIONS_PER_TYPE: usize = 3;

/// An operation controller's life: one operation of its type at a time, begun,
/// finished once PodOpsLifecycle says operate (every third `restart` undone
/// instead), until `until` (since the Unix epoch) and at least
/// [`PODOPS_OPERATIONS_PER_TYPE`] of them; then it only finishes what is in
/// flight. Started again after a kill, it finds its predecessor's operation
/// in the pod's document and takes it on where it was, a begin cut off included.
async fn operations(ops: &PodOps, kind: &str, until: Duration) -> Result<(), PodOpsError> {
    let controller = OperationController::new(kind);
    let deadline = Duration::from_secs(60);
    loop {
        // The pod's document first: an operation's type leaves it only once
        // the operation is archived.
        let types = ops.doc().types;
        let mine = of_type(&types, &ops.removed(), kind);
        let mut in_flight = None;
        for id in types.iter().filter(|(_, k)| *k == kind).map(|(id, _)| id) {
            let phase = ops.phase_async(id).await;
            let live = match phase {
                Some(p) => !S::machine().state(p.into()).terminal,
                // No record: a begin cut off before it, unless the operation
                // ended and was removed since the document was read (its
                // type leaves the document after its life is archived, so
                // the archive, read now, has it).
                None => ops.removed_in(id).is_none(),
            };
            if live {
                in_flight = Some(((*id).to_owned(), phase));
            }
        }
        match in_flight {
            // Begun, but cut off before its record: begin it again.
            Some((id, None)) => retrying(deadline, || controller.begin(ops, &id)).await?,
            Some((id, Some(S::Operate))) => {
                if kind == "restart" && mine.len().is_multiple_of(3) {
                    retrying(deadline, || controller.undo(ops, &id)).await?;
                } else {
                    retrying(deadline, || controller.finish(ops, &id)).await?;
                }
            }
            Some(_) => {}
            None if since_epoch() < until || mine.len() < PODOPS_OPERATIONS_PER_TYPE => {
                let id = format!("{kind}-{}", mine.len());
                match controller.begin(ops, &id).await {
                    Ok(()) | Err(PodOpsError::TypeBusy { .. }) => {}
                    Err(PodOpsError::Refused(e)) if e.is_retryable() => {}
                    Err(e) => return Err(e),
                }
            }
            None => {}
        }
        tokio::time::sleep(crate::mizar::POLL).await;
    }
}

/// The operations of type `kind` the pod ever had: those the pod's document
/// has a type for (`types`), and those `removed`, which the operation
/// controllers of a chaos run name `<type>-<n>`.
fn of_type(types: &BTreeMap<String, String>, removed: &[ObjectId], kind: &str) -> BTreeSet<String> {
    let prefix = format!("{kind}-");
    let live = types
        .iter()
        .filter(|(_, k)| *k == kind)
        .map(|(id, _)| id.clone());
    let removed = removed.iter().filter(|id| id.as_str().starts_with(&prefix));
    live.chain(removed.map(|id| id.to_string())).collect()
}

/// Runs the chaos run `chaos` on PodOpsLifecycle, starting the process of each
/// role of [`podops_roles`] with `spawn(role, until)` (a command that runs
/// [`podops_process`] for it; `until` for the operation controllers). The
/// operation controllers begin operations for `chaos.duration`, and at least
/// [`PODOPS_OPERATIONS_PER_TYPE`] of each type; then the run waits for every
/// operation to end and the pod to serve again.
pub async fn run_podops(
    chaos: &Chaos,
    spawn: impl Fn(&'static str, u64) -> Command,
) -> Result<Report, PodOpsError> {
    let ops = connect_pod(&chaos.etcd, &chaos.prefix, chaos.lease).await?;
    let healer =
        fsm_runtime::Healer::new().spawn(ops.runtime().clone(), Duration::from_millis(200), |_| {});
    let until = since_epoch() + chaos.duration.max(Duration::from_secs(1));
    let mut processes = Processes::start(&podops_roles(), |role| spawn(role, until.as_secs()));
    let (_ask, asked) = tokio::sync::mpsc::unbounded_channel();
    let user = async {
        tokio::time::sleep(until.saturating_sub(since_epoch())).await;
        // Every type's operations begun, every operation ended and removed,
        // the pod serving.
        let settled = |ops: &PodOps| {
            let (doc, removed) = (ops.doc(), ops.removed());
            let begun = OPERATION_TYPES.iter().all(|kind| {
                of_type(&doc.types, &removed, kind).len() >= PODOPS_OPERATIONS_PER_TYPE
            });
            let ended =
                doc.types.is_empty() && ops.runtime().store().ids().is_ok_and(|ids| ids.is_empty());
            begun
                && ended
                && doc.pod.labels.contains_key(SERVICE_AVAILABLE)
                && doc.pod.operation_ids().is_empty()
        };
        ops.wait_until(chaos.deadline, settled).await
    };
    let stores = etcd_stores([ops.runtime()]);
    let chaotic = under_chaos(chaos.kill_every, &mut processes, asked, user);
    let ((settled, restarts), forgotten) = forgetting(stores, chaos.forget_after, chaotic).await;
    healer.stop();
    let mut report = Report {
        restarts,
        violations: ops.settled_violations(),
        rolled_back: podops_rolled_back(&ops),
        ..Report::default()
    };
    match forgotten {
        Ok(n) => report.forgotten = n,
        Err(e) => report.violations.push(e),
    }
    for id in ops.ever() {
        match (ops.phase(id.as_str()), ops.removed_in(id.as_str())) {
            (None, Some(_)) => {
                report.workflows += 1;
                report.removed += 1;
            }
            (phase, _) => report
                .late
                .push(format!("operation {id} still in {phase:?}")),
        }
    }
    if !settled {
        let late = format!("the pod did not settle within {:?}", chaos.deadline);
        report.late.push(late);
    }
    Ok(report)
}

/// The time since the Unix epoch.
fn since_epoch() -> Duration {
    SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// Runs `step` until it is not refused for a reason that passes (the operation
/// busy with a controller's action, a lost race), or `deadline` passes.
async fn retrying<F: Future<Output = Result<(), PodOpsError>>>(
    deadline: Duration,
    step: impl Fn() -> F,
) -> Result<(), PodOpsError> {
    let until = Instant::now() + deadline;
    loop {
        match step().await {
            Err(PodOpsError::Refused(e)) if e.is_retryable() && Instant::now() < until => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            done => return done,
        }
    }
}

/// The control planes a chaos run drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plane {
    /// Mizar's seven operators.
    Mizar,
    /// PodOpsLifecycle's three controllers.
    PodOps,
}

/// The examples' arguments for etcd and chaos.
#[derive(Debug, clap::Parser)]
#[command(group(
    // How to reach etcd means nothing without it.
    clap::ArgGroup::new("etcd_access_given")
        .args(["etcd_cacert", "etcd_user"])
        .multiple(true)
        .requires("etcd")
))]
pub struct Args {
    /// Run on etcd at these endpoints (comma-separated), each operator or
    /// controller its own process.
    #[arg(long, value_delimiter = ',')]
    pub etcd: Vec<String>,
    /// Kill a random process about every second, and start it again.
    #[arg(long, requires = "etcd")]
    pub chaos: bool,
    /// How long the user starts new rounds under chaos, in seconds.
    #[arg(long, default_value_t = 20)]
    pub seconds: u64,
    /// How long a workflow may take, restarts included, in seconds.
    #[arg(long, default_value_t = 60)]
    pub deadline: u64,
    /// Under chaos, forget the removals older than this many seconds while
    /// the run goes on (0: never); the checks then read lives whose removals
    /// the store no longer keeps.
    #[arg(long, default_value_t = 1)]
    pub forget_removals_after: u64,
    /// How to reach an etcd that checks who connects (`--etcd-cacert`,
    /// `--etcd-cert`, `--etcd-key`, `--etcd-user`, as `fsm serve` takes them).
    #[command(flatten)]
    pub etcd_flags: EtcdFlags,
    /// (For the processes a run starts.) Run only the operator or controller
    /// with this role.
    #[arg(long, requires = "etcd", hide = true)]
    pub role: Option<String>,
    /// (For the processes a run starts.) The run's key prefix.
    #[arg(long, hide = true)]
    pub prefix: Option<String>,
    /// (For the processes a run starts.) When operation controllers stop
    /// beginning operations, in seconds since the Unix epoch.
    #[arg(long, hide = true, default_value_t = 0)]
    pub until: u64,
}

/// The environment variable `--etcd-user`'s password is read from (the
/// processes a run starts inherit it).
pub const PASSWORD_VARIABLE: &str = EtcdFlags::PASSWORD_VARIABLE;

impl Args {
    /// The etcd the arguments name, and how to reach it: over TLS with the
    /// files given (read and checked here, an error naming the flag and the
    /// file), as the user given.
    pub fn etcd_access(&self) -> Result<EtcdAccess, String> {
        self.etcd_flags
            .access(&self.etcd)
            .map_err(|e| e.to_string())
    }

    /// The arguments that give a started process the same access to etcd
    /// (the password goes by the environment, which it inherits).
    pub fn etcd_args(&self) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = vec!["--etcd".into(), self.etcd.join(",").into()];
        args.extend(self.etcd_flags.args());
        args
    }
}

/// How long a dead process's actions hold their objects in the examples' runs.
pub const LEASE: Duration = Duration::from_secs(2);

/// What an example does on etcd: with `--role`, runs that operator or controller
/// until killed; otherwise the chaos run (or, without `--chaos`, one round with
/// the processes and no kills), printing the late workflows, the violations and
/// the report's last line. Answers whether the run passed; `None` without
/// `--etcd` (the example runs in memory).
pub async fn main_on_etcd(
    args: &Args,
    plane: Plane,
) -> Option<Result<bool, Box<dyn std::error::Error>>> {
    if args.etcd.is_empty() {
        return None;
    }
    Some(on_etcd(args, plane).await)
}

/// The access `args` give, read again on each SIGHUP (their TLS and password
/// files; one that does not read is said on standard error, and the access
/// in use stays). `None` where there are no signals.
fn on_hangup(args: &Args) -> std::io::Result<Renewals> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangups = signal(SignalKind::hangup())?;
        let (renew, renewals) = tokio::sync::mpsc::unbounded_channel();
        let (flags, endpoints) = (args.etcd_flags.clone(), args.etcd.clone());
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                match flags.access(&endpoints) {
                    Ok(access) => {
                        if renew.send(access).is_err() {
                            return;
                        }
                    }
                    Err(e) => eprintln!("the etcd access in use stays: {e}"),
                }
            }
        });
        Ok(Some(renewals))
    }
    #[cfg(not(unix))]
    {
        let _ = args;
        Ok(None)
    }
}

async fn on_etcd(args: &Args, plane: Plane) -> Result<bool, Box<dyn std::error::Error>> {
    let etcd = args.etcd_access()?;
    if let Some(role) = &args.role {
        let prefix = args.prefix.as_deref().ok_or("--role needs --prefix")?;
        let renewals = on_hangup(args)?;
        match plane {
            Plane::Mizar => {
                let op =
                    Operator::from_role(role).ok_or_else(|| format!("no operator `{role}`"))?;
                operator(&etcd, prefix, LEASE, op, renewals).await?;
            }
            Plane::PodOps => {
                if !podops_roles().contains(&role.as_str()) {
                    return Err(format!("no PodOps process `{role}`").into());
                }
                podops_process(&etcd, prefix, LEASE, role, args.until, renewals).await?;
            }
        }
        return Ok(true);
    }
    let nanos = SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos();
    let seconds = |on: u64| Duration::from_secs(if args.chaos { on } else { 0 });
    let run = Chaos {
        etcd,
        prefix: format!("/fsm-chaos/{plane:?}/{}-{nanos}/", std::process::id()),
        duration: seconds(args.seconds),
        kill_every: seconds(1),
        deadline: Duration::from_secs(args.deadline),
        lease: LEASE,
        forget_after: Some(seconds(args.forget_removals_after)).filter(|t| !t.is_zero()),
    };
    let me = std::env::current_exe()?;
    let command = |role: &str, until: u64| {
        let mut cmd = Command::new(&me);
        cmd.args(args.etcd_args())
            .arg("--prefix")
            .arg(&run.prefix)
            .arg("--role")
            .arg(role)
            .arg("--until")
            .arg(until.to_string());
        cmd
    };
    let report = match plane {
        Plane::Mizar => self::run(&run, |op| command(op.role(), 0)).await?,
        Plane::PodOps => run_podops(&run, command).await?,
    };
    for late in &report.late {
        println!("late: {late}");
    }
    for violation in &report.violations {
        println!("violation: {violation}");
    }
    println!(
        "{} actions of killed processes rolled back by the healer",
        report.rolled_back
    );
    println!(
        "{} objects removed, their histories archived",
        report.removed
    );
    if run.forget_after.is_some() {
        println!("{} removals forgotten by the stores", report.forgotten);
    }
    println!("{}", report.line());
    Ok(report.passed())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, SystemTime};

    use clap::Parser;
    use fsm_runtime::StoreError;

    use super::{Args, Forgets, forgetting};

    /// A store standing in for etcd: its `n`th forgetting (from 0) answers
    /// `answer(n)`.
    #[derive(Clone)]
    struct Stand<A>(Arc<AtomicUsize>, A);

    impl<A: Fn(usize) -> Result<usize, StoreError> + Clone + Send + Sync + 'static> Forgets
        for Stand<A>
    {
        fn forget_removals(&self, _before: SystemTime) -> Result<usize, StoreError> {
            (self.1)(self.0.fetch_add(1, Ordering::SeqCst))
        }
    }

    fn unavailable(retryable: bool) -> StoreError {
        StoreError::Unavailable {
            message: "etcd answered no".into(),
            retryable,
        }
    }

    /// The user's run: a while, then its result. (The tests' clock is
    /// tokio's, paused: it moves on when every task waits, so the passes
    /// come at 0.5 s and 1 s of it, in no real time, and the run ends at
    /// 1.2 s. A pass's blocking call holds it, as a real one would.)
    async fn user() -> &'static str {
        tokio::time::sleep(Duration::from_millis(1200)).await;
        "the user's report"
    }

    /// A failure no retry mends ends the forgetting with its message, and
    /// the user's run still ends with its own result.
    #[tokio::test(start_paused = true)]
    async fn forgetting_that_fails_for_good_says_why_and_lets_the_run_end() {
        let calls = Arc::new(AtomicUsize::new(0));
        let store = Stand(calls.clone(), |_| Err(unavailable(false)));
        let (done, forgotten) = forgetting(vec![store], Some(Duration::ZERO), user()).await;
        assert_eq!(done, "the user's report");
        assert_eq!(
            forgotten,
            Err("forgetting removals failed: store unavailable: etcd answered no".into())
        );
        // The first failure ended the passes: none came after it.
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    /// A failure a retry may mend is passed over: the next pass tries again,
    /// and the count is of the removals forgotten, the last pass's
    /// (after the user's run) included.
    #[tokio::test(start_paused = true)]
    async fn forgetting_passes_over_a_failure_a_retry_may_mend() {
        let calls = Arc::new(AtomicUsize::new(0));
        let store = Stand(calls.clone(), |n| match n {
            0 => Err(unavailable(true)),
            _ => Ok(3),
        });
        let (done, forgotten) = forgetting(vec![store], Some(Duration::ZERO), user()).await;
        assert_eq!(done, "the user's report");
        // The pass at 0.5 s failed; the one at 1 s and the last one, after
        // the run, forgot.
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(forgotten, Ok(6));
    }

    /// Without `forget_after`, nothing is forgotten, nor asked to be.
    #[tokio::test(start_paused = true)]
    async fn without_an_age_nothing_is_forgotten() {
        let calls = Arc::new(AtomicUsize::new(0));
        let store = Stand(calls.clone(), |_| Ok(1));
        let (done, forgotten) = forgetting(vec![store], None, user()).await;
        assert_eq!((done, forgotten), ("the user's report", Ok(0)));
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }

    /// The etcd access flags are `fsm serve`'s (one declaration), and mean
    /// nothing without `--etcd`.
    #[test]
    fn etcd_access_flags_go_with_etcd() {
        let args = Args::try_parse_from([
            "mizar",
            "--etcd",
            "127.0.0.1:2379",
            "--etcd-cacert",
            "ca.pem",
            "--etcd-user",
            "ops",
        ])
        .unwrap();
        assert_eq!(
            args.etcd_args(),
            [
                "--etcd",
                "127.0.0.1:2379",
                "--etcd-cacert",
                "ca.pem",
                "--etcd-user",
                "ops"
            ]
        );
        for alone in [["--etcd-cacert", "ca.pem"], ["--etcd-user", "ops"]] {
            let refused = Args::try_parse_from(["mizar", alone[0], alone[1]]).unwrap_err();
            assert!(refused.to_string().contains("--etcd <ETCD>"), "{refused}");
        }
        let half = Args::try_parse_from(["mizar", "--etcd", "e:1", "--etcd-cert", "c.pem"]);
        assert!(half.unwrap_err().to_string().contains("--etcd-key"));
    }

    /// Each SIGHUP reads the etcd flags again and hands their access to the
    /// process's operators: a password changed in its file is the next
    /// access; a file that does not read hands nothing (the access in use
    /// stays), and the next SIGHUP after it is back hands it.
    #[cfg(unix)]
    #[tokio::test(flavor = "current_thread")]
    async fn each_hangup_hands_the_access_the_flags_give_then() {
        use std::time::Duration;

        use fsm_etcd::{EtcdAccess, EtcdUser};

        let dir = tempfile::tempdir().unwrap();
        let password = dir.path().join("password");
        std::fs::write(&password, "first\n").unwrap();
        let args = Args::try_parse_from([
            "mizar",
            "--etcd",
            "127.0.0.1:2379",
            "--etcd-user",
            "ops",
            "--etcd-password-file",
            password.to_str().unwrap(),
        ])
        .unwrap();
        let mut renewals = super::on_hangup(&args).unwrap().expect("signals on unix");
        let hang_up = || {
            let me = std::process::id().to_string();
            let sent = std::process::Command::new("kill")
                .args(["-HUP", &me])
                .status();
            assert!(sent.unwrap().success());
        };
        let access =
            |word: &str| EtcdAccess::new(["127.0.0.1:2379"]).user(EtcdUser::new("ops", word));
        let next = async |renewals: &mut tokio::sync::mpsc::UnboundedReceiver<EtcdAccess>| {
            tokio::time::timeout(Duration::from_secs(10), renewals.recv())
                .await
                .expect("an access within ten seconds")
        };
        std::fs::write(&password, "second\n").unwrap();
        hang_up();
        assert_eq!(next(&mut renewals).await, Some(access("second")));
        std::fs::remove_file(&password).unwrap();
        hang_up();
        let nothing = tokio::time::timeout(Duration::from_millis(500), renewals.recv()).await;
        assert!(nothing.is_err(), "handed {nothing:?} without a password");
        std::fs::write(&password, "third").unwrap();
        hang_up();
        assert_eq!(next(&mut renewals).await, Some(access("third")));
    }
}
