//! The syntax of `#[fsm(...)]` attributes, read from their token trees: a list of
//! items, each a flag, a `key = value` or a `key(items)`. Every token keeps its
//! span, so the checks can point at the one at fault.

use proc_macro::{Delimiter, Ident, Literal, Span, TokenTree};

use crate::ctxt::{Error, Errors};
use crate::input::{Args, Attribute};

/// The name of an item: an identifier, identifiers joined by dashes
/// (`vpc-operator`), or a string.
#[derive(Clone)]
pub struct Key {
    name: String,
    span: Span,
}

/// The container keys that set how the enum is generated, not what the table
/// is: the only ones a spec file's enum takes beside `spec`.
#[cfg_attr(not(feature = "toml"), allow(dead_code))]
pub const SETTING_KEYS: [&str; 6] = ["spec", "crate", "actions", "markers", "diagram", "serde"];

/// A value: a string, a bool, a name, or a list (`[A, B]` or `A | B`).
#[derive(Clone)]
pub enum Value {
    Str(String, Span),
    Bool(bool),
    Name(Ident),
    /// Identifiers joined by dashes: `vpc-operator`.
    Dashed(String, Span),
    List(Vec<Value>),
    /// Any other literal: accepted by the parser so that the checks, which know
    /// what each setting expects, report it.
    Other,
}

impl Value {
    /// The value as a name: a string's contents or an identifier.
    pub fn as_name(&self) -> Option<(String, Span)> {
        match self {
            Value::Str(s, span) | Value::Dashed(s, span) => Some((s.clone(), *span)),
            Value::Name(i) => Some((unraw(i), i.span())),
            _ => None,
        }
    }

    /// The value as a list of names; a single name is a list of one.
    pub fn as_names(&self) -> Option<Vec<(String, Span)>> {
        match self {
            Value::List(items) => items.iter().map(Value::as_name).collect(),
            other => other.as_name().map(|n| vec![n]),
        }
    }
}

/// What follows an item's key.
#[derive(Clone)]
pub enum Body {
    Flag,
    Value(Value),
    Args(Vec<Item>),
}

/// One item of an attribute.
#[derive(Clone)]
pub struct Item {
    pub key: Key,
    pub body: Body,
}

impl Item {
    pub fn name(&self) -> String {
        self.key.name.clone()
    }

    pub fn span(&self) -> Span {
        self.key.span
    }
}

/// An identifier as written, without `r#`.
pub fn unraw(ident: &Ident) -> String {
    let s = ident.to_string();
    s.strip_prefix("r#").map_or(s.clone(), str::to_owned)
}

/// The text of a string literal, escapes resolved; `None` for any other literal.
pub fn string_value(lit: &Literal) -> Option<String> {
    unescape(&lit.to_string())
}

/// The text of a string literal written as `repr`, escapes resolved.
fn unescape(repr: &str) -> Option<String> {
    if let Some(raw) = repr.strip_prefix('r') {
        let hashes = raw.len() - raw.trim_start_matches('#').len();
        let inner = raw.get(hashes + 1..raw.len().checked_sub(hashes + 1)?)?;
        return Some(inner.to_owned());
    }
    let inner = repr.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            '0' => out.push('\0'),
            '\\' => out.push('\\'),
            '"' => out.push('"'),
            '\'' => out.push('\''),
            'x' => {
                let hex: String = chars.by_ref().take(2).collect();
                out.push(char::from(u8::from_str_radix(&hex, 16).ok()?));
            }
            'u' => {
                let code: String = chars
                    .by_ref()
                    .skip_while(|&c| c == '{')
                    .take_while(|&c| c != '}')
                    .collect();
                out.push(char::from_u32(u32::from_str_radix(&code, 16).ok()?)?);
            }
            // A line continuation: the line break and the next line's indent go.
            '\n' => {
                while chars.peek().is_some_and(|c| c.is_whitespace()) {
                    chars.next();
                }
            }
            _ => return None,
        }
    }
    Some(out)
}

