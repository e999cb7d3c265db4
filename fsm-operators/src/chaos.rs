//! Mizar's operators as processes on etcd, killed and restarted while a user
//! creates, updates and deletes objects; the histories checked at the end.
//!
//! The driver ([`run`]) opens the cluster on etcd, starts one process per
//! operator (the caller says how: [`run`]'s `spawn`), runs a healer for every
//! kind, and plays the user: rounds of a VPC with a network, two pods and a
//! service, created, the service's backends changed, all deleted, parents first.
//! Meanwhile it kills a random operator process with SIGKILL about every
//! `kill_every` and starts it again. A process ([`operator`]) runs one operator
//! until it is killed.
//!
//! How an operator recovers after a restart: nothing of its own survives (its
//! cache, the delete actions it held in flight); everything it needs is in etcd.
//! The actions its predecessor held are abandoned once their lease expires (the
//! store marks a holder whose lease key is gone), and the healer rolls them back
//! to the state they started from. The restarted operator looks at everything on
//! start and every [`RESYNC`](crate::mizar::RESYNC), finds its objects in the
//! states it owns, and does the step again: steps are idempotent on the topology
//! (links are sets, an address is given once), and a creation cut off between
//! the topology and the record is finished by the next one.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fsm_runtime::{EntryKind, ObjectId};
use tokio::process::{Child, Command};

use crate::mizar::{Cluster, DEFAULT_NETWORK, Kind, MizarError, Operator};

/// A chaos run's settings.
#[derive(Debug, Clone)]
pub struct Chaos {
    /// etcd's endpoints.
    pub endpoints: Vec<String>,
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
}

/// What a chaos run found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Workflows that completed: each object's create and delete, each update of
    /// a service's backends.
    pub workflows: usize,
    /// Operator processes killed and started again.
    pub restarts: usize,
    /// Actions of killed processes the healer rolled back (Healed entries): kills
    /// that landed on an action in flight.
    pub rolled_back: usize,
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

/// Runs one operator process's operator on the cluster at `endpoints` and
/// `prefix` until the process is killed (or the future dropped).
pub async fn operator(
    endpoints: &[String],
    prefix: &str,
    lease: Duration,
    op: Operator,
) -> Result<(), MizarError> {
    let cluster = connect(endpoints, prefix, lease).await?;
    let _operators = cluster.start_operators(&[op])?;
    std::future::pending::<()>().await;
    Ok(())
}

/// The cluster on etcd, connected off the async threads.
async fn connect(
    endpoints: &[String],
    prefix: &str,
    lease: Duration,
) -> Result<Cluster, MizarError> {
    let (endpoints, prefix) = (endpoints.to_vec(), prefix.to_owned());
    tokio::task::spawn_blocking(move || Cluster::on_etcd(&endpoints, &prefix, lease, true))
        .await
        .expect("connecting does not panic")
}

/// A number below `n`, different in every call and every run.
fn random_below(n: usize) -> usize {
    use std::hash::{BuildHasher, Hasher};
    let hasher = std::collections::hash_map::RandomState::new().build_hasher();
    (hasher.finish() % n as u64) as usize
}

/// Runs the chaos run `chaos`, starting each operator's process with
/// `spawn(operator)` (a command that runs [`operator`] for it).
pub async fn run(chaos: &Chaos, spawn: impl Fn(Operator) -> Command) -> Result<Report, MizarError> {
    let cluster = connect(&chaos.endpoints, &chaos.prefix, chaos.lease).await?;
    let _healers = cluster.spawn_healers(Duration::from_millis(200));
    let start = |op: Operator| -> Child {
        spawn(op)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("start the {} process: {e}", op.role()))
    };
    let mut processes: Vec<(Operator, Child)> = Operator::ALL
        .into_iter()
        .map(|op| (op, start(op)))
        .collect();
    for node in ["droplet-1", "droplet-2"] {
        cluster.create_droplet(node)?;
    }

    // The killer: one random operator process about every `kill_every`, while
    // the user works.
    // Besides, the user asks for the VPC Operator to be killed while it holds a
    // VPC's delete, so that every round's recovery includes a rollback.
    let over = AtomicBool::new(false);
    let (ask, mut asked) = tokio::sync::mpsc::unbounded_channel::<Operator>();
    let chaotic = !chaos.kill_every.is_zero();
    let killer = async {
        let mut restarts = 0;
        while chaotic && !over.load(Ordering::Relaxed) {
            // Between half and one and a half periods.
            let pause = chaos.kill_every / 2 + chaos.kill_every * random_below(1000) as u32 / 1000;
            let target = tokio::select! {
                () = tokio::time::sleep(pause) => Operator::ALL[random_below(Operator::ALL.len())],
                Some(op) = asked.recv() => op,
            };
            if over.load(Ordering::Relaxed) {
                break;
            }
            let (op, child) = processes
                .iter_mut()
                .find(|(op, _)| *op == target)
                .expect("every operator has a process");
            let _ = child.kill().await;
            *child = start(*op);
            restarts += 1;
        }
        restarts
    };
    let user = async {
        let mut report = Report::default();
        // The default VPC and network, created by their operators.
        let defaults =
            |c: &Cluster| c.state(Kind::Network, DEFAULT_NETWORK).as_deref() == Some("Provisioned");
        workflow(&cluster, &mut report, chaos.deadline, "defaults", defaults).await;
        let began = Instant::now();
        let mut round = 0;
        let mut result = Ok(());
        while result.is_ok() && (round == 0 || began.elapsed() < chaos.duration) {
            let ask = chaotic.then_some(&ask);
            result = user_round(&cluster, &mut report, chaos.deadline, round, ask).await;
            round += 1;
        }
        over.store(true, Ordering::Relaxed);
        result.map(|()| report)
    };
    let (restarts, report) = tokio::join!(killer, user);
    for (_, child) in &mut processes {
        let _ = child.kill().await;
    }
    let mut report = report?;
    report.restarts = restarts;
    report.violations = cluster.violations();
    report.rolled_back = Kind::ALL
        .into_iter()
        .flat_map(|kind| {
            let rt = cluster.runtime(kind);
            cluster.ids(kind).into_iter().map(move |id| {
                let history = rt.history(id).unwrap_or_default();
                history
                    .iter()
                    .filter(|e| e.kind == EntryKind::Healed)
                    .count()
            })
        })
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
    kill: Option<&tokio::sync::mpsc::UnboundedSender<Operator>>,
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
            let _ = kill.send(Operator::Vpc);
        }
    }
    for (kind, id) in &objects {
        let gone = |c: &Cluster| c.state(*kind, id).as_deref() == Some("Deleted");
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
        Err(e) => format!("unreadable: {e}"),
    }
}
