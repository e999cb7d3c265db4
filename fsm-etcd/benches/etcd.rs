//! Completed actions per second through the runtime on etcd, against raw
//! etcd-client transactions doing the same compare-and-puts, with 1 and 8
//! concurrent clients. Two raw baselines: one reads the record's version before
//! each action (as the store did before it kept records), one keeps the version
//! it last wrote and reads only when a write loses (as the store does now).
//!
//! Needs an etcd: `FSM_ETCD_ENDPOINTS` (default `127.0.0.1:2379`).
//! `cargo bench -p fsm-etcd`
//!
//! The cases run in rounds, each round in a rotated order, so that a drift of
//! the machine or of etcd (its database grows as the run goes) falls on all
//! alike; each round gives one throughput ratio of the runtime to each baseline. The report prints, per client count, each case's median time per
//! action and the ratio's median and spread over the rounds.
//! `FSM_BENCH_ROUNDS` (default 15) and `FSM_BENCH_ACTIONS` (actions per client
//! per round, default 300) set the run's length; `FSM_BENCH_ONLY=raw` (or
//! `raw-kept`, or `fsm`) runs one case alone, to profile it; `FSM_BENCH_CLIENTS` (default `1,8`) lists
//! the client counts.
//!
//! Before them, a listing: every record of `FSM_BENCH_LIST` objects (default
//! 1,000; 0 skips it) read at once (`Store::records`) against the same read
//! one object at a time (`ids`, then `load` of each), in up to 9 rounds. It
//! comes first, on an etcd the rounds of writes have not loaded yet: for
//! some seconds after them etcd answered each linearizable read in about
//! 10 ms instead of 0.4, raw etcd-client's as slowly as the store's, and a
//! listing after them measured that (BENCHMARKS.md, sixty-fifth session).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp};
use fsm_core::{ActionId, Machine};
use fsm_etcd::EtcdStore;
use fsm_runtime::testing::machine;
use fsm_runtime::{Actor, Runtime, Store};

#[allow(dead_code)] // some of it is the runtime bench's
#[path = "../../benches/report/spread.rs"]
mod spread;
use spread::spread;

fn endpoint() -> String {
    std::env::var("FSM_ETCD_ENDPOINTS").unwrap_or_else(|_| "127.0.0.1:2379".into())
}

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}: a number, not {v:?}"))
        })
        .unwrap_or(default)
}

/// The client counts to measure: `FSM_BENCH_CLIENTS` (`1,8`), else 1 and 8.
fn client_counts() -> Vec<usize> {
    std::env::var("FSM_BENCH_CLIENTS").map_or_else(
        |_| vec![1, 8],
        |list| {
            list.split(',')
                .map(|n| {
                    n.trim()
                        .parse()
                        .expect("FSM_BENCH_CLIENTS: numbers, comma-separated")
                })
                .collect()
        },
    )
}

/// Runs `work(client)` on `clients` threads at once and answers the wall time.
fn on_threads(clients: usize, work: impl Fn(usize) + Sync) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for c in 0..clients {
            let work = &work;
            s.spawn(move || work(c));
        }
    });
    start.elapsed()
}

/// One action the raw way: two transactions (start, complete), each comparing
/// the record's version and putting the record and a history entry, as the
/// store does. The version is `kept` from the last action, or read first when
/// there is none; the answer is the version after.
fn raw_action(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    key: &str,
    kept: Option<i64>,
    payload: (&[u8], &[u8]),
) -> i64 {
    let (record, entry) = payload;
    rt.block_on(async {
        let mut kv = client.kv_client();
        let first = match kept {
            Some(version) => version,
            None => {
                let got = kv.get(key, None).await.unwrap();
                got.kvs().first().map_or(0, |kv| kv.version())
            }
        };
        for version in first..first + 2 {
            let txn = Txn::new()
                .when([Compare::version(key, CompareOp::Equal, version)])
                .and_then([
                    TxnOp::put(key, record, None),
                    TxnOp::put(format!("{key}/h/{version:020}"), entry, None),
                ]);
            assert!(kv.txn(txn).await.unwrap().succeeded());
        }
        first + 2
    })
}

/// The cases, in the order the report names them.
const CASES: [&str; 3] = ["raw", "raw-kept", "fsm"];

