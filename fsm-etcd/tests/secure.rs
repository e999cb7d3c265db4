//! The store on an etcd that checks who connects: TLS, client certificates,
//! users. Each test runs an etcd of its own (`support/secure.rs`), but the
//! flags' test, which needs none.

#[path = "support/secure.rs"]
mod secure;

use std::path::Path;

use fsm_etcd::{EtcdAccess, EtcdStore, EtcdTls, EtcdUser};
use fsm_runtime::{Actor, EntryKind, Runtime, StoreError};
use secure::{ROOT_PASSWORD, SecureEtcd};

fn vm_machine() -> fsm_core::Machine {
    fsm_core::spec::load(Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/ovc/vm.toml"))
        .unwrap()
}

/// The TLS a deployment gives the store: the authority, and the client's
/// certificate and key.
fn client_tls(etcd: &SecureEtcd) -> EtcdTls {
    EtcdTls::new(etcd.ca.clone()).identity(etcd.client.certificate.clone(), etcd.client.key.clone())
}

/// The etcd's `root`, with its password.
fn root() -> Option<EtcdUser> {
    Some(EtcdUser::new("root", ROOT_PASSWORD))
}

/// A store on `etcd` with `tls`, as `user`.
fn connect(
    etcd: &SecureEtcd,
    tls: EtcdTls,
    user: Option<EtcdUser>,
) -> Result<EtcdStore, StoreError> {
    // Each test's etcd is its own: any prefix will do.
    let builder = EtcdStore::builder([&etcd.endpoint], "/fsm-secure/").tls(tls);
    match user {
        Some(user) => builder.user(user),
        None => builder,
    }
    .connect()
}

/// A refused connection: its message, which says where the store connected
/// and how, and whether it is retryable.
fn refusal(etcd: &SecureEtcd, connected: Result<EtcdStore, StoreError>) -> (String, bool) {
    match connected {
        Ok(_) => panic!("the store connected"),
        Err(e @ StoreError::Unavailable { retryable, .. }) => {
            let message = e.to_string();
            let at = format!("connecting to etcd at {} over TLS", etcd.endpoint);
            assert!(message.contains(&at), "{message}");
            (message, retryable)
        }
        Err(e) => panic!("not an unavailable store: {e:?}"),
    }
}

#[test]
fn a_store_with_the_authority_a_client_certificate_and_a_user_runs_actions_and_watches() {
    let Some(etcd) = SecureEtcd::start() else {
        return;
    };
    let open = || connect(&etcd, client_tls(&etcd), root()).unwrap();
    let ops = Actor::new("ops").with_role("admin").with_role("user");
    let vms = Runtime::new(vm_machine(), open()).unwrap();
    // A second process's store on the same prefix sees the first one's writes.
    let other = Runtime::new(vm_machine(), open()).unwrap();
    let mut watcher = other.watch().unwrap();
    vms.create("vm-1", &ops).unwrap();
    let deployed = vms.run("vm-1", &ops, "deploy").unwrap();
    assert_eq!(vms.machine().state(deployed.state).name, "RUNNING");
    assert_eq!(other.state_name("vm-1").unwrap(), "RUNNING");
    let kinds: Vec<EntryKind> = other
        .history("vm-1")
        .unwrap()
        .iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        [EntryKind::Created, EntryKind::Started, EntryKind::Completed]
    );
    let seen: Vec<u64> = (0..3)
        .map(|_| watcher.recv().unwrap().entry.version)
        .collect();
    assert_eq!(seen, [1, 2, 3]);
}

#[test]
fn a_user_whose_token_expired_authenticates_again() {
    let Some(etcd) = SecureEtcd::start() else {
        return;
    };
    let store = connect(&etcd, client_tls(&etcd), root()).unwrap();
    let vms = Runtime::new(vm_machine(), store).unwrap();
    let ops = Actor::new("ops").with_role("admin").with_role("user");
    vms.create("vm-1", &ops).unwrap();
    // Past the token's second, idle: etcd forgets it.
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    let deploy = vms.start("vm-1", &ops, "deploy").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    let deployed = deploy.complete().unwrap();
    assert_eq!(vms.machine().state(deployed.state).name, "RUNNING");
}

