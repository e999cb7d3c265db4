//! KusionStack's PodOpsLifecycle (`podopslifecycle.md`) on the fsm runtime: two
//! operations of different types on one pod at once, one of them undone midway,
//! every phase traced with its id and time.
//!
//! `cargo run --example podopslifecycle`

use std::time::Duration;

use fsm_operators::machines::PodOpsState as S;
use fsm_operators::podops::{OperationController, PodOps, SERVICE_AVAILABLE};

const LIMIT: Duration = Duration::from_secs(30);

fn in_phase(id: &'static str, phase: S) -> impl Fn(&PodOps) -> bool {
    move |ops| ops.phase(id) == Some(phase)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
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
