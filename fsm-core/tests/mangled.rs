//! The parser and the analysis never panic, whatever the text: mangled copies of the
//! shipped specs give findings that point inside the text.

#[path = "common/mangle.rs"]
mod mangle;

use fsm_core::spec::{SpecError, SpecFile};
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

    /// A spec file with a byte that is not UTF-8 (one saved in Latin-1) is
    /// refused with where that byte is, as an editor counts: the line, and the
    /// characters before it on its line.
    #[test]
    fn a_byte_that_is_not_utf8_is_placed(spec in 0..SPECS.len(), at in any::<prop::sample::Index>(), byte in 0x80u8..=0xff) {
        // Characters of several bytes before the byte on its line, so that its
        // column counts characters, not bytes.
        let text = &SPECS[spec].replace('e', "é");
        let mut cut = at.index(text.len());
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        // A continuation byte alone, or a lead byte followed by ASCII: never UTF-8.
        let mut bytes = text.as_bytes()[..cut].to_vec();
        bytes.extend([byte, b'x']);
        bytes.extend(&text.as_bytes()[cut..]);
        let file = std::env::temp_dir().join(format!("fsm-latin1-{}.toml", std::process::id()));
        std::fs::write(&file, &bytes).unwrap();
        let err = SpecFile::read(&file).unwrap_err();
        let _ = std::fs::remove_file(&file);
        let before = &text[..cut];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().unwrap().chars().count() + 1;
        match &err {
            SpecError::NotUtf8 { path, source } => {
                prop_assert_eq!(path, &file);
                prop_assert_eq!((source.line, source.column, source.byte), (line, column, byte));
            }
            other => prop_assert!(false, "{other}"),
        }
        let expected = format!(
            "cannot read spec {}:{line}:{column}: byte 0x{byte:02x} is not UTF-8 (a spec is UTF-8 text)",
            file.display()
        );
        prop_assert_eq!(err.to_string(), expected);
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
