//! Names as markup text: the one escaping that SVG drawings, SCXML documents and
//! `fsm serve`'s page share, so that a state or action named with `<`, `&` or a
//! quote reads the same in each.

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
