//! One small bad spec per kind of finding: the exact findings, in the order they
//! appear in the file, and their rendered messages (snapshots under `snapshots/`).

use fsm_core::spec::SpecFile;
use fsm_core::{Lint, Severity};

/// A machine with nothing wrong, for the cases to change one thing in.
const GOOD: &str = r#"
[machine]
name = "t"
initial = "HALTED"

[states]
HALTED = "Stopped"
STARTING = { transition = true }
RUNNING = "Running"
GONE = { terminal = true }

[actions]
start = { from = "HALTED", via = "STARTING", to = "RUNNING" }
stop = { from = "RUNNING", to = "HALTED" }
destroy = { from = ["HALTED", "RUNNING"], to = "GONE" }
"#;

struct Case {
    name: &'static str,
    text: String,
    lints: &'static [Lint],
}

fn case(name: &'static str, lints: &'static [Lint], text: impl Into<String>) -> Case {
    Case {
        name,
        text: text.into(),
        lints,
    }
}

/// `GOOD` with one line replaced.
fn good_with(old: &str, new: &str) -> String {
    assert!(GOOD.contains(old), "{old:?} is not in GOOD");
    GOOD.replacen(old, new, 1)
}

fn cases() -> Vec<Case> {
    use Lint::*;
    #[allow(unused_mut)]
    let mut cases = vec![
        case("syntax", &[Syntax], "[machine\nname = \"t\"\n"),
        case("schema_wrong_type", &[Schema], good_with(r#"initial = "HALTED""#, "initial = 3")),
        case(
            "schema_unknown_field",
            &[Schema],
            good_with(r#"stop = { from = "RUNNING", to = "HALTED" }"#, r#"stop = { form = "RUNNING", to = "HALTED" }"#),
        ),
        case(
            "conflicting_target",
            &[ConflictingTarget],
            good_with(
                r#"start = { from = "HALTED", via = "STARTING", to = "RUNNING" }"#,
                r#"start = { from = "HALTED", via = "STARTING", to = "RUNNING", to_origin = true }"#,
            ),
        ),
        case(
            "unknown_state",
            &[UnknownState],
            good_with(r#"stop = { from = "RUNNING", to = "HALTED" }"#, r#"stop = { from = "RUNNIN", to = "HALTED" }"#),
        ),
        // One misspelled name, one finding: with the edges it names missing, the
        // graph's rules would call RUNNING unreachable and STARTING an orphan
        // (the one action into them misspelled them), and, next, RUNNING a dead
        // end (the one action out of it misspelled it).
        case(
            "unknown_states_alone",
            &[UnknownState, UnknownState],
            good_with(r#"start = { from = "HALTED", via = "STARTING", to = "RUNNING" }"#, r#"start = { from = "HALTED", via = "STARTNG", to = "RUNNIN" }"#),
        ),
        // Targets per origin that miss the one origin: what it would reach is
        // left out of the graph, not reported unreachable.
        case(
            "per_origin_gap_alone",
            &[PerOriginMismatch, PerOriginMismatch],
            good_with(r#"start = { from = "HALTED", via = "STARTING", to = "RUNNING" }"#, r#"start = { from = "HALTED", via = "STARTING", to = { RUNNING = "RUNNING" } }"#),
        ),
        case(
            "unknown_origin_alone",
            &[UnknownState],
            good_with(r#"stop = { from = "RUNNING", to = "HALTED" }"#, r#"stop = { from = "RUNNIN", to = "HALTED" }"#)
                .replace(r#"destroy = { from = ["HALTED", "RUNNING"], to = "GONE" }"#, r#"destroy = { from = "HALTED", to = "GONE" }"#),
        ),
        case(
            "unknown_role",
            &[UnusedRole, UnknownRole],
            good_with("[states]", "[roles]\nadmin = \"An administrator\"\n\n[states]").replace(
                r#"stop = { from = "RUNNING", to = "HALTED" }"#,
                r#"stop = { from = "RUNNING", to = "HALTED", roles = "admn" }"#,
            ),
        ),
        case(
            "unknown_guard",
            &[UnknownGuard],
            good_with(r#"stop = { from = "RUNNING", to = "HALTED" }"#, r#"stop = { from = "RUNNING", to = "HALTED", guards = "drained" }"#),
        ),
        case(
            "undescribed_guard",
            &[UndescribedGuard],
            good_with("[states]", "[guards]\ndrained = {}\n\n[states]").replace(
                r#"stop = { from = "RUNNING", to = "HALTED" }"#,
                r#"stop = { from = "RUNNING", to = "HALTED", guards = "drained" }"#,
            ),
        ),
        case("unknown_lint", &[UnknownLint], good_with(r#"name = "t""#, "name = \"t\"\nallow = [\"unreachble\"]")),
        case("error_cannot_be_allowed", &[UnknownLint], good_with(r#"name = "t""#, "name = \"t\"\nallow = [\"dead-end\"]")),
        case("duplicate_state", &[DuplicateState], good_with(r#"RUNNING = "Running""#, "RUNNING = \"Running\"\nRunning = \"Running too\"")),
        case(
            "duplicate_action",
            &[DuplicateAction],
            good_with(r#"stop = { from = "RUNNING", to = "HALTED" }"#, "stop = { from = \"RUNNING\", to = \"HALTED\" }\nSTOP = { from = \"RUNNING\", to = \"GONE\" }"),
        ),
        case(
            "duplicate_origin",
            &[DuplicateOrigin],
            good_with(r#"destroy = { from = ["HALTED", "RUNNING"]"#, r#"destroy = { from = ["HALTED", "RUNNING", "HALTED"]"#),
        ),
        case("missing_initial", &[MissingInitial], good_with("initial = \"HALTED\"\n", "")),
        case("transition_initial", &[TransitionInitial], good_with(r#"initial = "HALTED""#, r#"initial = "STARTING""#)),
        case(
            "no_origin",
            &[NoOrigin],
            good_with(r#"stop = { from = "RUNNING", to = "HALTED" }"#, "stop = { from = \"RUNNING\", to = \"HALTED\" }\nnoop = { from = [] }"),
        ),
        case(
            "transition_origin",
            &[TransitionOrigin],
            good_with(r#"stop = { from = "RUNNING", to = "HALTED" }"#, "stop = { from = [\"RUNNING\", \"STARTING\"], to = \"HALTED\" }"),
        ),
        case(
            "static_via",
            &[OrphanTransition, StaticVia],
            good_with(r#"via = "STARTING""#, r#"via = "RUNNING""#),
        ),
        case(
            "transition_target",
            &[TransitionTarget],
            good_with(r#"stop = { from = "RUNNING", to = "HALTED" }"#, "stop = { from = \"RUNNING\", to = \"HALTED\" }\nrestart = { from = \"RUNNING\", to = \"STARTING\" }"),
        ),
        case(
            "missing_target",
            &[MissingTarget],
            good_with(r#"start = { from = "HALTED", via = "STARTING", to = "RUNNING" }"#, r#"start = { from = "HALTED", via = "STARTING" }"#),
        ),
        case(
            "per_origin_mismatch",
            &[PerOriginMismatch, PerOriginMismatch],
            good_with(r#"destroy = { from = ["HALTED", "RUNNING"], to = "GONE" }"#, r#"destroy = { from = ["HALTED", "RUNNING"], to = { HALTED = "GONE", STARTING = "GONE" } }"#),
        ),
        case("orphan_transition", &[OrphanTransition], good_with(r#"RUNNING = "Running""#, "RUNNING = \"Running\"\nSTOPPING = { transition = true }")),
        case(
            "dead_end",
            &[DeadEnd],
            good_with(r#"stop = { from = "RUNNING", to = "HALTED" }"#, "stop = { from = \"RUNNING\", to = \"HALTED\" }\ncrash = { from = \"RUNNING\", to = \"CRASHED\" }")
                .replace(r#"GONE = { terminal = true }"#, "GONE = { terminal = true }\nCRASHED = \"Crashed\""),
        ),
        case(
            "terminal_exit",
            &[TerminalExit],
            good_with(r#"stop = { from = "RUNNING", to = "HALTED" }"#, "stop = { from = \"RUNNING\", to = \"HALTED\" }\nrevive = { from = \"GONE\", to = \"HALTED\" }"),
        ),
        case("terminal_transition", &[TerminalTransition], good_with("STARTING = { transition = true }", "STARTING = { transition = true, terminal = true }")),
        case(
            "hidden_move",
            &[HiddenMove],
            good_with(r#"stop = { from = "RUNNING", to = "HALTED" }"#, r#"stop = { from = "RUNNING", to = "HALTED", hidden = true }"#),
        ),
        case(
            "owner_conflict",
            &[OwnerConflict],
            r#"
[machine]
name = "vpc"
initial = "Init"
single_mutator = true

[roles]
vpc-operator = "The VPC Operator"
network-operator = "The Network Operator"

[states]
Init = { owner = "vpc-operator" }
Provisioned = { owner = "vpc-operator", terminal = true }

[actions]
provision = { from = "Init", to = "Provisioned", roles = "vpc-operator" }
adopt = { from = "Init", to = "Provisioned", roles = "network-operator" }
"#,
        ),
        case(
            "unowned_state",
            &[UnownedState],
            r#"
[machine]
name = "vpc"
initial = "Init"
single_mutator = true

[states]
Init = "Created"
Provisioned = { terminal = true }

[actions]
provision = { from = "Init", to = "Provisioned" }
"#,
        ),
        case(
            "unreachable",
            &[Unreachable],
            good_with(r#"stop = { from = "RUNNING", to = "HALTED" }"#, "stop = { from = \"RUNNING\", to = \"HALTED\" }\nunpark = { from = \"PARKED\", to = \"HALTED\" }")
                .replace(r#"GONE = { terminal = true }"#, "GONE = { terminal = true }\nPARKED = \"Parked\""),
        ),
        case(
            "rename_conflict",
            &[RenameConflict, RenameConflict],
            good_with(r#"RUNNING = "Running""#, r#"RUNNING = { renamed_from = ["HALTED", "UP"] }"#)
                .replace(r#"GONE = { terminal = true }"#, r#"GONE = { terminal = true, renamed_from = "up" }"#),
        ),
        case(
            "static_deadline",
            &[StaticDeadline],
            good_with(r#"RUNNING = "Running""#, r#"RUNNING = { deadline = "10m" }"#),
        ),
        case(
            "transition_remove",
            &[TransitionRemove],
            good_with("STARTING = { transition = true }", "STARTING = { transition = true, remove = true }"),
        ),
        case(
            "remove_owner",
            &[RemoveOwner],
            good_with("[states]", "[roles]\nadmin = \"An administrator\"\nops = \"Operators\"\n\n[states]")
                .replace(r#"GONE = { terminal = true }"#, r#"GONE = { terminal = true, owner = "ops", remove = ["admin"] }"#),
        ),
        case(
            "unknown_remove_role",
            &[UnknownRole, UnknownRole],
            good_with(r#"GONE = { terminal = true }"#, r#"GONE = { terminal = true, remove = ["admin", "ops"] }"#),
        ),
        case(
            "schema_bad_remove",
            &[Schema],
            good_with(r#"GONE = { terminal = true }"#, r#"GONE = { terminal = true, remove = 1 }"#),
        ),
        case(
            "schema_bad_deadline",
            &[Schema],
            good_with("STARTING = { transition = true }", r#"STARTING = { transition = true, deadline = "soon" }"#),
        ),
        case("unused_guard", &[UnusedGuard], good_with("[states]", "[guards]\ndrained = \"No traffic left\"\n\n[states]")),
        case("unused_role", &[UnusedRole], good_with("[states]", "[roles]\nadmin = \"An administrator\"\n\n[states]")),
        case(
            "shared_transition",
            &[SharedTransition],
            good_with(r#"stop = { from = "RUNNING", to = "HALTED" }"#, r#"stop = { from = "RUNNING", via = "STARTING", to = "HALTED" }"#),
        ),
        case(
            "allowed_warning_is_dropped",
            &[],
            good_with(r#"stop = { from = "RUNNING", to = "HALTED" }"#, r#"stop = { from = "RUNNING", via = "STARTING", to = "HALTED" }"#)
                .replace(r#"name = "t""#, "name = \"t\"\nallow = [\"shared-transition\"]"),
        ),
        // A role's name may hold a space (it travels in no URL, key or
        // event), not a control character.
        case(
            "bad_name",
            &[BadName, BadName, BadName, BadName, BadName],
            good_with(r#"name = "t""#, r#"name = "t 1""#)
                .replace("destroy = {", "\"\" = { from = \"HALTED\", to = \"GONE\" }\ndestroy = {")
                .replace(r#"stop = { from"#, r#""st op" = { roles = ["night watch", "ops\tteam"], from"#)
                .replace(r#"GONE = { terminal = true }"#, r#"GONE = { terminal = true, renamed_from = "" }"#)
                .replace("[states]", "[roles]\n\"night watch\" = \"Walks at night\"\n\"ops\\tteam\" = \"Operators\"\n\n[states]"),
        ),
        // The machine's name is a segment of URLs and store keys.
        case("bad_machine_name", &[BadName], good_with(r#"name = "t""#, r#"name = "ovc/vm""#)),
        case(
            "every_finding_at_once",
            &[StaticVia, UnknownState, UnknownState, UnknownGuard],
            good_with(r#"stop = { from = "RUNNING", to = "HALTED" }"#, r#"stop = { from = "RUNNIN", to = "HALTD", guards = "drained" }"#)
                .replace(r#"via = "STARTING""#, r#"via = "HALTED""#)
                .replace("STARTING = { transition = true }\n", ""),
        ),
        // A value of the wrong shape leaves the rest unread by the rules, not
        // the names: the state whose description is wrong is still a state, so
        // the misspelt origin is reported and the target is not.
        case(
            "schema_and_unknown_names",
            &[Schema, UnknownState, UnknownGuard],
            good_with(r#"RUNNING = "Running""#, "RUNNING = { description = 5 }")
                .replace(r#"stop = { from = "RUNNING", to = "HALTED" }"#, r#"stop = { from = "RUNNIN", to = "RUNNING", guards = "drained" }"#)
                .replace("[states]", "[guards]\ndrainde = \"No traffic left\"\n\n[states]"),
        ),
        // With `[states]` misspelt, no state is declared: the names that would
        // all be unknown are not reported, nor is a role with no `[roles]`, nor
        // a guard whose `guards` is not a table.
        case(
            "schema_hides_what_it_leaves_undeclared",
            &[Schema, Schema],
            good_with("[states]", "[state]")
                .replace("[machine]", "guards = \"none\"\n\n[machine]")
                .replace(r#"stop = { from = "RUNNING", to = "HALTED" }"#, r#"stop = { from = "RUNNING", to = "HALTED", roles = "admin", guards = "drained" }"#),
        ),
    ];
    // A guard's CEL expression is parsed as the spec is read, with `cel`.
    #[cfg(feature = "cel")]
    cases.push(case(
        "cel",
        &[Cel],
        good_with(r#"stop = { from = "RUNNING", to = "HALTED" }"#, r#"stop = { from = "RUNNING", to = "HALTED", guards = "drained" }"#)
            .replace("[states]", "[guards]\ndrained = { description = \"No traffic left\", cel = \"object.data.connections = 0\" }\n\n[states]"),
    ));
    cases
}

fn check(case: &Case) -> (Vec<Lint>, String, bool) {
    let report = SpecFile::new(format!("{}.toml", case.name), case.text.clone()).check();
    let lints = report.diagnostics.iter().map(|d| d.lint).collect();
    (lints, report.render(), report.machine.is_some())
}

#[test]
fn good_spec_has_no_finding() {
    let (lints, rendered, built) = check(&case("good", &[], GOOD));
    assert!(lints.is_empty(), "{rendered}");
    assert!(built);
}

#[test]
fn every_finding_has_its_exact_message() {
    for case in cases() {
        let (lints, rendered, built) = check(&case);
        assert_eq!(lints, case.lints, "case {}:\n{rendered}", case.name);
        let errors = case.lints.iter().any(|l| l.severity() == Severity::Error);
        assert_eq!(
            built, !errors,
            "case {}: a machine is built exactly when there is no error",
            case.name
        );
        insta::assert_snapshot!(case.name, rendered, &case.text);
    }
}

#[test]
fn every_lint_has_a_case() {
    let covered: Vec<Lint> = cases()
        .iter()
        .flat_map(|c| c.lints.iter().copied())
        .collect();
    let missing: Vec<&str> = Lint::ALL
        .iter()
        // Without `cel`, no expression is parsed: its lint has no case.
        .filter(|&&l| cfg!(feature = "cel") || l != Lint::Cel)
        .filter(|l| !covered.contains(l))
        .map(|l| l.code())
        .collect();
    assert!(missing.is_empty(), "lints without a test case: {missing:?}");
}

#[test]
fn findings_carry_line_and_column() {
    let text = good_with(
        r#"stop = { from = "RUNNING", to = "HALTED" }"#,
        r#"stop = { from = "RUNNIN", to = "HALTED" }"#,
    );
    let report = SpecFile::new("t.toml", text.clone()).check();
    let d = &report.diagnostics[0];
    let at = report.location(d).expect("located");
    let line = text.lines().nth(at.line - 1).unwrap();
    assert_eq!(at.line, 14);
    assert_eq!(at.column, line.find("\"RUNNIN\"").unwrap() + 1);
    assert_eq!(&text[at.span.clone()], "\"RUNNIN\"");
    let err = report.into_machine().unwrap_err();
    assert!(
        err.to_string().starts_with("invalid spec t.toml:14:"),
        "{err}"
    );
}
