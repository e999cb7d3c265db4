//! The `fsm-serve` binary: a tokens file others can read is refused at start with
//! the reason; refusals are logged with the actor and the rule, never the token;
//! it listens on loopback unless told otherwise; SIGINT shuts it down cleanly.

#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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

#[test]
fn a_tokens_file_others_can_read_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let tokens = tokens_file(dir, 0o644);
    let out = Command::new(env!("CARGO_BIN_EXE_fsm-serve"))
        .args([&door(), "--tokens", &tokens.display().to_string()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("can be read by other users (mode 644): restrict it to its owner (chmod 600"),
        "{stderr}"
    );
    assert!(!stderr.contains(OPS));
}

/// The binary as run: where it listens, `--keep-history` bounding histories,
/// refusals logged without tokens, SIGINT a clean stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_logged_without_tokens_and_sigint_stops_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let tokens = tokens_file(dir, 0o600);
    let mut child = Command::new(env!("CARGO_BIN_EXE_fsm-serve"))
        .args([
            &door(),
            "--tokens",
            &tokens.display().to_string(),
            "--listen",
            "127.0.0.1:0",
            "--keep-history",
            "2",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its first line says where it listens.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "it exited before listening"
        );
        if let Some(at) = line.trim().strip_prefix("fsm serve: door on http://") {
            break at.to_owned();
        }
    };
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    let base = format!("http://{addr}");
    let c = reqwest::Client::new();
    let status = |r: reqwest::Response| r.status().as_u16();
    let r = c
        .post(format!("{base}/v1/door/objects"))
        .bearer_auth(USER)
        .json(&serde_json::json!({"id": "d"}))
        .send()
        .await
        .unwrap();
    assert_eq!(status(r), 201);
    let r = c
        .post(format!("{base}/v1/door/objects/d/actions/close?run=true"))
        .bearer_auth(USER)
        .send()
        .await
        .unwrap();
    assert_eq!(status(r), 200);
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

    // SIGINT: a clean stop.
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let exit = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(exit.success(), "{exit:?}\n{rest}");
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
