//! What `#[derive(StateMachine)]` costs to compile, against the same API written by
//! hand, for a generated machine of 100 states and 400 actions.
//!
//! `cargo bench --bench compile_time` writes two crates under
//! `target/compile-time/`: `derived` (the enum, its table in a spec file, the derive)
//! and `hand` (the enum, an actions enum, `name`, `is_transition`,
//! `validate_transition` and `plan` as hand-written `match`es over the same table).
//! It builds both once so their dependencies are compiled, then times a rebuild of
//! each crate alone (`touch src/lib.rs; cargo build`) several times, in debug and
//! in release, and prints the medians and their ratio.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const STATIC: usize = 60;
const TRANSITION: usize = 40;
const ACTIONS: usize = 400;
const RUNS: usize = 5;

/// One action of the generated table: its origins, transition state and target.
struct Action {
    from: Vec<usize>,
    via: Option<usize>,
    to: usize,
}

/// States `S0..S59` are static, `T0..T39` transition states; action `a<i>` leaves
/// one or two static states for another, the first 40 through their own transition
/// state. `S<i> -> S<i+1>` among them makes every state reachable.
fn table() -> Vec<Action> {
    (0..ACTIONS)
        .map(|i| {
            // A fixed scramble of `i`, so that moves rarely repeat.
            let mix = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
            let first = i % STATIC;
            let second = (mix % STATIC as u64) as usize;
            let to = if i < STATIC {
                (i + 1) % STATIC
            } else {
                ((mix >> 8) % STATIC as u64) as usize
            };
            let mut from = vec![first];
            if second != first {
                from.push(second);
            }
            Action {
                from,
                via: (i < TRANSITION).then(|| STATIC + i),
                to,
            }
        })
        .collect()
}

fn state_name(s: usize) -> String {
    if s < STATIC {
        format!("S{s}")
    } else {
        format!("T{}", s - STATIC)
    }
}

fn spec(table: &[Action]) -> String {
    let mut out = String::from("[machine]\nname = \"generated\"\ninitial = \"S0\"\n\n[states]\n");
    for s in 0..STATIC {
        writeln!(out, "S{s} = \"static {s}\"").unwrap();
    }
    for t in 0..TRANSITION {
        writeln!(out, "T{t} = {{ transition = true }}").unwrap();
    }
    out.push_str("\n[actions]\n");
    for (i, a) in table.iter().enumerate() {
        let from: Vec<_> = a
            .from
            .iter()
            .map(|&s| format!("\"{}\"", state_name(s)))
            .collect();
        let via = a
            .via
            .map(|v| format!(", via = \"{}\"", state_name(v)))
            .unwrap_or_default();
        writeln!(
            out,
            "a{i} = {{ from = [{}]{via}, to = \"{}\" }}",
            from.join(", "),
            state_name(a.to)
        )
        .unwrap();
    }
    out
}

fn variants() -> String {
    (0..STATIC + TRANSITION)
        .map(|s| format!("    {},\n", state_name(s)))
        .collect()
}

fn derived_lib() -> String {
    format!(
        "//! Generated.\n#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, fsm::StateMachine)]\n\
         #[fsm(spec = \"generated.toml\")]\npub enum State {{\n{}}}\n",
        variants()
    )
}

