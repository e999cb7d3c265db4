//! The `fsm` command as users run it: outputs and exit codes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn specs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs")
}

fn spec(path: &str) -> String {
    specs().join(path).display().to_string()
}

fn fsm(args: &[&str]) -> (i32, String, String) {
    fsm_in(Path::new(env!("CARGO_MANIFEST_DIR")), args)
}

/// Runs `fsm` in `dir`: exit code, standard output, standard error.
fn fsm_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(env!("CARGO_BIN_EXE_fsm"))
        .current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run fsm");
    (
        status.code().expect("exit code"),
        String::from_utf8(stdout).unwrap(),
        String::from_utf8(stderr).unwrap(),
    )
}

#[test]
fn check_every_shipped_spec_and_write_diagrams() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path();
    let (code, stdout, stderr) = fsm(&[
        "check",
        &specs().display().to_string(),
        "--diagrams",
        &out.display().to_string(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.starts_with("checked 15 specs: 0 errors, 0 warnings"),
        "{stdout}"
    );
    for group in [
        "ovc/vm",
        "ovc/disk",
        "sabakan/machine",
        "mizar/vpc",
        "kusionstack/podopslifecycle",
    ] {
        for ext in [
            "mmd",
            "dot",
            "puml",
            "folded.mmd",
            "folded.dot",
            "folded.puml",
        ] {
            let file = out.join(format!("{group}.{ext}"));
            assert!(
                std::fs::metadata(&file).is_ok_and(|m| m.len() > 0),
                "{} missing",
                file.display()
            );
        }
    }
    let mermaid = std::fs::read_to_string(out.join("ovc/vm.mmd")).unwrap();
    assert!(mermaid.contains("RUNNING --> PAUSING: pause"));
}

#[test]
fn check_reports_findings_with_file_line_and_column() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[machine]\nname = \"t\"\ninitial = \"A\"\n[states]\nA = \"a\"\nB = { terminal = true }\n[actions]\ngo = { from = \"A\", to = \"C\" }\n[roles]\nspare = \"Nobody\"\n",
    )
    .unwrap();
    let (code, stdout, stderr) = fsm(&["check", &bad.display().to_string()]);
    assert_eq!(code, 1);
    assert!(stdout.contains("1 error, 1 warning"), "{stdout}");
    assert!(
        stderr.contains("error[unknown-state]: unknown state `C` in the target of action `go`"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{}:8:25", bad.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains("warning[unused-role]: role `spare`"),
        "{stderr}"
    );
    // `B` is reached by nothing only because `C` was meant to be it: a finding
    // that follows from another is left out.
    assert!(!stderr.contains("unreachable"), "{stderr}");
}

/// A guard's CEL expression that does not parse is a finding of `fsm check`, at
/// the character at fault, on the expression's own line in a multi-line string;
/// not an error later, when `fsm serve` or a runtime builds the machine.
#[test]
fn check_parses_the_guards_cel() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[machine]\nname = \"t\"\ninitial = \"A\"\n[guards]\nempty = { description = \"No keys left\", cel = \"\"\"\nsize(object.data.keys) == 0 &&\n  object.data.ready ==\"\"\" }\n[states]\nA = \"a\"\nB = \"b\"\n[actions]\ngo = { from = \"A\", to = \"B\", guards = \"empty\" }\nback = { from = \"B\", to = \"A\" }\n",
    )
    .unwrap();
    let (code, stdout, stderr) = fsm(&["check", &bad.display().to_string()]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stdout.contains("1 error"), "{stdout}");
    assert!(
        stderr.contains(
            "error[cel]: `cel` of a guard `empty`: not a CEL expression: Syntax error: mismatched input '<EOF>' expecting"
        ),
        "{stderr}"
    );
    // Line 7, after `  object.data.ready ==`: the closing quotes.
    assert!(
        stderr.contains(&format!("{}:7:23", bad.display())),
        "{stderr}"
    );
}

