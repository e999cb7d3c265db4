//! `fsm serve` against the in-process runtime, in one run: actions run whole
//! (`?run=true`, start and complete in one request) by concurrent HTTP clients on
//! loopback, and the same actions by as many threads calling `Runtime::run`.
//! Prints requests per second and the p50/p99 latency of each, and the ratio.
//!
//! `cargo bench -p fsm-serve --bench serve` (`FSM_BENCH_SECONDS`, default 5;
//! `FSM_BENCH_CLIENTS`, default 16).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fsm_runtime::{Actor, MemoryStore, Runtime};
use fsm_serve::{Config, Service, Tokens};

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
        "{what:<44} {rate:>10.0} /s   p50 {:>7.1} µs   p99 {:>7.1} µs   ({} actions)",
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

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let seconds = Duration::from_secs(env("FSM_BENCH_SECONDS", 5));
    let clients = env("FSM_BENCH_CLIENTS", 16) as usize;
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/ovc/vm.toml");
    let machine = fsm_core::spec::load(&spec).unwrap();
    println!(
        "{clients} clients, {} s each, actions run whole on OVC VMs (memory store)\n",
        seconds.as_secs()
    );

    // The service, on loopback.
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let service = Service::open(
        &Config::new(vec![spec.clone()]),
        Tokens::parse(&format!(
            "[[token]]\ntoken = \"{TOKEN}\"\nactor = \"bench\"\n"
        ))
        .unwrap(),
        tokio.handle(),
    )
    .unwrap();
    let served = tokio.block_on(async {
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
                http.post(format!("{base}/v1/vm/objects"))
                    .bearer_auth(TOKEN)
                    .json(&serde_json::json!({ "id": id }))
                    .send()
                    .await
                    .unwrap();
                http.post(format!("{base}/v1/vm/objects/{id}/actions/deploy?run=true"))
                    .bearer_auth(TOKEN)
                    .send()
                    .await
                    .unwrap();
            }
        }
        let start = Instant::now();
        let tasks: Vec<_> = (0..clients)
            .map(|c| {
                let (http, base) = (http.clone(), base.clone());
                tokio::spawn(async move {
                    let mut running = [true; OBJECTS_PER_CLIENT];
                    let mut latencies = Vec::new();
                    let mut i = 0;
                    while start.elapsed() < seconds {
                        let o = i % OBJECTS_PER_CLIENT;
                        let url = format!(
                            "{base}/v1/vm/objects/vm-{c}-{o}/actions/{}?run=true",
                            next(running[o])
                        );
                        let t = Instant::now();
                        let r = http.post(url).bearer_auth(TOKEN).send().await.unwrap();
                        let status = r.status();
                        let body = r.bytes().await.unwrap();
                        assert_eq!(
                            status,
                            reqwest::StatusCode::OK,
                            "{}",
                            String::from_utf8_lossy(&body)
                        );
                        latencies.push(t.elapsed());
                        running[o] = !running[o];
                        i += 1;
                    }
                    latencies
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        let elapsed = start.elapsed();
        let _ = stop.send(());
        server.await.unwrap().unwrap();
        (all, elapsed)
    });
    let serve_rate = report(
        "fsm serve, POST .../actions/{a}?run=true",
        served.0,
        served.1,
    );

    // The same actions in process, by as many threads.
    let rt = Arc::new(Runtime::new(machine, MemoryStore::new()).unwrap());
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
    let direct_rate = report("in process, Runtime::run", all, start.elapsed());
    println!(
        "\nfsm serve ÷ in process: {:.4} of the throughput",
        serve_rate / direct_rate
    );
}
