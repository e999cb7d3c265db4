//! Two services on one etcd prefix, as two processes would run: each sees the
//! other's objects, holds and writes, over HTTP; sabakan's admin-only moves hold.
//! Needs the test command's etcd (`FSM_ETCD_ENDPOINTS`); without one the test fails,
//! unless `FSM_SKIP_ETCD=1`.

#[path = "../../fsm-core/tests/common/mod.rs"]
mod common;
mod server;
mod sse;

use std::path::Path;
use std::time::Duration;

use fsm_serve::{Config, EtcdAccess, Service, StoreKind, Tokens};
use reqwest::{Client, StatusCode};
use serde_json::{Value, json};
use server::Server;

const OPS: &str = "etcd-test-token-ops-0123";
const CONTROLLER: &str = "etcd-test-token-ctl-0123";

use common::etcd_endpoints as endpoints;

async fn open(prefix: &str) -> Option<Server> {
    open_with(prefix, |_| {}).await
}

/// [`open`], configured by `configure`.
async fn open_with(prefix: &str, configure: impl FnOnce(&mut Config)) -> Option<Server> {
    let mut config = Config::new(vec![
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/ovc/vm.toml"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/sabakan/machine.toml"),
    ]);
    config.store = StoreKind::Etcd {
        access: EtcdAccess::new(endpoints()),
        prefix: prefix.to_owned(),
    };
    configure(&mut config);
    let tokens = Tokens::parse(&format!(
        "[[token]]\ntoken = \"{OPS}\"\nactor = \"ops\"\nroles = [\"admin\"]\n\
         [[token]]\ntoken = \"{CONTROLLER}\"\nactor = \"neco\"\nroles = [\"controller\"]\n"
    ))
    .unwrap();
    let handle = tokio::runtime::Handle::current();
    let opened = tokio::task::spawn_blocking(move || Service::open(&config, tokens, &handle))
        .await
        .unwrap();
    let service = match opened {
        Ok(s) => s,
        Err(e) => {
            common::missing(
                "FSM_SKIP_ETCD",
                &format!("no etcd answers at {:?} ({e})", endpoints()),
                "run the tests with scripts/test, which starts one, or start one and set FSM_ETCD_ENDPOINTS",
            );
            return None;
        }
    };
    Some(Server::serving(service).await)
}

async fn post(c: &Client, url: String, token: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut r = c.post(url).bearer_auth(token);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    (r.status(), r.json().await.unwrap())
}

