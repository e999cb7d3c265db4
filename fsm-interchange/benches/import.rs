//! The importers on generated specs of three sizes: each spec exported as an
//! XState config, an SCXML document, a PlantUML and a Mermaid drawing (outside
//! the timing), then each imported back to a spec's text, as `fsm import` does.
//!
//! ```sh
//! cargo bench -p fsm-interchange --bench import
//! ```
//!
//! The specs are the table tools' (`fsm-core/tests/common/generated.rs`, the
//! sizes of `cargo bench -p fsm-core --bench tools`); the growth from one size
//! to the next (×10 and ×5 in states and actions) is in BENCHMARKS.md.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use fsm_core::render::{self, Format, View};

#[path = "../../fsm-core/tests/common/generated.rs"]
mod generated;

const SIZES: [(usize, usize); 3] = [(100, 500), (1_000, 5_000), (5_000, 25_000)];

fn import(c: &mut Criterion) {
    let mut group = c.benchmark_group("import");
    group.sample_size(10);
    for (states, actions) in SIZES {
        let text = generated::spec(states, actions, 1);
        let machine = fsm_core::spec::load_str("generated.toml", &text).expect("a valid spec");
        let size = format!("{states}/{actions}");
        let xstate = fsm_interchange::xstate(&machine).expect("exported");
        let scxml = fsm_interchange::scxml(&machine).expect("exported");
        let plantuml = render::render(&machine, Format::PlantUml, View::Full);
        let mermaid = render::render(&machine, Format::Mermaid, View::Full);
        group.bench_with_input(BenchmarkId::new("xstate", &size), &xstate, |b, config| {
            b.iter(|| fsm_interchange::from_xstate(config, "generated").expect("imported"))
        });
        group.bench_with_input(BenchmarkId::new("scxml", &size), &scxml, |b, document| {
            b.iter(|| fsm_interchange::from_scxml(document, "generated").expect("imported"))
        });
        group.bench_with_input(
            BenchmarkId::new("plantuml", &size),
            &plantuml,
            |b, diagram| {
                b.iter(|| fsm_interchange::plantuml(diagram, "generated").expect("imported"))
            },
        );
        group.bench_with_input(
            BenchmarkId::new("mermaid", &size),
            &mermaid,
            |b, diagram| {
                b.iter(|| fsm_interchange::mermaid(diagram, "generated").expect("imported"))
            },
        );
    }
    group.finish();
}

criterion_group!(benches, import);
criterion_main!(benches);