fn hand_lib(table: &[Action]) -> String {
    let mut pairs = Vec::new();
    for a in table {
        for &f in &a.from {
            match a.via {
                Some(v) => pairs.extend([(f, v), (v, a.to), (f, a.to)]),
                None => pairs.push((f, a.to)),
            }
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    println!("{} distinct allowed moves", pairs.len());
    let mut out = format!(
        "//! Generated.\n#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]\npub enum State {{\n{}}}\n\n",
        variants()
    );
    out.push_str("#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]\npub enum Action {\n");
    for i in 0..table.len() {
        writeln!(out, "    A{i},").unwrap();
    }
    out.push_str("}\n\n#[derive(Clone, Copy, Debug, PartialEq, Eq)]\npub struct Refused { pub from: State, pub to: State }\n\n");
    out.push_str(
        "impl State {\n    pub const fn name(self) -> &'static str {\n        match self {\n",
    );
    for s in 0..STATIC + TRANSITION {
        let n = state_name(s);
        writeln!(out, "            State::{n} => \"{n}\",").unwrap();
    }
    out.push_str("        }\n    }\n\n    pub const fn is_transition(self) -> bool {\n        match self {\n");
    for t in 0..TRANSITION {
        writeln!(out, "            State::T{t} => true,").unwrap();
    }
    out.push_str("            _ => false,\n        }\n    }\n\n");
    out.push_str("    pub const fn validate_transition(from: State, to: State) -> Result<(), Refused> {\n        match (from, to) {\n");
    for (f, t) in pairs {
        writeln!(
            out,
            "            (State::{}, State::{}) => Ok(()),",
            state_name(f),
            state_name(t)
        )
        .unwrap();
    }
    out.push_str("            _ => Err(Refused { from, to }),\n        }\n    }\n}\n\n");
    out.push_str(
        "impl Action {\n    /// The transition state and the target of `self` from `from`.\n",
    );
    out.push_str("    pub const fn plan(self, from: State) -> Option<(Option<State>, State)> {\n        match (self, from) {\n");
    for (i, a) in table.iter().enumerate() {
        let via = a
            .via
            .map_or("None".into(), |v| format!("Some(State::{})", state_name(v)));
        for &f in &a.from {
            writeln!(
                out,
                "            (Action::A{i}, State::{}) => Some(({via}, State::{})),",
                state_name(f),
                state_name(a.to)
            )
            .unwrap();
        }
    }
    out.push_str("            _ => None,\n        }\n    }\n}\n");
    out
}

fn write_crate(dir: &Path, name: &str, deps: &str, files: &[(&str, String)]) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let manifest = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         [dependencies]\n{deps}\n\n[workspace]\n"
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    for (path, text) in files {
        std::fs::write(dir.join(path), text).unwrap();
    }
    // The project's lock file, so the generated crates build the same dependency versions.
    std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cargo_build(dir: &Path, target: &Path, release: bool) -> Duration {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .args(["build", "--quiet"]);
    if release {
        cmd.arg("--release");
    }
    let start = Instant::now();
    let status = cmd.status().expect("run cargo");
    let took = start.elapsed();
    assert!(status.success(), "cargo build failed in {}", dir.display());
    took
}

/// The median of `RUNS` rebuilds of the crate alone.
fn rebuild(dir: &Path, target: &Path, release: bool) -> Duration {
    cargo_build(dir, target, release);
    let mut times: Vec<_> = (0..RUNS)
        .map(|_| {
            let lib = dir.join("src/lib.rs");
            let text = std::fs::read(&lib).unwrap();
            std::fs::write(&lib, text).unwrap();
            cargo_build(dir, target, release)
        })
        .collect();
    times.sort();
    times[RUNS / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing. Only run
    // when benchmarking: this takes minutes.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let base =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from);
    let work = base.join("compile-time");
    let target = work.join("target");
    let table = table();
    let derived = work.join("derived");
    let hand = work.join("hand");
    let fsm = format!("fsm = {{ path = {:?} }}", root().display().to_string());
    write_crate(
        &derived,
        "generated_derived",
        &fsm,
        &[
            ("generated.toml", spec(&table)),
            ("src/lib.rs", derived_lib()),
        ],
    );
    write_crate(
        &hand,
        "generated_hand",
        "",
        &[("src/lib.rs", hand_lib(&table))],
    );

    println!(
        "{:<24} {:>12} {:>12} {:>8}",
        "100 states, 400 actions", "derived", "hand", "ratio"
    );
    for (profile, release) in [("debug", false), ("release", true)] {
        let d = rebuild(&derived, &target, release);
        let h = rebuild(&hand, &target, release);
        println!(
            "{:<24} {:>10.2} s {:>10.2} s {:>8.2}",
            format!("cargo build ({profile})"),
            d.as_secs_f64(),
            h.as_secs_f64(),
            d.as_secs_f64() / h.as_secs_f64()
        );
    }
}
