//! What the etcd test binaries share: a store on a prefix of its own, and a
//! client of the test's etcd.

#![allow(dead_code)] // each binary uses its part

#[path = "../../../fsm-core/tests/common/mod.rs"]
pub mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use fsm_etcd::EtcdStore;
use fsm_runtime::{Actor, Runtime};

pub use common::etcd_endpoints as endpoints;

/// A prefix no other test uses.
pub fn fresh_prefix() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "/fsm-test/{}-{}/{}/",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A store under a prefix no other test uses, or `None` when no etcd is reachable
/// and `FSM_SKIP_ETCD` is set (without it, the test fails saying how to get one).
pub fn store() -> Option<EtcdStore> {
    store_at(&fresh_prefix())
}

/// [`store`], under `prefix`.
pub fn store_at(prefix: &str) -> Option<EtcdStore> {
    match EtcdStore::connect(endpoints(), prefix) {
        Ok(store) => Some(store),
        Err(e) => {
            common::missing(
                "FSM_SKIP_ETCD",
                &format!("no etcd answers at {:?} ({e})", endpoints()),
                "run the tests with scripts/test, which starts one, or start one and set FSM_ETCD_ENDPOINTS",
            );
            None
        }
    }
}

/// Runs `f` to its end on a runtime of its own.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// Runs `work` with a client of the test's etcd.
pub fn with_etcd<T, F: std::future::Future<Output = T>>(
    work: impl FnOnce(etcd_client::Client) -> F,
) -> T {
    block_on(async {
        let client = etcd_client::Client::connect(endpoints(), None)
            .await
            .unwrap();
        work(client).await
    })
}

/// Creates three requests' worth of objects for `records` to read (1,000,
/// 1,000 and 100: `vm-0000` to `vm-2099`), on four threads, and answers their
/// ids in order.
pub fn three_pages(rt: &Runtime<EtcdStore>, admin: &Actor) -> Vec<String> {
    let ids: Vec<String> = (0..2_100).map(|n| format!("vm-{n:04}")).collect();
    std::thread::scope(|s| {
        for part in ids.chunks(ids.len() / 4 + 1) {
            s.spawn(move || {
                for id in part {
                    rt.create(id.as_str(), admin).unwrap();
                }
            });
        }
    });
    ids
}
