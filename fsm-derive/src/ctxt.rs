//! Every error found, reported together: the user fixes every mistake in one build.

use proc_macro::{Delimiter, Group, Ident, Literal, Punct, Spacing, TokenTree};
use proc_macro::{Span, TokenStream};

/// One error at one token.
#[derive(Debug, Clone)]
pub struct Error {
    pub span: Span,
    pub message: String,
}

impl Error {
    pub fn new(span: Span, message: impl std::fmt::Display) -> Self {
        Error {
            span,
            message: message.to_string(),
        }
    }
}

/// Errors collected while reading and checking the input.
#[derive(Default)]
pub struct Errors(Vec<Error>);

impl Errors {
    pub fn push(&mut self, error: Error) {
        self.0.push(error);
    }

    pub fn at(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push(Error::new(span, message));
    }

    /// Adds every error of `more` after these.
    pub fn extend(&mut self, more: Errors) {
        self.0.extend(more.0);
    }

    /// How many errors so far, to tell whether a part of the input had one.
    pub fn count(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn finish(self) -> Result<(), Errors> {
        if self.0.is_empty() { Ok(()) } else { Err(self) }
    }

    /// One `::core::compile_error! { "..." }` per error, every token of it at the
    /// error's token, so that the compiler points there.
    pub fn into_compile_errors(self) -> TokenStream {
        let mut out = TokenStream::new();
        for e in self.0 {
            let colons = || {
                [
                    TokenTree::Punct(Punct::new(':', Spacing::Joint)),
                    TokenTree::Punct(Punct::new(':', Spacing::Alone)),
                ]
            };
            let mut tokens: Vec<TokenTree> = Vec::with_capacity(8);
            tokens.extend(colons());
            tokens.push(TokenTree::Ident(Ident::new("core", e.span)));
            tokens.extend(colons());
            tokens.push(TokenTree::Ident(Ident::new("compile_error", e.span)));
            tokens.push(TokenTree::Punct(Punct::new('!', Spacing::Alone)));
            let mut message = Literal::string(&e.message);
            message.set_span(e.span);
            tokens.push(TokenTree::Group(Group::new(
                Delimiter::Brace,
                TokenTree::Literal(message).into(),
            )));
            for mut token in tokens {
                token.set_span(e.span);
                out.extend([token]);
            }
        }
        out
    }
}

impl From<Error> for Errors {
    fn from(error: Error) -> Self {
        Errors(vec![error])
    }
}
