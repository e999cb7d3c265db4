//! The operators on an etcd that checks who connects (TLS with a client
//! certificate, and a user): the examples' `--etcd-cacert`, `--etcd-cert`,
//! `--etcd-key` and `--etcd-user` reach it, for the stores and the API
//! server's documents alike, and the processes a run starts get the same.

#[path = "../../fsm-etcd/tests/support/secure.rs"]
mod secure;

use std::time::Duration;

use clap::Parser;
use fsm_etcd::{EtcdAccess, EtcdUser};
use fsm_operators::chaos::{self, Args};
use fsm_operators::mizar::{Cluster, Kind, Operator};

/// The Mizar operators provision a VPC on an etcd that takes only TLS, from
/// clients with a certificate its authority signed, as a user; the same
/// cluster in plain text, or without the user, is refused.
#[test]
fn the_operators_run_on_an_etcd_that_checks_who_connects() {
    let Some(etcd) = secure::SecureEtcd::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let (ca, cert, key) = (
        file("ca.pem", &etcd.ca),
        file("client.pem", &etcd.client.certificate),
        file("client-key.pem", &etcd.client.key),
    );
    let args = |extra: &[&str]| {
        let given = ["mizar", "--etcd", &etcd.endpoint, "--etcd-cacert", &ca];
        Args::try_parse_from(given.iter().chain(extra)).unwrap()
    };
    let with_identity = args(&["--etcd-cert", &cert, "--etcd-key", &key]);

    // The processes a run starts are given the same access.
    let forwarded =
        Args::try_parse_from(std::iter::once("mizar".into()).chain(with_identity.etcd_args()))
            .unwrap();
    assert_eq!(forwarded.etcd_access(), with_identity.etcd_access());
    // A file that is not what its flag says is named, before connecting.
    let refused = args(&["--etcd-cert", &key, "--etcd-key", &key]).etcd_access();
    assert_eq!(
        refused,
        Err(format!(
            "--etcd-cert {key}: the client certificate holds no PEM certificate"
        ))
    );
    // `--etcd-user` takes its password from the environment, never the
    // command line (none is set here).
    let without_password = args(&["--etcd-user", "root"]).etcd_access();
    assert_eq!(
        without_password,
        Err(
            "--etcd-user root: set its password in the environment variable \
             FSM_ETCD_PASSWORD, or give --etcd-password-file"
                .to_owned()
        )
    );

    let access = with_identity.etcd_access().unwrap();
    let lease = Duration::from_secs(2);
    let prefix = "/fsm-test/secure-mizar/";
    let open = |access: &EtcdAccess| Cluster::on_etcd(access, prefix, lease, false);
    let plain = open(&EtcdAccess::new([&etcd.endpoint]));
    assert!(plain.is_err(), "plain text reached a TLS-only etcd");
    let anonymous = open(&access);
    assert!(anonymous.is_err(), "no user reached an etcd with auth on");
    let mizar = open(&access.user(EtcdUser::new("root", secure::ROOT_PASSWORD))).unwrap();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let provisioned = runtime.block_on(async {
        let operators = mizar.start_operators(&Operator::ALL).unwrap();
        mizar.create_droplet("droplet-0").unwrap();
        mizar.create_vpc("vpc").unwrap();
        let provisioned = mizar
            .wait_until(Duration::from_secs(30), |c| {
                c.state(Kind::Vpc, "vpc").as_deref() == Some("Provisioned")
            })
            .await;
        operators.stop().await;
        provisioned
    });
    assert!(provisioned, "{:#?}", mizar.trace());
    assert_eq!(mizar.errors(), Vec::<String>::new());
    assert_eq!(mizar.violations(), Vec::<String>::new());
}

