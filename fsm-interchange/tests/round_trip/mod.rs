//! What the import tests share: loading an imported spec, the round trip of
//! every shipped spec through an export and its import, and the refusal of an
//! edited export.

// Each test file uses what its format needs.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use fsm_core::Machine;
use fsm_interchange::{ExportError, ImportError};

#[path = "../../../fsm-core/tests/common/mod.rs"]
pub mod common;

/// An imported spec's text, loaded; it must check.
pub fn load(spec: &str) -> Machine {
    fsm_core::spec::load_str("imported.toml", spec).unwrap_or_else(|e| panic!("{e}\n{spec}"))
}

/// A shipped spec and what came back through a format.
pub struct Back {
    pub path: PathBuf,
    pub original: Machine,
    pub back: Machine,
    /// The imported spec's text.
    pub spec: String,
}

/// The states' names, in the order declared.
pub fn names(m: &Machine) -> Vec<String> {
    m.states().iter().map(|s| s.name.to_string()).collect()
}

/// Every shipped spec exported with `export` and imported back with `import`:
/// the machine's name, its initial state and its states' names already
/// compared; the rest (the states' order too) is the caller's, per format.
pub fn every_spec(
    export: fn(&Machine) -> Result<String, ExportError>,
    import: fn(&str, &str) -> Result<String, ImportError>,
) -> Vec<Back> {
    let set = |m: &Machine| -> BTreeSet<String> { names(m).into_iter().collect() };
    common::specs()
        .into_iter()
        .map(|path| {
            let original = fsm_core::spec::load(&path).unwrap();
            let text = export(&original).unwrap();
            let spec = import(&text, "unused")
                .unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()));
            let back = load(&spec);
            let at = path.display();
            assert_eq!(back.name(), original.name(), "{at}");
            let initial = |m: &Machine| m.state(m.initial()).name.to_string();
            assert_eq!(initial(&back), initial(&original), "{at}");
            assert_eq!(set(&back), set(&original), "{at}:\n{spec}");
            Back {
                path,
                original,
                back,
                spec,
            }
        })
        .collect()
}

/// Asserts that what came back is the same table as the original, in every
/// part: each part compared on its own first (to say which differs), then
/// the whole machine (the order of states, actions, roles and guards, which
/// their ids follow, too).
pub fn the_same(back: &Back) {
    let Back {
        path,
        original: m,
        back,
        spec,
    } = back;
    let at = path.display();
    assert_eq!(names(back), names(m), "{at}");
    assert_eq!(back.description(), m.description(), "{at}");
    assert_eq!(back.single_mutator(), m.single_mutator(), "{at}");
    assert_eq!(states(back), states(m), "{at}:\n{spec}");
    assert_eq!(rules(back), rules(m), "{at}:\n{spec}");
    assert_eq!(actions(back), actions(m), "{at}:\n{spec}");
    assert_eq!(roles(back), roles(m), "{at}");
    assert_eq!(guards(back), guards(m), "{at}");
    assert_eq!(back, m, "{at}:\n{spec}");
}

/// A spec with what the shipped ones lack: earlier names of a state and of
/// an action, roles and guards out of alphabetical order (and named with a
/// space), a guard's CEL,
/// origins (and a target per origin) listed out of the states' order, and
/// an action with a transition state whose only origin is its target, which
/// is not one that goes back to its origin (`to_origin`).
///
/// (A spec may say one thing two ways, and a machine keeps the way it was
/// said: a per-origin table with one target for all, or in another order
/// than its `from`, comes back as one target, or in the order of `from`:
/// the same rules, not an equal `Machine`.)
pub const EVOLVED: &str = r#"
[machine]
name = "evolved"
initial = "NEW"

[roles]
ops = "The operators"
"cloud admin" = "The administrators"

[guards]
quota = { description = "Quota left", cel = "object.data.quota > 0" }
"human approval" = "Approved by a human"

[states]
NEW = {}
SUSPENDED = { description = "Paused", renamed_from = ["PAUSED", "HELD"] }
RUNNING = {}
MOVING = { transition = true }
GONE = { terminal = true }

[actions]
start = { from = ["SUSPENDED", "NEW"], to = "RUNNING", guards = ["quota", "human approval"] }
suspend = { from = "RUNNING", to = "SUSPENDED", renamed_from = "pause", roles = ["ops", "cloud admin"] }
move = { from = "RUNNING", via = "MOVING", to = "RUNNING" }
end = { from = ["SUSPENDED", "RUNNING"], to = { SUSPENDED = "NEW", RUNNING = "GONE" } }
"#;

/// [`EVOLVED`] through `export` and `import`: the same table.
pub fn evolved(
    export: fn(&Machine) -> Result<String, ExportError>,
    import: fn(&str, &str) -> Result<String, ImportError>,
) {
    let original = load(EVOLVED);
    let text = export(&original).unwrap();
    let spec = import(&text, "unused").unwrap_or_else(|e| panic!("{e}\n{text}"));
    the_same(&Back {
        path: PathBuf::from("EVOLVED"),
        back: load(&spec),
        original,
        spec,
    });
}

