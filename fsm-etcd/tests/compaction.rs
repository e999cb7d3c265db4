//! `records` while etcd compacts its history: a compaction past the revision
//! the records are read at, landing between two of their pages, fails the call
//! with a retryable error; a call never answers part of the objects, or pages
//! of two revisions.
//!
//! A test binary of its own: compacting etcd again and again would cut off the
//! fresh watches of the tests that run beside it in `etcd.rs`.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use fsm_runtime::testing::machine;
use fsm_runtime::{Actor, Runtime, Store};

use support::{block_on, endpoints, fresh_prefix, store};

/// Calls of `records` over three pages race a compactor that writes one key
/// and compacts to etcd's revision, again and again. Some calls must meet a
/// compaction between their pages (the race happened), and each of those is a
/// retryable error naming it; every other call lists every object, each at
/// the version it was created with (one snapshot, nothing missing).
#[test]
fn records_read_while_etcd_compacts_are_whole_or_a_retryable_error() {
    let Some(store) = store() else { return };
    let rt = Runtime::new(machine(), store).unwrap();
    let admin = Actor::new("admin");
    let ids = support::three_pages(&rt, &admin);

    let stop = AtomicBool::new(false);
    let compactions = AtomicUsize::new(0);
    let (mut whole, mut refused) = (0, 0);
    std::thread::scope(|s| {
        s.spawn(|| {
            block_on(async {
                let mut client = etcd_client::Client::connect(endpoints(), None)
                    .await
                    .unwrap();
                // A key of its own, outside every store's prefix: each put
                // moves the revision on, so each compaction has one to reach.
                let tick = format!("{}tick", fresh_prefix().trim_end_matches('/'));
                while !stop.load(Ordering::SeqCst) {
                    let put = client.put(tick.as_str(), "tick", None).await.unwrap();
                    let revision = put.header().unwrap().revision();
                    client.compact(revision, None).await.unwrap();
                    compactions.fetch_add(1, Ordering::SeqCst);
                    // Paced, so that some calls fall between two compactions.
                    tokio::time::sleep(std::time::Duration::from_millis(25)).await;
                }
            })
        });
        // Stops the compactor however the loop ends, a failed assertion
        // included: the scope waits for it.
        let _stop = Stop(&stop);
        for _ in 0..500 {
            match rt.store().records() {
                Ok(records) => {
                    assert_eq!(records.len(), ids.len(), "every object, once");
                    for ((id, record), expected) in records.iter().zip(&ids) {
                        assert_eq!(id.as_str(), expected);
                        assert_eq!(record.as_ref().unwrap().version, 1, "{id}");
                    }
                    whole += 1;
                }
                Err(e) => {
                    assert!(e.is_retryable(), "{e}");
                    assert!(e.to_string().contains("compacted past the revision"), "{e}");
                    refused += 1;
                }
            }
            if whole > 0 && refused > 0 {
                break;
            }
        }
    });
    let compactions = compactions.load(Ordering::SeqCst);
    assert!(
        refused > 0,
        "no call met a compaction between its pages ({whole} whole, {compactions} compactions)"
    );
    // With the compactor stopped, a call is whole again.
    assert_eq!(rt.store().records().unwrap().len(), ids.len());
}

/// Sets its flag when dropped.
struct Stop<'a>(&'a AtomicBool);

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}
