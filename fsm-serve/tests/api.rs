//! The service through a real HTTP client: every status code of the contract, the
//! watch stream and its resumption, metrics, the OpenAPI document, the page, the
//! healer's revocation seen over HTTP, 16 clients racing on the same objects, and a
//! graceful shutdown that loses nothing accepted.

#[path = "../../fsm-core/tests/common/mod.rs"]
mod common;
mod server;
mod sse;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use fsm_serve::{Config, Tokens};
use reqwest::{Client, StatusCode};
use serde_json::{Value, json};
use server::Server;
use sse::{sse, sse_ids};

const OPS: &str = "token-of-ops-0123456789";
const USER: &str = "token-of-user-0123456789";
const KEEPER: &str = "token-of-keeper-0123456789";
/// Every role of the test specs: for schemathesis, so that its requests reach
/// past the roles to the table's rules.
const ALL: &str = "token-of-every-role-0123456789";

fn spec(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn tokens() -> Tokens {
    Tokens::parse(&format!(
        r#"
        [[token]]
        token = "{OPS}"
        actor = "ops"
        roles = ["admin", "controller"]
        [[token]]
        token = "{USER}"
        actor = "alice"
        roles = ["user"]
        [[token]]
        token = "{KEEPER}"
        actor = "kim"
        roles = ["keeper"]
        [[token]]
        token = "{ALL}"
        actor = "tess"
        roles = ["admin", "controller", "user", "keeper"]
        "#
    ))
    .unwrap()
}

impl Server {
    /// A service of the three test specs and the test tokens, configured by
    /// `configure`.
    async fn start(configure: impl FnOnce(&mut Config)) -> Server {
        let mut config = Config::new(vec![
            spec("../specs/ovc/vm.toml"),
            spec("../specs/sabakan/machine.toml"),
            spec("tests/specs/door.toml"),
        ]);
        configure(&mut config);
        Server::open(config, tokens()).await
    }
}

/// `(status, body)` of a request with `token`.
async fn call(
    client: &Client,
    method: reqwest::Method,
    url: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = client.request(method, url);
    if let Some(t) = token {
        request = request.bearer_auth(t);
    }
    if let Some(b) = body {
        request = request.json(&b);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn post(client: &Client, url: &str, token: &str, body: Option<Value>) -> (StatusCode, Value) {
    call(client, reqwest::Method::POST, url, Some(token), body).await
}

async fn get(client: &Client, url: &str, token: &str) -> (StatusCode, Value) {
    call(client, reqwest::Method::GET, url, Some(token), None).await
}

/// Creates VM `id` on `server`, as ops.
async fn create_vm(server: &Server, client: &Client, id: &str) {
    let body = Some(json!({ "id": id }));
    let (status, created) = post(client, &server.url("/v1/vm/objects"), OPS, body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_status_of_the_contract() {
    let server = Server::start(|_| {}).await;
    let c = Client::new();
    let objects = server.url("/v1/vm/objects");

    // 401: no token, an unknown one; the answer says how to authenticate.
    let response = c.get(&objects).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"], "unauthorized");
    let (status, body) = get(&c, &objects, "not-a-token-at-all").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("unauthorized"))
    );

    // 201, then 409 for the same id.
    let (status, vm) = post(&c, &objects, OPS, Some(json!({ "id": "vm-1" }))).await;
    assert_eq!(status, StatusCode::CREATED, "{vm}");
    assert_eq!(
        (vm["state"].as_str(), vm["version"].as_u64()),
        (Some("VIRTUAL"), Some(1))
    );
    assert_eq!(vm["in_flight"], Value::Null);
    let (status, body) = post(&c, &objects, OPS, Some(json!({ "id": "vm-1" }))).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        (body["error"].as_str(), body["state"].as_str()),
        (Some("exists"), Some("VIRTUAL"))
    );

    // 400 with the position; 400 for an empty id; 413 for a huge body.
    let response = c
        .post(&objects)
        .bearer_auth(OPS)
        .header("content-type", "application/json")
        .body("{\n  \"id\": \"vm-2\",\n  oops\n}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        (
            body["error"].as_str(),
            body["line"].as_u64(),
            body["column"].as_u64()
        ),
        (Some("malformed"), Some(3), Some(3)),
        "{body}"
    );
    // An empty body is at line 1, column 1 (serde_json would say column 0).
    let (status, body) = post(&c, &objects, OPS, None).await;
    assert_eq!(
        (
            status,
            body["error"].as_str(),
            body["line"].as_u64(),
            body["column"].as_u64()
        ),
        (StatusCode::BAD_REQUEST, Some("malformed"), Some(1), Some(1)),
        "{body}"
    );
    let (status, body) = post(&c, &objects, OPS, Some(json!({ "id": "" }))).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("malformed"))
    );
    let (status, body) = post(&c, &objects, OPS, Some(json!({ "id": "x", "colour": 1 }))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `colour`"),
        "{body}"
    );
    let huge = json!({ "id": "x".repeat(100_000) });
    let (status, body) = post(&c, &objects, OPS, Some(huge)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("too_large"))
    );

    // 400 for a query parameter or a path segment that does not parse, and 405
    // for a method a path does not take: JSON like every other error (not
    // axum's plain text), and the 405 still lists what the path takes.
    let (status, body) = post(
        &c,
        &server.url("/v1/vm/objects/vm-1/actions/deploy?run=maybe"),
        OPS,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        (&body["error"], &body["parameter"]),
        (&json!("malformed"), &json!("run"))
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("`run`: provided string was not `true` or `false`"),
        "{body}"
    );
    // A parameter a call does not take is refused, not ignored: `?rn=true`
    // ignored would have started and held the action. The object is untouched.
    let (status, body) = post(
        &c,
        &server.url("/v1/vm/objects/vm-1/actions/deploy?rn=true"),
        OPS,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["parameter"], "rn", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `rn`, expected `run`"),
        "{body}"
    );
    // Each names the parameter at fault: one the call does not take, one
    // that does not parse, one given twice (serde's own refusal of that
    // names none); a path segment that is not UTF-8 once decoded, or not a
    // fence token, as the document names the segment.
    for (path, parameter) in [
        ("/v1/vm/objects/vm-1/in-flight/seven/complete", "token"),
        ("/v1/vm/objects/vm-1/actions/de%FFploy", "action"),
    ] {
        let (status, body) = post(&c, &server.url(path), OPS, None).await;
        assert_eq!(
            (status, body["error"].as_str(), body["parameter"].as_str()),
            (StatusCode::BAD_REQUEST, Some("malformed"), Some(parameter)),
            "{path}: {body}"
        );
    }
    for (path, parameter) in [
        ("/v1/vm/objects/vm-%FF", "id"),
        ("/v1/vm/objects/vm-1?run=true", "run"),
        ("/v1/vm/objects/vm-1/history?limt=1", "limt"),
        ("/v1/vm/objects?stat=VIRTUAL", "stat"),
        ("/v1/vm/watch?after=1", "after"),
        ("/v1/vm/objects?limit=0", "limit"),
        ("/v1/vm/objects?state=VIRTUAL&limit=x", "limit"),
        ("/v1/vm/objects?limit=1&after=a&limit=2", "limit"),
    ] {
        let (status, body) = get(&c, &server.url(path), OPS).await;
        assert_eq!(
            (status, body["error"].as_str(), body["parameter"].as_str()),
            (StatusCode::BAD_REQUEST, Some("malformed"), Some(parameter)),
            "{path}: {body}"
        );
    }
    let (_, vm) = get(&c, &server.url("/v1/vm/objects/vm-1"), OPS).await;
    assert_eq!(
        (
            vm["state"].as_str(),
            vm["version"].as_u64(),
            &vm["in_flight"]
        ),
        (Some("VIRTUAL"), Some(1), &Value::Null),
        "{vm}"
    );
    let (status, body) = get(&c, &server.url("/v1/vm/objects/%FF"), OPS).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("malformed")),
        "{body}"
    );
    let response = c.delete(&objects).bearer_auth(OPS).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(response.headers()["allow"], "POST,GET,HEAD");
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        (body["error"].as_str(), body["method"].as_str()),
        (Some("method_not_allowed"), Some("DELETE"))
    );

    // 404: machine, object, action (with a suggestion), path.
    let (status, body) = get(&c, &server.url("/v1/starship/objects"), OPS).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("unknown_machine"))
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .ends_with("this service has: door, machine, vm"),
        "{body}"
    );
    let (status, body) = get(&c, &server.url("/v1/vm/objects/vm-9"), OPS).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
    let (status, body) = post(
        &c,
        &server.url("/v1/vm/objects/vm-1/actions/deplyo"),
        OPS,
        None,
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("unknown_action"))
    );
    assert_eq!(body["did_you_mean"], "deploy");
    let (status, _) = get(&c, &server.url("/v2/nothing"), OPS).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // 200 with its ETag.
    let response = c
        .get(server.url("/v1/vm/objects/vm-1"))
        .bearer_auth(OPS)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["etag"], "\"1\"");

    // Start: 201, in the transition state, with the fence; a second start: 409 busy.
    let deploy = server.url("/v1/vm/objects/vm-1/actions/deploy");
    let (status, started) = post(&c, &deploy, OPS, None).await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    assert_eq!(started["state"], "DEPLOYING");
    let fence = started["fence"].as_u64().unwrap();
    assert_eq!(started["in_flight"]["fence"].as_u64(), Some(fence));
    assert_eq!(started["in_flight"]["actor"], "ops");
    // The record as the start wrote it: at the fence's version.
    assert_eq!(started["version"].as_u64(), Some(fence));
    let (status, body) = post(&c, &deploy, OPS, None).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        (body["error"].as_str(), body["holder"].as_str()),
        (Some("busy"), Some("ops"))
    );
    // Only the actor that started it may end it; an unknown fence is 404.
    let in_flight =
        |fence: u64, end: &str| server.url(&format!("/v1/vm/objects/vm-1/in-flight/{fence}/{end}"));
    let (status, body) = post(&c, &in_flight(fence, "complete"), USER, None).await;
    assert_eq!(
        (status, body["error"].as_str(), body["holder"].as_str()),
        (StatusCode::FORBIDDEN, Some("not_holder"), Some("ops"))
    );
    assert_eq!(
        body["message"],
        format!(
            "vm-1: `deploy` (fence {fence}) was started by ops, not alice: only ops may end it"
        )
    );
    let (status, body) = post(&c, &in_flight(fence + 7, "complete"), OPS, None).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_in_flight"))
    );
    let (status, done) = post(&c, &in_flight(fence, "complete"), OPS, None).await;
    assert_eq!(
        (status, done["state"].as_str()),
        (StatusCode::OK, Some("RUNNING"))
    );
    // Failing returns where it started.
    let (_, started) = post(
        &c,
        &server.url("/v1/vm/objects/vm-1/actions/stop"),
        OPS,
        None,
    )
    .await;
    let fence = started["fence"].as_u64().unwrap();
    let (status, failed) = post(&c, &in_flight(fence, "fail"), OPS, None).await;
    assert_eq!(
        (status, failed["state"].as_str()),
        (StatusCode::OK, Some("RUNNING"))
    );
    // An action this service holds no handle of (started by another process on
    // the same store, or by this one before a restart; here through the
    // runtime, its handle dropped) is ended by its fence, by who started it.
    let runtime = server.service.runtime("vm").unwrap();
    let ops = fsm_runtime::Actor::new("ops");
    let fence = runtime.start("vm-1", &ops, "stop").unwrap().fence().0;
    let (status, body) = post(&c, &in_flight(fence, "fail"), USER, None).await;
    assert_eq!(
        (status, body["error"].as_str(), body["holder"].as_str()),
        (StatusCode::FORBIDDEN, Some("not_holder"), Some("ops"))
    );
    let (status, failed) = post(&c, &in_flight(fence, "fail"), OPS, None).await;
    assert_eq!(
        (status, failed["state"].as_str()),
        (StatusCode::OK, Some("RUNNING"))
    );
    // Ended, it is ended: a second try says by whom.
    let (status, body) = post(&c, &in_flight(fence, "fail"), OPS, None).await;
    assert_eq!(
        (status, body["error"].as_str(), body["revoked_by"].as_str()),
        (StatusCode::CONFLICT, Some("revoked"), Some("ops"))
    );
    // The data its start proposed is kept with the hold: taken up by its
    // fence, the action completes with it.
    let proposed = r#"{"disk":"d-1"}"#;
    let fence = (runtime.start_changing("vm-1", None, &ops, "reboot", proposed.into()))
        .unwrap()
        .fence()
        .0;
    let (_, held) = get(&c, &server.url("/v1/vm/objects/vm-1"), OPS).await;
    assert_eq!(
        held["in_flight"]["proposed"],
        json!({ "disk": "d-1" }),
        "{held}"
    );
    let (status, done) = post(&c, &in_flight(fence, "complete"), OPS, None).await;
    assert_eq!(
        (status, done["state"].as_str(), &done["data"]),
        (StatusCode::OK, Some("RUNNING"), &json!({ "disk": "d-1" })),
        "{done}"
    );
    // An action started over the API and ended elsewhere (another process on
    // the store; here through the runtime): the service lets go of its handle
    // when its feed sees the end, so a late completion finds the hold gone
    // ("revoked", from the store), not a handle of its own ("conflict").
    let completed = |metrics: &str| {
        let line = "fsm_actions_completed_total{machine=\"vm\"} ";
        let at = metrics.find(line).expect("the counter") + line.len();
        metrics[at..]
            .lines()
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let before = completed(&server.metrics(&c).await);
    let (status, started) = post(
        &c,
        &server.url("/v1/vm/objects/vm-1/actions/reboot"),
        OPS,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    let fence = started["fence"].as_u64().unwrap();
    let elsewhere = runtime.resume("vm-1", &ops, fsm_runtime::Fence(fence));
    elsewhere.unwrap().complete().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while completed(&server.metrics(&c).await) == before {
        assert!(
            std::time::Instant::now() < deadline,
            "the feed saw no completion"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (status, body) = post(&c, &in_flight(fence, "complete"), OPS, None).await;
    assert_eq!(
        (status, body["error"].as_str(), body["revoked_by"].as_str()),
        (StatusCode::CONFLICT, Some("revoked"), Some("ops"))
    );

    // ?run=true: 200, whole. If-Match: 412 on a stale version, then it runs.
    let (status, paused) = post(
        &c,
        &server.url("/v1/vm/objects/vm-1/actions/pause?run=true"),
        OPS,
        None,
    )
    .await;
    assert_eq!(
        (status, paused["state"].as_str()),
        (StatusCode::OK, Some("PAUSED"))
    );
    let version = paused["version"].as_u64().unwrap();
    let resume = server.url("/v1/vm/objects/vm-1/actions/resume?run=true");
    let with_if_match =
        |url: &str, tag: String| c.post(url).bearer_auth(OPS).header("if-match", tag).send();
    let response = with_if_match(&resume, format!("\"{}\"", version - 1))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::PRECONDITION_FAILED);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        (body["error"].as_str(), body["found_version"].as_u64()),
        (Some("precondition_failed"), Some(version))
    );
    // An empty If-Match lists no version (RFC 9110), nor does one past `u64`:
    // 412 too. A list of several, or what is not an ETag: 400. A request
    // refused without its condition (no such object) is refused so with it.
    for (tag, status, kind) in [
        ("", StatusCode::PRECONDITION_FAILED, "precondition_failed"),
        (
            "\"99999999999999999999999\"",
            StatusCode::PRECONDITION_FAILED,
            "precondition_failed",
        ),
        ("\"1\", \"2\"", StatusCode::BAD_REQUEST, "malformed"),
        ("7", StatusCode::BAD_REQUEST, "malformed"),
    ] {
        let response = with_if_match(&resume, tag.to_owned()).await.unwrap();
        assert_eq!(response.status(), status, "If-Match: {tag}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(
            (body["error"].as_str(), body["if_match"].as_str()),
            (Some(kind), Some(tag))
        );
        if status == StatusCode::BAD_REQUEST {
            assert_eq!(body["parameter"], "If-Match", "{body}");
        }
    }
    let missing = server.url("/v1/vm/objects/no-such-vm/actions/resume");
    let response = with_if_match(&missing, String::new()).await.unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    // A change of data is conditional the same way, and writes nothing.
    let patched = c
        .patch(server.url("/v1/vm/objects/vm-1/data?action=resume"))
        .bearer_auth(OPS)
        .header("if-match", "")
        .json(&json!({ "size": 2 }))
        .send()
        .await
        .unwrap();
    assert_eq!(patched.status(), StatusCode::PRECONDITION_FAILED);
    let body: Value = patched.json().await.unwrap();
    assert_eq!(
        (body["if_match"].as_str(), body["found_version"].as_u64()),
        (Some(""), Some(version))
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("names no version"),
        "{body}"
    );
    // If-Match compares strongly (RFC 9110): a weak tag of the very version
    // found never matches.
    let weak = format!("W/\"{version}\"");
    let response = with_if_match(&resume, weak.clone()).await.unwrap();
    assert_eq!(response.status(), StatusCode::PRECONDITION_FAILED);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        (body["if_match"].as_str(), body["found_version"].as_u64()),
        (Some(weak.as_str()), Some(version))
    );
    assert!(
        body["message"].as_str().unwrap().contains("weak tag"),
        "{body}"
    );
    let response = with_if_match(&resume, format!("\"{version}\""))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);

    // 422: no rule from this state.
    let (status, body) = post(
        &c,
        &server.url("/v1/vm/objects/vm-1/actions/deploy"),
        OPS,
        None,
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("no_rule"))
    );

    // Roles and owners (the door): 403 missing role, 403 not the owner, 422 guard.
    let doors = server.url("/v1/door/objects");
    post(&c, &doors, USER, Some(json!({ "id": "front" }))).await;
    let door =
        |action: &str| server.url(&format!("/v1/door/objects/front/actions/{action}?run=true"));
    let (status, closed) = post(&c, &door("close"), USER, None).await;
    assert_eq!(
        (status, closed["state"].as_str()),
        (StatusCode::OK, Some("CLOSED"))
    );
    let (status, body) = post(&c, &door("lock"), USER, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        (body["error"].as_str(), body["roles_required"].clone()),
        (Some("missing_role"), json!(["keeper"]))
    );
    let (status, body) = post(&c, &door("open"), USER, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        (body["error"].as_str(), body["owner"].as_str()),
        (Some("not_owner"), Some("keeper"))
    );
    let (status, _) = post(&c, &door("open"), KEEPER, None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = post(&c, &door("swing"), USER, None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        (body["error"].as_str(), body["guard"].as_str()),
        (Some("guard"), Some("oiled"))
    );

    // Data: given at creation, changed only by an action, merged (RFC 7396).
    let (status, back) = post(
        &c,
        &doors,
        USER,
        Some(json!({ "id": "back", "data": { "colour": "red", "hinges": 2 } })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(back["data"], json!({ "colour": "red", "hinges": 2 }));
    let data = server.url("/v1/door/objects/back/data");
    let patch = |url: String, token: &'static str, body: Value, if_match: Option<u64>| {
        let c = c.clone();
        async move {
            let mut r = c.patch(url).bearer_auth(token).json(&body);
            if let Some(v) = if_match {
                r = r.header("if-match", format!("\"{v}\""));
            }
            let r = r.send().await.unwrap();
            (r.status(), r.json::<Value>().await.unwrap())
        }
    };
    let (status, body) = patch(data.clone(), USER, json!({ "colour": "blue" }), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("?action="),
        "{body}"
    );
    // `swing` waits on a guard the service cannot evaluate; `unlock` does not
    // start from OPEN.
    let (status, body) = patch(
        format!("{data}?action=swing"),
        USER,
        json!({ "colour": "blue" }),
        None,
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("guard"))
    );
    let (status, body) = patch(
        format!("{data}?action=unlock"),
        KEEPER,
        json!({ "colour": "blue" }),
        None,
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("no_rule"))
    );
    let (status, body) = patch(
        format!("{data}?action=close"),
        USER,
        json!({ "colour": "blue" }),
        Some(7),
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::PRECONDITION_FAILED, Some("precondition_failed"))
    );
    let (status, closed) = patch(
        format!("{data}?action=close"),
        USER,
        json!({ "colour": "blue", "hinges": null }),
        Some(1),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{closed}");
    assert_eq!(
        (closed["state"].as_str(), closed["data"].clone()),
        (Some("CLOSED"), json!({ "colour": "blue" }))
    );
    let (_, got) = get(&c, &server.url("/v1/door/objects/back"), USER).await;
    assert_eq!(got["data"], json!({ "colour": "blue" }));

    // Lists, by state; an unknown state is 400.
    let (status, list) = get(&c, &server.url("/v1/vm/objects?state=RUNNING"), OPS).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["objects"][0]["id"], "vm-1");
    let (_, list) = get(&c, &server.url("/v1/vm/objects?state=HALTED"), OPS).await;
    assert_eq!(list["objects"], json!([]));
    let (status, body) = get(&c, &server.url("/v1/vm/objects?state=RUNIN"), OPS).await;
    assert_eq!(
        (status, body["did_you_mean"].as_str()),
        (StatusCode::BAD_REQUEST, Some("RUNNING"))
    );

    // History, oldest first.
    let (status, history) = get(&c, &server.url("/v1/vm/objects/vm-1/history"), OPS).await;
    assert_eq!(status, StatusCode::OK);
    let kinds: Vec<&str> = history["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "Created",
            "Started",
            "Completed",
            "Started",
            "Failed",
            "Started",
            "Abandoned",
            "Failed",
            // The start that proposed data, its handle dropped, then ended
            // by its fence.
            "Started",
            "Abandoned",
            "Completed",
            "Started",
            "Completed",
            "Started",
            "Completed",
            "Started",
            "Completed"
        ]
    );
    let (status, _) = get(&c, &server.url("/v1/vm/objects/vm-9/history"), OPS).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // No CORS unless configured.
    let response = c
        .get(&objects)
        .bearer_auth(OPS)
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert!(
        response
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );

    // Metrics and OpenAPI need no token.
    let metrics = server.metrics(&c).await;
    assert!(
        metrics.contains("fsm_objects{machine=\"vm\",state=\"RUNNING\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("fsm_actions_started_total{machine=\"vm\"} 7\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("fsm_actions_failed_total{machine=\"vm\"} 2\n"),
        "{metrics}"
    );
    let openapi: Value = c
        .get(server.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(openapi["openapi"], "3.0.3");
    // Each machine under paths of its own, naming only its own states and
    // actions.
    for machine in ["door", "machine", "vm"] {
        for path in [
            "/objects",
            "/objects/{id}",
            "/objects/{id}/data",
            "/objects/{id}/actions/{action}",
            "/objects/{id}/in-flight/{token}/complete",
            "/objects/{id}/in-flight/{token}/fail",
            "/objects/{id}/history",
            "/watch",
        ] {
            let path = format!("/v1/{machine}{path}");
            assert!(openapi["paths"][&path].is_object(), "{path} undocumented");
        }
    }
    assert!(openapi["paths"]["/v1/{machine}/objects"].is_null());
    let door = &openapi["paths"]["/v1/door/objects"]["get"];
    assert_eq!(door["operationId"], "door_list");
    assert_eq!(
        door["parameters"][0]["schema"]["enum"],
        json!(["OPEN", "CLOSING", "CLOSED", "LOCKED", "JAMMED"])
    );
    let actions = &openapi["paths"]["/v1/door/objects/{id}/actions/{action}"]["post"];
    assert_eq!(
        actions["parameters"][1]["schema"]["enum"],
        json!(["close", "open", "lock", "unlock", "swing", "free", "paint"])
    );
    assert_eq!(
        actions["responses"]["201"]["links"]["complete"]["parameters"]["token"],
        "$response.body#/fence"
    );
    assert_eq!(
        openapi["components"]["schemas"]["door.Object"]["properties"]["state"]["enum"],
        json!(["OPEN", "CLOSING", "CLOSED", "LOCKED", "JAMMED"])
    );
    let page = c
        .get(server.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("<svg xmlns") && page.contains("data-machine=\"door\" data-state=\"JAMMED\"")
    );
    server.stop().await;
}

/// Reads SSE `write` events' JSON (and their ids) from `response` until `n` came.
async fn events(response: reqwest::Response, n: usize) -> Vec<(u64, Value)> {
    (sse(response, n, &["write"]).await.into_iter())
        .map(|(_, id, data)| (id.expect("a write has an id"), data))
        .collect()
}

/// A stream resumed with an event id this service did not give (one from
/// before a restart, or from the future) starts with a `gap`, then goes on
/// with the next writes: not silence until the numbers catch up. (It was: a
/// restarted service numbered from 1 again and held back every write up to
/// the client's number; past `u64::MAX - 1`, the number overflowed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumed_with_a_number_this_service_did_not_give_starts_with_a_gap() {
    let c = Client::new();
    let before = Server::start(|_| {}).await;
    let stream = c
        .get(before.url("/v1/door/watch"))
        .bearer_auth(USER)
        .send()
        .await
        .unwrap();
    post(
        &c,
        &before.url("/v1/door/objects"),
        USER,
        Some(json!({ "id": "d" })),
    )
    .await;
    let (last, _) = events(stream, 1).await[0].clone();
    before.stop().await;

    // The service restarted: its writes are numbered past the last one's.
    let after = Server::start(|_| {}).await;
    let never = u64::MAX.to_string();
    for resume_after in [last.to_string(), never] {
        let stream = c
            .get(after.url("/v1/door/watch"))
            .bearer_auth(USER)
            .header("last-event-id", &resume_after)
            .send()
            .await
            .unwrap();
        assert_eq!(stream.status(), StatusCode::OK);
        let id = format!("d-{}", resume_after.len());
        post(
            &c,
            &after.url("/v1/door/objects"),
            USER,
            Some(json!({ "id": id })),
        )
        .await;
        let seen = sse(stream, 2, &["write", "gap"]).await;
        assert_eq!(seen[0].0, "gap", "resumed after {resume_after}: {seen:?}");
        assert_eq!(
            (seen[1].0.as_str(), seen[1].2["id"].as_str()),
            ("write", Some(id.as_str())),
            "resumed after {resume_after}: {seen:?}"
        );
        assert!(seen[1].1.unwrap() > last, "{seen:?}");
    }
    after.stop().await;
}

/// A controller lists, then watches from the list's `last_event_id`, and
/// meets every write made between the two, in order, and none the list
/// already showed; a page of the list, and the summary, answer the same id as
/// the whole list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_the_lists_last_event_id_meets_each_write_made_since() {
    let server = Server::start(|_| {}).await;
    let c = Client::new();
    let objects = server.url("/v1/vm/objects");
    // `a` is created, and its creation numbered (a stream has it), before the list.
    let stream = c
        .get(server.url("/v1/vm/watch"))
        .bearer_auth(OPS)
        .send()
        .await
        .unwrap();
    post(&c, &objects, OPS, Some(json!({ "id": "a" }))).await;
    let (created, _) = events(stream, 1).await[0];
    let (status, listed) = get(&c, &objects, OPS).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let last = listed["last_event_id"].as_u64().expect("a number");
    assert!(last >= created, "{listed}: `a` created as {created}");
    assert_eq!(listed["objects"][0]["id"], "a");
    let (_, page) = get(&c, &format!("{objects}?limit=1"), OPS).await;
    assert_eq!(page["last_event_id"], last, "{page}");
    let (_, summary) = get(&c, &server.url("/v1/vm/summary"), OPS).await;
    assert_eq!(summary["last_event_id"], last, "{summary}");

    // Written after the list, before the watch: each is met, and only those.
    post(&c, &objects, OPS, Some(json!({ "id": "b" }))).await;
    let run = server.url("/v1/vm/objects/a/actions/deploy?run=true");
    let (status, _) = post(&c, &run, OPS, None).await;
    assert_eq!(status, StatusCode::OK);
    let resumed = c
        .get(server.url("/v1/vm/watch"))
        .bearer_auth(OPS)
        .header("last-event-id", last.to_string())
        .send()
        .await
        .unwrap();
    let met = events(resumed, 3).await;
    let seen: Vec<(&str, &str)> = (met.iter())
        .map(|(_, e)| (e["id"].as_str().unwrap(), e["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [("b", "Created"), ("a", "Started"), ("a", "Completed")]
    );
    assert!(met.iter().all(|(id, _)| *id > last), "{met:?} after {last}");
    server.stop().await;
}

/// `GET /v1/watch` carries every machine's writes in one stream, each with its
/// `machine`; its ids name each machine's last event, and a stream resumed
/// from one meets exactly the writes made since, on every machine. A
/// malformed `Last-Event-ID` is refused, naming it; a machine the service
/// does not have is passed over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stream_follows_every_machine_and_resumes() {
    let server = Server::start(|_| {}).await;
    let c = Client::new();
    let open = async |last: Option<&str>| {
        let mut request = c.get(server.url("/v1/watch")).bearer_auth(USER);
        if let Some(last) = last {
            request = request.header("last-event-id", last);
        }
        request.send().await.unwrap()
    };
    let stream = open(None).await;
    for (machine, id) in [("vm", "v1"), ("door", "d1"), ("machine", "m1")] {
        let url = server.url(&format!("/v1/{machine}/objects"));
        assert_eq!(
            post(&c, &url, OPS, Some(json!({ "id": id }))).await.0,
            StatusCode::CREATED
        );
    }
    let met = sse_ids(stream, 3, &["write"]).await;
    // Each machine's writes in order; the machines' interleaved as their
    // feeds are read (so sorted here).
    let mut seen: Vec<(&str, &str)> = (met.iter())
        .map(|(_, _, e)| (e["machine"].as_str().unwrap(), e["id"].as_str().unwrap()))
        .collect();
    seen.sort();
    assert_eq!(seen, [("door", "d1"), ("machine", "m1"), ("vm", "v1")]);
    // Each id names every machine's last event id so far (`door=41&vm=7`).
    for (_, id, event) in &met {
        let id = id.as_deref().unwrap();
        let named: std::collections::HashMap<&str, u64> = (id.split('&'))
            .map(|pair| pair.split_once('=').unwrap())
            .map(|(machine, seq)| (machine, seq.parse().unwrap()))
            .collect();
        assert_eq!(named.len(), 3, "{id}");
        let machine = event["machine"].as_str().unwrap();
        assert_eq!(json!(named[machine]), event["seq"], "{id}");
    }
    // The last event's id names every machine's last event.
    let last = met[2].1.clone().unwrap();
    assert!(
        last.starts_with("door=") && last.contains("&machine=") && last.contains("&vm="),
        "{last}"
    );

    // Written on two machines since: a stream resumed from the last id meets
    // those, and only those.
    let run = server.url("/v1/vm/objects/v1/actions/deploy?run=true");
    assert_eq!(post(&c, &run, OPS, None).await.0, StatusCode::OK);
    let door = server.url("/v1/door/objects");
    assert_eq!(
        post(&c, &door, OPS, Some(json!({ "id": "d2" }))).await.0,
        StatusCode::CREATED
    );
    let resumed = sse_ids(open(Some(&last)).await, 3, &["write"]).await;
    let seen: Vec<(&str, &str, &str)> = (resumed.iter())
        .map(|(_, _, e)| {
            let field = |k: &str| e[k].as_str().unwrap();
            (field("machine"), field("id"), field("kind"))
        })
        .collect();
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            ("door", "d2", "Created"),
            ("vm", "v1", "Completed"),
            ("vm", "v1", "Started")
        ],
        "{seen:?}"
    );
    // A machine this service does not have is passed over.
    let more = open(Some(&format!("{last}&gone=7"))).await;
    assert_eq!(more.status(), StatusCode::OK);
    let again = sse_ids(more, 3, &["write"]).await;
    assert_eq!(again.len(), 3);

    let refused = open(Some("12")).await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["parameter"], "Last-Event-ID", "{body}");
    assert_eq!(body["last_event_id"], "12", "{body}");

    // Only the machines named: writes of the others pass it by, and its ids
    // name only those it follows (resuming from an id of the whole stream).
    let followed = (c.get(server.url("/v1/watch?machine=door&machine=machine")))
        .bearer_auth(USER)
        .header("last-event-id", &last)
        .send()
        .await
        .unwrap();
    assert_eq!(followed.status(), StatusCode::OK);
    for (machine, id) in [("vm", "v9"), ("machine", "m2")] {
        let url = server.url(&format!("/v1/{machine}/objects"));
        let created = post(&c, &url, OPS, Some(json!({ "id": id }))).await.0;
        assert_eq!(created, StatusCode::CREATED);
    }
    let met = sse_ids(followed, 2, &["write"]).await;
    let mut seen: Vec<(&str, &str)> = (met.iter())
        .map(|(_, _, e)| (e["machine"].as_str().unwrap(), e["id"].as_str().unwrap()))
        .collect();
    seen.sort();
    assert_eq!(seen, [("door", "d2"), ("machine", "m2")], "no vm write");
    let id = met[1].1.as_deref().unwrap();
    assert!(
        id.starts_with("door=") && id.contains("&machine=") && !id.contains("vm="),
        "{id}"
    );
    // A machine the service does not have, or a parameter it does not take.
    for (query, status, error, parameter) in [
        ("machine=gone", 404, "unknown_machine", None),
        ("machine=", 400, "malformed", Some("machine")),
        ("machines=vm", 400, "malformed", Some("machines")),
    ] {
        let refused = (c.get(server.url(&format!("/v1/watch?{query}"))))
            .bearer_auth(USER)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status().as_u16(), status, "{query}");
        let body: Value = refused.json().await.unwrap();
        assert_eq!(body["error"], error, "{query}: {body}");
        assert_eq!(body["parameter"].as_str(), parameter, "{query}: {body}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_stream_resumes_and_is_bounded() {
    let server = Server::start(|c| c.max_watchers = 1).await;
    let c = Client::new();
    let watch = server.url("/v1/vm/watch");
    let stream = c.get(&watch).bearer_auth(OPS).send().await.unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    // A second stream is over the bound.
    let (status, body) = get(&c, &watch, OPS).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("too_many_watchers"))
    );
    // A `Last-Event-ID` this service did not give is refused (before the
    // bound is looked at), not read as absent.
    let garbled = c
        .get(&watch)
        .bearer_auth(OPS)
        .header("last-event-id", "seven")
        .send()
        .await
        .unwrap();
    assert_eq!(garbled.status(), StatusCode::BAD_REQUEST);
    let body: Value = garbled.json().await.unwrap();
    assert_eq!(
        (&body["error"], &body["parameter"], &body["last_event_id"]),
        (
            &json!("malformed"),
            &json!("Last-Event-ID"),
            &json!("seven")
        )
    );
    assert!(
        body["message"].as_str().unwrap().contains("`seven`"),
        "{body}"
    );

    post(
        &c,
        &server.url("/v1/vm/objects"),
        OPS,
        Some(json!({ "id": "a" })),
    )
    .await;
    post(
        &c,
        &server.url("/v1/vm/objects/a/actions/deploy?run=true"),
        OPS,
        None,
    )
    .await;
    let seen = events(stream, 3).await;
    let versions: Vec<u64> = seen
        .iter()
        .map(|(_, e)| e["version"].as_u64().unwrap())
        .collect();
    assert_eq!(versions, [1, 2, 3]);
    assert_eq!(seen[2].1["kind"], "Completed");
    assert_eq!(seen[2].1["to"], "RUNNING");
    // The first stream is gone (its response dropped): a new one resumes after
    // the first event and gets the two after it, then what comes next.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let resumed = c
        .get(&watch)
        .bearer_auth(OPS)
        .header("last-event-id", seen[0].0.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), StatusCode::OK);
    post(
        &c,
        &server.url("/v1/vm/objects/a/actions/stop?run=true"),
        OPS,
        None,
    )
    .await;
    let again = events(resumed, 4).await;
    let ids: Vec<u64> = again.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [seen[1].0, seen[2].0, seen[2].0 + 1, seen[2].0 + 2]);
    server.stop().await;
}

