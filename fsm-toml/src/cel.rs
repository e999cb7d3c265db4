//! Guards' CEL expressions, parsed where the spec is read (feature `cel`): an
//! expression that does not parse, or that names a variable a guard does not
//! see, is a finding at its line and column in the file, as every other
//! mistake in a spec is, not a refusal of every start once a runtime
//! evaluates it.

use std::ops::Range;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use fsm_model::{Diagnostic, Help, Lint, Site};
use toml::Spanned;

/// The variables a guard's expression sees (the runtime's `cel` module gives
/// them): the object, the data an action would leave, the action, the actor.
const VARIABLES: [&str; 4] = ["object", "proposed", "action", "actor"];

/// CEL's names of types, which an expression may use as values
/// (`type(x) == int`).
const TYPES: [&str; 11] = [
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
];

/// The finding of `expression` (a guard's `cel`, written in `text`; `what`
/// names it in a message), if it does not parse (the parser's first error
/// only, as those after it follow from it more often than not), or else if
/// it names a variable a guard does not see (the first one).
pub(crate) fn check(text: &str, expression: &Spanned<String>, what: &str) -> Option<Diagnostic> {
    let source = expression.get_ref();
    if let Err(errors) = cel::Program::compile(source) {
        let first = errors.errors.into_iter().next()?;
        return Some(Diagnostic::new(
            Lint::Cel,
            Site::Text(place(text, expression, first.pos)),
            format!("{what}: not a CEL expression: {}", first.msg),
        ));
    }
    let (ast, info) = cel::parser::Parser::new()
        .parse_with_source_info(source)
        .ok()?;
    let (id, name) = first_unknown(&ast, &mut Vec::new())?;
    let at = (info.offset_for(id)).map_or((0, 0), |(start, _)| line_and_column(source, start));
    let listed = VARIABLES.map(|v| format!("`{v}`")).join(", ");
    let found = Diagnostic::new(
        Lint::Cel,
        Site::Text(place(text, expression, at)),
        format!("{what}: `{name}` is not a variable a guard sees; it sees {listed}"),
    )
    .with_label("no such variable");
    Some(match fsm_model::suggest(name, VARIABLES) {
        Some(close) => found.with_help(Help::DidYouMean(close.to_owned())),
        None => found,
    })
}

/// The first identifier in `e` that is neither a guard's variable, nor a
/// type, nor bound by a macro around it (`bound`, as `k` in
/// `list.all(k, k > 0)`), with its node's id.
fn first_unknown<'e>(e: &'e IdedExpr, bound: &mut Vec<&'e str>) -> Option<(u64, &'e str)> {
    match &e.expr {
        Expr::Ident(name) => {
            // (`@`: the variables the parser's macros make for themselves.)
            let known = name.starts_with('@')
                || bound.contains(&name.as_str())
                || VARIABLES.contains(&name.as_str())
                || TYPES.contains(&name.as_str());
            (!known).then_some((e.id, name.as_str()))
        }
        Expr::Call(call) => (call.target.iter().map(|t| &**t))
            .chain(&call.args)
            .find_map(|a| first_unknown(a, bound)),
        Expr::Comprehension(c) => {
            let outside =
                first_unknown(&c.iter_range, bound).or_else(|| first_unknown(&c.accu_init, bound));
            if outside.is_some() {
                return outside;
            }
            let depth = bound.len();
            bound.extend([c.iter_var.as_str(), c.accu_var.as_str()]);
            bound.extend(c.iter_var2.as_deref());
            let inside = [&c.loop_cond, &c.loop_step, &c.result]
                .into_iter()
                .find_map(|part| first_unknown(part, bound));
            bound.truncate(depth);
            inside
        }
        Expr::List(list) => (list.elements.iter()).find_map(|x| first_unknown(x, bound)),
        Expr::Map(map) => (map.entries.iter()).find_map(|x| entry_unknown(&x.expr, bound)),
        Expr::Struct(s) => (s.entries.iter()).find_map(|x| entry_unknown(&x.expr, bound)),
        Expr::Select(select) => first_unknown(&select.operand, bound),
        Expr::Literal(_) | Expr::Unspecified => None,
    }
}

