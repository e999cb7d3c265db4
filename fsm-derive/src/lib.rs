//! `#[derive(StateMachine)]`: a state enum whose transition table is checked at
//! compile time. Use it through the `fsm` crate, which re-exports it and documents
//! the attributes and the generated API.
//!
//! The macro is a thin front end: `attr` reads `#[fsm(...)]`, `ast` builds the
//! machine's definition (from the attributes or a spec file) and runs
//! `fsm_core::analysis` on it, `expand` generates the code.

mod ast;
mod attr;
mod expand;

use proc_macro::TokenStream;

/// Derives the transition table and its API for an enum of states.
///
/// See the `fsm` crate's documentation for the attributes and what is generated.
#[proc_macro_derive(StateMachine, attributes(fsm))]
pub fn derive_state_machine(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    ast::parse(&input)
        .and_then(|input| expand::expand(&input))
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
