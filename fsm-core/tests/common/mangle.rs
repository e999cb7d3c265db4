//! Mangled copies of a text, for tests that its reader never panics: a few
//! edits, each a deleted range, an inserted snippet or a duplicated line.

use proptest::prelude::*;

/// The texts mangled: shipped specs of each seed but KusionStack's.
pub const SPECS: [&str; 4] = [
    include_str!("../../../specs/ovc/vm.toml"),
    include_str!("../../../specs/ovc/disk.toml"),
    include_str!("../../../specs/sabakan/machine.toml"),
    include_str!("../../../specs/mizar/bouncer.toml"),
];

/// One edit of a text.
#[derive(Debug, Clone)]
pub enum Edit {
    Delete(usize, usize),
    Insert(usize, String),
    DuplicateLine(usize),
}

/// An edit, inserting one of `snippets` or some of `chars` (a regex class
/// body, such as `a-z{}"`).
pub fn edit(snippets: &'static [&'static str], chars: &'static str) -> impl Strategy<Value = Edit> {
    let snippet = prop_oneof![
        proptest::sample::select(snippets).prop_map(str::to_owned),
        Just("é€😀".to_owned()),
        proptest::string::string_regex(&format!("[{chars}]{{1,12}}")).expect("a regex"),
    ];
    prop_oneof![
        (any::<usize>(), 0usize..40).prop_map(|(at, len)| Edit::Delete(at, len)),
        (any::<usize>(), snippet).prop_map(|(at, s)| Edit::Insert(at, s)),
        any::<usize>().prop_map(Edit::DuplicateLine),
    ]
}

/// `text` with `edit` made, at char boundaries.
pub fn apply(text: &str, edit: &Edit) -> String {
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
            if lines.is_empty() {
                return text.to_owned();
            }
            let n = n % lines.len();
            let mut out: Vec<&str> = lines[..=n].to_vec();
            out.extend(&lines[n..]);
            out.join("\n")
        }
    }
}
