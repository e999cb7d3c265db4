//! The exports run in the engines that own their formats: XState 5 in node, and
//! python-statemachine's SCXML interpreter: those of the shipped specs, and of
//! generated ones of every shape (`generate`). From every reachable position
//! (every static state, and every transition state as entered from each
//! origin), every event is tried, and the engine's state must be the table's. The other way,
//! each engine runs the files written by hand that `fsm import xstate|scxml`
//! reads (`tests/xstate/`, `tests/scxml/`), and must agree with the tables
//! imported from them; and Mermaid renders the diagrams `fsm import mermaid`
//! reads (`tests/mermaid/`).
//!
//! The engines come from `scripts/setup` (npm and PyPI, pinned). Missing, the tests
//! fail saying so, unless `FSM_SKIP_TOOLS=1`.

#[path = "../../fsm-core/tests/common/mod.rs"]
mod common;
mod generate;

use std::path::{Path, PathBuf};
use std::process::Command;

use fsm_core::paths::TestPaths;
use fsm_core::{ActionId, Machine, StateId};
use serde_json::json;

/// Where an object is, as the contract of the exports describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Position {
    Static(StateId),
    /// In `via`, entered from `origin` by `action`.
    In {
        via: StateId,
        origin: StateId,
        action: ActionId,
    },
}

/// An event of the exported machines: an action, or the end of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    Start(ActionId),
    Done(ActionId),
    Failed(ActionId),
}

fn name(m: &Machine, e: Event) -> String {
    let a = |id: ActionId| m.action(id).name.to_string();
    match e {
        Event::Start(id) => a(id),
        Event::Done(id) => format!("{}_done", a(id)),
        Event::Failed(id) => format!("{}_failed", a(id)),
    }
}

/// What the table says an event does, written here from the rules, apart from
/// the exporters.
fn step(m: &Machine, at: Position, e: Event) -> Position {
    match (at, e) {
        (Position::Static(s), Event::Start(a)) => match m.rule(a, s) {
            Some(rule) if rule.changes_state => match rule.via {
                Some(via) => Position::In {
                    via,
                    origin: s,
                    action: a,
                },
                None => Position::Static(rule.target),
            },
            _ => at,
        },
        (Position::In { origin, action, .. }, Event::Done(a)) if a == action => {
            Position::Static(m.rule(action, origin).expect("entered by this rule").target)
        }
        (Position::In { origin, action, .. }, Event::Failed(a)) if a == action => {
            Position::Static(origin)
        }
        _ => at,
    }
}

fn top(m: &Machine, at: Position) -> String {
    match at {
        Position::Static(s) | Position::In { via: s, .. } => m.state(s).name.to_string(),
    }
}

/// Every event the exports know.
fn events(m: &Machine) -> Vec<Event> {
    let mut out: Vec<Event> = m.action_ids().map(Event::Start).collect();
    for a in m.action_ids().filter(|&a| m.action(a).via.is_some()) {
        out.push(Event::Done(a));
        out.push(Event::Failed(a));
    }
    out
}

/// Cases: a way to every reachable position, then every event from there, with
/// the table's answer.
fn cases(m: &Machine) -> serde_json::Value {
    // A way to every static state: its shortest test path, as events.
    let mut ways: Vec<(Vec<Event>, Position)> = vec![(Vec::new(), Position::Static(m.initial()))];
    for shortest in TestPaths::of(m).shortest {
        let mut events = Vec::new();
        let mut at = Position::Static(m.initial());
        for rule in &shortest.path.rules {
            for e in [Event::Start(rule.action), Event::Done(rule.action)] {
                if rule.via.is_some() || e == Event::Start(rule.action) {
                    at = step(m, at, e);
                    events.push(e);
                }
            }
        }
        if let Position::Static(_) = at
            && !ways.iter().any(|(_, p)| *p == at)
        {
            ways.push((events, at));
        }
    }
    // And into every transition state from each origin reached.
    let statics = ways.clone();
    for (events, at) in &statics {
        let Position::Static(s) = *at else { continue };
        for rule in m
            .rules_from(s)
            .filter(|r| r.via.is_some() && r.changes_state)
        {
            let mut way = events.clone();
            way.push(Event::Start(rule.action));
            ways.push((way, step(m, *at, Event::Start(rule.action))));
        }
    }
    let mut cases = Vec::new();
    for (way, at) in &ways {
        let names: Vec<String> = way.iter().map(|&e| name(m, e)).collect();
        cases.push(json!({ "events": names, "expect": top(m, *at) }));
        for e in events(m) {
            let mut tried = names.clone();
            tried.push(name(m, e));
            cases.push(json!({ "events": tried, "expect": top(m, step(m, *at, e)) }));
        }
    }
    serde_json::Value::Array(cases)
}

