//! The feed: etcd's watch of the prefix, published to the store's watchers.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use etcd_client::{Client, EventType, GetOptions, WatchOptions};
use fsm_runtime::wire::{Codec, StoredEntry};
use fsm_runtime::{Event, Publisher};

use crate::session::replaced;
use crate::{MAX_ANSWER, unescape};

/// Publishes every history entry written under `prefix` from `revision` on,
/// re-watching from the last revision seen when the watch breaks or the
/// store's client is replaced.
pub(crate) async fn feed(
    mut clients: tokio::sync::watch::Receiver<Client>,
    prefix: String,
    mut revision: i64,
    publisher: Arc<Publisher>,
    codec: Arc<OnceLock<Codec>>,
) {
    loop {
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(revision);
        let mut watch = (clients.borrow_and_update())
            .watch_client()
            .max_decoding_message_size(MAX_ANSWER);
        match watch.watch(prefix.clone(), Some(options)).await {
            Ok(mut stream) => {
                loop {
                    let resp = tokio::select! {
                        message = stream.message() => match message {
                            Ok(Some(resp)) => resp,
                            _ => break,
                        },
                        // Watched again, on the new client, from `revision`.
                        () = replaced(&mut clients) => break,
                    };
                    // The revision to resume from was compacted away. If
                    // nothing under the prefix was written from there to the
                    // compaction, no event was lost (etcd moved on with
                    // others' writes); otherwise the events between are gone:
                    // say so. Either way go on from what etcd kept.
                    if resp.canceled() && resp.compact_revision() > 0 {
                        let (compacted, client) =
                            (resp.compact_revision(), clients.borrow().clone());
                        match written_between(&client, &prefix, revision, compacted).await {
                            Ok(false) => tracing::debug!(
                                from = revision,
                                to = compacted,
                                "etcd compacted the watch's revisions; nothing under the prefix was written in between"
                            ),
                            // Written in between, or not known to be
                            // unwritten: the watchers cannot be told nothing
                            // was lost.
                            written => {
                                tracing::warn!(
                                    from = revision,
                                    to = compacted,
                                    unread = written.err().map(|e| e.to_string()),
                                    "etcd compacted the watch's revisions; watchers told of the gap"
                                );
                                publisher.gap();
                            }
                        }
                        revision = compacted;
                        break;
                    }
                    for event in resp.events() {
                        let Some(kv) = event.kv() else { continue };
                        revision = revision.max(kv.mod_revision() + 1);
                        // Nothing to decode for nobody: the revision above is
                        // all a later watcher needs.
                        if event.event_type() != EventType::Put || !publisher.is_watched() {
                            continue;
                        }
                        let Some(id) = kv
                            .key_str()
                            .ok()
                            .and_then(|k| k.strip_prefix(&prefix))
                            .and_then(|k| k.split_once('/'))
                            .map(|(id, _)| unescape(id))
                        else {
                            continue;
                        };
                        // Nobody watches before a runtime is built over the store.
                        let Some(codec) = codec.get() else { continue };
                        let entry = serde_json::from_slice::<StoredEntry>(kv.value())
                            .map_err(|e| e.to_string())
                            .and_then(|e| codec.decode_entry(e).map_err(|e| e.to_string()));
                        match entry {
                            Ok(entry) => publisher.publish(|| Event {
                                id,
                                entry,
                                position: u64::try_from(kv.mod_revision()).ok(),
                            }),
                            Err(e) => tracing::warn!(key = ?kv.key_str(), "not an fsm entry: {e}"),
                        }
                    }
                }
                tracing::debug!("etcd watch ended; watching again from {revision}");
            }
            Err(e) => tracing::debug!("etcd watch failed: {e}; retrying"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether a key under `prefix` was written (put) from revision `from` to
/// `compacted`, etcd's compacted revision: read as the prefix was at
/// `compacted` (what compaction keeps), the keys whose last write by then
/// was at `from` or after. Every history entry is written with its object's
/// `obj/` key, which no write deletes, so an entry written in between leaves
/// such a key. (Other keys of the prefix, a session's for one, count too: a
/// gap told where none was, never the other way round.)
async fn written_between(
    client: &Client,
    prefix: &str,
    from: i64,
    compacted: i64,
) -> Result<bool, etcd_client::Error> {
    let between = GetOptions::new()
        .with_prefix()
        .with_keys_only()
        .with_revision(compacted)
        .with_min_mod_revision(from)
        .with_limit(1);
    let resp = client.kv_client().get(prefix, Some(between)).await?;
    Ok(!resp.kvs().is_empty())
}
