//! The operators on an etcd that checks who connects (TLS with a client
//! certificate, and a user): the examples' `--etcd-cacert`, `--etcd-cert`,
//! `--etcd-key` and `--etcd-user` reach it, for the stores and the API
//! server's documents alike, and the processes a run starts get the same.

#[path = "../../fsm-etcd/tests/support/secure.rs"]
mod secure;

use std::time::Duration;

use clap::Parser;
use fsm_etcd::{EtcdAccess, EtcdUser};
use fsm_operators::chaos::Args;
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
            "--etcd-user root: set its password in the environment variable FSM_ETCD_PASSWORD"
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
