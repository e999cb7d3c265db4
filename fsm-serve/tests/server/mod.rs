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

    /// Stops the service gracefully, and waits until it has.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.done.take().unwrap().await.unwrap().unwrap();
    }
}
