//! The process's session: its lease, the key that lives as long as it, and
//! the task that keeps it alive.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use etcd_client::{Client, PutOptions};

use crate::kv_client;

/// The key that lives as long as the session (lease) `session` of a process.
pub(crate) fn live_key(prefix: &str, session: i64) -> String {
    format!("{prefix}live/{session:x}")
}

/// Puts the key of session `lease`, on that lease.
pub(crate) async fn put_live(
    client: &Client,
    prefix: &str,
    lease: i64,
) -> Result<(), etcd_client::Error> {
    kv_client(client)
        .put(
            live_key(prefix, lease),
            "",
            Some(PutOptions::new().with_lease(lease)),
        )
        .await
        .map(drop)
}

/// Replaces the expired lease `old` with a new one, unless another task already
/// did (then that one is kept, and the lease granted here is revoked): every key
/// of this process must be on the one lease the keep-alive task renews.
pub(crate) async fn replace_lease(
    client: &Client,
    prefix: &str,
    ttl: i64,
    lease: &AtomicI64,
    old: i64,
) -> Result<i64, etcd_client::Error> {
    let mut leases = client.lease_client();
    let granted = leases.grant(ttl, None).await?.id();
    put_live(client, prefix, granted).await?;
    match lease.compare_exchange(old, granted, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            tracing::debug!(old, new = granted, "etcd lease lost; took a new one");
            Ok(granted)
        }
        Err(current) => {
            let _ = leases.revoke(granted).await;
            Ok(current)
        }
    }
}

/// Once the store's client is replaced ([`EtcdStore::reconnect`](crate::EtcdStore::reconnect)): a task
/// that works on one client stops there and begins again on the new one.
/// Never, once the store is gone (its runtime stops its tasks then).
pub(crate) async fn replaced(client: &mut tokio::sync::watch::Receiver<Client>) {
    if client.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Keeps this process's lease alive; when it was lost (etcd unreachable longer
/// than its time to live), takes a new one: the actions held under the old one
/// show as abandoned elsewhere meanwhile, and their completions get a conflict if
/// a healer rolled them back. Always on the store's client in use.
pub(crate) async fn keep_alive(
    mut clients: tokio::sync::watch::Receiver<Client>,
    prefix: String,
    ttl: i64,
    lease: Arc<AtomicI64>,
) {
    let every = Duration::from_millis((ttl as u64 * 1000 / 3).max(200));
    loop {
        let id = lease.load(Ordering::Acquire);
        let client = clients.borrow_and_update().clone();
        let mut leases = client.lease_client();
        let kept = async {
            if let Ok((mut keeper, mut stream)) = leases.keep_alive(id).await {
                loop {
                    if keeper.keep_alive().await.is_err() {
                        break;
                    }
                    match stream.message().await {
                        Ok(Some(resp)) if resp.ttl() > 0 => {}
                        _ => break,
                    }
                    tokio::time::sleep(every).await;
                    // A write that found the lease expired replaced it meanwhile.
                    if lease.load(Ordering::Acquire) != id {
                        break;
                    }
                }
            }
            tokio::time::sleep(every).await;
        };
        tokio::select! {
            () = kept => {}
            // Kept alive from now on on the new client, at once.
            () = replaced(&mut clients) => continue,
        }
        if lease.load(Ordering::Acquire) != id {
            continue;
        }
        // A lease that still lives is kept; an expired one is replaced.
        let expired = match leases.time_to_live(id, None).await {
            Ok(resp) => resp.ttl() <= 0,
            Err(_) => continue,
        };
        if expired {
            let _ = replace_lease(&client, &prefix, ttl, &lease, id).await;
        }
    }
}
