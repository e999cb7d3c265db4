//! An etcd of a test's own that checks who connects: TLS with client
//! certificates (`--client-cert-auth`), and users (`auth enable`), with
//! certificates made for it. Each test starts its own and stops it when done.
//! (Apart from `support`, whose other binaries build without TLS.)

#![allow(dead_code)] // each binary uses its part

#[path = "../../../fsm-core/tests/common/mod.rs"]
mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};

/// The password of the etcd's `root` user.
pub const ROOT_PASSWORD: &str = "root-password-of-the-test";

/// A certificate and its key, PEM.
pub struct Pem {
    pub certificate: String,
    pub key: String,
}

/// A running etcd that takes TLS connections only, from clients whose
/// certificate its authority signed, and with authentication on (`root`,
/// [`ROOT_PASSWORD`]), whose tokens expire after a second.
pub struct SecureEtcd {
    child: Child,
    dir: tempfile::TempDir,
    /// `127.0.0.1:port`.
    pub endpoint: String,
    /// The authority that signed etcd's certificate and the client's (PEM).
    pub ca: String,
    /// A client certificate the authority signed (common name
    /// `fsm-test-client`, no user of etcd's).
    pub client: Pem,
    /// An authority that signed nothing of this etcd's (PEM).
    pub other_ca: String,
    /// The authority's issuer, to sign more client certificates with: etcd
    /// takes a client certificate's common name for the user when the client
    /// names none.
    pub issuer: CertifiedIssuer<'static, KeyPair>,
}

impl SecureEtcd {
    /// Starts one, or `None` when there is no `etcd` to run and
    /// `FSM_SKIP_ETCD` is set (without it, the test fails saying how to get
    /// one).
    pub fn start() -> Option<SecureEtcd> {
        let dir = tempfile::tempdir().unwrap();
        let (ca, issuer) = authority("fsm test authority");
        let (other_ca, _) = authority("another authority");
        let server = signed(&issuer, "etcd", &["localhost", "127.0.0.1"], true);
        let client = signed(&issuer, "fsm-test-client", &[], false);
        let write = |name: &str, text: &str| write(dir.path(), name, text);
        let ca_file = write("ca.pem", &ca);
        let cert_file = write("server.pem", &server.certificate);
        let key_file = write("server-key.pem", &server.key);
        let arg = |p: &PathBuf| p.to_str().unwrap().to_owned();
        // Free ports are found by binding and letting go, so another test
        // may take one before this etcd binds it: an etcd that exits at
        // start is started again on other ports.
        for attempt in 1.. {
            let (port, peer) = (free_port(), free_port());
            let endpoint = format!("127.0.0.1:{port}");
            let peer_url = format!("http://127.0.0.1:{peer}");
            let spawned = Command::new("etcd")
                .args(["--name", "secure", "--data-dir"])
                .arg(dir.path().join(format!("data-{attempt}")))
                .args(["--listen-client-urls", &format!("https://{endpoint}")])
                .args(["--advertise-client-urls", &format!("https://{endpoint}")])
                .args(["--listen-peer-urls", &peer_url])
                .args(["--initial-advertise-peer-urls", &peer_url])
                .args(["--initial-cluster", &format!("secure={peer_url}")])
                .args([
                    "--cert-file",
                    &arg(&cert_file),
                    "--key-file",
                    &arg(&key_file),
                ])
                .args(["--trusted-ca-file", &arg(&ca_file), "--client-cert-auth"])
                // Tokens that expire within a test (5 minutes by default).
                .args(["--auth-token-ttl", "1"])
                .stdout(Stdio::null())
                .stderr(Stdio::from(
                    std::fs::File::create(dir.path().join("etcd.log")).unwrap(),
                ))
                .spawn();
            let child = match spawned {
                Ok(child) => child,
                Err(e) => {
                    common::missing(
                        "FSM_SKIP_ETCD",
                        &format!("cannot run etcd ({e})"),
                        "scripts/setup installs it (Debian's etcd-server)",
                    );
                    return None;
                }
            };
            let mut child = child;
            match answers(&mut child, &endpoint, client_tls(&ca, &client)) {
                Ok(()) => {
                    let etcd = SecureEtcd {
                        child,
                        dir,
                        endpoint,
                        ca,
                        client,
                        other_ca,
                        issuer,
                    };
                    etcd.enable_auth();
                    return Some(etcd);
                }
                Err(exited) if attempt < 5 => {
                    eprintln!("the test's etcd exited at start ({exited}): starting it again");
                }
                Err(exited) => panic!(
                    "the test's etcd exited at start, five times ({exited}); its log: {}",
                    std::fs::read_to_string(dir.path().join("etcd.log")).unwrap_or_default()
                ),
            }
        }
        unreachable!("the attempts end by returning or panicking")
    }