#[test]
fn etcd_refuses_a_store_without_a_client_certificate() {
    let Some(etcd) = SecureEtcd::start() else {
        return;
    };
    // The same store with its certificate connects: the certificate is the
    // difference.
    connect(&etcd, client_tls(&etcd), root()).unwrap();
    // etcd refuses the connection (by an alert, or by closing it, all the
    // client then learns): the refusal says what may be missing.
    let (message, retryable) =
        refusal(&etcd, connect(&etcd, EtcdTls::new(etcd.ca.clone()), root()));
    assert!(message.contains("transport error"), "{message}");
    // etcd's alert, when it reaches the client before the connection closes,
    // says the certificate is refused: the same connection would be again.
    assert_eq!(
        retryable,
        !message.contains("received fatal alert: BadCertificate"),
        "{message}"
    );
    assert!(
        message.ends_with("closes a connection that gives no client certificate: give one (--etcd-cert and --etcd-key, or EtcdTls::identity)"),
        "{message}"
    );
    // Where no etcd listens, nothing is said of certificates.
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = nobody.local_addr().unwrap().to_string();
    drop(nobody);
    let refused = EtcdStore::builder([&closed], "/fsm-secure/")
        .tls(EtcdTls::new(etcd.ca.clone()))
        .connect()
        .unwrap_err()
        .to_string();
    assert!(refused.contains(&closed), "{refused}");
    assert!(!refused.contains("client certificate"), "{refused}");
}

#[test]
fn the_store_refuses_an_etcd_whose_certificate_its_authority_did_not_sign() {
    let Some(etcd) = SecureEtcd::start() else {
        return;
    };
    let tls = EtcdTls::new(etcd.other_ca.clone())
        .identity(etcd.client.certificate.clone(), etcd.client.key.clone());
    let (message, retryable) = refusal(&etcd, connect(&etcd, tls, root()));
    assert!(
        message.contains("invalid peer certificate: UnknownIssuer"),
        "{message}"
    );
    // The same connection would be refused again.
    assert!(!retryable);
    // Without a client certificate too; and nothing says one is missing:
    // the store refused etcd's.
    let (message, retryable) = refusal(
        &etcd,
        connect(&etcd, EtcdTls::new(etcd.other_ca.clone()), root()),
    );
    assert!(message.contains("UnknownIssuer"), "{message}");
    assert!(!message.contains("client certificate"), "{message}");
    assert!(!retryable);
}

#[test]
fn etcd_refuses_a_wrong_password_and_no_user() {
    let Some(etcd) = SecureEtcd::start() else {
        return;
    };
    // Neither is retryable: the same request would be refused again.
    let (wrong, retryable) = refusal(
        &etcd,
        connect(
            &etcd,
            client_tls(&etcd),
            Some(EtcdUser::new("root", "not the password")),
        ),
    );
    assert!(wrong.contains("as user `root`"), "{wrong}");
    assert!(wrong.contains("authentication failed"), "{wrong}");
    assert!(!retryable);
    // With no user, etcd takes the certificate's name, which is no user of its.
    let (nobody, retryable) = refusal(&etcd, connect(&etcd, client_tls(&etcd), None));
    assert!(nobody.contains("permission denied"), "{nobody}");
    assert!(!retryable);
}

/// The session (etcd lease) that `id`'s action in flight was started under.
fn session_of(vms: &Runtime<EtcdStore>, id: &str) -> i64 {
    let record = vms.get(id).unwrap();
    record.in_flight.unwrap().session.unwrap()
}

/// How many connections to `endpoint` (`127.0.0.1:port`) are open on this
/// machine (Linux's `/proc/net/tcp`): each test's etcd is its own, so they
/// are the test's.
fn connections_to(endpoint: &str) -> usize {
    let port: u16 = endpoint.rsplit_once(':').unwrap().1.parse().unwrap();
    let remote = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap()
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // Established connections whose far end is the etcd.
            fields[2] == remote && fields[3] == "01"
        })
        .count()
}

