//! Completed actions per second through the runtime on etcd, against raw
//! etcd-client transactions doing the same reads and compare-and-puts, with 1 and
//! 8 concurrent clients, in one run.
//!
//! Needs an etcd: `FSM_ETCD_ENDPOINTS` (default `127.0.0.1:2379`).
//! `cargo bench -p fsm-etcd`

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp};
use fsm_core::{ActionId, Machine};
use fsm_etcd::EtcdStore;
use fsm_runtime::testing::machine;
use fsm_runtime::{Actor, Runtime, Store};

#[path = "../../benches/report/mod.rs"]
mod report;

const CASES: [&str; 2] = ["raw etcd-client txn", "fsm runtime (EtcdStore)"];

fn endpoint() -> String {
    std::env::var("FSM_ETCD_ENDPOINTS").unwrap_or_else(|_| "127.0.0.1:2379".into())
}

/// Runs `work(client, iterations)` on `clients` threads and answers the wall time.
fn on_threads(clients: usize, iters: u64, work: impl Fn(usize, u64) + Sync) -> Duration {
    let per = iters.div_ceil(clients as u64);
    let start = Instant::now();
    std::thread::scope(|s| {
        for c in 0..clients {
            let work = &work;
            s.spawn(move || work(c, per));
        }
    });
    start.elapsed()
}

/// One action the raw way: read the record's version, then two transactions
/// (start, complete), each comparing the version and putting the record and a
/// history entry, as the store does.
fn raw_action(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    key: &str,
    record: &[u8],
    entry: &[u8],
) {
    rt.block_on(async {
        let mut kv = client.kv_client();
        let got = kv.get(key, None).await.unwrap();
        let first = got.kvs().first().map_or(0, |kv| kv.version());
        for version in first..first + 2 {
            let txn = Txn::new()
                .when([Compare::version(key, CompareOp::Equal, version)])
                .and_then([
                    TxnOp::put(key, record, None),
                    TxnOp::put(format!("{key}/h/{version:020}"), entry, None),
                ]);
            assert!(kv.txn(txn).await.unwrap().succeeded());
        }
    });
}

fn bench(c: &mut Criterion, machine: &Machine) {
    let Ok(client_rt) = tokio::runtime::Runtime::new() else {
        return;
    };
    let raw = client_rt
        .block_on(Client::connect([endpoint()], None))
        .unwrap();
    let run = format!("/fsm-bench/{}/", std::process::id());
    for clients in [1usize, 8] {
        let mut g = c.benchmark_group(format!("etcd-{clients}-clients"));
        g.throughput(Throughput::Elements(1));
        g.sample_size(10).measurement_time(Duration::from_secs(5));

        // Payloads as large as the store's.
        let store = EtcdStore::connect([endpoint()], &format!("{run}fsm-{clients}/")).unwrap();
        let rt = Runtime::new(machine.clone(), store).unwrap();
        let actor = Actor::new("bench");
        rt.create("size", &actor).unwrap();
        let codec = fsm_runtime::wire::Codec::new(rt.machine());
        let record = serde_json::to_vec(&codec.encode_record(&rt.get("size").unwrap())).unwrap();
        let entry =
            serde_json::to_vec(&codec.encode_entry(&rt.history("size").unwrap()[0])).unwrap();

        g.bench_function(CASES[0], |b| {
            b.iter_custom(|iters| {
                on_threads(clients, iters, |t, n| {
                    let key = format!("{run}raw-{clients}/{t}");
                    for _ in 0..n {
                        raw_action(&client_rt, &raw, &key, &record, &entry);
                    }
                })
            })
        });

        let ids: Vec<String> = (0..clients).map(|t| format!("vm-{t}")).collect();
        for id in &ids {
            rt.create(id.as_str(), &actor).unwrap();
        }
        let running: Vec<AtomicBool> = ids.iter().map(|_| AtomicBool::new(false)).collect();
        let (start, stop) = (ActionId(0), ActionId(1));
        g.bench_function(CASES[1], |b| {
            b.iter_custom(|iters| {
                on_threads(clients, iters, |t, n| {
                    for _ in 0..n {
                        let on = running[t].load(Ordering::Relaxed);
                        let action = if on { stop } else { start };
                        let record = rt.start(ids[t].as_str(), &actor, action).unwrap();
                        black_box(record.complete().unwrap());
                        running[t].store(!on, Ordering::Relaxed);
                    }
                })
            })
        });
        g.finish();
        black_box(rt.store().ids().unwrap());
    }
    // Leave nothing behind.
    let _ = client_rt.block_on(async {
        raw.kv_client()
            .delete(
                run.as_str(),
                Some(etcd_client::DeleteOptions::new().with_prefix()),
            )
            .await
    });
}

fn main() {
    let machine = machine();
    assert_eq!(machine.action(ActionId(0)).name.as_ref(), "start");
    if EtcdStore::connect([endpoint()], "/fsm-bench-probe/").is_err() {
        eprintln!(
            "no etcd at {}: set FSM_ETCD_ENDPOINTS; nothing measured",
            endpoint()
        );
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c, &machine);
    c.final_summary();
    for clients in [1, 8] {
        report::print_ratios(&format!("etcd-{clients}-clients"), "action", 1.0, &CASES);
    }
}
