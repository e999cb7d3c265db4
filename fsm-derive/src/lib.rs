//! `#[derive(StateMachine)]`: a state enum whose transition table is checked at
//! compile time. Use it through the `fsm` crate, which re-exports it and documents
//! the attributes and the generated API.
//!
//! The macro works on the compiler's own `proc_macro` types and writes its output
//! as Rust text, lexed once: no `proc-macro2`, `quote` or `syn` to compile first
//! (they were most of a cold build's critical path; see BENCHMARKS.md).
//!
//! The macro is a thin front end over the table layers (`fsm-model`,
//! `fsm-analysis`, and `fsm-toml` with the `toml` feature), one stage per module:
//! `input` splits the enum into its parts, `attr` reads the syntax of `#[fsm(...)]`, `ast` lowers the attributes into the
//! machine's definition (`spec_file` reads a spec file instead), `check` runs the
//! analysis and turns its findings into errors at the token at fault, `expand`
//! generates the code. `ctxt` collects every error, so all of them come out in one
//! build.

mod ast;
mod attr;
mod case;
mod check;
mod ctxt;
mod expand;
mod input;
#[cfg(feature = "toml")]
mod spec_file;

use proc_macro::TokenStream;

/// Derives the transition table and its API for an enum of states.
///
/// See the `fsm` crate's documentation for the attributes and what is generated.
#[proc_macro_derive(StateMachine, attributes(fsm))]
pub fn derive_state_machine(input: TokenStream) -> TokenStream {
    match ast::parse(input) {
        Ok(input) => expand::expand(&input).unwrap_or_else(ctxt::Errors::into_compile_errors),
        Err(ast::Failed { errors, stand_in }) => {
            let mut out = errors.into_compile_errors();
            // The API over a stand-in table, so that the errors above are the
            // build's only ones.
            if let Some(api) = stand_in.and_then(|input| expand::expand(&input).ok()) {
                out.extend(api);
            }
            out
        }
    }
}
