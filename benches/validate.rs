//! `validate_transition` of the derived OVC VM against a hand-written `match`, a
//! `HashSet<(State, State)>`, rust-fsm and smlang, on one query stream.
//!
//! `cargo bench --bench validate`: criterion's report, then ns/query and each
//! ratio to the hand-written `match`, from the same run.

use std::collections::HashSet;
use std::hint::black_box;

use criterion::{Criterion, Throughput};

#[path = "../examples/machines/mod.rs"]
mod machines;
mod other_ways;
mod report;

use machines::VmState;
use other_ways::{hand_written, with_rust_fsm, with_smlang};

/// Queries: every (from, to) pair of VM states in a fixed pseudo-random order,
/// repeated; about one in seven is allowed.
fn queries() -> Vec<(VmState, VmState)> {
    let all = VmState::ALL;
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..4096)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let i = (seed % (all.len() * all.len()) as u64) as usize;
            (all[i / all.len()], all[i % all.len()])
        })
        .collect()
}

/// The same state in another crate's enum, whose variants are named as ours.
macro_rules! convert {
    ($name:ident -> $other:ty) => {
        fn $name(s: VmState) -> $other {
            use VmState as V;
            type S = $other;
            match s {
                V::Virtual => S::Virtual,
                V::Deploying => S::Deploying,
                V::Running => S::Running,
                V::Pausing => S::Pausing,
                V::Paused => S::Paused,
                V::Resuming => S::Resuming,
                V::Stopping => S::Stopping,
                V::Halted => S::Halted,
                V::Rebooting => S::Rebooting,
                V::Resetting => S::Resetting,
                V::AddingDisk => S::AddingDisk,
                V::AttachingDisk => S::AttachingDisk,
                V::DetachingDisk => S::DetachingDisk,
                V::Deleting => S::Deleting,
                V::Deleted => S::Deleted,
                V::Destroying => S::Destroying,
                V::Destroyed => S::Destroyed,
            }
        }
    };
}
convert!(to_rust_fsm -> with_rust_fsm::vm::State);
convert!(to_smlang -> with_smlang::States);

/// With rust-fsm: does some event lead from `from` to `to`?
fn rust_fsm_allows(from: with_rust_fsm::vm::State, to: with_rust_fsm::vm::State) -> bool {
    use rust_fsm::StateMachineImpl;
    with_rust_fsm::INPUTS
        .iter()
        .any(|i| with_rust_fsm::vm::Impl::transition(&from, i) == Some(to))
}

/// With smlang: the same question, through a machine set to `from` for each event.
fn smlang_allows(from: with_smlang::States, to: with_smlang::States) -> bool {
    use with_smlang::{Context, EVENTS, StateMachine};
    EVENTS.iter().any(|&e| {
        let mut machine = StateMachine::new_with_state(Context, from);
        machine
            .process_event(e)
            .ok()
            .is_some_and(|&next| next == to)
    })
}

/// How many queries `allows` accepts. Each query and each answer passes through
/// `black_box`, so every case answers one query at a time, as a caller checking one
/// move does, and the compiler cannot vectorise or hoist one case and not another.
fn answer<Q: Copy>(queries: &[Q], allows: impl Fn(Q) -> bool) -> usize {
    queries
        .iter()
        .filter(|&&q| black_box(allows(black_box(q))))
        .count()
}

const CASES: [&str; 6] = [
    "hand-written match",
    "derived validate_transition",
    "derived can_transition",
    "HashSet",
    "rust-fsm",
    "smlang",
];

fn bench(c: &mut Criterion) {
    let queries = queries();
    let set: HashSet<(VmState, VmState)> = VmState::ALL
        .iter()
        .flat_map(|&a| VmState::ALL.iter().map(move |&b| (a, b)))
        .filter(|&(a, b)| hand_written(a, b))
        .collect();
    // Every implementation answers every pair as the derived machine does.
    for &a in &VmState::ALL {
        for &b in &VmState::ALL {
            let want = VmState::validate_transition(a, b).is_ok();
            assert_eq!(hand_written(a, b), want, "hand-written {a:?} -> {b:?}");
            assert_eq!(set.contains(&(a, b)), want);
            assert_eq!(
                rust_fsm_allows(to_rust_fsm(a), to_rust_fsm(b)),
                want,
                "rust-fsm {a:?} -> {b:?}"
            );
            assert_eq!(
                smlang_allows(to_smlang(a), to_smlang(b)),
                want,
                "smlang {a:?} -> {b:?}"
            );
        }
    }
    let rust_fsm_queries: Vec<_> = queries
        .iter()
        .map(|&(a, b)| (to_rust_fsm(a), to_rust_fsm(b)))
        .collect();
    let smlang_queries: Vec<_> = queries
        .iter()
        .map(|&(a, b)| (to_smlang(a), to_smlang(b)))
        .collect();

    let mut g = c.benchmark_group("validate");
    g.throughput(Throughput::Elements(queries.len() as u64));
    g.bench_function(CASES[0], |b| {
        b.iter(|| answer(&queries, |(f, t)| hand_written(f, t)))
    });
    g.bench_function(CASES[1], |b| {
        b.iter(|| {
            answer(&queries, |(f, t)| {
                VmState::validate_transition(f, t).is_ok()
            })
        })
    });
    g.bench_function(CASES[2], |b| {
        b.iter(|| answer(&queries, |(f, t)| VmState::can_transition(f, t)))
    });
    g.bench_function(CASES[3], |b| {
        b.iter(|| answer(&queries, |q| set.contains(&q)))
    });
    g.bench_function(CASES[4], |b| {
        b.iter(|| answer(&rust_fsm_queries, |(f, t)| rust_fsm_allows(f, t)))
    });
    g.bench_function(CASES[5], |b| {
        b.iter(|| answer(&smlang_queries, |(f, t)| smlang_allows(f, t)))
    });
    g.finish();
}

fn main() {
    report::start();
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
    report::print_ratios("validate", "query", queries().len() as f64, &CASES);
}
