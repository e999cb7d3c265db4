//! Every shipped spec drawn in every format, as snapshots; DOT output is also parsed
//! by Graphviz when `dot` is installed (CI installs it).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::specs;
use fsm_core::render::{self, ArrowKind, Drawing, Format, View};

fn snapshot_name(spec: &Path, suffix: &str) -> String {
    let group = spec
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy();
    let stem = spec.file_stem().unwrap().to_string_lossy();
    format!("{group}_{stem}_{suffix}")
}

#[test]
fn every_spec_in_every_format() {
    for spec in specs() {
        let machine = fsm_core::spec::load(&spec).unwrap_or_else(|e| panic!("{e}"));
        for format in Format::ALL {
            insta::assert_snapshot!(
                snapshot_name(&spec, format.name()),
                render::diagram(&machine, format)
            );
            insta::assert_snapshot!(
                snapshot_name(&spec, &format!("{}_folded", format.name())),
                render::render(&machine, format, View::Folded)
            );
        }
        insta::assert_snapshot!(snapshot_name(&spec, "table"), render::table(&machine));
    }
}

/// Every move the table allows is drawn, and every arrow drawn is an allowed move or
/// an action that keeps the state.
#[test]
fn arrows_are_exactly_the_allowed_steps() {
    for spec in specs() {
        let m = fsm_core::spec::load(&spec).unwrap();
        let edges = render::arrows(&m);
        for e in &edges {
            if e.kind == ArrowKind::InPlace {
                assert!(!m.action(e.action).changes_state());
            } else {
                assert!(
                    m.validate_transition(e.from, e.to).is_ok(),
                    "{}: {e:?}",
                    spec.display()
                );
            }
        }
        for from in m.state_ids() {
            for to in m.state_ids() {
                let Ok(step) = m.validate_transition(from, to) else {
                    continue;
                };
                let drawn = edges.iter().any(|e| e.from == from && e.to == to)
                    || matches!(step, fsm_core::Move::Whole(a) if m.action(a).via.is_some());
                assert!(
                    drawn,
                    "{}: {} -> {} is allowed but not drawn",
                    spec.display(),
                    m.state(from).name,
                    m.state(to).name
                );
            }
        }
    }
}

/// The folded view draws every rule once: a move between two static states as an
/// edge labelled with the action and the transition state it shows, an action
/// that ends where it started as a line on its origin. No transition state is
/// drawn (unless it is where objects start).
#[test]
fn the_folded_view_draws_each_rule_once() {
    for spec in specs() {
        let m = fsm_core::spec::load(&spec).unwrap();
        let d = Drawing::new(&m, View::Folded);
        for s in &d.states {
            assert!(!m.state(s.id).is_transition() || s.id == m.initial());
        }
        let mut edges = d.edges.clone();
        let mut loops: Vec<(fsm_core::StateId, String)> = d
            .states
            .iter()
            .flat_map(|s| s.loops.iter().map(move |l| (s.id, l.clone())))
            .collect();
        for rule in m.rules() {
            let action = &m.action(rule.action).name;
            let via = rule
                .via
                .map(|v| format!(" ({})", m.state(v).name))
                .unwrap_or_default();
            let starts = |label: &str| label.starts_with(&format!("{action}{via}"));
            if rule.origin == rule.target {
                let at = loops
                    .iter()
                    .position(|(s, l)| *s == rule.origin && starts(l.trim_start_matches("↻ ")));
                loops.remove(
                    at.unwrap_or_else(|| panic!("{}: {rule:?} has no line", spec.display())),
                );
            } else {
                let at = edges
                    .iter()
                    .position(|e| e.from == rule.origin && e.to == rule.target && starts(&e.label));
                edges.remove(
                    at.unwrap_or_else(|| panic!("{}: {rule:?} has no edge", spec.display())),
                );
            }
        }
        assert!(
            edges.is_empty() && loops.is_empty(),
            "{}: drawn twice or for nothing: {edges:?} {loops:?}",
            spec.display()
        );
    }
    // The seed's own words for the VM: `RUNNING → PAUSED: pause (PAUSING)`.
    let vm =
        fsm_core::spec::load(Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/ovc/vm.toml"))
            .unwrap();
    let mermaid = render::render(&vm, Format::Mermaid, View::Folded);
    assert!(
        mermaid.contains("    RUNNING --> PAUSED: pause (PAUSING)\n"),
        "{mermaid}"
    );
    assert!(mermaid.contains("        ↻ migrate, hidden\n"), "{mermaid}");
}

/// Runs `tool args` on `input`. A tool that is not installed fails the test, unless
/// `FSM_SKIP_TOOLS` is set (then `None`).
fn run_tool(tool: &str, args: &[&str], input: &str) -> Option<(bool, String)> {
    use std::io::Write;
    let Ok(mut child) = Command::new(tool)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        common::missing(
            "FSM_SKIP_TOOLS",
            &format!("`{tool}` is not installed"),
            "scripts/test installs it (Debian: graphviz, plantuml)",
        );
        return None;
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.success(), text))
}