/// What `fsm export` wrote for [`EVOLVED`], in the format of `export`.
pub fn evolved_in(export: fn(&Machine) -> Result<String, ExportError>) -> String {
    export(&load(EVOLVED)).unwrap()
}

/// What `fsm export` wrote for OpenvCloud's node (`specs/ovc/node.toml`), in
/// the format of `export`.
pub fn node_in(export: fn(&Machine) -> Result<String, ExportError>) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/ovc/node.toml");
    export(&fsm_core::spec::load(path).unwrap()).unwrap()
}

/// What `import` says of `text` with `from` (which must be there) replaced by
/// `to`: it must refuse it, and its error is returned.
pub fn refused_edit(
    import: fn(&str, &str) -> Result<String, ImportError>,
    text: &str,
    from: &str,
    to: &str,
) -> String {
    assert!(text.contains(from), "`{from}` is not in:\n{text}");
    let edited = text.replacen(from, to, 1);
    match import(&edited, "m") {
        Ok(spec) => panic!("imported after `{from}` became `{to}`:\n{spec}"),
        Err(e) => e.to_string(),
    }
}

/// Every rule by name: action, origin, transition state, target, and whether
/// it moves the object.
pub fn rules(m: &Machine) -> BTreeSet<(String, String, Option<String>, String, bool)> {
    m.rules()
        .map(|r| {
            (
                m.action(r.action).name.to_string(),
                m.state(r.origin).name.to_string(),
                r.via.map(|v| m.state(v).name.to_string()),
                m.state(r.target).name.to_string(),
                r.changes_state,
            )
        })
        .collect()
}

/// What a state is, besides its rules.
pub fn states(m: &Machine) -> BTreeSet<String> {
    m.states()
        .iter()
        .map(|s| {
            format!(
                "{} transition={} terminal={} owner={:?} remove={:?} persisted={} deadline={:?} \
                 description={:?} renamed_from={:?}",
                s.name,
                s.is_transition(),
                s.terminal,
                s.owner,
                s.remove,
                s.persisted,
                s.deadline,
                s.description,
                s.renamed_from
            )
        })
        .collect()
}

/// What an action carries besides its rules.
pub fn actions(m: &Machine) -> BTreeSet<String> {
    m.action_ids()
        .map(|a| {
            let x = m.action(a);
            format!(
                "{} roles={:?} guards={:?} hidden={} deadline={:?} description={:?} renamed_from={:?}",
                x.name,
                x.roles,
                m.guard_names(a),
                x.hidden,
                x.deadline,
                x.description,
                x.renamed_from
            )
        })
        .collect()
}

/// The declared roles, with what each means.
pub fn roles(m: &Machine) -> BTreeSet<(String, Option<String>)> {
    let described = |r: &fsm_core::Role| {
        (
            r.name.to_string(),
            r.description.as_deref().map(String::from),
        )
    };
    m.roles().iter().map(described).collect()
}

/// The declared guards, with what each means and its CEL.
pub fn guards(m: &Machine) -> BTreeSet<(String, String, Option<String>)> {
    let described = |g: &fsm_core::Guard| {
        let cel = g.cel.as_deref().map(String::from);
        (g.name.to_string(), g.description.to_string(), cel)
    };
    m.guards().iter().map(described).collect()
}

/// Every rule, by name, with what a diagram draws of its action (roles,
/// guards, hidden). A move to the state it starts from, without a
/// transition state, counts as staying there: a diagram draws the two alike,
/// an arrow back to the state.
pub fn drawn_moves(m: &Machine) -> BTreeSet<String> {
    m.rules()
        .map(|r| {
            let a = r.action;
            let drawn_as_moving = r.changes_state && (r.via.is_some() || r.origin != r.target);
            format!(
                "{}: {} -> {} via {:?} moves={} roles={:?} guards={:?} hidden={}",
                m.action(a).name,
                m.state(r.origin).name,
                m.state(r.target).name,
                r.via.map(|v| m.state(v).name.to_string()),
                drawn_as_moving,
                m.action(a).roles,
                m.guard_names(a),
                m.action(a).hidden
            )
        })
        .collect()
}

/// What a diagram draws of each state.
pub fn drawn_states(m: &Machine) -> BTreeSet<String> {
    m.states()
        .iter()
        .map(|s| {
            let kind = (
                s.is_transition(),
                s.terminal,
                &s.owner,
                &s.remove,
                s.persisted,
            );
            format!("{} {kind:?}", s.name)
        })
        .collect()
}

/// Asserts that `m` has each move of `expected` (`action: origin -> target`)
/// and `count` moves in all.
pub fn has_moves(m: &Machine, expected: &[&str], count: usize) {
    let moves: BTreeSet<String> = rules(m)
        .into_iter()
        .map(|(a, o, _, t, _)| format!("{a}: {o} -> {t}"))
        .collect();
    for expected in expected {
        assert!(moves.contains(*expected), "{expected} is not in {moves:#?}");
    }
    assert_eq!(moves.len(), count, "{moves:#?}");
}