/// A cursor over the token trees of an attribute.
struct Cursor<'a> {
    tokens: &'a [TokenTree],
    at: usize,
    /// Where to point when the tokens run out.
    end: Span,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<&'a TokenTree> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<&'a TokenTree> {
        let t = self.tokens.get(self.at);
        self.at += 1;
        t
    }

    fn span(&self) -> Span {
        self.peek().map_or(self.end, TokenTree::span)
    }

    fn punct(&self, c: char) -> bool {
        matches!(self.peek(), Some(TokenTree::Punct(p)) if p.as_char() == c)
    }

    /// `-ident` follows: the name goes on with a dash.
    fn dash_then_ident(&self) -> bool {
        self.punct('-') && matches!(self.tokens.get(self.at + 1), Some(TokenTree::Ident(_)))
    }

    fn error(&self, message: &str) -> Error {
        Error::new(self.span(), message)
    }

    /// An identifier, or identifiers joined by dashes; the first gives the span.
    fn dashed(&mut self, first: &Ident) -> String {
        let mut name = unraw(first);
        while self.dash_then_ident() {
            self.next();
            if let Some(TokenTree::Ident(i)) = self.next() {
                name.push('-');
                name.push_str(&unraw(i));
            }
        }
        name
    }

    fn key(&mut self) -> Result<Key, Error> {
        match self.next() {
            Some(TokenTree::Ident(i)) => Ok(Key {
                name: self.dashed(i),
                span: i.span(),
            }),
            Some(TokenTree::Literal(l)) => match string_value(l) {
                Some(name) => Ok(Key {
                    name,
                    span: l.span(),
                }),
                None => Err(Error::new(l.span(), "expected a name")),
            },
            Some(other) => Err(Error::new(other.span(), "expected a name")),
            None => Err(Error::new(self.end, "expected a name")),
        }
    }

    fn primary(&mut self) -> Result<Value, Error> {
        let expected = "expected a string, `true`/`false`, a name or a `[...]` list";
        match self.next() {
            Some(TokenTree::Literal(l)) => Ok(match string_value(l) {
                Some(s) => Value::Str(s, l.span()),
                None => Value::Other,
            }),
            Some(TokenTree::Ident(i)) if matches!(i.to_string().as_str(), "true" | "false") => {
                Ok(Value::Bool(i.to_string() == "true"))
            }
            Some(TokenTree::Ident(i)) => {
                let name = self.dashed(i);
                Ok(if name.contains('-') {
                    Value::Dashed(name, i.span())
                } else {
                    Value::Name(i.clone())
                })
            }
            Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Bracket => {
                let tokens: Vec<TokenTree> = g.stream().into_iter().collect();
                let mut inner = Cursor {
                    tokens: &tokens,
                    at: 0,
                    end: g.span_close(),
                };
                let mut items = Vec::new();
                while inner.peek().is_some() {
                    items.push(inner.value()?);
                    if inner.peek().is_some() && !inner.comma() {
                        return Err(inner.error("expected `,`"));
                    }
                }
                Ok(Value::List(items))
            }
            Some(other) => Err(Error::new(other.span(), expected)),
            None => Err(Error::new(self.end, expected)),
        }
    }

    /// A value, or values joined by `|`.
    fn value(&mut self) -> Result<Value, Error> {
        let first = self.primary()?;
        if !self.punct('|') {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.punct('|') {
            self.next();
            items.push(self.primary()?);
        }
        Ok(Value::List(items))
    }

    fn comma(&mut self) -> bool {
        let comma = self.punct(',');
        if comma {
            self.next();
        }
        comma
    }

    fn item(&mut self) -> Result<Item, Error> {
        let key = self.key()?;
        let body = if self.punct('=') {
            self.next();
            Body::Value(self.value()?)
        } else {
            match self.peek() {
                Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis => {
                    self.next();
                    Body::Args(items(g.stream().into_iter().collect(), g.span_close())?)
                }
                _ => Body::Flag,
            }
        };
        Ok(Item { key, body })
    }
}

/// The comma-separated items of `tokens`: the inside of `#[fsm(...)]`.
pub fn items(tokens: Vec<TokenTree>, end: Span) -> Result<Vec<Item>, Error> {
    let mut cursor = Cursor {
        tokens: &tokens,
        at: 0,
        end,
    };
    let mut out = Vec::new();
    while cursor.peek().is_some() {
        out.push(cursor.item()?);
        if cursor.peek().is_some() && !cursor.comma() {
            return Err(cursor.error("expected `,`"));
        }
    }
    Ok(out)
}

/// Every item of every `#[fsm(...)]` among `attrs`.
///
/// An attribute that does not parse is reported and skipped, so the others are
/// still checked.
pub fn fsm_items(attrs: &[Attribute], errors: &mut Errors) -> Vec<Item> {
    let mut out = Vec::new();
    for attr in attrs.iter().filter(|a| a.name == "fsm") {
        match &attr.args {
            Args::List(tokens, end) => match items(tokens.clone(), *end) {
                Ok(items) => out.extend(items),
                Err(e) => errors.push(e),
            },
            _ => errors.at(attr.span, "expected `#[fsm(...)]`, a list of settings"),
        }
    }
    out
}

/// The text of `///` doc comments, joined, trimmed.
pub fn doc(attrs: &[Attribute]) -> Option<String> {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.name == "doc")
        .filter_map(|a| match &a.args {
            Args::Value(value) => match value.as_slice() {
                [TokenTree::Literal(l)] => string_value(l).map(|s| s.trim().to_owned()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let text = lines.join(" ").trim().to_owned();
    (!text.is_empty()).then_some(text)
}

// The rest of this module needs the compiler's token trees, which exist only
// while a macro runs: `tests/derived.rs` (`the_derive_reads_every_shape_of_input`)
// and the compile-fail cases in `fsm-derive/tests/ui` test it through the derive.
#[cfg(test)]
mod tests {
    use super::unescape;

    #[test]
    fn string_literals_read_as_written() {
        assert_eq!(unescape(r#""plain""#).unwrap(), "plain");
        assert_eq!(
            unescape(r#""a \"b\"\n\t\\ \u{e9}""#).unwrap(),
            "a \"b\"\n\t\\ é"
        );
        assert_eq!(unescape(r##"r#"raw "q""#"##).unwrap(), "raw \"q\"");
        assert_eq!(unescape("\"one \\\n    line\"").unwrap(), "one line");
        assert_eq!(unescape("3"), None);
    }
}
