//! The table tools on generated specs of three sizes: what `fsm check`, `fsm diagram
//! --format dot`, `fsm paths` and `fsm diff` do, as library calls (the spec's text
//! parsed and checked into a machine; the machine drawn as DOT; its test paths
//! computed; the changes and likely renames from it to the same spec with every
//! static state renamed, the most a diff has to pair).
//!
//! ```sh
//! cargo bench -p fsm-core --bench tools
//! ```
//!
//! The specs come from `tests/common/generated.rs`: N static states in a ring plus
//! random actions (one in eight through a transition state of its own), about
//! five actions per state. Each figure is criterion's estimate; the growth from
//! one size to the next (×10 and ×5 in states and actions) is in BENCHMARKS.md.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use fsm_core::paths::TestPaths;
use fsm_core::render::{self, Format};

#[path = "../tests/common/generated.rs"]
mod generated;

const SIZES: [(usize, usize); 3] = [(100, 500), (1_000, 5_000), (5_000, 25_000)];

fn tools(c: &mut Criterion) {
    let mut group = c.benchmark_group("tools");
    group.sample_size(10);
    for (states, actions) in SIZES {
        let text = generated::spec(states, actions, 1);
        let machine = fsm_core::spec::load_str("generated.toml", &text).expect("a valid spec");
        let size = format!("{states}/{actions}");
        group.bench_with_input(BenchmarkId::new("check", &size), &text, |b, text| {
            b.iter(|| fsm_core::spec::load_str("generated.toml", text).expect("a valid spec"))
        });
        group.bench_with_input(BenchmarkId::new("diagram dot", &size), &machine, |b, m| {
            b.iter(|| render::diagram(m, Format::Dot))
        });
        group.bench_with_input(BenchmarkId::new("paths", &size), &machine, |b, m| {
            b.iter(|| TestPaths::of(m))
        });
        let renamed = text.replace("\"S", "\"R").replace("\nS", "\nR");
        let renamed = fsm_core::spec::load_str("renamed.toml", &renamed).expect("a valid spec");
        assert_eq!(
            fsm_core::evolve::likely_renames(&machine, &renamed).len(),
            states,
            "every renamed state found"
        );
        group.bench_with_input(BenchmarkId::new("diff", &size), &renamed, |b, new| {
            b.iter(|| {
                (
                    fsm_core::evolve::diff(&machine, new),
                    fsm_core::evolve::likely_renames(&machine, new),
                )
            })
        });
    }
    group.finish();
}

criterion_group!(benches, tools);
criterion_main!(benches);