fn specs(groups: &[&str]) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs");
    let mut out = Vec::new();
    for group in groups {
        for spec in std::fs::read_dir(root.join(group)).unwrap() {
            let spec = spec.unwrap().path();
            if spec.extension().is_some_and(|e| e == "toml") {
                out.push(spec);
            }
        }
    }
    out.sort();
    out
}

/// Runs `program args`, answering its stdout, or `None` when the engine is
/// missing (exit 2 or no program) and `FSM_SKIP_TOOLS` is set.
fn engine(program: &Path, args: &[&Path], what: &str) -> Option<(bool, String)> {
    let out = match Command::new(program).args(args).output() {
        Ok(out) if out.status.code() != Some(2) => out,
        Ok(out) => {
            common::missing(
                "FSM_SKIP_TOOLS",
                &format!(
                    "{what} cannot run: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
                "scripts/setup installs it",
            );
            return None;
        }
        Err(e) => {
            common::missing(
                "FSM_SKIP_TOOLS",
                &format!("{what} cannot run: `{}`: {e}", program.display()),
                "scripts/setup installs it",
            );
            return None;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    Some((out.status.success(), stdout))
}

fn check_with(
    what: &str,
    groups: &[&str],
    export: fn(&Machine) -> Result<String, fsm_interchange::ExportError>,
    ext: &str,
    run: impl Fn(&Path, &Path) -> Option<(bool, String)>,
) {
    let dir = std::env::temp_dir().join(format!("fsm-engines-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut checked = 0;
    let shipped = specs(groups).into_iter().map(|spec| {
        let m = fsm_core::spec::load(&spec).unwrap();
        (spec.file_stem().unwrap().to_string_lossy().into_owned(), m)
    });
    let generated = (generate::samples(GENERATED).into_iter().enumerate()).map(|(i, text)| {
        let m = fsm_core::spec::load_str("generated.toml", &text)
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        (format!("generated-{i}"), m)
    });
    for (stem, m) in shipped.chain(generated) {
        let machine = dir.join(format!("{stem}.{ext}"));
        let cases_file = dir.join(format!("{stem}.cases.json"));
        let text = export(&m).unwrap_or_else(|e| panic!("{stem}: {e}"));
        std::fs::write(&machine, text).unwrap();
        let cases = cases(&m);
        let n = cases.as_array().unwrap().len();
        std::fs::write(&cases_file, cases.to_string()).unwrap();
        let Some((ok, out)) = run(&machine, &cases_file) else {
            return;
        };
        assert!(ok, "{what} disagrees with {stem}:\n{out}");
        let summary = out.lines().last().unwrap_or_default();
        assert_eq!(summary, format!("{{\"cases\":{n},\"failed\":0}}"), "{stem}");
        checked += n;
    }
    assert!(checked > 1000, "{checked} cases");
    let _ = std::fs::remove_dir_all(&dir);
}

/// How many generated specs each engine runs, besides the shipped ones.
const GENERATED: usize = 24;

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/interchange")
}

#[test]
fn xstate_runs_every_exported_machine_as_the_table_says() {
    let every = ["ovc", "sabakan", "mizar", "kusionstack"];
    check_with(
        "xstate",
        &every,
        fsm_interchange::xstate,
        "json",
        |machine, cases| {
            engine(
                Path::new("node"),
                &[&scripts().join("xstate-check.mjs"), machine, cases],
                "XState (node)",
            )
        },
    );
}

/// Runs each file written by hand in `tests/<what>/` in its engine (`run`),
/// against the table `import` made of it.
fn check_imported(
    what: &str,
    import: fn(&str, &str) -> Result<String, fsm_interchange::ImportError>,
    export: fn(&Machine) -> Result<String, fsm_interchange::ExportError>,
    run: impl Fn(&Path, &Path) -> Option<(bool, String)>,
) {
    let dir =
        std::env::temp_dir().join(format!("fsm-engines-import-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let files = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(what);
    let mut checked = 0;
    for file in std::fs::read_dir(files).unwrap() {
        let file = file.unwrap().path();
        let text = std::fs::read_to_string(&file).unwrap();
        let spec = import(&text, "unused").unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let m = fsm_core::spec::load_str("imported.toml", &spec).unwrap();
        let cases = cases(&m);
        let cases_file = dir.join("cases.json");
        std::fs::write(&cases_file, cases.to_string()).unwrap();
        // The file, then the table exported again (nested states nested
        // again): each runs as the table says.
        let again = dir.join(file.file_name().unwrap());
        let text = export(&m).unwrap_or_else(|e| panic!("{}: {e}\n{spec}", file.display()));
        std::fs::write(&again, &text).unwrap();
        for (run_file, how) in [(&file, ""), (&again, " and exported again")] {
            let Some((ok, out)) = run(run_file, &cases_file) else {
                return;
            };
            assert!(
                ok,
                "{what}'s engine disagrees with the table imported from {}{how}:\n{out}\n{spec}",
                file.display()
            );
        }
        checked += cases.as_array().unwrap().len();
    }
    // (Every event from every state of each file's table.)
    assert!(checked >= 20, "{checked} cases");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn xstate_runs_each_imported_config_as_the_imported_table_says() {
    check_imported(
        "xstate",
        fsm_interchange::from_xstate,
        fsm_interchange::xstate,
        |config, cases| {
            engine(
                Path::new("node"),
                &[&scripts().join("xstate-check.mjs"), config, cases],
                "XState (node)",
            )
        },
    );
}

#[test]
fn python_statemachine_runs_each_imported_document_as_the_imported_table_says() {
    check_imported(
        "scxml",
        fsm_interchange::from_scxml,
        fsm_interchange::scxml,
        |document, cases| {
            engine(
                &scripts().join("../python/.venv/bin/python"),
                &[&scripts().join("scxml_check.py"), document, cases],
                "python-statemachine",
            )
        },
    );
}

/// Mermaid has no engine that runs a state diagram, but it draws one: Mermaid
/// itself (in headless Chromium) renders each diagram written by hand that
/// `fsm import mermaid` reads (`tests/mermaid/`), so the importer's tests read
/// Mermaid as Mermaid reads it.
#[test]
fn mermaid_renders_each_diagram_the_import_tests_read() {
    let dir = std::env::temp_dir().join(format!("fsm-engines-mermaid-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mermaid");
    let mut files = Vec::new();
    for doc in std::fs::read_dir(docs).unwrap() {
        let doc = doc.unwrap().path();
        let text = std::fs::read_to_string(&doc).unwrap();
        // The fenced block's lines, as Mermaid is given them.
        let diagram: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("```mermaid"))
            .skip(1)
            .take_while(|l| !l.starts_with("```"))
            .collect();
        assert!(!diagram.is_empty(), "{}", doc.display());
        let file = dir.join(format!(
            "{}.mmd",
            doc.file_stem().unwrap().to_string_lossy()
        ));
        std::fs::write(&file, diagram.join("\n")).unwrap();
        files.push(file);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/browser/mermaid-check.mjs");
    let mut args: Vec<&Path> = vec![&script];
    args.extend(files.iter().map(PathBuf::as_path));
    let Some((ok, out)) = engine(Path::new("node"), &args, "Mermaid (node, Chromium)") else {
        return;
    };
    assert!(ok, "Mermaid refused a diagram:\n{out}");
    for (file, line) in files.iter().zip(out.lines()) {
        let head = format!("{{\"file\":{:?},\"svg\":\"<svg", file.display().to_string());
        assert!(
            line.starts_with(&head),
            "Mermaid refused {}: {line}",
            file.display()
        );
    }
    assert_eq!(out.lines().count(), files.len(), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn python_statemachine_runs_every_exported_scxml_as_the_table_says() {
    let python = scripts().join("../python/.venv/bin/python");
    // Not KusionStack's: python-statemachine turns events into attributes of the
    // machine, and its action `prepare` shadows the library's own `prepare` (an
    // AttributeError inside the engine), whatever the document says.
    let groups = ["ovc", "sabakan", "mizar"];
    check_with(
        "scxml",
        &groups,
        fsm_interchange::scxml,
        "scxml",
        |machine, cases| {
            engine(
                &python,
                &[&scripts().join("scxml_check.py"), machine, cases],
                "python-statemachine",
            )
        },
    );
}
