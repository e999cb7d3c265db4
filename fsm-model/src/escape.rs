//! Names as markup text: the one escaping that SVG drawings, SCXML documents and
//! `fsm serve`'s page share, so that a state or action named with `<`, `&` or a
//! quote reads the same in each; and roles' and guards' names as a diagram's
//! arrow labels write them, so that a label reads back whatever a name holds.

use alloc::{borrow::Cow, string::String};

/// `text` escaped for XML (and HTML) element content or a quoted attribute
/// value: `&`, `<`, `>`, `"` and `'` become entity references, everything else
/// stays.
///
/// ```
/// assert_eq!(
///     fsm_model::xml_escape(r#"a<b & "c" > 'd'"#),
///     "a&lt;b &amp; &quot;c&quot; &gt; &apos;d&apos;"
/// );
/// ```
pub fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// Whether a role's or guard's name is a plain word in a diagram's arrow
/// label, written bare: ASCII letters, digits, `_` and `-`, not starting
/// with a digit.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && (name.chars()).all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

/// A role's or guard's name as a diagram's arrow label writes it (`go
/// [quota] (admin)`): bare when it [is plain](is_plain_name), otherwise in
/// double quotes, with `"` and `\` escaped by `\`, so that a name holding
/// spaces, commas or brackets reads back whole.
///
/// ```
/// assert_eq!(fsm_model::label_name("admin"), "admin");
/// assert_eq!(fsm_model::label_name("cloud admin"), r#""cloud admin""#);
/// assert_eq!(fsm_model::label_name(r#"say "hi""#), r#""say \"hi\"""#);
/// ```
pub fn label_name(name: &str) -> Cow<'_, str> {
    if is_plain_name(name) {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for c in name.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    Cow::Owned(out)
}
