//! What a state machine costs to compile, for the same generated table written for
//! each way of writing one: a hand-written `match`, rust-fsm 0.8's
//! `state_machine!`, smlang 0.8's `statemachine!` and `#[derive(StateMachine)]`
//! (its table in a spec file, as a table this size would be written).
//!
//! The table: 100 states, 20 events, 400 transitions (each event leaves 20 states;
//! every state is left by 4 events; the first 100 transitions chain the states so
//! every one is reachable). rust-fsm and smlang have no transition states, so the
//! table has none.
//!
//! `cargo bench --bench compile_time` writes one crate per way under
//! `target/compile-time/` and measures, in one run:
//!
//! - **cold**: `cargo build` (debug) of the crate from an empty target directory,
//!   its dependencies included (the proc macros and whatever they pull in);
//! - **rebuild**: `cargo build` (debug) of the crate alone after
//!   `cargo clean -p CRATE`, its dependencies already built (the clean is not
//!   timed).
//!
//! Each figure is the median of several runs; the ratios are against rust-fsm's.
//! `FSM_COMPILE_RUNS` sets the number of runs (default 9 rebuilds, 3 cold builds).
//! A breakdown follows: the derived crate with each opt-in item added.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const STATES: usize = 100;
const EVENTS: usize = 20;
const TRANSITIONS: usize = 400;

