//! The syntax of `#[fsm(...)]` attributes: a list of items, each a flag, a
//! `key = value` or a `key(items)`. Every token keeps its span, so the checks can
//! point at the one at fault.

use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Ident, LitBool, LitStr, Token, bracketed, parenthesized};

/// The name of an item: an identifier, identifiers joined by dashes
/// (`vpc-operator`), or a string.
#[derive(Clone)]
pub struct Key {
    name: String,
    span: Span,
}

impl Key {
    pub fn name(&self) -> String {
        self.name.clone()
    }

    pub fn span(&self) -> Span {
        self.span
    }
}

impl Parse for Key {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.peek(LitStr) {
            let s: LitStr = input.parse()?;
            return Ok(Key {
                name: s.value(),
                span: s.span(),
            });
        }
        let (first, name) = dashed(input)?;
        Ok(Key {
            name,
            span: first.span(),
        })
    }
}

/// An identifier, or identifiers joined by dashes; the first identifier gives the span.
fn dashed(input: ParseStream) -> syn::Result<(Ident, String)> {
    let first = Ident::parse_any(input)?;
    let mut name = first.unraw().to_string();
    while input.peek(Token![-]) && input.peek2(Ident::peek_any) {
        input.parse::<Token![-]>()?;
        name.push('-');
        name.push_str(&Ident::parse_any(input)?.unraw().to_string());
    }
    Ok((first, name))
}

/// A value: a string, a bool, a name, or a list (`[A, B]` or `A | B`).
#[derive(Clone)]
pub enum Value {
    Str(LitStr),
    Bool(LitBool),
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
            Value::Str(s) => Some((s.value(), s.span())),
            Value::Name(i) => Some((i.unraw().to_string(), i.span())),
            Value::Dashed(name, span) => Some((name.clone(), *span)),
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

fn primary(input: ParseStream) -> syn::Result<Value> {
    if input.peek(LitStr) {
        input.parse().map(Value::Str)
    } else if input.peek(LitBool) {
        input.parse().map(Value::Bool)
    } else if input.peek(syn::token::Bracket) {
        let content;
        bracketed!(content in input);
        let items = Punctuated::<Value, Token![,]>::parse_terminated(&content)?;
        Ok(Value::List(items.into_iter().collect()))
    } else if input.peek(Ident::peek_any) {
        let (first, name) = dashed(input)?;
        Ok(if name.contains('-') {
            Value::Dashed(name, first.span())
        } else {
            Value::Name(first)
        })
    } else if input.peek(syn::Lit) {
        input.parse::<syn::Lit>().map(|_| Value::Other)
    } else {
        Err(input.error("expected a string, `true`/`false`, a name or a `[...]` list"))
    }
}

impl Parse for Value {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let first = primary(input)?;
        if !input.peek(Token![|]) {
            return Ok(first);
        }
        let mut items = vec![first];
        while input.parse::<Option<Token![|]>>()?.is_some() {
            items.push(primary(input)?);
        }
        Ok(Value::List(items))
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
        self.key.name()
    }

    pub fn span(&self) -> Span {
        self.key.span()
    }
}

impl Parse for Item {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key: Key = input.parse()?;
        let body = if input.parse::<Option<Token![=]>>()?.is_some() {
            Body::Value(input.parse()?)
        } else if input.peek(syn::token::Paren) {
            let content;
            parenthesized!(content in input);
            Body::Args(Items::parse(&content)?.0)
        } else {
            Body::Flag
        };
        Ok(Item { key, body })
    }
}

/// A comma-separated list of items: the inside of `#[fsm(...)]`.
pub struct Items(pub Vec<Item>);

impl Parse for Items {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let items = Punctuated::<Item, Token![,]>::parse_terminated(input)?;
        Ok(Items(items.into_iter().collect()))
    }
}

/// Every item of every `#[fsm(...)]` among `attrs`.
///
/// An attribute that does not parse is reported and skipped, so the others are
/// still checked.
pub fn fsm_items(attrs: &[syn::Attribute], errors: &mut crate::ast::Errors) -> Vec<Item> {
    let mut out = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("fsm")) {
        match attr.parse_args::<Items>() {
            Ok(items) => out.extend(items.0),
            Err(e) => errors.push(e),
        }
    }
    out
}

/// The text of `///` doc comments, joined, trimmed.
pub fn doc(attrs: &[syn::Attribute]) -> Option<String> {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s.value().trim().to_owned()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let text = lines.join(" ").trim().to_owned();
    (!text.is_empty()).then_some(text)
}