/// Door `d`, created, with `close` started and held: the start's answer.
async fn closing_door(server: &Server, c: &Client) -> Value {
    let (status, _) = post(
        c,
        &server.url("/v1/door/objects"),
        USER,
        Some(json!({ "id": "d" })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, started) = post(
        c,
        &server.url("/v1/door/objects/d/actions/close"),
        USER,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    started
}

/// The healer rolls back an action past its spec's deadline; the holder's late
/// completion over HTTP is a 409 that writes nothing and says who revoked the
/// hold (the service let go of its handle when its feed saw the rollback), and
/// the metrics count it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_after_the_healer_is_revoked() {
    let server = Server::start(|c| c.heal_every = Duration::from_millis(300)).await;
    let c = Client::new();
    let started = closing_door(&server, &c).await;
    let fence = started["fence"].as_u64().unwrap();
    // CLOSING's deadline is 1 s. Once the feed has counted the rollback, the
    // service has let go of its handle.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let metrics = server.metrics(&c).await;
        if metrics.contains("fsm_actions_healed_total{machine=\"door\"} 1\n") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never healed: {metrics}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, door) = get(&c, &server.url("/v1/door/objects/d"), USER).await;
    assert_eq!(door["state"], "OPEN");
    let (_, before) = get(&c, &server.url("/v1/door/objects/d/history"), USER).await;
    let url = server.url(&format!("/v1/door/objects/d/in-flight/{fence}/complete"));
    let (status, body) = post(&c, &url, USER, None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let healer = before["entries"].as_array().unwrap().last().unwrap()["actor"].clone();
    assert_eq!(
        (&body["error"], &body["revoked_by"], &body["fence"]),
        (&json!("revoked"), &healer, &json!(fence)),
        "{body}"
    );
    let (_, after) = get(&c, &server.url("/v1/door/objects/d/history"), USER).await;
    assert_eq!(before, after, "the late completion wrote");
    let metrics = server.metrics(&c).await;
    assert!(
        metrics.contains("fsm_actions_healed_total{machine=\"door\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("fsm_actions_revoked_total{machine=\"door\"} 1\n"),
        "{metrics}"
    );
    server.stop().await;
}

/// 16 clients race on the same four doors: each history is a path of the table,
/// no move out of an owned state is made by a non-owner, and the races happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_clients_race_on_the_same_objects() {
    let server = Arc::new(Server::start(|_| {}).await);
    let c = Client::new();
    let ids = ["d0", "d1", "d2", "d3"];
    for id in ids {
        post(
            &c,
            &server.url("/v1/door/objects"),
            KEEPER,
            Some(json!({ "id": id })),
        )
        .await;
    }
    let mut tasks = Vec::new();
    for client in 0..16 {
        let (server, c) = (server.clone(), c.clone());
        tasks.push(tokio::spawn(async move {
            let token = if client % 2 == 0 { USER } else { KEEPER };
            let mut statuses = Vec::new();
            for round in 0..40 {
                let id = ids[(client + round) % ids.len()];
                let action = ["close", "open", "lock", "unlock"][(client * 7 + round) % 4];
                // Started, then completed in a second request: the object is busy
                // in between, for the others to run into.
                let url = server.url(&format!("/v1/door/objects/{id}/actions/{action}"));
                let (status, started) = post(&c, &url, token, None).await;
                statuses.push((token, action, status));
                if status == StatusCode::CREATED {
                    let fence = started["fence"].as_u64().unwrap();
                    let url =
                        server.url(&format!("/v1/door/objects/{id}/in-flight/{fence}/complete"));
                    let (status, _) = post(&c, &url, token, None).await;
                    assert_eq!(status, StatusCode::OK);
                }
            }
            statuses
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let count = |s: StatusCode| all.iter().filter(|(_, _, x)| *x == s).count();
    assert!(count(StatusCode::CREATED) > 0, "nothing ran");
    assert!(
        count(StatusCode::CONFLICT) > 0,
        "no race was lost: the clients never met"
    );
    for (_, _, status) in &all {
        assert!(
            [
                StatusCode::CREATED,
                StatusCode::CONFLICT,
                StatusCode::FORBIDDEN,
                StatusCode::UNPROCESSABLE_ENTITY
            ]
            .contains(status),
            "{status}"
        );
    }
    let rt = server.service.runtime("door").unwrap();
    for id in ids {
        let history = rt.history(id).unwrap();
        fsm_runtime::check_history(rt.machine(), &history).unwrap_or_else(|e| panic!("{id}: {e}"));
        // Out of CLOSED (owned by the keeper) only kim moved it.
        let closed = rt.machine().state_id("CLOSED").unwrap();
        for e in history
            .iter()
            .filter(|e| e.from == closed && e.to != closed)
        {
            assert_eq!(&*e.actor, "kim", "{id}: {e:?}");
        }
    }
    Arc::into_inner(server)
        .expect("the tasks are done")
        .stop()
        .await;
}

/// Patches without If-Match racing on one object: each is merged into the data
/// of the version it starts at, so none is lost. A patch that meets another's
/// hold is refused (409, busy) and sent again; one whose data was overtaken is
/// retried by the service (counted in `fsm_conflicts_total`). Either proves the
/// patches met.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_patches_lose_no_change() {
    const ROUNDS: usize = 20;
    let server = Arc::new(Server::start(|_| {}).await);
    let c = Client::new();
    let (status, _) = post(
        &c,
        &server.url("/v1/door/objects"),
        USER,
        Some(json!({ "id": "painted", "data": { "coats": {} } })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let url = server.url("/v1/door/objects/painted/data?action=paint");
    let mut tasks = Vec::new();
    for client in 0..16 {
        let (c, url) = (c.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            let mut busy = 0;
            for round in 0..ROUNDS {
                let body = json!({ "coats": { format!("c{client}-{round}"): round } });
                loop {
                    let r = c
                        .patch(&url)
                        .bearer_auth(USER)
                        .json(&body)
                        .send()
                        .await
                        .unwrap();
                    match r.status() {
                        StatusCode::OK => break,
                        StatusCode::CONFLICT => busy += 1,
                        other => panic!("{other}: {}", r.text().await.unwrap()),
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            busy
        }));
    }
    let mut refused = 0;
    for t in tasks {
        refused += t.await.unwrap();
    }
    let metrics = server.metrics(&c).await;
    let retried: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("fsm_conflicts_total{machine=\"door\"} "))
        .expect("the conflicts counter")
        .parse()
        .unwrap();
    assert!(refused + retried > 0, "the patches never met");
    let (status, door) = get(&c, &server.url("/v1/door/objects/painted"), USER).await;
    assert_eq!(status, StatusCode::OK);
    let coats: serde_json::Map<String, Value> = (0..16)
        .flat_map(|i| (0..ROUNDS).map(move |r| (format!("c{i}-{r}"), json!(r))))
        .collect();
    assert_eq!(
        door["data"]["coats"],
        Value::Object(coats),
        "a change was lost"
    );
    // One start and one completion per patch.
    assert_eq!(door["version"], 1 + 2 * 16 * ROUNDS);
    Arc::into_inner(server)
        .expect("the tasks are done")
        .stop()
        .await;
}

/// Requests under way when the shutdown comes are finished; every accepted write is
/// in the store afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_shutdown_loses_nothing_accepted() {
    let server = Server::start(|_| {}).await;
    let c = Client::new();
    // A request waiting its turn for a held object, which the stop must not
    // wait for (up to its 30 s): it is answered as the object is, busy.
    create_vm(&server, &c, "vm-held").await;
    let (status, held) = post(
        &c,
        &server.url("/v1/vm/objects/vm-held/actions/deploy"),
        OPS,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{held}");
    let (waiter, url) = (
        c.clone(),
        server.url("/v1/vm/objects/vm-held/actions/destroy?wait=30"),
    );
    let waiting = tokio::spawn(async move { post(&waiter, &url, OPS, None).await });
    server.until_waiting(&c, 1).await;
    let mut tasks = Vec::new();
    for i in 0..64 {
        let (c, url) = (c.clone(), server.url("/v1/vm/objects"));
        tasks.push(tokio::spawn(async move {
            let id = format!("vm-{i}");
            let created = c
                .post(&url)
                .bearer_auth(OPS)
                .json(&json!({ "id": id }))
                .send()
                .await
                .map(|r| r.status());
            (id, created)
        }));
    }
    // Shut down while they are under way: once some are in.
    let service = server.service.clone();
    let rt = service.runtime("vm").unwrap().clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while fsm_runtime::Store::ids(rt.store()).unwrap().len() < 8 {
        assert!(
            std::time::Instant::now() < deadline,
            "the requests never arrived"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::timeout(Duration::from_secs(20), server.stop())
        .await
        .expect("the stop waited for the request waiting its turn");
    let (status, body) = waiting.await.unwrap();
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("busy")),
        "{body}"
    );
    let mut accepted = 0;
    for t in tasks {
        let (id, created) = t.await.unwrap();
        if let Ok(StatusCode::CREATED) = created {
            accepted += 1;
            assert_eq!(
                rt.state_name(id.as_str()).unwrap(),
                "VIRTUAL",
                "{id} accepted but lost"
            );
        }
    }
    assert!(accepted > 0);
    assert_eq!(rt.state_name("vm-held").unwrap(), "DEPLOYING");
}

/// The web page in a real browser (headless Chromium, `scripts/browser/page-check.mjs`):
/// objects created and moved over the API change the counts on the page; the
/// object held by an action is listed, and its history shows on a click; its
/// watch cut off, the page says it is reconnecting, and once back shows the
/// object created meanwhile; writes faster than its summary is read (the
/// summary held 300 ms), it reads one summary at a time and ends on the last
/// write; a page whose watch opens after a write its first summary missed
/// shows it (it watches from the summary's `last_event_id`); a request
/// waiting for a held object shows beside it, though no write tells the page
/// (it reads the summary again while an action holds an object), on a page
/// that saw the hold begin, on one opened while it held, and on one whose
/// watch was cut off while it held (it reads again once back); its token
/// refused (401) on a reconnection, the page says so and stops trying. It
/// follows every machine by one stream: with nine machines here (OpenvCloud's
/// six besides), a stream per machine would hold every connection Chromium
/// gives the host, and no summary would be read again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_follows_the_objects_in_a_browser() {
    let server = Server::start(|c| {
        for kind in ["account", "cloudspace", "disk", "image", "node"] {
            c.specs.push(spec(&format!("../specs/ovc/{kind}.toml")));
        }
    })
    .await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/browser/page-check.mjs");
    let out = tokio::process::Command::new("node")
        .arg(&script)
        .args([&server.base, USER])
        .output()
        .await;
    let out = match out {
        Ok(out) if out.status.code() != Some(2) => out,
        other => {
            let why = match other {
                Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_owned(),
                Err(e) => format!("`node` cannot run ({e})"),
            };
            common::missing(
                "FSM_SKIP_TOOLS",
                &format!("the browser check cannot run: {why}"),
                "scripts/setup installs Chromium, Node.js and playwright-core",
            );
            return;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(
        result["seen"],
        json!([
            "OPEN=0",
            "OPEN=3",
            "diagram OPEN=3",
            "OPEN=2",
            "CLOSING=1",
            "held=d0",
            "history",
            "CLOSING=0",
            "CLOSED=1",
            "reconnecting",
            "OPEN=3",
            "connected",
            "OPEN=11",
            "one summary at a time",
            "OPEN=12 on a page opened as d12 was created",
            "waiting=1",
            "waited its turn",
            "waiting=1 after a reconnection",
            "refused",
            "stopped",
            "summaries",
            "one stream"
        ])
    );
    server.stop().await;
}

/// `/openapi.json` is a valid OpenAPI 3 document, as openapi-spec-validator (from
/// PyPI, installed by `scripts/setup`) reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_validates() {
    let server = Server::start(|_| {}).await;
    let document = Client::new()
        .get(server.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    server.stop().await;
    let file = std::env::temp_dir().join(format!("fsm-openapi-{}.json", std::process::id()));
    std::fs::write(&file, &document).unwrap();
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/python/.venv/bin/python");
    let out = std::process::Command::new(&python)
        .args(["-c", "import sys, json\nfrom openapi_spec_validator import validate\nvalidate(json.load(open(sys.argv[1])))\nprint('valid')"])
        .arg(&file)
        .output();
    let out = match out {
        Ok(out) if !String::from_utf8_lossy(&out.stderr).contains("ModuleNotFoundError") => out,
        other => {
            let why = match other {
                Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_owned(),
                Err(e) => format!("{} cannot run ({e})", python.display()),
            };
            common::missing(
                "FSM_SKIP_TOOLS",
                &format!("openapi-spec-validator cannot run: {why}"),
                "scripts/setup installs it",
            );
            return;
        }
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "valid");
}

/// The service does what `/openapi.json` says, as schemathesis (from PyPI,
/// installed by `scripts/setup`) finds it: requests generated from the document,
/// valid and invalid, then chains of them along its links (create, start,
/// complete or fail; some chain must end an action), each answer checked against the document (a status it
/// lists, a body and headers its schemas admit, never a 5xx), a valid request
/// refused only by the table (`tests/schemathesis.toml`: 403, 404, 409, 412,
/// 422) and an invalid one always refused. The watch streams, which never end,
/// are tried apart, each event checked for a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_does_what_its_openapi_document_says() {
    // A start that waits for a busy object (`?wait`, up to the maximum the
    // document gives) answers well within schemathesis' request timeout.
    let server = Server::start(|config| config.max_wait = Duration::from_secs(1)).await;
    let schemathesis =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/python/.venv/bin/schemathesis");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schemathesis.toml");
    let scratch = tempfile::tempdir().unwrap();
    let document = server.url("/openapi.json");
    let auth = format!("Authorization: Bearer {ALL}");
    // Every operation but the watch streams, then chains along the document's
    // links (a report of their requests kept), then the watch streams, briefly.
    let chains = scratch.path().join("chains");
    for (paths, phases, examples, timeout) in [
        (
            "--exclude-path-regex",
            "examples,coverage,fuzzing",
            "30",
            "10",
        ),
        ("--exclude-path-regex", "stateful", "100", "10"),
        // (No links lead to a watch: nothing to chain.)
        (
            "--include-path-regex",
            "examples,coverage,fuzzing",
            "3",
            "1",
        ),
    ] {
        let report = match phases {
            "stateful" => vec![
                "--report".into(),
                "har".into(),
                "--report-dir".into(),
                chains.clone().into_os_string(),
            ],
            _ => Vec::new(),
        };
        let run = tokio::process::Command::new(&schemathesis)
            .arg("--config-file")
            .arg(&config)
            .args([
                "--no-color",
                "run",
                &document,
                "-H",
                &auth,
                "--checks",
                "all",
            ])
            .args([
                "--seed",
                "1",
                "--generation-database",
                "none",
                "--max-examples",
                examples,
            ])
            .args([
                "--phases",
                phases,
                "--request-timeout",
                timeout,
                paths,
                "/watch$",
            ])
            .args(report)
            .current_dir(scratch.path())
            .output()
            .await;
        let run = match run {
            Ok(run) => run,
            Err(e) => {
                common::missing(
                    "FSM_SKIP_TOOLS",
                    &format!("schemathesis cannot run ({}: {e})", schemathesis.display()),
                    "scripts/setup installs it",
                );
                server.stop().await;
                return;
            }
        };
        let out = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success(),
            "schemathesis ({paths} /watch$) found the service and its document apart:\n{out}\n{}",
            String::from_utf8_lossy(&run.stderr)
        );
        // It did test: cases passed, and every operation selected was tested
        // (by the chains, those a link leads to).
        let count = |label: &str| {
            out.lines()
                .find_map(|l| l.trim_start().strip_prefix(label))
                .and_then(|n| n.trim().split('/').next()?.parse::<u32>().ok())
        };
        let (selected, tested) = (count("Selected:"), count("Tested:"));
        assert!(out.contains(" passed"), "{out}");
        assert!(selected.is_some_and(|n| n > 0), "{out}");
        match phases {
            "stateful" => assert!(tested.is_some_and(|n| n > 0), "{out}"),
            _ => assert_eq!(tested, selected, "{out}"),
        }
    }
    // The links are usable: some chain got as far as an action's end (a
    // completion or a failure by the fence token its start answered).
    let ended = std::fs::read_dir(&chains)
        .unwrap()
        .map(|file| {
            let har: Value =
                serde_json::from_slice(&std::fs::read(file.unwrap().path()).unwrap()).unwrap();
            let entries = har["log"]["entries"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            entries
                .iter()
                .filter(|e| {
                    e["request"]["method"] == "POST"
                        && e["request"]["url"]
                            .as_str()
                            .is_some_and(|u| u.contains("/in-flight/"))
                        && e["response"]["status"] == 200
                })
                .count()
        })
        .sum::<usize>();
    assert!(ended > 0, "no chain along the links ended an action");
    server.stop().await;
}

/// An action held past its deadline shows: the object's holder says `overdue`, and
/// the metrics count it as stuck, until the healer's next pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_past_its_deadline_shows_as_stuck() {
    let server = Server::start(|c| c.heal_every = Duration::from_secs(3600)).await;
    let c = Client::new();
    let started = closing_door(&server, &c).await;
    assert_eq!(started["in_flight"]["overdue"], false);
    assert_eq!(started["in_flight"]["deadline_seconds"], 1.0);
    let stuck = |metrics: &str| metrics.contains("fsm_objects_stuck{machine=\"door\"} 1\n");
    let metrics = server.metrics(&c).await;
    assert!(!stuck(&metrics), "{metrics}");
    let (_, summary) = get(&c, &server.url("/v1/door/summary"), USER).await;
    assert_eq!(summary["stuck"], 0, "{summary}");
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let (_, door) = get(&c, &server.url("/v1/door/objects/d"), USER).await;
    assert_eq!(door["in_flight"]["overdue"], true, "{door}");
    let metrics = server.metrics(&c).await;
    assert!(stuck(&metrics), "{metrics}");
    let (_, summary) = get(&c, &server.url("/v1/door/summary"), USER).await;
    assert_eq!(summary["stuck"], 1, "{summary}");
    assert_eq!(
        summary["in_flight"][0]["in_flight"]["overdue"], true,
        "{summary}"
    );
    server.stop().await;
}

/// The summary counts every state of the spec (zeros included), lists only the
/// objects an action holds (a hidden action's too), and agrees with the list;
/// it takes no query parameter, and needs a token and a known machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_counts_every_state_and_lists_only_what_is_held() {
    let server = Server::start(|_| {}).await;
    let c = Client::new();
    for id in ["vm-1", "vm-2", "vm-3"] {
        let body = Some(json!({ "id": id }));
        let (status, _) = post(&c, &server.url("/v1/vm/objects"), OPS, body).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let action = |id: &str, action: &str, run: bool| {
        let run = if run { "?run=true" } else { "" };
        server.url(&format!("/v1/vm/objects/{id}/actions/{action}{run}"))
    };
    let (status, _) = post(&c, &action("vm-2", "deploy", true), OPS, None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = post(&c, &action("vm-2", "migrate", false), OPS, None).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = post(&c, &action("vm-3", "deploy", false), OPS, None).await;
    assert_eq!(status, StatusCode::CREATED);

    let (status, summary) = get(&c, &server.url("/v1/vm/summary"), USER).await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    assert_eq!(summary["machine"], "vm");
    assert_eq!(summary["total"], 3);
    assert_eq!(
        (summary["stuck"].as_u64(), summary["unreadable"].as_u64()),
        (Some(0), Some(0))
    );
    let states = summary["states"].as_object().unwrap();
    let machine = server.service.runtime("vm").unwrap().machine().clone();
    assert_eq!(
        states.len(),
        machine.states().len(),
        "every state: {summary}"
    );
    let nonzero: Vec<(&str, u64)> = states
        .iter()
        .map(|(state, n)| (state.as_str(), n.as_u64().unwrap()))
        .filter(|(_, n)| *n > 0)
        .collect();
    assert_eq!(nonzero, [("DEPLOYING", 1), ("RUNNING", 1), ("VIRTUAL", 1)]);
    let held: Vec<(&str, &str, &str)> = summary["in_flight"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let (visible, hidden) = (&o["in_flight"]["action"], &o["hidden"]["action"]);
            let action = visible.as_str().or(hidden.as_str()).unwrap();
            (
                o["id"].as_str().unwrap(),
                o["state"].as_str().unwrap(),
                action,
            )
        })
        .collect();
    assert_eq!(
        held,
        [
            ("vm-2", "RUNNING", "migrate"),
            ("vm-3", "DEPLOYING", "deploy")
        ]
    );
    // The list says the same, but for how many requests wait for each
    // (none here).
    let (_, list) = get(&c, &server.url("/v1/vm/objects"), USER).await;
    let listed: Vec<&Value> = list["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| !o["in_flight"].is_null() || !o["hidden"].is_null())
        .collect();
    let summarized: Vec<Value> = (summary["in_flight"].as_array().unwrap().iter())
        .map(|o| {
            let mut o = o.clone();
            assert_eq!(o.as_object_mut().unwrap().remove("waiting"), Some(json!(0)));
            o
        })
        .collect();
    assert_eq!(listed, summarized.iter().collect::<Vec<_>>());
    assert_eq!(summary["waiting"], 0);

    for (url, token, status) in [
        (
            "/v1/vm/summary?state=RUNNING",
            Some(USER),
            StatusCode::BAD_REQUEST,
        ),
        ("/v1/vm/summary", None, StatusCode::UNAUTHORIZED),
        ("/v1/nope/summary", Some(USER), StatusCode::NOT_FOUND),
    ] {
        let (got, body) = call(&c, reqwest::Method::GET, &server.url(url), token, None).await;
        assert_eq!(got, status, "{url}: {body}");
        assert!(body["error"].is_string(), "{url}: {body}");
    }
    let metrics = server.metrics(&c).await;
    for line in [
        "fsm_store_up{machine=\"vm\"} 1\n",
        "fsm_objects_unreadable{machine=\"vm\"} 0\n",
        "fsm_objects{machine=\"vm\",state=\"DEPLOYING\"} 1\n",
    ] {
        assert!(metrics.contains(line), "{line}{metrics}");
    }
    server.stop().await;
}

/// CORS only when configured, and then only for the origins given.
/// The ids and `next` of `GET path`.
async fn page(server: &Server, c: &Client, path: &str) -> (Vec<String>, Option<String>) {
    let (status, body) = get(c, &server.url(path), USER).await;
    assert_eq!(status, StatusCode::OK, "{path}: {body}");
    let ids = body["objects"].as_array().unwrap().iter();
    let ids = ids.map(|o| o["id"].as_str().unwrap().to_owned()).collect();
    (ids, body["next"].as_str().map(str::to_owned))
}

/// Pages of `limit` (in `state`) from the first, each from the last's `next`,
/// until one has none; `between` runs after the first page.
async fn pages(
    server: &Server,
    c: &Client,
    query: &str,
    mut between: impl AsyncFnMut(),
) -> Vec<Vec<String>> {
    let (mut pages, mut after) = (Vec::new(), String::new());
    loop {
        let (ids, next) = page(server, c, &format!("/v1/vm/objects?{query}{after}")).await;
        assert!(pages.len() < 30, "{query}: the pages do not end");
        if let Some(next) = &next {
            assert_eq!(ids.last(), Some(next), "{query}: next is the last id");
        }
        pages.push(ids);
        if pages.len() == 1 {
            between().await;
        }
        match next {
            Some(next) => after = format!("&after={next}"),
            None => return pages,
        }
    }
}

/// A list with `limit` comes a page at a time, each page's `next` the next's
/// `after`, until a page has no `next`: every object (in the state) once, even
/// with objects created between the pages; `next` only when objects remain
/// past the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_comes_a_page_at_a_time() {
    let server = Server::start(|_| {}).await;
    let c = Client::new();
    let ids: Vec<String> = (0..25).map(|n| format!("vm-{n:02}")).collect();
    for (n, id) in ids.iter().enumerate() {
        create_vm(&server, &c, id).await;
        if n % 3 == 0 {
            let deploy = server.url(&format!("/v1/vm/objects/{id}/actions/deploy?run=true"));
            assert_eq!(post(&c, &deploy, OPS, None).await.0, StatusCode::OK);
        }
    }
    let running: Vec<String> = ids.iter().step_by(3).cloned().collect();
    let lengths = |pages: &[Vec<String>]| pages.iter().map(Vec::len).collect::<Vec<_>>();

    // Pages of 10, with one object created before the cursor and one past it
    // between the first page and the second: the one past it is met.
    let create = async || {
        for id in ["vm-000", "vm-99"] {
            create_vm(&server, &c, id).await;
        }
    };
    let listed = pages(&server, &c, "limit=10", create).await;
    assert_eq!(lengths(&listed), [10, 10, 6]);
    let mut expected = ids.clone();
    expected.push("vm-99".into());
    assert_eq!(listed.concat(), expected);

    // In a state: pages of 4 of the 9 running, and the last page says no more
    // past it only once the store has nothing past it.
    let listed = pages(&server, &c, "state=RUNNING&limit=4", async || {}).await;
    assert_eq!(listed.concat(), running);
    assert_eq!(lengths(&listed), [4, 4, 1]);
    let (all, next) = page(&server, &c, "/v1/vm/objects?state=RUNNING&limit=9").await;
    assert_eq!((all, next.as_deref()), (running.clone(), Some("vm-24")));
    let (rest, next) = page(
        &server,
        &c,
        "/v1/vm/objects?state=RUNNING&limit=9&after=vm-24",
    )
    .await;
    assert_eq!((rest.len(), next), (0, None), "nothing runs past vm-24");

    // `next` only when objects remain: 27 objects fill a page of 27 with none
    // past it, not one of 26.
    assert_eq!(page(&server, &c, "/v1/vm/objects?limit=27").await.1, None);
    let (first, next) = page(&server, &c, "/v1/vm/objects?limit=26").await;
    assert_eq!((first.len(), next.as_deref()), (26, Some("vm-24")));
    // `after` alone: every object past it; an id that does not exist is a
    // place all the same.
    let (past, next) = page(&server, &c, "/v1/vm/objects?after=vm-22").await;
    assert_eq!(
        (past, next),
        (vec!["vm-23".into(), "vm-24".into(), "vm-99".into()], None)
    );
    let (past, _) = page(&server, &c, "/v1/vm/objects?after=vm-24x&limit=5").await;
    assert_eq!(past, ["vm-99"]);

    // A limit that is not a positive number is refused, by name.
    for bad in ["limit=0", "limit=-1", "limit=ten"] {
        let (status, body) = get(&c, &server.url(&format!("/v1/vm/objects?{bad}")), USER).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(body["error"], "malformed", "{bad}: {body}");
        assert!(
            body["message"].as_str().unwrap().contains("limit"),
            "{bad}: {body}"
        );
    }
}

/// A history read a page at a time: each `next` the next page's `after`,
/// every entry once, in order; `next` only when entries remain past the page;
/// a bad `after` refused by name; an unknown object 404 as without paging.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_comes_a_page_at_a_time() {
    let server = Server::start(|_| {}).await;
    let c = Client::new();
    create_vm(&server, &c, "vm-1").await;
    for action in ["deploy", "reboot", "reset"] {
        let url = server.url(&format!("/v1/vm/objects/vm-1/actions/{action}?run=true"));
        assert_eq!(
            post(&c, &url, OPS, None).await.0,
            StatusCode::OK,
            "{action}"
        );
    }
    let versions = |body: &Value| -> Vec<u64> {
        let entries = body["entries"].as_array().unwrap().iter();
        entries.map(|e| e["version"].as_u64().unwrap()).collect()
    };
    let (_, whole) = get(&c, &server.url("/v1/vm/objects/vm-1/history"), USER).await;
    assert_eq!(versions(&whole), (1..=7).collect::<Vec<_>>());
    assert!(whole.get("next").is_none(), "{whole}");
    for limit in 1..=8 {
        let (mut paged, mut after, mut pages) = (Vec::<u64>::new(), String::new(), 0);
        loop {
            let url = format!("/v1/vm/objects/vm-1/history?limit={limit}{after}");
            let (status, page) = get(&c, &server.url(&url), USER).await;
            assert_eq!(status, StatusCode::OK, "{url}: {page}");
            let got = versions(&page);
            pages += 1;
            assert!(pages <= 8 && got.len() <= limit, "{url}: {page}");
            paged.extend(&got);
            match page["next"].as_u64() {
                Some(next) => {
                    assert_eq!(got.last(), Some(&next), "{url}: next is the last version");
                    after = format!("&after={next}");
                }
                None => break,
            }
        }
        assert_eq!(paged, (1..=7).collect::<Vec<_>>(), "pages of {limit}");
        // `next` only when entries remain: 7 entries take 7 / limit pages,
        // and one more only when none is left over.
        assert_eq!(pages, 7usize.div_ceil(limit), "pages of {limit}");
    }
    let (_, past) = get(&c, &server.url("/v1/vm/objects/vm-1/history?after=5"), USER).await;
    assert_eq!(versions(&past), [6, 7]);
    let (status, body) = get(&c, &server.url("/v1/vm/objects/vm-1/history?after=x"), USER).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("malformed"))
    );
    assert!(
        body["message"].as_str().unwrap().contains("after"),
        "{body}"
    );
    let (status, _) = get(&c, &server.url("/v1/vm/objects/vm-9/history?limit=2"), USER).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    server.stop().await;
}

/// A read with `If-None-Match` naming the object's version (weakly, in a list,
/// or `*`) is 304 with the ETag and no body; one naming another version is
/// the object; a header that is not entity tags is refused by name; an
/// object that does not exist is 404 whatever the header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_of_an_unchanged_object_is_304() {
    let server = Server::start(|_| {}).await;
    let c = Client::new();
    create_vm(&server, &c, "vm-1").await;
    let read = async |id: &str, tags: &str| {
        let r = c
            .get(server.url(&format!("/v1/vm/objects/{id}")))
            .bearer_auth(USER)
            .header("If-None-Match", tags)
            .send()
            .await
            .unwrap();
        let etag = r
            .headers()
            .get("etag")
            .map(|t| t.to_str().unwrap().to_owned());
        (r.status(), etag, r.text().await.unwrap())
    };
    for tags in [r#""1""#, r#"W/"1""#, r#""7", W/"1""#, "*"] {
        let (status, etag, body) = read("vm-1", tags).await;
        assert_eq!(
            (status, etag.as_deref(), body.as_str()),
            (StatusCode::NOT_MODIFIED, Some(r#""1""#), ""),
            "{tags}"
        );
    }
    // Another version, or none (an empty list): the object.
    for tags in [r#""0""#, ""] {
        let (status, etag, body) = read("vm-1", tags).await;
        assert_eq!((status, etag.as_deref()), (StatusCode::OK, Some(r#""1""#)));
        assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["version"], 1);
    }
    // Changed since: the client's tag is stale, the object comes whole.
    let deploy = server.url("/v1/vm/objects/vm-1/actions/deploy?run=true");
    assert_eq!(post(&c, &deploy, OPS, None).await.0, StatusCode::OK);
    let (status, etag, _) = read("vm-1", r#""1""#).await;
    assert_eq!((status, etag.as_deref()), (StatusCode::OK, Some(r#""3""#)));
    for bad in ["1", r#""1" "2""#, r#""1"#, ","] {
        let (status, _, body) = read("vm-1", bad).await;
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            (
                status,
                body["error"].as_str(),
                body["parameter"].as_str(),
                body["if_none_match"].as_str()
            ),
            (
                StatusCode::BAD_REQUEST,
                Some("malformed"),
                Some("If-None-Match"),
                Some(bad)
            ),
            "{bad}: {body}"
        );
    }
    assert_eq!(read("vm-2", "*").await.0, StatusCode::NOT_FOUND);
    server.stop().await;
}

/// `DELETE` removes an object only where its spec says `remove`, by a role it
/// names, with no action holding it and at the version `If-Match` names; the
/// answer is the removal's entry, which a watcher gets as the object's last
/// write; the object is then gone from every read, and its id free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_is_removed_only_as_its_spec_allows() {
    let server = Server::start(|_| {}).await;
    let c = Client::new();
    let object = server.url("/v1/machine/objects/m-1");
    let delete = async |token: &str, if_match: Option<&str>| {
        let mut request = c.delete(&object).bearer_auth(token);
        if let Some(tag) = if_match {
            request = request.header("If-Match", tag);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        (status, response.json::<Value>().await.unwrap())
    };
    let body = Some(json!({ "id": "m-1", "data": { "disk_keys": [] } }));
    let (status, _) = post(&c, &server.url("/v1/machine/objects"), OPS, body).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, refused) = delete(OPS, None).await;
    assert_eq!(
        (
            status,
            &refused["error"],
            &refused["state"],
            &refused["removable_in"]
        ),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            &json!("not_removable"),
            &json!("Uninitialized"),
            &json!(["Retired"])
        ),
        "{refused}"
    );
    for action in ["retire", "complete_retirement"] {
        let url = server.url(&format!(
            "/v1/machine/objects/m-1/actions/{action}?run=true"
        ));
        let (status, moved) = post(&c, &url, OPS, None).await;
        assert_eq!(status, StatusCode::OK, "{moved}");
    }
    let events_response = c
        .get(server.url("/v1/machine/watch"))
        .bearer_auth(USER)
        .send()
        .await
        .unwrap();
    // Not by a role the state does not name; not at another version.
    let (status, refused) = delete(USER, None).await;
    assert_eq!(
        (status, &refused["error"], &refused["roles_required"]),
        (
            StatusCode::FORBIDDEN,
            &json!("missing_role"),
            &json!(["admin"])
        ),
        "{refused}"
    );
    let (status, refused) = delete(OPS, Some(r#""4""#)).await;
    assert_eq!(
        (status, &refused["found_version"]),
        (StatusCode::PRECONDITION_FAILED, &json!(5)),
        "{refused}"
    );
    // Not while an action holds it.
    let url = server.url("/v1/machine/objects/m-1/actions/power_off");
    let (status, held) = post(&c, &url, OPS, None).await;
    assert_eq!(status, StatusCode::CREATED, "{held}");
    let (status, refused) = delete(OPS, None).await;
    assert_eq!(
        (status, &refused["error"], &refused["action"]),
        (StatusCode::CONFLICT, &json!("busy"), &json!("power_off")),
        "{refused}"
    );
    let done = server.url(&format!(
        "/v1/machine/objects/m-1/in-flight/{}/complete",
        held["fence"]
    ));
    assert_eq!(post(&c, &done, OPS, None).await.0, StatusCode::OK);

    let (status, removed) = delete(OPS, Some(r#""7""#)).await;
    assert_eq!(status, StatusCode::OK, "{removed}");
    // The entry as a history shows it: without the object's id.
    let mut removed_entry = removed.clone();
    removed_entry.as_object_mut().unwrap().remove("id");
    assert_eq!(
        (
            &removed["id"],
            &removed["kind"],
            &removed["version"],
            &removed["from"],
            &removed["actor"]
        ),
        (
            &json!("m-1"),
            &json!("Removed"),
            &json!(8),
            &json!("Retired"),
            &json!("ops")
        ),
        "{removed}"
    );
    // The watcher's last write is the removal: after the action's start
    // and completion, the three writes since it subscribed.
    let written = events(events_response, 3).await;
    let kinds: Vec<(&Value, &Value)> = written
        .iter()
        .map(|(_, e)| (&e["kind"], &e["version"]))
        .collect();
    assert_eq!(
        kinds,
        [
            (&json!("Started"), &json!(6)),
            (&json!("Completed"), &json!(7)),
            (&json!("Removed"), &json!(8))
        ]
    );
    // Gone from every read; the id is free again. The object's 404 says
    // how it went (an id never used says nothing of the kind).
    let (status, gone) = get(&c, &object, OPS).await;
    assert_eq!(
        (status, &gone["error"], &gone["removed"]),
        (StatusCode::NOT_FOUND, &json!("not_found"), &removed_entry),
        "{gone}"
    );
    let (status, never) = get(&c, &server.url("/v1/machine/objects/m-0"), OPS).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(never.get("removed").is_none(), "{never}");
    // Every call on the object says so too: its history, an action, a data
    // change, another removal, the end of an action started before.
    let (status, refused) = delete(OPS, None).await;
    let mut answers = vec![("DELETE".to_owned(), status, refused)];
    for (method, path) in [
        (reqwest::Method::GET, "history".to_owned()),
        (reqwest::Method::POST, "actions/power_off".to_owned()),
        (reqwest::Method::PATCH, "data?action=retire".to_owned()),
        (
            reqwest::Method::POST,
            format!("in-flight/{}/complete", held["fence"]),
        ),
    ] {
        let url = server.url(&format!("/v1/machine/objects/m-1/{path}"));
        let body = (method == reqwest::Method::PATCH).then(|| json!({}));
        let (status, answer) = call(&c, method.clone(), &url, Some(OPS), body).await;
        answers.push((format!("{method} {path}"), status, answer));
    }
    for (call, status, answer) in answers {
        assert_eq!(
            (status, &answer["error"], &answer["removed"]),
            (StatusCode::NOT_FOUND, &json!("not_found"), &removed_entry),
            "{call}: {answer}"
        );
    }
    let (_, metrics) = call(
        &c,
        reqwest::Method::GET,
        &server.url("/metrics"),
        None,
        None,
    )
    .await;
    let metrics = metrics.as_str().unwrap_or_default().to_owned();
    assert!(
        metrics.contains("fsm_objects_removed_total{machine=\"machine\"} 1"),
        "{metrics}"
    );
    // Created again, a new object numbered after the removal: the If-Match
    // that removed the old one does not match it.
    let body = Some(json!({ "id": "m-1" }));
    let (status, created) = post(&c, &server.url("/v1/machine/objects"), OPS, body).await;
    assert_eq!(
        (status, &created["version"]),
        (StatusCode::CREATED, &json!(9))
    );
    let (status, refused) = delete(OPS, Some(r#""7""#)).await;
    assert_eq!(
        (status, &refused["found_version"]),
        (StatusCode::PRECONDITION_FAILED, &json!(9)),
        "{refused}"
    );
    server.stop().await;
}

/// With `forget_removals_after`, the healer's passes forget a removal once
/// it is that old (see `Server::forgets_a_removal`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removals_are_forgotten_after_the_time_given() {
    let server = Server::start(|config| {
        config.forget_removals_after = Some(Duration::ZERO);
        config.heal_every = Duration::from_millis(20);
    })
    .await;
    server.forgets_a_removal(&Client::new(), OPS).await;
    server.stop().await;
}

/// Requests that wait take turns (see `Server::requests_take_turns`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_wait_take_turns() {
    let server = Server::start(|_| {}).await;
    server
        .requests_take_turns(&server, &Client::new(), OPS)
        .await;
    server.stop().await;
}

/// Past `max_waiting` requests waiting at once, one more asking to wait is
/// refused 503 `too_many_waiting`, while one that does not wait is answered
/// as ever (409 `busy`); once a waiter is gone, its place is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_waiting_are_bounded() {
    let server = Server::start(|config| config.max_waiting = 1).await;
    let c = Client::new();
    create_vm(&server, &c, "vm-1").await;
    let deploy = server.url("/v1/vm/objects/vm-1/actions/deploy");
    let (status, held) = post(&c, &deploy, OPS, None).await;
    assert_eq!(status, StatusCode::CREATED, "{held}");
    let destroy = |query: &str| server.url(&format!("/v1/vm/objects/vm-1/actions/destroy{query}"));
    let (waiter, url) = (c.clone(), destroy("?wait=1"));
    let waiting = tokio::spawn(async move { post(&waiter, &url, OPS, None).await });
    server.until_waiting(&c, 1).await;
    let response = c
        .post(destroy("?wait=5"))
        .bearer_auth(OPS)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["retry-after"], "1");
    let (status, body) = (response.status(), response.json::<Value>().await.unwrap());
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("too_many_waiting")),
        "{body}"
    );
    assert_eq!(
        body["message"],
        "this service lets no more requests wait for busy objects (at most 1 at once)"
    );
    let (status, body) = post(&c, &destroy(""), OPS, None).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("busy")),
        "{body}"
    );
    let (status, body) = waiting.await.unwrap();
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("busy"))
    );
    // Its place is free: the next one waits (and is answered busy too).
    let (status, body) = post(&c, &destroy("?wait=1"), OPS, None).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("busy")),
        "{body}"
    );
    server.stop().await;
}