fn bench(machine: &Machine, rounds: usize, actions: usize) {
    let client_rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let raw = client_rt
        .block_on(Client::connect([endpoint()], None))
        .unwrap();
    let run = format!("/fsm-bench/{}/", std::process::id());
    println!(
        "\n{rounds} rounds of {actions} actions per client per case; time per completed action (median over rounds)\n"
    );
    println!(
        "{:>7} {:>9} {:>9} {:>9}   throughput ratio: median (middle half; all rounds)",
        "clients", "raw", "raw-kept", "fsm"
    );
    for clients in client_counts() {
        // Payloads as large as the store's.
        let store = EtcdStore::connect([endpoint()], &format!("{run}fsm-{clients}/")).unwrap();
        let rt = Runtime::new(machine.clone(), store).unwrap();
        let actor = Actor::new("bench");
        rt.create("size", &actor).unwrap();
        let codec = fsm_runtime::wire::Codec::new(rt.machine());
        let record = serde_json::to_vec(&codec.encode_record(&rt.get("size").unwrap())).unwrap();
        let entry =
            serde_json::to_vec(&codec.encode_entry(&rt.history("size").unwrap()[0])).unwrap();
        let ids: Vec<String> = (0..clients).map(|t| format!("vm-{t}")).collect();
        for id in &ids {
            rt.create(id.as_str(), &actor).unwrap();
        }
        let running: Vec<AtomicBool> = ids.iter().map(|_| AtomicBool::new(false)).collect();
        let (start, stop) = (ActionId(0), ActionId(1));

        let raw_case = |keeps: bool| {
            on_threads(clients, |t| {
                let key = format!("{run}raw-{clients}-{keeps}/{t}");
                let mut kept = None;
                for _ in 0..actions {
                    let after = raw_action(&client_rt, &raw, &key, kept, (&record, &entry));
                    kept = keeps.then_some(after);
                }
            })
        };
        let fsm_case = || {
            on_threads(clients, |t| {
                for _ in 0..actions {
                    let on = running[t].load(Ordering::Relaxed);
                    let action = if on { stop } else { start };
                    let held = rt.start(ids[t].as_str(), &actor, action).unwrap();
                    black_box(held.complete().unwrap());
                    running[t].store(!on, Ordering::Relaxed);
                }
            })
        };
        let case = |name: &str| match name {
            "raw" => raw_case(false),
            "raw-kept" => raw_case(true),
            "fsm" => fsm_case(),
            other => panic!("FSM_BENCH_ONLY: raw, raw-kept or fsm, not {other:?}"),
        };
        let per_action = |d: Duration| d.as_nanos() as f64 / (clients * actions) as f64;
        if let Ok(only) = std::env::var("FSM_BENCH_ONLY") {
            let times: Vec<f64> = (0..rounds).map(|_| per_action(case(&only))).collect();
            println!("{clients:>7} {only}: {times:.0?}");
            continue;
        }
        // A warm-up round of each, not counted.
        for name in CASES {
            case(name);
        }
        let mut times: [Vec<f64>; 3] = Default::default();
        let mut ratios: [Vec<f64>; 2] = Default::default();
        for round in 0..rounds {
            let mut took = [0.0; 3];
            for k in 0..CASES.len() {
                let c = (round + k) % CASES.len();
                took[c] = per_action(case(CASES[c]));
            }
            for c in 0..CASES.len() {
                times[c].push(took[c]);
            }
            // Throughput of the runtime over each baseline's.
            ratios[0].push(took[0] / took[2]);
            ratios[1].push(took[1] / took[2]);
        }
        let [raw_ns, kept_ns, fsm_ns] = times.map(|mut t| spread(&mut t).median);
        let us = |ns: f64| ns / 1000.0;
        println!(
            "{clients:>7} {:>7.0}µs {:>7.0}µs {:>7.0}µs",
            us(raw_ns),
            us(kept_ns),
            us(fsm_ns)
        );
        for (baseline, ratios) in ["raw", "raw-kept"].iter().zip(&mut ratios) {
            println!("{:>40} fsm ÷ {baseline}: {:.3}", "", spread(ratios));
        }
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

/// Every object read at once ([`Store::records`]: a transaction per thousand)
/// against the same objects read one at a time (`ids`, then `load` of each:
/// what a listing, the healer's pass and the metrics did before), over
/// `objects` objects, the two in turn in each round.
fn listing(machine: &Machine, rounds: usize, objects: usize) {
    let prefix = format!("/fsm-bench/{}/list/", std::process::id());
    let store = EtcdStore::connect([endpoint()], &prefix).unwrap();
    let rt = Runtime::new(machine.clone(), store).unwrap();
    let actor = Actor::new("bench");
    on_threads(8, |t| {
        for n in (t..objects).step_by(8) {
            rt.create(format!("vm-{n}").as_str(), &actor).unwrap();
        }
    });
    let at_once = || {
        let start = Instant::now();
        assert_eq!(black_box(rt.store().records().unwrap()).len(), objects);
        start.elapsed().as_secs_f64()
    };
    let one_by_one = || {
        let start = Instant::now();
        let ids = rt.store().ids().unwrap();
        for id in &ids {
            black_box(rt.store().load(id).unwrap());
        }
        assert_eq!(ids.len(), objects);
        start.elapsed().as_secs_f64()
    };
    at_once();
    one_by_one();
    let (mut times, mut ratios): ([Vec<f64>; 2], Vec<f64>) = Default::default();
    for round in 0..rounds {
        let (a, b) = if round % 2 == 0 {
            (at_once(), one_by_one())
        } else {
            let b = one_by_one();
            (at_once(), b)
        };
        times[0].push(a);
        times[1].push(b);
        ratios.push(b / a);
    }
    let [a, b] = times.map(|mut t| spread(&mut t).median * 1000.0);
    println!(
        "listing {objects} objects ({rounds} rounds): records {a:.1} ms, ids then load of each {b:.1} ms"
    );
    println!(
        "{:>40} records ÷ one by one (throughput): {:.1}",
        "",
        spread(&mut ratios)
    );
    let client_rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let _ = client_rt.block_on(async {
        let mut raw = Client::connect([endpoint()], None).await?;
        raw.delete(
            prefix.as_str(),
            Some(etcd_client::DeleteOptions::new().with_prefix()),
        )
        .await
    });
}

fn main() {
    let machine = machine();
    assert_eq!(machine.action(ActionId(0)).name.as_ref(), "start");
    if let Err(e) = EtcdStore::connect([endpoint()], "/fsm-bench-probe/") {
        eprintln!(
            "no etcd at {} ({e}): start one, or set FSM_ETCD_ENDPOINTS; nothing measured",
            endpoint()
        );
        std::process::exit(1);
    }
    let objects = setting("FSM_BENCH_LIST", 1000);
    if objects > 0 && std::env::var("FSM_BENCH_ONLY").is_err() {
        listing(&machine, setting("FSM_BENCH_ROUNDS", 15).min(9), objects);
    }
    bench(
        &machine,
        setting("FSM_BENCH_ROUNDS", 15),
        setting("FSM_BENCH_ACTIONS", 300),
    );
}
