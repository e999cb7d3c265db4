//! The importers never panic, whatever the text: mangled copies of what the
//! exports write (and of the files written by hand) are refused with a line and
//! column inside the text, or import as a spec that the spec reader takes and
//! whose names, origins and targets hold together (whatever else it finds
//! about the machine).

#[path = "../../fsm-core/tests/common/mangle.rs"]
mod mangle;

use fsm_core::render::{self, Format, View};
use fsm_core::spec::SpecFile;
use fsm_core::{Lint, Machine};
use fsm_interchange::{ImportError, from_scxml, from_xstate, mermaid, plantuml};
use mangle::{SPECS, apply, edit};
use proptest::prelude::*;

/// What is inserted: each format's punctuation and keys.
const SNIPPETS: &[&str] = &[
    "\"",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "<",
    ">",
    "/>",
    "</state>",
    "\"target\": \"",
    "\"on\": {",
    "\"type\": \"final\", ",
    "\"meta\": {\"transition\": true}, ",
    "<state id=\"X\">",
    "<transition event=\"go\" target=\"",
    " --> ",
    "[*]",
    "state \"A\" as ",
    " : ",
    "@enduml",
    "\n",
    "\\u0007",
    "&amp;",
    "_done",
    ".",
    " go go",
    "\"in_place\": [{\"action\": \"",
    "--> A : ",
    "class A transition",
    ":::terminal",
    "note right of A",
    "end note",
    "```",
    "stateDiagram-v2",
];

/// What each importer reads: the exports of every spec above, and the files
/// written by hand.
fn inputs() -> Vec<(&'static str, String)> {
    let mut out = vec![
        ("xstate", include_str!("xstate/light.json").to_owned()),
        ("xstate", include_str!("xstate/door.json").to_owned()),
        ("xstate", include_str!("xstate/player.json").to_owned()),
        ("scxml", include_str!("scxml/door.scxml").to_owned()),
        ("scxml", include_str!("scxml/player.scxml").to_owned()),
        ("mermaid", include_str!("mermaid/door.md").to_owned()),
        ("mermaid", include_str!("mermaid/player.md").to_owned()),
    ];
    for text in SPECS {
        let m: Machine = fsm_core::spec::load_str("spec.toml", text).unwrap();
        out.push(("xstate", fsm_interchange::xstate(&m).unwrap()));
        out.push(("scxml", fsm_interchange::scxml(&m).unwrap()));
        out.push(("plantuml", render::render(&m, Format::PlantUml, View::Full)));
        out.push(("mermaid", render::render(&m, Format::Mermaid, View::Full)));
    }
    out
}

fn import(format: &str, text: &str) -> Result<String, ImportError> {
    match format {
        "xstate" => from_xstate(text, "m"),
        "scxml" => from_scxml(text, "m"),
        "mermaid" => mermaid(text, "m"),
        _ => plantuml(text, "m"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 768, ..ProptestConfig::default() })]

    #[test]
    fn mangled_files_are_refused_where_they_are_or_import_as_toml(
        input in 0..inputs().len(),
        edits in prop::collection::vec(edit(SNIPPETS, "a-zA-Z_{}\\[\\]\",.:<>/=#* \n0-9-"), 1..4),
    ) {
        let (format, text) = &inputs()[input];
        let mut text = text.clone();
        for e in &edits {
            text = apply(&text, e);
        }
        match import(format, &text) {
            Err(e) => {
                let lines = text.lines().count().max(1);
                prop_assert!(e.line >= 1 && e.line <= lines + 1, "{format}: {e}");
                prop_assert!(e.column >= 1, "{format}: {e}");
            }
            Ok(spec) => {
                let report = SpecFile::new("imported.toml", spec.clone()).check();
                // Findings that would mean the importer wrote what the file
                // did not say: a spec the reader cannot take, or names,
                // origins and targets that do not hold together.
                let miswritten = report.diagnostics.iter().find(|d| {
                    matches!(
                        d.lint,
                        Lint::Syntax
                            | Lint::Schema
                            | Lint::ConflictingTarget
                            | Lint::UnknownState
                            | Lint::UnknownRole
                            | Lint::UnknownGuard
                            | Lint::DuplicateState
                            | Lint::DuplicateAction
                            | Lint::DuplicateOrigin
                            | Lint::MissingInitial
                            | Lint::NoOrigin
                            | Lint::StaticVia
                            | Lint::PerOriginMismatch
                    )
                });
                prop_assert!(miswritten.is_none(), "{format}: {miswritten:?}\n{spec}");
            }
        }
    }
}
