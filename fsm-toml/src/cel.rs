//! Guards' CEL expressions, parsed where the spec is read (feature `cel`): an
//! expression that does not parse is a finding at its line and column in the
//! file, as every other mistake in a spec is, not an error when a runtime is
//! built from the machine.

use std::ops::Range;

use fsm_model::{Diagnostic, Lint, Site};
use toml::Spanned;

/// The finding of `expression` (a guard's `cel`, written in `text`; `what`
/// names it in a message), if it does not parse: the parser's first error only,
/// as those after it follow from it more often than not.
pub(crate) fn check(text: &str, expression: &Spanned<String>, what: &str) -> Option<Diagnostic> {
    let errors = cel::Program::compile(expression.get_ref()).err()?;
    let first = errors.errors.into_iter().next()?;
    Some(Diagnostic::new(
        Lint::Cel,
        Site::Text(place(text, expression, first.pos)),
        format!("{what}: not a CEL expression: {}", first.msg),
    ))
}

/// Where in `text` the character at `(line, column)` (from 1) of the string
/// `expression` was written: exact when the string is written as it reads (no
/// escapes), otherwise the whole string. Past the last character: the closing
/// quote.
fn place(text: &str, expression: &Spanned<String>, (line, column): (isize, isize)) -> Range<usize> {
    let span = expression.span();
    let raw = &text[span.clone()];
    // A multi-line string opens with three quotes and drops a newline right
    // after them; a one-line string opens with one.
    let quotes = if raw.starts_with("\"\"\"") || raw.starts_with("'''") {
        3
    } else {
        1
    };
    let Some(mut body) = raw.get(quotes..raw.len().saturating_sub(quotes)) else {
        return span;
    };
    let mut start = span.start + quotes;
    if quotes == 3 {
        if let Some(rest) = body
            .strip_prefix("\r\n")
            .or_else(|| body.strip_prefix('\n'))
        {
            start += body.len() - rest.len();
            body = rest;
        }
    }
    let (Ok(line), Ok(column)) = (usize::try_from(line), usize::try_from(column)) else {
        return span;
    };
    if body != expression.get_ref() || line == 0 || column == 0 {
        return span;
    }
    let mut offset = 0;
    for (n, text_line) in body.split_inclusive('\n').enumerate() {
        if n + 1 == line {
            let at = text_line
                .char_indices()
                .nth(column - 1)
                .map_or(text_line.len(), |(i, _)| i);
            let width = text_line[at..].chars().next().map_or(1, char::len_utf8);
            return start + offset + at..start + offset + at + width;
        }
        offset += text_line.len();
    }
    // Past the last line: the end of the string.
    start + body.len()..start + body.len() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The findings of the one guard of `spec`'s `cel`, each as the text at its
    /// place.
    fn placed(spec: &str) -> Vec<String> {
        use toml::de::{DeTable, DeValue};
        fn table<'a, 'i>(v: &'a DeValue<'i>) -> &'a DeTable<'i> {
            match v {
                DeValue::Table(t) => t,
                other => panic!("{other:?}"),
            }
        }
        let doc = DeTable::parse(spec).unwrap();
        let guards = table(doc.get_ref().get("guards").unwrap().get_ref());
        let guard = table(guards.get("g").unwrap().get_ref());
        let cel = guard.get("cel").unwrap();
        let DeValue::String(s) = cel.get_ref() else {
            panic!("{cel:?}")
        };
        let expression = Spanned::new(cel.span(), s.to_string());
        check(spec, &expression, "`cel` of guard `g`")
            .iter()
            .map(|d| match &d.site {
                Site::Text(span) => format!("{:?} {}", &spec[span.clone()], d.message),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn an_expression_that_parses_is_no_finding() {
        let spec = "[guards]\ng = { cel = \"size(object.data.keys) == 0\" }\n";
        assert_eq!(placed(spec), Vec::<String>::new());
    }

    #[test]
    fn a_finding_points_at_the_character_at_fault() {
        let spec = "[guards]\ng = { cel = \"a &&& b\" }\n";
        let found = placed(spec);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("\"&\" `cel` of guard `g`: not a CEL expression: Syntax error"),
            "{found:?}"
        );
    }

    #[test]
    fn in_a_multi_line_string_on_its_own_line() {
        let spec = "[guards]\ng = { cel = \"\"\"\nobject.ready ==\n  (true\"\"\" }\n";
        let found = placed(spec);
        assert_eq!(found.len(), 1, "{found:?}");
        // The end of the second line: the closing quotes.
        assert!(found[0].starts_with("\"\\\"\" "), "{found:?}");
        assert!(found[0].contains("missing ')'"), "{found:?}");
    }

    /// A position the parser does not give (none, or past the string's last
    /// line) points at the whole string, or at its end.
    #[test]
    fn a_position_outside_the_string_points_at_it_whole_or_at_its_end() {
        let text = "cel = \"a ==\"";
        let expression = Spanned::new(6..12, "a ==".to_owned());
        assert_eq!(&text[place(text, &expression, (0, 0))], "\"a ==\"");
        assert_eq!(&text[place(text, &expression, (-1, 3))], "\"a ==\"");
        assert_eq!(&text[place(text, &expression, (2, 1))], "\"");
        assert_eq!(&text[place(text, &expression, (1, 5))], "\"");
        assert_eq!(&text[place(text, &expression, (1, 3))], "=");
    }

    #[test]
    fn a_string_with_escapes_is_pointed_at_whole() {
        let spec = "[guards]\ng = { cel = \"a \\u0026&& b\" }\n";
        let found = placed(spec);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("\"\\\"a \\\\u0026&& b\\\"\" "),
            "{found:?}"
        );
    }
}
