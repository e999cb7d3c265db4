//! `fsm-analysis`: every check a machine must pass.
//!
//! [`check`] takes a [`MachineDef`] from any front end (a TOML spec file, the derive
//! macro, code), resolves its names ([`resolve`](self) stage), runs every rule, one
//! function per `Lint` (`lints.rs`), and, when nothing is wrong, builds the
//! checked [`Machine`]. Every finding is reported, not only the first, at the
//! `Site` at fault; each front end maps sites to its own places
//! and says the `Help` in its own syntax.
//!
//! These checks are the single statement of what a valid machine is: `fsm check`
//! runs them on spec files and the derive runs them on its attributes.
//!
//! ```
//! use fsm_model::{ActionDef, Lint, MachineDef, StateDef, StateKind, TargetDef};
//!
//! let mut def = MachineDef {
//!     name: "door".into(),
//!     initial: Some("CLOSED".into()),
//!     ..Default::default()
//! };
//! def.states.push(StateDef::new("CLOSED", StateKind::Static));
//! def.states.push(StateDef::new("OPEN", StateKind::Static));
//! def.actions.push(ActionDef {
//!     name: "open".into(),
//!     from: vec!["CLOSED".into()],
//!     to: TargetDef::State("OPEN".into()),
//!     ..Default::default()
//! });
//! let analysis = fsm_analysis::check(&def);
//! // Nothing leaves OPEN, and it is not terminal.
//! assert_eq!(analysis.diagnostics[0].lint, Lint::DeadEnd);
//! assert!(analysis.machine.is_none());
//! ```

mod build;
mod lints;
mod resolve;

use fsm_model::{Diagnostic, Help, Lint, Machine, MachineDef, Severity, Site};

/// The result of checking a definition.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// The machine, when the analysis found no error.
    pub machine: Option<Machine>,
    /// Every finding the definition does not allow, name resolution first, then
    /// rule by rule.
    pub diagnostics: Vec<Diagnostic>,
}

/// Checks a definition and, if it has no error, builds the machine.
///
/// Every finding is reported, not only the first; follow-on findings are left out
/// (a duplicated state is not also reported unreachable). Warnings named in the
/// definition's `allow` list are dropped.
pub fn check(def: &MachineDef) -> Analysis {
    let mut out = Vec::new();
    let cx = resolve::resolve(def, &mut out);
    for lint in lints::LINTS {
        lint(&cx, &mut out);
    }
    allow(def, &mut out);
    let machine = match cx.initial {
        Some(initial) if !out.iter().any(Diagnostic::is_error) => {
            Some(build::machine(&cx, initial))
        }
        _ => None,
    };
    Analysis {
        machine,
        diagnostics: out,
    }
}

/// The findings of name resolution alone: states, roles and guards used and not
/// declared, and states or actions declared twice; none of the rules that read
/// the resolved table.
///
/// For a definition a front end could read only in part (values of the wrong
/// shape left out, see `fsm_toml::read`): a rule of the table would report what
/// is missing as a mistake of its own (a state unreachable for want of the action
/// that was left out), but a name used and not declared is one whatever else is
/// wrong. Each of these findings is an error, so `allow` has none to drop.
///
/// ```
/// use fsm_model::{ActionDef, Lint, MachineDef, StateDef, StateKind, TargetDef};
///
/// let mut def = MachineDef::default();
/// def.states.push(StateDef::new("CLOSED", StateKind::Static));
/// def.actions.push(ActionDef {
///     name: "open".into(),
///     from: vec!["CLOSED".into()],
///     to: TargetDef::State("OPNE".into()),
///     ..Default::default()
/// });
/// let findings = fsm_analysis::check_names(&def);
/// assert_eq!(findings.len(), 1);
/// assert_eq!(findings[0].lint, Lint::UnknownState);
/// ```
pub fn check_names(def: &MachineDef) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    resolve::resolve(def, &mut out);
    out
}

/// Drops the warnings the definition allows, and reports `allow` entries that name
/// no warning.
fn allow(def: &MachineDef, out: &mut Vec<Diagnostic>) {
    let mut allowed = Vec::new();
    for (i, code) in def.allow.iter().enumerate() {
        match Lint::from_code(code) {
            Some(lint) if lint.severity() == Severity::Warning => allowed.push(lint),
            Some(lint) => out.push(
                Diagnostic::new(
                    Lint::UnknownLint,
                    Site::Allow(i),
                    format!("`{code}` is an error and cannot be allowed"),
                )
                .with_label(format!("{lint} findings make the machine unusable")),
            ),
            None => {
                let warnings = Lint::ALL
                    .iter()
                    .filter(|l| l.severity() == Severity::Warning)
                    .map(|l| l.code());
                let mut d = Diagnostic::new(
                    Lint::UnknownLint,
                    Site::Allow(i),
                    format!("unknown lint `{code}`"),
                )
                .with_label("not the name of a warning");
                if let Some(near) = fsm_model::suggest(code, warnings) {
                    d = d.with_help(Help::DidYouMean(near.to_owned()));
                }
                out.push(d);
            }
        }
    }
    out.retain(|d| !allowed.contains(&d.lint));
}

/// This crate's README (its page on crates.io): its examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
