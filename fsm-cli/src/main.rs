//! `fsm`: check state-machine specs, validate transitions, list actions, draw diagrams.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use fsm_core::paths::Path as TestPath;
use fsm_core::render::{self, Format, View};
use fsm_core::spec::{Checked, SpecError, SpecFile};
use fsm_core::{Lint, Machine, Move, Severity, StateId, Target};
use fsm_interchange::Format as ImportFormat;

/// Check state-machine specs, validate transitions and draw diagrams.
#[derive(Parser)]
#[command(name = "fsm", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check specs and print every finding, like rustc.
    ///
    /// Exits 0 when every spec is clean, 1 when a spec has findings, 2 when a spec
    /// cannot be read or is not a well-formed spec file.
    Check {
        /// Spec files, or directories searched for `*.toml` files (a directory
        /// with none below it is an error: exit 2).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Also write every clean spec's diagrams, in every format and both views,
        /// into this directory (`<group>/<spec>.<ext>` full, `<spec>.folded.<ext>`).
        #[arg(long, value_name = "DIR")]
        diagrams: Option<PathBuf>,
        /// Print each finding, each file (or directory given) that cannot be
        /// read or holds no spec, and the summary
        /// as one line of JSON each (`"reason"`: `finding`, `unreadable`,
        /// `summary`) on standard output, instead of text: for CI annotations
        /// and editors. A finding's `line` and `column` are where the text at
        /// fault starts, `end_line` and `end_column` just past it (1-based,
        /// columns in characters; an `unreadable` line has `line` and `column`
        /// too when the file is not UTF-8). The exit code is the same.
        #[arg(long)]
        json: bool,
    },
    /// Is FROM → TO one step of the table? Prints `allowed` (exit 0) or
    /// `refused: <why>` (exit 1); an unknown state exits 2.
    Validate {
        /// The spec file.
        spec: PathBuf,
        /// The state the object is in (case-insensitive).
        from: String,
        /// The state it should move to (case-insensitive).
        to: String,
    },
    /// List the actions that may start in a state.
    Actions {
        /// The spec file.
        spec: PathBuf,
        /// The state (case-insensitive).
        state: String,
    },
    /// Draw a spec's diagram.
    Diagram {
        /// The spec file.
        spec: PathBuf,
        /// mermaid, dot or plantuml.
        #[arg(long, short, default_value = "mermaid")]
        format: Format,
        /// full (every state, each action as start and finish arrows) or folded
        /// (static states only, each move labelled with its transition state).
        #[arg(long, default_value = "full")]
        view: View,
        /// Write to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Print test paths: the shortest path to every state, and paths that together
    /// take every action from every reachable origin.
    Paths {
        /// The spec file.
        spec: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// What changing a spec from OLD to NEW breaks, for objects already stored and
    /// for callers. Prints each change, then a hint for each state or action that
    /// looks renamed without `renamed_from`; exits 1 when one breaks something, 0
    /// when none does, 2 when a spec is unusable.
    Diff {
        /// The spec as it was.
        old: PathBuf,
        /// The spec as it is to be.
        new: PathBuf,
        /// Print each change, each hint and the summary as one line of JSON
        /// each (`"reason"`: `change`, `hint`, `summary`) instead of text. A
        /// change has its `kind` (`state-removed`, `target-changed`, ...), its
        /// `impact` (`stored-objects`, `callers`, `none`), its `message`, and
        /// the names it is about (`state`, `action`, `origin`, `role`,
        /// `guard`, `from`, `to`, `transition`); a hint its `of` (`state` or
        /// `action`), `from`, `to` and `message`. The exit code is the same.
        #[arg(long)]
        json: bool,
    },
    /// Print the spec's table as the seed documents print it.
    Show {
        /// The spec file.
        spec: PathBuf,
    },
    /// Export a spec for another engine: an XState v5 machine config (JSON) or a
    /// W3C SCXML document.
    Export {
        /// xstate or scxml.
        #[arg(long, short)]
        format: ExportFormat,
        /// The spec file.
        spec: PathBuf,
        /// Write to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Serve specs over REST with a live web page: runs the `fsm-serve` binary
    /// (found beside `fsm`, or on PATH, or at $FSM_SERVE) with these arguments;
    /// `fsm serve --help` lists them.
    #[command(disable_help_flag = true)]
    Serve {
        /// The arguments of `fsm-serve`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Import another tool's machine as a spec (TOML): an XState config, an SCXML document, a PlantUML or Mermaid diagram.
    ///
    /// `fsm import FILE` tells the format by what the file holds (a JSON
    /// object: XState; `<scxml>`: SCXML; `@startuml` or a PlantUML server's
    /// image address: PlantUML; `stateDiagram`: Mermaid); `fsm import FORMAT
    /// FILE` says it.
    ///
    /// Exits 0 when the spec checks (its warnings printed), 1 when it has
    /// errors (a state no action leaves, say: the spec is written all the same,
    /// and the findings point into it), 2 when the file cannot be read as that
    /// format (or its format cannot be told).
    #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
    Import {
        /// The format read, when it is said.
        #[command(subcommand)]
        from: Option<ImportFrom>,
        /// The file, in whichever format it is.
        #[arg(required = true)]
        file: Option<PathBuf>,
        /// The machine's name, unless the file names it (default: the file's
        /// name).
        #[arg(long)]
        name: Option<String>,
        /// Write the spec to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
}

/// What `fsm export` writes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ExportFormat {
    /// An XState v5 machine config, as JSON.
    Xstate,
    /// A W3C SCXML document.
    Scxml,
}

/// What `fsm import` reads.
#[derive(Subcommand)]
enum ImportFrom {
    /// A PlantUML state diagram (`@startuml` ... `@enduml`), or a document
    /// holding one as a PlantUML server's image address; composite states
    /// (`state A { ... }`) flatten into the states drawn in them.
    Plantuml {
        /// The diagram file.
        file: PathBuf,
        /// The machine's name, unless the diagram names itself (default: the
        /// file's name).
        #[arg(long)]
        name: Option<String>,
        /// Write the spec to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// An XState v5 machine config (JSON, what `createMachine` takes), flat,
    /// nested (each state without children is one of the spec's, named by its
    /// path, `a.b`), or as `fsm export --format xstate` writes it.
    Xstate {
        /// The config file.
        file: PathBuf,
        /// The machine's name, unless the config has an `id` (default: the
        /// file's name).
        #[arg(long)]
        name: Option<String>,
        /// Write the spec to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// A Mermaid state diagram (`stateDiagram-v2` ...), or a Markdown
    /// document holding one in a fenced `mermaid` block; composite states
    /// (`state A { ... }`) flatten into the states drawn in them.
    Mermaid {
        /// The diagram file, or the document.
        file: PathBuf,
        /// The machine's name, unless the diagram has a `title` (default: the
        /// file's name).
        #[arg(long)]
        name: Option<String>,
        /// Write the spec to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// A W3C SCXML document, flat, nested (each state without children is one
    /// of the spec's, by its id), or as `fsm export --format scxml` writes it.
    Scxml {
        /// The document.
        file: PathBuf,
        /// The machine's name, unless the document has a `name` (default: the
        /// file's name).
        #[arg(long)]
        name: Option<String>,
        /// Write the spec to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
}

/// A failure that ends the command with exit code 2 (unusable input), after its
/// message has been printed.
struct Unusable;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check {
            paths,
            diagrams,
            json,
        } => check(&paths, diagrams.as_deref(), json),
        Command::Validate { spec, from, to } => validate(&spec, &from, &to),
        Command::Actions { spec, state } => actions(&spec, &state),
        Command::Diagram {
            spec,
            format,
            view,
            output,
        } => diagram(&spec, format, view, output.as_deref()),
        Command::Paths { spec, json } => load(&spec).map(|m| {
            print!("{}", paths(&m, json));
            ExitCode::SUCCESS
        }),
        Command::Diff { old, new, json } => diff(&old, &new, json),
        Command::Show { spec } => load(&spec).map(|m| {
            print!("{}", render::table(&m));
            ExitCode::SUCCESS
        }),
        Command::Export {
            format,
            spec,
            output,
        } => export(&spec, format, output.as_deref()),
        Command::Import {
            from: Some(from), ..
        } => {
            let (format, file, name, output) = match from {
                ImportFrom::Plantuml { file, name, output } => {
                    (ImportFormat::Plantuml, file, name, output)
                }
                ImportFrom::Xstate { file, name, output } => {
                    (ImportFormat::Xstate, file, name, output)
                }
                ImportFrom::Mermaid { file, name, output } => {
                    (ImportFormat::Mermaid, file, name, output)
                }
                ImportFrom::Scxml { file, name, output } => {
                    (ImportFormat::Scxml, file, name, output)
                }
            };
            import(&file, Some(format), name.as_deref(), output.as_deref())
        }
        Command::Import {
            from: None,
            file,
            name,
            output,
        } => {
            let file = file.expect("clap requires the file without a format");
            import(&file, None, name.as_deref(), output.as_deref())
        }
        Command::Serve { args } => serve(&args),
    };
    result.unwrap_or(ExitCode::from(2))
}

fn color() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

fn rendered(report: &Checked) -> String {
    if color() {
        report.render_styled()
    } else {
        report.render()
    }
}

/// Loads a spec for the commands that need a usable machine.
fn load(path: &Path) -> Result<Machine, Unusable> {
    let file = SpecFile::read(path).map_err(|e| {
        eprintln!("error: {e}");
        Unusable
    })?;
    let report = file.check();
    eprint!("{}", rendered(&report));
    report.machine.ok_or_else(|| {
        eprintln!(
            "error: {} has errors; run `fsm check` on it",
            path.display()
        );
        Unusable
    })
}

/// The spec files of `paths`: each file as given, and every `*.toml` below
/// each directory given, in sorted order; and each directory that could not be
/// read or holds no spec, with why (a wrong path, not a clean run).
fn spec_files(paths: &[PathBuf]) -> (Vec<PathBuf>, Vec<(PathBuf, String)>) {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.path());
        for entry in entries {
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                walk(&path, out)?;
            } else if path.extension().is_some_and(|e| e == "toml") {
                out.push(path);
            }
        }
        Ok(())
    }
    let (mut out, mut wrong) = (Vec::new(), Vec::new());
    for path in paths {
        if !path.is_dir() {
            out.push(path.clone());
            continue;
        }
        let mut found = Vec::new();
        match walk(path, &mut found) {
            Err(e) => wrong.push((
                path.clone(),
                format!("cannot read directory {}: {e}", path.display()),
            )),
            Ok(()) if found.is_empty() => wrong.push((
                path.clone(),
                format!("no spec files (*.toml) in {} or below it", path.display()),
            )),
            Ok(()) => out.extend(found),
        }
    }
    (out, wrong)
}

fn check(paths: &[PathBuf], diagrams: Option<&Path>, json: bool) -> Result<ExitCode, Unusable> {
    let (files, wrong) = spec_files(paths);
    // Counted: the summary line must not say `0 errors` of a run that exits 2.
    let (mut errors, mut warnings, mut unusable) = (wrong.len(), 0, !wrong.is_empty());
    for (path, message) in &wrong {
        match json {
            true => println!(
                "{}",
                serde_json::json!({ "reason": "unreadable", "file": path.display().to_string(), "message": message })
            ),
            false => eprintln!("error: {message}"),
        }
    }
    for path in &files {
        let file = match SpecFile::read(path) {
            Ok(file) => file,
            Err(e) => {
                match json {
                    true => {
                        let mut line = serde_json::json!({ "reason": "unreadable", "file": path.display().to_string(), "message": e.to_string() });
                        // Text that is not UTF-8: where, as a finding says it.
                        if let SpecError::NotUtf8 { source, .. } = &e {
                            line["line"] = source.line.into();
                            line["column"] = source.column.into();
                        }
                        println!("{line}");
                    }
                    false => eprintln!("error: {e}"),
                }
                errors += 1;
                unusable = true;
                continue;
            }
        };
        let report = file.check();
        match json {
            true => {
                for d in &report.diagnostics {
                    println!("{}", finding_json(&report, d));
                }
            }
            false => eprint!("{}", rendered(&report)),
        }
        for d in &report.diagnostics {
            match d.severity() {
                Severity::Error => errors += 1,
                Severity::Warning => warnings += 1,
            }
            unusable |= matches!(d.lint, Lint::Syntax | Lint::Schema);
        }
        if let (Some(dir), Some(machine)) = (diagrams, &report.machine) {
            write_diagrams(dir, path, machine)?;
        }
    }
    if json {
        println!(
            "{}",
            serde_json::json!({
                "reason": "summary",
                "specs": files.len(),
                "errors": errors,
                "warnings": warnings,
                "diagrams": diagrams.map(|dir| dir.display().to_string()),
            })
        );
    } else {
        println!(
            "checked {} spec{}: {errors} error{}, {warnings} warning{}",
            files.len(),
            plural(files.len()),
            plural(errors),
            plural(warnings)
        );
        if let Some(dir) = diagrams {
            println!("diagrams written to {}", dir.display());
        }
    }
    Ok(if unusable {
        ExitCode::from(2)
    } else if errors + warnings > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// One finding of `fsm check --json`: what, where (1-based line and column,
/// in characters, of the start and the end of the text at fault), the remark
/// under it, the fix, and the related places.
fn finding_json(report: &fsm_core::spec::Checked, d: &fsm_core::Diagnostic) -> serde_json::Value {
    let text = report.file().text();
    let place = |at: Option<fsm_core::spec::Location>| match at {
        Some(at) => {
            let end = fsm_core::spec::Location::of(text, at.span.end..at.span.end);
            serde_json::json!({
                "line": at.line,
                "column": at.column,
                "end_line": end.line,
                "end_column": end.column,
            })
        }
        None => serde_json::json!({}),
    };
    let related: Vec<serde_json::Value> = d
        .related
        .iter()
        .map(|(site, message)| {
            let mut related = place(report.locate(site));
            related["message"] = message.as_str().into();
            related
        })
        .collect();
    let mut finding = serde_json::json!({
        "reason": "finding",
        // (Displayed: a path that is not UTF-8 does not serialize.)
        "file": report.file().path().display().to_string(),
        "lint": d.lint.code(),
        "severity": d.severity().to_string(),
        "message": d.message,
        "label": d.label,
        "help": report.help(d),
        "related": related,
    });
    if let serde_json::Value::Object(at) = place(report.location(d)) {
        finding.as_object_mut().expect("an object").extend(at);
    }
    finding
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Writes `DIR/<parent folder>/<spec name>.<ext>` in every format.
fn write_diagrams(dir: &Path, spec: &Path, machine: &Machine) -> Result<(), Unusable> {
    let group = spec
        .parent()
        .and_then(Path::file_name)
        .map(PathBuf::from)
        .unwrap_or_default();
    let stem = spec
        .file_stem()
        .map(PathBuf::from)
        .unwrap_or_else(|| machine.name().into());
    let out_dir = dir.join(group);
    std::fs::create_dir_all(&out_dir).map_err(|e| {
        eprintln!("error: cannot create {}: {e}", out_dir.display());
        Unusable
    })?;
    for format in Format::ALL {
        for view in View::ALL {
            let name = match view {
                View::Full => format!("{}.{}", stem.display(), format.extension()),
                _ => format!("{}.{view}.{}", stem.display(), format.extension()),
            };
            write_file(&out_dir.join(name), &render::render(machine, format, view))?;
        }
    }
    Ok(())
}

fn write_file(path: &Path, text: &str) -> Result<(), Unusable> {
    std::fs::write(path, text).map_err(|e| {
        eprintln!("error: cannot write {}: {e}", path.display());
        Unusable
    })
}

/// Resolves a state name given on the command line, ignoring case.
fn state(machine: &Machine, name: &str) -> Result<StateId, Unusable> {
    machine.resolve_state(name).map_err(|unknown| {
        let hint = (unknown.suggestion)
            .map(|s| format!("; did you mean `{s}`?"))
            .unwrap_or_default();
        eprintln!(
            "error: `{name}` is not a state of {}{hint}",
            unknown.machine
        );
        Unusable
    })
}

fn validate(spec: &Path, from: &str, to: &str) -> Result<ExitCode, Unusable> {
    let machine = load(spec)?;
    let (from, to) = (state(&machine, from)?, state(&machine, to)?);
    match machine.validate_transition(from, to) {
        Ok(step) => {
            let action = machine.action(step.action());
            let what = match step {
                Move::Start(_) => "starts",
                Move::Finish(_) => "finishes",
                Move::Whole(_) => "runs",
            };
            let mut line = format!(
                "allowed: {} {what} action `{}`",
                arrow(&machine, from, to),
                action.name
            );
            if !action.roles.is_empty() && step != Move::Finish(step.action()) {
                line.push_str(&format!("; roles: {}", action.roles.join(", ")));
            }
            if !action.guards.is_empty() && step != Move::Finish(step.action()) {
                let guards = machine.guard_names(step.action());
                line.push_str(&format!("; guards: {}", guards.join(", ")));
            }
            println!("{line}");
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => {
            println!("refused: {why}");
            Ok(ExitCode::from(1))
        }
    }
}

fn diff(old: &Path, new: &Path, json: bool) -> Result<ExitCode, Unusable> {
    use fsm_core::evolve::Impact;
    let (old, new) = (load(old)?, load(new)?);
    let changes = fsm_core::evolve::diff(&old, &new);
    let breaking = changes
        .iter()
        .filter(|c| c.impact() != Impact::None)
        .count();
    for change in &changes {
        let (tag, impact) = match change.impact() {
            Impact::StoredObjects => ("breaking (stored objects)", "stored-objects"),
            Impact::Callers => ("breaking (callers)", "callers"),
            Impact::None => ("compatible", "none"),
        };
        match json {
            true => {
                let mut line = change_names(change);
                line["reason"] = "change".into();
                line["kind"] = change.kind().into();
                line["impact"] = impact.into();
                line["message"] = change.to_string().into();
                println!("{line}");
            }
            false => println!("{tag}: {change}"),
        }
    }
    for rename in fsm_core::evolve::likely_renames(&old, &new) {
        match json {
            true => println!(
                "{}",
                serde_json::json!({
                    "reason": "hint",
                    "of": rename.of.as_str(),
                    "from": rename.from,
                    "to": rename.to,
                    "message": rename.to_string(),
                })
            ),
            false => println!("hint: {rename}"),
        }
    }
    match json {
        true => println!(
            "{}",
            serde_json::json!({ "reason": "summary", "changes": changes.len(), "breaking": breaking })
        ),
        false => println!(
            "{} change{}, {breaking} breaking",
            changes.len(),
            plural(changes.len())
        ),
    }
    Ok(if breaking > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The names a change of `fsm diff --json` is about, as fields of its line.
fn change_names(change: &fsm_core::evolve::Change) -> serde_json::Value {
    use fsm_core::evolve::Change;
    use serde_json::json;
    match change {
        Change::StateAdded(state) | Change::StateRemoved(state) | Change::StateTerminal(state) => {
            json!({ "state": state })
        }
        Change::StateRenamed { from, to } | Change::Initial { from, to } => {
            json!({ "from": from, "to": to })
        }
        Change::StateKind { state, transition } => {
            json!({ "state": state, "transition": transition })
        }
        Change::Owner { state, from, to } => json!({ "state": state, "from": from, "to": to }),
        Change::Removal { state, from, to } => json!({ "state": state, "from": from, "to": to }),
        Change::ActionAdded(action) | Change::ActionRemoved(action) => json!({ "action": action }),
        Change::ActionRenamed { from, to } => json!({ "from": from, "to": to }),
        Change::MoveRemoved { action, origin } | Change::MoveAdded { action, origin } => {
            json!({ "action": action, "origin": origin })
        }
        Change::TargetChanged {
            action,
            origin,
            from,
            to,
        } => json!({ "action": action, "origin": origin, "from": from, "to": to }),
        Change::RoleAdded { action, role } => json!({ "action": action, "role": role }),
        Change::GuardAdded { action, guard } => json!({ "action": action, "guard": guard }),
    }
}

fn arrow(machine: &Machine, from: StateId, to: StateId) -> String {
    format!("{} -> {}", machine.state(from).name, machine.state(to).name)
}

fn actions(spec: &Path, name: &str) -> Result<ExitCode, Unusable> {
    let machine = load(spec)?;
    let id = state(&machine, name)?;
    let state = machine.state(id);
    let mut out = std::io::stdout().lock();
    if state.is_transition() {
        let running: Vec<String> = machine
            .actions_via(id)
            .map(|a| format!("`{}`", machine.action(a).name))
            .collect();
        let _ = writeln!(
            out,
            "{} is a transition state: {} is running, no action can start",
            state.name,
            running.join(" or ")
        );
        return Ok(ExitCode::SUCCESS);
    }
    let ids: Vec<_> = machine.actions_from(id).collect();
    if ids.is_empty() {
        let _ = writeln!(out, "no action starts in {}", state.name);
    }
    for a in ids {
        let action = machine.action(a);
        let mut line = format!("{}:", action.name);
        if let Some(via) = action.via {
            line.push_str(&format!(" via {}", machine.state(via).name));
        }
        match (
            action.changes_state(),
            &action.target,
            machine.rule(a, id).map(|r| r.target),
        ) {
            (false, _, _) => line.push_str(" keeps the state"),
            (true, Target::Origin, _) => line.push_str(&format!(" back to {}", state.name)),
            (true, _, Some(t)) => line.push_str(&format!(" to {}", machine.state(t).name)),
            (true, _, None) => {}
        }
        if !action.roles.is_empty() {
            line.push_str(&format!("; roles: {}", action.roles.join(", ")));
        }
        if !action.guards.is_empty() {
            let guards = machine.guard_names(a);
            line.push_str(&format!("; guards: {}", guards.join(", ")));
        }
        if action.hidden {
            line.push_str("; hidden");
        }
        let _ = writeln!(out, "{line}");
    }
    // Not an action, but what else may be done to an object here.
    match state.remove.as_deref() {
        None => {}
        Some([]) => {
            let _ = writeln!(out, "(removal: by anyone)");
        }
        Some(roles) => {
            let _ = writeln!(out, "(removal: roles: {})", roles.join(", "));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `fsm-serve` with `args`: the server lives in its own binary, so that the
/// table tools carry no server, async runtime or gRPC.
fn serve(args: &[std::ffi::OsString]) -> Result<ExitCode, Unusable> {
    let name = format!("fsm-serve{}", std::env::consts::EXE_SUFFIX);
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(&name)))
        .filter(|p| p.is_file());
    let program = std::env::var_os("FSM_SERVE")
        .map(PathBuf::from)
        .or(beside)
        .unwrap_or_else(|| PathBuf::from(&name));
    match std::process::Command::new(&program).args(args).status() {
        Ok(status) => Ok(match status.code() {
            Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            None => ExitCode::FAILURE,
        }),
        Err(e) => {
            eprintln!(
                "error: `fsm serve` runs `{}`, which could not be started ({e}); \
                 install it with `cargo install --path fsm-serve`",
                program.display()
            );
            Err(Unusable)
        }
    }
}

fn export(spec: &Path, format: ExportFormat, output: Option<&Path>) -> Result<ExitCode, Unusable> {
    let machine = load(spec)?;
    let text = match format {
        ExportFormat::Xstate => fsm_interchange::xstate(&machine),
        ExportFormat::Scxml => fsm_interchange::scxml(&machine),
    }
    .map_err(|e| {
        eprintln!("error: {}: {e}", spec.display());
        Unusable
    })?;
    match output {
        Some(path) => write_file(path, &text)?,
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Imports `file` in `format` (told from what the file holds when not said;
/// the machine's name is `name` unless the file names it); the spec it writes
/// is checked before it is written, so what comes out loads. Exit 2 when the
/// file cannot be read.
fn import(
    file: &Path,
    format: Option<ImportFormat>,
    name: Option<&str>,
    output: Option<&Path>,
) -> Result<ExitCode, Unusable> {
    let bytes = std::fs::read(file).map_err(|e| {
        eprintln!("error: cannot read {}: {e}", file.display());
        Unusable
    })?;
    let text = fsm_core::spec::utf8_text(bytes).map_err(|e| {
        eprintln!("error: cannot read {}", e.in_file(file));
        Unusable
    })?;
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "machine".into());
    let refused = |e: fsm_interchange::ImportError| {
        eprintln!("error: {}: {e}", file.display());
        Unusable
    };
    let format = match format {
        Some(format) => format,
        None => ImportFormat::detect(&text).map_err(refused)?,
    };
    let spec = format
        .import(&text, name.unwrap_or(&stem))
        .map_err(refused)?;
    // Checked as written, and named where it goes: the findings' lines and
    // columns are the written spec's, which the user then edits.
    let shown = output.map_or_else(|| PathBuf::from("<stdout>"), Path::to_path_buf);
    let report = SpecFile::new(shown, spec.as_str()).check();
    match output {
        Some(path) => write_file(path, &spec)?,
        None => print!("{spec}"),
    }
    eprint!("{}", rendered(&report));
    if report.machine.is_some() {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "error: {} imports as a spec with errors; it is written all the same, for you to mend",
        file.display()
    );
    Ok(ExitCode::from(1))
}

fn diagram(
    spec: &Path,
    format: Format,
    view: View,
    output: Option<&Path>,
) -> Result<ExitCode, Unusable> {
    let machine = load(spec)?;
    let text = render::render(&machine, format, view);
    match output {
        Some(path) => write_file(path, &text)?,
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// `fsm paths`: text, or JSON with the states and actions by name.
fn paths(m: &Machine, json: bool) -> String {
    let paths = fsm_core::paths::TestPaths::of(m);
    let name = |s: fsm_core::StateId| m.state(s).name.to_string();
    let named = |p: &TestPath| -> Vec<serde_json::Value> {
        p.rules
            .iter()
            .map(|r| serde_json::json!({ "action": m.action(r.action).name, "from": name(r.origin), "to": name(r.target) }))
            .collect()
    };
    if json {
        let shortest: Vec<_> = paths
            .shortest
            .iter()
            .map(|p| serde_json::json!({ "state": name(p.reaches), "steps": named(&p.path) }))
            .collect();
        let cover: Vec<_> = paths.cover.iter().map(named).collect();
        let uncovered: Vec<_> = paths
            .uncovered
            .iter()
            .map(|r| serde_json::json!({ "action": m.action(r.action).name, "from": name(r.origin) }))
            .collect();
        let doc = serde_json::json!({
            "machine": m.name(),
            "initial": name(m.initial()),
            "shortest": shortest,
            "cover": cover,
            "uncovered": uncovered,
        });
        return format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).expect("JSON of strings")
        );
    }
    let mut out = format!("shortest paths from {}:\n", name(m.initial()));
    let width = paths
        .shortest
        .iter()
        .map(|p| name(p.reaches).len())
        .max()
        .unwrap_or(0);
    for p in &paths.shortest {
        let during = if m.state(p.reaches).is_transition() {
            "  (while the last action runs)"
        } else {
            ""
        };
        out += &format!(
            "  {:<width$}  {}{during}\n",
            name(p.reaches),
            p.path.describe(m)
        );
    }
    let steps: usize = paths.cover.iter().map(|p| p.rules.len()).sum();
    out += &format!(
        "\npaths taking every action from every reachable origin ({} path{}, {steps} step{}):\n",
        paths.cover.len(),
        plural(paths.cover.len()),
        plural(steps)
    );
    for (i, p) in paths.cover.iter().enumerate() {
        out += &format!("  {}. {}\n", i + 1, p.describe(m));
    }
    if !paths.uncovered.is_empty() {
        out += "\nnot reachable, so not covered:\n";
        for r in &paths.uncovered {
            out += &format!("  {} from {}\n", m.action(r.action).name, name(r.origin));
        }
    }
    out
}
