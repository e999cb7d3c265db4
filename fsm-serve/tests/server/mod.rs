//! A service on a free loopback port, for the tests that call it over HTTP.

#![allow(dead_code)] // each test binary uses its part

use std::sync::Arc;

use fsm_serve::{Config, Service, Tokens};
use reqwest::Client;

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

    /// Stops the service gracefully, and waits until it has.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.done.take().unwrap().await.unwrap().unwrap();
    }
}
