//! The `fsm-serve` binary: a tokens file others can read is refused at start with
//! the reason; refusals are logged with the actor and the rule, never the token;
//! it listens on loopback unless told otherwise; SIGINT shuts it down cleanly.

#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};

const OPS: &str = "binary-test-token-ops-5d1f";
const USER: &str = "binary-test-token-user-8a2c";
const STRANGER: &str = "binary-test-token-nobody-77aa";

fn tokens_file(dir: &Path, mode: u32) -> PathBuf {
    let path = dir.join("tokens.toml");
    std::fs::write(
        &path,
        format!(
            "[[token]]\ntoken = \"{OPS}\"\nactor = \"ops\"\nroles = [\"admin\"]\n\
             [[token]]\ntoken = \"{USER}\"\nactor = \"alice\"\nroles = [\"user\"]\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

fn door() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/specs/door.toml")
        .display()
        .to_string()
}

/// The binary serving `door` with `tokens`, and no etcd password from the
/// test's own environment.
fn fsm_serve(tokens: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fsm-serve"));
    command
        .args([&door(), "--tokens", &tokens.display().to_string()])
        .env_remove("FSM_ETCD_PASSWORD");
    command
}

/// What the binary run with `tokens` and `args` says as it refuses to start
/// (exit 2).
fn refused_at_start(tokens: &Path, args: &[&str]) -> String {
    let out = fsm_serve(tokens).args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The binary started on loopback with `tokens`, its standard error piped:
/// killed when the test ends, failed or not.
fn on_loopback(tokens: &Path) -> Stopped {
    Stopped(
        fsm_serve(tokens)
            .args(["--listen", "127.0.0.1:0"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// Where the started binary listens (`http://…` or `https://…`), from the
/// first line of its standard error that says so, and the rest of that stream.
fn listening(child: &mut Child) -> (String, BufReader<ChildStderr>) {
    let (at, _, stderr) = said_then_listening(child);
    (at, stderr)
}

/// [`listening`], with what the binary said before that line.
fn said_then_listening(child: &mut Child) -> (String, String, BufReader<ChildStderr>) {
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut before = String::new();
    loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "it exited before listening:\n{before}"
        );
        if let Some(at) = line.trim().strip_prefix("fsm serve: door on ") {
            return (at.to_owned(), before, stderr);
        }
        before.push_str(&line);
    }
}

/// Creates the door `d` and closes it, as `USER`, on the service at `base`:
/// the two answers' statuses.
async fn create_and_close(c: &reqwest::Client, base: &str) -> [u16; 2] {
    let created = c
        .post(format!("{base}/v1/door/objects"))
        .bearer_auth(USER)
        .json(&serde_json::json!({"id": "d"}))
        .send()
        .await
        .unwrap();
    let closed = c
        .post(format!("{base}/v1/door/objects/d/actions/close?run=true"))
        .bearer_auth(USER)
        .send()
        .await
        .unwrap();
    [created.status().as_u16(), closed.status().as_u16()]
}

/// Stops the binary with SIGINT, which must be a clean stop: what it wrote
/// to its standard error after `stderr`'s last read line.
fn interrupted(child: &mut Child, stderr: BufReader<ChildStderr>) -> String {
    stopped_by(child, stderr, "INT")
}

/// Sends the binary `signal` (`INT`, `TERM`), which must stop it cleanly
/// within half a minute (a lost signal fails here, rather than hang the
/// test): what it wrote to its standard error after `stderr`'s last read
/// line.
fn stopped_by(child: &mut Child, mut stderr: BufReader<ChildStderr>, signal: &str) -> String {
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let given = std::time::Instant::now();
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        assert!(
            given.elapsed() < std::time::Duration::from_secs(30),
            "still running half a minute after SIG{signal}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(exit.success(), "{exit:?}\n{rest}");
    rest
}

#[test]
fn a_tokens_file_others_can_read_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let tokens = tokens_file(dir, 0o644);
    let stderr = refused_at_start(&tokens, &[]);
    assert!(
        stderr
            .contains("can be read by other users (mode 644): restrict it to its owner (chmod 600"),
        "{stderr}"
    );
    assert!(!stderr.contains(OPS));
}

/// A `--prefix` without its closing `/` is refused before anything connects:
/// `/door` would put the machine under `/doordoor/`.
#[test]
fn a_prefix_without_its_slash_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let tokens = tokens_file(tmp.path(), 0o600);
    let stderr = refused_at_start(&tokens, &["--store", "etcd", "--prefix", "/door"]);
    assert!(
        stderr.contains(
            "the etcd prefix `/door` (`--prefix`) must end with `/`: each machine lives under \
             <prefix><machine>/ (`/door/`?)"
        ),
        "{stderr}"
    );
}

/// A role of a token that the served machines do not declare is warned of
/// as the service starts (the ops token's `admin`: the door has keepers and
/// users), without the token; the service starts all the same.
#[test]
fn a_role_no_machine_declares_is_warned_of_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let tokens = tokens_file(tmp.path(), 0o600);
    let mut child = on_loopback(&tokens);
    let (_, before, stderr) = said_then_listening(&mut child.0);
    assert!(
        before.contains(
            "token 1 (actor ops) holds the role `admin`, which no machine of this service \
             declares: it grants nothing here"
        ),
        "{before}"
    );
    assert!(!before.contains("actor alice"), "{before}");
    assert!(!before.contains(OPS), "{before}");
    interrupted(&mut child.0, stderr);
}

/// A SIGINT or a SIGTERM sent as soon as the binary says it listens stops
/// it cleanly: both are caught before it says so (a SIGINT caught later was
/// lost where SIGINT was ignored when the process started, as in a shell's
/// background job, and the service ran on).
#[test]
fn a_stop_signal_as_soon_as_it_listens_is_a_clean_stop() {
    let tmp = tempfile::tempdir().unwrap();
    let tokens = tokens_file(tmp.path(), 0o600);
    for signal in ["INT", "TERM"] {
        let mut child = on_loopback(&tokens);
        let (_, stderr) = listening(&mut child.0);
        let rest = stopped_by(&mut child.0, stderr, signal);
        assert!(
            rest.contains("fsm serve: shutting down"),
            "SIG{signal}: {rest}"
        );
    }
}

/// The binary as run: where it listens, `--keep-history` bounding histories,
/// refusals logged without tokens, SIGINT a clean stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_logged_without_tokens_and_sigint_stops_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let tokens = tokens_file(dir, 0o600);
    let mut child = fsm_serve(&tokens)
        .args(["--listen", "127.0.0.1:0", "--keep-history", "2"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (base, stderr) = listening(&mut child);
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");
    let c = reqwest::Client::new();
    let status = |r: reqwest::Response| r.status().as_u16();
    assert_eq!(create_and_close(&c, &base).await, [201, 200]);
    // `--keep-history 2`: of created, started and completed, the last two.
    let history: serde_json::Value = c
        .get(format!("{base}/v1/door/objects/d/history"))
        .bearer_auth(USER)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kinds: Vec<&str> = history["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["Started", "Completed"], "{history}");
    // Refused: a missing role, an unknown token.
    let r = c
        .post(format!("{base}/v1/door/objects/d/actions/lock"))
        .bearer_auth(USER)
        .send()
        .await
        .unwrap();
    assert_eq!(status(r), 403);
    let r = c
        .get(format!("{base}/v1/door/objects"))
        .bearer_auth(STRANGER)
        .send()
        .await
        .unwrap();
    assert_eq!(status(r), 401);

    let rest = interrupted(&mut child, stderr);
    assert!(
        rest.contains("actor=\"alice\"") || rest.contains("actor=alice"),
        "{rest}"
    );
    assert!(rest.contains("missing_role"), "{rest}");
    assert!(rest.contains("refused: unknown token"), "{rest}");
    assert!(rest.contains("shutting down"), "{rest}");
    for token in [OPS, USER, STRANGER] {
        assert!(!rest.contains(token), "a token in the log:\n{rest}");
    }
}

#[path = "../../fsm-etcd/tests/support/secure.rs"]
mod secure;

/// A child process killed when the test ends, failed or not.
struct Stopped(Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The binary's arguments for `door` on the secure etcd, with `extra`.
fn on_etcd(tokens: &Path, etcd: &secure::SecureEtcd, extra: &[&str]) -> Command {
    let (ca, cert, key) = etcd.files();
    let mut command = fsm_serve(tokens);
    command
        .args(["--listen", "127.0.0.1:0", "--store", "etcd"])
        .args(["--etcd", &etcd.endpoint, "--prefix", "/fsm-secure-test/"])
        .arg("--etcd-cacert")
        .arg(ca)
        .arg("--etcd-cert")
        .arg(cert)
        .arg("--etcd-key")
        .arg(key)
        .args(extra);
    command
}

/// `--etcd-cacert`, `--etcd-cert`, `--etcd-key` and `--etcd-user` (its
/// password from `FSM_ETCD_PASSWORD`): the service on an etcd that takes only
/// TLS, with a client certificate, from a user; and a wrong password refused
/// at start, without the password in what it prints.
#[test]
fn the_service_runs_on_an_etcd_over_tls_as_a_user() {
    let Some(etcd) = secure::SecureEtcd::start() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let tokens = tokens_file(tmp.path(), 0o600);

    let wrong = on_etcd(&tokens, &etcd, &["--etcd-user", "root"])
        .env("FSM_ETCD_PASSWORD", "not-the-password")
        .output()
        .unwrap();
    assert_eq!(wrong.status.code(), Some(2));
    let said = String::from_utf8_lossy(&wrong.stderr);
    assert!(said.contains("as user `root`"), "{said}");
    assert!(said.contains("authentication failed"), "{said}");
    assert!(!said.contains("not-the-password"), "{said}");

    let mut child = Stopped(
        on_etcd(&tokens, &etcd, &["--etcd-user", "root"])
            .env("FSM_ETCD_PASSWORD", secure::ROOT_PASSWORD)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (base, stderr) = listening(&mut child.0);
    let statuses = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(create_and_close(&reqwest::Client::new(), &base));
    assert_eq!(statuses, [201, 200]);
    // The object is on that etcd, where a store with the same access reads it.
    let store = fsm_etcd::EtcdStore::builder([&etcd.endpoint], "/fsm-secure-test/door/")
        .tls(
            fsm_etcd::EtcdTls::new(etcd.ca.clone())
                .identity(etcd.client.certificate.clone(), etcd.client.key.clone()),
        )
        .user(fsm_etcd::EtcdUser::new("root", secure::ROOT_PASSWORD))
        .connect()
        .unwrap();
    let door = fsm_core::spec::load(door()).unwrap();
    // (Its guard `oiled` is code, which the service refuses and this test grants.)
    let doors = fsm_runtime::Runtime::builder(door, store)
        .guard("oiled", |_| true)
        .build()
        .unwrap();
    assert_eq!(doors.state_name("d").unwrap(), "CLOSED");
    assert_eq!(doors.get("d").unwrap().version, 3);

    let rest = interrupted(&mut child.0, stderr);
    assert!(!rest.contains(secure::ROOT_PASSWORD), "{rest}");
}

/// The etcd flags are checked before anything starts: each mistake exits
/// with 2 and says which flag.
#[test]
fn etcd_access_flags_are_checked_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let tokens = tokens_file(tmp.path(), 0o600);
    let run = |args: &[&str]| refused_at_start(&tokens, args);
    let said = run(&["--store", "etcd", "--etcd-user", "root"]);
    assert!(
        said.contains(
            "--etcd-user root: set its password in the environment variable FSM_ETCD_PASSWORD"
        ),
        "{said}"
    );
    let said = run(&["--etcd-cacert", "ca.pem"]);
    assert!(
        said.contains("--etcd-cacert is for `--store etcd`"),
        "{said}"
    );
    let said = run(&["--etcd-user", "root"]);
    assert!(said.contains("--etcd-user is for `--store etcd`"), "{said}");
    let missing = tmp.path().join("no-such-ca.pem");
    let said = run(&[
        "--store",
        "etcd",
        "--etcd-cacert",
        missing.to_str().unwrap(),
    ]);
    assert!(
        said.contains(&format!("--etcd-cacert {}: ", missing.display())),
        "{said}"
    );
    // A certificate goes with its key, and both with the authority.
    let said = run(&[
        "--store",
        "etcd",
        "--etcd-cacert",
        "ca.pem",
        "--etcd-cert",
        "c.pem",
    ]);
    assert!(said.contains("--etcd-key"), "{said}");
    let said = run(&[
        "--store",
        "etcd",
        "--etcd-cert",
        "c.pem",
        "--etcd-key",
        "k.pem",
    ]);
    assert!(said.contains("--etcd-cacert"), "{said}");
}

/// A certificate for the service (`localhost`, `127.0.0.1`) that `issuer`
/// signed, and its key, written into `dir` (over those written before): their
/// paths.
fn certify(
    dir: &Path,
    issuer: &rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
) -> (PathBuf, PathBuf) {
    let pair = secure::signed(issuer, "fsm serve", &["localhost", "127.0.0.1"], true);
    let (cert, key) = (dir.join("serve.pem"), dir.join("serve-key.pem"));
    std::fs::write(&cert, &pair.certificate).unwrap();
    std::fs::write(&key, &pair.key).unwrap();
    (cert, key)
}

/// The binary serving `door` over HTTPS with `cert` and `key`.
fn on_https(tokens: &Path, cert: &Path, key: &Path) -> Stopped {
    Stopped(
        fsm_serve(tokens)
            .args(["--listen", "127.0.0.1:0", "--tls-cert"])
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// `--tls-cert` and `--tls-key`: HTTPS only, with the service's certificate,
/// in HTTP/2 for a client that offers it (ALPN) and HTTP/1.1 for one that
/// does not. A client that opens a connection and never completes its
/// handshake holds up no other; plain HTTP and a client that does not trust
/// the certificate get nothing.
#[test]
fn with_a_certificate_it_serves_https_only() {
    let tmp = tempfile::tempdir().unwrap();
    let tokens = tokens_file(tmp.path(), 0o600);
    let (ca, issuer) = secure::authority("fsm serve's authority");
    let (cert, key) = certify(tmp.path(), &issuer);
    let mut child = on_https(&tokens, &cert, &key);
    let (base, stderr) = listening(&mut child.0);
    let addr = base.strip_prefix("https://").expect(&base).to_owned();
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        // A connection that never says hello.
        let _silent = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let trusting = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap())
            .build()
            .unwrap();
        let statuses = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            create_and_close(&trusting, &base),
        )
        .await
        .expect("held up behind a handshake that never came");
        assert_eq!(statuses, [201, 200]);
        let version = |client: reqwest::Client| {
            let url = format!("{base}/healthz");
            async move { client.get(url).send().await.unwrap().version() }
        };
        assert_eq!(version(trusting).await, reqwest::Version::HTTP_2);
        let one_one = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap())
            .http1_only()
            .build()
            .unwrap();
        assert_eq!(version(one_one).await, reqwest::Version::HTTP_11);
        let plain = reqwest::Client::new()
            .get(format!("http://{addr}/healthz"))
            .send()
            .await;
        assert!(plain.is_err(), "{plain:?}");
        let stranger = reqwest::Client::new()
            .get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap_err();
        assert!(stranger.is_connect(), "{stranger:?}");
    });
    interrupted(&mut child.0, stderr);
}

/// `text` written to the file `name` in `dir`: its path.
fn written(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// etcd's TLS files that do not read as what their flags say stop it at
/// start, naming the flag and the file, before any connection is tried (no
/// etcd answers where it points).
#[test]
fn etcd_tls_files_that_do_not_read_are_refused_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let tokens = tokens_file(tmp.path(), 0o600);
    let (ca, issuer) = secure::authority("an authority");
    let client = secure::signed(&issuer, "client", &["localhost"], false);
    let write = |name: &str, text: &str| written(tmp.path(), name, text);
    let (ca, cert, key) = (
        write("ca.pem", &ca),
        write("client.pem", &client.certificate),
        write("client-key.pem", &client.key),
    );
    let run = |ca: &str, cert: &str, key: &str| {
        let etcd = [
            "--store",
            "etcd",
            "--etcd",
            "127.0.0.1:1",
            "--etcd-cacert",
            ca,
        ];
        let identity = ["--etcd-cert", cert, "--etcd-key", key];
        refused_at_start(&tokens, &[&etcd[..], &identity[..]].concat())
    };
    let said = run(&key, &cert, &key);
    assert!(
        said.contains(&format!(
            "--etcd-cacert {key}: the authority (CA) holds no PEM certificate"
        )),
        "{said}"
    );
    let said = run(&ca, &key, &key);
    assert!(
        said.contains(&format!(
            "--etcd-cert {key}: the client certificate holds no PEM certificate"
        )),
        "{said}"
    );
    let said = run(&ca, &cert, &cert);
    assert!(
        said.contains(&format!(
            "--etcd-key {cert}: the client key is not a PEM private key"
        )),
        "{said}"
    );
}

/// A certificate and key that cannot serve stop it at start, naming the files.
#[test]
fn a_certificate_that_cannot_serve_is_refused_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let tokens = tokens_file(tmp.path(), 0o600);
    let (_, issuer) = secure::authority("an authority");
    let one = secure::signed(&issuer, "one", &["localhost"], true);
    let other = secure::signed(&issuer, "other", &["localhost"], true);
    let write = |name: &str, text: &str| written(tmp.path(), name, text);
    let (cert, other_key) = (
        write("one.pem", &one.certificate),
        write("other-key.pem", &other.key),
    );
    let missing = tmp.path().join("missing.pem").display().to_string();
    let run = |args: &[&str]| refused_at_start(&tokens, args);
    let said = run(&["--tls-cert", &cert, "--tls-key", &missing]);
    assert!(said.contains(&format!("{missing}: ")), "{said}");
    let garbled = write(
        "garbled.pem",
        "-----BEGIN CERTIFICATE-----\n!!! not base64 !!!\n-----END CERTIFICATE-----\n",
    );
    let said = run(&["--tls-cert", &garbled, "--tls-key", &other_key]);
    assert!(said.contains("the certificate chain is not PEM"), "{said}");
    let said = run(&["--tls-cert", &cert, "--tls-key", &cert]);
    assert!(
        said.contains("the private key is not a PEM private key"),
        "{said}"
    );
    let said = run(&["--tls-cert", &other_key, "--tls-key", &other_key]);
    assert!(
        said.contains("the certificate chain holds no PEM certificate"),
        "{said}"
    );
    let said = run(&["--tls-cert", &cert, "--tls-key", &other_key]);
    assert!(
        said.contains(&format!(
            "--tls-cert {cert}, --tls-key {other_key}: the private key is not the key of the \
             chain's first certificate"
        )),
        "{said}"
    );
    let said = run(&["--tls-cert", &cert]);
    assert!(said.contains("--tls-key"), "{said}");
}

/// The next line of the binary's standard error that holds `what`.
fn line_with(stderr: &mut BufReader<ChildStderr>, what: &str) -> String {
    said_until(stderr, what).1
}

/// What the binary's standard error says before its next line that holds
/// `what`, and that line.
fn said_until(stderr: &mut BufReader<ChildStderr>, what: &str) -> (String, String) {
    let mut before = String::new();
    loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "it exited before saying {what}:\n{before}"
        );
        if line.contains(what) {
            return (before, line);
        }
        before.push_str(&line);
    }
}