#[test]
fn dot_output_parses_with_graphviz() {
    for spec in specs() {
        let m = fsm_core::spec::load(&spec).unwrap();
        for view in View::ALL {
            let dot = render::render(&m, Format::Dot, view);
            let Some((ok, out)) = run_tool("dot", &["-Tsvg"], &dot) else {
                return;
            };
            assert!(
                ok && out.contains("<svg"),
                "{} ({view}): {out}",
                spec.display()
            );
        }
    }
}

#[test]
fn plantuml_output_parses_with_plantuml() {
    for spec in specs() {
        let m = fsm_core::spec::load(&spec).unwrap();
        for view in View::ALL {
            let puml = render::render(&m, Format::PlantUml, view);
            let Some((ok, out)) = run_tool("plantuml", &["-syntax"], &puml) else {
                return;
            };
            assert!(
                ok && out.starts_with("STATE"),
                "{} ({view}): {out}",
                spec.display()
            );
        }
    }
}

/// Mermaid itself, in headless Chromium (`scripts/browser/mermaid-check.mjs`), renders
/// every spec in both views, and each rendering shows every state drawn.
#[test]
fn mermaid_output_renders_with_mermaid() {
    let dir = std::env::temp_dir().join(format!("fsm-mermaid-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    for spec in specs() {
        let m = fsm_core::spec::load(&spec).unwrap();
        for view in View::ALL {
            let file = dir.join(format!("{}.mmd", snapshot_name(&spec, view.name())));
            std::fs::write(&file, render::render(&m, Format::Mermaid, view)).unwrap();
            let names: Vec<String> = Drawing::new(&m, view)
                .states
                .iter()
                .map(|s| m.state(s.id).name.to_string())
                .collect();
            files.push((file, names));
        }
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/browser/mermaid-check.mjs");
    let out = Command::new("node")
        .arg(&script)
        .args(files.iter().map(|(f, _)| f))
        .output();
    let out = match out {
        Ok(out) if out.status.code() != Some(2) => out,
        Ok(out) => {
            let why = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            common::missing(
                "FSM_SKIP_TOOLS",
                &format!("Mermaid cannot run: {why}"),
                "scripts/setup installs Chromium, Node.js and Mermaid",
            );
            return;
        }
        Err(e) => {
            common::missing(
                "FSM_SKIP_TOOLS",
                &format!("`node` cannot run ({e})"),
                "scripts/setup installs Node.js",
            );
            return;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        files.len(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for ((file, names), line) in files.iter().zip(lines) {
        let head = format!("{{\"file\":{:?},\"svg\":\"<svg", file.display().to_string());
        assert!(
            line.starts_with(&head),
            "Mermaid refused {}: {line}",
            file.display()
        );
        for name in names {
            assert!(
                line.contains(&format!(">{name}<")),
                "{}: {name} not drawn",
                file.display()
            );
        }
    }
    assert!(out.status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

fn readme(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// The code blocks of a Markdown text in the given language.
fn blocks<'a>(text: &'a str, lang: &str) -> Vec<&'a str> {
    let fence = format!("```{lang}\n");
    text.match_indices(&fence)
        .map(|(at, _)| {
            let body = &text[at + fence.len()..];
            &body[..body.find("```").unwrap()]
        })
        .collect()
}

#[test]
fn readme_diagram_is_the_rendered_vm() {
    let vm =
        fsm_core::spec::load(Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/ovc/vm.toml"))
            .unwrap();
    let readme = readme("../README.md");
    assert_eq!(
        blocks(&readme, "mermaid"),
        [render::render(&vm, Format::Mermaid, View::Folded)]
    );
}

#[test]
fn spec_examples_in_the_docs_check_clean() {
    for doc in ["../README.md", "../specs/README.md"] {
        let text = readme(doc);
        let examples = blocks(&text, "toml");
        assert!(!examples.is_empty(), "{doc} has a spec example");
        for example in examples {
            let report = fsm_core::spec::SpecFile::new(doc, example).check();
            assert!(report.diagnostics.is_empty(), "{doc}:\n{}", report.render());
        }
    }
}
