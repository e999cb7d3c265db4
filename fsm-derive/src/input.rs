//! The shape of the derive's input, read from its token trees: the enum's
//! attributes, visibility, name and variants.
//!
//! A derive receives an item the compiler already parsed, so this reader only
//! splits valid Rust into the parts the derive needs; it does not judge syntax. It
//! replaces a general Rust parser (syn, venial), which cost more than the rest of
//! the derive on the critical path of a cold build (BENCHMARKS.md).

use proc_macro::{Delimiter, Group, Ident, Span, TokenStream, TokenTree};

use crate::ctxt::Error;

/// An outer attribute `#[path ...]`: its path's first identifier and the tokens
/// after the path.
#[derive(Clone)]
pub struct Attribute {
    pub name: String,
    pub span: Span,
    pub args: Args,
}

/// What follows an attribute's path.
#[derive(Clone)]
pub enum Args {
    /// `#[name(...)]`: the tokens inside and the closing parenthesis' span.
    List(Vec<TokenTree>, Span),
    /// `#[name = ...]`: the tokens after `=`.
    Value(Vec<TokenTree>),
    /// `#[name]` or anything else.
    Other,
}

/// A variant of the enum.
pub struct Variant {
    pub attributes: Vec<Attribute>,
    pub name: Ident,
    /// Whether it carries fields (`A(u8)`, `A { x: u8 }`).
    pub fields: bool,
    /// Whether it names its discriminant (`A = 3`).
    pub discriminant: bool,
}

/// The enum, as far as the derive needs it.
pub struct Enum {
    pub attributes: Vec<Attribute>,
    /// `pub`, `pub(crate)`, ... as written; empty when private.
    pub vis: TokenStream,
    pub name: Ident,
    /// Where generic parameters start, if the enum has any.
    pub generics: Option<Span>,
    pub variants: Vec<Variant>,
}

fn punct(t: Option<&TokenTree>, c: char) -> bool {
    matches!(t, Some(TokenTree::Punct(p)) if p.as_char() == c)
}

fn ident(t: Option<&TokenTree>, word: &str) -> bool {
    matches!(t, Some(TokenTree::Ident(i)) if i.to_string() == word)
}

/// Reads `#[...]` attributes from `tokens[*at..]`, moving `at` past them.
fn attributes(tokens: &[TokenTree], at: &mut usize) -> Vec<Attribute> {
    let mut out = Vec::new();
    while punct(tokens.get(*at), '#') {
        let Some(TokenTree::Group(g)) = tokens.get(*at + 1) else {
            break;
        };
        *at += 2;
        out.push(attribute(g));
    }
    out
}

fn attribute(group: &Group) -> Attribute {
    let inner: Vec<TokenTree> = group.stream().into_iter().collect();
    let (name, span) = match inner.first() {
        Some(TokenTree::Ident(i)) => (i.to_string(), i.span()),
        _ => (String::new(), group.span()),
    };
    // The path: identifiers joined by `::`.
    let mut at = 1;
    while punct(inner.get(at), ':') && punct(inner.get(at + 1), ':') {
        at += 3;
    }
    let args = match inner.get(at) {
        Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis => {
            Args::List(g.stream().into_iter().collect(), g.span_close())
        }
        Some(TokenTree::Punct(p)) if p.as_char() == '=' => Args::Value(inner[at + 1..].to_vec()),
        _ => Args::Other,
    };
    Attribute { name, span, args }
}

/// Splits the derive's input into the enum's parts.
pub fn parse(input: TokenStream) -> Result<Enum, Error> {
    let tokens: Vec<TokenTree> = input.into_iter().collect();
    let mut at = 0;
    let attributes = attributes(&tokens, &mut at);
    let mut vis = TokenStream::new();
    if ident(tokens.get(at), "pub") {
        vis.extend([tokens[at].clone()]);
        at += 1;
        if let Some(TokenTree::Group(g)) = tokens.get(at)
            && g.delimiter() == Delimiter::Parenthesis
        {
            vis.extend([tokens[at].clone()]);
            at += 1;
        }
    }
    if !ident(tokens.get(at), "enum") {
        let span = tokens
            .get(at + 1)
            .map_or_else(Span::call_site, TokenTree::span);
        return Err(Error::new(
            span,
            "StateMachine can only be derived for an enum of states",
        ));
    }
    let Some(TokenTree::Ident(name)) = tokens.get(at + 1) else {
        return Err(Error::new(Span::call_site(), "expected the enum's name"));
    };
    at += 2;
    let generics = punct(tokens.get(at), '<').then(|| tokens[at].span());
    let body = tokens[at..].iter().find_map(|t| match t {
        TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => Some(g),
        _ => None,
    });
    let variants = body.map(variants).unwrap_or_default();
    Ok(Enum {
        attributes,
        vis,
        name: name.clone(),
        generics,
        variants,
    })
}

/// The variants inside the enum's braces.
fn variants(body: &Group) -> Vec<Variant> {
    let tokens: Vec<TokenTree> = body.stream().into_iter().collect();
    let mut out = Vec::new();
    let mut at = 0;
    while at < tokens.len() {
        let attributes = attributes(&tokens, &mut at);
        // A variant's visibility is not valid Rust, but skip one if present.
        if ident(tokens.get(at), "pub") {
            at += 1;
        }
        let Some(TokenTree::Ident(name)) = tokens.get(at) else {
            break;
        };
        at += 1;
        let fields = matches!(tokens.get(at), Some(TokenTree::Group(_)));
        if fields {
            at += 1;
        }
        let discriminant = punct(tokens.get(at), '=');
        // Skip to the next variant.
        while at < tokens.len() && !punct(tokens.get(at), ',') {
            at += 1;
        }
        at += 1;
        out.push(Variant {
            attributes,
            name: name.clone(),
            fields,
            discriminant,
        });
    }
    out
}
