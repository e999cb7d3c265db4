//! Every error found, reported together: the user fixes every mistake in one build.

use proc_macro2::{Span, TokenStream};
use quote::quote_spanned;

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

    /// One `compile_error!` per error, each at its token.
    pub fn into_compile_errors(self) -> TokenStream {
        self.0
            .into_iter()
            .map(|e| {
                let message = e.message;
                quote_spanned!(e.span=> ::core::compile_error! { #message })
            })
            .collect()
    }
}

impl From<Error> for Errors {
    fn from(error: Error) -> Self {
        Errors(vec![error])
    }
}
