//! `fsm-model`: the model of a state-transition table, the leaf every other layer
//! reads.
//!
//! - [`MachineDef`] and its parts: a machine as its author wrote it, names not yet
//!   resolved, with [`Site`]s naming each place in it.
//! - [`Machine`]: the checked machine, states and actions resolved to ids.
//! - [`rules`]: what a machine allows, stated once ([`Rule`], [`Move`]).
//! - [`Diagnostic`], [`Lint`], [`Help`]: findings as data, rendered by each front end
//!   in its own syntax.
//!
//! Nothing here parses, checks or draws: the front ends (`fsm-toml`, the derive) and
//! the analysis (`fsm-analysis`) sit above this crate and the `fsm-core` crate drives
//! them. Build a machine through `fsm_core::spec::load` or `#[derive(StateMachine)]`.
//!
//! `no_std`: the model needs `alloc` only, so that a derived machine builds for a
//! target without the standard library.

#![no_std]

extern crate alloc;

mod action_ref;
mod def;
mod diagnostic;
mod encode;
mod escape;
mod machine;
pub mod rules;
mod suggest;

pub use action_ref::{ActionRef, UnknownAction, UnknownState};
pub use def::{
    ActionDef, MachineDef, NamedDef, Site, StateDef, StateKind, TargetDef, format_duration,
    parse_duration,
};
pub use diagnostic::{Diagnostic, Help, Lint, Severity};
pub use escape::{is_plain_name, label_name, xml_escape};
pub use machine::{
    Action, ActionId, Guard, GuardId, IntoActionId, IntoStateId, Machine, Role, State, StateId,
    Target, Text,
};
pub use rules::{Move, Rule, RuleError, TransitionError};
pub use suggest::closest as suggest;

#[doc(hidden)]
pub use machine::__private;