/// Sends SIGHUP to `child`.
fn hang_up(child: &Child) {
    let sent = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// SIGHUP: the tokens file and the certificate are read again, and serve
/// from then on (a token taken out is refused, a new one accepted; a new
/// connection meets the renewed certificate; a role the door does not declare
/// is warned of); files that do not read are refused, saying why, and the
/// last good ones stay.
#[test]
fn sighup_reloads_the_tokens_and_the_certificate() {
    const RENEWED: &str = "binary-test-token-renewed-4e1b";
    let tmp = tempfile::tempdir().unwrap();
    let tokens = tokens_file(tmp.path(), 0o600);
    let (first_ca, first) = secure::authority("the first authority");
    let (renewed_ca, renewed) = secure::authority("the renewed authority");
    let (cert, key) = certify(tmp.path(), &first);
    let mut child = on_https(&tokens, &cert, &key);
    let (base, mut stderr) = listening(&mut child.0);
    // A client of its own for each request: each makes a new connection, and
    // meets the certificate served then.
    let status = |ca: &str, token: &str, path: &str| {
        let (ca, token, url) = (ca.to_owned(), token.to_owned(), format!("{base}{path}"));
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(async move {
                let client = reqwest::Client::builder()
                    .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap())
                    .build()
                    .unwrap();
                match client.get(url).bearer_auth(token).send().await {
                    Ok(answer) => Ok(answer.status().as_u16()),
                    Err(e) => Err(e.is_connect()),
                }
            })
    };
    // At once: a SIGHUP is caught from the moment it says it listens
    // (uncaught, it would stop it).
    hang_up(&child.0);
    assert!(line_with(&mut stderr, "reloaded").contains("(2 tokens)"));
    line_with(&mut stderr, "reloaded");
    assert_eq!(status(&first_ca, USER, "/v1/door/objects"), Ok(200));
    assert_eq!(status(&renewed_ca, USER, "/v1/door/objects"), Err(true));

    std::fs::write(
        &tokens,
        format!(
            "[[token]]\ntoken = \"{RENEWED}\"\nactor = \"alice\"\nroles = [\"user\", \"usr\"]\n"
        ),
    )
    .unwrap();
    certify(tmp.path(), &renewed);
    hang_up(&child.0);
    // The reloaded file's role that the door does not declare is warned of
    // before the tokens are taken, as at start.
    let (warned, reloaded) = said_until(&mut stderr, "reloaded");
    assert!(
        warned.contains(
            "token 1 (actor alice) holds the role `usr`, which no machine of this service \
             declares: it grants nothing here; did you mean `user`?"
        ) && !warned.contains(RENEWED),
        "{warned}"
    );
    assert!(reloaded.contains("(1 token)"), "{reloaded}");
    line_with(&mut stderr, "reloaded");
    assert_eq!(status(&renewed_ca, RENEWED, "/v1/door/objects"), Ok(200));
    assert_eq!(status(&renewed_ca, USER, "/v1/door/objects"), Ok(401));
    assert_eq!(status(&first_ca, RENEWED, "/v1/door/objects"), Err(true));

    // Files that do not read: the ones in use stay.
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&key, "not a key").unwrap();
    hang_up(&child.0);
    let said = line_with(&mut stderr, "stay");
    assert!(
        said.contains("the tokens in use stay") && said.contains("mode 644"),
        "{said}"
    );
    let said = line_with(&mut stderr, "stay");
    assert!(said.contains("the certificate in use stays"), "{said}");
    assert!(
        said.contains("the private key is not a PEM private key"),
        "{said}"
    );
    assert_eq!(status(&renewed_ca, RENEWED, "/v1/door/objects"), Ok(200));

    let rest = interrupted(&mut child.0, stderr);
    for token in [OPS, USER, RENEWED] {
        assert!(!rest.contains(token), "a token in the log:\n{rest}");
    }
}