    /// Where the etcd writes its log.
    pub fn log(&self) -> PathBuf {
        self.dir.path().join("etcd.log")
    }

    /// The TLS options of a client with the authority and the client
    /// certificate.
    fn tls(&self) -> TlsOptions {
        client_tls(&self.ca, &self.client)
    }

    /// Adds `root` and turns authentication on (the etcd answers: see
    /// [`answers`]).
    fn enable_auth(&self) {
        self.administer(None, async |client| {
            client.user_add("root", ROOT_PASSWORD, None).await.unwrap();
            client.user_grant_role("root", "root").await.unwrap();
            client.auth_enable().await.unwrap();
        });
    }

    /// Runs `admin` as `root`: users and roles added or deleted while the
    /// test's stores run.
    pub fn as_root<T>(&self, admin: impl AsyncFnOnce(&mut Client) -> T) -> T {
        self.administer(Some(("root", ROOT_PASSWORD)), admin)
    }

    /// Runs `admin` with a client of the etcd's, as `user` if any.
    fn administer<T>(
        &self,
        user: Option<(&str, &str)>,
        admin: impl AsyncFnOnce(&mut Client) -> T,
    ) -> T {
        let mut options = ConnectOptions::new()
            .with_tls(self.tls())
            .with_connect_timeout(Duration::from_secs(2))
            .with_timeout(Duration::from_secs(5));
        if let Some((name, password)) = user {
            options = options.with_user(name, password);
        }
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let mut client = Client::connect([&self.endpoint], Some(options))
                    .await
                    .unwrap_or_else(|e| {
                        panic!(
                            "the test's etcd at {} answered, then not ({e}); its log: {}",
                            self.endpoint,
                            std::fs::read_to_string(self.log()).unwrap_or_default()
                        )
                    });
                admin(&mut client).await
            })
    }

    /// The authority and the client's certificate and key written to files,
    /// as a deployment has them: `(ca, certificate, key)`.
    pub fn files(&self) -> (PathBuf, PathBuf, PathBuf) {
        let dir = self.dir.path();
        (
            write(dir, "client-ca.pem", &self.ca),
            write(dir, "client.pem", &self.client.certificate),
            write(dir, "client-key.pem", &self.client.key),
        )
    }
}

/// The TLS options of a client that trusts `ca` and presents `client`.
pub fn client_tls(ca: &str, client: &Pem) -> TlsOptions {
    TlsOptions::new()
        .ca_certificate(Certificate::from_pem(ca))
        .identity(Identity::from_pem(&client.certificate, &client.key))
}

/// Waits until the etcd `child` answers at `endpoint`, or exits (its ports
/// taken meanwhile: `Err` with how it exited); panics after 30 seconds.
pub fn answers(child: &mut Child, endpoint: &str, tls: TlsOptions) -> Result<(), String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let started = Instant::now();
            loop {
                if let Ok(Some(exited)) = child.try_wait() {
                    return Err(exited.to_string());
                }
                let options = ConnectOptions::new()
                    .with_tls(tls.clone())
                    .with_connect_timeout(Duration::from_secs(1))
                    .with_timeout(Duration::from_secs(2));
                // Bounded as a whole: what holds the port may take the
                // connection and never answer the TLS handshake.
                let attempt = async {
                    match Client::connect([endpoint], Some(options)).await {
                        Ok(mut client) => client.status().await.map(drop),
                        Err(e) => Err(e),
                    }
                };
                let answer = tokio::time::timeout(Duration::from_secs(3), attempt).await;
                match answer {
                    Ok(Ok(())) => return Ok(()),
                    _ if started.elapsed() > Duration::from_secs(30) => {
                        panic!("the test's etcd does not answer at {endpoint} ({answer:?})")
                    }
                    _ => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        })
}

impl Drop for SecureEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A self-signed authority named `name`: its certificate (PEM), and the
/// issuer to sign others with.
pub fn authority(name: &str) -> (String, CertifiedIssuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    (issuer.pem(), issuer)
}

/// A certificate for `name` (and `hosts`, its alternative names) that
/// `issuer` signed, for a server or for a client.
pub fn signed(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    name: &str,
    hosts: &[&str],
    server: bool,
) -> Pem {
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    // etcd checks a server's certificate for both uses (it dials itself).
    params.extended_key_usages = match server {
        true => vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
        false => vec![ExtendedKeyUsagePurpose::ClientAuth],
    };
    let certificate = params.signed_by(&key, issuer).unwrap();
    Pem {
        certificate: certificate.pem(),
        key: key.serialize_pem(),
    }
}

/// `text` written into the file `name` of `dir`: its path.
fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