#[test]
fn check_exits_2_on_malformed_or_missing_input() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bad = dir.join("broken.toml");
    std::fs::write(&bad, "[machine\nname = 1\n").unwrap();
    let (code, _, stderr) = fsm(&["check", &bad.display().to_string()]);
    assert_eq!(code, 2);
    assert!(stderr.contains("error[syntax]"), "{stderr}");
    assert!(stderr.contains("broken.toml:1:9"), "{stderr}");

    // An unreadable file counts as an error in the summary, beside the
    // findings of the readable ones.
    let (code, stdout, stderr) = fsm(&[
        "check",
        &dir.join("absent.toml").display().to_string(),
        &specs().join("ovc/vm.toml").display().to_string(),
    ]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("cannot read spec") && stderr.contains("absent.toml"),
        "{stderr}"
    );
    assert_eq!(stdout.trim(), "checked 2 specs: 1 error, 0 warnings");

    // A spec saved in Latin-1: where its first byte that is not UTF-8 is, in the
    // characters of its line (`é` before it is one), as a finding says it.
    let latin1 = dir.join("latin1.toml");
    std::fs::write(&latin1, b"[machine]\nname = \"\xc3\xa9t\xe9\"\n").unwrap();
    let (code, _, stderr) = fsm(&["check", &latin1.display().to_string()]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains(&format!(
            "error: cannot read spec {}:2:11: byte 0xe9 is not UTF-8 (a spec is UTF-8 text)",
            latin1.display()
        )),
        "{stderr}"
    );
    let (code, stdout, _) = fsm(&["check", "--json", &latin1.display().to_string()]);
    assert_eq!(code, 2);
    let line: serde_json::Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(
        (&line["reason"], &line["line"], &line["column"]),
        (&"unreadable".into(), &2.into(), &11.into())
    );
    // And a diagram to import, likewise.
    let puml = dir.join("latin1.puml");
    std::fs::write(&puml, b"@startuml\n[*] --> \xe9t\xe9\n@enduml\n").unwrap();
    let (code, _, stderr) = fsm(&["import", "plantuml", &puml.display().to_string()]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains(&format!(
            "error: cannot read {}:2:9: byte 0xe9 is not UTF-8",
            puml.display()
        )),
        "{stderr}"
    );

    // A directory named for its specs that holds none is a wrong path, not a
    // clean run of nothing.
    let empty = dir.join("empty");
    std::fs::create_dir_all(empty.join("sub")).unwrap();
    std::fs::write(empty.join("sub/notes.md"), "no spec here").unwrap();
    let (code, stdout, stderr) = fsm(&["check", &empty.display().to_string()]);
    assert_eq!(code, 2, "{stdout}");
    assert!(
        stderr.contains(&format!(
            "error: no spec files (*.toml) in {} or below it",
            empty.display()
        )),
        "{stderr}"
    );
}