/// Waits up to five seconds for `until` to hold.
fn eventually(until: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !until() {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    true
}

#[test]
fn a_reconnected_store_goes_on_as_another_user_once_the_first_is_deleted() {
    let Some(etcd) = SecureEtcd::start() else {
        return;
    };
    etcd.as_root(async |root| {
        for (user, password) in [("alice", "alice's password"), ("bob", "bob's password")] {
            root.user_add(user, password, None).await.unwrap();
            root.user_grant_role(user, "root").await.unwrap();
        }
    });
    let alice = EtcdUser::new("alice", "alice's password");
    let as_user = |user: EtcdUser| {
        EtcdAccess::new([&etcd.endpoint])
            .tls(client_tls(&etcd))
            .user(user)
    };
    let open = || {
        (as_user(alice.clone()).store("/fsm-secure/"))
            .lease_ttl(std::time::Duration::from_secs(1))
            .connect()
            .unwrap()
    };
    let ops = Actor::new("ops").with_role("admin").with_role("user");
    let vms = Runtime::new(vm_machine(), open()).unwrap();
    // A store of another process that is not told of the new access.
    let stays = Runtime::new(vm_machine(), open()).unwrap();
    let mut watcher = vms.watch().unwrap();
    let connected = connections_to(&etcd.endpoint);
    vms.create("vm-1", &ops).unwrap();
    let deploy = vms.start("vm-1", &ops, "deploy").unwrap();
    let session = session_of(&vms, "vm-1");
    deploy.complete().unwrap();

    // A password that etcd refuses leaves the store on the connection it has.
    let refused = vms
        .store()
        .reconnect(&as_user(EtcdUser::new("bob", "not bob's password")))
        .unwrap_err();
    let StoreError::Unavailable { message, retryable } = &refused else {
        panic!("not an unavailable store: {refused:?}");
    };
    let at = format!(
        "reconnecting to etcd at {} over TLS as user `bob`",
        etcd.endpoint
    );
    assert!(message.contains(&at), "{message}");
    assert!(message.contains("authentication failed"), "{message}");
    assert!(!retryable);
    assert_eq!(vms.state_name("vm-1").unwrap(), "RUNNING");

    vms.store()
        .reconnect(&as_user(EtcdUser::new("bob", "bob's password")))
        .unwrap();
    // The old connection is let go once the requests, the keep-alive and the
    // watch on it have moved to the new one.
    assert!(
        eventually(|| connections_to(&etcd.endpoint) == connected),
        "{} connections to etcd, not {connected}",
        connections_to(&etcd.endpoint)
    );
    etcd.as_root(async |root| root.user_delete("alice").await.unwrap());
    // Alice is no user any more: the store that stayed hers is refused...
    let gone = stays.get("vm-1").unwrap_err();
    assert!(gone.to_string().contains("authentication failed"), "{gone}");
    // ... and the reconnected one goes on as bob, its session kept alive on
    // the new connection past its time to live (a second), its watch fed.
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    let stop = vms.start("vm-1", &ops, "stop").unwrap();
    assert_eq!(session_of(&vms, "vm-1"), session);
    let stopped = stop.complete().unwrap();
    assert_eq!(vms.machine().state(stopped.state).name, "HALTED");
    let seen: Vec<u64> = (0..5)
        .map(|_| watcher.recv().unwrap().entry.version)
        .collect();
    assert_eq!(seen, [1, 2, 3, 4, 5]);
}

#[test]
fn neither_a_user_nor_tls_shows_its_secret_in_debug() {
    let key = "-----BEGIN PRIVATE KEY-----\nTHE-KEY-BYTES\n-----END PRIVATE KEY-----\n";
    let builder = EtcdStore::builder(["127.0.0.1:2379"], "/p/")
        .tls(EtcdTls::new("the authority").identity("the certificate", key))
        .user(EtcdUser::new("root", ROOT_PASSWORD));
    let shown = format!("{builder:?}");
    assert!(shown.contains(r#"name: "root""#), "{shown}");
    assert!(shown.contains("<certificate and key>"), "{shown}");
    for secret in [ROOT_PASSWORD, "THE-KEY-BYTES", "the certificate"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
}

#[test]
fn etcds_certificate_must_be_issued_to_the_name_the_store_is_given() {
    let Some(etcd) = SecureEtcd::start() else {
        return;
    };
    // Its certificate names `localhost` and `127.0.0.1`.
    connect(&etcd, client_tls(&etcd).domain("localhost"), root()).unwrap();
    let (message, retryable) = refusal(
        &etcd,
        connect(&etcd, client_tls(&etcd).domain("etcd.example.com"), root()),
    );
    // Said as rustls says it, not as its `Debug` spells it.
    assert!(
        message.contains(
            r#"invalid peer certificate: certificate not valid for name "etcd.example.com""#
        ),
        "{message}"
    );
    assert!(!retryable);
}

/// The fixture sees an etcd that cannot bind its port (another test took
/// it between the fixture's look for a free port and etcd's start) exit,
/// rather than wait for it to answer: `SecureEtcd::start` then starts one on
/// other ports. (The fixture's own etcd gives this test its certificates,
/// and skips it where `FSM_SKIP_ETCD` allows.)
#[test]
fn an_etcd_whose_port_was_taken_is_seen_exiting() {
    let Some(etcd) = SecureEtcd::start() else {
        return;
    };
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("etcd.log");
    let mut child = std::process::Command::new("etcd")
        .args(["--name", "taken", "--data-dir"])
        .arg(dir.path().join("data"))
        .args(["--listen-client-urls", &format!("http://{endpoint}")])
        .args(["--advertise-client-urls", &format!("http://{endpoint}")])
        .args(["--listen-peer-urls", "http://127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let exited = secure::answers(
        &mut child,
        &endpoint,
        secure::client_tls(&etcd.ca, &etcd.client),
    );
    assert!(exited.is_err(), "{exited:?}");
    // It exited for the port, not for something else of its arguments.
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains("address already in use"), "{said}");
    drop(taken);
}

/// The flags the tools share: read into the access their files give, the
/// flag at fault named (and the file) when a file is not what its flag says,
/// a user's password asked of the environment, and the same flags given
/// back for a process one starts. No etcd is needed.
#[test]
fn the_flags_give_the_access_or_name_the_flag_at_fault() {
    use fsm_etcd::{EtcdAccess, EtcdFlagError, EtcdFlags};
    let dir = tempfile::tempdir().unwrap();
    let (ca, issuer) = secure::authority("flags-ca");
    let client = secure::signed(&issuer, "client", &[], false);
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let (ca_file, cert_file, key_file) = (
        file("ca.pem", &ca),
        file("client.pem", &client.certificate),
        file("client-key.pem", &client.key),
    );
    let flags = EtcdFlags {
        cacert: Some(ca_file.clone()),
        cert: Some(cert_file.clone()),
        key: Some(key_file.clone()),
        user: None,
        password_file: None,
    };
    let tls = EtcdTls::new(ca).identity(client.certificate.clone(), client.key.clone());
    let endpoint = ["127.0.0.1:2379"];
    assert_eq!(
        flags.access(endpoint).unwrap(),
        EtcdAccess::new(endpoint).tls(tls)
    );
    let args: Vec<String> = flags
        .args()
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let path = |p: &Path| p.display().to_string();
    assert_eq!(
        args,
        [
            "--etcd-cacert".to_owned(),
            path(&ca_file),
            "--etcd-cert".to_owned(),
            path(&cert_file),
            "--etcd-key".to_owned(),
            path(&key_file),
        ]
    );

    // The certificate given as the key: the key's flag and file are named.
    let swapped = EtcdFlags {
        key: Some(cert_file.clone()),
        ..flags.clone()
    };
    match swapped.access(endpoint) {
        Err(EtcdFlagError::File { flag, file }) => {
            assert_eq!(
                (flag, file.path.as_path()),
                ("--etcd-key", cert_file.as_path())
            );
        }
        other => panic!("{other:?}"),
    }
    // A key as the authority.
    let not_a_ca = EtcdFlags {
        cacert: Some(key_file.clone()),
        ..flags.clone()
    };
    let refused = not_a_ca.access(endpoint).unwrap_err().to_string();
    assert!(
        refused.starts_with(&format!(
            "--etcd-cacert {}: the authority (CA)",
            key_file.display()
        )),
        "{refused}"
    );
    // A client certificate without the authority.
    let no_ca = EtcdFlags {
        cacert: None,
        ..flags.clone()
    };
    assert_eq!(no_ca.access(endpoint), Err(EtcdFlagError::Identity));
    // A user whose password the environment does not hold (the variable is
    // set by nobody in the test run).
    assert!(std::env::var(EtcdFlags::PASSWORD_VARIABLE).is_err());
    let user = EtcdFlags {
        user: Some("mizar".into()),
        ..EtcdFlags::default()
    };
    assert_eq!(
        user.access(endpoint).unwrap_err().to_string(),
        "--etcd-user mizar: set its password in the environment variable FSM_ETCD_PASSWORD, \
         or give --etcd-password-file"
    );
    // Or from a file, without its line break; read at each call.
    let secret = file("password", "s3cret\n");
    let from_file = EtcdFlags {
        password_file: Some(secret.clone()),
        ..user.clone()
    };
    let as_mizar =
        |password: &str| EtcdAccess::new(endpoint).user(EtcdUser::new("mizar", password));
    assert_eq!(from_file.access(endpoint), Ok(as_mizar("s3cret")));
    std::fs::write(&secret, "renewed").unwrap();
    assert_eq!(from_file.access(endpoint), Ok(as_mizar("renewed")));
    assert_eq!(
        from_file.args(),
        [
            "--etcd-user",
            "mizar",
            "--etcd-password-file",
            &path(&secret)
        ]
    );
    std::fs::write(&secret, "\n").unwrap();
    assert_eq!(
        from_file.access(endpoint).unwrap_err().to_string(),
        format!("--etcd-password-file {}: it is empty", secret.display())
    );
    std::fs::remove_file(&secret).unwrap();
    let missing = from_file.access(endpoint).unwrap_err().to_string();
    assert!(
        missing.starts_with(&format!("--etcd-password-file {}: ", secret.display())),
        "{missing}"
    );
    let without_user = EtcdFlags {
        password_file: Some(secret),
        ..EtcdFlags::default()
    };
    assert_eq!(
        without_user.access(endpoint),
        Err(EtcdFlagError::PasswordFileWithoutUser)
    );
}
