//! The parser and the analysis never panic, whatever the text: mangled copies of the
//! shipped specs give findings that point inside the text.

#[path = "common/mangle.rs"]
mod mangle;

use fsm_core::spec::SpecFile;
use mangle::{SPECS, apply, edit};
use proptest::prelude::*;

/// What is inserted: TOML's punctuation, and keys of the spec.
const SNIPPETS: &[&str] = &[
    "\"",
    "[",
    "]",
    "{",
    " = ",
    "\n[actions]\n",
    "\n[states.X]\n",
    "to_origin = true, ",
    "via = \"RUNNING\", ",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn mangled_specs_never_panic(spec in 0..SPECS.len(), edits in prop::collection::vec(edit(SNIPPETS, "a-zA-Z_=\\[\\]{}\",. \n0-9-"), 1..4)) {
        let mut text = SPECS[spec].to_owned();
        for e in &edits {
            text = apply(&text, e);
        }
        let report = SpecFile::new("mangled.toml", text.clone()).check();
        let lines = text.lines().count().max(1);
        for d in &report.diagnostics {
            if let Some(at) = report.location(d) {
                prop_assert!(at.line >= 1 && at.line <= lines + 1, "{d:?} at line {}", at.line);
                prop_assert!(at.column >= 1);
                prop_assert!(at.span.end <= text.len());
            }
        }
        prop_assert_eq!(report.machine.is_some(), !report.has_errors());
        let rendered = report.render();
        prop_assert_eq!(rendered.is_empty(), report.diagnostics.is_empty());
    }
}

#[test]
fn wrong_types_name_line_and_column() {
    let text = SPECS[0].replace("initial = \"VIRTUAL\"", "initial = [1, 2]");
    let err = SpecFile::new("vm.toml", text)
        .check()
        .into_machine()
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("invalid spec vm.toml:7:11"), "{err}");
    assert!(
        err.contains("`initial` of [machine]: expected a string, found an array"),
        "{err}"
    );
}
