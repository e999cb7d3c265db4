//! A service on a free loopback port, for the tests that call it over HTTP.

#![allow(dead_code)] // each test binary uses its part

use std::sync::Arc;

use fsm_serve::{Config, Service, Tokens};
use reqwest::{Client, StatusCode};
use serde_json::{Value, json};

/// A running service: where it listens, and what stops it.
pub struct Server {
    pub base: String,
    pub service: Arc<Service>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Server {
    /// The service `config` describes, for `tokens`, on a free loopback port.
    pub async fn open(config: Config, tokens: Tokens) -> Server {
        let handle = tokio::runtime::Handle::current();
        let service = tokio::task::spawn_blocking(move || Service::open(&config, tokens, &handle))
            .await
            .unwrap()
            .unwrap();
        Server::serving(service).await
    }

    /// `service`, served on a free loopback port.
    pub async fn serving(service: Arc<Service>) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let done = tokio::spawn(fsm_serve::serve(service.clone(), listener, async {
            let _ = stopped.await;
        }));
        Server {
            base,
            service,
            stop: Some(stop),
            done: Some(done),
        }
    }

    /// `path` on this service.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The Prometheus text of `/metrics` (no token needed).
    pub async fn metrics(&self, c: &Client) -> String {
        let r = c.get(self.url("/metrics")).send().await.unwrap();
        r.text().await.unwrap()
    }

    /// A VM created, deployed, destroyed and removed by the admin `token`:
    /// its 404 says `removed` until the healer's passes of a service run with
    /// `forget_removals_after` forget it (looked at every 20 ms, for 10 s at
    /// most), then no longer; and the id's next object is numbered past the
    /// one removed, so the `If-Match` that removed it never matches the new
    /// one.
    pub async fn forgets_a_removal(&self, c: &Client, token: &str) {
        let call = async |method: reqwest::Method, path: &str, body: Option<Value>| {
            let mut request = c.request(method, self.url(path)).bearer_auth(token);
            if let Some(body) = body {
                request = request.json(&body);
            }
            let response = request.send().await.unwrap();
            let status = response.status();
            (status, response.json::<Value>().await.unwrap())
        };
        let body = Some(json!({ "id": "vm-9" }));
        let (status, created) = call(reqwest::Method::POST, "/v1/vm/objects", body.clone()).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        for action in ["deploy", "destroy"] {
            let path = format!("/v1/vm/objects/vm-9/actions/{action}?run=true");
            let (status, moved) = call(reqwest::Method::POST, &path, None).await;
            assert_eq!(status, StatusCode::OK, "{action}: {moved}");
        }
        let object = "/v1/vm/objects/vm-9";
        let (status, removed) = call(reqwest::Method::DELETE, object, None).await;
        assert_eq!(status, StatusCode::OK, "{removed}");
        let removed_at = removed["version"].as_u64().unwrap();
        for look in 0.. {
            let (status, gone) = call(reqwest::Method::GET, object, None).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{gone}");
            if gone.get("removed").is_none() {
                break;
            }
            assert!(look < 500, "still told after 500 looks: {gone}");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let (status, created) = call(reqwest::Method::POST, "/v1/vm/objects", body).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        let version = created["version"].as_u64().unwrap();
        assert!(
            version > removed_at,
            "created at {version} after a removal at {removed_at}"
        );
    }

    /// How many requests wait for a VM on this service (`fsm_requests_waiting`).
    pub async fn waiting(&self, c: &Client) -> u64 {
        let metrics = self.metrics(c).await;
        let line = "fsm_requests_waiting{machine=\"vm\"} ";
        let at = metrics.find(line).expect("the gauge") + line.len();
        metrics[at..].lines().next().unwrap().parse().unwrap()
    }

    /// Waits until `n` starts wait for a VM on this service (looked at every
    /// 10 ms, for 10 s at most).
    pub async fn until_waiting(&self, c: &Client, n: u64) {
        for look in 0.. {
            if self.waiting(c).await == n {
                return;
            }
            assert!(look < 1000, "never {n} requests waiting");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// Requests that wait (`?wait=SECONDS`) on this service take turns on a
    /// VM that actions started on `holder` (this service or another of the
    /// same store) hold: two waiters, each in line while the object is held
    /// (the race: both refused busy, then started), start in the order they
    /// came, each only once the action before it ended; a waiter whose time
    /// runs out is answered 409 `busy`; one whose action has no rule from the
    /// state the object reaches is answered that (422) once it is free; a
    /// wait past the service's `max_wait` (30 s) is refused, 400. A data
    /// change and a removal wait their turn the same way. The summary of this
    /// service counts the waiters, with the object they wait for. No request
    /// waits when done.
    pub async fn requests_take_turns(&self, holder: &Server, c: &Client, token: &str) {
        // A request as a future that owns what it needs, to be a task of its
        // own and stand in line while others go on.
        let request =
            |method: reqwest::Method, server: &Server, path: String, body: Option<Value>| {
                let (c, url, token) = (c.clone(), server.url(&path), token.to_owned());
                async move {
                    let mut request = c.request(method, url).bearer_auth(token);
                    if let Some(body) = body {
                        request = request.json(&body);
                    }
                    let response = request.send().await.unwrap();
                    let status = response.status();
                    (status, response.json::<Value>().await.unwrap())
                }
            };
        let call =
            |server: &Server, path: String| request(reqwest::Method::POST, server, path, None);
        let id = "vm-turns";
        let (status, created) = c
            .post(holder.url("/v1/vm/objects"))
            .bearer_auth(token)
            .json(&json!({ "id": id }))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .map(|body| (StatusCode::CREATED, body))
            .unwrap();
        assert_eq!(status, StatusCode::CREATED, "{created}");
        let action = |name: &str, query: &str| format!("/v1/vm/objects/{id}/actions/{name}{query}");
        let complete = |fence: &Value| format!("/v1/vm/objects/{id}/in-flight/{fence}/complete");
        let (status, body) = call(holder, action("deploy", "?run=true")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, held) = call(holder, action("add_disk", "")).await;
        assert_eq!(status, StatusCode::CREATED, "{held}");

        // In line while add_disk holds it: attach_disk, then reboot.
        let first = tokio::spawn(call(self, action("attach_disk", "?wait=20")));
        self.until_waiting(c, 1).await;
        let second = tokio::spawn(call(self, action("reboot", "?wait=20")));
        self.until_waiting(c, 2).await;
        // The summary here says who waits, and for which object.
        let read = |path: String| request(reqwest::Method::GET, self, path, None);
        let (_, summary) = read("/v1/vm/summary".into()).await;
        let waited: Vec<(&str, &Value)> = (summary["in_flight"].as_array().unwrap().iter())
            .map(|o| (o["id"].as_str().unwrap(), &o["waiting"]))
            .collect();
        assert_eq!(
            (&summary["waiting"], waited),
            (&json!(2), vec![(id, &json!(2))]),
            "{summary}"
        );
        let (status, body) = call(holder, complete(&held["fence"])).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, attaching) = first.await.unwrap();
        assert_eq!(
            (status, attaching["state"].as_str()),
            (StatusCode::CREATED, Some("ATTACHING_DISK")),
            "{attaching}"
        );
        // The second still waits, for attach_disk now.
        self.until_waiting(c, 1).await;
        assert!(!second.is_finished());
        let (status, body) = call(self, complete(&attaching["fence"])).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, rebooting) = second.await.unwrap();
        assert_eq!(
            (status, rebooting["state"].as_str()),
            (StatusCode::CREATED, Some("REBOOTING")),
            "{rebooting}"
        );
        let (_, history) = read(format!("/v1/vm/objects/{id}/history")).await;
        let steps: Vec<String> = history["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                format!(
                    "{} {}",
                    e["kind"].as_str().unwrap(),
                    e["action"].as_str().unwrap_or("-")
                )
            })
            .collect();
        assert_eq!(
            steps[3..],
            [
                "Started add_disk",
                "Completed add_disk",
                "Started attach_disk",
                "Completed attach_disk",
                "Started reboot"
            ],
            "{history}"
        );