/// One transition: `(origin, event, target)`.
fn table() -> Vec<(usize, usize, usize)> {
    (0..TRANSITIONS)
        .map(|t| {
            let origin = t % STATES;
            let event = t / (TRANSITIONS / EVENTS);
            // A fixed scramble of `t`, so that targets rarely repeat.
            let mix = (t as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40;
            let target = if t < STATES {
                (origin + 1) % STATES
            } else {
                (mix % STATES as u64) as usize
            };
            (origin, event, target)
        })
        .collect()
}

fn variants() -> String {
    (0..STATES).map(|s| format!("    S{s},\n")).collect()
}

/// The hand-written baseline: the enums and a `match` over every transition.
fn hand(table: &[(usize, usize, usize)]) -> String {
    let mut out = format!(
        "//! Generated.\n#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]\npub enum State {{\n{}}}\n\n\
         #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]\npub enum Event {{\n",
        variants()
    );
    for e in 0..EVENTS {
        writeln!(out, "    E{e},").unwrap();
    }
    out.push_str("}\n\nimpl State {\n    pub const fn transition(self, event: Event) -> Option<State> {\n        match (self, event) {\n");
    for &(o, e, t) in table {
        writeln!(
            out,
            "            (State::S{o}, Event::E{e}) => Some(State::S{t}),"
        )
        .unwrap();
    }
    out.push_str("            _ => None,\n        }\n    }\n}\n");
    out
}

fn rust_fsm(table: &[(usize, usize, usize)]) -> String {
    let mut out = String::from(
        "//! Generated.\nrust_fsm::state_machine! {\n    #[derive(Debug)]\n    pub generated(S0)\n",
    );
    for s in 0..STATES {
        let arms: Vec<String> = table
            .iter()
            .filter(|t| t.0 == s)
            .map(|&(_, e, t)| format!("E{e} => S{t}"))
            .collect();
        writeln!(out, "    S{s} => {{ {} }},", arms.join(", ")).unwrap();
    }
    out.push_str("}\n");
    out
}

fn smlang(table: &[(usize, usize, usize)]) -> String {
    let mut out = String::from("//! Generated.\nsmlang::statemachine! {\n    transitions: {\n");
    for (i, &(o, e, t)) in table.iter().enumerate() {
        let star = if i == 0 { "*" } else { "" };
        writeln!(out, "        {star}S{o} + E{e} = S{t},").unwrap();
    }
    out.push_str("    }\n}\n\n/// The machine's context.\npub struct Context;\nimpl StateMachineContext for Context {}\n");
    out
}

fn spec(table: &[(usize, usize, usize)]) -> String {
    let mut out = String::from("[machine]\nname = \"generated\"\ninitial = \"S0\"\n\n[states]\n");
    for s in 0..STATES {
        writeln!(out, "S{s} = \"state {s}\"").unwrap();
    }
    out.push_str("\n[actions]\n");
    for e in 0..EVENTS {
        let rows: Vec<_> = table.iter().filter(|t| t.1 == e).collect();
        let from: Vec<String> = rows.iter().map(|t| format!("\"S{}\"", t.0)).collect();
        let to: Vec<String> = rows
            .iter()
            .map(|t| format!("S{} = \"S{}\"", t.0, t.2))
            .collect();
        writeln!(
            out,
            "E{e} = {{ from = [{}], to = {{ {} }} }}",
            from.join(", "),
            to.join(", ")
        )
        .unwrap();
    }
    out
}

/// The derive with its table in attributes on the enum, as rust-fsm and smlang take
/// theirs; `settings` are added to the first attribute.
fn derived_inline(table: &[(usize, usize, usize)], settings: &str) -> String {
    let mut out = format!(
        "//! Generated.\n#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, fsm::StateMachine)]\n\
         #[fsm(initial = S0{settings})]\n"
    );
    for e in 0..EVENTS {
        let rows: Vec<_> = table.iter().filter(|t| t.1 == e).collect();
        let from: Vec<String> = rows.iter().map(|t| format!("S{}", t.0)).collect();
        let to: Vec<String> = rows
            .iter()
            .map(|t| format!("S{} = S{}", t.0, t.2))
            .collect();
        writeln!(
            out,
            "#[fsm(action(E{e}, from = [{}], to({})))]",
            from.join(", "),
            to.join(", ")
        )
        .unwrap();
    }
    out + &format!("pub enum State {{\n{}}}\n", variants())
}

/// The derive with its table in a spec file (the `toml` feature).
fn derived_spec() -> String {
    format!(
        "//! Generated.\n#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, fsm::StateMachine)]\n\
         #[fsm(spec = \"generated.toml\")]\npub enum State {{\n{}}}\n",
        variants()
    )
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
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
    // The project's lock file, so every crate builds the same dependency versions.
    std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
}

fn cargo_build(dir: &Path, target: &Path) -> Duration {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .args(["build", "--quiet", "--offline"]);
    let start = Instant::now();
    let status = cmd.status().expect("run cargo");
    let took = start.elapsed();
    assert!(status.success(), "cargo build failed in {}", dir.display());
    took
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The package name in `dir`'s manifest.
fn package(dir: &Path) -> String {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    manifest
        .lines()
        .find_map(|l| l.strip_prefix("name = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("a package name")
        .to_owned()
}

/// For each crate, the median of `runs` builds of the crate alone after `cargo
/// clean -p`, its dependencies built. The crates take turns, so that a drift of the
/// machine's speed touches them all alike.
fn rebuilds(dirs: &[&Path], target: &Path, runs: usize) -> Vec<Duration> {
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); dirs.len()];
    for dir in dirs {
        cargo_build(dir, target);
    }
    for _ in 0..runs {
        for (i, dir) in dirs.iter().enumerate() {
            let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
                .current_dir(dir)
                .env("CARGO_TARGET_DIR", target)
                .args(["clean", "--quiet", "--offline", "-p", &package(dir)])
                .status()
                .expect("run cargo clean");
            assert!(status.success());
            times[i].push(cargo_build(dir, target));
        }
    }
    times.into_iter().map(median).collect()
}

/// The median of `runs` builds from an empty target directory.
fn cold(dir: &Path, runs: usize) -> Duration {
    let target = dir.join("cold-target");
    median(
        (0..runs)
            .map(|_| {
                let _ = std::fs::remove_dir_all(&target);
                cargo_build(dir, &target)
            })
            .collect(),
    )
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing. Only run
    // when benchmarking: this takes minutes.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let runs: usize = std::env::var("FSM_COMPILE_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(9);
    let cold_runs = runs.div_ceil(3).max(1);
    let base =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from);
    let work = base.join("compile-time");
    let warm = work.join("target");
    let table = table();
    let fsm = format!("fsm = {{ path = {:?} }}", root().display().to_string());
    let fsm_toml = format!(
        "fsm = {{ path = {:?}, features = [\"toml\"] }}",
        root().display().to_string()
    );
    let crates: Vec<(&str, PathBuf)> = vec![
        ("hand-written match", work.join("hand")),
        ("rust-fsm 0.8", work.join("rust_fsm")),
        ("smlang 0.8", work.join("smlang")),
        ("fsm derive", work.join("derived")),
        ("fsm derive, spec file", work.join("derived_spec")),
    ];
    write_crate(
        &crates[0].1,
        "generated_hand",
        "",
        &[("src/lib.rs", hand(&table))],
    );
    write_crate(
        &crates[1].1,
        "generated_rust_fsm",
        "rust-fsm = \"0.8\"",
        &[("src/lib.rs", rust_fsm(&table))],
    );
    write_crate(
        &crates[2].1,
        "generated_smlang",
        "smlang = \"0.8\"",
        &[("src/lib.rs", smlang(&table))],
    );
    write_crate(
        &crates[3].1,
        "generated_derived",
        &fsm,
        &[("src/lib.rs", derived_inline(&table, ""))],
    );
    write_crate(
        &crates[4].1,
        "generated_derived_spec",
        &fsm_toml,
        &[
            ("generated.toml", spec(&table)),
            ("src/lib.rs", derived_spec()),
        ],
    );

    println!(
        "{STATES} states, {EVENTS} events, {TRANSITIONS} transitions; debug builds; medians of {runs} rebuilds, {cold_runs} cold builds\n"
    );
    println!(
        "{:<24} {:>10} {:>10} {:>12} {:>10}",
        "", "rebuild", "÷ rust-fsm", "cold build", "÷ rust-fsm"
    );
    let dirs: Vec<&Path> = crates.iter().map(|(_, d)| d.as_path()).collect();
    let rebuilt = rebuilds(&dirs, &warm, runs);
    let results: Vec<_> = crates
        .iter()
        .zip(rebuilt)
        .map(|((name, dir), r)| (name, r, cold(dir, cold_runs)))
        .collect();
    let (_, base_r, base_c) = results[1];
    for (name, r, c) in &results {
        println!(
            "{:<24} {:>8.2} s {:>10.2} {:>10.2} s {:>10.2}",
            name,
            r.as_secs_f64(),
            r.as_secs_f64() / base_r.as_secs_f64(),
            c.as_secs_f64(),
            c.as_secs_f64() / base_c.as_secs_f64()
        );
    }

    // What each opt-in item adds to the derived crate's rebuild, measured beside
    // the default crate.
    println!("\nfsm derive, rebuild with each opt-in item");
    let markers = work.join("derived_markers");
    write_crate(
        &markers,
        "generated_derived_markers",
        &fsm,
        &[("src/lib.rs", derived_inline(&table, ", markers"))],
    );
    // The feature `diagram`: the derive lays the machine out and puts the SVG and
    // the table on the enum's documentation page.
    let diagram = work.join("derived_diagram");
    write_crate(
        &diagram,
        "generated_derived_diagram",
        &format!(
            "fsm = {{ path = {:?}, features = [\"diagram\"] }}",
            root().display().to_string()
        ),
        &[("src/lib.rs", derived_inline(&table, ""))],
    );
    let rebuilt = rebuilds(&[&crates[3].1, &markers, &diagram], &warm, runs);
    for (name, r) in [
        ("default items", rebuilt[0]),
        ("+ markers (typed moves)", rebuilt[1]),
        ("+ feature diagram", rebuilt[2]),
    ] {
        println!(
            "{:<28} {:>8.2} s {:>8.2} × default",
            name,
            r.as_secs_f64(),
            r.as_secs_f64() / rebuilt[0].as_secs_f64()
        );
    }
    let (plain, drawn) = (cold(&crates[3].1, cold_runs), cold(&diagram, cold_runs));
    println!(
        "{:<28} {:>8.2} s {:>8.2} × default (cold build)",
        "+ feature diagram, cold",
        drawn.as_secs_f64(),
        drawn.as_secs_f64() / plain.as_secs_f64()
    );
}
