//! The parser and the analysis never panic, whatever the text: mangled copies of the
//! shipped specs give findings that point inside the text.

use fsm_core::spec::SpecFile;
use proptest::prelude::*;

const SPECS: [&str; 4] = [
    include_str!("../../specs/ovc/vm.toml"),
    include_str!("../../specs/ovc/disk.toml"),
    include_str!("../../specs/sabakan/machine.toml"),
    include_str!("../../specs/mizar/bouncer.toml"),
];

/// One edit of a text: delete a range, insert a snippet, or duplicate a line.
#[derive(Debug, Clone)]
enum Edit {
    Delete(usize, usize),
    Insert(usize, String),
    DuplicateLine(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let snippet = prop_oneof![
        Just("\"".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just("{".to_owned()),
        Just(" = ".to_owned()),
        Just("\n[actions]\n".to_owned()),
        Just("\n[states.X]\n".to_owned()),
        Just("to_origin = true, ".to_owned()),
        Just("via = \"RUNNING\", ".to_owned()),
        Just("é€😀".to_owned()),
        "[a-zA-Z_=\\[\\]{}\",. \n0-9-]{1,12}",
    ];
    prop_oneof![
        (any::<usize>(), 0usize..40).prop_map(|(at, len)| Edit::Delete(at, len)),
        (any::<usize>(), snippet).prop_map(|(at, s)| Edit::Insert(at, s)),
        any::<usize>().prop_map(Edit::DuplicateLine),
    ]
}

fn apply(text: &str, edit: &Edit) -> String {
    let boundary = |at: usize| {
        let mut at = at % (text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    match edit {
        Edit::Delete(at, len) => {
            let start = boundary(*at);
            let end = boundary(start + len);
            format!("{}{}", &text[..start], &text[end.max(start)..])
        }
        Edit::Insert(at, s) => {
            let at = boundary(*at);
            format!("{}{s}{}", &text[..at], &text[at..])
        }
        Edit::DuplicateLine(n) => {
            let lines: Vec<&str> = text.lines().collect();
            let n = n % lines.len();
            let mut out: Vec<&str> = lines[..=n].to_vec();
            out.extend(&lines[n..]);
            out.join("\n")
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn mangled_specs_never_panic(spec in 0..SPECS.len(), edits in prop::collection::vec(edit(), 1..4)) {
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
