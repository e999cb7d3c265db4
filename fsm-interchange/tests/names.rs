//! Names a format would read as something else are refused, with the name and
//! the reason; every shipped spec has none.

use std::path::Path;

use fsm_interchange::{ExportError, scxml, xstate};
use fsm_model::Machine;

fn machine(states: &str, actions: &str) -> Machine {
    let text = format!(
        "[machine]\nname = \"m\"\ninitial = \"A\"\n\n[states]\n{states}\n\n[actions]\n{actions}\n"
    );
    fsm_core::spec::load_str("m.toml", &text).unwrap()
}

#[test]
fn a_dot_in_a_state_name_is_a_step_into_a_child_state_for_xstate() {
    let m = machine(
        "A = {}\n\"B.1\" = { terminal = true }",
        "go = { from = \"A\", to = \"B.1\" }",
    );
    let e = xstate(&m).unwrap_err();
    assert_eq!(
        (e.format, e.what, e.name.as_str()),
        ("XState", "state", "B.1")
    );
    assert_eq!(
        e.to_string(),
        "XState cannot carry state `B.1`: XState reads `.` in a target as a step into a child \
         state, and a final state inside a compound state ends its parent there, not the machine"
    );
    // SCXML ids may hold a dot: this one is unique, so it exports there.
    assert!(scxml(&m).unwrap().contains("<final id=\"B.1\">"));
}

#[test]
fn states_named_by_steps_nest_in_xstate_unless_a_step_is_a_state() {
    // `active.playing` and `active.paused` are children of a compound state
    // `active`, which starts at the machine's initial state.
    let m = machine(
        "A = {}\n\"active.paused\" = {}\n\"active.playing\" = {}",
        "go = { from = \"A\", to = \"active.playing\" }\n\
         pause = { from = \"active.playing\", to = \"active.paused\" }\n\
         quit = { from = [\"active.paused\", \"active.playing\"], to = \"A\" }",
    );
    let config: serde_json::Value = serde_json::from_str(&xstate(&m).unwrap()).unwrap();
    let active = &config["states"]["active"];
    assert_eq!(active["initial"], "paused");
    assert!(
        active["states"]["playing"]["on"]["pause"].is_object(),
        "{active}"
    );
    // A state of the table cannot be another's parent.
    let m = machine(
        "A = {}\n\"A.b\" = {}",
        "go = { from = \"A\", to = \"A.b\" }\nback = { from = \"A.b\", to = \"A\" }",
    );
    assert_eq!(
        xstate(&m).unwrap_err().to_string(),
        "XState cannot carry state `A.b`: XState reads `.` in a target as a step into a child \
         state: it would be a child of `A`, a state of the table, which XState would make a \
         compound state"
    );
    // Nor a step empty, nor a transition state a child.
    let m = machine(
        "A = {}\n\"B..c\" = {}\n\"C.d\" = { transition = true }",
        "go = { from = \"A\", to = \"B..c\" }\nback = { from = \"B..c\", via = \"C.d\", to = \"A\" }",
    );
    assert_eq!(
        xstate(&m).unwrap_err().to_string(),
        "XState cannot carry state `B..c`: XState reads `.` in a target as a step into a child \
         state, and one of its steps is empty"
    );
    let m = machine(
        "A = {}\n\"C.d\" = { transition = true }",
        "go = { from = \"A\", via = \"C.d\", to = \"A\" }",
    );
    assert_eq!(
        xstate(&m).unwrap_err().to_string(),
        "XState cannot carry state `C.d`: a transition state is a compound state of its own, and \
         XState reads `.` in a target as a step into a child state"
    );
}

#[test]
fn an_action_name_in_a_shared_child_state_is_a_step_for_xstate() {
    // Two actions share STARTING: its children are named `<action>_<origin>`,
    // so `go.fast`'s dot would land in a child state's key.
    let m = machine(
        "A = {}\nSTARTING = { transition = true }\nB = { terminal = true }",
        "\"go.fast\" = { from = \"A\", via = \"STARTING\", to = \"B\" }\ngo = { from = \"A\", via = \"STARTING\", to = \"B\" }",
    );
    let e = xstate(&m).unwrap_err();
    assert_eq!((e.what, e.name.as_str()), ("action", "go.fast"), "{e}");
    assert!(
        e.why.contains("the child state `go.fast_A` of `STARTING`"),
        "{e}"
    );
}

#[test]
fn an_scxml_state_id_is_an_xml_name() {
    let m = machine(
        "A = {}\n\"1B\" = { terminal = true }",
        "go = { from = \"A\", to = \"1B\" }",
    );
    let e = scxml(&m).unwrap_err();
    assert_eq!(
        (e.format, e.what, e.name.as_str()),
        ("SCXML", "state", "1B")
    );
    assert!(e.why.contains("not an XML name"), "{e}");
    assert!(xstate(&m).is_ok());
}

#[test]
fn an_scxml_state_id_is_unique() {
    // The child of DEPLOYING entered from A is `DEPLOYING.A`: a state's name too.
    let m = machine(
        "A = {}\nDEPLOYING = { transition = true }\n\"DEPLOYING.A\" = {}\nB = { terminal = true }",
        "deploy = { from = \"A\", via = \"DEPLOYING\", to = \"B\" }\nend = { from = \"DEPLOYING.A\", to = \"B\" }\nskip = { from = \"A\", to = \"DEPLOYING.A\" }",
    );
    let e = scxml(&m).unwrap_err();
    assert_eq!((e.what, e.name.as_str()), ("state", "DEPLOYING.A"), "{e}");
    assert!(e.why.contains("also the id of `DEPLOYING`"), "{e}");
}

#[test]
fn an_scxml_event_takes_every_event_it_is_a_dot_prefix_of() {
    let m = machine(
        "A = {}\nB = { terminal = true }",
        "go = { from = \"A\", to = \"B\" }\n\"go.fast\" = { from = \"A\", to = \"B\" }",
    );
    let e = scxml(&m).unwrap_err();
    assert_eq!((e.what, e.name.as_str()), ("event", "go"));
    assert!(e.why.contains("`go.fast`"), "{e}");
    // XState matches `go` exactly: the same machine exports there.
    assert!(xstate(&m).is_ok());
    // `gone` is not `go` followed by a step: no clash.
    let m = machine(
        "A = {}\nB = { terminal = true }",
        "go = { from = \"A\", to = \"B\" }\ngone = { from = \"A\", to = \"B\" }",
    );
    assert!(scxml(&m).is_ok());
}

#[test]
fn a_wildcard_action_is_refused_by_both() {
    let m = machine(
        "A = {}\nB = { terminal = true }",
        "\"*\" = { from = \"A\", to = \"B\" }",
    );
    assert_eq!(xstate(&m).unwrap_err().name, "*");
    assert_eq!(scxml(&m).unwrap_err().name, "*");
}

#[test]
fn every_shipped_spec_exports_to_both() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs");
    let mut exported = 0;
    for group in std::fs::read_dir(&root).unwrap() {
        let group = group.unwrap().path();
        if !group.is_dir() {
            continue;
        }
        for spec in std::fs::read_dir(&group).unwrap() {
            let spec = spec.unwrap().path();
            if spec.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let m = fsm_core::spec::load(&spec).unwrap();
            let refused = |e: ExportError| panic!("{}: {e}", spec.display());
            xstate(&m).unwrap_or_else(refused);
            scxml(&m).unwrap_or_else(refused);
            exported += 1;
        }
    }
    assert_eq!(exported, 15);
}