/// Creates the door `id` as `USER` on the service at `base`: the answer's
/// status.
fn create_door(base: &str, id: &str) -> u16 {
    let request = reqwest::Client::new()
        .post(format!("{base}/v1/door/objects"))
        .bearer_auth(USER)
        .json(&serde_json::json!({ "id": id }));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async { request.send().await.unwrap().status().as_u16() })
}

/// SIGHUP with `--store etcd` over TLS: the etcd files are read again and the
/// service reconnects with them, so that a client certificate is renewed
/// without a restart; files that do not read, or that etcd refuses, leave the
/// connection in use. etcd takes the certificate's name for the user (no
/// `--etcd-user`): once the service runs on the renewed certificate (`bob`),
/// the first's user (`alice`) is deleted and the service goes on.
#[test]
fn sighup_reconnects_to_etcd_with_the_renewed_client_certificate() {
    let Some(etcd) = secure::SecureEtcd::start() else {
        return;
    };
    etcd.as_root(async |root| {
        for user in ["alice", "bob"] {
            let no_password = etcd_client::UserAddOptions::new().with_no_pwd();
            root.user_add(user, "", Some(no_password)).await.unwrap();
            root.user_grant_role(user, "root").await.unwrap();
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    let tokens = tokens_file(tmp.path(), 0o600);
    let mut command = on_etcd(&tokens, &etcd, &[]);
    let (_, cert, key) = etcd.files();
    let certify_as = |user: &str| {
        let pem = secure::signed(&etcd.issuer, user, &[], false);
        std::fs::write(&cert, pem.certificate).unwrap();
        std::fs::write(&key, pem.key).unwrap();
    };
    certify_as("alice");
    let mut child = Stopped(command.stderr(Stdio::piped()).spawn().unwrap());
    let (base, mut stderr) = listening(&mut child.0);
    let create = |id: &str| create_door(&base, id);
    assert_eq!(create("d-1"), 201);

    // A key that is no key: refused before connecting, naming the flag.
    std::fs::write(&key, "not a key").unwrap();
    hang_up(&child.0);
    let said = line_with(&mut stderr, "etcd access");
    assert!(said.contains("the etcd access in use stays"), "{said}");
    assert!(said.contains("--etcd-key"), "{said}");
    // A certificate another authority signed: etcd refuses the connection.
    let (_, stranger) = secure::authority("a stranger");
    let pem = secure::signed(&stranger, "bob", &[], false);
    std::fs::write(&cert, pem.certificate).unwrap();
    std::fs::write(&key, pem.key).unwrap();
    hang_up(&child.0);
    let said = line_with(&mut stderr, "etcd access");
    assert!(said.contains("the etcd access in use stays"), "{said}");
    assert!(said.contains("machine `door`"), "{said}");
    assert!(said.contains("reconnecting to etcd at"), "{said}");
    assert_eq!(create("d-2"), 201);

    certify_as("bob");
    hang_up(&child.0);
    let said = line_with(&mut stderr, "fsm serve: reconnected");
    assert!(
        said.contains("fsm serve: reconnected to etcd with"),
        "{said}"
    );
    assert!(
        said.contains(&format!("--etcd-cert {}", cert.display())),
        "{said}"
    );
    etcd.as_root(async |root| root.user_delete("alice").await.unwrap());
    assert_eq!(create("d-3"), 201);
    drop(interrupted(&mut child.0, stderr));
}

/// SIGHUP with `--etcd-password-file`: the password is read again and the
/// service reconnects with it, so that a password changed in etcd is taken
/// up without a restart (etcd's tokens here expire after a second: the old
/// password would no longer authenticate); a password etcd refuses leaves the
/// connection in use.
#[test]
fn sighup_reconnects_to_etcd_with_the_password_file_read_again() {
    let Some(etcd) = secure::SecureEtcd::start() else {
        return;
    };
    etcd.as_root(async |root| {
        root.user_add("svc", "first password", None).await.unwrap();
        root.user_grant_role("svc", "root").await.unwrap();
    });
    let tmp = tempfile::tempdir().unwrap();
    let tokens = tokens_file(tmp.path(), 0o600);
    let secret = tmp.path().join("etcd-password");
    std::fs::write(&secret, "first password\n").unwrap();
    let secret_arg = secret.to_str().unwrap();
    let args = ["--etcd-user", "svc", "--etcd-password-file", secret_arg];
    let mut child = Stopped(
        on_etcd(&tokens, &etcd, &args)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (base, mut stderr) = listening(&mut child.0);
    let create = |id: &str| create_door(&base, id);
    assert_eq!(create("d-1"), 201);

    etcd.as_root(async |root| {
        root.user_change_password("svc", "second password")
            .await
            .unwrap()
    });
    // A password etcd refuses: the connection in use stays.
    std::fs::write(&secret, "not the password\n").unwrap();
    hang_up(&child.0);
    let said = line_with(&mut stderr, "etcd access");
    assert!(said.contains("the etcd access in use stays"), "{said}");
    assert!(said.contains("as user `svc`"), "{said}");
    assert!(said.contains("authentication failed"), "{said}");
    assert!(!said.contains("not the password"), "{said}");

    std::fs::write(&secret, "second password\n").unwrap();
    hang_up(&child.0);
    let said = line_with(&mut stderr, "fsm serve: reconnected");
    assert!(said.contains("--etcd-password-file"), "{said}");
    // Past the old token's second: only the new password authenticates.
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    assert_eq!(create("d-2"), 201);
    let rest = interrupted(&mut child.0, stderr);
    for password in ["first password", "second password"] {
        assert!(!rest.contains(password), "{rest}");
    }
}