/// A request waiting its turn whose client goes away leaves the line: its
/// place is not held for the rest of its wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_client_went_away_leaves_the_line() {
    let server = Server::start(|_| {}).await;
    let c = Client::new();
    create_vm(&server, &c, "vm-1").await;
    let deploy = server.url("/v1/vm/objects/vm-1/actions/deploy");
    let (status, held) = post(&c, &deploy, OPS, None).await;
    assert_eq!(status, StatusCode::CREATED, "{held}");
    // A client of its own, so that its connection goes with it.
    let (waiter, url) = (
        Client::new(),
        server.url("/v1/vm/objects/vm-1/actions/destroy?wait=30"),
    );
    let waiting = tokio::spawn(async move { post(&waiter, &url, OPS, None).await });
    server.until_waiting(&c, 1).await;
    waiting.abort();
    let _ = waiting.await;
    server.until_waiting(&c, 0).await;
    server.stop().await;
}

/// HTTP/2 without TLS, for a client that speaks it from the start (prior
/// knowledge, as gRPC clients and `curl --http2-prior-knowledge` do): a call
/// and a watch stream share one connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_is_spoken_to_a_client_that_knows_it() {
    let server = Server::start(|_| {}).await;
    let c = Client::builder().http2_prior_knowledge().build().unwrap();
    let stream = c
        .get(server.url("/v1/vm/watch"))
        .bearer_auth(USER)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.version(), reqwest::Version::HTTP_2);
    let created = (c.post(server.url("/v1/vm/objects")))
        .bearer_auth(OPS)
        .json(&json!({ "id": "h2" }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        (created.version(), created.status()),
        (reqwest::Version::HTTP_2, StatusCode::CREATED)
    );
    let seen = events(stream, 1).await;
    assert_eq!(
        (&seen[0].1["id"], &seen[0].1["kind"]),
        (&json!("h2"), &json!("Created"))
    );
    server.stop().await;
}

