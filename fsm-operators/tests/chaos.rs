//! Mizar's operators as processes on the test command's etcd, a random one
//! killed about every second and restarted, the VPC Operator killed while it
//! holds each round's VPC delete: a short version of
//! `cargo run --release --example mizar -- --etcd ENDPOINTS --chaos`.
//!
//! The endpoint comes from `FSM_ETCD_ENDPOINTS` (default `127.0.0.1:2379`).
//! Without a reachable etcd the test fails, saying how to get one;
//! `FSM_SKIP_ETCD=1` skips it instead.

#[path = "../../fsm-core/tests/common/mod.rs"]
mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fsm_operators::chaos::{self, Chaos};
use fsm_operators::mizar::Operator;

/// What the chaos test hands the operator processes it starts.
const OPERATOR: &str = "FSM_MIZAR_OPERATOR";
const PREFIX: &str = "FSM_MIZAR_PREFIX";
const LEASE: Duration = Duration::from_secs(2);

use common::etcd_endpoints as endpoints;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// One operator process of the chaos test (this test binary, started again
/// with only this test): runs until it is killed.
#[test]
#[ignore = "an operator process of operators_killed_and_restarted_on_etcd_finish_every_workflow"]
fn operator_process() {
    let (Ok(role), Ok(prefix)) = (std::env::var(OPERATOR), std::env::var(PREFIX)) else {
        return;
    };
    let op = Operator::from_role(&role).expect("an operator's role");
    runtime()
        .block_on(chaos::operator(&endpoints(), &prefix, LEASE, op))
        .unwrap();
}

#[test]
fn operators_killed_and_restarted_on_etcd_finish_every_workflow() {
    if let Err(e) = fsm_etcd::EtcdStore::connect(endpoints(), "/fsm-test/probe/") {
        common::missing(
            "FSM_SKIP_ETCD",
            &format!("no etcd answers at {:?} ({e})", endpoints()),
            "run the tests with scripts/test, which starts one, or start one and set FSM_ETCD_ENDPOINTS",
        );
        return;
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let run = Chaos {
        endpoints: endpoints(),
        prefix: format!("/fsm-test/mizar-chaos/{}-{nanos}/", std::process::id()),
        duration: Duration::from_secs(4),
        kill_every: Duration::from_secs(1),
        deadline: Duration::from_secs(60),
        lease: LEASE,
    };
    let me = std::env::current_exe().unwrap();
    let report = runtime()
        .block_on(chaos::run(&run, |op| {
            let mut cmd = tokio::process::Command::new(&me);
            cmd.args([
                "--ignored",
                "--exact",
                "operator_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(OPERATOR, op.role())
            .env(PREFIX, &run.prefix)
            .stdout(std::process::Stdio::null());
            cmd
        }))
        .unwrap();
    println!("{}", report.line());
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
}