/// Users `alice` and `bob` (each with `root`'s role) on `etcd`, and the
/// access of each (TLS with the client certificate).
fn alice_and_bob(etcd: &secure::SecureEtcd) -> (EtcdAccess, EtcdAccess) {
    etcd.as_root(async |root| {
        for user in ["alice", "bob"] {
            root.user_add(user, format!("{user}'s password"), None)
                .await
                .unwrap();
            root.user_grant_role(user, "root").await.unwrap();
        }
    });
    let tls = fsm_etcd::EtcdTls::new(etcd.ca.clone())
        .identity(etcd.client.certificate.clone(), etcd.client.key.clone());
    let access = |user: &str| {
        EtcdAccess::new([&etcd.endpoint])
            .tls(tls.clone())
            .user(EtcdUser::new(user, format!("{user}'s password")))
    };
    (access("alice"), access("bob"))
}

/// A cluster reconnected as another user (`Cluster::reconnect`: every
/// store, the topology and the archive) goes on once the first user is
/// deleted: its operators provision a second VPC; a cluster not told is
/// refused; a reconnection etcd refuses leaves the cluster as it was.
#[test]
fn a_cluster_reconnected_as_another_user_goes_on_once_the_first_is_deleted() {
    let Some(etcd) = secure::SecureEtcd::start() else {
        return;
    };
    let (alice, bob) = alice_and_bob(&etcd);
    let (prefix, lease) = ("/fsm-test/reconnected-mizar/", Duration::from_secs(2));
    let mizar = Cluster::on_etcd(&alice, prefix, lease, false).unwrap();
    let stays = Cluster::on_etcd(&alice, prefix, lease, false).unwrap();
    let runtime = Detached::new();
    let provisioned = |vpc: &str| provisioned(&mizar, vpc);
    let operators = runtime.block_on(async { mizar.start_operators(&Operator::ALL).unwrap() });
    mizar.create_droplet("droplet-0").unwrap();
    mizar.create_vpc("vpc-1").unwrap();
    assert!(provisioned("vpc-1"), "{:#?}", mizar.trace());

    let wrong = bob.clone().user(EtcdUser::new("bob", "not bob's password"));
    let refused = mizar.reconnect(&wrong).unwrap_err().to_string();
    assert!(refused.contains("authentication failed"), "{refused}");
    mizar.reconnect(&bob).unwrap();
    etcd.as_root(async |root| root.user_delete("alice").await.unwrap());
    // (Its documents' client retries for ever, as an informer would: its
    // stores answer.)
    let refused = stays.runtime(Kind::Vpc).get("vpc-1");
    assert!(refused.is_err(), "alice's cluster still reads: {refused:?}");
    mizar.create_vpc("vpc-2").unwrap();
    assert!(provisioned("vpc-2"), "{:#?}", mizar.trace());
    runtime.block_on(operators.stop());
    assert_eq!(mizar.errors(), Vec::<String>::new());
    assert_eq!(mizar.violations(), Vec::<String>::new());
}

/// A runtime that, dropped, does not wait for its blocking threads: an
/// operator process's documents are read on them, and retried for ever
/// while etcd refuses them (a test that fails must not hang).
struct Detached(Option<tokio::runtime::Runtime>);

impl Detached {
    /// Two workers, as the examples' processes have.
    fn new() -> Self {
        Detached(Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap(),
        ))
    }
}

/// Whether `cluster` sees `vpc` provisioned within 30 seconds, waited for
/// on a runtime of its own (the operators' threads may be held by their
/// documents' retries: see [`Detached`]).
fn provisioned(cluster: &Cluster, vpc: &str) -> bool {
    let wait = cluster.wait_until(Duration::from_secs(30), |c| {
        c.state(Kind::Vpc, vpc).as_deref() == Some("Provisioned")
    });
    (tokio::runtime::Builder::new_current_thread())
        .enable_all()
        .build()
        .unwrap()
        .block_on(wait)
}

impl std::ops::Deref for Detached {
    type Target = tokio::runtime::Runtime;

