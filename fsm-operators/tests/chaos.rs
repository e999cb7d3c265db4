//! The control planes as processes on the test command's etcd, a random one
//! killed about every second and restarted: short versions of
//! `cargo run --release --example mizar -- --etcd ENDPOINTS --chaos` (the VPC
//! Operator also killed while it holds each round's VPC delete) and of the same
//! for `--example podopslifecycle`.
//!
//! The endpoint comes from `FSM_ETCD_ENDPOINTS` (default `127.0.0.1:2379`).
//! Without a reachable etcd the test fails, saying how to get one;
//! `FSM_SKIP_ETCD=1` skips it instead.

#[path = "../../fsm-core/tests/common/mod.rs"]
mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fsm_operators::chaos::{self, Chaos, Report};
use fsm_operators::mizar::Operator;

/// What a chaos test hands the processes it starts: the role to run, the run's
/// prefix, and when operation controllers stop beginning operations.
const ROLE: &str = "FSM_CHAOS_ROLE";
const PREFIX: &str = "FSM_CHAOS_PREFIX";
const UNTIL: &str = "FSM_CHAOS_UNTIL";
const LEASE: Duration = Duration::from_secs(2);

use common::etcd_endpoints as endpoints;

/// The test etcd, in plain text.
fn etcd() -> fsm_etcd::EtcdAccess {
    fsm_etcd::EtcdAccess::new(endpoints())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// One Mizar operator process of the chaos test (this test binary, started
/// again with only this test): runs until it is killed.
#[test]
#[ignore = "an operator process of operators_killed_and_restarted_on_etcd_finish_every_workflow"]
fn operator_process() {
    let (Ok(role), Ok(prefix)) = (std::env::var(ROLE), std::env::var(PREFIX)) else {
        return;
    };
    let op = Operator::from_role(&role).expect("an operator's role");
    runtime()
        .block_on(chaos::operator(&etcd(), &prefix, LEASE, op, None))
        .unwrap();
}

/// One PodOpsLifecycle process of the chaos test: a controller, or an
/// operation controller.
#[test]
#[ignore = "a process of controllers_killed_and_restarted_on_etcd_leave_no_operation_half_done"]
fn podops_process() {
    let (Ok(role), Ok(prefix)) = (std::env::var(ROLE), std::env::var(PREFIX)) else {
        return;
    };
    let until = std::env::var(UNTIL).map_or(0, |u| u.parse().expect("seconds"));
    runtime()
        .block_on(chaos::podops_process(
            &etcd(),
            &prefix,
            LEASE,
            &role,
            until,
            None,
        ))
        .unwrap();
}

/// A 4-second chaos run's settings, or `None` when no etcd answers and the
/// tests that need one are skipped.
fn short_run(plane: &str) -> Option<Chaos> {
    if let Err(e) = fsm_etcd::EtcdStore::connect(endpoints(), "/fsm-test/probe/") {
        common::missing(
            "FSM_SKIP_ETCD",
            &format!("no etcd answers at {:?} ({e})", endpoints()),
            "run the tests with scripts/test, which starts one, or start one and set FSM_ETCD_ENDPOINTS",
        );
        return None;
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    Some(Chaos {
        etcd: etcd(),
        prefix: format!("/fsm-test/{plane}-chaos/{}-{nanos}/", std::process::id()),
        duration: Duration::from_secs(4),
        kill_every: Duration::from_secs(1),
        deadline: Duration::from_secs(60),
        lease: LEASE,
        forget_after: Some(Duration::from_secs(1)),
    })
}

/// This test binary, to run only the ignored test `name` as `role` of `run`
/// (`until`: when operation controllers stop beginning operations).
fn process(name: &str, role: &str, run: &Chaos, until: u64) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--ignored",
        "--exact",
        name,
        "--nocapture",
        "--test-threads=1",
    ])
    .env(ROLE, role)
    .env(PREFIX, &run.prefix)
    .env(UNTIL, until.to_string())
    .stdout(std::process::Stdio::null());
    cmd
}

/// The chaos happened: processes were killed while the user's rounds ran,
/// and the stores forgot removals meanwhile (the checks, which
/// `report.passed()` says passed, read lives whose removals are forgotten).
fn assert_chaos(report: &Report) {
    println!("{}", report.line());
    assert!(report.passed(), "{report:#?}");
    assert!(report.restarts > 0, "{report:#?}");
    assert!(report.forgotten > 0, "no removal forgotten: {report:#?}");
}

#[test]
fn controllers_killed_and_restarted_on_etcd_leave_no_operation_half_done() {
    let Some(run) = short_run("podops") else {
        return;
    };
    let report = runtime()
        .block_on(chaos::run_podops(&run, |role, until| {
            process("podops_process", role, &run, until)
        }))
        .unwrap();
    assert_chaos(&report);
    // Operations of both types ran to their ends, however slow the machine.
    let types = chaos::OPERATION_TYPES.len();
    assert!(
        report.workflows >= types * chaos::PODOPS_OPERATIONS_PER_TYPE,
        "{report:#?}"
    );
    // Each of them removed by PodOpsLifecycle, its life archived (and checked
    // with the others: `report.violations` reads every life).
    assert_eq!(report.removed, report.workflows, "{report:#?}");
}

