//! A page of the memory store's listing (`Store::records_after`: 100 objects
//! past one in the middle) at 1,000, 10,000 and 100,000 objects, against
//! reading every record (`Store::records`) at the same size; then how a page's
//! time grows with the store. What looks at every object of 100,000, 100 of
//! them held by an action: a healer's pass, `Runtime::states`, and the first
//! page of a store, which makes its index (group `every object`). And creates: 100,000 objects created into an empty store,
//! their ids in order and in a random order, then the same once a page was
//! asked for, when each create also writes the ordered index that pages read
//! (group `creates`).
//!
//! `cargo bench -p fsm-runtime --bench pages`

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use fsm_runtime::{Actor, Healer, MemoryStore, ObjectId, Runtime, Store};

#[path = "../../benches/report/mod.rs"]
mod report;

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
const PAGE: usize = 100;
/// The cases of `creates`: the ids in a random order or not, and whether a
/// page was asked for first (from then on, the store keeps an ordered index of
/// its ids, which each create writes).
const CREATES: [(&str, bool, bool); 4] = [
    ("in order", false, false),
    ("in random order", true, false),
    ("in order, after a page", false, true),
    ("in random order, after a page", true, true),
];

fn main() {
    report::start();
    let mut c = Criterion::default().configure_from_args();
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/ovc/vm.toml");
    let machine = fsm_core::spec::load(&spec).unwrap();
    let user = Actor::new("bench");
    let mut g = c.benchmark_group("pages");
    for n in SIZES {
        let rt = Runtime::new(machine.clone(), MemoryStore::new()).unwrap();
        for i in 0..n {
            rt.create(format!("vm-{i:06}"), &user).unwrap();
        }
        let store = rt.store();
        let middle = ObjectId::from(format!("vm-{:06}", n / 2));
        let page = store.records_after(Some(&middle), PAGE).unwrap();
        assert_eq!(page.len(), PAGE);
        assert!(page[0].0 > middle);
        g.bench_with_input(BenchmarkId::new("a page of 100", n), &n, |b, _| {
            b.iter(|| black_box(store.records_after(Some(&middle), PAGE).unwrap()))
        });
        g.bench_with_input(BenchmarkId::new("every record", n), &n, |b, _| {
            b.iter(|| black_box(store.records().unwrap()))
        });
    }
    g.finish();

    // What looks at every object: the healer's pass and `Runtime::states`, at
    // the largest size, 100 of the objects held by an action (not late).
    let n = SIZES[2];
    let rt = Runtime::new(machine.clone(), MemoryStore::new()).unwrap();
    for i in 0..n {
        rt.create(format!("vm-{i:06}"), &user).unwrap();
    }
    let held: Vec<_> = (0..n)
        .step_by(n / 100)
        .map(|i| rt.start(format!("vm-{i:06}"), &user, "deploy").unwrap())
        .collect();
    let healer = Healer::new().deadline(Duration::from_secs(3_600));
    let report = healer.heal(&rt).unwrap();
    assert!(report.healed.is_empty() && report.errors.is_empty());
    let mut g = c.benchmark_group("every object");
    g.sample_size(20);
    g.bench_function("a healer's pass", |b| {
        b.iter(|| black_box(healer.heal(&rt).unwrap()))
    });
    g.bench_function("each object's state", |b| {
        b.iter(|| black_box(rt.states().unwrap()))
    });
    // The first page of a store that has kept no index yet: it makes it.
    g.sample_size(10);
    g.bench_function("the first page (the index made)", |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                let fresh = Runtime::new(machine.clone(), MemoryStore::new()).unwrap();
                for i in 0..n {
                    fresh
                        .create(format!("vm-{:06}", i * 7_919 % n), &user)
                        .unwrap();
                }
                let start = Instant::now();
                black_box(fresh.store().records_after(None, PAGE).unwrap());
                took += start.elapsed();
            }
            took
        })
    });
    g.finish();
    drop(held);

    let in_order: Vec<String> = (0..n).map(|i| format!("vm-{i:06}")).collect();
    // A fixed permutation: multiplying by a number prime to `n` visits each
    // residue once.
    let scrambled: Vec<String> = (0..n).map(|i| format!("vm-{:06}", i * 7_919 % n)).collect();
    let mut g = c.benchmark_group("creates");
    g.sample_size(10).throughput(Throughput::Elements(n as u64));
    for (case, ids, paged) in CREATES
        .map(|(case, scramble, paged)| (case, if scramble { &scrambled } else { &in_order }, paged))
    {
        g.bench_function(case, |b| {
            b.iter_custom(|iters| {
                let mut took = Duration::ZERO;
                for _ in 0..iters {
                    let rt = Runtime::new(machine.clone(), MemoryStore::new()).unwrap();
                    if paged {
                        // A page asked for first: the store keeps its index.
                        rt.store().records_after(None, 1).unwrap();
                    }
                    let start = Instant::now();
                    for id in ids {
                        rt.create(id.as_str(), &user).unwrap();
                    }
                    took += start.elapsed();
                }
                took
            })
        });
    }
    g.finish();
    c.final_summary();
    // The growth, from criterion's estimates of this run.
    let rows: Vec<_> = SIZES
        .into_iter()
        .filter_map(|n| {
            let page = report::mean("pages", &format!("a page of 100/{n}"))?;
            let all = report::mean("pages", &format!("every record/{n}"))?;
            Some((n, page, all))
        })
        .collect();
    if !rows.is_empty() {
        println!(
            "\n{:>8} {:>14} {:>18} {:>8}",
            "objects", "a page, µs", "every record, µs", "ratio"
        );
    }
    for (n, page, all) in rows {
        println!(
            "{n:>8} {:>14.2} {:>18.1} {:>8.4}",
            page / 1e3,
            all / 1e3,
            page / all
        );
    }
    // A page's growth with the store: each size against the smallest.
    let cases = SIZES.map(|n| format!("a page of 100/{n}"));
    report::print_ratios("pages", "page", 1.0, &cases.each_ref().map(String::as_str));
    report::print_ratios(
        "every object",
        "pass",
        1.0,
        &[
            "a healer's pass",
            "each object's state",
            "the first page (the index made)",
        ],
    );
    for (case, ..) in CREATES {
        if let Some(all) = report::mean("creates", case) {
            println!("a create, {n} {case}: {:.0} ns", all / n as f64);
        }
    }
}