/// [`first_unknown`] in an entry of a map or a message.
fn entry_unknown<'e>(entry: &'e EntryExpr, bound: &mut Vec<&'e str>) -> Option<(u64, &'e str)> {
    match entry {
        EntryExpr::StructField(field) => first_unknown(&field.value, bound),
        EntryExpr::MapEntry(pair) => {
            first_unknown(&pair.key, bound).or_else(|| first_unknown(&pair.value, bound))
        }
    }
}

/// The line and column (from 1, the column in characters) of the byte at
/// `offset` of `source`, as the parser counts offsets.
fn line_and_column(source: &str, offset: u32) -> (isize, isize) {
    let before = source.get(..offset as usize).unwrap_or(source);
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.matches('\n').count() + 1;
    let column = before[line_start..].chars().count() + 1;
    (line as isize, column as isize)
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
    if quotes == 3
        && let Some(rest) = body
            .strip_prefix("\r\n")
            .or_else(|| body.strip_prefix('\n'))
    {
        start += body.len() - rest.len();
        body = rest;
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
        found(spec)
            .iter()
            .map(|d| match &d.site {
                Site::Text(span) => format!("{:?} {}", &spec[span.clone()], d.message),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    /// The findings of the one guard of `spec`'s `cel`.
    fn found(spec: &str) -> Vec<Diagnostic> {
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
            .into_iter()
            .collect()
    }

    #[test]
    fn an_expression_that_parses_is_no_finding() {
        let spec = "[guards]\ng = { cel = \"size(object.data.keys) == 0\" }\n";
        assert_eq!(placed(spec), Vec::<String>::new());
    }

    #[test]
    fn a_variable_a_guard_does_not_see_is_a_finding_at_its_name() {
        let spec = "[guards]\ng = { cel = \"size(object.data.keys) == 0 && objet.ready\" }\n";
        assert_eq!(
            placed(spec),
            [
                "\"o\" `cel` of guard `g`: `objet` is not a variable a guard sees; it sees \
              `object`, `proposed`, `action`, `actor`"
            ]
        );
        // On the second line of a multi-line string, and bound only inside
        // its macro: `k` is unknown after `all(...)`.
        let spec =
            "[guards]\ng = { cel = \"\"\"\nobject.data.keys.all(k, k != '')\n  && k == 1\"\"\" }\n";
        let found = found(spec);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .message
                .starts_with("`cel` of guard `g`: `k` is not"),
            "{found:?}"
        );
        let at = spec.rfind("k ==").unwrap();
        assert_eq!(found[0].site, Site::Text(at..at + 1));
        // Nothing close to `k`.
        assert_eq!(found[0].help, None);
    }

    #[test]
    fn a_variable_after_other_characters_than_ascii_is_found_where_it_is() {
        let spec = "[guards]\ng = { cel = \"'é→' == objet.name\" }\n";
        let found = found(spec);
        let at = spec.find("objet").unwrap();
        assert_eq!(found[0].site, Site::Text(at..at + 1), "{found:?}");
    }

    #[test]
    fn a_syntax_error_after_other_characters_than_ascii_is_found_where_it_is() {
        let spec = "[guards]\ng = { cel = \"'é→' == 1 &&& x\" }\n";
        let found = found(spec);
        let at = spec.find("&&&").unwrap() + 2;
        assert_eq!(found[0].site, Site::Text(at..at + 1), "{found:?}");
    }

    #[test]
    fn a_typo_of_a_variable_is_named() {
        let expression = Spanned::new(0..0, "proposal.data == null".to_owned());
        let d = check("", &expression, "g").unwrap();
        assert_eq!(d.help, Some(Help::DidYouMean("proposed".into())));
    }

    #[test]
    fn variables_bound_by_macros_and_type_names_are_no_finding() {
        for cel in [
            "object.data.keys.all(k, k in proposed.data.keys)",
            "object.data.keys.exists(k, object.data.keys.all(j, j <= k))",
            "type(object.data) == map && action == 'add_key'",
            "has(object.data.keys) && 'admin' in actor.roles",
            "{'a': object.version}['a'] > 0 && [actor.name].size() == 1",
        ] {
            let expression = Spanned::new(0..0, cel.to_owned());
            assert_eq!(check("", &expression, "g"), None, "{cel}");
        }
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