        // Out of time while reboot holds it: busy, naming the holder.
        let (status, body) = call(self, action("reset", "?wait=1")).await;
        assert_eq!(
            (status, body["error"].as_str(), body["action"].as_str()),
            (StatusCode::CONFLICT, Some("busy"), Some("reboot")),
            "{body}"
        );
        // Free, but not in a state deploy starts from: its own refusal.
        let waiting = tokio::spawn(call(self, action("deploy", "?wait=20")));
        self.until_waiting(c, 1).await;
        let (status, body) = call(holder, complete(&rebooting["fence"])).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, body) = waiting.await.unwrap();
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some("no_rule")),
            "{body}"
        );
        let (status, body) = call(self, action("reset", "?wait=31")).await;
        assert_eq!(
            (status, body["error"].as_str(), body["parameter"].as_str()),
            (StatusCode::BAD_REQUEST, Some("malformed"), Some("wait")),
            "{body}"
        );
        assert_eq!(
            body["message"],
            "the query's `wait`: at most 30 seconds on this service, not 31"
        );

        // A data change (by an action) and a removal wait their turn too.
        let (status, held) = call(holder, action("add_disk", "")).await;
        assert_eq!(status, StatusCode::CREATED, "{held}");
        let data = format!("/v1/vm/objects/{id}/data?action=attach_disk&wait=20");
        let patched = tokio::spawn(request(
            reqwest::Method::PATCH,
            self,
            data,
            Some(json!({ "disks": 1 })),
        ));
        self.until_waiting(c, 1).await;
        let (status, body) = call(holder, complete(&held["fence"])).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, body) = patched.await.unwrap();
        assert_eq!(
            (status, &body["data"], body["state"].as_str()),
            (StatusCode::OK, &json!({ "disks": 1 }), Some("RUNNING")),
            "{body}"
        );
        let (status, destroying) = call(holder, action("destroy", "")).await;
        assert_eq!(status, StatusCode::CREATED, "{destroying}");
        let object = format!("/v1/vm/objects/{id}?wait=20");
        let removed = tokio::spawn(request(reqwest::Method::DELETE, self, object, None));
        self.until_waiting(c, 1).await;
        let (status, body) = call(holder, complete(&destroying["fence"])).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, body) = removed.await.unwrap();
        assert_eq!(
            (status, body["kind"].as_str(), body["from"].as_str()),
            (StatusCode::OK, Some("Removed"), Some("DESTROYED")),
            "{body}"
        );
        assert_eq!(self.waiting(c).await, 0);

        // An object that is not there is not waited for: 404 at once, not
        // at the end of its wait (nothing will free it).
        let asked = std::time::Instant::now();
        let (status, body) = call(self, action("deploy", "?wait=20")).await;
        assert_eq!(
            (status, body["error"].as_str(), body["id"].as_str()),
            (StatusCode::NOT_FOUND, Some("not_found"), Some(id)),
            "{body}"
        );
        assert!(
            asked.elapsed() < std::time::Duration::from_secs(10),
            "answered after {:?}, not at once",
            asked.elapsed()
        );
    }

    /// Stops the service gracefully, and waits until it has.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.done.take().unwrap().await.unwrap().unwrap();
    }
}
