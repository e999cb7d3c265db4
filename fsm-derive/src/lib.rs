//! `#[derive(StateMachine)]` for `fsm`.
//!
//! Not implemented yet: this crate reserves its place in the workspace. The derive
//! will be a thin front end over `fsm_core::spec` and `fsm_core::analysis`, the same
//! model and checks that `fsm check` uses (see `ARCHITECTURE.md`).