/// Waits until the service at `base` has counted `n` completions of vm
/// actions: its feed has seen them.
async fn completed_on(c: &Client, base: &str, n: u64) {
    let line = format!("fsm_actions_completed_total{{machine=\"vm\"}} {n}\n");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let metrics = c.get(format!("{base}/metrics")).send().await.unwrap();
        let metrics = metrics.text().await.unwrap();
        if metrics.contains(&line) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{metrics}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn get(c: &Client, url: String) -> (StatusCode, Value) {
    let r = c.get(url).bearer_auth(OPS).send().await.unwrap();
    (r.status(), r.json().await.unwrap())
}

/// Creates `id` of `machine` on the service at `base`, as ops.
async fn create(c: &Client, base: &str, machine: &str, id: &str) {
    let url = format!("{base}/v1/{machine}/objects");
    let (status, body) = post(c, url, OPS, Some(json!({ "id": id }))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

/// Runs `action` whole on VM `id` at the service at `base`, as ops: 200.
async fn run(c: &Client, base: &str, id: &str, action: &str) {
    let url = format!("{base}/v1/vm/objects/{id}/actions/{action}?run=true");
    let (status, body) = post(c, url, OPS, None).await;
    assert_eq!(status, StatusCode::OK, "{action} on {id}: {body}");
}

/// The VMs' watch stream of the service at `base`, resumed after `after`.
fn watch(
    c: &Client,
    base: &str,
    after: Option<u64>,
) -> impl std::future::Future<Output = reqwest::Result<reqwest::Response>> {
    let mut request = c.get(format!("{base}/v1/vm/watch")).bearer_auth(OPS);
    if let Some(after) = after {
        request = request.header("last-event-id", after.to_string());
    }
    request.send()
}

/// A prefix no other run uses.
fn fresh_prefix() -> String {
    format!(
        "/fsm-serve-test/{}-{}/",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// Two services on one prefix no other run uses.
async fn two_services() -> Option<(Server, Server)> {
    let prefix = fresh_prefix();
    Some((open(&prefix).await?, open(&prefix).await?))
}

/// A watch resumes on any service of an etcd store: an event's id is its
/// write's revision, so the id one service gave names the same place on
/// another, and the stream goes on there with the writes after it, under the
/// same ids, with no gap and nothing twice. An id past the store's revision is
/// none a service gave: a gap, then the next writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumes_on_another_service_of_the_store() {
    let Some((service_a, service_b)) = two_services().await else {
        return;
    };
    let (a, b) = (service_a.base.clone(), service_b.base.clone());
    let c = Client::new();
    let on_a = watch(&c, &a, None).await.unwrap();
    // Three writes, made on B: created, started, completed.
    create(&c, &b, "vm", "vm-1").await;
    run(&c, &b, "vm-1", "deploy").await;
    let seen_on_a = sse::sse(on_a, 3, &["write", "gap"]).await;
    let ids: Vec<u64> = seen_on_a
        .iter()
        .map(|(_, id, _)| id.expect("a write's id"))
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{seen_on_a:?}");

    // Resumed on B after A's first: B's second and third, A's ids, no gap.
    let on_b = watch(&c, &b, Some(ids[0])).await.unwrap();
    assert_eq!(on_b.status(), StatusCode::OK);
    let seen_on_b = sse::sse(on_b, 2, &["write", "gap"]).await;
    assert_eq!(seen_on_b, seen_on_a[1..], "resumed on B after {}", ids[0]);

    // Resumed on B after A's last (whether B's feed has seen it yet or not):
    // nothing until the next write, and no gap. An id past the store's
    // revision: a gap first.
    let resumed = watch(&c, &b, Some(ids[2])).await.unwrap();
    let made_up = watch(&c, &b, Some(u64::MAX)).await.unwrap();
    run(&c, &a, "vm-1", "pause").await;
    let next = sse::sse(resumed, 1, &["write", "gap"]).await;
    assert_eq!(next[0].0, "write", "{next:?}");
    assert!(next[0].1.unwrap() > ids[2], "{next:?}");
    assert_eq!(next[0].2["to"], "PAUSING", "{next:?}");
    let unknown = sse::sse(made_up, 2, &["write", "gap"]).await;
    assert_eq!(
        (unknown[0].0.as_str(), unknown[1].0.as_str(), unknown[1].1),
        ("gap", "write", next[0].1),
        "{unknown:?}"
    );
    service_a.stop().await;
    service_b.stop().await;
}

/// On etcd, a list's `last_event_id` is a revision: a controller lists on one
/// service and watches on another from it, and meets every write made between
/// the two, on either service, and none the list showed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_on_one_service_and_a_watch_on_another_miss_nothing() {
    let Some((service_a, service_b)) = two_services().await else {
        return;
    };
    let (a, b) = (service_a.base.clone(), service_b.base.clone());
    let c = Client::new();
    // vm-1 created, and A's feed has numbered it, before A's list.
    let on_a = watch(&c, &a, None).await.unwrap();
    create(&c, &b, "vm", "vm-1").await;
    let created = sse::sse(on_a, 1, &["write"]).await[0].1.unwrap();
    let (status, listed) = get(&c, format!("{a}/v1/vm/objects")).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let last = listed["last_event_id"].as_u64().expect("a number");
    assert!(last >= created, "{listed}: vm-1 created at {created}");
    assert_eq!(listed["objects"][0]["id"], "vm-1");

    // Written after the list, one on each service; then watched on B.
    create(&c, &a, "vm", "vm-2").await;
    run(&c, &b, "vm-1", "deploy").await;
    let on_b = watch(&c, &b, Some(last)).await.unwrap();
    let met = sse::sse(on_b, 3, &["write", "gap"]).await;
    let seen: Vec<(&str, &str, &str)> = (met.iter())
        .map(|(event, _, e)| {
            (
                event.as_str(),
                e["id"].as_str().unwrap(),
                e["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("write", "vm-2", "Created"),
            ("write", "vm-1", "Started"),
            ("write", "vm-1", "Completed")
        ]
    );
    assert!(met.iter().all(|(_, id, _)| id.unwrap() > last), "{met:?}");
    service_a.stop().await;
    service_b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_services_on_one_etcd_prefix_serve_the_same_objects() {
    let Some((service_a, service_b)) = two_services().await else {
        return;
    };
    let (a, b) = (service_a.base.clone(), service_b.base.clone());
    let c = Client::new();

    let (status, created) = post(
        &c,
        format!("{a}/v1/vm/objects"),
        OPS,
        Some(json!({"id": "vm-1"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let (status, seen) = get(&c, format!("{b}/v1/vm/objects/vm-1")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (seen["state"].as_str(), seen["version"].as_u64()),
        (Some("VIRTUAL"), Some(1))
    );

    // `action` started on one service, `end`ed (complete) on another.
    let vm = |base: &str, what: &str| format!("{base}/v1/vm/objects/vm-1/{what}");
    let start = async |base: &str, action: &str| {
        post(&c, vm(base, &format!("actions/{action}")), OPS, None).await
    };
    let end = async |base: &str, fence: u64| {
        post(
            &c,
            vm(base, &format!("in-flight/{fence}/complete")),
            OPS,
            None,
        )
        .await
    };

    // A holds it; B is told who.
    let (status, started) = start(&a, "deploy").await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, busy) = start(&b, "deploy").await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        (busy["error"].as_str(), busy["holder"].as_str()),
        (Some("busy"), Some("ops"))
    );
    // A started it and holds its handle; B, asked with the fence by the actor
    // who started it (a client behind a balancer), takes it up from etcd and
    // completes it. A lets go of its handle when its feed (etcd's watch) sees
    // the completion; then a late completion on A is a 409 naming who ended
    // the hold.
    let fence = started["fence"].as_u64().unwrap();
    let (status, done) = end(&b, fence).await;
    assert_eq!(
        (status, done["state"].as_str()),
        (StatusCode::OK, Some("RUNNING"))
    );
    completed_on(&c, &a, 1).await;
    let (status, late) = end(&a, fence).await;
    assert_eq!(
        (status, late["error"].as_str(), late["revoked_by"].as_str()),
        (StatusCode::CONFLICT, Some("revoked"), Some("ops"))
    );
    let (_, seen) = get(&c, format!("{a}/v1/vm/objects/vm-1")).await;
    assert_eq!(seen["state"], "RUNNING");

    // Started on B, completed on A.
    let (status, started) = start(&b, "reboot").await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    let (status, done) = end(&a, started["fence"].as_u64().unwrap()).await;
    assert_eq!(
        (status, done["state"].as_str()),
        (StatusCode::OK, Some("RUNNING"))
    );

    // B's metrics count A's writes: its feed is etcd's watch.
    completed_on(&c, &b, 2).await;

    // Sabakan over HTTP, on both services: retiring is for admins; the keys go
    // only while Retiring, by changes of data the spec's rules check (CEL over the
    // data as it is and as proposed); retirement completes only without keys.
    let machines = format!("{a}/v1/machine/objects");
    let body = json!({"id": "rack1-node3", "data": {"disk_keys": ["k1"]}});
    let (status, _) = post(&c, machines, OPS, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED);
    let retire = format!("{b}/v1/machine/objects/rack1-node3/actions/retire?run=true");
    let (status, refused) = post(&c, retire.clone(), CONTROLLER, None).await;
    assert_eq!(
        (status, refused["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("missing_role"))
    );
    let (status, retiring) = post(&c, retire, OPS, None).await;
    assert_eq!(
        (status, retiring["state"].as_str()),
        (StatusCode::OK, Some("Retiring"))
    );
    let complete =
        format!("{a}/v1/machine/objects/rack1-node3/actions/complete_retirement?run=true");
    let (status, guarded) = post(&c, complete.clone(), CONTROLLER, None).await;
    assert_eq!(
        (status, guarded["guard"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("keys_deleted"))
    );
    let (status, listed) = get(&c, format!("{a}/v1/machine/objects?state=Retiring")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed["objects"][0]["id"], "rack1-node3");

    let data = |base: &str, action: &str| {
        format!("{base}/v1/machine/objects/rack1-node3/data?action={action}")
    };
    let patch = |url: String, token: &'static str, body: Value| {
        let c = c.clone();
        async move {
            let r = c.patch(url).bearer_auth(token).json(&body);
            let r = r.send().await.unwrap();
            (r.status(), r.json::<Value>().await.unwrap())
        }
    };
    // Refused, with the rule that refused: adding a key that replaces k1 would
    // delete k1 (`keeps_keys`), and deleting cannot add one (`adds_no_keys`).
    for (base, action, token, body, guard) in [
        (
            &b,
            "add_key",
            CONTROLLER,
            json!({"disk_keys": ["k2"]}),
            "keeps_keys",
        ),
        (
            &a,
            "delete_keys",
            OPS,
            json!({"disk_keys": ["k9"]}),
            "adds_no_keys",
        ),
    ] {
        let (status, body) = patch(data(base, action), token, body).await;
        assert_eq!(
            (status, body["guard"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some(guard)),
            "{body}"
        );
    }
    let (status, body) = patch(data(&a, "delete_keys"), OPS, json!({"disk_keys": []})).await;
    assert_eq!(
        (status, &body["data"]),
        (StatusCode::OK, &json!({"disk_keys": []})),
        "{body}"
    );
    let (_, seen) = get(&c, format!("{b}/v1/machine/objects/rack1-node3")).await;
    assert_eq!(seen["data"], json!({"disk_keys": []}));
    let (status, retired) = post(&c, complete, CONTROLLER, None).await;
    assert_eq!(
        (status, retired["state"].as_str()),
        (StatusCode::OK, Some("Retired"))
    );
    // None added once Retired: no rule for `add_key` there.
    let (status, body) = patch(
        data(&b, "add_key"),
        CONTROLLER,
        json!({"disk_keys": ["k3"]}),
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("no_rule")),
        "{body}"
    );

    service_a.stop().await;
    service_b.stop().await;
}

/// Data grown by patches, each under the body limit, past what etcd takes:
/// the patch that would take it past is refused 413 `too_large`, naming the
/// object, not 503 (a client made it again and again), and writes nothing.
/// With `forget_removals_after`, the healer's passes forget a removal on
/// etcd as on memory (see `Server::forgets_a_removal`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removals_on_etcd_are_forgotten_after_the_time_given() {
    let Some(server) = open_with(&fresh_prefix(), |config| {
        config.forget_removals_after = Some(Duration::ZERO);
        config.heal_every = Duration::from_millis(20);
    })
    .await
    else {
        return;
    };
    server.forgets_a_removal(&Client::new(), OPS).await;
    server.stop().await;
}

/// Requests that wait on one service take turns on an object that actions
/// started on another service of the same store hold: the waiting service
/// learns of each end by its watch of etcd (see `Server::requests_take_turns`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_wait_take_turns_behind_another_service() {
    let prefix = fresh_prefix();
    let Some(holder) = open(&prefix).await else {
        return;
    };
    let waiter = open(&prefix)
        .await
        .expect("etcd was reachable a moment ago");
    waiter
        .requests_take_turns(&holder, &Client::new(), OPS)
        .await;
    waiter.stop().await;
    holder.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_grown_past_what_etcd_takes_is_413() {
    let Some(server) = open(&fresh_prefix()).await else {
        return;
    };
    let base = server.base.clone();
    let c = Client::new();
    create(&c, &base, "vm", "vm-1").await;
    run(&c, &base, "vm-1", "deploy").await;
    let mut refused = None;
    for n in 0..40 {
        let patch = json!({ format!("k{n}"): "x".repeat(60 * 1024) });
        let r = c
            .patch(format!("{base}/v1/vm/objects/vm-1/data?action=reset"))
            .bearer_auth(OPS)
            .json(&patch)
            .send()
            .await
            .unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap();
        match status {
            StatusCode::OK => {}
            _ => {
                refused = Some((n, status, body));
                break;
            }
        }
    }
    // etcd takes 1.5 MiB, and a patch's start writes the data it proposes
    // beside the data: some twelve patches of 60 KiB.
    let (n, status, body) = refused.expect("etcd took 2.4 MiB of data");
    assert!(n >= 10, "refused at patch {n}: {body}");
    assert_eq!(
        (status, body["error"].as_str(), body["id"].as_str()),
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            Some("too_large"),
            Some("vm-1")
        ),
        "{body}"
    );
    let (_, vm) = get(&c, format!("{base}/v1/vm/objects/vm-1")).await;
    let keys = vm["data"].as_object().unwrap().len();
    assert_eq!(
        (keys, vm["state"].as_str(), &vm["in_flight"]),
        (n, Some("RUNNING"), &Value::Null)
    );
    server.stop().await;
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// When etcd goes away, requests answer 503 with `unavailable` (retry later), and
/// the service itself stays up; a watch resumed after an id the service cannot
/// place without etcd's revision opens with a gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_etcd_is_a_503() {
    let dir = std::env::temp_dir().join(format!("fsm-serve-etcd-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (client, peer) = (free_port(), free_port());
    let url = |port: u16| format!("http://127.0.0.1:{port}");
    let etcd = std::process::Command::new("etcd")
        .args(["--name", "serve-test", "--data-dir"])
        .arg(dir.join("data"))
        .args([
            "--listen-client-urls",
            &url(client),
            "--advertise-client-urls",
            &url(client),
        ])
        .args([
            "--listen-peer-urls",
            &url(peer),
            "--initial-advertise-peer-urls",
            &url(peer),
        ])
        .args(["--initial-cluster", &format!("serve-test={}", url(peer))])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let mut etcd = match etcd {
        Ok(etcd) => etcd,
        Err(e) => {
            common::missing(
                "FSM_SKIP_ETCD",
                &format!("cannot run the `etcd` binary ({e})"),
                "scripts/test installs it (Debian: etcd-server)",
            );
            return;
        }
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", client)).is_err() {
        assert!(std::time::Instant::now() < deadline, "etcd did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut config = Config::new(vec![
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/ovc/vm.toml"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/ovc/disk.toml"),
    ]);
    config.store = StoreKind::Etcd {
        access: EtcdAccess::new([format!("127.0.0.1:{client}")]),
        prefix: "/lost/".into(),
    };
    let handle = tokio::runtime::Handle::current();
    let service = loop {
        let (config, tokens) = (
            config.clone(),
            Tokens::parse(&format!("[[token]]\ntoken = \"{OPS}\"\nactor = \"ops\"\n")).unwrap(),
        );
        let handle = handle.clone();
        match tokio::task::spawn_blocking(move || Service::open(&config, tokens, &handle))
            .await
            .unwrap()
        {
            Ok(s) => break s,
            Err(e) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "etcd never answered: {e}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let server = Server::serving(service).await;
    let base = server.base.clone();
    let c = Client::new();
    create(&c, &base, "vm", "vm-1").await;
    let created = sse::sse(watch(&c, &base, Some(0)).await.unwrap(), 1, &["write"]).await[0].1;
    let created = created.expect("a write's id");
    // A write of another machine: etcd's revision moves past the last id of
    // the VMs' feed. Resumed after that revision, a VM watch would be a stream
    // another service of the store could have started (no gap).
    create(&c, &base, "disk", "disk-1").await;
    // A record the service cannot read (not what fsm writes): the summary and
    // the metrics count it apart, and still count the others.
    let mut raw = etcd_client::Client::connect([format!("127.0.0.1:{client}")], None)
        .await
        .unwrap();
    raw.put("/lost/vm/obj/vm-garbled", "not a record", None)
        .await
        .unwrap();
    let (status, summary) = get(&c, format!("{base}/v1/vm/summary")).await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    assert_eq!(
        (
            &summary["total"],
            &summary["unreadable"],
            &summary["states"]["VIRTUAL"]
        ),
        (&json!(1), &json!(1), &json!(1)),
        "{summary}"
    );
    // The list names it apart, in a state too (its state cannot be told), and
    // in the page that reaches it, not in the one before.
    fn ids<'l>(list: &'l Value, field: &str) -> Vec<&'l str> {
        let listed = list[field].as_array().map(Vec::as_slice);
        let listed = listed.unwrap_or_default().iter();
        listed.map(|o| o["id"].as_str().unwrap()).collect()
    }
    for (query, objects, unreadable) in [
        ("", &["vm-1"][..], &["vm-garbled"][..]),
        ("?state=VIRTUAL", &["vm-1"], &["vm-garbled"]),
        ("?limit=1", &["vm-1"], &[]),
        ("?limit=1&after=vm-1", &[], &["vm-garbled"]),
    ] {
        let (status, list) = get(&c, format!("{base}/v1/vm/objects{query}")).await;
        assert_eq!(status, StatusCode::OK, "{list}");
        assert_eq!(
            (ids(&list, "objects"), ids(&list, "unreadable")),
            (objects.to_vec(), unreadable.to_vec()),
            "{query}: {list}"
        );
        if let Some(why) = list["unreadable"][0]["message"].as_str() {
            assert!(why.contains("vm-garbled"), "{list}");
        }
    }
    let metrics = |c: &Client| {
        let url = format!("{base}/metrics");
        let c = c.clone();
        async move { c.get(url).send().await.unwrap().text().await.unwrap() }
    };
    let up = metrics(&c).await;
    for line in [
        "fsm_store_up{machine=\"vm\"} 1\n",
        "fsm_objects_unreadable{machine=\"vm\"} 1\n",
        "fsm_objects{machine=\"vm\",state=\"VIRTUAL\"} 1\n",
    ] {
        assert!(up.contains(line), "{line}{up}");
    }

    // The probes, asked without a token: ready while etcd answers...
    let probe = |path: &str| {
        let (c, url) = (c.clone(), format!("{base}{path}"));
        async move {
            let r = c.get(url).send().await.unwrap();
            (r.status(), r.json::<Value>().await.unwrap())
        }
    };
    let ready = json!({ "status": "ready" });
    assert_eq!(probe("/readyz").await, (StatusCode::OK, ready));

    let _ = etcd.kill();
    let _ = etcd.wait();
    // ...not once it is gone, naming each machine whose store does not answer;
    // the process still serves.
    let (status, ready) = probe("/readyz").await;
    assert_eq!(
        (status, ready["error"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable")),
        "{ready}"
    );
    let down: Vec<&String> = ready["down"].as_object().unwrap().keys().collect();
    assert_eq!(down, ["disk", "vm"], "{ready}");
    let alive = (StatusCode::OK, json!({ "status": "ok" }));
    assert_eq!(probe("/healthz").await, alive);
    // Nothing to count: the summary is a 503, and the metrics say the store is
    // down rather than that it holds nothing.
    let (status, summary) = get(&c, format!("{base}/v1/vm/summary")).await;
    assert_eq!(
        (status, summary["error"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable")),
        "{summary}"
    );
    let down = metrics(&c).await;
    assert!(down.contains("fsm_store_up{machine=\"vm\"} 0\n"), "{down}");
    assert!(!down.contains("fsm_objects{machine=\"vm\""), "{down}");
    // With etcd gone, the service cannot tell whether another service gave
    // that id: the stream opens with a gap (the client lists again once etcd
    // is back), never as if nothing had been missed.
    let resumed = watch(&c, &base, Some(created + 1)).await.unwrap();
    assert_eq!(resumed.status(), StatusCode::OK);
    let opened = sse::sse(resumed, 1, &["gap", "write"]).await;
    assert_eq!(opened[0].0, "gap", "{opened:?}");
    // Reads of one object, and pages of the list and of a history, too.
    for path in [
        "/v1/vm/objects/vm-1",
        "/v1/vm/objects?limit=1",
        "/v1/vm/objects/vm-1/history?limit=1",
    ] {
        let (status, body) = get(&c, format!("{base}{path}")).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable")),
            "{path}: {body}"
        );
    }
    // The service is still up: what needs no store answers.
    let metrics = c.get(format!("{base}/openapi.json")).send().await.unwrap();
    assert_eq!(metrics.status(), StatusCode::OK);
    server.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A removed object's 404 carries its removal while the store can read it;
/// a removal the store cannot read (not what fsm writes) leaves the plain
/// 404, never a 500: the object is gone either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removal_the_store_cannot_read_leaves_the_plain_404() {
    let prefix = fresh_prefix();
    let Some(server) = open(&prefix).await else {
        return;
    };
    let (base, c) = (server.base.clone(), Client::new());
    let url = format!("{base}/v1/machine/objects");
    let body = Some(json!({ "id": "m-1", "data": { "disk_keys": [] } }));
    let (status, created) = post(&c, url, OPS, body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let object = format!("{base}/v1/machine/objects/m-1");
    for (action, token) in [("retire", OPS), ("complete_retirement", CONTROLLER)] {
        let url = format!("{object}/actions/{action}?run=true");
        let (status, moved) = post(&c, url, token, None).await;
        assert_eq!(status, StatusCode::OK, "{moved}");
    }
    let removed = c.delete(&object).bearer_auth(OPS).send().await.unwrap();
    assert_eq!(removed.status(), StatusCode::OK);
    let (status, gone) = get(&c, object.clone()).await;
    assert_eq!(
        (status, &gone["removed"]["kind"], &gone["removed"]["from"]),
        (StatusCode::NOT_FOUND, &json!("Removed"), &json!("Retired")),
        "{gone}"
    );
    let mut raw = etcd_client::Client::connect(endpoints(), None)
        .await
        .unwrap();
    let key = format!("{prefix}machine/gone/m-1");
    assert!(
        raw.get(key.as_str(), None).await.unwrap().count() == 1,
        "the removal is not at {key}"
    );
    raw.put(key, "not an entry", None).await.unwrap();
    for url in [object.clone(), format!("{object}/history")] {
        let (status, gone) = get(&c, url.clone()).await;
        assert_eq!(
            (status, &gone["error"]),
            (StatusCode::NOT_FOUND, &json!("not_found")),
            "{url}: {gone}"
        );
        assert!(gone.get("removed").is_none(), "{url}: {gone}");
    }
    server.stop().await;
}