/// The probes answer without a token (a token is not looked at): the process
/// serves, and its stores (here in memory) answer. `fsm-serve/tests/etcd.rs`
/// holds the readiness probe to a 503 once etcd is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probes_answer_without_a_token() {
    let server = Server::start(|_| {}).await;
    let c = Client::new();
    for (path, body) in [
        ("/healthz", json!({ "status": "ok" })),
        ("/readyz", json!({ "status": "ready" })),
    ] {
        for token in [None, Some("not-a-token")] {
            let answer = call(&c, reqwest::Method::GET, &server.url(path), token, None).await;
            assert_eq!(answer, (StatusCode::OK, body.clone()), "{path}");
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_answers_only_the_configured_origins() {
    let server = Server::start(|c| c.cors_origins = vec!["https://ops.example.com".into()]).await;
    let c = Client::new();
    let url = server.url("/v1/vm/objects");
    let allowed = |r: &reqwest::Response| {
        r.headers()
            .get("access-control-allow-origin")
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let r = c
        .get(&url)
        .bearer_auth(OPS)
        .header("origin", "https://ops.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(allowed(&r).as_deref(), Some("https://ops.example.com"));
    let r = c
        .get(&url)
        .bearer_auth(OPS)
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(allowed(&r), None);
    // A browser's preflight for a call with a token.
    let r = c
        .request(reqwest::Method::OPTIONS, &url)
        .header("origin", "https://ops.example.com")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type",
        )
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    assert_eq!(allowed(&r).as_deref(), Some("https://ops.example.com"));
    server.stop().await;
}

#[test]
fn a_service_listens_on_loopback_unless_told_otherwise() {
    let config = Config::new(vec![]);
    assert!(config.listen.ip().is_loopback(), "{}", config.listen);
    assert_eq!(config.body_limit, 64 * 1024);
    assert!(config.cors_origins.is_empty());
}

/// A controller in another language: `clients/python/deployer.py` (Python's
/// standard library only) deploys every VM created, completing each deploy by
/// the fence token its start answered: first those the list shows, then, from
/// the list's `last_event_id`, each the watch meets (one created while it
/// catches up among them). Stopped, then started again, it resumes
/// its watch after the last event id it kept: the service replays what was
/// created while it was away (no `gap`, no listing), and it deploys that too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_controller_deploys_what_is_created_and_resumes_after_a_stop() {
    let server = Server::start(|_| {}).await;
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/python/.venv/bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python/deployer.py");
    let scratch = tempfile::tempdir().unwrap();
    let last_event = scratch.path().join("last-event");
    let c = Client::new();
    let create = async |id: &str| {
        let (status, body) = post(
            &c,
            &server.url("/v1/vm/objects"),
            OPS,
            Some(json!({ "id": id })),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    };
    let state = async |id: &str| {
        let (_, body) = get(&c, &server.url(&format!("/v1/vm/objects/{id}")), OPS).await;
        body["state"].as_str().unwrap_or_default().to_owned()
    };
    // The controller acts as alice.
    let deployer = |exit_after: &str| {
        tokio::process::Command::new(&python)
            .arg(&script)
            // A page of one: catching up lists page by page.
            .args([
                "--url",
                &server.base,
                "--exit-after",
                exit_after,
                "--page",
                "1",
            ])
            .arg("--last-event")
            .arg(&last_event)
            .env("FSM_TOKEN", USER)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
    };
    let finished = async |child: tokio::process::Child| {
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("the deployer exits once it deployed what it was told")
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };

    // Two VMs waiting before the controller starts, one created once it runs.
    create("vm-0").await;
    create("vm-a").await;
    let first = match deployer("3") {
        Ok(child) => child,
        Err(e) => {
            common::missing(
                "FSM_SKIP_TOOLS",
                &format!("Python cannot run ({}: {e})", python.display()),
                "scripts/setup makes scripts/python/.venv",
            );
            server.stop().await;
            return;
        }
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while state("vm-a").await != "RUNNING" {
        assert!(
            std::time::Instant::now() < deadline,
            "vm-a was not deployed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    create("vm-b").await;
    let out = finished(first).await;
    assert!(out.contains("catching up: 2 in VIRTUAL"), "{out}");
    assert!(out.contains("vm-b: deploy done, now RUNNING"), "{out}");
    let kept = std::fs::read_to_string(&last_event).unwrap();
    assert!(kept.trim().parse::<u64>().is_ok(), "{kept}");

    // Created while no controller runs: replayed to the next one.
    create("vm-c").await;
    create("vm-d").await;
    let out = finished(deployer("2").unwrap()).await;
    let resumed = !out.contains("catching up");
    assert!(resumed, "resumed by listing, not by replay: {out}");
    for id in ["vm-0", "vm-a", "vm-b", "vm-c", "vm-d"] {
        assert_eq!(state(id).await, "RUNNING", "{id}: {out}");
        let history = server.url(&format!("/v1/vm/objects/{id}/history"));
        let (_, history) = get(&c, &history, OPS).await;
        let kinds: Vec<(&str, &str)> = history["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["kind"].as_str().unwrap(), e["actor"].as_str().unwrap()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("Created", "ops"),
                ("Started", "alice"),
                ("Completed", "alice")
            ],
            "{id}"
        );
    }
    server.stop().await;
}

/// The Python controller's own tests (`clients/python/test_deployer.py`,
/// against a scripted stand-in for the service): a start or a completion that
/// answers 503, as while the store is down, is made again until it is taken
/// (never sooner than its `Retry-After`), and raises after the last try; a
/// refusal (409) is not made again; a proxy's
/// 502 page is made again, then read as a refusal; work that fails fails the
/// action by its fence, never completing it.
#[test]
fn the_python_controller_makes_again_what_the_store_could_not_take() {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/python/.venv/bin/python");
    let out = std::process::Command::new(&python)
        .args(["-B", "-m", "unittest", "discover", "-v", "-s"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python"))
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            common::missing(
                "FSM_SKIP_TOOLS",
                &format!("Python cannot run ({}: {e})", python.display()),
                "scripts/setup makes scripts/python/.venv",
            );
            return;
        }
    };
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{report}");
    assert!(report.contains("Ran 7 tests"), "{report}");
    assert!(report.trim_end().ends_with("OK"), "{report}");
}
