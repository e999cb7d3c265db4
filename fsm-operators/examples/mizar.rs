//! Mizar's object workflows (`mizar-object-workflows.md`) on the fsm runtime: seven
//! operators watch each other's objects and hand them on, one owner per state.
//!
//! The operators create the default VPC and network on start-up; a user adds a VPC,
//! a network, a pod and a service, then deletes them, parents first: each
//! object's record is removed once its delete workflow has run, children first.
//!
//! `cargo run --example mizar`: every operator a task of this process, on memory.
//!
//! `cargo run --release --example mizar -- --etcd ENDPOINTS --chaos`: every
//! operator its own process on etcd, a random one killed (SIGKILL) about every
//! second and started again while a user creates, updates and deletes objects,
//! and the removals older than a second forgotten meanwhile
//! (`--forget-removals-after SECONDS`, 0: never); the histories checked at the
//! end. Its last line is
//! `N workflows completed, K operator restarts, V invariant violations`, and it
//! exits non-zero when V > 0 or a workflow missed its deadline. Without
//! `--chaos`, one round with the operators as processes and no kills. An
//! etcd that checks who connects takes `--etcd-cacert`, `--etcd-cert`,
//! `--etcd-key` and `--etcd-user` (its password in `FSM_ETCD_PASSWORD`).

use std::time::Duration;

use clap::Parser;
use fsm_operators::chaos::{self, Args, Plane};
use fsm_operators::mizar::{Cluster, DEFAULT_NETWORK, DEFAULT_VPC, Kind};
use fsm_runtime::Actor;

const LIMIT: Duration = Duration::from_secs(30);

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    match chaos::main_on_etcd(&args, Plane::Mizar).await {
        None => in_memory().await,
        Some(Ok(true)) => Ok(()),
        Some(Ok(false)) => std::process::exit(1),
        Some(Err(e)) => Err(e),
    }
}

/// Every operator a task of this process, on memory, with a trace.
async fn in_memory() -> Result<(), Box<dyn std::error::Error>> {
    // The operators start and create the default VPC and network.
    let mizar = Cluster::with_defaults();
    let operators = mizar.start();

    // The transit daemons bootstrap; a user creates a VPC, a network, a pod and
    // a service with the pod as its backend.
    for node in ["droplet-1", "droplet-2"] {
        mizar.create_droplet(node)?;
    }
    mizar.create_vpc("vpc-1")?;
    mizar.create_network("vpc-1", "vpc-1/net-1")?;
    mizar.create_endpoint("vpc-1/net-1", "vpc-1/net-1/pod-a")?;
    mizar.create_scaled_endpoint("vpc-1/net-1", "vpc-1/net-1/svc", &["vpc-1/net-1/pod-a"])?;
    // Every object of the user's kinds (the defaults stay) is in `state`.
    let all_in = |state: &'static str| {
        move |c: &Cluster| {
            [
                Kind::Vpc,
                Kind::Network,
                Kind::Endpoint,
                Kind::ScaledEndpoint,
            ]
            .iter()
            .all(|&k| {
                c.ids(k)
                    .iter()
                    .filter(|id| ![DEFAULT_VPC, DEFAULT_NETWORK].contains(&id.as_str()))
                    .all(|id| c.state(k, id.as_str()).as_deref() == Some(state))
            })
        }
    };
    let defaults =
        |c: &Cluster| c.state(Kind::Network, DEFAULT_NETWORK).as_deref() == Some("Provisioned");
    let provisioned = mizar
        .wait_until(LIMIT, move |c| all_in("Provisioned")(c) && defaults(c))
        .await;
    if !provisioned {
        return stalled(&mizar, "provisioning");
    }

    // A rogue process with the Droplet Operator's credentials tries to take over
    // states other operators own; the runtime refuses.
    let rogue = Actor::new("rogue").with_role("droplet-operator");
    for (kind, id, action) in [
        (Kind::Vpc, "vpc-1", "delete"),
        (Kind::Network, "vpc-1/net-1", "delete"),
        (Kind::Bouncer, "vpc-1/net-1/bouncer-0", "request_delete"),
    ] {
        let refused = mizar.runtime(kind).run(id, &rogue, action).unwrap_err();
        println!("rogue {action} {id}: refused: {refused}");
    }

    // Deleting the VPC first: its operator waits until its network is gone, which
    // waits until its endpoint is gone.
    mizar.delete("vpc-1")?;
    mizar.delete("vpc-1/net-1")?;
    mizar.delete("vpc-1/net-1/pod-a")?;
    mizar.delete("vpc-1/net-1/svc")?;
    // Each delete workflow ends in the removal of the object's record, by the
    // operator the seed names ("The VPC Operator Deletes the VPC Object").
    let removed = |c: &Cluster| {
        [
            (Kind::Vpc, "vpc-1"),
            (Kind::Divider, "vpc-1/divider-0"),
            (Kind::Network, "vpc-1/net-1"),
            (Kind::Bouncer, "vpc-1/net-1/bouncer-0"),
            (Kind::Endpoint, "vpc-1/net-1/pod-a"),
            (Kind::ScaledEndpoint, "vpc-1/net-1/svc"),
        ]
        .iter()
        .all(|&(kind, id)| c.removed_in(kind, id).as_deref() == Some("Deleted"))
    };
    let deleted = mizar.wait_until(LIMIT, removed).await;
    operators.stop().await;
    if !deleted {
        return stalled(&mizar, "deletion");
    }
    print_trace(&mizar);
    let errors = mizar.errors();
    if !errors.is_empty() {
        return Err(format!("operators met errors: {errors:?}").into());
    }
    Ok(())
}

fn print_trace(mizar: &Cluster) {
    println!("\n tick  who                what");
    for line in mizar.trace() {
        println!("{:>5}  {:<17}  {}", line.tick, line.who, line.what);
    }
}

fn stalled(mizar: &Cluster, what: &str) -> Result<(), Box<dyn std::error::Error>> {
    print_trace(mizar);
    for kind in Kind::ALL {
        for id in mizar.ids(kind) {
            println!("{kind:?} {id}: {:?}", mizar.state(kind, id.as_str()));
        }
    }
    Err(format!("{what} stalled").into())
}
