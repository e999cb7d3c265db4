//! `fsm serve` against the in-process runtime, in one run: actions by
//! concurrent HTTP clients on loopback, and the same actions by as many threads
//! calling `Runtime::run`. Prints actions per second and the p50/p99 latency of
//! each, and the ratio.
//!
//! `cargo bench -p fsm-serve --bench serve`, with:
//! - `FSM_BENCH_SECONDS` (default 5) and `FSM_BENCH_CLIENTS` (default 16);
//! - `FSM_BENCH_SPLIT=1`: each action as two requests, its start
//!   (`POST .../actions/{a}`, answered 201 with the object and its fence) and
//!   its completion by the fence (`POST .../in-flight/{fence}/complete`), the
//!   start's latency reported apart; by default one request, `?run=true`;
//! - `FSM_BENCH_ETCD=host:port[,...]`: the service and the in-process runtime
//!   on that etcd, each under a prefix of its own (deleted after), not in
//!   memory.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fsm_etcd::{EtcdAccess, EtcdStore};
use fsm_runtime::{Actor, MemoryStore, Runtime, Store};
use fsm_serve::{Config, Service, StoreKind, Tokens};
use reqwest::StatusCode;

const TOKEN: &str = "bench-token-0123456789";
const OBJECTS_PER_CLIENT: usize = 8;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Throughput and latency percentiles of `latencies` taken over `elapsed`.
fn report(what: &str, mut latencies: Vec<Duration>, elapsed: Duration) -> f64 {
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    let rate = latencies.len() as f64 / elapsed.as_secs_f64();
    println!(
        "{what:<48} {rate:>10.0} /s   p50 {:>7.1} µs   p99 {:>7.1} µs   ({} actions)",
        at(0.50).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6,
        latencies.len()
    );
    rate
}

/// The action that moves a VM from where it is and back: RUNNING ⇄ PAUSED.
fn next(running: bool) -> &'static str {
    if running { "pause" } else { "resume" }
}

