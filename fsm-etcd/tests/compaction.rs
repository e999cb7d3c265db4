//! `records` and `for_each_record` while etcd compacts its history: a
//! compaction past the revision the records are read at, landing between two
//! of their pages, fails the call with a retryable error; a call never answers
//! part of the objects, or pages of two revisions.
//!
//! A test binary of its own: compacting etcd again and again would cut off the
//! fresh watches of the tests that run beside it in `etcd.rs`.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use fsm_runtime::testing::machine;
use fsm_runtime::{Actor, Runtime, Store};

use support::{block_on, endpoints, fresh_prefix, store, with_etcd};

/// Calls of `records` over three pages race a compactor that writes one key
/// and compacts to etcd's revision, again and again. Some calls must meet a
/// compaction between their pages (the race happened), and each of those is a
/// retryable error naming it; every other call lists every object, each at
/// the version it was created with (one snapshot, nothing missing).
#[test]
fn records_read_while_etcd_compacts_are_whole_or_a_retryable_error() {
    let _alone = alone();
    let Some((rt, ids)) = three_pages() else {
        return;
    };

    let stop = AtomicBool::new(false);
    let compactions = AtomicUsize::new(0);
    let (mut whole, mut refused) = (0, 0);
    std::thread::scope(|s| {
        s.spawn(|| {
            block_on(async {
                let mut client = etcd_client::Client::connect(endpoints(), None)
                    .await
                    .unwrap();
                while !stop.load(Ordering::SeqCst) {
                    compact_past_now(&mut client).await;
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

/// `for_each_record` and `for_each_record_async` read a request at a time and
/// let `look` see each request's records before the next is made: a
/// compaction made from inside `look`, on the first object, overtakes the
/// read. Each form has then looked at the first request's thousand objects
/// and no more, and fails with the retryable error. (A form that read every
/// record before looking would answer `Ok`, having looked at all of them.)
#[test]
fn a_compaction_while_records_are_looked_at_fails_the_look_retryably() {
    let _alone = alone();
    let Some((rt, ids)) = three_pages() else {
        return;
    };
    // Each form compacts on its first object, from a thread of its own (the
    // async form's `look` runs inside a runtime), then counts what it sees.
    let looker = |looked: &mut usize| {
        let compacted = *looked > 0;
        *looked += 1;
        if !compacted {
            std::thread::scope(|s| s.spawn(compact_to_now).join().unwrap());
        }
    };
    let mut looked = 0;
    let blocking = rt.store().for_each_record(|_, _| looker(&mut looked));
    let mut looked_async = 0;
    let in_async = block_on(
        rt.store()
            .for_each_record_async(|_, _| looker(&mut looked_async)),
    );
    for (form, answer, looked) in [
        ("for_each_record", blocking, looked),
        ("for_each_record_async", in_async, looked_async),
    ] {
        let e = answer.expect_err(form);
        assert!(e.is_retryable(), "{form}: {e}");
        assert!(
            e.to_string().contains("compacted past the revision"),
            "{form}: {e}"
        );
        assert_eq!(
            looked,
            1_000,
            "{form}: the first request's objects, of {}",
            ids.len()
        );
    }
    // Read again, each form is whole.
    let mut again = 0;
    rt.store().for_each_record(|_, _| again += 1).unwrap();
    block_on(rt.store().for_each_record_async(|_, _| again += 1)).unwrap();
    assert_eq!(again, 2 * ids.len());
}

/// A runtime on a store of its own holding three requests' worth of objects,
/// and their ids in order; `None` as [`store`] says.
fn three_pages() -> Option<(Runtime<fsm_etcd::EtcdStore>, Vec<String>)> {
    let rt = Runtime::new(machine(), store()?).unwrap();
    let ids = support::three_pages(&rt, &Actor::new("admin"));
    Some((rt, ids))
}

/// [`compact_past_now`] with a client of its own.
fn compact_to_now() {
    with_etcd(|mut client| async move { compact_past_now(&mut client).await });
}

/// Writes a key outside every store's prefix (moving etcd's revision on past
/// every snapshot read so far, so each compaction has one to reach), then
/// compacts to that revision.
async fn compact_past_now(client: &mut etcd_client::Client) {
    let tick = format!("{}tick", fresh_prefix().trim_end_matches('/'));
    let put = client.put(tick, "tick", None).await.unwrap();
    let revision = put.header().unwrap().revision();
    client.compact(revision, None).await.unwrap();
}

/// Held by each test for its whole run: one test's compactions would fail
/// the other's reads at moments it does not choose.
fn alone() -> std::sync::MutexGuard<'static, ()> {
    static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Sets its flag when dropped.
struct Stop<'a>(&'a AtomicBool);

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}
