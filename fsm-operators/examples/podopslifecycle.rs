//! KusionStack's PodOpsLifecycle (`podopslifecycle.md`) on the fsm runtime: two
//! operations of different types on one pod at once, one of them undone midway,
//! every phase traced with its id and time.
//!
//! `cargo run --example podopslifecycle`: the controllers as tasks of this
//! process, on memory.
//!
//! `cargo run --release --example podopslifecycle -- --etcd ENDPOINTS --chaos`:
//! the replace and restart operation controllers, PodOpsLifecycle,
//! PodTransitionRule and the service controller each its own process on etcd, a
//! random one killed (SIGKILL) about every second and started again while the
//! operation controllers run their operations (every third restart undone),
//! and the removals older than a second forgotten meanwhile
//! (`--forget-removals-after SECONDS`, 0: never); at the end, no operation half-done, no label left, every protection finalizer
//! back, and every broken promise its writers saw (the webhook's label-pair rule
//! is checked on every write). Its last line is
//! `N workflows completed, K operator restarts, V invariant violations`. An
//! etcd that checks who connects takes `--etcd-cacert`, `--etcd-cert`,
//! `--etcd-key` and `--etcd-user` (its password in `FSM_ETCD_PASSWORD`).

use std::time::Duration;

use clap::Parser;
use fsm_operators::chaos::{self, Args, Plane};
use fsm_operators::machines::PodOpsState as S;
use fsm_operators::podops::{OperationController, PodOps, SERVICE_AVAILABLE};

const LIMIT: Duration = Duration::from_secs(30);

fn in_phase(id: &'static str, phase: S) -> impl Fn(&PodOps) -> bool {
    move |ops| ops.phase(id) == Some(phase)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    match chaos::main_on_etcd(&args, Plane::PodOps).await {
        None => in_memory().await,
        Some(Ok(true)) => Ok(()),
        Some(Ok(false)) => std::process::exit(1),
        Some(Err(e)) => Err(e),
    }
}

/// The controllers as tasks of this process, on memory, with a trace.
async fn in_memory() -> Result<(), Box<dyn std::error::Error>> {
    let ops = PodOps::new("web-0");
    let controllers = ops.start();
    let replace = OperationController::new("replace");
    let restart = OperationController::new("restart");

    // Two controllers operate the pod at once: a replacement and a restart.
    replace.begin(&ops, "op-replace").await?;
    restart.begin(&ops, "op-restart").await?;
    // A second restart is refused by the restart controller itself.
    if let Err(e) = restart.begin(&ops, "op-restart-2").await {
        println!("refused: {e}");
    }
    let operate = ops
        .wait_until(LIMIT, in_phase("op-replace", S::Operate))
        .await;
    // The restart is cancelled midway.
    restart.undo(&ops, "op-restart").await?;
    if operate {
        replace.finish(&ops, "op-replace").await?;
    }
    let served = ops
        .wait_until(LIMIT, |ops| {
            ops.pod().labels.contains_key(SERVICE_AVAILABLE)
        })
        .await;
    controllers.stop().await;

    println!(
        "\n{:<18} {:<12} {:<20} what",
        "unix time", "operation", "who"
    );
    for line in ops.trace() {
        let at = format!("{}.{:06}", line.at / 1_000_000, line.at % 1_000_000);
        let id = line.id.unwrap_or_default();
        println!("{at:<18} {id:<12} {:<20} {}", line.who, line.what);
    }
    println!("\nlabels at the end: {:#?}", ops.pod().labels);
    if !(operate && served && ops.violations().is_empty()) {
        return Err(format!("stalled or broken: {:?}", ops.violations()).into());
    }
    Ok(())
}