    fn deref(&self) -> &Self::Target {
        self.0.as_ref().expect("until dropped")
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// An operator process (`chaos::operator`, as the examples run one per
/// process) reconnects with each access it is given (the examples' on
/// SIGHUP, their etcd flags read again): every operator given bob's access,
/// then alice deleted, they provision a VPC made after.
#[test]
fn operator_processes_reconnect_with_the_access_they_are_given() {
    let Some(etcd) = secure::SecureEtcd::start() else {
        return;
    };
    let (alice, bob) = alice_and_bob(&etcd);
    let (prefix, lease) = ("/fsm-test/renewed-mizar/", Duration::from_secs(2));
    let runtime = Detached::new();
    let renew: Vec<_> = Operator::ALL
        .into_iter()
        .map(|op| {
            let (renew, renewals) = tokio::sync::mpsc::unbounded_channel();
            let alice = alice.clone();
            runtime.spawn(async move {
                chaos::operator(&alice, prefix, lease, op, Some(renewals))
                    .await
                    .unwrap()
            });
            renew
        })
        .collect();
    let user = Cluster::on_etcd(&bob, prefix, lease, false).unwrap();
    let provisioned = |vpc: &str| provisioned(&user, vpc);
    user.create_droplet("droplet-0").unwrap();
    user.create_vpc("vpc-1").unwrap();
    assert!(provisioned("vpc-1"), "{:#?}", user.trace());

    for renew in &renew {
        renew.send(bob.clone()).unwrap();
    }
    // Each process reconnects off its async threads: a moment, then alice
    // goes.
    std::thread::sleep(Duration::from_secs(1));
    etcd.as_root(async |root| root.user_delete("alice").await.unwrap());
    user.create_vpc("vpc-2").unwrap();
    assert!(provisioned("vpc-2"), "{:#?}", user.trace());
    assert_eq!(user.violations(), Vec::<String>::new());
}

/// A pod reconnected as another user (`PodOps::reconnect`: the operations'
/// store, the pod's document and the archive) takes an operation through
/// every phase to its removal once the first user is deleted; a pod not
/// told is refused.
#[test]
fn a_pod_reconnected_as_another_user_goes_on_once_the_first_is_deleted() {
    use fsm_operators::machines::PodOpsState as S;
    use fsm_operators::podops::{OperationController, PodOps};

    let Some(etcd) = secure::SecureEtcd::start() else {
        return;
    };
    let (alice, bob) = alice_and_bob(&etcd);
    let (prefix, lease) = ("/fsm-test/reconnected-pod/", Duration::from_secs(2));
    let ops = PodOps::on_etcd("web-0", &alice, prefix, lease).unwrap();
    let stays = PodOps::on_etcd("web-0", &alice, prefix, lease).unwrap();
    ops.reconnect(&bob).unwrap();
    etcd.as_root(async |root| root.user_delete("alice").await.unwrap());
    let refused = fsm_runtime::Store::ids(stays.runtime().store());
    assert!(refused.is_err(), "alice's pod still reads: {refused:?}");

    let runtime = Detached::new();
    let controllers = runtime.block_on(async { ops.start() });
    // On a thread of its own, bounded: a pod still on alice's connections
    // would retry its document for ever (see `Detached`).
    let (done, finished) = std::sync::mpsc::channel();
    let on_bob = ops.clone();
    std::thread::spawn(move || {
        let waits = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let removed = waits.block_on(async {
            let replace = OperationController::new("replace");
            replace.begin(&on_bob, "op-1").await.unwrap();
            let limit = Duration::from_secs(30);
            let operate = |ops: &PodOps| ops.phase("op-1") == Some(S::Operate);
            assert!(on_bob.wait_until(limit, operate).await);
            replace.finish(&on_bob, "op-1").await.unwrap();
            let removed = |ops: &PodOps| ops.removed_in("op-1") == Some(S::Available);
            on_bob.wait_until(limit, removed).await
        });
        let _ = done.send(removed);
    });
    let removed = finished.recv_timeout(Duration::from_secs(90));
    assert_eq!(removed, Ok(true), "{:#?}", ops.trace());
    runtime.block_on(controllers.stop());
    assert_eq!(ops.settled_violations(), Vec::<String>::new());
}