#[test]
fn operators_killed_and_restarted_on_etcd_finish_every_workflow() {
    let Some(run) = short_run("mizar") else {
        return;
    };
    let report = runtime()
        .block_on(chaos::run(&run, |op| {
            process("operator_process", op.role(), &run, 0)
        }))
        .unwrap();
    assert_chaos(&report);
    assert!(report.passed(), "{report:#?}");
    // The chaos happened: processes were killed, and kills landed on actions in
    // flight that the healer had to roll back and the restarted operator redo.
    assert!(report.restarts > 0, "{report:#?}");
    assert!(
        report.rolled_back > 0,
        "no kill met an action in flight: {report:#?}"
    );
    // The defaults, and a round: 5 creates, an update, 5 deletes.
    assert!(report.workflows >= 12, "{report:#?}");
    // Each round's VPC, network, two pods and service, and the VPC's divider
    // and the network's bouncer, removed and archived (the checks read them).
    assert!(report.removed >= 7, "{report:#?}");
}

/// The pod's trace is the pod's, not a process's: read from the operations'
/// lives on etcd, it shows every controller's steps to a handle that ran
/// none of them (as the chaos run's driver runs none), the same lines as the
/// handle whose tasks took them.
#[test]
fn the_trace_on_etcd_shows_the_steps_of_every_process() {
    use fsm_operators::machines::PodOpsState as S;
    use fsm_operators::podops::{OperationController, PodOps, SERVICE_AVAILABLE};

    let Some(run) = short_run("podops-trace") else {
        return;
    };
    let open = || PodOps::on_etcd("web-0", &run.etcd, &run.prefix, LEASE).unwrap();
    let (controlling, watching) = (open(), open());
    let limit = Duration::from_secs(60);
    runtime().block_on(async {
        let controllers = controlling.start();
        let replace = OperationController::new("replace");
        replace.begin(&watching, "op").await.unwrap();
        let operate = |ops: &PodOps| ops.phase("op") == Some(S::Operate);
        assert!(watching.wait_until(limit, operate).await);
        replace.finish(&watching, "op").await.unwrap();
        let served = |ops: &PodOps| {
            ops.removed_in("op").is_some() && ops.pod().labels.contains_key(SERVICE_AVAILABLE)
        };
        assert!(watching.wait_until(limit, served).await);
        controllers.stop().await;
    });
    let steps = |ops: &PodOps| -> Vec<(String, String)> {
        let trace = ops.trace().into_iter();
        trace
            .filter(|l| l.id.as_deref() == Some("op"))
            .map(|l| (l.who, l.what))
            .collect()
    };
    let seen = steps(&watching);
    for (who, what) in [
        ("replace-controller", "begin -> operating"),
        ("podopslifecycle", "begin_pre_check -> pre-check"),
        ("pod-transition-rule", "pass_pre_check -> pre-checked"),
        ("service-controller", "remove_finalizer -> prepare"),
        ("replace-controller", "finish -> operated"),
        ("service-controller", "add_finalizer -> complete"),
        ("podopslifecycle", "finish_complete -> available"),
        ("podopslifecycle", "removed, its history archived"),
    ] {
        assert!(
            seen.contains(&(who.to_owned(), what.to_owned())),
            "{who}: {what} not in {seen:#?}"
        );
    }
    assert_eq!(steps(&controlling), seen);
}

/// Mizar's trace too is the cluster's: a handle on the same etcd prefix that
/// runs no operator sees each operator's steps of a VPC's creation, the same
/// lines as the handle whose operators took them.
#[test]
fn mizar_s_trace_on_etcd_shows_the_steps_of_every_process() {
    use fsm_operators::mizar::{Cluster, Kind};

    let Some(run) = short_run("mizar-trace") else {
        return;
    };
    let open = || Cluster::on_etcd(&run.etcd, &run.prefix, LEASE, false).unwrap();
    let (operating, watching) = (open(), open());
    runtime().block_on(async {
        let operators = operating.start_operators(&Operator::ALL).unwrap();
        watching.create_droplet("droplet-1").unwrap();
        watching.create_vpc("vpc-1").unwrap();
        let provisioned =
            |c: &Cluster| c.state(Kind::Vpc, "vpc-1").as_deref() == Some("Provisioned");
        assert!(
            watching
                .wait_until(Duration::from_secs(60), provisioned)
                .await
        );
        operators.stop().await;
    });
    let steps = |c: &Cluster| -> Vec<(String, String)> {
        let trace = c.trace().into_iter();
        trace
            .filter(|l| l.what.contains("vpc-1"))
            .filter(|l| l.what.starts_with("created") || l.what.contains(" -> "))
            .map(|l| (l.who, l.what))
            .collect()
    };
    let seen = steps(&watching);
    for (who, what) in [
        ("user", "created Vpc vpc-1"),
        ("vpc-operator", "created Divider vpc-1/divider-0"),
        (
            "droplet-operator",
            "place Divider vpc-1/divider-0 -> Placed",
        ),
        ("vpc-operator", "provision Vpc vpc-1 -> Provisioned"),
    ] {
        assert!(
            seen.contains(&(who.to_owned(), what.to_owned())),
            "{who}: {what} not in {seen:#?}"
        );
    }
    assert_eq!(steps(&operating), seen);
}