/// A request's answer, which must have `status`: its body.
async fn answered(request: reqwest::RequestBuilder, status: StatusCode) -> serde_json::Value {
    let r = request.bearer_auth(TOKEN).send().await.unwrap();
    let got = r.status();
    let body = r.bytes().await.unwrap();
    assert_eq!(got, status, "{}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

/// What one client measured: each action's latency, and each start's (split).
#[derive(Default)]
struct Taken {
    actions: Vec<Duration>,
    starts: Vec<Duration>,
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let seconds = Duration::from_secs(env("FSM_BENCH_SECONDS", 5));
    let clients = env("FSM_BENCH_CLIENTS", 16) as usize;
    let split = env("FSM_BENCH_SPLIT", 0) == 1;
    let etcd: Option<Vec<String>> = std::env::var("FSM_BENCH_ETCD")
        .ok()
        .map(|e| e.split(',').map(str::to_owned).collect());
    let run = format!(
        "/fsm-bench-serve/{}-{}/",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    );
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/ovc/vm.toml");
    let machine = fsm_core::spec::load(&spec).unwrap();
    println!(
        "{clients} clients, {} s each, actions {} on OVC VMs ({} store)\n",
        seconds.as_secs(),
        match split {
            true => "started, then completed by their fence",
            false => "run whole",
        },
        match etcd {
            Some(_) => "etcd",
            None => "memory",
        }
    );

    // The service, on loopback.
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut config = Config::new(vec![spec.clone()]);
    if let Some(endpoints) = &etcd {
        config.store = StoreKind::Etcd {
            access: EtcdAccess::new(endpoints.clone()),
            prefix: format!("{run}serve/"),
        };
    }
    let tokens = format!("[[token]]\ntoken = \"{TOKEN}\"\nactor = \"bench\"\n");
    let service = Service::open(&config, Tokens::parse(&tokens).unwrap(), tokio.handle()).unwrap();
    let (served, elapsed) = tokio.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(fsm_serve::serve(service.clone(), listener, async {
            let _ = stopped.await;
        }));
        let http = reqwest::Client::new();
        // Each client its own VMs, deployed, so that clients never meet.
        for c in 0..clients {
            for o in 0..OBJECTS_PER_CLIENT {
                let id = format!("vm-{c}-{o}");
                let create = http.post(format!("{base}/v1/vm/objects"));
                answered(
                    create.json(&serde_json::json!({ "id": id })),
                    StatusCode::CREATED,
                )
                .await;
                let deploy =
                    http.post(format!("{base}/v1/vm/objects/{id}/actions/deploy?run=true"));
                answered(deploy, StatusCode::OK).await;
            }
        }
        let start = Instant::now();
        let tasks: Vec<_> = (0..clients)
            .map(|c| {
                let (http, base) = (http.clone(), base.clone());
                tokio::spawn(async move {
                    let mut running = [true; OBJECTS_PER_CLIENT];
                    let mut taken = Taken::default();
                    let mut i = 0;
                    while start.elapsed() < seconds {
                        let o = i % OBJECTS_PER_CLIENT;
                        let url = format!(
                            "{base}/v1/vm/objects/vm-{c}-{o}/actions/{}",
                            next(running[o])
                        );
                        let t = Instant::now();
                        if split {
                            let started = answered(http.post(url), StatusCode::CREATED).await;
                            taken.starts.push(t.elapsed());
                            let end = format!(
                                "{base}{}/complete",
                                started["in_flight_url"].as_str().unwrap()
                            );
                            answered(http.post(end), StatusCode::OK).await;
                        } else {
                            answered(http.post(format!("{url}?run=true")), StatusCode::OK).await;
                        }
                        taken.actions.push(t.elapsed());
                        running[o] = !running[o];
                        i += 1;
                    }
                    taken
                })
            })
            .collect();
        let mut all = Taken::default();
        for t in tasks {
            let taken = t.await.unwrap();
            all.actions.extend(taken.actions);
            all.starts.extend(taken.starts);
        }
        let elapsed = start.elapsed();
        let _ = stop.send(());
        server.await.unwrap().unwrap();
        (all, elapsed)
    });
    let serve_rate = match split {
        true => {
            report(
                "fsm serve, POST .../actions/{a} (the start)",
                served.starts,
                elapsed,
            );
            report(
                "fsm serve, the start, then .../complete",
                served.actions,
                elapsed,
            )
        }
        false => report(
            "fsm serve, POST .../actions/{a}?run=true",
            served.actions,
            elapsed,
        ),
    };
    drop(service);

    // The same actions in process, by as many threads.
    let direct_rate = match &etcd {
        Some(endpoints) => {
            let store = EtcdStore::connect(endpoints, &format!("{run}runtime/")).unwrap();
            in_process(machine, store, clients, seconds)
        }
        None => in_process(machine, MemoryStore::new(), clients, seconds),
    };
    println!(
        "\nfsm serve ÷ in process: {:.4} of the throughput",
        serve_rate / direct_rate
    );
    if let Some(endpoints) = etcd {
        tokio.block_on(async {
            let mut client = etcd_client::Client::connect(endpoints, None).await.unwrap();
            let everything = etcd_client::DeleteOptions::new().with_prefix();
            client.delete(run, Some(everything)).await.unwrap();
        });
    }
}

/// `clients` threads running actions whole with `Runtime::run` for `seconds`
/// on VMs of their own in `store`: the rate, reported.
fn in_process<S: Store + 'static>(
    machine: fsm_core::Machine,
    store: S,
    clients: usize,
    seconds: Duration,
) -> f64 {
    let rt = Arc::new(Runtime::new(machine, store).unwrap());
    let actor = Actor::new("bench");
    for c in 0..clients {
        for o in 0..OBJECTS_PER_CLIENT {
            let id = format!("vm-{c}-{o}");
            rt.create(id.as_str(), &actor).unwrap();
            rt.run(id.as_str(), &actor, "deploy").unwrap();
        }
    }
    let start = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let (rt, actor) = (rt.clone(), actor.clone());
            std::thread::spawn(move || {
                let ids: Vec<String> = (0..OBJECTS_PER_CLIENT)
                    .map(|o| format!("vm-{c}-{o}"))
                    .collect();
                let mut running = [true; OBJECTS_PER_CLIENT];
                let mut latencies = Vec::new();
                let mut i = 0;
                while start.elapsed() < seconds {
                    let o = i % OBJECTS_PER_CLIENT;
                    let t = Instant::now();
                    rt.run(ids[o].as_str(), &actor, next(running[o])).unwrap();
                    latencies.push(t.elapsed());
                    running[o] = !running[o];
                    i += 1;
                }
                latencies
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in threads {
        all.extend(t.join().unwrap());
    }
    report("in process, Runtime::run", all, start.elapsed())
}