/// Each line of `stdout`, as JSON.
fn json_lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `--json`: a line of JSON per finding (with where it starts and ends, the
/// remark, the fix and the related places), per unreadable file, and the
/// summary; nothing on standard error; the same exit code.
#[test]
fn check_json_gives_one_line_per_finding_and_the_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[machine]\nname = \"m\"\ninitial = \"A\"\n[states]\nA = {}\nB = { transition = true }\nC = { terminal = true }\n[actions]\ngo = { from = \"A\", to = \"B\" }\nend = { from = \"A\", to = \"C\" }\n",
    )
    .unwrap();
    let (code, stdout, stderr) = fsm(&[
        "check",
        "--json",
        &bad.display().to_string(),
        &dir.join("absent.toml").display().to_string(),
    ]);
    assert_eq!(code, 2);
    assert!(stderr.is_empty(), "{stderr}");
    let lines = json_lines(&stdout);
    let reasons: Vec<&str> = lines
        .iter()
        .map(|l| l["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["finding", "finding", "unreadable", "summary"]);
    let target = &lines[1];
    assert_eq!(target["lint"], "transition-target");
    assert_eq!(target["severity"], "error");
    assert_eq!(
        target["message"],
        "action `go` ends in transition state `B`"
    );
    // `"B"` on line 9, from column 25 to just past it.
    let at = |v: &serde_json::Value| {
        [&v["line"], &v["column"], &v["end_line"], &v["end_column"]].map(|n| n.as_u64().unwrap())
    };
    assert_eq!(at(target), [9, 25, 9, 28]);
    assert_eq!(target["label"], "an action must end in a static state");
    assert_eq!(at(&target["related"][0]), [6, 1, 6, 2]);
    assert_eq!(
        target["related"][0]["message"],
        "declared as a transition state here"
    );
    assert_eq!(
        lines[0]["help"],
        "name it in an action's `via`, or make `B` static"
    );
    assert!(lines[2]["file"].as_str().unwrap().ends_with("absent.toml"));
    assert_eq!(
        (
            &lines[3]["specs"],
            &lines[3]["errors"],
            &lines[3]["warnings"]
        ),
        (&2.into(), &3.into(), &0.into())
    );

    // A directory with no spec is an unreadable line of its own, and the
    // specs beside it are checked all the same.
    let empty = dir.join("empty");
    std::fs::create_dir(&empty).unwrap();
    let (code, stdout, stderr) = fsm(&[
        "check",
        "--json",
        &empty.display().to_string(),
        &bad.display().to_string(),
    ]);
    assert_eq!(code, 2);
    assert!(stderr.is_empty(), "{stderr}");
    let lines = json_lines(&stdout);
    let reasons: Vec<&str> = lines
        .iter()
        .map(|l| l["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["unreadable", "finding", "finding", "summary"]);
    assert_eq!(lines[0]["file"], empty.display().to_string());
    assert_eq!(
        lines[0]["message"],
        format!("no spec files (*.toml) in {} or below it", empty.display())
    );
    assert_eq!(
        (&lines[3]["specs"], &lines[3]["errors"]),
        (&1.into(), &3.into())
    );

    // A file name that is not UTF-8 is shown, lossily, not a panic.
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let odd = dir.join(std::ffi::OsStr::from_bytes(b"odd\xffname.toml"));
        std::fs::copy(&bad, &odd).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_fsm"))
            .args(["check".as_ref(), "--json".as_ref(), odd.as_os_str()])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let first: serde_json::Value = serde_json::from_str(
            String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap();
        assert!(
            first["file"]
                .as_str()
                .unwrap()
                .ends_with("odd\u{fffd}name.toml")
        );
    }
}

#[test]
fn validate_allows_each_kind_of_step() {
    let vm = spec("ovc/vm.toml");
    for (from, to, expect) in [
        (
            "RUNNING",
            "PAUSING",
            "allowed: RUNNING -> PAUSING starts action `pause`",
        ),
        (
            "PAUSING",
            "PAUSED",
            "allowed: PAUSING -> PAUSED finishes action `pause`",
        ),
        (
            "running",
            "Paused",
            "allowed: RUNNING -> PAUSED runs action `pause`",
        ),
        (
            "HALTED",
            "HALTED",
            "allowed: HALTED -> HALTED runs action `add_disk`",
        ),
    ] {
        let (code, stdout, stderr) = fsm(&["validate", &vm, from, to]);
        assert_eq!(code, 0, "{from} -> {to}: {stdout}{stderr}");
        assert_eq!(stdout.trim(), expect);
    }
    let (code, stdout, _) = fsm(&[
        "validate",
        &spec("sabakan/machine.toml"),
        "Retiring",
        "Retired",
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout.trim(),
        "allowed: Retiring -> Retired runs action `complete_retirement`; roles: controller; guards: keys_deleted"
    );
}

#[test]
fn validate_refuses_with_the_reason() {
    let vm = spec("ovc/vm.toml");
    let cases = [
        (
            "DEPLOYING",
            "HALTED",
            "refused: DEPLOYING is a transition state: deploy is running and can only end in RUNNING, not HALTED",
        ),
        (
            "DESTROYED",
            "RUNNING",
            "refused: DESTROYED is terminal: no action leaves it",
        ),
        (
            "VIRTUAL",
            "PAUSED",
            "refused: no action moves VIRTUAL to PAUSED; from VIRTUAL the table allows: deploy -> DEPLOYING, deploy -> RUNNING",
        ),
    ];
    for (from, to, expect) in cases {
        let (code, stdout, _) = fsm(&["validate", &vm, from, to]);
        assert_eq!(code, 1, "{from} -> {to}");
        assert_eq!(stdout.trim(), expect);
    }
    let (code, stdout, _) = fsm(&[
        "validate",
        &spec("sabakan/machine.toml"),
        "Unhealthy",
        "Healthy",
    ]);
    assert_eq!(code, 1);
    assert_eq!(
        stdout.trim(),
        "refused: no action moves Unhealthy to Healthy; from Unhealthy the table allows: retire -> Retiring, reinitialize -> Uninitialized"
    );
}

#[test]
fn validate_unknown_state_suggests_a_name() {
    let (code, stdout, stderr) = fsm(&["validate", &spec("ovc/vm.toml"), "RUNNIG", "PAUSED"]);
    assert_eq!(code, 2);
    assert!(stdout.is_empty());
    assert_eq!(
        stderr.trim(),
        "error: `RUNNIG` is not a state of vm; did you mean `RUNNING`?"
    );
}

#[test]
fn actions_lists_what_may_start() {
    let (code, stdout, _) = fsm(&["actions", &spec("ovc/disk.toml"), "assigned"]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        "detach: via DETACHING to CREATED\ndelete: via DELETING to TOBEDELETED\ndestroy: via DESTROYING to DESTROYED\n"
    );
    let (_, stdout, _) = fsm(&["actions", &spec("ovc/vm.toml"), "HALTED"]);
    assert!(
        stdout.contains("add_disk: via ADDING_DISK back to HALTED\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("migrate: keeps the state; hidden\n"),
        "{stdout}"
    );
    let (_, stdout, _) = fsm(&["actions", &spec("ovc/vm.toml"), "STOPPING"]);
    assert_eq!(
        stdout,
        "STOPPING is a transition state: `stop` is running, no action can start\n"
    );
    let (_, stdout, _) = fsm(&["actions", &spec("sabakan/machine.toml"), "Retired"]);
    assert!(stdout.ends_with("\n(removal: roles: admin)\n"), "{stdout}");
    assert!(
        !stdout.contains("remove:"),
        "removal is no action: {stdout}"
    );
    assert!(
        !stdout.contains("add_key"),
        "no key can be added to a Retired machine: {stdout}"
    );
    // Removal by anyone; and no line where no one may remove.
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("bin.toml");
    let text = "[machine]\nname = \"bin\"\ninitial = \"Full\"\n[states]\nFull = { remove = true }\nEmpty = \"Emptied\"\n[actions]\nempty = { from = \"Full\", to = \"Empty\" }\nfill = { from = \"Empty\", to = \"Full\" }\n";
    std::fs::write(&file, text).unwrap();
    let file = file.display().to_string();
    let (_, stdout, _) = fsm(&["actions", &file, "Full"]);
    assert_eq!(stdout, "empty: to Empty\n(removal: by anyone)\n");
    let (_, stdout, _) = fsm(&["actions", &file, "Empty"]);
    assert_eq!(stdout, "fill: to Full\n");
}

#[test]
fn diagram_writes_the_chosen_format() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let file = dir.join("vm.dot");
    let (code, _, stderr) = fsm(&[
        "diagram",
        &spec("ovc/vm.toml"),
        "--format",
        "dot",
        "-o",
        &file.display().to_string(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let dot = std::fs::read_to_string(&file).unwrap();
    assert!(dot.starts_with("digraph \"vm\" {"), "{dot}");
    let (code, stdout, _) = fsm(&["diagram", &spec("ovc/vm.toml"), "-f", "plantuml"]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("@startuml vm\n") && stdout.ends_with("@enduml\n"));
    let (code, _, stderr) = fsm(&["diagram", &spec("ovc/vm.toml"), "-f", "svg"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("unknown diagram format `svg`"), "{stderr}");
}

#[test]
fn diagram_draws_the_chosen_view() {
    let vm = spec("ovc/vm.toml");
    let (code, full, _) = fsm(&["diagram", &vm]);
    assert_eq!(code, 0);
    assert!(full.contains("    RUNNING --> PAUSING: pause\n"), "{full}");
    let (code, folded, _) = fsm(&["diagram", &vm, "--view", "folded"]);
    assert_eq!(code, 0);
    assert!(
        folded.contains("    RUNNING --> PAUSED: pause (PAUSING)\n"),
        "{folded}"
    );
    assert!(!folded.contains("PAUSING --> "), "{folded}");
    let (code, explicit, _) = fsm(&["diagram", &vm, "--view", "full"]);
    assert_eq!((code, explicit), (0, full));
    let (code, _, stderr) = fsm(&["diagram", &vm, "--view", "flat"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("unknown diagram view `flat`; expected full or folded"),
        "{stderr}"
    );
}

#[test]
fn show_prints_the_seed_table() {
    let (code, stdout, _) = fsm(&["show", &spec("ovc/vm.toml")]);
    assert_eq!(code, 0);
    assert!(stdout.contains("|Action|Initial State|Transition State|Desired State|\n"));
    assert!(stdout.contains("|stop|RUNNING / PAUSED|STOPPING|HALTED|\n"));
    assert!(stdout.contains("|add_disk|PAUSED|ADDING_DISK|PAUSED|\n"));
    assert!(
        stdout.contains("|migrate (hidden)|RUNNING / PAUSED / HALTED|—|(unchanged)|\n"),
        "{stdout}"
    );
}

#[test]
fn paths_prints_shortest_paths_and_the_cover_as_text_and_json() {
    let (code, stdout, _) = fsm(&["paths", &spec("ovc/node.toml")]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        "shortest paths from ENABLED:
  ENABLED                 (start)
  PUTTING_IN_MAINTENANCE  put_in_maintenance -> MAINTENANCE  (while the last action runs)
  MAINTENANCE             put_in_maintenance -> MAINTENANCE
  ENABLING                put_in_maintenance -> MAINTENANCE, enable -> ENABLED  (while the last action runs)
  DECOMMISSIONING         decommission -> DECOMMISSIONED  (while the last action runs)
  DECOMMISSIONED          decommission -> DECOMMISSIONED

paths taking every action from every reachable origin (2 paths, 5 steps):
  1. put_in_maintenance -> MAINTENANCE, enable -> ENABLED, decommission -> DECOMMISSIONED
  2. put_in_maintenance -> MAINTENANCE, decommission -> DECOMMISSIONED
"
    );

    let (code, stdout, _) = fsm(&["paths", &spec("ovc/vm.toml"), "--json"]);
    assert_eq!(code, 0);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["machine"], "vm");
    assert_eq!(json["initial"], "VIRTUAL");
    assert_eq!(json["uncovered"], serde_json::json!([]));
    let halted = json["shortest"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["state"] == "HALTED")
        .unwrap();
    assert_eq!(
        halted["steps"],
        serde_json::json!([
            { "action": "deploy", "from": "VIRTUAL", "to": "RUNNING" },
            { "action": "stop", "from": "RUNNING", "to": "HALTED" },
        ])
    );
    // Every action of the VM is in some cover path.
    let covered: std::collections::BTreeSet<&str> = json["cover"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p.as_array().unwrap())
        .map(|s| s["action"].as_str().unwrap())
        .collect();
    assert_eq!(covered.len(), 12, "{covered:?}");

    // One path of one step is counted in the singular.
    let tmp = tempfile::tempdir().unwrap();
    let one = tmp.path().join("one.toml");
    std::fs::write(
        &one,
        "[machine]\nname = \"one\"\ninitial = \"A\"\n[states]\nA = {}\nB = { terminal = true }\n[actions]\ngo = { from = \"A\", to = \"B\" }\n",
    )
    .unwrap();
    let (code, stdout, stderr) = fsm(&["paths", one.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.ends_with("origin (1 path, 1 step):\n  1. go -> B\n"),
        "{stdout}"
    );
}

#[test]
fn commands_on_an_invalid_spec_exit_2_with_its_findings() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[machine]\nname = \"t\"\n[states]\nA = \"a\"\n").unwrap();
    let (code, stdout, stderr) = fsm(&["validate", &bad.display().to_string(), "A", "A"]);
    assert_eq!(code, 2);
    assert!(stdout.is_empty());
    assert!(stderr.contains("error[missing-initial]"), "{stderr}");
    assert!(
        stderr.contains("has errors; run `fsm check` on it"),
        "{stderr}"
    );
}

/// The README shows real output: the misspelled-state example is regenerated here.
#[test]
fn readme_error_example_is_real_output() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let vm = std::fs::read_to_string(specs().join("ovc/vm.toml")).unwrap();
    let mangled = vm.replacen(
        r#"stop = { from = ["RUNNING", "PAUSED"]"#,
        r#"stop = { from = ["RUNNIN", "PAUSED"]"#,
        1,
    );
    assert_ne!(vm, mangled);
    std::fs::write(dir.join("vm.toml"), mangled).unwrap();
    let (_, _, stderr) = fsm_in(dir, &["check", "vm.toml"]);
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    assert!(
        readme.contains(&format!(
            "```text\n{}```",
            stderr.trim_end_matches('\n').to_owned() + "\n"
        )),
        "README differs from:\n{stderr}"
    );
}

/// This crate's README (its page on crates.io) shows a session run in a checkout
/// of the repository: each `$ fsm ...` line, run at the workspace's root, prints
/// what the lines under it say, and succeeds unless it shows a refusal.
#[test]
fn the_crate_readme_session_is_real_output() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let start = readme.find("```console\n").expect("a console block") + "```console\n".len();
    let block = &readme[start..start + readme[start..].find("```").expect("the block ends")];
    let mut session: Vec<(&str, String)> = Vec::new();
    for line in block.lines() {
        match (line.strip_prefix("$ fsm "), session.last_mut()) {
            (Some(command), _) => session.push((command, String::new())),
            (None, Some((_, shown))) => {
                shown.push_str(line);
                shown.push('\n');
            }
            (None, None) => panic!("the block starts with a command: {line}"),
        }
    }
    assert!(session.len() >= 3, "{session:?}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (command, shown) in session {
        let args: Vec<&str> = command.split_whitespace().collect();
        let (code, stdout, stderr) = fsm_in(&root, &args);
        let refused = shown.starts_with("refused: ");
        assert_eq!(code, i32::from(refused), "fsm {command}: {stderr}");
        assert_eq!(stdout, shown, "fsm {command}");
    }
}

/// `fsm diff`: the OVC VM spec edited the way specs are in production.
#[test]
fn diff_reports_what_an_edit_breaks() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let vm = std::fs::read_to_string(spec("ovc/vm.toml")).unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let old = write("old.toml", &vm);
    // A state inserted at the top and actions reordered: nothing breaks.
    let insert = vm
        .replacen(
            "[states]\n",
            "[states]\nPROVISIONING = { transition = true }\n",
            1,
        )
        .replacen(
            "[actions]\n",
            "[actions]\nprovision = { from = \"VIRTUAL\", via = \"PROVISIONING\", to = \"HALTED\" }\n",
            1,
        );
    let inserted = write("inserted.toml", &insert);
    let (code, stdout, _) = fsm(&["diff", &old, &inserted]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "compatible: state `PROVISIONING` was added",
            "compatible: action `provision` was added",
            "2 changes, 0 breaking",
        ],
        "{stdout}"
    );
    // PAUSED renamed with a migration, `reset` removed, a role on `reboot`.
    let edited = vm.replace("PAUSED", "SUSPENDED").replacen(
        "SUSPENDED = \"Paused\"",
        "SUSPENDED = { description = \"Paused\", renamed_from = \"PAUSED\" }",
        1,
    );
    assert!(edited.contains("renamed_from = \"PAUSED\""), "{edited}");
    let edited = write("edited.toml", &edited);
    let (code, stdout, stderr) = fsm(&["diff", &old, &edited]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("breaking (callers): state `PAUSED` was renamed `SUSPENDED`: stored objects read as `SUSPENDED`"),
        "{stdout}"
    );
    let removed = write(
        "removed.toml",
        &vm.lines()
            .filter(|l| !l.starts_with("reset =") && !l.starts_with("RESETTING ="))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    let (code, stdout, stderr) = fsm(&["diff", &old, &removed]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("breaking (stored objects): action `reset` was removed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("breaking (stored objects): state `RESETTING` was removed"),
        "{stdout}"
    );
    assert!(stdout.ends_with("2 changes, 2 breaking\n"), "{stdout}");
    // PAUSED renamed without saying so: removed and added, and a hint.
    let unsaid = write("unsaid.toml", &vm.replace("PAUSED", "SUSPENDED"));
    let (code, stdout, stderr) = fsm(&["diff", &old, &unsaid]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("breaking (stored objects): state `PAUSED` was removed"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "\nhint: state `SUSPENDED` has the moves `PAUSED` had: if it is `PAUSED` renamed, \
             declare `renamed_from = \"PAUSED\"` on `SUSPENDED`, so that objects stored in \
             `PAUSED` read as `SUSPENDED`\n"
        ),
        "{stdout}"
    );
    assert_eq!(stdout.matches("hint:").count(), 1, "{stdout}");

    // --json: the same, a line each, with the names each change is about.
    let (json_code, json, stderr) = fsm(&["diff", "--json", &old, &unsaid]);
    assert_eq!(json_code, code, "{stderr}");
    let lines = json_lines(&json);
    let text: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), text.len(), "{json}");
    let removed = &lines[0];
    assert_eq!(
        (
            &removed["reason"],
            &removed["kind"],
            &removed["impact"],
            &removed["state"]
        ),
        (
            &"change".into(),
            &"state-removed".into(),
            &"stored-objects".into(),
            &"PAUSED".into()
        )
    );
    assert_eq!(
        format!(
            "breaking (stored objects): {}",
            removed["message"].as_str().unwrap()
        ),
        text[0]
    );
    let moved = lines
        .iter()
        .find(|l| l["kind"] == "target-changed")
        .expect("`pause` ends elsewhere");
    assert_eq!(
        [
            &moved["action"],
            &moved["origin"],
            &moved["from"],
            &moved["to"]
        ],
        ["pause", "RUNNING", "PAUSED", "SUSPENDED"]
            .map(serde_json::Value::from)
            .each_ref()
    );
    let hint = &lines[lines.len() - 2];
    assert_eq!(
        [&hint["reason"], &hint["of"], &hint["from"], &hint["to"]],
        ["hint", "state", "PAUSED", "SUSPENDED"]
            .map(serde_json::Value::from)
            .each_ref()
    );
    let summary = &lines[lines.len() - 1];
    assert_eq!(
        format!(
            "{} changes, {} breaking",
            summary["changes"], summary["breaking"]
        ),
        text[text.len() - 1]
    );
}

#[test]
fn export_writes_xstate_and_scxml() {
    let (code, json, _) = fsm(&["export", "--format", "xstate", &spec("ovc/vm.toml")]);
    assert_eq!(code, 0);
    let config: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(config["id"], "vm");
    assert_eq!(
        config["states"]["RUNNING"]["on"]["pause"]["target"],
        "#vm.PAUSING.RUNNING"
    );
    assert_eq!(
        config["states"]["PAUSING"]["states"]["RUNNING"]["on"]["pause_done"]["target"],
        "#vm.PAUSED"
    );
    let (code, xml, _) = fsm(&["export", "-f", "scxml", &spec("ovc/vm.toml")]);
    assert_eq!(code, 0);
    assert!(
        xml.contains("<transition event=\"pause\" target=\"PAUSING.RUNNING\"/>"),
        "{xml}"
    );
    let (code, _, stderr) = fsm(&["export", "-f", "bpmn", &spec("ovc/vm.toml")]);
    assert_eq!(code, 2);
    assert!(stderr.contains("invalid value 'bpmn'"), "{stderr}");

    // A name the format would read as something else: no export, exit 2.
    let tmp = tempfile::tempdir().unwrap();
    let dotted = tmp.path().join("dotted.toml");
    std::fs::write(
        &dotted,
        "[machine]\nname = \"m\"\ninitial = \"A\"\n[states]\nA = {}\n\"B.1\" = { terminal = true }\n[actions]\ngo = { from = \"A\", to = \"B.1\" }\n",
    )
    .unwrap();
    let (code, stdout, stderr) = fsm(&["export", "-f", "xstate", &dotted.display().to_string()]);
    assert_eq!(code, 2);
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("dotted.toml: XState cannot carry state `B.1`: XState reads `.` in a target as a step into a child state"),
        "{stderr}"
    );
}

/// What `fsm import FORMAT` says of `text`, written to `file` in `dir`: it
/// must refuse it (exit 2) and write no spec.
fn import_refused(format: &str, dir: &std::path::Path, file: &str, text: &str) -> String {
    let bad = dir.join(file);
    std::fs::write(&bad, text).unwrap();
    let (code, stdout, stderr) = fsm(&["import", format, &bad.display().to_string()]);
    assert_eq!((code, stdout.as_str()), (2, ""), "{stderr}");
    stderr
}

#[test]
fn import_plantuml_reads_a_diagram_or_its_address() {
    let seed = spec("sabakan/seed.md");
    let (code, toml, stderr) = fsm(&["import", "plantuml", &seed, "--name", "machine"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        toml.contains("[machine]\nname = \"machine\"\ninitial = \"Uninitialized\""),
        "{toml}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let stderr = import_refused(
        "plantuml",
        dir,
        "bad.puml",
        "@startuml\n[*] --> A\nA ==> B\n@enduml\n",
    );
    assert!(
        stderr.contains("bad.puml: line 3, column 1: expected `state"),
        "{stderr}"
    );
}

#[test]
fn import_xstate_reads_back_what_export_wrote() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (code, config, stderr) = fsm(&["export", "--format", "xstate", &spec("ovc/disk.toml")]);
    assert_eq!(code, 0, "{stderr}");
    let exported = dir.join("disk.json");
    std::fs::write(&exported, &config).unwrap();
    let imported = dir.join("disk.toml");
    let (code, _, stderr) = fsm(&[
        "import",
        "xstate",
        &exported.display().to_string(),
        "-o",
        &imported.display().to_string(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let toml = std::fs::read_to_string(&imported).unwrap();
    assert!(
        toml.contains(
            "delete = { from = [\"CREATED\", \"ASSIGNED\"], via = \"DELETING\", \
             to = { CREATED = \"DELETED\", ASSIGNED = \"TOBEDELETED\" } }"
        ),
        "{toml}"
    );
    // It checks clean, as the original does.
    let (code, stdout, _) = fsm(&["check", &imported.display().to_string()]);
    assert_eq!(
        (code, stdout.trim_end()),
        (0, "checked 1 spec: 0 errors, 0 warnings")
    );

    let config = "{\"initial\": \"a\",\n \"states\": {\"a\": {\"always\": \"a\"}}}\n";
    let stderr = import_refused("xstate", dir, "bad.json", config);
    assert!(
        stderr.contains("bad.json: line 2, column 29: eventless transitions (`always`) cannot be said in a table"),
        "{stderr}"
    );
}

/// The 1-based number of the line of `text` that is `line`.
fn line_of(text: &str, line: &str) -> usize {
    1 + (text.lines().position(|l| l == line)).unwrap_or_else(|| panic!("no `{line}` in:\n{text}"))
}

/// An import whose table has errors (here a state no action leaves) is
/// written all the same, with the findings placed in the written spec, and
/// exits 1; the spec, mended where the finding points, checks clean. One with
/// warnings only exits 0, the warnings placed the same way.
#[test]
fn import_writes_the_spec_its_findings_point_into() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let config = dir.join("door.json");
    std::fs::write(
        &config,
        "{\"id\": \"door\", \"initial\": \"open\",\n \"states\": {\"open\": {\"on\": {\"close\": \"shut\"}}, \"shut\": {}}}\n",
    )
    .unwrap();
    let imported = dir.join("door.toml");
    let out = imported.display().to_string();
    let (code, stdout, stderr) = fsm(&[
        "import",
        "xstate",
        &config.display().to_string(),
        "-o",
        &out,
    ]);
    assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
    let toml = std::fs::read_to_string(&imported).unwrap();
    let line = line_of(&toml, "shut = {}");
    assert!(
        stderr.contains(&format!("error[dead-end]: state `shut` is not terminal but no action leaves it\n  --> {out}:{line}:1")),
        "{stderr}"
    );
    assert!(
        stderr.contains("door.json imports as a spec with errors"),
        "{stderr}"
    );
    // Without -o the findings name standard output, where the spec went.
    let (code, printed, stderr) = fsm(&["import", "xstate", &config.display().to_string()]);
    assert_eq!((code, printed.as_str()), (1, toml.as_str()), "{stderr}");
    assert!(
        stderr.contains(&format!("--> <stdout>:{line}:1")),
        "{stderr}"
    );
    // Mended where the finding points, it checks clean.
    std::fs::write(
        &imported,
        toml.replace("shut = {}", "shut = { terminal = true }"),
    )
    .unwrap();
    let (code, stdout, _) = fsm(&["check", &out]);
    assert_eq!(
        (code, stdout.trim_end()),
        (0, "checked 1 spec: 0 errors, 0 warnings")
    );

    // A state nothing leads to is a warning: the spec is printed, exit 0.
    std::fs::write(
        &config,
        "{\"id\": \"door\", \"initial\": \"open\", \"states\": {\"open\": {\"on\": {\"close\": \"shut\"}},\n \"shut\": {\"type\": \"final\"}, \"ajar\": {\"on\": {\"close\": \"shut\"}}}}\n",
    )
    .unwrap();
    let (code, printed, stderr) = fsm(&["import", "xstate", &config.display().to_string()]);
    assert_eq!(code, 0, "{stderr}");
    let line = line_of(&printed, "ajar = {}");
    assert!(
        stderr.contains(&format!("warning[unreachable]: state `ajar` cannot be reached from the initial state `open`\n  --> <stdout>:{line}:1")),
        "{stderr}"
    );
    assert!(
        !stderr.contains("imports as a spec with errors"),
        "{stderr}"
    );
}

/// A design document with OpenvCloud's node drawn in Mermaid.
const NODE_IN_MARKDOWN: &str = "# Node\n\n```mermaid\nstateDiagram-v2\n    [*] --> ENABLED\n    ENABLED --> MAINTENANCE: put_in_maintenance\n    MAINTENANCE --> ENABLED: enable\n```\n";

#[test]
fn import_mermaid_reads_a_diagram_in_a_markdown_document() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let doc = dir.join("design.md");
    std::fs::write(&doc, NODE_IN_MARKDOWN).unwrap();
    let (code, toml, stderr) = fsm(&["import", "mermaid", &doc.display().to_string()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        toml.contains("[machine]\nname = \"design\"\ninitial = \"ENABLED\""),
        "{toml}"
    );
    assert!(
        toml.contains("put_in_maintenance = { from = \"ENABLED\", to = \"MAINTENANCE\" }"),
        "{toml}"
    );
    let stderr = import_refused(
        "mermaid",
        dir,
        "bad.md",
        "```mermaid\nstateDiagram-v2\n  [*] --> A\n  --\n```\n",
    );
    assert!(
        stderr.contains("bad.md: line 4, column 3: concurrent regions (`--`)"),
        "{stderr}"
    );
}

#[test]
fn import_scxml_reads_back_what_export_wrote() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (code, document, stderr) = fsm(&["export", "--format", "scxml", &spec("ovc/node.toml")]);
    assert_eq!(code, 0, "{stderr}");
    let exported = dir.join("node.scxml");
    std::fs::write(&exported, &document).unwrap();
    let (code, toml, stderr) = fsm(&["import", "scxml", &exported.display().to_string()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        toml.contains(
            "decommission = { from = [\"ENABLED\", \"MAINTENANCE\"], via = \"DECOMMISSIONING\", to = \"DECOMMISSIONED\" }"
        ),
        "{toml}"
    );
    let document =
        "<scxml initial=\"a\">\n  <state id=\"a\"><invoke src=\"x\"/></state>\n</scxml>\n";
    let stderr = import_refused("scxml", dir, "bad.scxml", document);
    assert!(
        stderr.contains("bad.scxml: line 2, column 17: an invoked service (`<invoke>`) ends in events a table does not name"),
        "{stderr}"
    );
}

/// `fsm import FILE` reads each format without being told it, to the spec
/// `fsm import FORMAT FILE` writes; a file of none of them, or holding two
/// diagrams, is refused with its place and writes nothing.
#[test]
fn import_tells_the_format_by_what_the_file_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut files = vec![("plantuml", spec("sabakan/seed.md"))];
    for format in ["xstate", "scxml"] {
        let (code, text, stderr) = fsm(&["export", "--format", format, &spec("ovc/vm.toml")]);
        assert_eq!(code, 0, "{stderr}");
        // No extension: the text alone tells.
        let file = dir.join(format!("vm-{format}"));
        std::fs::write(&file, text).unwrap();
        files.push((format, file.display().to_string()));
    }
    let doc = dir.join("node.md");
    std::fs::write(&doc, NODE_IN_MARKDOWN).unwrap();
    files.push(("mermaid", doc.display().to_string()));
    for (format, file) in &files {
        let told = fsm(&["import", format, file, "--name", "m"]);
        let untold = fsm(&["import", file, "--name", "m"]);
        assert_eq!(told.0, 0, "{format}: {}", told.2);
        assert_eq!(untold, told, "{format}");
    }

    let neither = dir.join("notes.txt");
    std::fs::write(&neither, "\n  states: a, b\n").unwrap();
    let (code, stdout, stderr) = fsm(&["import", &neither.display().to_string()]);
    assert_eq!((code, stdout.as_str()), (2, ""), "{stderr}");
    assert!(
        stderr.contains(
            "notes.txt: line 2, column 3: expected an XState config (JSON), an SCXML document"
        ),
        "{stderr}"
    );
    let both = dir.join("both.md");
    std::fs::write(&both, "@startuml\n[*] --> A\n@enduml\n\nstateDiagram-v2\n").unwrap();
    let (code, stdout, stderr) = fsm(&["import", &both.display().to_string()]);
    assert_eq!((code, stdout.as_str()), (2, ""), "{stderr}");
    assert!(
        stderr.contains("both.md: line 5, column 1: a Mermaid diagram here and a PlantUML diagram at line 1: say which to import"),
        "{stderr}"
    );
}

#[test]
#[cfg(unix)]
fn serve_runs_the_server_binary_with_its_arguments() {
    use std::os::unix::fs::PermissionsExt;
    // A stand-in for fsm-serve that shows what it was given and exits 3.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let fake = dir.join("fake-serve");
    std::fs::write(&fake, "#!/bin/sh\necho \"served: $*\"\nexit 3\n").unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fsm"))
        .args([
            "serve",
            "specs/ovc/vm.toml",
            "--listen",
            "127.0.0.1:9",
            "--tokens",
            "t.toml",
        ])
        .env("FSM_SERVE", &fake)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "served: specs/ovc/vm.toml --listen 127.0.0.1:9 --tokens t.toml\n"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fsm"))
        .args(["serve", "--help"])
        .env("FSM_SERVE", dir.join("missing"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cargo install --path fsm-serve"));
}
